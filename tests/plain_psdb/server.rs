//! A minimal psdb server that answers the way PlanetScale documents it,
//! with none of our gateway's extensions: HTTP/2 over TLS only, no
//! `myquic-*` headers, no compression offered, and `StreamExecute` sends
//! the fields in the first message only, rows in later messages, a last
//! message with only the session — and no end-of-result marker. SQL errors
//! are `ExecuteResponse.error` with vttablet's `(errno N) (sqlstate S)`
//! and what follows it on PlanetScale. Answers are real: each session
//! holds a MariaDB connection (mysql_async). Sessions are signed with an
//! id; one with an empty signature asks for a new session (its
//! `options.client_found_rows` is honoured; its `target_string` is not
//! echoed, as a server that does not support targets would answer).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, OptsBuilder};
use prost::Message;

use myquic::api::connect::{end_stream, envelope, take_envelope};
use myquic::api::pb;
use myquic::translate::bind::substitute;
use myquic::translate::rows::pack_row;
use myquic::translate::sql_text::Dialect;
use myquic::translate::types::{blob_subtype_name, vitess_type};
use myquic::transport::tls::{Identity, install_crypto_provider};

pub const USER: &str = "psdb-user";
pub const PASSWORD: &str = "psdb-secret";

/// Rows per streamed message: small, so results span several messages.
const ROWS_PER_MESSAGE: usize = 2;

pub struct PlainPsdb {
    pub addr: SocketAddr,
    /// The server's certificate (PEM), for the sidecar to trust.
    pub cert: PathBuf,
    /// The methods called, in order.
    pub calls: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

struct State {
    socket: PathBuf,
    sessions: Mutex<HashMap<u64, Arc<tokio::sync::Mutex<Conn>>>>,
    next_id: AtomicU64,
    calls: Arc<Mutex<Vec<String>>>,
}

impl PlainPsdb {
    /// Serves on a free loopback port, answering from MariaDB at `socket`.
    pub async fn start(socket: &Path) -> Self {
        install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("psdb.pem");
        let identity = Identity::self_signed(&["localhost".into()], &cert).unwrap();
        let tls = tokio_rustls::TlsAcceptor::from(identity.server_config(&[b"h2"]).unwrap());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let calls = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(State {
            socket: socket.to_path_buf(),
            sessions: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            calls: calls.clone(),
        });
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (tls, state) = (tls.clone(), state.clone());
                tokio::spawn(async move {
                    let Ok(stream) = tls.accept(tcp).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |req| {
                        let state = state.clone();
                        async move { Ok::<_, std::convert::Infallible>(state.handle(req).await) }
                    });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            cert,
            calls,
            _dir: dir,
        }
    }
}

fn reply(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body))
        .unwrap()
}

fn connect_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({"code": code, "message": message}).to_string();
    reply(status, "application/json", body.into())
}

