//! The gateway's settings (`[gateway]` in the config file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{AdminConfig, ConfigError, ConfigFile, Env, Secret, Section};
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
    pub timeouts: Timeouts,
    /// QUIC congestion controller: `bbr`, `cubic` or `newreno`.
    pub congestion: Congestion,
    /// TCP congestion controller of HTTP/2 connections (`bbr`, `cubic`,
    /// `reno`, …), set on the listener and so on every accepted
    /// connection; unset: the host's default.
    pub tcp_congestion: Option<TcpCongestion>,
    /// Threads of the runtime that serves every connection; 0: one per
    /// CPU core. 1 runs everything on one thread (a tokio current-thread
    /// runtime): a gateway given one core, or sharing a small host, then
    /// makes no cross-thread wake-ups — over HTTP/3 quinn's endpoint and
    /// connection tasks and the request's task woke each other across the
    /// workers, 8–13 context switches and ~5 `futex` per 50 KB answer
    /// against ~4 and none (`benches/results/profiles/gateway.md`).
    pub worker_threads: usize,
    /// Health checks, metrics and `/quitquitquit`.
    pub admin: AdminConfig,
    pub drain: GatewayDrain,
}

/// What SIGTERM (or `/quitquitquit`) does: turn unready, stop accepting
/// and send GOAWAY on every connection (HTTP/2 GOAWAY, HTTP/3 GOAWAY) so
/// clients open new requests elsewhere, let in-flight requests finish for
/// up to `timeout`, then close every session (rolling back transactions
/// left open) and exit.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GatewayDrain {
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// How often readiness checks that the backend answers (a ping on a
    /// pooled connection), rather than per probe.
    #[serde(with = "humantime_serde")]
    pub backend_check_interval: Duration,
}

impl Default for GatewayDrain {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(20),
            backend_check_interval: Duration::from_secs(5),
        }
    }
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
    /// Backend connections all sessions together may hold, shared fairly
    /// among credentials (`gateway::shares`); 0: 80 % of the backend's
    /// `max_connections`, read at start.
    pub max_connections_total: usize,
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// TLS to the backend; unset: `preferred` over TCP, `disabled` on a
    /// unix socket (see [`BackendConfig::tls_mode`]).
    pub tls: Option<BackendTlsMode>,
    /// PEM CA certificate(s) the backend's certificate must chain to;
    /// unset: the system's roots.
    pub tls_ca: Option<PathBuf>,
    /// The name the backend's certificate must be valid for; unset: the
    /// host of `address`.
    pub tls_server_name: Option<String>,
    /// A client certificate chain (PEM) and its key, for backends that
    /// want one (`REQUIRE X509`).
    pub tls_client_cert: Option<PathBuf>,
    pub tls_client_key: Option<PathBuf>,
    /// Plaintext connections to a local backend (unix socket, loopback)
    /// go through the gateway's relay, which gets MariaDB's extended
    /// column metadata (`gateway::extended_metadata`); off: it is looked
    /// up, for LONGTEXT JSON columns only.
    pub relay_extended_metadata: bool,
}

/// Whether the gateway's backend connections use TLS. Whenever TLS is
/// used the server's certificate is verified (chain and name): there is
/// no mode that accepts any certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendTlsMode {
    /// Every connection uses TLS; a server that offers none is refused.
    Required,
    /// TLS, verified, whenever the server offers it; plaintext only with
    /// a server that offers no TLS at all. Decided at the gateway's first
    /// contact with the backend and kept: a server seen offering TLS is
    /// then required to (a later plaintext greeting, the sign of a
    /// downgrade, is refused) until the gateway restarts.
    Preferred,
    /// Plaintext.
    Disabled,
}

impl std::str::FromStr for BackendTlsMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        <Self as clap::ValueEnum>::from_str(s, false)
            .map_err(|_| format!("{s:?} is not required, preferred or disabled"))
    }
}

