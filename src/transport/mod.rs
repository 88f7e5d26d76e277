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
    Stream(mpsc::Receiver<Bytes>),
}

/// What serves requests behind both transports.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Pin<Box<dyn Future<Output = Response> + Send>>;
}