impl State {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let method = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        self.calls.lock().unwrap().push(method.clone());
        let headers = req.headers().clone();
        use base64::Engine;
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
        );
        if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&expected) {
            return connect_error(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "bad credentials",
            );
        }
        for name in ["content-encoding", "connect-content-encoding"] {
            if let Some(v) = headers.get(name)
                && v != "identity"
            {
                return connect_error(
                    StatusCode::NOT_IMPLEMENTED,
                    "unimplemented",
                    "unsupported compression",
                );
            }
        }
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = match req.into_body().collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", "body"),
        };
        match (method.as_str(), content_type.as_str()) {
            ("StreamExecute", "application/connect+proto") => {
                let mut buf = BytesMut::from(&body[..]);
                let Ok(Some(message)) = take_envelope(&mut buf, usize::MAX) else {
                    return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", "envelope");
                };
                let Ok(request) = pb::ExecuteRequest::decode(&message.payload[..]) else {
                    return connect_error(StatusCode::BAD_REQUEST, "invalid_argument", "decode");
                };
                let messages = self.stream_execute(request).await;
                let mut out = BytesMut::new();
                for m in messages {
                    out.extend_from_slice(&envelope(0, &m.encode_to_vec()));
                }
                out.extend_from_slice(&end_stream(None));
                reply(StatusCode::OK, "application/connect+proto", out.freeze())
            }
            (_, "application/proto") => {
                let answer = match method.as_str() {
                    "CreateSession" => {
                        let (session, _) = self.session(None).await;
                        Some(
                            pb::CreateSessionResponse {
                                session: Some(session),
                                ..Default::default()
                            }
                            .encode_to_vec(),
                        )
                    }
                    "Execute" => match pb::ExecuteRequest::decode(&body[..]) {
                        Ok(r) => Some(self.execute(r).await.encode_to_vec()),
                        Err(_) => None,
                    },
                    "Prepare" => match pb::PrepareRequest::decode(&body[..]) {
                        Ok(r) => Some(self.prepare(r).await.encode_to_vec()),
                        Err(_) => None,
                    },
                    "CloseSession" => match pb::CloseSessionRequest::decode(&body[..]) {
                        Ok(r) => Some(self.close(r).encode_to_vec()),
                        Err(_) => None,
                    },
                    _ => {
                        return connect_error(StatusCode::NOT_FOUND, "unimplemented", &method);
                    }
                };
                match answer {
                    Some(body) => reply(StatusCode::OK, "application/proto", body.into()),
                    None => connect_error(StatusCode::BAD_REQUEST, "invalid_argument", "decode"),
                }
            }
            _ => connect_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unimplemented",
                &content_type,
            ),
        }
    }

    /// The session's connection (a new one for an unsigned or absent
    /// session), and the session to answer with.
    async fn session(
        &self,
        given: Option<&pb::Session>,
    ) -> (pb::Session, Arc<tokio::sync::Mutex<Conn>>) {
        let known = given
            .and_then(|s| s.signature.get(..8))
            .map(|id| u64::from_le_bytes(id.try_into().unwrap()))
            .and_then(|id| {
                let sessions = self.sessions.lock().unwrap();
                sessions.get(&id).map(|c| (id, c.clone()))
            });
        if let Some((id, conn)) = known {
            let mut session = given.cloned().unwrap();
            session.signature = signature(id);
            return (session, conn);
        }
        let found_rows = given
            .and_then(|s| s.vitess_session.as_ref())
            .and_then(|v| v.options.as_ref())
            .is_none_or(|o| o.client_found_rows);
        let opts = OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"))
            .client_found_rows(found_rows);
        let conn = Arc::new(tokio::sync::Mutex::new(Conn::new(opts).await.unwrap()));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.sessions.lock().unwrap().insert(id, conn.clone());
        let session = pb::Session {
            signature: signature(id),
            vitess_session: Some(pb::VitessSession {
                autocommit: true,
                options: Some(pb::vitess::query::v22::ExecuteOptions {
                    included_fields: 2,
                    client_found_rows: found_rows,
                    ..Default::default()
                }),
                session_uuid: format!("session-{id}"),
                ..Default::default()
            }),
        };
        (session, conn)
    }

    /// Runs a request: the session to answer with, and every result.
    async fn run_request(
        &self,
        request: &pb::ExecuteRequest,
    ) -> (pb::Session, Result<Vec<pb::QueryResult>, pb::RpcError>) {
        let (mut session, conn) = self.session(request.session.as_ref()).await;
        let mut conn = conn.lock().await;
        let sql = substitute(
            &request.query[..],
            &request.bind_variables,
            &Dialect::default(),
            "utf8mb4",
        );
        let outcome = match sql {
            Ok(sql) => run(&mut conn, &sql).await.map_err(|e| {
                rpc_error(
                    &e.message,
                    e.code,
                    &e.state,
                    &String::from_utf8_lossy(&request.query),
                )
            }),
            Err(e) => Err(rpc_error(
                &e.to_string(),
                1210,
                "HY000",
                &String::from_utf8_lossy(&request.query),
            )),
        };
        refresh(&mut conn, &mut session).await;
        (session, outcome)
    }

    async fn execute(&self, request: pb::ExecuteRequest) -> pb::ExecuteResponse {
        let (session, outcome) = self.run_request(&request).await;
        match outcome {
            Ok(results) => pb::ExecuteResponse {
                session: Some(session),
                result: results.into_iter().next(),
                ..Default::default()
            },
            Err(error) => pb::ExecuteResponse {
                session: Some(session),
                error: Some(error),
                ..Default::default()
            },
        }
    }

    /// PlanetScale's stream: per result set, a message with the fields
    /// only, then messages of rows; a result without columns is one
    /// message with its counts. Nothing marks where a result ends. Then a
    /// message with only the session.
    async fn stream_execute(&self, request: pb::ExecuteRequest) -> Vec<pb::ExecuteResponse> {
        let (session, outcome) = self.run_request(&request).await;
        let message = |result: pb::QueryResult| pb::ExecuteResponse {
            result: Some(result),
            ..Default::default()
        };
        let mut messages = Vec::new();
        match outcome {
            Err(error) => messages.push(pb::ExecuteResponse {
                error: Some(error),
                ..Default::default()
            }),
            Ok(results) => {
                for result in results {
                    if result.fields.is_empty() {
                        messages.push(message(result));
                        continue;
                    }
                    messages.push(message(pb::QueryResult {
                        fields: result.fields,
                        ..Default::default()
                    }));
                    for rows in result.rows.chunks(ROWS_PER_MESSAGE) {
                        messages.push(message(pb::QueryResult {
                            rows: rows.to_vec(),
                            ..Default::default()
                        }));
                    }
                }
            }
        }
        messages.push(pb::ExecuteResponse {
            session: Some(session),
            ..Default::default()
        });
        messages
    }

    async fn prepare(&self, request: pb::PrepareRequest) -> pb::PrepareResponse {
        let (session, conn) = self.session(request.session.as_ref()).await;
        let mut conn = conn.lock().await;
        match conn.prep(&request.query[..]).await {
            Ok(stmt) => {
                let fields = stmt.columns().iter().map(field).collect();
                let params_count = u32::from(stmt.num_params());
                let _ = conn.close(stmt).await;
                pb::PrepareResponse {
                    session: Some(session),
                    fields,
                    params_count,
                    ..Default::default()
                }
            }
            Err(mysql_async::Error::Server(e)) => pb::PrepareResponse {
                session: Some(session),
                error: Some(rpc_error(
                    &e.message,
                    e.code,
                    &e.state,
                    &String::from_utf8_lossy(&request.query),
                )),
                ..Default::default()
            },
            Err(e) => panic!("prepare: {e}"),
        }
    }

    fn close(&self, request: pb::CloseSessionRequest) -> pb::CloseSessionResponse {
        if let Some(id) = request
            .session
            .as_ref()
            .and_then(|s| s.signature.get(..8))
            .map(|id| u64::from_le_bytes(id.try_into().unwrap()))
        {
            self.sessions.lock().unwrap().remove(&id);
        }
        pb::CloseSessionResponse {
            session: request.session,
            ..Default::default()
        }
    }
}

