//! HTTP/3 server: quinn endpoint → h3 connection → one task per request.

use std::net::SocketAddr;
use std::sync::Arc;

use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::activity::Activity;
use super::admission::{PeerSlot, PendingPeers};
use super::link::Link;
use super::quic::{Congestion, endpoint_config, server_transport_config, udp_socket};
use super::tls::{ALPN_H3, Identity, TlsError};
use super::{
    Body, BodyError, BodySource, ConnectionLimits, Handler, HttpVersion, Request, RequestBody,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Binds the UDP socket and returns a running endpoint.
pub fn bind(
    addr: SocketAddr,
    identity: &Identity,
    congestion: Congestion,
    max_streams: u32,
) -> Result<quinn::Endpoint, BindError> {
    let tls = identity.server_config(&[ALPN_H3])?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| BindError::Quic(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(server_transport_config(congestion, max_streams));
    let socket = udp_socket(addr).map_err(BindError::Io)?;
    quinn::Endpoint::new(
        endpoint_config(),
        Some(config),
        socket,
        Arc::new(quinn::TokioRuntime),
    )
    .map_err(BindError::Io)
}

#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("QUIC configuration: {0}")]
    Quic(String),
    #[error("binding: {0}")]
    Io(std::io::Error),
}

/// Accepts connections until `shutdown`, then closes them gracefully.
pub async fn serve(
    endpoint: quinn::Endpoint,
    handler: Arc<dyn Handler>,
    max_request_bytes: usize,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let pending = PendingPeers::new(limits.max_pending_per_peer);
    // Connections, so that the endpoint closes only after each has sent
    // GOAWAY and finished its in-flight requests.
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            () = shutdown.cancelled() => break,
        };
        let Some(incoming) = incoming else { break };
        let peer = incoming.remote_address();
        let Some(slot) = pending.admit(peer.ip()) else {
            debug!(%peer, "refused: this address holds too many unauthenticated connections");
            incoming.refuse();
            continue;
        };
        let connection = Connection {
            handler: handler.clone(),
            max_request_bytes,
            limits,
            slot,
            activity: Activity::default(),
        };
        let shutdown = shutdown.clone();
        connections.spawn(
            async move {
                if let Err(e) = connection.serve(incoming, shutdown).await {
                    debug!(error = %e, "HTTP/3 connection ended");
                }
            }
            .instrument(info_span!("h3_conn", %peer)),
        );
    }
    // New connection attempts are refused from here on.
    endpoint.set_server_config(None);
    connections.close();
    connections.wait().await;
    endpoint.close(quinn::VarInt::from_u32(0), b"shutting down");
    endpoint.wait_idle().await;
}

struct Connection {
    handler: Arc<dyn Handler>,
    max_request_bytes: usize,
    limits: ConnectionLimits,
    slot: PeerSlot,
    activity: Activity,
}

impl Connection {
    async fn serve(
        self,
        incoming: quinn::Incoming,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        let handshake = async {
            let conn = incoming.await?;
            let h3 = h3::server::builder()
                .build::<_, Bytes>(h3_quinn::Connection::new(conn.clone()))
                .await?;
            Ok::<_, Error>((conn, h3))
        };
        // Nothing can be in flight before the handshake: a drain simply
        // drops the connection.
        let (quic, mut h3) = tokio::select! {
            done = tokio::time::timeout(self.limits.tls_handshake, handshake) => match done {
                Ok(done) => done?,
                Err(_) => return Err(format!("QUIC handshake took over {:?}", self.limits.tls_handshake).into()),
            },
            () = shutdown.cancelled() => return Ok(()),
        };
        let requests = tokio_util::task::TaskTracker::new();
        let link = Link::quic(quic.clone());
        loop {
            let resolver = tokio::select! {
                r = h3.accept() => r?,
                () = shutdown.cancelled() => {
                    if !self.activity.used() {
                        // Never used: nothing to finish, close at once.
                        quic.close(H3_NO_ERROR, b"shutting down");
                        return Ok(());
                    }
                    // GOAWAY: accept nothing new, finish what is in flight
                    // (h3 refuses streams past the GOAWAY id), then close.
                    h3.shutdown(0).await?;
                    requests.close();
                    tokio::select! {
                        () = requests.wait() => {}
                        _ = async { while let Ok(Some(_)) = h3.accept().await {} } => {}
                    }
                    requests.wait().await;
                    // Closing discards unacknowledged data: give the last
                    // responses a moment to be acknowledged, or the client to
                    // close first. Meanwhile requests that crossed the GOAWAY
                    // are still refused as unprocessed (H3_REQUEST_REJECTED,
                    // which a client may send elsewhere), not left to die
                    // with the connection, where the client must assume
                    // they may have run.
                    let _ = tokio::time::timeout(LINGER, async {
                        tokio::select! {
                            _ = quic.closed() => {}
                            _ = async { while let Ok(Some(_)) = h3.accept().await {} } => {
                                quic.closed().await;
                            }
                        }
                    })
                    .await;
                    quic.close(H3_NO_ERROR, b"shutting down");
                    return Ok(());
                }
            };
            let Some(resolver) = resolver else {
                return Ok(());
            };
            let in_flight = self.activity.begin();
            let request = RequestContext {
                handler: self.handler.clone(),
                link: link.clone(),
                max_request_bytes: self.max_request_bytes,
                limits: self.limits,
                slot: self.slot.clone(),
            };
            requests.spawn(async move {
                if let Err(e) = request.serve(resolver).await {
                    debug!(error = %e, "HTTP/3 request failed");
                }
                drop(in_flight);
            });
        }
    }
}

