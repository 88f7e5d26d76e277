//! Connect protocol errors: the one error type of the API boundary.
//!
//! SQL errors are *not* these: they travel inside a successful
//! `ExecuteResponse.error`. An [`ApiError`] means the request itself failed
//! (auth, framing, limits, session misuse) and becomes a non-200 response.

use std::fmt;

/// Connect error codes (connectrpc.com protocol reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Canceled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
}

impl Code {
    /// The wire name, e.g. `"unauthenticated"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Canceled => "canceled",
            Self::Unknown => "unknown",
            Self::InvalidArgument => "invalid_argument",
            Self::DeadlineExceeded => "deadline_exceeded",
            Self::NotFound => "not_found",
            Self::AlreadyExists => "already_exists",
            Self::PermissionDenied => "permission_denied",
            Self::ResourceExhausted => "resource_exhausted",
            Self::FailedPrecondition => "failed_precondition",
            Self::Aborted => "aborted",
            Self::OutOfRange => "out_of_range",
            Self::Unimplemented => "unimplemented",
            Self::Internal => "internal",
            Self::Unavailable => "unavailable",
            Self::DataLoss => "data_loss",
            Self::Unauthenticated => "unauthenticated",
        }
    }

    /// Parses a wire name; unknown names map to [`Code::Unknown`].
    pub fn from_name(name: &str) -> Self {
        const ALL: [Code; 16] = [
            Code::Canceled,
            Code::Unknown,
            Code::InvalidArgument,
            Code::DeadlineExceeded,
            Code::NotFound,
            Code::AlreadyExists,
            Code::PermissionDenied,
            Code::ResourceExhausted,
            Code::FailedPrecondition,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unimplemented,
            Code::Internal,
            Code::Unavailable,
            Code::DataLoss,
            Code::Unauthenticated,
        ];
        ALL.into_iter()
            .find(|c| c.as_str() == name)
            .unwrap_or(Self::Unknown)
    }

    /// HTTP status for a unary error response (Connect spec table).
    pub fn http_status(self) -> u16 {
        match self {
            Self::Canceled => 499,
            Self::Unknown | Self::Internal | Self::DataLoss => 500,
            Self::InvalidArgument | Self::FailedPrecondition | Self::OutOfRange => 400,
            Self::DeadlineExceeded => 504,
            Self::NotFound => 404,
            Self::AlreadyExists | Self::Aborted => 409,
            Self::PermissionDenied => 403,
            Self::ResourceExhausted => 429,
            Self::Unimplemented => 501,
            Self::Unavailable => 503,
            Self::Unauthenticated => 401,
        }
    }

    /// What a client infers from an HTTP status when the body is not a
    /// Connect error (Connect spec).
    pub fn from_http_status(status: u16) -> Self {
        match status {
            400 => Self::Internal,
            401 => Self::Unauthenticated,
            403 => Self::PermissionDenied,
            404 => Self::Unimplemented,
            429 | 502..=504 => Self::Unavailable,
            _ => Self::Unknown,
        }
    }
}

/// A failed API request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Renders the JSON error body. It carries the Connect shape at the top
    /// level and the same object under `error`, which is where
    /// `@planetscale/database` looks (psdb-protocol.md §12.1).
    pub fn to_json(&self) -> Vec<u8> {
        let inner = serde_json::json!({ "code": self.code.as_str(), "message": self.message });
        let body = serde_json::json!({
            "code": self.code.as_str(),
            "message": self.message,
            "error": inner,
        });
        serde_json::to_vec(&body).expect("a JSON value always serialises")
    }

    /// Parses a Connect error body in either shape; `None` if it is not one.
    pub fn from_json(body: &[u8]) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        let obj = value
            .get("error")
            .filter(|e| e.is_object())
            .unwrap_or(&value);
        let code = obj.get("code")?.as_str()?;
        let message = obj.get("message").and_then(|m| m.as_str()).unwrap_or("");
        Some(Self::new(Code::from_name(code), message))
    }
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_body_round_trips_in_both_shapes() {
        let err = ApiError::new(Code::Unauthenticated, "invalid auth credentials");
        assert_eq!(ApiError::from_json(&err.to_json()), Some(err.clone()));
        let flat = br#"{"code":"unauthenticated","message":"invalid auth credentials"}"#;
        assert_eq!(ApiError::from_json(flat), Some(err));
        assert_eq!(Code::Unauthenticated.http_status(), 401);
        assert_eq!(Code::from_name("nope"), Code::Unknown);
    }
}
