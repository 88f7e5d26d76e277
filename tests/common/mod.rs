//! Fixtures shared by the integration tests: a private MariaDB, the
//! gateway in-process on ephemeral ports, a psdb client over HTTP/3 or
//! HTTP/2 speaking either codec, and the sidecar in front of them
//! in-process ([`sidecar::Chain`]) or as `myquic sidecar`
//! ([`sidecar_child`]).

#![allow(dead_code)]

pub mod bank;
pub mod gateway_child;
pub mod hold_relay;
pub mod mariadb;
pub mod netns;
pub mod process;
pub mod raw_mysql;
pub mod raw_packets;
pub mod results;
pub mod sidecar;
pub mod sidecar_child;
pub mod vitess;
pub mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use base64::Engine;
use bytes::{Bytes, BytesMut};
use http::header;

use myquic::api::connect::{end_stream_error, envelope, take_envelope};
use myquic::api::pb;
use myquic::api::{ApiError, Code, Codec, Encoding, Method};
use myquic::config::Secret;
use myquic::gateway::{Credential, Gateway, GatewayConfig};
use myquic::transport::client::{Connection, ResponseStream};
use myquic::transport::quic::Congestion;
use myquic::transport::tls;

pub use mariadb::MariaDb;

/// The gateway's credential the sidecars use.
pub const USER: &str = "app";
pub const PASSWORD: &str = "api-secret";

/// The sidecars' local account.
pub const LOCAL_USER: &str = "app";
pub const LOCAL_PASSWORD: &str = "local-secret";

/// A configured secret with its value inline.
pub fn secret(v: &str) -> Secret {
    Secret {
        value: Some(v.to_string()),
        ..Default::default()
    }
}

pub struct Stack {
    pub db: MariaDb,
    pub gateway: Gateway,
    pub cert: PathBuf,
    _dir: tempfile::TempDir,
}

/// The gateway's configuration for tests; `tweak` adjusts it.
pub fn config(db: &MariaDb, cert: PathBuf) -> GatewayConfig {
    let mut config = GatewayConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    };
    config.tls.self_signed_cert_out = Some(cert);
    config.backend.socket = Some(db.socket.clone());
    config.backend.warm_connections = 2;
    config.credentials = vec![
        Credential {
            username: USER.into(),
            password: secret(PASSWORD),
            backend_user: Some("app".into()),
            backend_password: Some(secret("app-backend-pw")),
            database: Some("app".into()),
        },
        Credential {
            username: "other".into(),
            password: secret("other-secret"),
            backend_user: None,
            backend_password: Some(secret("other-backend-pw")),
            database: Some("app".into()),
        },
    ];
    config
}

