//! The sidecar's settings (`[sidecar]` in the config file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{AdminConfig, ConfigError, ConfigFile, Env, Secret, Section, UpstreamConfig};
use crate::api::Encoding;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SidecarConfig {
    /// MySQL protocol listener; loopback unless configured otherwise.
    pub listen: SocketAddr,
    /// An additional unix socket listener.
    pub socket: Option<PathBuf>,
    /// Version string in the handshake; `auto` learns the backend's
    /// `@@version` through the gateway once, at start.
    pub server_version: String,
    /// Most client connections served at once; more are refused with
    /// MySQL's "Too many connections".
    pub max_connections: usize,
    /// Of those, most still logging in at once (greeted, not yet
    /// authenticated); more are refused with "Too many connections".
    /// Clients that never log in then cannot take the slots of those that
    /// do.
    pub max_connections_logging_in: usize,
    /// Time from accepting a connection to its successful login (MySQL's
    /// `connect_timeout`); a client slower than this is disconnected
    /// without a word, as MariaDB does.
    #[serde(with = "humantime_serde")]
    pub login_timeout: Duration,
    /// Threads of the runtime that serves the clients and the gateway
    /// connection; 0: one per CPU core. A sidecar beside one app may be
    /// capped at one core this way: 1 is a tokio current-thread runtime
    /// (a multi-thread runtime of one worker still hands every task
    /// between that worker and the main thread: half the HTTP/3 throughput
    /// at 32 clients in `benches/results/profiles/sidecar.md`). (Issue 15's measurements of CPU per
    /// query with one thread were mixed: 79–90 → 73–76 µs on one build,
    /// no change on the next, within this machine's noise.)
    pub worker_threads: usize,
    /// Largest packet accepted from a client (MySQL's max_allowed_packet),
    /// once it has logged in. Before that: [`LOGIN_MAX_PACKET`].
    pub max_allowed_packet: usize,
    /// Most bytes one client connection may make the sidecar hold between
    /// commands: its prepared statements, their long data, its cursors'
    /// rows read ahead (see `sidecar::budget`). Past it a statement gets
    /// 1461 and a value 1153; the connection goes on.
    pub memory_per_connection: usize,
    /// Most bytes all client connections together may make it hold, also
    /// counting packets being read and rows waiting to be written; past it
    /// 1041 (out of resources), and the connection goes on (after a packet
    /// that could not be read: 1041 and a close).
    pub memory_total: usize,
    /// Carry `LOAD DATA LOCAL INFILE`: the client is asked for its file
    /// when the backend asks for it (our gateway only). Off, as servers
    /// ship `local_infile` (MySQL's default; MariaDB's is on), such a
    /// statement gets what a server run with `--local-infile=0` answers
    /// (4166), unrun.
    pub local_infile: bool,
    /// Authentication of local clients.
    pub auth: AuthConfig,
    /// TLS for clients that ask for it (a generated certificate unless
    /// one is configured).
    pub tls: FrontTls,
    pub upstream: UpstreamConfig,
    /// Health checks, metrics and `/quitquitquit`.
    pub admin: AdminConfig,
    /// What SIGTERM (or `/quitquitquit`) does.
    pub drain: DrainConfig,
}

/// The graceful shutdown. The sidecar turns unready at once, then serves
/// as usual (open connections, new connections, new transactions) for
/// `period` — the app next to it may still be finishing requests — or
/// until no logged-in client connection is left, once `min_period` has
/// passed. Then it stops accepting and closes each connection as soon as
/// it is outside a transaction (one still logging in: at once); a transaction still open `transaction_timeout`
/// later gets ERR 1053 (08S01, "Server shutdown in progress") and is
/// rolled back. A second signal ends the process at once.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrainConfig {
    #[serde(with = "humantime_serde")]
    pub period: Duration,
    #[serde(with = "humantime_serde")]
    pub min_period: Duration,
    #[serde(with = "humantime_serde")]
    pub transaction_timeout: Duration,
}

