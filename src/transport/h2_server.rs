//! HTTP/2 and HTTP/1.1 over TLS (hyper), on the TCP port of the same number
//! as the HTTP/3 UDP port, advertising HTTP/3 with `Alt-Svc`.

use std::convert::Infallible;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::activity::{Activity, InFlight};
use super::admission::{PeerSlot, PendingPeers};
use super::counting_io::CountingIo;
use super::link::Link;
use super::tls::{ALPN_H2, ALPN_HTTP1, Identity, TlsError};
use super::{
    Body, BodyError, BodySource, ConnectionLimits, Handler, HttpVersion, Request, RequestBody,
};

type ResponseBody = UnsyncBoxBody<Bytes, Infallible>;

/// How long a drained connection whose requests are all answered waits
/// for the client to close it after GOAWAY.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// After the linger, how long a drained connection may still take to end
/// by itself before it is cut.
const FLUSH: std::time::Duration = std::time::Duration::from_secs(5);

/// What every connection of one listener shares.
#[derive(Clone)]
pub struct Options {
    pub max_request_bytes: usize,
    pub alt_svc: Option<String>,
    pub limits: ConnectionLimits,
}

/// Serves TLS connections from `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    identity: &Identity,
    handler: Arc<dyn Handler>,
    options: Options,
    shutdown: CancellationToken,
) -> Result<(), TlsError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config(&[ALPN_H2, ALPN_HTTP1])?);
    let alt_svc = options
        .alt_svc
        .as_deref()
        .and_then(|v| http::HeaderValue::from_str(v).ok());
    let pending = PendingPeers::new(options.limits.max_pending_per_peer);
    // Connections, so that a shutdown returns only once each has sent
    // GOAWAY and finished its in-flight requests.
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of file descriptors and the like: back off, keep serving.
                    debug!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => {
                connections.close();
                connections.wait().await;
                return Ok(());
            }
        };
        let Some(slot) = pending.admit(peer.ip()) else {
            debug!(%peer, "refused: this address holds too many unauthenticated connections");
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let connection = Connection {
            acceptor: acceptor.clone(),
            handler: handler.clone(),
            alt_svc: alt_svc.clone(),
            max_request_bytes: options.max_request_bytes,
            limits: options.limits,
            slot,
        };
        connections.spawn(
            connection
                .serve(tcp, shutdown.clone())
                .instrument(info_span!("h2_conn", %peer)),
        );
    }
}

struct Connection {
    acceptor: tokio_rustls::TlsAcceptor,
    handler: Arc<dyn Handler>,
    alt_svc: Option<http::HeaderValue>,
    max_request_bytes: usize,
    limits: ConnectionLimits,
    slot: PeerSlot,
}

