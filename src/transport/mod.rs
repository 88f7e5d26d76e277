//! The network edges: TLS, HTTP/3 over QUIC (quinn + h3) and HTTP/2 /
//! HTTP/1.1 over TLS (hyper), servers and client. Everything here moves
//! bytes; what they mean is decided by the handler behind it.

pub mod client;
pub mod h2_server;
pub mod h3_server;
pub mod quic;
pub mod tcp;
pub mod tls;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
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

/// A request with its whole body, as a handler sees it.
pub struct Request {
    pub method: http::Method,
    pub path: String,
    pub headers: HeaderMap,
    /// The body, or why it could not be read (e.g. over the size limit).
    pub body: Result<Bytes, BodyError>,
    pub version: HttpVersion,
}

/// A request body that could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BodyError {
    TooLarge { limit: usize },
    Broken(String),
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
}

impl Chunks {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            keepalive: None,
        }
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
        let Some((every, chunk)) = &self.keepalive else {
            return self.rx.recv().await;
        };
        // A ready chunk never arms the timer.
        match tokio::time::timeout(*every, self.rx.recv()).await {
            Ok(next) => next,
            Err(_) => Some(chunk.clone()),
        }
    }
}

/// What serves requests behind both transports.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + Send>>;
}