impl Default for DrainConfig {
    /// Together below Kubernetes' default 30 s termination grace period.
    fn default() -> Self {
        Self {
            period: Duration::from_secs(15),
            min_period: Duration::ZERO,
            transaction_timeout: Duration::from_secs(10),
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `auto` (the plugin the backend's flavour uses by default, see
    /// [`crate::mysql::auth::Plugin::default_for`]), `caching_sha2_password`
    /// or `mysql_native_password`.
    pub plugin: String,
    /// Local accounts clients must present. Empty: any user name and
    /// password are accepted (the gateway credential is never the
    /// client's) — refused unless the listener is on loopback or
    /// `allow_any_user_on_network` says so.
    pub users: Vec<LocalUser>,
    /// Accept any user and password on a listener other than loopback
    /// (no `users`): anyone who reaches the port uses the gateway
    /// credential. Off: such a configuration does not start.
    pub allow_any_user_on_network: bool,
    /// RSA private key (PEM) for caching_sha2_password full
    /// authentication over plain TCP; generated at first need if unset.
    pub rsa_private_key: Option<PathBuf>,
}

/// TLS 1.2 and 1.3 for local clients that ask for it; never required.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FrontTls {
    /// PEM certificate chain and key offered to local clients.
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Without `cert` and `key`: offer TLS with a self-signed certificate
    /// the sidecar makes at start, as MySQL's `auto_generate_certs` does,
    /// so that clients that prefer or require TLS get it. Off: no TLS.
    pub auto_generate: bool,
    /// Where the generated certificate and key are written the first
    /// time and read from on later starts (so clients can pin it); unset:
    /// kept in memory, a new one at every start.
    pub auto_generate_dir: Option<PathBuf>,
}

impl Default for FrontTls {
    fn default() -> Self {
        Self {
            cert: None,
            key: None,
            auto_generate: true,
            auto_generate_dir: None,
        }
    }
}

/// A local account: what a client presents, and the gateway credential
/// its sessions run under — its own (`upstream_username`), or else
/// `[sidecar.upstream]`'s. Two accounts with their own credentials are
/// two backend identities: privileges, `CURRENT_USER()`, definers.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalUser {
    pub username: String,
    pub password: Secret,
    /// The API user this account's requests authenticate as; unset: the
    /// sidecar's (`sidecar.upstream.username`).
    pub upstream_username: Option<String>,
    /// Its API password; required with `upstream_username`, refused
    /// without it.
    pub upstream_password: Option<Secret>,
}

/// Largest packet accepted before a client has logged in: a handshake
/// response with connect attributes, or an RSA-encrypted password, is a
/// few hundred bytes. A larger one gets ERR 1153 and a close, unbuffered.
pub const LOGIN_MAX_PACKET: usize = 16 << 10;

impl Default for SidecarConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:3306".parse().expect("literal"),
            socket: None,
            server_version: "auto".into(),
            max_connections: 4096,
            max_connections_logging_in: 256,
            login_timeout: Duration::from_secs(10),
            worker_threads: 0,
            max_allowed_packet: 64 << 20,
            memory_per_connection: 64 << 20,
            memory_total: 512 << 20,
            local_infile: false,
            auth: AuthConfig::default(),
            tls: FrontTls::default(),
            upstream: UpstreamConfig::default(),
            admin: AdminConfig::with_port(9901),
            drain: DrainConfig::default(),
        }
    }
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            plugin: "auto".into(),
            users: Vec::new(),
            allow_any_user_on_network: false,
            rsa_private_key: None,
        }
    }
}

impl AuthConfig {
    /// Each local account once, and a gateway credential of its own only
    /// whole (a name with a password, never a password alone, which would
    /// go with `[sidecar.upstream]`'s name).
    fn validate_users(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for user in &self.users {
            let reason = if !seen.insert(user.username.as_str()) {
                "is listed twice"
            } else {
                match (&user.upstream_username, &user.upstream_password) {
                    (Some(name), _) if name.is_empty() => "has an empty upstream_username",
                    (Some(_), None) => "has an upstream_username without an upstream_password",
                    (None, Some(_)) => {
                        "has an upstream_password without an upstream_username (it would go with sidecar.upstream.username)"
                    }
                    _ => continue,
                }
            };
            return Err(ConfigError::Invalid {
                key: "sidecar.auth.users",
                reason: format!("user {:?} {reason}", user.username),
            });
        }
        Ok(())
    }
}

