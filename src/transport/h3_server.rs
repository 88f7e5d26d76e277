//! HTTP/3 server: quinn endpoint → h3 connection → one task per request.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info_span};

use super::quic::{Congestion, transport_config, udp_socket};
use super::tls::{ALPN_H3, Identity, TlsError};
use super::{Body, BodyError, Handler, HttpVersion, Request};

/// Binds the UDP socket and returns a running endpoint.
pub fn bind(
    addr: SocketAddr,
    identity: &Identity,
    congestion: Congestion,
) -> Result<quinn::Endpoint, BindError> {
    let tls = identity.server_config(&[ALPN_H3])?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| BindError::Quic(e.to_string()))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(transport_config(congestion, None));
    let socket = udp_socket(addr).map_err(BindError::Io)?;
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
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
    shutdown: CancellationToken,
) {
    // Connections, so that the endpoint closes only after each has sent
    // GOAWAY and finished its in-flight requests.
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => incoming,
            () = shutdown.cancelled() => break,
        };
        let Some(incoming) = incoming else { break };
        let handler = handler.clone();
        let shutdown = shutdown.clone();
        let span = info_span!("h3_conn", peer = %incoming.remote_address());
        connections.spawn(
            async move {
                if let Err(e) =
                    serve_connection(incoming, handler, max_request_bytes, shutdown).await
                {
                    debug!(error = %e, "HTTP/3 connection ended");
                }
            }
            .instrument(span),
        );
    }
    // New connection attempts are refused from here on.
    endpoint.set_server_config(None);
    connections.close();
    connections.wait().await;
    endpoint.close(quinn::VarInt::from_u32(0), b"shutting down");
    endpoint.wait_idle().await;
}

async fn serve_connection(
    incoming: quinn::Incoming,
    handler: Arc<dyn Handler>,
    max_request_bytes: usize,
    shutdown: CancellationToken,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let conn = incoming.await?;
    let quic = conn.clone();
    let mut h3 = h3::server::builder()
        .build::<_, Bytes>(h3_quinn::Connection::new(conn))
        .await?;
    let requests = tokio_util::task::TaskTracker::new();
    loop {
        let resolver = tokio::select! {
            r = h3.accept() => r?,
            () = shutdown.cancelled() => {
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
                // close first.
                let _ = tokio::time::timeout(LINGER, quic.closed()).await;
                quic.close(quinn::VarInt::from_u32(0x100), b"shutting down"); // H3_NO_ERROR
                return Ok(());
            }
        };
        let Some(resolver) = resolver else {
            return Ok(());
        };
        let handler = handler.clone();
        requests.spawn(async move {
            if let Err(e) = serve_request(resolver, handler, max_request_bytes).await {
                debug!(error = %e, "HTTP/3 request failed");
            }
        });
    }
}

/// How long a drained connection waits for its last responses to be
/// acknowledged before it is closed.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

async fn serve_request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    handler: Arc<dyn Handler>,
    max_request_bytes: usize,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (req, mut stream) = resolver.resolve_request().await?;
    let body = read_body(&mut stream, max_request_bytes).await;
    let (parts, ()) = req.into_parts();
    let request = Request {
        method: parts.method,
        path: parts.uri.path().to_string(),
        headers: parts.headers,
        body,
        version: HttpVersion::Http3,
    };
    let response = handler.handle(request).await;
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

async fn read_body<S>(
    stream: &mut h3::server::RequestStream<S, Bytes>,
    limit: usize,
) -> Result<Bytes, BodyError>
where
    S: h3::quic::BidiStream<Bytes>,
{
    let mut body = BytesMut::new();
    loop {
        match stream.recv_data().await {
            Ok(Some(mut chunk)) => {
                if body.len() + chunk.remaining() > limit {
                    return Err(BodyError::TooLarge { limit });
                }
                while chunk.has_remaining() {
                    let piece = chunk.chunk();
                    body.extend_from_slice(piece);
                    let n = piece.len();
                    chunk.advance(n);
                }
            }
            Ok(None) => return Ok(body.freeze()),
            Err(e) => return Err(BodyError::Broken(e.to_string())),
        }
    }
}