const H3_NO_ERROR: quinn::VarInt = quinn::VarInt::from_u32(0x100);

/// How long a drained connection waits for its last responses to be
/// acknowledged before it is closed.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// What one request's task needs from its connection.
struct RequestContext {
    handler: Arc<dyn Handler>,
    link: Link,
    max_request_bytes: usize,
    limits: ConnectionLimits,
    slot: PeerSlot,
}

impl RequestContext {
    async fn serve(
        self,
        resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    ) -> Result<(), Error> {
        let headers_due = self.limits.request_headers;
        let (req, stream) = tokio::time::timeout(headers_due, resolver.resolve_request())
            .await
            .map_err(|_| format!("request headers took over {headers_due:?}"))??;
        // The body is read (by the handler) only once the headers pass.
        let (mut stream, body) = stream.split();
        let limit = self.max_request_bytes;
        let (parts, ()) = req.into_parts();
        let request = Request {
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body: RequestBody::new(limit, UnreadStopped::new(body)),
            version: HttpVersion::Http3,
            peer: self.slot,
            link: self.link,
        };
        let response = self.handler.handle(request).await;
        let mut head = http::Response::builder().status(response.status).body(())?;
        *head.headers_mut() = response.headers;
        stream.send_response(head).await?;
        match response.body {
            Body::Full(bytes) => {
                if !bytes.is_empty() {
                    stream.send_data(bytes).await?;
                }
            }
            Body::Stream(mut chunks) => {
                // HTTP/3 only reports a client's STOP_SENDING on a write: the
                // handler keeps a silent stream written (never with empty DATA
                // frames, which h3 clients read as the end of the body). A
                // failed write drops `chunks`, which tells the producer to stop.
                while let Some(chunk) = chunks.next().await {
                    stream.send_data(chunk).await?;
                }
            }
        }
        stream.finish().await?;
        Ok(())
    }
}

/// A request body's stream: dropped before its end (a refusal from the
/// headers, a body over the limit), it asks the client to stop sending
/// with H3_NO_ERROR, as RFC 9114 §4.1 says a server that answers early
/// should (a bare drop would stop it with code 0).
struct UnreadStopped<S: h3::quic::RecvStream> {
    stream: h3::server::RequestStream<S, Bytes>,
    finished: bool,
}

impl<S: h3::quic::RecvStream> Drop for UnreadStopped<S> {
    fn drop(&mut self) {
        if !self.finished {
            self.stream.stop_sending(h3::error::Code::H3_NO_ERROR);
        }
    }
}

impl<S: h3::quic::RecvStream> UnreadStopped<S> {
    fn new(stream: h3::server::RequestStream<S, Bytes>) -> Self {
        Self {
            stream,
            finished: false,
        }
    }
}

impl<S> BodySource for UnreadStopped<S>
where
    S: h3::quic::RecvStream + Send,
{
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, BodyError>> {
        match std::task::ready!(self.stream.poll_recv_data(cx)) {
            Ok(Some(mut piece)) => Poll::Ready(Ok(Some(piece.copy_to_bytes(piece.remaining())))),
            Ok(None) => {
                self.finished = true;
                Poll::Ready(Ok(None))
            }
            Err(e) => Poll::Ready(Err(BodyError::Broken(e.to_string()))),
        }
    }
}