impl SidecarConfig {
    /// Checks what serde cannot.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let invalid = |key, reason: &str| ConfigError::Invalid {
            key,
            reason: reason.into(),
        };
        if !matches!(
            self.auth.plugin.as_str(),
            "auto" | "caching_sha2_password" | "mysql_native_password"
        ) {
            return Err(invalid(
                "sidecar.auth.plugin",
                "must be auto, caching_sha2_password or mysql_native_password",
            ));
        }
        if self.upstream.url.is_empty() {
            return Err(invalid(
                "sidecar.upstream.url",
                "required: the gateway, e.g. https://gateway.example:443",
            ));
        }
        self.upstream.authority()?;
        if self.upstream.username.is_empty() {
            return Err(invalid(
                "sidecar.upstream.username",
                "required: the gateway always authenticates",
            ));
        }
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return Err(invalid("sidecar.tls", "give both cert and key, or neither"));
        }
        if let Some(cc) = self.upstream.tcp_congestion {
            cc.check()
                .map_err(|e| invalid("sidecar.upstream.tcp_congestion", &e))?;
        }
        for name in &self.upstream.compression {
            if !matches!(Encoding::from_name(name), Some(e) if e != Encoding::Identity) {
                return Err(invalid(
                    "sidecar.upstream.compression",
                    &format!("{name:?}: use zstd, s2, snappy or gzip (an empty list for none)"),
                ));
            }
        }
        if self.max_allowed_packet < 1024 {
            return Err(invalid(
                "sidecar.max_allowed_packet",
                "must be at least 1024",
            ));
        }
        if self.memory_per_connection < 1 << 20 {
            return Err(invalid(
                "sidecar.memory_per_connection",
                "must be at least 1048576 (1 MiB)",
            ));
        }
        if self.memory_total < self.memory_per_connection {
            return Err(invalid(
                "sidecar.memory_total",
                "must be at least sidecar.memory_per_connection",
            ));
        }
        if self.max_connections == 0 {
            return Err(invalid("sidecar.max_connections", "must be at least 1"));
        }
        if self.max_connections_logging_in == 0 {
            return Err(invalid(
                "sidecar.max_connections_logging_in",
                "must be at least 1",
            ));
        }
        if self.login_timeout.is_zero() {
            return Err(invalid("sidecar.login_timeout", "must be more than 0"));
        }
        self.auth.validate_users()?;
        if self.accepts_anyone_from_network() && !self.auth.allow_any_user_on_network {
            return Err(invalid(
                "sidecar.auth.users",
                &format!(
                    "none configured, so any user name and password would be accepted, and sidecar.listen ({}) is not loopback: anyone who reaches it could use the gateway's credential. Configure [[sidecar.auth.users]], listen on 127.0.0.1, or set sidecar.auth.allow_any_user_on_network = true",
                    self.listen
                ),
            ));
        }
        Ok(())
    }

    /// Whether clients from other hosts can log in with any user name and
    /// password: no local users and a listener not on loopback.
    pub fn accepts_anyone_from_network(&self) -> bool {
        self.auth.users.is_empty() && !self.listen.ip().is_loopback()
    }

    /// What is valid but risky, for `--check-config` and `myquic doctor`.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.accepts_anyone_from_network() {
            warnings.push(format!(
                "sidecar.auth.allow_any_user_on_network: any user name and password are accepted on {}, which is not loopback; anyone who reaches it uses the gateway's credential (configure [[sidecar.auth.users]])",
                self.listen
            ));
        }
        warnings
    }
}

impl Section for SidecarConfig {
    fn section(file: ConfigFile) -> Self {
        file.sidecar
    }

    fn admin_mut(&mut self) -> &mut AdminConfig {
        &mut self.admin
    }

    fn bind_secrets(&mut self, env: &Env) {
        self.upstream.password.bind(env);
        for user in &mut self.auth.users {
            user.password.bind(env);
            if let Some(secret) = &mut user.upstream_password {
                secret.bind(env);
            }
        }
        self.admin.bind_secrets(env);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> SidecarConfig {
        let mut c = SidecarConfig::default();
        c.upstream.url = "https://gw.example".into();
        c.upstream.username = "app".into();
        c
    }

    #[test]
    fn any_user_on_the_network_must_be_asked_for() {
        let mut c = valid();
        assert!(c.validate().is_ok() && c.warnings().is_empty(), "loopback");
        for listen in ["0.0.0.0:3306", "[::]:3306", "10.0.0.5:3306"] {
            c.listen = listen.parse().unwrap();
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("allow_any_user_on_network"), "{e}");
            c.auth.allow_any_user_on_network = true;
            assert!(c.validate().is_ok());
            assert_eq!(c.warnings().len(), 1, "allowed, but warned about");
            c.auth.allow_any_user_on_network = false;
        }
        c.auth.users.push(LocalUser {
            username: "app".into(),
            ..LocalUser::default()
        });
        assert!(c.validate().is_ok() && c.warnings().is_empty(), "users");
    }

