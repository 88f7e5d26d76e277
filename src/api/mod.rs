//! The psdb.v1alpha1 API as bytes: generated message types, the Connect
//! protocol's framing and compression, and its error type. No I/O.

pub mod compression;
pub mod connect;
pub mod effort;
pub mod error;
pub mod pb;
pub mod row_batch;
pub mod row_view;
mod s2_stream;
pub mod stream_coding;
pub mod strict_text;
mod text_fields;

pub use compression::Encoding;
pub use connect::{Codec, Framing};
pub use error::{ApiError, Code};

/// URL path prefix of every RPC.
pub const SERVICE_PREFIX: &str = "/psdb.v1alpha1.Database/";

/// A response header of our gateway (not part of the psdb API; other
/// servers omit it): the largest request body it takes now, in bytes, so a
/// client can refuse a larger request itself instead of uploading it.
pub const MAX_REQUEST_BYTES_HEADER: &str = "myquic-max-request-bytes";

/// A response header of our gateway (not part of the psdb API): the
/// encodings it takes as the HTTP `Content-Encoding` of a whole streaming
/// request body, envelope and all. Connect compresses a streaming request
/// per message, behind a length prefix that is known only once the
/// message is compressed; a body coding lets the sidecar send a large
/// statement while it compresses it (`api::stream_coding`).
pub const BODY_ENCODING_HEADER: &str = "myquic-body-encoding";

/// A request header of our sidecar (not part of the psdb API), value `1`:
/// it takes text fields that are `bytes` in our proto and `string` in the
/// published one (error and warning messages, column names) with bytes
/// that are not UTF-8, so the gateway sends them unaltered. Without it a
/// protobuf client gets valid UTF-8 ([`strict_text`]).
pub const RAW_TEXT_HEADER: &str = "myquic-raw-text";

/// The service's methods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    CreateSession,
    Execute,
    StreamExecute,
    Prepare,
    CloseSession,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Self::CreateSession,
        Self::Execute,
        Self::StreamExecute,
        Self::Prepare,
        Self::CloseSession,
    ];

    /// Resolves a request path such as `/psdb.v1alpha1.Database/Execute`.
    pub fn from_path(path: &str) -> Option<Self> {
        match path.strip_prefix(SERVICE_PREFIX)? {
            "CreateSession" => Some(Self::CreateSession),
            "Execute" => Some(Self::Execute),
            "StreamExecute" => Some(Self::StreamExecute),
            "Prepare" => Some(Self::Prepare),
            "CloseSession" => Some(Self::CloseSession),
            _ => None,
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            Self::CreateSession => "/psdb.v1alpha1.Database/CreateSession",
            Self::Execute => "/psdb.v1alpha1.Database/Execute",
            Self::StreamExecute => "/psdb.v1alpha1.Database/StreamExecute",
            Self::Prepare => "/psdb.v1alpha1.Database/Prepare",
            Self::CloseSession => "/psdb.v1alpha1.Database/CloseSession",
        }
    }

    pub fn name(self) -> &'static str {
        &self.path()[SERVICE_PREFIX.len()..]
    }

    pub fn is_streaming(self) -> bool {
        self == Self::StreamExecute
    }
}
