//! One HTTP/3 or HTTP/2 connection to a gateway that many concurrent
//! requests share. What goes over it, and which one to use, is decided by
//! [`crate::client`]; the tests also use it directly.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::sync::CancellationToken;

use super::HttpVersion;
use super::client_h2;
use super::quic::{Congestion, PathActivity, client_transport_config, endpoint_config, udp_socket};
use super::tcp::TcpCongestion;
use super::tls::{ALPN_H2, ALPN_H3};

/// Cancelled HTTP/2 streams remembered at once: as many as may be open.
const REMEMBERED_RESET_STREAMS: usize = 4096;

/// Bytes read from the gateway's TCP socket at a time, under TLS: one
/// upstream connection per sidecar (two while HTTP/3 is tried back), so
/// 64 KiB each.
const READ_AHEAD: usize = 64 << 10;

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

/// How a connection notices that its peer is gone.
#[derive(Clone, Copy, Debug)]
pub struct ConnectOptions {
    /// QUIC's congestion controller.
    pub congestion: Congestion,
    /// TCP's (HTTP/2); `None` leaves the host's default.
    pub tcp_congestion: Option<TcpCongestion>,
    /// QUIC PING / HTTP/2 PING interval, sent even while idle.
    pub keep_alive: Duration,
    /// HTTP/3: the connection dies after this long without a packet from
    /// the peer. HTTP/2: how long a PING may go unanswered.
    pub idle_timeout: Duration,
}

/// A request body: whole, or made piece by piece while it is sent (a
/// large body compressed as it goes out, so the link is busy while the
/// rest is compressed). The pieces are made on the sending task, which
/// lets the connection's own tasks run between them.
pub enum Outgoing {
    Full(Bytes),
    Pieces(Box<dyn Iterator<Item = Bytes> + Send>),
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
        send: h2::client::SendRequest<Bytes>,
        /// Cancelled when the connection task has ended.
        done: CancellationToken,
    },
}

/// A response whose body is read chunk by chunk. Dropping it before the
/// end cancels the request's stream, so the server stops producing.
pub struct ResponseStream {
    pub head: http::response::Parts,
    body: ResponseBody,
    /// HTTP/3 closes the whole connection when its last `SendRequest` goes:
    /// a response being read keeps one, so that replacing the connection
    /// for new requests does not cut the responses still arriving on it.
    _connection: Option<Connection>,
}

type H3Stream = h3::client::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

enum ResponseBody {
    H3(Box<H3Exchange>),
    H2(h2::RecvStream),
}

/// An HTTP/3 request stream that is cancelled if it is dropped before its
/// exchange completed. quinn alone would *finish* a half-written request
/// body (a truncated request the server might take for a whole one), so
/// the send side is reset with H3_REQUEST_CANCELLED. The receive side needs
/// nothing: quinn sends STOP_SENDING (code 0) when a stream that was not
/// read to its end is dropped. An explicit `stop_sending` with the HTTP/3
/// code is not possible: h3-quinn 0.0.10 panics on it while a read is
/// pending.
struct H3Exchange {
    stream: H3Stream,
    request_sent: bool,
}

impl Drop for H3Exchange {
    fn drop(&mut self) {
        if !self.request_sent {
            self.stream
                .stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
        }
    }
}

impl Connection {
    /// Opens an HTTP/3 connection to `addr`, verifying `server_name`, with
    /// a 60 s idle timeout (tests and one-shot tools).
    pub async fn connect_h3(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
        congestion: Congestion,
        keep_alive: Duration,
    ) -> Result<Self, ClientError> {
        let options = ConnectOptions {
            congestion,
            tcp_congestion: None,
            keep_alive,
            idle_timeout: Duration::from_secs(60),
        };
        Self::connect_h3_with(addr, server_name, tls, &options).await
    }

