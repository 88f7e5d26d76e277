//! The one error type of a call, sorted by what the caller may do next —
//! above all, whether the statement may have run.

use std::time::Duration;

use crate::api::ApiError;

/// Why a call failed. SQL errors are not here: they arrive in a successful
/// reply (`ExecuteResponse.error`).
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The request was never sent: no working connection to the gateway
    /// within `connect_timeout`. Nothing ran, so the caller may retry it
    /// later or report the gateway as down (the sidecar answers 1105: a
    /// server may not send numbers of the client library's 2000 range).
    #[error("gateway unavailable: no connection within {waited:?}{}", detail(.last_error))]
    Unavailable {
        waited: Duration,
        /// Why the last connection attempt failed, if one did.
        last_error: Option<String>,
    },
    /// The connection failed after the request may have reached the
    /// gateway: the statement may or may not have run, and its session
    /// state is unknown. Never retry it; the sidecar answers MySQL error
    /// 1158 (08S01) and closes the client connection (a transaction in it
    /// is lost).
    #[error("lost the gateway connection during the request; it may have executed: {0}")]
    Lost(String),
    /// The gateway answered with a Connect error (non-200 status, or an
    /// end-of-stream error). Its code says what happened: `unauthenticated`
    /// and `resource_exhausted` refuse the call before it runs; others
    /// (`internal`, `unknown`, `canceled`) may come after it ran. Report it;
    /// retrying the same request will usually fail the same way.
    #[error("gateway error: {0}")]
    Api(ApiError),
    /// The gateway answered something that is not a valid reply. The
    /// request may have run: treat it like [`CallError::Lost`].
    #[error("malformed gateway response: {0}")]
    Protocol(String),
    /// A response message exceeds `max_message_bytes` (compressed or not).
    /// The statement ran; its result cannot be delivered. Use
    /// `stream_execute` for large results, or raise the limit.
    #[error("gateway response exceeds the {limit}-byte message limit")]
    TooLarge { limit: usize },
}

impl CallError {
    /// Whether the statement may have run at the gateway.
    pub fn may_have_executed(&self) -> bool {
        !matches!(self, Self::Unavailable { .. })
    }

    /// The `outcome` label of the request metrics.
    pub fn outcome(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "unavailable",
            Self::Lost(_) => "lost",
            Self::Api(_) => "api_error",
            Self::Protocol(_) => "protocol_error",
            Self::TooLarge { .. } => "too_large",
        }
    }
}

fn detail(last_error: &Option<String>) -> String {
    last_error
        .as_deref()
        .map(|e| format!(" (last attempt: {e})"))
        .unwrap_or_default()
}