impl Stack {
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut GatewayConfig)) -> Self {
        Self::start_on(MariaDb::start().await, tweak).await
    }

    /// The gateway in front of an already started MariaDB.
    pub async fn start_on(db: MariaDb, tweak: impl FnOnce(&mut GatewayConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("gateway.pem");
        let mut config = config(&db, cert.clone());
        tweak(&mut config);
        let gateway = Gateway::start(config).await.expect("gateway starts");
        Self {
            db,
            gateway,
            cert,
            _dir: dir,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.gateway.addr
    }

    pub async fn connect(&self, version: Version) -> Connection {
        tls::install_crypto_provider();
        let roots = tls::roots_from_pem(&self.cert).unwrap();
        let tls = tls::client_config(roots, &[]).unwrap();
        match version {
            Version::H3 => Connection::connect_h3(
                self.addr(),
                "localhost",
                tls,
                Congestion::Bbr,
                Duration::from_secs(5),
            )
            .await
            .expect("HTTP/3 connection"),
            Version::H2 => Connection::connect_h2(self.addr(), "localhost", tls)
                .await
                .expect("HTTP/2 connection"),
        }
    }

    pub async fn client(&self, version: Version, codec: Codec) -> Client {
        Client {
            conn: self.connect(version).await,
            codec,
            auth: Some(basic(USER, PASSWORD)),
            encoding: Encoding::Identity,
            accept: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Version {
    H3,
    H2,
}

pub fn basic(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// A psdb API client for tests.
#[derive(Clone)]
pub struct Client {
    pub conn: Connection,
    pub codec: Codec,
    pub auth: Option<String>,
    /// Request body encoding.
    pub encoding: Encoding,
    /// `Accept-Encoding` to send.
    pub accept: Option<&'static str>,
}

/// A raw unary answer.
pub struct Answer {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Client {
    pub async fn raw(&self, method: Method, body: Bytes) -> Answer {
        let codec_type = self.codec.content_type(myquic::api::Framing::Unary);
        let mut req = http::Request::builder()
            .method("POST")
            .uri(format!("https://localhost{}", method.path()))
            .header(header::CONTENT_TYPE, codec_type);
        if let Some(auth) = &self.auth {
            req = req.header(header::AUTHORIZATION, auth);
        }
        if self.encoding != Encoding::Identity {
            req = req.header(header::CONTENT_ENCODING, self.encoding.as_str());
        }
        if let Some(accept) = self.accept {
            req = req.header(header::ACCEPT_ENCODING, accept);
        }
        let body = self.encoding.compress(&body);
        let response = self
            .conn
            .send(req.body(body).unwrap())
            .await
            .expect("request");
        let (head, body) = response.collect(1 << 30).await.expect("body");
        let encoding = head
            .headers
            .get(header::CONTENT_ENCODING)
            .map(|v| v.to_str().unwrap());
        let body = Encoding::from_header(encoding)
            .unwrap()
            .decompress(body, 1 << 30)
            .unwrap();
        Answer {
            status: head.status.as_u16(),
            headers: head.headers,
            body,
        }
    }

    /// A unary call; `Err` is a Connect error.
    pub async fn call<Req, Resp>(&self, method: Method, request: &Req) -> Result<Resp, ApiError>
    where
        Req: prost::Message + serde::Serialize,
        Resp: prost::Message + serde::de::DeserializeOwned + Default,
    {
        let answer = self.raw(method, self.codec.encode(request)).await;
        if answer.status != 200 {
            return Err(ApiError::from_json(&answer.body).unwrap_or_else(|| {
                ApiError::new(Code::from_http_status(answer.status), "no error body")
            }));
        }
        Ok(self.codec.decode(&answer.body).expect("decodable response"))
    }

    pub async fn execute(&self, session: Option<&pb::Session>, query: &str) -> pb::ExecuteResponse {
        self.try_execute(session, query)
            .await
            .expect("Execute succeeds at the API level")
    }

    pub async fn try_execute(
        &self,
        session: Option<&pb::Session>,
        query: &str,
    ) -> Result<pb::ExecuteResponse, ApiError> {
        let req = pb::ExecuteRequest {
            session: session.cloned(),
            query: bytes::Bytes::copy_from_slice(query.as_bytes()),
            ..Default::default()
        };
        self.call(Method::Execute, &req).await
    }

    /// `StreamExecute`: every response message in order, and the
    /// end-of-stream error if any. `on_message` sees each envelope size.
    pub async fn stream(
        &self,
        request: &pb::ExecuteRequest,
        on_message: impl FnMut(usize, &pb::ExecuteResponse) -> bool,
    ) -> Result<Vec<pb::ExecuteResponse>, ApiError> {
        let response = self.open_stream(request).await;
        self.read_stream(response, on_message).await
    }

    /// `StreamExecute` sent, and its response head received (200).
    pub async fn open_stream(&self, request: &pb::ExecuteRequest) -> ResponseStream {
        let framing = myquic::api::Framing::Streaming;
        let mut req = http::Request::builder()
            .method("POST")
            .uri(format!("https://localhost{}", Method::StreamExecute.path()))
            .header(header::CONTENT_TYPE, self.codec.content_type(framing));
        if let Some(auth) = &self.auth {
            req = req.header(header::AUTHORIZATION, auth);
        }
        if let Some(accept) = self.accept {
            req = req.header("connect-accept-encoding", accept);
        }
        let body = envelope(0, &self.codec.encode(request));
        let response = self
            .conn
            .send(req.body(body).unwrap())
            .await
            .expect("request");
        assert_eq!(response.head.status, 200, "streaming calls answer 200");
        response
    }

    /// The messages of a stream [`Client::open_stream`] opened, as
    /// [`Client::stream`] returns them.
    pub async fn read_stream(
        &self,
        mut response: ResponseStream,
        mut on_message: impl FnMut(usize, &pb::ExecuteResponse) -> bool,
    ) -> Result<Vec<pb::ExecuteResponse>, ApiError> {
        let encoding = response
            .head
            .headers
            .get("connect-content-encoding")
            .map(|v| v.to_str().unwrap());
        let encoding = Encoding::from_header(encoding).unwrap();
        let mut buf = BytesMut::new();
        let mut kept = Vec::new();
        while let Some(chunk) = response.chunk().await.expect("stream chunk") {
            buf.extend_from_slice(&chunk);
            while let Some(env) = take_envelope(&mut buf, 64 << 20).unwrap() {
                if env.is_end_stream() {
                    return match end_stream_error(&env.payload) {
                        Some(e) => Err(e),
                        None => Ok(kept),
                    };
                }
                let size = env.payload.len();
                let payload = if env.is_compressed() {
                    encoding.decompress(env.payload, 64 << 20).unwrap()
                } else {
                    env.payload
                };
                let message: pb::ExecuteResponse = self.codec.decode(&payload).unwrap();
                if on_message(size, &message) {
                    kept.push(message);
                }
            }
        }
        panic!("stream ended without an end-of-stream envelope");
    }
}

/// The rows of a streamed result as text (NULL as `None`).
pub fn streamed_rows(result: &myquic::api::row_view::ResultView) -> Vec<Vec<Option<Vec<u8>>>> {
    result
        .rows
        .iter()
        .map(|r| {
            r.cells()
                .expect("consistent row")
                .map(|c| c.map(<[u8]>::to_vec))
                .collect()
        })
        .collect()
}

/// The rows of a result as text (NULL as `None`).
pub fn rows(result: &pb::QueryResult) -> Vec<Vec<Option<Vec<u8>>>> {
    result
        .rows
        .iter()
        .map(|r| {
            myquic::translate::rows::unpack_row(r)
                .expect("consistent row")
                .into_iter()
                .map(|c| c.map(|b| b.to_vec()))
                .collect()
        })
        .collect()
}

/// The single value of a one-row, one-column result, as UTF-8.
pub fn scalar(resp: &pb::ExecuteResponse) -> Option<String> {
    assert!(resp.error.is_none(), "unexpected error: {:?}", resp.error);
    let result = resp.result.as_ref().expect("a result");
    rows(result)[0][0]
        .clone()
        .map(|b| String::from_utf8(b).unwrap())
}

pub fn error_message(resp: &pb::ExecuteResponse) -> String {
    let message = &resp.error.as_ref().expect("an error").message;
    String::from_utf8(message.to_vec()).expect("an error message in UTF-8")
}

/// The Vitess session a response carries.
pub fn vitess(resp: &pb::ExecuteResponse) -> &pb::VitessSession {
    resp.session
        .as_ref()
        .unwrap()
        .vitess_session
        .as_ref()
        .unwrap()
}

pub fn in_transaction(resp: &pb::ExecuteResponse) -> bool {
    vitess(resp).in_transaction
}
