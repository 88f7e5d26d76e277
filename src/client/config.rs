//! What a [`Client`](super::Client) needs to know: where the gateway is, how
//! to trust and authenticate to it, and the timings that decide how fast it
//! gives up on HTTP/3 and comes back to it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::api::Encoding;
use crate::config::UpstreamConfig;
pub use crate::config::{ConfigError, TransportPreference, defaults};
use crate::transport::quic::Congestion;
use crate::transport::tcp::TcpCongestion;
use crate::transport::tls;

/// Reconnect delays: the n-th consecutive failed attempt waits a uniformly
/// random time in `[min, min(max, min·2ⁿ)]` ("full jitter" above a floor),
/// so that many sidecars do not reconnect in lockstep after a gateway
/// restart, and a gateway that is down is not hammered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    pub min: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            min: Duration::from_millis(100),
            max: Duration::from_secs(5),
        }
    }
}

impl Backoff {
    /// The delay before attempt `failures + 1`.
    pub fn delay(&self, failures: u32) -> Duration {
        let cap = self
            .min
            .saturating_mul(1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX))
            .min(self.max)
            .max(self.min);
        jitter_between(self.min, cap)
    }
}

/// A uniformly random duration in `[low, high]`.
pub(crate) fn jitter_between(low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    let span = (high - low).as_micros().min(u128::from(u64::MAX)) as u64;
    low + Duration::from_micros(rand::random_range(0..=span))
}

/// Everything a client needs. [`ClientConfig::new`] fills in the defaults.
#[derive(Clone)]
pub struct ClientConfig {
    /// The gateway's `host:port`, resolved anew at each connection attempt
    /// (so a gateway that moves is followed). HTTP/3 uses UDP and HTTP/2
    /// TCP on this same port.
    pub gateway: String,
    /// More gateways of the same tier (`host:port`), tried after
    /// `gateway`'s addresses; every one must carry `server_name`.
    pub tier: Vec<String>,
    /// The name its certificate must carry.
    pub server_name: String,
    /// Built by the caller (system roots or a CA file, e.g. with
    /// [`crate::transport::tls::client_config`]: TLS 1.3 only, verification
    /// always on). ALPN is set per transport here.
    pub tls: Arc<rustls::ClientConfig>,
    /// HTTP Basic credentials sent with every request.
    pub username: String,
    pub password: String,
    pub transport: TransportPreference,
    /// In `auto`, how long a QUIC handshake may take before HTTP/2 is used
    /// instead. A handshake on a working path takes one or two round
    /// trips; 1 s leaves room for one lost packet and keeps the fallback
    /// well within the 3 s budget.
    pub h3_handshake_timeout: Duration,
    /// In `auto`, how long packets sent on an established HTTP/3
    /// connection may go unanswered (nothing at all heard from the
    /// gateway) before new requests stop going to it and HTTP/2 is
    /// connected in parallel. Well below `idle_timeout`, so that requests
    /// are not written into a black hole for its whole length; a live path
    /// answers within a round trip, so a slow one is not mistaken for it.
    pub h3_silence_timeout: Duration,
    /// While on HTTP/2 in `auto`, how often to try HTTP/3 again (each wait
    /// jittered ±50 %).
    pub probe_interval: Duration,
    /// QUIC and HTTP/2 PING interval. With `idle_timeout` it bounds how long
    /// a black-holed path goes unnoticed.
    pub keep_alive: Duration,
    /// A connection that hears nothing from the gateway for this long is
    /// dead (QUIC idle timeout; HTTP/2 PING acknowledgement timeout).
    /// Three keep-alive intervals: one lost PING is not enough to kill it.
    pub idle_timeout: Duration,
    /// How long a request waits for a connection before it fails with
    /// [`CallError::Unavailable`](super::CallError::Unavailable). Also the
    /// bound of each TCP/TLS connect and of an HTTP/3-only handshake.
    pub connect_timeout: Duration,
    pub reconnect_backoff: Backoff,
    /// Request bodies at least this large are compressed (if the gateway has
    /// said it accepts a codec we offer); smaller ones are not worth it.
    pub compress_min_bytes: usize,
    /// Encodings offered for responses and used for requests, most
    /// preferred first.
    pub accept_encodings: Vec<Encoding>,
    /// Largest response message (and streaming envelope), compressed or
    /// not. The gateway's unary results stop at 64 MiB by default.
    pub max_message_bytes: usize,
    pub congestion: Congestion,
    /// TCP congestion controller of the HTTP/2 connection; `None` leaves
    /// the host's default.
    pub tcp_congestion: Option<TcpCongestion>,
}

