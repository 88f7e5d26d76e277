//! Logging setup. Info level carries no SQL text and no secrets; SQL
//! appears only at debug.

use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Human,
    Json,
}

/// Installs the global subscriber; `RUST_LOG` overrides `default_level`.
pub fn init(format: LogFormat, default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, not in log files.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// A W3C trace id (`traceparent`), so the sidecar's and the gateway's
/// logs of one request can be joined: the sidecar makes one per client
/// command whose span it logs (debug level), the client sends it on every
/// request of that command, and the gateway logs it in its request span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceId(pub u128);

tokio::task_local! {
    static CURRENT_TRACE: TraceId;
}

impl TraceId {
    pub fn random() -> Self {
        // All-zero is invalid in W3C trace context.
        Self(rand::random::<u128>().max(1))
    }

    /// The trace of the task's current command, if it has one (the
    /// sidecar gives its commands one only when it logs them).
    pub fn current() -> Option<Self> {
        CURRENT_TRACE.try_with(|t| *t).ok()
    }

    /// Runs `fut` with this as the current trace.
    pub async fn scope<F: std::future::Future>(self, fut: F) -> F::Output {
        CURRENT_TRACE.scope(self, fut).await
    }

    /// A `traceparent` header value for one request: this trace, a fresh
    /// span id, sampled.
    pub fn traceparent(self) -> String {
        let span: u64 = rand::random::<u64>().max(1);
        format!("00-{:032x}-{span:016x}-01", self.0)
    }

    /// The trace id of a `traceparent` header, if well formed.
    pub fn from_traceparent(value: &str) -> Option<Self> {
        let mut parts = value.trim().split('-');
        let (version, trace) = (parts.next()?, parts.next()?);
        if version.len() != 2 || trace.len() != 32 {
            return None;
        }
        let id = u128::from_str_radix(trace, 16).ok()?;
        (id != 0).then_some(Self(id))
    }
}

impl std::fmt::Display for TraceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips() {
        let id = TraceId::random();
        let header = id.traceparent();
        assert_eq!(header.len(), 55, "{header}");
        assert_eq!(TraceId::from_traceparent(&header), Some(id));
        assert_eq!(TraceId::from_traceparent("00-0000-01"), None);
        assert_eq!(
            TraceId::from_traceparent(&format!("00-{}-{}-01", "0".repeat(32), "1".repeat(16))),
            None
        );
    }
}
