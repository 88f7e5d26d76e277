//! The gateway's settings (`[gateway]` in the config file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{ConfigError, Secret};
use crate::transport::quic::Congestion;
use crate::transport::tcp::TcpCongestion;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// HTTP/3 on this UDP port and HTTP/2 + HTTP/1.1 on the same TCP port.
    pub listen: SocketAddr,
    pub tls: TlsConfig,
    pub backend: BackendConfig,
    pub credentials: Vec<Credential>,
    pub sessions: SessionConfig,
    pub limits: Limits,
    /// QUIC congestion controller: `bbr`, `cubic` or `newreno`.
    pub congestion: Congestion,
    /// TCP congestion controller of HTTP/2 connections (`bbr`, `cubic`,
    /// `reno`, …), set on the listener and so on every accepted
    /// connection; unset: the host's default.
    pub tcp_congestion: Option<TcpCongestion>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM certificate chain and private key.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Development mode: generate a self-signed certificate at start and
    /// write it (PEM) here so that clients can trust it.
    pub self_signed_cert_out: Option<PathBuf>,
    /// Names and IP addresses the self-signed certificate is valid for.
    pub self_signed_names: Vec<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    /// `host:port` of the MySQL/MariaDB server ...
    pub address: Option<String>,
    /// ... or its unix socket (takes precedence).
    pub socket: Option<PathBuf>,
    /// Connections kept open per credential so a new session costs no
    /// backend handshake.
    pub warm_connections: usize,
    /// Upper bound of backend connections per credential.
    pub max_connections: usize,
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
}

/// One API login and the backend account it maps to.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credential {
    /// HTTP Basic user name clients present.
    pub username: String,
    pub password: Secret,
    /// Backend MySQL account (defaults to `username`).
    pub backend_user: Option<String>,
    /// Backend password (defaults to the API password).
    pub backend_password: Option<Secret>,
    /// Default database of new sessions.
    pub database: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// HMAC key that signs sessions. Unset: a random key per process, so
    /// sessions do not survive a restart (and must not, since their
    /// backend connections do not either).
    pub signing_key: Option<Secret>,
    /// A session unused this long is closed; its transaction rolled back.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    pub max_sessions: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, after decompression.
    pub max_request_bytes: usize,
    /// Largest unary `Execute` result; past it the client is told to use
    /// `StreamExecute`.
    pub max_result_bytes: usize,
    /// Target size of each `StreamExecute` message.
    pub stream_message_bytes: usize,
    /// A statement running longer is killed at the backend.
    #[serde(with = "humantime_serde")]
    pub query_timeout: Duration,
    /// Response bodies smaller than this are not compressed.
    pub compress_min_bytes: usize,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8443)),
            tls: TlsConfig::default(),
            backend: BackendConfig::default(),
            credentials: Vec::new(),
            sessions: SessionConfig::default(),
            limits: Limits::default(),
            congestion: Congestion::default(),
            tcp_congestion: None,
        }
    }
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            address: None,
            socket: None,
            warm_connections: 4,
            max_connections: 200,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            signing_key: None,
            idle_timeout: Duration::from_secs(300),
            max_sessions: 10_000,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_request_bytes: 16 << 20,
            max_result_bytes: 64 << 20,
            stream_message_bytes: 256 << 10,
            query_timeout: Duration::from_secs(900),
            compress_min_bytes: 1024,
        }
    }
}

impl GatewayConfig {
    /// Cross-field checks, once, at load.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: &str| {
            Err(ConfigError::Invalid {
                key,
                reason: reason.to_string(),
            })
        };
        if self.backend.address.is_none() && self.backend.socket.is_none() {
            return invalid("gateway.backend", "set address or socket");
        }
        if self.credentials.is_empty() {
            return invalid(
                "gateway.credentials",
                "at least one credential is required: the API never runs unauthenticated",
            );
        }
        let has_files = self.tls.cert.is_some() && self.tls.key.is_some();
        let self_signed = self.tls.self_signed_cert_out.is_some();
        if has_files == self_signed {
            return invalid(
                "gateway.tls",
                "set cert and key, or self_signed_cert_out for a development certificate",
            );
        }
        if self.backend.max_connections == 0 || self.sessions.max_sessions == 0 {
            return invalid("gateway.backend.max_connections", "must be positive");
        }
        if let Some(cc) = self.tcp_congestion
            && let Err(e) = cc.check()
        {
            return invalid("gateway.tcp_congestion", &e);
        }
        if self.limits.stream_message_bytes == 0 || self.limits.max_request_bytes == 0 {
            return invalid("gateway.limits", "sizes must be positive");
        }
        Ok(())
    }
}
