//! HTTP/2 and HTTP/1.1 over TLS (hyper), on the TCP port of the same number
//! as the HTTP/3 UDP port, advertising HTTP/3 with `Alt-Svc`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::tls::{ALPN_H2, ALPN_HTTP1, Identity, TlsError};
use super::{Body, BodyError, Handler, HttpVersion, Request};

type ResponseBody = BoxBody<Bytes, Infallible>;

/// Serves TLS connections from `listener` until `shutdown`.
pub async fn serve(
    listener: TcpListener,
    identity: &Identity,
    handler: Arc<dyn Handler>,
    max_request_bytes: usize,
    alt_svc: Option<String>,
    shutdown: CancellationToken,
) -> Result<(), TlsError> {
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config(&[ALPN_H2, ALPN_HTTP1])?);
    let alt_svc = alt_svc.and_then(|v| http::HeaderValue::from_str(&v).ok());
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
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let handler = handler.clone();
        let alt_svc = alt_svc.clone();
        let shutdown = shutdown.clone();
        connections.spawn(
            async move {
                let tls = match acceptor.accept(tcp).await {
                    Ok(tls) => tls,
                    Err(e) => return debug!(error = %e, "TLS handshake failed"),
                };
                let version = if tls.get_ref().1.alpn_protocol() == Some(ALPN_H2) {
                    HttpVersion::Http2
                } else {
                    HttpVersion::Http1
                };
                let service = hyper::service::service_fn(move |req| {
                    let handler = handler.clone();
                    let alt_svc = alt_svc.clone();
                    async move {
                        Ok::<_, Infallible>(
                            handle(req, &*handler, version, max_request_bytes, alt_svc).await,
                        )
                    }
                });
                let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                builder
                    .http2()
                    .max_concurrent_streams(4096)
                    .initial_stream_window_size(8 << 20)
                    .initial_connection_window_size(32 << 20)
                    .adaptive_window(false);
                let conn = builder.serve_connection(TokioIo::new(tls), service);
                tokio::pin!(conn);
                tokio::select! {
                    r = conn.as_mut() => if let Err(e) = r { debug!(error = %e, "HTTP connection ended") },
                    () = shutdown.cancelled() => {
                        // GOAWAY, then let in-flight requests finish.
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
            }
            .instrument(info_span!("h2_conn", %peer)),
        );
    }
}

async fn handle(
    req: http::Request<Incoming>,
    handler: &dyn Handler,
    version: HttpVersion,
    limit: usize,
    alt_svc: Option<http::HeaderValue>,
) -> http::Response<ResponseBody> {
    let (parts, body) = req.into_parts();
    let body = match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge { limit }),
        Err(e) => Err(BodyError::Broken(e.to_string())),
    };
    let response = handler
        .handle(Request {
            method: parts.method,
            path: parts.uri.path().to_string(),
            headers: parts.headers,
            body,
            version,
        })
        .await;
    let body: ResponseBody = match response.body {
        Body::Full(bytes) => Full::new(bytes).boxed(),
        Body::Stream(chunks) => {
            let frames = futures_util::stream::unfold(chunks, |mut chunks| async move {
                chunks
                    .next()
                    .await
                    .map(|chunk| (Ok::<_, Infallible>(Frame::data(chunk)), chunks))
            });
            StreamBody::new(frames).boxed()
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
