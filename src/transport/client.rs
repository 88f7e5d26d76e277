//! An API client over HTTP/3 or HTTP/2: one long-lived connection that
//! many concurrent requests share. Used by the tests today and by the
//! sidecar.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;

use super::HttpVersion;
use super::quic::{Congestion, transport_config, udp_socket};
use super::tls::{ALPN_H2, ALPN_H3};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting: {0}")]
    Connect(String),
    /// The request was not written: it is safe to send it elsewhere.
    #[error("request not sent: {0}")]
    NotSent(String),
    /// The request may have reached the server.
    #[error("connection failed during the request: {0}")]
    Broken(String),
    #[error("response body larger than {0} bytes")]
    TooLarge(usize),
}

/// One connection to a gateway.
#[derive(Clone)]
pub enum Connection {
    H3 {
        send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
        /// Keeps the endpoint (and its socket) alive with the connection.
        endpoint: quinn::Endpoint,
        conn: quinn::Connection,
    },
    H2 {
        send: hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    },
}

/// A response whose body is read chunk by chunk.
pub struct ResponseStream {
    pub head: http::response::Parts,
    body: ResponseBody,
}

enum ResponseBody {
    H3(Box<h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>>),
    H2(Incoming),
}

impl Connection {
    /// Opens an HTTP/3 connection to `addr`, verifying `server_name`.
    pub async fn connect_h3(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
        congestion: Congestion,
        keep_alive: Duration,
    ) -> Result<Self, ClientError> {
        let err = |e: &dyn std::fmt::Display| ClientError::Connect(e.to_string());
        let mut tls = (*tls).clone();
        tls.alpn_protocols = vec![ALPN_H3.to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| err(&e))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(transport_config(congestion, Some(keep_alive)));
        let bind: SocketAddr = if addr.is_ipv6() {
            "[::]:0".parse().expect("literal")
        } else {
            "0.0.0.0:0".parse().expect("literal")
        };
        let socket = udp_socket(bind).map_err(|e| err(&e))?;
        let mut endpoint = quinn::Endpoint::new(
            quinn::EndpointConfig::default(),
            None,
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| err(&e))?;
        endpoint.set_default_client_config(config);
        let conn = endpoint
            .connect(addr, server_name)
            .map_err(|e| err(&e))?
            .await
            .map_err(|e| err(&e))?;
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| err(&e))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        Ok(Self::H3 {
            send,
            endpoint,
            conn,
        })
    }

    /// Opens an HTTP/2 connection over TLS to `addr`.
    pub async fn connect_h2(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Self, ClientError> {
        let err = |e: &dyn std::fmt::Display| ClientError::Connect(e.to_string());
        let mut tls = (*tls).clone();
        tls.alpn_protocols = vec![ALPN_H2.to_vec()];
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| err(&e))?;
        let tcp = TcpStream::connect(addr).await.map_err(|e| err(&e))?;
        let _ = tcp.set_nodelay(true);
        let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| err(&e))?;
        let (send, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(32 << 20)
            .keep_alive_interval(Duration::from_secs(15))
            .handshake(TokioIo::new(stream))
            .await
            .map_err(|e| err(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self::H2 { send })
    }

    pub fn version(&self) -> HttpVersion {
        match self {
            Self::H3 { .. } => HttpVersion::Http3,
            Self::H2 { .. } => HttpVersion::Http2,
        }
    }

    /// False once the connection is known to be gone.
    pub fn is_open(&self) -> bool {
        match self {
            Self::H3 { conn, .. } => conn.close_reason().is_none(),
            Self::H2 { send } => !send.is_closed(),
        }
    }

    /// Sends one request with its whole body and waits for the response
    /// head.
    pub async fn send(&self, request: http::Request<Bytes>) -> Result<ResponseStream, ClientError> {
        match self {
            Self::H3 { send, .. } => {
                let (parts, body) = request.into_parts();
                let mut send = send.clone();
                let mut stream = send
                    .send_request(http::Request::from_parts(parts, ()))
                    .await
                    .map_err(|e| ClientError::NotSent(e.to_string()))?;
                let broken = |e: h3::error::StreamError| ClientError::Broken(e.to_string());
                if !body.is_empty() {
                    stream.send_data(body).await.map_err(broken)?;
                }
                stream.finish().await.map_err(broken)?;
                let response = stream.recv_response().await.map_err(broken)?;
                let (head, ()) = response.into_parts();
                Ok(ResponseStream {
                    head,
                    body: ResponseBody::H3(Box::new(stream)),
                })
            }
            Self::H2 { send } => {
                let mut send = send.clone();
                send.ready()
                    .await
                    .map_err(|e| ClientError::NotSent(e.to_string()))?;
                let response = send
                    .send_request(request.map(Full::new))
                    .await
                    .map_err(|e| {
                        // hyper hands back requests it never wrote.
                        if e.is_canceled() {
                            ClientError::NotSent(e.to_string())
                        } else {
                            ClientError::Broken(e.to_string())
                        }
                    })?;
                let (head, body) = response.into_parts();
                Ok(ResponseStream {
                    head,
                    body: ResponseBody::H2(body),
                })
            }
        }
    }
}

impl ResponseStream {
    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        match &mut self.body {
            ResponseBody::H3(stream) => match stream.recv_data().await {
                Ok(Some(mut buf)) => Ok(Some(buf.copy_to_bytes(buf.remaining()))),
                Ok(None) => Ok(None),
                Err(e) => Err(ClientError::Broken(e.to_string())),
            },
            ResponseBody::H2(body) => loop {
                match body.frame().await {
                    None => return Ok(None),
                    Some(Err(e)) => return Err(ClientError::Broken(e.to_string())),
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            return Ok(Some(data));
                        }
                    }
                }
            },
        }
    }

    /// Reads the whole body, refusing more than `limit` bytes.
    pub async fn collect(
        mut self,
        limit: usize,
    ) -> Result<(http::response::Parts, Bytes), ClientError> {
        let mut out = BytesMut::new();
        while let Some(chunk) = self.chunk().await? {
            if out.len() + chunk.len() > limit {
                return Err(ClientError::TooLarge(limit));
            }
            out.extend_from_slice(&chunk);
        }
        Ok((self.head, out.freeze()))
    }
}
