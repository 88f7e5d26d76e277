//! The network edges: TLS, HTTP/3 over QUIC (quinn + h3) and HTTP/2 /
//! HTTP/1.1 over TLS (hyper), servers and client. Everything here moves
//! bytes; what they mean is decided by the handler behind it.

pub mod activity;
pub mod admission;
pub mod client;
mod client_h2;
pub mod congestion;
pub mod counting_io;
pub mod h2_server;
pub mod h3_server;
pub mod link;
pub mod quic;
pub mod run_to_end;
pub mod tcp;
pub mod tls;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, StatusCode};
use tokio::sync::mpsc;

/// Which HTTP version carried a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpVersion {
    Http3,
    Http2,
    Http1,
}

impl HttpVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http3 => "h3",
            Self::Http2 => "h2",
            Self::Http1 => "http/1.1",
        }
    }
}

/// A request as a handler sees it: its headers, and its body not yet read.
pub struct Request {
    pub method: http::Method,
    /// As the client sent it ([`Request::path`] reads its path in place).
    pub uri: http::Uri,
    pub headers: HeaderMap,
    /// Read only when the handler asks, after it has checked the headers:
    /// an anonymous caller never makes the server buffer a body.
    pub body: RequestBody,
    pub version: HttpVersion,
    /// The connection's place in its peer's quota of connections that have
    /// not authenticated yet; the handler releases it on success.
    pub peer: admission::PeerSlot,
    /// The connection's link, for choosing how hard to compress.
    pub link: link::Link,
}

impl Request {
    pub fn path(&self) -> &str {
        self.uri.path()
    }
}

/// A request body still on the wire. Dropping it unread tells the client
/// to stop sending (HTTP/2 `RST_STREAM`, QUIC `STOP_SENDING`; HTTP/1.1
/// closes the connection after the response).
pub struct RequestBody {
    /// The transport's own ceiling; the handler may ask for less.
    cap: usize,
    source: Box<dyn BodySource>,
}

/// Where a transport's request body comes from, piece by piece as it
/// arrives; nothing is read before the handler asks.
pub trait BodySource: Send {
    /// The next piece of the body; `None` at its end.
    fn poll_piece(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, BodyError>>;
}

impl RequestBody {
    /// A body read from `source`, refused past `cap` bytes (the
    /// transport's size limit) whatever the handler asks.
    pub fn new(cap: usize, source: impl BodySource + 'static) -> Self {
        Self {
            cap,
            source: Box::new(source),
        }
    }

    /// The whole body, or why it could not be read: one over `limit`
    /// bytes (or the transport's cap, if lower) is refused as soon as it
    /// passes it; `deadline` bounds a client that sends it slowly or not
    /// at all.
    pub async fn read(self, limit: usize, deadline: Duration) -> Result<Bytes, BodyError> {
        // A body in one piece (most are) is taken as it is, uncopied.
        let mut first: Option<Bytes> = None;
        let mut joined = BytesMut::new();
        self.read_with(limit, deadline, |piece| {
            match first.take() {
                None if joined.is_empty() => first = Some(piece),
                None => joined.extend_from_slice(&piece),
                Some(earlier) => {
                    joined.reserve(earlier.len() + piece.len());
                    joined.extend_from_slice(&earlier);
                    joined.extend_from_slice(&piece);
                }
            }
            true
        })
        .await?;
        Ok(first.unwrap_or_else(|| joined.freeze()))
    }

    /// Hands each piece of the body to `take` as it arrives (so the
    /// handler can decode it meanwhile), with [`RequestBody::read`]'s
    /// limits; `take` returning false stops the reading
    /// ([`BodyError::Stopped`]: the handler knows why) and the client is
    /// told to stop sending.
    pub async fn read_with(
        mut self,
        limit: usize,
        deadline: Duration,
        mut take: impl FnMut(Bytes) -> bool + Send,
    ) -> Result<(), BodyError> {
        let limit = limit.min(self.cap);
        let body = async {
            let mut seen = 0usize;
            while let Some(piece) = std::future::poll_fn(|cx| self.source.poll_piece(cx)).await? {
                seen = seen.saturating_add(piece.len());
                if seen > limit {
                    return Err(BodyError::TooLarge { limit });
                }
                if !piece.is_empty() && !take(piece) {
                    return Err(BodyError::Stopped);
                }
            }
            Ok(())
        };
        tokio::time::timeout(deadline, body)
            .await
            .unwrap_or(Err(BodyError::TimedOut { after: deadline }))
    }
}

/// A request body that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    TooLarge {
        limit: usize,
    },
    TimedOut {
        after: Duration,
    },
    Broken(String),
    /// The handler stopped reading it (see [`RequestBody::read_with`]).
    Stopped,
}

/// What a server allows a connection before it has proven itself, and at
/// most at once.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// The TLS (or QUIC) handshake must finish within this.
    pub tls_handshake: Duration,
    /// Request headers must arrive within this once they are due: HTTP/1.1
    /// per request; HTTP/2's connection preface, and HTTP/2 PINGs must be
    /// answered within it; each HTTP/3 request's header frame.
    pub request_headers: Duration,
    /// Concurrent requests (streams) per HTTP/2 or QUIC connection.
    pub max_streams: u32,
    /// Connections one IP address may hold before one of its requests has
    /// authenticated (handshaking, idle, or only refused requests).
    pub max_pending_per_peer: usize,
}

/// A response: headers now, body either whole or as a bounded stream of
/// chunks (the sender stops when the client stops reading).
pub struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Body,
}

pub enum Body {
    Full(Bytes),
    Stream(Chunks),
}

