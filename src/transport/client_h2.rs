//! The HTTP/2 side of [`super::client::Connection`], on the `h2` crate
//! directly.
//!
//! hyper's HTTP/2 client hands every request through a channel to its
//! connection task and spawns one more task per request to pipe the body
//! (`H2ClientFuture`): measured, that was a `tokio::spawn`, a move of the
//! task's future and a cross-task wake-up per statement
//! (`benches/results/profiles/sidecar.md`). Here a request is a
//! `SendRequest` clone and one `send_request` call on the caller's own
//! task; only the connection itself has a task, as in hyper.
//!
//! What hyper did for us and is kept: its settings (no server push, a
//! 16 KiB header list, the windows and reset-stream limits the caller
//! gives), `content-length` on every request, PINGs while idle with a
//! timeout that ends the connection, and a stream reset with `NO_ERROR`
//! after a whole response read as its end, not as a failure.

use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{Ping, Reason, RecvStream};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::sync::CancellationToken;
use tracing::debug;

use super::client::{ClientError, Outgoing};

/// The largest response header block taken (hyper's client default).
const MAX_HEADER_LIST: u32 = 16 << 10;

/// The largest DATA frame the gateway may send us (HTTP/2's default is
/// 16 KiB). Each frame is a write of its own at the gateway (h2 holds one
/// DATA frame at a time), so a 50 KB answer left as four frames took four
/// `writev`s there and as many wake-ups here. A psdb message is whole
/// before it is decoded anyway, so a frame up to a row batch's usual size
/// (256 KiB) delays nothing; h2 buffers at most one frame while reading.
const MAX_FRAME: u32 = 256 << 10;

/// Windows and limits of one connection.
pub(super) struct Settings {
    pub stream_window: u32,
    pub connection_window: u32,
    /// Cancelled streams remembered while frames already sent for them
    /// arrive.
    pub reset_streams: usize,
    pub keep_alive: Duration,
    /// How long a PING may go unanswered.
    pub ping_timeout: Duration,
}

/// Runs the HTTP/2 handshake over `io` and spawns the connection's task.
/// The token is cancelled when that task has ended.
pub(super) async fn handshake<T>(
    io: T,
    settings: &Settings,
) -> Result<(SendRequest<Bytes>, CancellationToken), h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, mut conn) = h2::client::Builder::new()
        .enable_push(false)
        .initial_window_size(settings.stream_window)
        .initial_connection_window_size(settings.connection_window)
        .max_header_list_size(MAX_HEADER_LIST)
        .max_frame_size(MAX_FRAME)
        .max_concurrent_reset_streams(settings.reset_streams)
        // h2 answers each frame for a stream it has forgotten with
        // RST_STREAM and, after 1024 such answers in a connection's life
        // (never reset), closes the connection as a defence against
        // servers that provoke them. Against our gateway that only means a
        // long-lived, busy connection is eventually torn down with every
        // request on it: statements lost for nothing.
        .max_local_error_reset_streams(None)
        .handshake::<_, Bytes>(io)
        .await?;
    let done = CancellationToken::new();
    let ping_pong = conn.ping_pong();
    let (keep_alive, ping_timeout) = (settings.keep_alive, settings.ping_timeout);
    let ended = done.clone();
    tokio::spawn(async move {
        let pings = async move {
            let Some(mut ping_pong) = ping_pong else {
                return std::future::pending().await;
            };
            loop {
                tokio::time::sleep(keep_alive).await;
                match tokio::time::timeout(ping_timeout, ping_pong.ping(Ping::opaque())).await {
                    Ok(Ok(_pong)) => {}
                    Ok(Err(e)) => return e.to_string(),
                    Err(_) => return format!("no PING answer within {ping_timeout:?}"),
                }
            }
        };
        tokio::select! {
            result = &mut conn => {
                if let Err(e) = result {
                    debug!(error = %e, "HTTP/2 connection ended");
                }
            }
            // Dropping the connection fails its open streams (a broken
            // pipe to each), as hyper's keep-alive timeout does.
            reason = pings => debug!(%reason, "HTTP/2 connection given up"),
        }
        ended.cancel();
    });
    Ok((send, done))
}