    /// Opens an HTTP/3 connection to `addr`, verifying `server_name`. It has
    /// no timeout of its own: a handshake to a black hole waits for the idle
    /// timeout, so callers bound it.
    pub async fn connect_h3_with(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
        options: &ConnectOptions,
    ) -> Result<Self, ClientError> {
        let err = |e: &dyn std::fmt::Display| ClientError::Connect(e.to_string());
        let mut tls = (*tls).clone();
        tls.alpn_protocols = vec![ALPN_H3.to_vec()];
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| err(&e))?;
        let mut config = quinn::ClientConfig::new(Arc::new(crypto));
        config.transport_config(client_transport_config(
            options.congestion,
            options.keep_alive,
            options.idle_timeout,
        ));
        let bind: SocketAddr = if addr.is_ipv6() {
            "[::]:0".parse().expect("literal")
        } else {
            "0.0.0.0:0".parse().expect("literal")
        };
        let socket = udp_socket(bind).map_err(|e| err(&e))?;
        let mut endpoint = quinn::Endpoint::new(
            endpoint_config(),
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
        // No grease: h3 sends a reserved frame from every `SendRequest`
        // that has not sent one yet, and each request here is made on a
        // clone of ours, so every request carried one (a further write into
        // quinn, and its bytes). Grease tests a peer's tolerance of unknown
        // frames; our peer is a gateway, not the open web.
        let (mut driver, send) = h3::client::builder()
            .send_grease(false)
            .build(h3_quinn::Connection::new(conn.clone()))
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

    /// Opens an HTTP/2 connection over TLS to `addr` (PINGs every 15 s,
    /// each answered within 20 s).
    pub async fn connect_h2(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
    ) -> Result<Self, ClientError> {
        let options = ConnectOptions {
            congestion: Congestion::default(),
            tcp_congestion: None,
            keep_alive: Duration::from_secs(15),
            idle_timeout: Duration::from_secs(20),
        };
        Self::connect_h2_with(addr, server_name, tls, &options).await
    }

    /// Opens an HTTP/2 connection over TLS to `addr`, with TCP's
    /// congestion controller from `options.tcp_congestion` (the host's
    /// default if unset).
    pub async fn connect_h2_with(
        addr: SocketAddr,
        server_name: &str,
        tls: Arc<rustls::ClientConfig>,
        options: &ConnectOptions,
    ) -> Result<Self, ClientError> {
        let err = |e: &dyn std::fmt::Display| ClientError::Connect(e.to_string());
        let mut tls = (*tls).clone();
        tls.alpn_protocols = vec![ALPN_H2.to_vec()];
        let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
            .map_err(|e| err(&e))?;
        let socket = if addr.is_ipv6() {
            tokio::net::TcpSocket::new_v6()
        } else {
            tokio::net::TcpSocket::new_v4()
        }
        .map_err(|e| err(&e))?;
        if let Some(cc) = options.tcp_congestion {
            // Before connecting, so the first window already follows it.
            cc.apply(&socket)
                .map_err(|e| err(&format!("TCP congestion {cc}: {e}")))?;
        }
        let tcp = socket.connect(addr).await.map_err(|e| err(&e))?;
        let _ = tcp.set_nodelay(true);
        // rustls reads TLS records 4 KiB at a time (a `recvfrom` each: a
        // 50 KB answer was 13 of them); the read-ahead takes what the
        // socket holds in one, and rustls's reads are served from it.
        let tcp = tokio::io::BufReader::with_capacity(READ_AHEAD, tcp);
        let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| err(&e))?;
        let settings = client_h2::Settings {
            stream_window: 8 << 20,
            connection_window: 32 << 20,
            // Streams we cancel (a client that hung up mid-result, KILL
            // QUERY) are remembered while frames already sent for them
            // arrive, so those are dropped quietly; h2 keeps 50 by default,
            // and forgets the rest at once under load.
            reset_streams: REMEMBERED_RESET_STREAMS,
            keep_alive: options.keep_alive,
            ping_timeout: options.idle_timeout,
        };
        let (send, done) = client_h2::handshake(stream, &settings)
            .await
            .map_err(|e| err(&e))?;
        Ok(Self::H2 { send, done })
    }

    pub fn version(&self) -> HttpVersion {
        match self {
            Self::H3 { .. } => HttpVersion::Http3,
            Self::H2 { .. } => HttpVersion::Http2,
        }
    }

    /// HTTP/3: what the QUIC connection has sent and heard, for telling a
    /// silent path. `None` for HTTP/2 (TCP does its own).
    pub fn path_activity(&self) -> Option<PathActivity> {
        match self {
            Self::H3 { conn, .. } => Some(PathActivity::of(conn)),
            Self::H2 { .. } => None,
        }
    }

    /// False once the connection is known to be gone.
    pub fn is_open(&self) -> bool {
        match self {
            Self::H3 { conn, .. } => conn.close_reason().is_none(),
            Self::H2 { done, .. } => !done.is_cancelled(),
        }
    }

