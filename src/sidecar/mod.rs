//! The sidecar role: a local MySQL server whose every client connection is
//! a psdb session, and every command a request over one long-lived HTTP/3
//! connection to a gateway (HTTP/2 while UDP does not get through).
//!
//! - [`login`]: the handshake, completed locally (no upstream round trip);
//! - `command`: the command phase as a state machine without I/O: every
//!   answer's rules, MySQL commands → psdb requests;
//! - [`connection`]: that phase on a socket: reads commands, makes the
//!   upstream calls the core names, cancels on hang-up and `KILL`;
//! - [`io`]: a client's socket as MySQL packets;
//! - [`front_tls`]: TLS toward local clients;
//! - [`session`]: the psdb session each client connection owns;
//! - [`upstreams`]: the gateway credential each local account runs under;
//! - [`known_logins`]: which credentials' backend accounts (and login
//!   databases) are known to work, so their logins cost no request;
//! - [`registry`]: live connections by id, for `KILL`;
//! - [`drain`]: the graceful shutdown, and the health and metrics the
//!   admin endpoint reports;
//! - [`errors`]: every error the sidecar itself tells a client;
//! - [`retained_memory`]: when freed memory goes back to the system.

pub mod budget;
mod command;
pub mod connection;
pub mod drain;
pub mod errors;
pub mod front_tls;
pub mod io;
pub mod known_logins;
pub mod login;
pub mod registry;
pub mod retained_memory;
pub mod session;
pub mod upstreams;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::client::{Client, ClientConfig};
use crate::config::ConfigError;
use crate::mysql::auth::{AuthCache, AuthConfig, Handshake, Plugin, RsaKey};
use crate::mysql::packet::Packets;
use crate::mysql::response;
use crate::translate::connection_status::OfferedTls;
use crate::transport::tls;

pub use crate::config::SidecarConfig;
use connection::Connection;
pub use drain::Drained;
use io::{Framed, Stream};

/// What every client connection shares.
pub struct Shared {
    /// The sidecar's own gateway credential (`[sidecar.upstream]`).
    pub client: Client,
    /// Each local account's credential (the same connection).
    pub upstreams: upstreams::Upstreams,
    pub registry: Arc<registry::Registry>,
    auth: RwLock<Arc<AuthConfig>>,
    tls: Option<TlsAcceptor>,
    /// What that TLS offers (status variables say it).
    offered_tls: OfferedTls,
    max_packet: usize,
    /// `sidecar.local_infile`: LOAD DATA LOCAL INFILE is carried.
    local_infile: bool,
    /// What all client connections may hold together, and each one
    /// (`memory_total`, `memory_per_connection`).
    pub memory: Arc<budget::ProcessBudget>,
    memory_per_connection: usize,
    /// One per client connection, for its whole life (`max_connections`).
    slots: Arc<Semaphore>,
    /// One per connection until it has logged in
    /// (`max_connections_logging_in`): clients that never log in hold at
    /// most these of the `slots`.
    login_slots: Arc<Semaphore>,
    login_timeout: std::time::Duration,
    /// The gateway creates sessions in the database a request's
    /// `target_string` names (learned at start; until then, and with a
    /// gateway that does not, the database is selected by a `USE`).
    pub upstream_targets: AtomicBool,
    /// The credentials whose backend accounts log in, and the databases
    /// the gateway has selected as their logins' default database: a
    /// later login of the same credential (naming one of them) is not
    /// checked again (see `Connection::check_login`); another
    /// credential's account may be refused it (1044). Forgotten when
    /// refused.
    pub known: known_logins::KnownLogins,
    /// The greeting's version is final: configured, or learned from the
    /// backend (see [`GREETING_WAIT`]).
    version_known: tokio::sync::watch::Sender<bool>,
    /// `auth.plugin = "auto"`: the plugin follows the version, learned
    /// with it.
    plugin_follows_version: bool,
    /// Set when the drain begins: readiness turns false.
    draining: std::sync::atomic::AtomicBool,
}

