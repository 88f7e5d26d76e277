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
}

impl Chunks {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            keepalive: None,
            producer: None,
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

    /// The next chunk to write; `None` at the end of the body.
    pub async fn next(&mut self) -> Option<Bytes> {
        let Self {
            rx,
            keepalive,
            producer,
        } = self;
        let recv = async {
            let Some((every, chunk)) = keepalive else {
                return rx.recv().await;
            };
            // A ready chunk never arms the timer.
            match tokio::time::timeout(*every, rx.recv()).await {
                Ok(next) => next,
                Err(_) => Some(chunk.clone()),
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
            std::task::Poll::<Option<Bytes>>::Pending
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