    /// Resolves when the connection has ended, whatever the reason.
    pub async fn closed(&self) {
        match self {
            Self::H3 { conn, .. } => {
                conn.closed().await;
            }
            Self::H2 { done, .. } => done.cancelled().await,
        }
    }

    /// Sends one request with its whole body and waits for the response
    /// head.
    pub async fn send(&self, request: http::Request<Bytes>) -> Result<ResponseStream, ClientError> {
        self.send_body(request.map(Outgoing::Full)).await
    }

    /// Sends one request, its body whole or piece by piece, and waits for
    /// the response head. A body cut short (a failed write, or this future
    /// dropped) resets the stream: the server never sees a shorter body
    /// end as if it were whole.
    pub async fn send_body(
        &self,
        request: http::Request<Outgoing>,
    ) -> Result<ResponseStream, ClientError> {
        match self {
            Self::H3 { send, .. } => {
                let (parts, body) = request.into_parts();
                let mut send = send.clone();
                let stream = send
                    .send_request(http::Request::from_parts(parts, ()))
                    .await
                    .map_err(|e| ClientError::NotSent(describe(&e)))?;
                // From here on the server may have seen the request.
                let mut exchange = Box::new(H3Exchange {
                    stream,
                    request_sent: false,
                });
                let broken = |e: h3::error::StreamError| ClientError::Broken(describe(&e));
                let sent = send_h3_body(&mut exchange.stream, body).await;
                // Sent whole, or already failed: a stream whose body failed
                // midway is reset when the exchange goes.
                exchange.request_sent = sent.is_ok();
                // A server may answer before it has read the whole request
                // and stop our sending (a 401 from the headers alone):
                // RFC 9114 §4.1 says a client must not discard that
                // response, so it is read whatever the sending came to.
                let response = match exchange.stream.recv_response().await {
                    Ok(response) => response,
                    // A draining server refuses streams past its GOAWAY
                    // this way; RFC 9114 §4.1.1: such a request was not
                    // processed, so it may go elsewhere.
                    Err(e) if rejected(&e) || sent.as_ref().is_err_and(rejected) => {
                        return Err(ClientError::NotSent(describe(&e)));
                    }
                    Err(e) => return Err(broken(sent.err().unwrap_or(e))),
                };
                let (head, ()) = response.into_parts();
                Ok(ResponseStream {
                    head,
                    body: ResponseBody::H3(exchange),
                    _connection: Some(self.clone()),
                })
            }
            Self::H2 { send, .. } => {
                let (head, body) = client_h2::send(send, request).await?.into_parts();
                // h2 keeps the connection up while a stream is open.
                Ok(ResponseStream {
                    head,
                    body: ResponseBody::H2(body),
                    _connection: None,
                })
            }
        }
    }
}

/// Writes `body` and finishes the stream; the caller's [`H3Exchange`]
/// resets it if this stops before the end.
async fn send_h3_body(stream: &mut H3Stream, body: Outgoing) -> Result<(), h3::error::StreamError> {
    match body {
        Outgoing::Full(bytes) => {
            if !bytes.is_empty() {
                stream.send_data(bytes).await?;
            }
        }
        Outgoing::Pieces(pieces) => {
            for piece in pieces {
                if !piece.is_empty() {
                    stream.send_data(piece).await?;
                }
                // quinn's driver sends what was written while the next
                // piece is made (on another worker, or now on this one).
                tokio::task::yield_now().await;
            }
        }
    }
    stream.finish().await
}

/// Whether the server refused an HTTP/3 request unprocessed.
fn rejected(e: &h3::error::StreamError) -> bool {
    matches!(e, h3::error::StreamError::RemoteTerminate { code, .. }
        if *code == h3::error::Code::H3_REQUEST_REJECTED)
}

/// An error with its causes: hyper's own text is only the kind ("http2
/// error"); what happened (a GOAWAY and its reason, a keep-alive timeout,
/// an I/O error) is in the source chain.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some wrappers repeat their cause's text; say it once.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

impl ResponseStream {
    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        match &mut self.body {
            ResponseBody::H3(exchange) => match exchange.stream.recv_data().await {
                Ok(Some(mut buf)) => Ok(Some(buf.copy_to_bytes(buf.remaining()))),
                Ok(None) => Ok(None),
                Err(e) => Err(ClientError::Broken(describe(&e))),
            },
            ResponseBody::H2(body) => client_h2::chunk(body).await,
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