impl ClientConfig {
    pub fn new(
        gateway: impl Into<String>,
        server_name: impl Into<String>,
        tls: Arc<rustls::ClientConfig>,
        username: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        Self {
            gateway: gateway.into(),
            tier: Vec::new(),
            server_name: server_name.into(),
            tls,
            username: username.into(),
            password: password.into(),
            transport: TransportPreference::Auto,
            h3_handshake_timeout: defaults::H3_HANDSHAKE_TIMEOUT,
            h3_silence_timeout: defaults::H3_SILENCE_TIMEOUT,
            probe_interval: defaults::PROBE_INTERVAL,
            keep_alive: defaults::KEEP_ALIVE,
            idle_timeout: defaults::IDLE_TIMEOUT,
            connect_timeout: defaults::CONNECT_TIMEOUT,
            reconnect_backoff: Backoff::default(),
            compress_min_bytes: defaults::COMPRESS_MIN_BYTES,
            accept_encodings: vec![Encoding::Zstd, Encoding::S2, Encoding::Snappy],
            max_message_bytes: 128 << 20,
            congestion: Congestion::default(),
            tcp_congestion: None,
        }
    }

    /// The client `[sidecar.upstream]` describes: the gateway's address
    /// and certificate name from its URL, its CA file (else the system's
    /// roots), the password resolved, the timings and codecs as given.
    /// What the sidecar connects with, and what `myquic doctor` checks.
    pub fn from_upstream(up: &UpstreamConfig) -> Result<Self, ConfigError> {
        let (host, port) = up.authority()?;
        let roots = match &up.ca {
            Some(path) => tls::roots_from_pem(path).map_err(|e| ConfigError::Invalid {
                key: "sidecar.upstream.ca",
                reason: e.to_string(),
            })?,
            None => tls::system_roots(),
        };
        let tls = tls::client_config(roots, &[]).map_err(|e| ConfigError::Invalid {
            key: "sidecar.upstream",
            reason: e.to_string(),
        })?;
        let authority = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let server_name = up.server_name.clone().unwrap_or(host);
        let password = up.password.resolve("sidecar.upstream.password")?;
        let mut c = Self::new(authority, server_name, tls, up.username.clone(), password);
        c.tier = up.tier()?.split_off(1);
        c.transport = up.transport;
        c.h3_handshake_timeout = up.h3_handshake_timeout;
        c.probe_interval = up.probe_interval;
        c.keep_alive = up.keep_alive;
        c.idle_timeout = up.idle_timeout;
        c.connect_timeout = up.connect_timeout;
        c.compress_min_bytes = up.compress_min_bytes;
        // Checked by `SidecarConfig::validate`.
        c.accept_encodings = up
            .compression
            .iter()
            .filter_map(|name| Encoding::from_name(name))
            .collect();
        c.congestion = up.congestion;
        c.tcp_congestion = up.tcp_congestion;
        Ok(c)
    }