impl Connection {
    async fn serve(self, tcp: TcpStream, shutdown: CancellationToken) {
        let limits = self.limits;
        let fd = tcp.as_raw_fd();
        // Nothing can be in flight before the handshake: a drain simply
        // closes the connection.
        let tls = tokio::select! {
            handshake = tokio::time::timeout(limits.tls_handshake, self.acceptor.accept(tcp)) => match handshake {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return debug!(error = %e, "TLS handshake failed"),
                Err(_) => return debug!(timeout = ?limits.tls_handshake, "TLS handshake timed out"),
            },
            () = shutdown.cancelled() => return,
        };
        let version = if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
            HttpVersion::Http2
        } else {
            HttpVersion::Http1
        };
        let io = CountingIo::new(tls);
        let received = io.received.clone();
        let activity = Activity::default();
        let (link, link_guard) = Link::tcp(fd);
        let service = {
            let activity = activity.clone();
            let link = link.clone();
            let handler = self.handler.clone();
            let alt_svc = self.alt_svc.clone();
            let slot = self.slot.clone();
            let limit = self.max_request_bytes;
            hyper::service::service_fn(move |req| {
                let in_flight = activity.begin();
                let handler = handler.clone();
                let alt_svc = alt_svc.clone();
                let slot = slot.clone();
                let link = link.clone();
                async move {
                    let response =
                        handle(req, &*handler, version, limit, slot, link, alt_svc).await;
                    Ok::<_, Infallible>(response.map(|body| {
                        Tracked {
                            body,
                            _in_flight: in_flight,
                        }
                        .boxed_unsync()
                    }))
                }
            })
        };
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.request_headers);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_streams)
            // A peer that stops answering PINGs (gone, or stalled halfway
            // through a header block) is dropped.
            .keep_alive_interval(limits.request_headers)
            .keep_alive_timeout(limits.request_headers)
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(32 << 20)
            .adaptive_window(false);
        let conn = builder.serve_connection(TokioIo::new(io), service);
        tokio::pin!(conn);
        // Declared after the connection, so dropped before its socket closes.
        let _link_guard = link_guard;
        // HTTP/1.1 bounds its headers itself; HTTP/2's connection preface
        // must arrive in the same time.
        let preface_due = async {
            if version == HttpVersion::Http1 {
                return std::future::pending().await;
            }
            tokio::time::sleep(limits.request_headers).await;
            if received.load(Ordering::Relaxed) >= H2_PREFACE_AND_SETTINGS {
                std::future::pending().await
            }
        };
        tokio::select! {
            r = conn.as_mut() => if let Err(e) = r { debug!(error = %e, "HTTP connection ended") },
            () = preface_due => debug!(timeout = ?limits.request_headers, "no HTTP/2 connection preface in time"),
            () = shutdown.cancelled() => {
                // Never used: nothing to finish, close at once.
                if !activity.used() {
                    return;
                }
                // GOAWAY, then let in-flight requests finish; once none
                // is left, the client gets a moment to close first.
                conn.as_mut().graceful_shutdown();
                tokio::select! {
                    _ = conn.as_mut() => return,
                    () = activity.idle_for(LINGER) => {}
                }
                // Nothing in flight, but h2 may still hold response bytes a
                // slow client has not taken, or streams it accepted before
                // its final GOAWAY and not yet handed over: cut now, and
                // the client sees requests fail that it must count as
                // possibly run. Give the connection a bounded while to end
                // by itself (h2 closes it once its streams are done).
                let _ = tokio::time::timeout(FLUSH, conn.as_mut()).await;
            }
        }
    }
}

/// The client's connection preface (24 bytes) and the header of the
/// SETTINGS frame that must follow it.
const H2_PREFACE_AND_SETTINGS: usize = 24 + 9;

async fn handle(
    req: http::Request<Incoming>,
    handler: &dyn Handler,
    version: HttpVersion,
    limit: usize,
    peer: PeerSlot,
    link: Link,
    alt_svc: Option<http::HeaderValue>,
) -> http::Response<ResponseBody> {
    let (parts, body) = req.into_parts();
    let body = RequestBody::new(limit, IncomingBody(body));
    let response = handler
        .handle(Request {
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body,
            version,
            peer,
            link,
        })
        .await;
    let body: ResponseBody = match response.body {
        Body::Full(bytes) => Full::new(bytes).boxed_unsync(),
        Body::Stream(chunks) => {
            let frames = futures_util::stream::unfold(chunks, |mut chunks| async move {
                chunks
                    .next()
                    .await
                    .map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), chunks))
            });
            StreamBody::new(frames).boxed_unsync()
        }
    };
    let mut out = http::Response::new(body);
    *out.status_mut() = response.status;
    *out.headers_mut() = response.headers;
    if let Some(v) = alt_svc {
        out.headers_mut().insert(http::header::ALT_SVC, v);
    }
    out
}

/// hyper's request body, piece by piece (trailers carry nothing for us).
struct IncomingBody(Incoming);

impl BodySource for IncomingBody {
    fn poll_piece(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<Option<Bytes>, BodyError>> {
        use std::task::Poll;
        loop {
            match std::task::ready!(http_body::Body::poll_frame(
                std::pin::Pin::new(&mut self.0),
                cx
            )) {
                None => return Poll::Ready(Ok(None)),
                Some(Err(e)) => return Poll::Ready(Err(BodyError::Broken(e.to_string()))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Poll::Ready(Ok(Some(data)));
                    }
                }
            }
        }
    }
}

/// A response body that keeps its request counted in flight until hyper
/// has taken all of it.
struct Tracked {
    body: ResponseBody,
    // Held, not read: dropped with the body.
    _in_flight: InFlight,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