impl BackendConfig {
    /// The TLS mode in force: the configured one, else `preferred` over
    /// TCP and `disabled` on a unix socket (which never leaves the host).
    pub fn tls_mode(&self) -> BackendTlsMode {
        match (self.tls, &self.socket) {
            (Some(mode), _) => mode,
            (None, Some(_)) => BackendTlsMode::Disabled,
            (None, None) => BackendTlsMode::Preferred,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: &str| {
            Err(ConfigError::Invalid {
                key,
                reason: reason.to_string(),
            })
        };
        if self.socket.is_some() && self.tls.is_some_and(|t| t != BackendTlsMode::Disabled) {
            // mysql_async sends no TLS over a socket (it would ask for it
            // and then not start it).
            return invalid(
                "gateway.backend.tls",
                "TLS is not used on a unix socket (the connection stays on this host): \
                 use address for a TLS connection, or leave tls unset",
            );
        }
        if self.tls_client_cert.is_some() != self.tls_client_key.is_some() {
            return invalid(
                "gateway.backend.tls_client_cert",
                "set tls_client_cert and tls_client_key together",
            );
        }
        let tls_files = self.tls_ca.is_some()
            || self.tls_server_name.is_some()
            || self.tls_client_cert.is_some();
        if tls_files && self.tls_mode() == BackendTlsMode::Disabled {
            return invalid(
                "gateway.backend.tls",
                "tls_ca, tls_server_name or tls_client_cert is set but TLS to the backend is \
                 disabled (the default on a unix socket)",
            );
        }
        Ok(())
    }
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
    /// Most live sessions, shared fairly among credentials (see
    /// `gateway::shares`): when full, an idle unpinned session of the
    /// credential furthest over its share is forgotten for a new one.
    pub max_sessions: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest request body, after decompression; 0: the backend's
    /// max_allowed_packet plus headroom (see `gateway::packet_limit`).
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
    /// How hard to compress each response message is chosen from its
    /// connection's link (`api::effort`): a near link gets it uncompressed
    /// until measured slow. `false`: every message from
    /// `compress_min_bytes` on is compressed with the negotiated encoding
    /// (zstd at level 1), whatever the link.
    pub compression_by_link: bool,
    /// With `compression_by_link`, a connection whose round trip (the
    /// kernel's for HTTP/2, quinn's for HTTP/3) is under this is near.
    #[serde(with = "humantime_serde")]
    pub near_rtt: Duration,
    /// Concurrent requests (streams) on one HTTP/2 or HTTP/3 connection.
    pub max_streams_per_connection: u32,
    /// Connections one IP address may hold before a request on them has
    /// authenticated; more are closed as they arrive.
    pub max_pending_connections_per_peer: usize,
}

/// How long a client may take at each step before a request is
/// authenticated and its body read: what an anonymous or stalled client
/// can hold is bounded in time.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    /// The TLS handshake (TCP) or QUIC handshake.
    #[serde(with = "humantime_serde")]
    pub tls_handshake: Duration,
    /// Request headers once due (HTTP/1.1 per request, the HTTP/2
    /// connection preface and PING answers, each HTTP/3 request).
    #[serde(with = "humantime_serde")]
    pub request_headers: Duration,
    /// A request's whole body, counted from its authenticated headers.
    #[serde(with = "humantime_serde")]
    pub request_body: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            tls_handshake: Duration::from_secs(10),
            request_headers: Duration::from_secs(10),
            request_body: Duration::from_secs(30),
        }
    }
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
            timeouts: Timeouts::default(),
            congestion: Congestion::default(),
            tcp_congestion: None,
            worker_threads: 0,
            admin: AdminConfig::with_port(9902),
            drain: GatewayDrain::default(),
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
            max_connections_total: 0,
            connect_timeout: Duration::from_secs(5),
            tls: None,
            tls_ca: None,
            tls_server_name: None,
            tls_client_cert: None,
            tls_client_key: None,
            relay_extended_metadata: true,
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
            max_request_bytes: 0,
            max_result_bytes: 64 << 20,
            stream_message_bytes: 256 << 10,
            query_timeout: Duration::from_secs(900),
            compress_min_bytes: 1024,
            compression_by_link: true,
            near_rtt: crate::api::effort::NEAR_RTT,
            max_streams_per_connection: 4096,
            max_pending_connections_per_peer: 64,
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
        self.backend.validate()?;
        if self.credentials.is_empty() {
            return invalid(
                "gateway.credentials",
                "at least one credential is required: the API never runs unauthenticated",
            );
        }
        let mut names = std::collections::HashSet::new();
        if let Some(twice) = self.credentials.iter().find(|c| !names.insert(&c.username)) {
            return Err(ConfigError::Invalid {
                key: "gateway.credentials",
                reason: format!("username {:?} is listed twice", twice.username),
            });
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
        if self.limits.stream_message_bytes == 0 {
            return invalid("gateway.limits", "sizes must be positive");
        }
        if self.limits.max_streams_per_connection == 0
            || self.limits.max_pending_connections_per_peer == 0
        {
            return invalid("gateway.limits", "connection limits must be positive");
        }
        let t = &self.timeouts;
        if [t.tls_handshake, t.request_headers, t.request_body].contains(&Duration::ZERO) {
            return invalid("gateway.timeouts", "timeouts must be positive");
        }
        Ok(())
    }
}

impl Section for GatewayConfig {
    fn section(file: ConfigFile) -> Self {
        file.gateway
    }

    fn admin_mut(&mut self) -> &mut AdminConfig {
        &mut self.admin
    }

    fn bind_secrets(&mut self, env: &Env) {
        for cred in &mut self.credentials {
            cred.password.bind(env);
            if let Some(secret) = &mut cred.backend_password {
                secret.bind(env);
            }
        }
        if let Some(key) = &mut self.sessions.signing_key {
            key.bind(env);
        }
        self.admin.bind_secrets(env);
    }
}