/// A running sidecar.
pub struct Sidecar {
    addr: SocketAddr,
    socket: Option<PathBuf>,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("listening on {what}: {source}")]
    Listen {
        what: String,
        source: std::io::Error,
    },
}

impl Sidecar {
    pub async fn start(config: SidecarConfig) -> Result<Self, StartError> {
        config.validate()?;
        for warning in config.warnings() {
            warn!("{warning}");
        }
        tls::install_crypto_provider();
        let client = Client::new(ClientConfig::from_upstream(&config.upstream)?).map_err(|e| {
            ConfigError::Invalid {
                key: "sidecar.upstream",
                reason: e.to_string(),
            }
        })?;
        let upstreams = upstreams::Upstreams::new(client.clone(), &config.auth.users)?;
        let front_tls = front_tls::acceptor(&config.tls, config.listen)?;
        let auth = auth_config(&config, front_tls.is_some())?;
        let plugin_follows_version = config.auth.plugin == "auto";
        let version_known = config.server_version != "auto";
        let plugin_known = !plugin_follows_version || version_known;
        if plugin_known {
            prepare_rsa_key(&auth);
        }
        let shared = Arc::new(Shared {
            client,
            upstreams,
            registry: registry::Registry::new(),
            auth: RwLock::new(Arc::new(auth)),
            offered_tls: front_tls
                .as_ref()
                .map(|f| f.offered.clone())
                .unwrap_or_default(),
            tls: front_tls.map(|f| f.acceptor),
            max_packet: config.max_allowed_packet,
            local_infile: config.local_infile,
            memory: budget::ProcessBudget::new(config.memory_total),
            memory_per_connection: config.memory_per_connection,
            slots: Arc::new(Semaphore::new(config.max_connections)),
            login_slots: Arc::new(Semaphore::new(config.max_connections_logging_in)),
            login_timeout: config.login_timeout,
            upstream_targets: AtomicBool::new(false),
            known: known_logins::KnownLogins::default(),
            version_known: tokio::sync::watch::Sender::new(version_known),
            plugin_follows_version,
            draining: std::sync::atomic::AtomicBool::new(false),
        });
        let listen_err = |what: String| move |source| StartError::Listen { what, source };
        let tcp = TcpListener::bind(config.listen)
            .await
            .map_err(listen_err(config.listen.to_string()))?;
        let addr = tcp
            .local_addr()
            .map_err(listen_err(config.listen.to_string()))?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        tasks.spawn(accept_loop(
            Listener::Tcp(tcp),
            shared.clone(),
            shutdown.clone(),
            tasks.clone(),
        ));
        if let Some(path) = &config.socket {
            // A stale socket file from a previous run would make bind fail.
            let _ = std::fs::remove_file(path);
            let unix = UnixListener::bind(path).map_err(listen_err(path.display().to_string()))?;
            tasks.spawn(accept_loop(
                Listener::Unix(unix),
                shared.clone(),
                shutdown.clone(),
                tasks.clone(),
            ));
        }
        if !plugin_known {
            tokio::spawn(prepare_rsa_key_if_learning_is_slow(shared.clone()));
        }
        tokio::spawn(learn_upstream(
            shared.clone(),
            config.server_version == "auto",
        ));
        info!(
            %addr,
            socket = ?config.socket,
            gateway = %config.upstream.url,
            // Names only: which accounts run as a backend identity of their own.
            own_credentials = ?config
                .auth
                .users
                .iter()
                .filter(|u| u.upstream_username.is_some())
                .map(|u| u.username.as_str())
                .collect::<Vec<_>>(),
            quic_congestion = %config.upstream.congestion,
            tcp_congestion = config.upstream.tcp_congestion.as_ref().map_or("host default", |c| c.as_str()),
            "sidecar listening"
        );
        Ok(Self {
            addr,
            socket: config.socket,
            shared,
            shutdown,
            tasks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// Whether the gateway is known to take a client's default database
    /// with the connection's first request (learned shortly after start);
    /// until then a `USE` request goes first.
    pub fn upstream_targets(&self) -> bool {
        self.shared.upstream_targets.load(Ordering::Relaxed)
    }

    /// The version new connections' greetings carry: the backend's once
    /// learned (`server_version = "auto"`), which also decides how JSON
    /// columns are described (MySQL's JSON type, or MariaDB's LONGTEXT
    /// with `format=json`).
    pub fn server_version(&self) -> String {
        self.shared
            .auth
            .read()
            .expect("not poisoned")
            .server_version
            .clone()
    }

    /// Open client connections (logged in or not).
    pub fn connections(&self) -> usize {
        self.shared.registry.len()
    }

    /// Stops accepting and closes every client connection.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.shared.registry.close_all();
        self.tasks.wait().await;
        if let Some(path) = &self.socket {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Generating an RSA key takes long enough to stall a runtime worker (and
/// seconds in a debug build): for caching_sha2_password, do it off the
/// runtime as soon as the plugin is known, rather than in the first login
/// that needs it.
fn prepare_rsa_key(auth: &AuthConfig) {
    if auth.default_plugin != Plugin::CachingSha2Password {
        return;
    }
    let key = auth.rsa_key.clone();
    tokio::task::spawn_blocking(move || {
        if let Err(e) = key.public_pem() {
            warn!(error = %e, "preparing the RSA key for caching_sha2_password");
        }
    });
}

/// With `auth.plugin = "auto"` the key waits for the backend's version
/// (learned in milliseconds, and needless for MariaDB's
/// mysql_native_password); when that takes longer than this, the
/// fallback version's caching_sha2_password gets its key ready for the
/// clients greeted with it (after [`GREETING_WAIT`]).
const RSA_KEY_DECISION_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

async fn prepare_rsa_key_if_learning_is_slow(shared: Arc<Shared>) {
    let mut version_known = shared.version_known.subscribe();
    let learned = version_known.wait_for(|known| *known);
    if tokio::time::timeout(RSA_KEY_DECISION_WAIT, learned)
        .await
        .is_err()
    {
        // The learner prepares it for the learned plugin otherwise.
        let auth = shared.auth.read().expect("not poisoned").clone();
        prepare_rsa_key(&auth);
    }
}

fn auth_config(config: &SidecarConfig, tls_available: bool) -> Result<AuthConfig, ConfigError> {
    let users = if config.auth.users.is_empty() {
        None
    } else {
        let mut users = HashMap::new();
        for u in &config.auth.users {
            users.insert(
                u.username.clone(),
                u.password.resolve("sidecar.auth.users.password")?,
            );
        }
        Some(users)
    };
    let rsa_key = match &config.auth.rsa_private_key {
        Some(path) => RsaKey::from_pem_file(path).map_err(|e| ConfigError::Invalid {
            key: "sidecar.auth.rsa_private_key",
            reason: e.to_string(),
        })?,
        None => RsaKey::generated(),
    };
    let version = if config.server_version == "auto" {
        FALLBACK_VERSION.to_string()
    } else {
        config.server_version.clone()
    };
    let default_plugin = match config.auth.plugin.as_str() {
        "auto" => Plugin::default_for(&version),
        name => name.parse::<Plugin>().map_err(|_| ConfigError::Invalid {
            key: "sidecar.auth.plugin",
            reason: "must be auto, caching_sha2_password or mysql_native_password".into(),
        })?,
    };
    Ok(AuthConfig {
        server_version: version,
        users,
        default_plugin,
        tls_available,
        cache: Arc::new(AuthCache::new()),
        rsa_key: Arc::new(rsa_key),
    })
}

/// Version in greetings until the backend's is known.
const FALLBACK_VERSION: &str = "8.0.40-myquic";

/// How long a client that connects right after start waits for its
/// greeting while the sidecar learns the backend's version (one request,
/// usually milliseconds; no wait when `server_version` is configured).
/// Greeting it at once would show it the fallback version (and
/// MySQL-style JSON) for the whole connection; waiting longer than this
/// for a gateway that does not answer gains nothing.
const GREETING_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Asks the gateway once, at start, for what every connection would
/// otherwise cost a request: the backend's version (if `learn_version`),
/// so clients see what they would see connecting directly (drivers pick
/// features and SQL dialect from it); and whether it creates sessions in
/// a requested database (a `target_string` it echoes back), so a client's
/// default database needs no `USE` request of its own.
async fn learn_upstream(shared: Arc<Shared>, learn_version: bool) {
    // Every account may select it, whatever its grants.
    const PROBE_DATABASE: &str = "information_schema";
    let mut delay = std::time::Duration::from_millis(200);
    loop {
        let probe = session::target_request(PROBE_DATABASE);
        match shared
            .client
            .execute(Some(&probe), "SELECT @@version", HashMap::new())
            .await
        {
            Ok(reply) => {
                if reply.message.error.is_none() {
                    // The sidecar's own backend account logs in: its
                    // accounts' logins need no check.
                    let credential = shared.client.credential().username();
                    shared.known.learned(credential, None);
                }
                if let Some(session) = &reply.session {
                    let targets = session
                        .view()
                        .vitess_session
                        .as_ref()
                        .is_some_and(|v| v.target_string == PROBE_DATABASE);
                    let _ = shared.client.close_session(session).await;
                    shared.upstream_targets.store(targets, Ordering::Relaxed);
                    debug!(targets, "gateway's support for session targets learned");
                }
                if !learn_version {
                    return;
                }
                let version = reply
                    .message
                    .result
                    .as_ref()
                    .and_then(|r| r.rows.first())
                    .and_then(crate::translate::rows::unpack_row)
                    .and_then(|cells| cells.into_iter().next().flatten())
                    // `VERSION()` is ASCII (the greeting's version is text).
                    .map(|v| String::from_utf8_lossy(&v).into_owned());
                if let Some(version) = version {
                    // MariaDB prefixes its version for old clients; drivers
                    // strip the prefix and detect MariaDB by it.
                    let version = if version.contains("MariaDB") {
                        format!("5.5.5-{version}")
                    } else {
                        version
                    };
                    let mut updated = (**shared.auth.read().expect("not poisoned")).clone();
                    if shared.plugin_follows_version {
                        updated.default_plugin = Plugin::default_for(&version);
                    }
                    info!(%version, plugin = %updated.default_plugin, "backend version learned");
                    updated.server_version = version;
                    *shared.auth.write().expect("not poisoned") = Arc::new(updated);
                }
                if shared.plugin_follows_version {
                    // The plugin is final now.
                    prepare_rsa_key(&shared.auth.read().expect("not poisoned").clone());
                }
                shared.version_known.send_replace(true);
                return;
            }
            Err(e) => {
                debug!(error = %e, "backend version not known yet");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(10));
            }
        }
    }
}

/// Where clients connect: TCP, or a unix socket (a secure transport for
/// authentication, like TLS).
enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// The next client, whether its transport is secure, and its peer.
    async fn accept(&self) -> std::io::Result<(Box<dyn Stream>, bool, String)> {
        match self {
            Self::Tcp(l) => {
                let (stream, peer) = l.accept().await?;
                let _ = stream.set_nodelay(true);
                Ok((Box::new(stream), false, peer.to_string()))
            }
            Self::Unix(l) => {
                let (stream, _) = l.accept().await?;
                Ok((Box::new(stream), true, "unix".to_string()))
            }
        }
    }
}

async fn accept_loop(
    listener: Listener,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = shutdown.cancelled() => return,
        };
        match accepted {
            Ok((stream, secure, peer)) => {
                let span = info_span!("client", %peer);
                tasks.spawn(serve(stream, secure, shared.clone()).instrument(span));
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// Runs `f` when dropped (however the connection ends).
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

/// One client connection, from greeting to close.
async fn serve(stream: Box<dyn Stream>, secure: bool, shared: Arc<Shared>) {
    // Small packets until the client has logged in: nobody can make the
    // sidecar buffer max_allowed_packet without a password.
    let mut io = Framed::new(
        stream,
        crate::config::LOGIN_MAX_PACKET.min(shared.max_packet),
    );
    let metrics = &crate::admin::metrics::metrics().sidecar;
    let Some((_slot, login_slot)) = admit(&shared) else {
        metrics.client_connections_refused.inc();
        // What MySQL sends instead of a greeting when it is full.
        let mut out = Packets::default();
        response::err(&mut out, &errors::too_many_connections());
        let _ = io.write(&mut out).await;
        let _ = io.flush().await;
        return;
    };
    metrics.client_connections_total.inc();
    metrics.client_connections.inc();
    let _open = scopeguard(|| metrics.client_connections.dec());
    let registration = shared.registry.register();
    let handle = registration.handle.clone();
    let logging_in = async {
        let mut version_known = shared.version_known.subscribe();
        let _ = tokio::time::timeout(GREETING_WAIT, version_known.wait_for(|known| *known)).await;
        let auth = shared.auth.read().expect("not poisoned").clone();
        let mut handshake = Handshake::new(auth, registration.id, secure);
        let login = login::login(&mut io, &mut handshake, shared.tls.as_ref()).await?;
        Some((handshake, login))
    };
    // A connection still logging in has no work to finish: the drain (or
    // a shutdown) closes it at once. Past the timeout it is closed without
    // a word, as MariaDB does at its connect_timeout.
    let stopped = async {
        if !handle.is_draining() {
            tokio::select! {
                () = handle.drain.notified() => {}
                () = handle.kill.notified() => {}
            }
        }
    };
    let logged_in = tokio::select! {
        outcome = tokio::time::timeout(shared.login_timeout, logging_in) => outcome.unwrap_or_else(|_| {
            debug!(timeout = ?shared.login_timeout, "login timed out: closing");
            None
        }),
        () = stopped => None,
    };
    let Some((handshake, (login, ok))) = logged_in else {
        return;
    };
    drop(login_slot);
    registration.logged_in(&login.user);
    io.set_max_packet(shared.max_packet);
    debug!(user = %login.user.escape_ascii(), id = registration.id, "client logged in");
    let database = login.database.clone();
    let mut conn = Connection::new(io, shared.clone(), registration, handshake, &login);
    // The database first: one the gateway has selected before for this
    // credential rides on the first request (the collation's, if one is
    // needed, else the client's first command); another is tried before
    // the login's OK, so that a client naming a database that does not
    // exist is refused at connect (1049), as by a server. So is, with or
    // without a database, a login under a credential whose backend
    // account is not known to log in yet (the backend's 1045).
    let mut collation_set = false;
    let opened = match database.as_deref().map(|db| (db, std::str::from_utf8(db))) {
        Some((_, Ok(db))) => conn.check_login(Some(db)).await,
        Some((db, Err(_))) => {
            collation_set = true;
            conn.open_login_database_in_charset(db, login.charset).await
        }
        None => conn.check_login(None).await,
    };
    if conn.finish_login(ok, opened).await.is_none() {
        return;
    }
    if !collation_set {
        conn.set_collation(login.charset).await;
    }
    conn.run().await;
}

/// A connection slot, and a login slot until the client has logged in;
/// `None` if either is exhausted (the client gets ERR 1040).
fn admit(shared: &Shared) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
    let slot = shared.slots.clone().try_acquire_owned().ok()?;
    let login = shared.login_slots.clone().try_acquire_owned().ok()?;
    Some((slot, login))
}