fn signature(id: u64) -> Bytes {
    let mut sig = id.to_le_bytes().to_vec();
    sig.resize(32, 0);
    sig.into()
}

/// vttablet's error text, with what PlanetScale appends after it.
fn rpc_error(message: &str, code: u16, state: &str, sql: &str) -> pb::RpcError {
    pb::RpcError {
        message: format!(
            "{message} (errno {code}) (sqlstate {state}) (CallerID: {USER}): Sql: {sql:?}, BindVars: {{}}"
        )
        .into(),
        code: 2,
    }
}

struct SqlError {
    code: u16,
    state: String,
    message: String,
}

/// Every result of `sql` (text protocol), each as one `QueryResult`.
async fn run(conn: &mut Conn, sql: &[u8]) -> Result<Vec<pb::QueryResult>, SqlError> {
    let as_sql_error = |e: mysql_async::Error| match e {
        mysql_async::Error::Server(s) => SqlError {
            code: s.code,
            state: s.state,
            message: s.message,
        },
        other => panic!("backend: {other}"),
    };
    let mut results = Vec::new();
    let mut result = conn.query_iter(sql).await.map_err(as_sql_error)?;
    while let Some(columns) = result.columns() {
        let mut out = pb::QueryResult {
            fields: columns.iter().map(field).collect(),
            ..Default::default()
        };
        while let Some(row) = result.next().await.map_err(as_sql_error)? {
            let cells = (0..columns.len()).map(|i| match row.as_ref(i) {
                Some(mysql_async::Value::Bytes(b)) => Some(&b[..]),
                _ => None,
            });
            out.rows.push(pack_row(cells));
        }
        out.rows_affected = result.affected_rows();
        out.insert_id = result.last_insert_id().unwrap_or(0);
        out.info = result.info().into_owned();
        results.push(out);
    }
    result.next().await.map_err(as_sql_error)?;
    Ok(results)
}

/// The session's transaction state and warnings, as vtgate keeps them.
async fn refresh(conn: &mut Conn, session: &mut pb::Session) {
    use mysql_async::consts::StatusFlags;
    let warnings = conn.get_warnings();
    // From the statement's own OK packet: a query of ours would change
    // what the client reads next (ROW_COUNT()).
    let status = conn
        .last_ok_packet()
        .map(|ok| ok.status_flags())
        .unwrap_or(StatusFlags::SERVER_STATUS_AUTOCOMMIT);
    let in_tx = status.contains(StatusFlags::SERVER_STATUS_IN_TRANS);
    let autocommit = status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT);
    let mut listed = Vec::new();
    if warnings > 0 {
        let rows: Vec<(Vec<u8>, u32, Vec<u8>)> = conn.query("SHOW WARNINGS").await.unwrap();
        listed = rows
            .into_iter()
            .map(|(_, code, message)| pb::QueryWarning {
                code,
                // A psdb server's message is a string: text, as PlanetScale's.
                message: String::from_utf8_lossy(&message).into_owned().into(),
            })
            .collect();
    }
    let vitess = session.vitess_session.get_or_insert_with(Default::default);
    vitess.in_transaction = in_tx;
    vitess.autocommit = autocommit;
    vitess.warnings = listed;
}

fn field(column: &Column) -> pb::Field {
    let flags = column.flags().bits();
    pb::Field {
        name: Bytes::copy_from_slice(column.name_ref()),
        r#type: vitess_type(column.column_type() as u8, flags) as i32,
        table: Bytes::copy_from_slice(column.table_ref()),
        org_table: Bytes::copy_from_slice(column.org_table_ref()),
        database: Bytes::copy_from_slice(column.schema_ref()),
        org_name: Bytes::copy_from_slice(column.org_name_ref()),
        column_length: column.column_length(),
        charset: u32::from(column.character_set()),
        decimals: u32::from(column.decimals()),
        flags: u32::from(flags),
        column_type: blob_subtype_name(column.column_type() as u8, flags).into(),
        // A plain psdb server knows nothing of MariaDB's extended metadata.
        extended_metadata: Bytes::new(),
    }
}