/// A streamed body: chunks from a bounded channel (the producer stops
/// when the transport drops this, i.e. when the client stops reading),
/// and optionally a chunk to write whenever the producer stays silent: on
/// HTTP/3 only a write reveals a client that has gone.
pub struct Chunks {
    rx: mpsc::Receiver<Bytes>,
    keepalive: Option<(Duration, Bytes)>,
    /// What fills the channel, driven while the body is read (see
    /// [`Chunks::with_producer`]).
    producer: Option<run_to_end::RunToEnd>,
    /// What [`Chunks::first_ready`] took before the response head left:
    /// the next thing [`Chunks::next`] returns.
    first: Option<Option<Bytes>>,
}

impl Chunks {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            keepalive: None,
            producer: None,
            first: None,
        }
    }

    /// Runs `producer` on the task that writes the body, whenever it waits
    /// for a chunk: no task of its own, no wake-up across threads per
    /// chunk. Dropped before its end (the client went away), it finishes
    /// in a task of its own, seeing the channel closed.
    pub fn with_producer(mut self, producer: run_to_end::RunToEnd) -> Self {
        self.producer = Some(producer);
        self
    }

    /// Writes `chunk` after each `every` of silence. It must mean nothing
    /// to the client (an empty DATA frame cannot serve: h3 clients read it
    /// as the end of the body).
    pub fn with_keepalive(mut self, every: Duration, chunk: Bytes) -> Self {
        self.keepalive = Some((every, chunk));
        self
    }

    /// Waits, at most `within`, until the first chunk is made (or the
    /// body ended), driving the producer: a response head sent before its
    /// first chunk leaves in a write of its own (hyper's HTTP/2 flushes the
    /// HEADERS frame while the statement runs), one sent with it shares the
    /// write, which for a small result is the whole response. A statement
    /// slower than `within` gets its head then, as before.
    pub async fn first_ready(&mut self, within: Duration) {
        if self.first.is_none()
            && let Some(first) = self.produced_within(Some(within)).await
        {
            self.first = Some(first);
        }
    }

    /// The next chunk to write; `None` at the end of the body.
    pub async fn next(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return first;
        }
        let every = self.keepalive.as_ref().map(|(every, _)| *every);
        match self.produced_within(every).await {
            Some(next) => next,
            None => self.keepalive.as_ref().map(|(_, chunk)| chunk.clone()),
        }
    }

    /// The next chunk, or the end of the body (`Some(None)`), driving the
    /// producer; `None` if neither came within `within`. Cancel safe: the
    /// producer stays in `self`, a chunk not yet received in the channel.
    async fn produced_within(&mut self, within: Option<Duration>) -> Option<Option<Bytes>> {
        let Self { rx, producer, .. } = self;
        let recv = async {
            match within {
                // A ready chunk never arms the timer.
                Some(within) => tokio::time::timeout(within, rx.recv()).await.ok(),
                None => Some(rx.recv().await),
            }
        };
        // The producer first, so what it can make now is read at once.
        let drive = std::future::poll_fn(|cx| {
            if let Some(work) = producer.as_mut()
                && Pin::new(work).poll(cx).is_ready()
            {
                *producer = None;
            }
            // Never the body's end: that is the channel's to tell.
            std::task::Poll::<Option<Option<Bytes>>>::Pending
        });
        tokio::select! {
            biased;
            next = drive => next,
            next = recv => next,
        }
    }
}

/// What serves requests behind both transports.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + Send>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// A body whose producer sends `chunk` once `go` fires, then ends.
    fn body(go: oneshot::Receiver<()>, chunk: &'static [u8]) -> Chunks {
        let (tx, rx) = mpsc::channel(2);
        let producer = run_to_end::RunToEnd::new(async move {
            let _ = go.await;
            let _ = tx.send(Bytes::from_static(chunk)).await;
        });
        Chunks::new(rx).with_producer(producer)
    }

    /// A chunk made at once is taken before the head leaves, and is still
    /// the body's first; the end follows.
    #[tokio::test]
    async fn the_first_chunk_is_taken_before_the_head() {
        let (go, ready) = oneshot::channel();
        go.send(()).unwrap();
        let mut chunks = body(ready, b"rows");
        chunks.first_ready(Duration::from_secs(3600)).await;
        assert_eq!(chunks.first, Some(Some(Bytes::from_static(b"rows"))));
        assert_eq!(chunks.next().await.as_deref(), Some(&b"rows"[..]));
        assert_eq!(chunks.next().await, None);
    }

    /// A producer slower than the wait: the head leaves without a chunk,
    /// and nothing is lost or repeated.
    #[tokio::test]
    async fn a_slow_first_chunk_is_not_waited_for_or_lost() {
        let (go, ready) = oneshot::channel();
        let mut chunks = body(ready, b"late");
        chunks.first_ready(Duration::from_millis(1)).await;
        assert_eq!(chunks.first, None);
        go.send(()).unwrap();
        assert_eq!(chunks.next().await.as_deref(), Some(&b"late"[..]));
        assert_eq!(chunks.next().await, None);
    }

    /// A silent producer still gets its keepalive chunks written.
    #[tokio::test]
    async fn silence_writes_the_keepalive() {
        let (go, ready) = oneshot::channel();
        let mut chunks =
            body(ready, b"late").with_keepalive(Duration::from_millis(1), Bytes::from_static(b"."));
        assert_eq!(chunks.next().await.as_deref(), Some(&b"."[..]));
        go.send(()).unwrap();
        assert_eq!(chunks.next().await.as_deref(), Some(&b"late"[..]));
        assert_eq!(chunks.next().await, None);
    }
}