    /// The example documents the login limits with their defaults.
    #[test]
    fn example_shows_the_login_defaults() {
        let file = crate::config::ConfigFile::parse(include_str!("../../config.example.toml"))
            .expect("config.example.toml parses");
        let (example, defaults) = (file.sidecar, SidecarConfig::default());
        assert_eq!(example.login_timeout, defaults.login_timeout);
        assert_eq!(
            example.max_connections_logging_in,
            defaults.max_connections_logging_in
        );
        assert_eq!(example.worker_threads, defaults.worker_threads);
        assert_eq!(example.local_infile, defaults.local_infile);
        let text = include_str!("../../config.example.toml")
            .replace("local_infile = false", "local_infile = true");
        let file = crate::config::ConfigFile::parse(&text).expect("parses with local_infile");
        assert!(file.sidecar.local_infile);
        assert!(!example.auth.allow_any_user_on_network);
        let text = include_str!("../../config.example.toml")
            .replace("# allow_any_user_on_network", "allow_any_user_on_network");
        let file = crate::config::ConfigFile::parse(&text).expect("parses uncommented");
        assert!(file.sidecar.auth.allow_any_user_on_network);
    }

    /// A default sidecar lets every client in on its first connection with
    /// its default options: the backend's plugin, and TLS for those that
    /// ask for it. The example says the same.
    #[test]
    fn auth_and_tls_defaults_serve_clients_out_of_the_box() {
        let file = crate::config::ConfigFile::parse(include_str!("../../config.example.toml"))
            .expect("config.example.toml parses");
        for c in [SidecarConfig::default(), file.sidecar] {
            assert_eq!(c.auth.plugin, "auto");
            assert!(c.tls.auto_generate && c.tls.auto_generate_dir.is_none());
            assert!(c.tls.cert.is_none() && c.tls.key.is_none());
        }
        let mut c = valid();
        for plugin in ["auto", "caching_sha2_password", "mysql_native_password"] {
            c.auth.plugin = plugin.into();
            assert!(c.validate().is_ok(), "{plugin}");
        }
        c.auth.plugin = "sha256_password".into();
        let e = c.validate().unwrap_err().to_string();
        assert!(
            e.contains("sidecar.auth.plugin") && e.contains("auto"),
            "{e}"
        );
        let text = include_str!("../../config.example.toml")
            .replace("# auto_generate_dir =", "auto_generate_dir =");
        let file = crate::config::ConfigFile::parse(&text).expect("parses uncommented");
        assert!(file.sidecar.tls.auto_generate_dir.is_some());
    }

    /// A local account's own gateway credential is a name and a password,
    /// or nothing; each account is listed once.
    #[test]
    fn own_upstream_credentials_are_whole() {
        let user = |name: &str, upstream: Option<&str>, password: bool| LocalUser {
            username: name.into(),
            upstream_username: upstream.map(Into::into),
            upstream_password: password.then(|| Secret::env("PW")),
            ..LocalUser::default()
        };
        let mut c = valid();
        c.auth.users = vec![user("app", None, false), user("report", Some("ro"), true)];
        assert!(c.validate().is_ok());
        for (bad, says) in [
            (
                user("report", Some("ro"), false),
                "without an upstream_password",
            ),
            (user("report", None, true), "without an upstream_username"),
            (user("report", Some(""), true), "empty upstream_username"),
            (user("app", Some("ro"), true), "listed twice"),
        ] {
            c.auth.users = vec![user("app", None, false), bad];
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("sidecar.auth.users") && e.contains(says), "{e}");
        }
    }

    /// The example's reporting account names its own credential, and its
    /// password comes from the environment like any secret.
    #[test]
    fn example_users_parse_with_their_credentials() {
        let file = crate::config::ConfigFile::parse(include_str!("../../config.example.toml"))
            .expect("config.example.toml parses");
        let users = &file.sidecar.auth.users;
        assert!(users.iter().any(|u| u.upstream_username.is_none()));
        let own = users
            .iter()
            .find(|u| u.upstream_username.is_some())
            .expect("an example of an account with its own credential");
        let mut config = file.sidecar.clone();
        config.bind_secrets(&Env::from_iter([(
            "MYQUIC_REPORTING_API_PASSWORD",
            "ro-pw",
        )]));
        let bound = config
            .auth
            .users
            .iter()
            .find(|u| u.username == own.username)
            .unwrap();
        let password = bound.upstream_password.as_ref().unwrap();
        assert_eq!(password.resolve("k").unwrap(), "ro-pw");
        assert!(!format!("{bound:?}").contains("ro-pw"), "never printed");
    }

    #[test]
    fn compression_names_are_checked() {
        let mut c = SidecarConfig::default();
        c.upstream.url = "https://gw.example".into();
        c.upstream.username = "app".into();
        assert!(c.validate().is_ok());
        c.upstream.compression = Vec::new();
        assert!(c.validate().is_ok());
        for bad in ["br", "identity", ""] {
            c.upstream.compression = vec!["zstd".into(), bad.into()];
            let e = c.validate().unwrap_err().to_string();
            assert!(e.contains("sidecar.upstream.compression"), "{e}");
        }
    }
}