    /// Checks what can be checked without the network.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid =
            |field: &'static str, reason: String| Err(ConfigError::Client { field, reason });
        for gateway in std::iter::once(&self.gateway).chain(&self.tier) {
            match gateway.rsplit_once(':') {
                Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
                _ => return invalid("gateway", format!("{gateway:?} is not host:port")),
            }
        }
        if let Err(e) = rustls::pki_types::ServerName::try_from(self.server_name.as_str()) {
            return invalid("server_name", e.to_string());
        }
        if self.keep_alive.is_zero() || self.keep_alive >= self.idle_timeout {
            return invalid(
                "keep_alive",
                "must be positive and shorter than idle_timeout".into(),
            );
        }
        for (field, d) in [
            ("h3_handshake_timeout", self.h3_handshake_timeout),
            ("h3_silence_timeout", self.h3_silence_timeout),
            ("probe_interval", self.probe_interval),
            ("connect_timeout", self.connect_timeout),
            ("reconnect_backoff", self.reconnect_backoff.min),
        ] {
            if d.is_zero() {
                return invalid(field, "must be positive".into());
            }
        }
        if self.reconnect_backoff.max < self.reconnect_backoff.min {
            return invalid("reconnect_backoff", "max is below min".into());
        }
        if self.accept_encodings.contains(&Encoding::Identity) {
            return invalid("accept_encodings", "identity is implied".into());
        }
        if self.max_message_bytes == 0 {
            return invalid("max_message_bytes", "must be positive".into());
        }
        Ok(())
    }
}

/// Never prints the password.
impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("gateway", &self.gateway)
            .field("server_name", &self.server_name)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("transport", &self.transport)
            .field("h3_handshake_timeout", &self.h3_handshake_timeout)
            .field("h3_silence_timeout", &self.h3_silence_timeout)
            .field("probe_interval", &self.probe_interval)
            .field("keep_alive", &self.keep_alive)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("reconnect_backoff", &self.reconnect_backoff)
            .field("compress_min_bytes", &self.compress_min_bytes)
            .field("accept_encodings", &self.accept_encodings)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("congestion", &self.congestion)
            .field("tcp_congestion", &self.tcp_congestion)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the sidecar connects with and the doctor checks: the
    /// `[sidecar.upstream]` keys, carried over one by one.
    #[test]
    fn built_from_the_upstream_settings() {
        tls::install_crypto_provider();
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "api-secret\n").unwrap();
        let up = UpstreamConfig {
            url: "https://[::1]:9000/".into(),
            username: "app".into(),
            password: crate::config::Secret::file(&pw),
            transport: TransportPreference::Http2,
            keep_alive: Duration::from_millis(500),
            compression: vec!["gzip".into()],
            ..UpstreamConfig::default()
        };
        let c = ClientConfig::from_upstream(&up).unwrap();
        assert_eq!(
            (c.gateway.as_str(), c.server_name.as_str()),
            ("[::1]:9000", "::1")
        );
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("app", "api-secret")
        );
        assert_eq!(c.transport, TransportPreference::Http2);
        assert_eq!(c.keep_alive, Duration::from_millis(500));
        assert_eq!(c.idle_timeout, defaults::IDLE_TIMEOUT);
        assert_eq!(c.accept_encodings, [Encoding::Gzip]);
        c.validate().unwrap();
        let named = UpstreamConfig {
            server_name: Some("gw.internal".into()),
            ..up.clone()
        };
        let c = ClientConfig::from_upstream(&named).unwrap();
        assert_eq!(c.server_name, "gw.internal");
        let unset = UpstreamConfig {
            password: crate::config::Secret::env("MYQUIC_TEST_UNSET"),
            ..up
        };
        let e = ClientConfig::from_upstream(&unset).unwrap_err().to_string();
        assert!(e.starts_with("sidecar.upstream.password: "), "{e}");
    }

    #[test]
    fn backoff_grows_with_jitter_and_stays_bounded() {
        let b = Backoff::default();
        assert_eq!(b.delay(0), Duration::from_millis(100));
        for failures in [1, 3, 10, 40, u32::MAX] {
            for _ in 0..50 {
                let d = b.delay(failures);
                assert!(d >= b.min && d <= b.max, "{failures}: {d:?}");
            }
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|_| b.delay(6)).collect();
        assert!(spread.len() > 1, "jittered");
        let top = (0..200).map(|_| b.delay(3)).max().unwrap();
        assert!(top <= Duration::from_millis(800));
    }
}