/// Sends `request` with its body on a new stream and waits for the
/// response head.
pub(super) async fn send(
    send: &SendRequest<Bytes>,
    request: http::Request<Outgoing>,
) -> Result<http::Response<RecvStream>, ClientError> {
    let (mut parts, body) = request.into_parts();
    // A body made piece by piece has no length until it is sent.
    let empty = match &body {
        Outgoing::Full(bytes) => {
            parts.headers.insert(
                http::header::CONTENT_LENGTH,
                http::HeaderValue::from(bytes.len()),
            );
            bytes.is_empty()
        }
        Outgoing::Pieces(_) => false,
    };
    let mut send = send
        .clone()
        .ready()
        .await
        .map_err(|e| ClientError::NotSent(e.to_string()))?;
    // An error here is h2 refusing to open the stream (the connection is
    // gone or going away): nothing was written.
    let (response, stream) = send
        .send_request(http::Request::from_parts(parts, ()), empty)
        .map_err(|e| ClientError::NotSent(e.to_string()))?;
    // From here on the server may see the request. h2 queues the body and
    // writes it as the windows allow.
    let mut stream = ResetUnlessEnded {
        stream,
        ended: empty,
    };
    let sent = match body {
        _ if empty => Ok(()),
        Outgoing::Full(bytes) => stream.send(bytes, true),
        Outgoing::Pieces(pieces) => send_pieces(&mut stream, pieces).await,
    };
    // A server may answer before it has read the whole request (a 401 from
    // the headers alone): that response is read whatever the sending came
    // to.
    match response.await {
        Ok(response) => Ok(response),
        Err(e) if unprocessed(&e) || sent.as_ref().is_err_and(unprocessed) => {
            Err(ClientError::NotSent(e.to_string()))
        }
        Err(e) => Err(ClientError::Broken(sent.err().unwrap_or(e).to_string())),
    }
}

/// Queues each piece as it is made; h2's connection task writes them
/// meanwhile.
async fn send_pieces(
    stream: &mut ResetUnlessEnded,
    pieces: Box<dyn Iterator<Item = Bytes> + Send>,
) -> Result<(), h2::Error> {
    for piece in pieces {
        if !piece.is_empty() {
            stream.send(piece, false)?;
        }
        tokio::task::yield_now().await;
    }
    stream.send(Bytes::new(), true)
}

/// A request stream reset (CANCEL) if it is dropped before its body
/// ended: the server must never take a body cut short for a whole one.
struct ResetUnlessEnded {
    stream: h2::SendStream<Bytes>,
    ended: bool,
}

impl ResetUnlessEnded {
    fn send(&mut self, data: Bytes, end: bool) -> Result<(), h2::Error> {
        self.stream.send_data(data, end)?;
        self.ended |= end;
        Ok(())
    }
}

impl Drop for ResetUnlessEnded {
    fn drop(&mut self) {
        if !self.ended {
            self.stream.send_reset(Reason::CANCEL);
        }
    }
}

/// The next piece of a response body, its window given back at once;
/// `None` at its end.
pub(super) async fn chunk(body: &mut RecvStream) -> Result<Option<Bytes>, ClientError> {
    match body.data().await {
        None => Ok(None),
        Some(Ok(data)) => {
            // Fails only for a stream already gone; the next read says so.
            let _ = body.flow_control().release_capacity(data.len());
            Ok(Some(data))
        }
        // RFC 9113 §8.1: a server that has sent its whole response may
        // reset the stream with NO_ERROR to stop the request's body; that
        // ends the body, it does not fail it.
        Some(Err(e)) if e.reason() == Some(Reason::NO_ERROR) && !e.is_io() => Ok(None),
        Some(Err(e)) => Err(ClientError::Broken(e.to_string())),
    }
}

/// Whether HTTP/2 says the request was not processed (RFC 9113 §8.7): a
/// graceful GOAWAY that came before its stream (h2 fails only streams
/// above the GOAWAY's last stream id, or not yet opened, this way; a
/// connection that breaks under a processed stream fails it otherwise),
/// or a REFUSED_STREAM reset.
fn unprocessed(e: &h2::Error) -> bool {
    e.is_remote()
        && ((e.is_go_away() && e.reason() == Some(Reason::NO_ERROR))
            || (e.is_reset() && e.reason() == Some(Reason::REFUSED_STREAM)))
}
