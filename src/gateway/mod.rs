//! The gateway role: the psdb.v1alpha1 API over HTTP/3 and HTTP/2 in front
//! of a MySQL/MariaDB backend.
//!
//! `service` turns HTTP requests into RPC calls, `rpc` implements them over
//! `sessions` and `backend`; the transports live in [`crate::transport`].

mod auth;
mod backend;
mod backend_tls;
mod binary;
mod connect_attrs;
mod error_text;
mod extended_metadata;
mod fresh_connections;
mod health;
mod json_columns;
mod local_infile;
pub mod packet_limit;
pub mod retained_memory;
mod rpc;
mod series;
mod service;
mod session_reads;
mod session_state;
pub(crate) mod sessions;
mod shares;
mod statement_shapes;
mod stream;
mod text_rows;
mod vitess;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

pub use crate::config::{
    BackendConfig, BackendTlsMode, Credential, GatewayConfig, GatewayDrain, Limits, SessionConfig,
    Timeouts, TlsConfig,
};

use crate::config::ConfigError;
use crate::transport::tls::{Identity, TlsError, install_crypto_provider};
use crate::transport::{ConnectionLimits, Handler, h2_server, h3_server};
use auth::{Account, Accounts};
use backend_tls::{BackendTls, Pools};
use rpc::Rpc;
use service::Service;
use sessions::Sessions;

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("binding {addr}: {reason}")]
    Bind { addr: SocketAddr, reason: String },
}

/// A started gateway.
pub struct Gateway {
    /// The bound port: UDP for HTTP/3, TCP for HTTP/2 and HTTP/1.1.
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    service: Arc<Service>,
    health: Arc<health::GatewayHealth>,
    drain: GatewayDrain,
}

impl Gateway {
    /// Binds the listeners and starts serving.
    pub async fn start(config: GatewayConfig) -> Result<Self, GatewayError> {
        config.validate()?;
        install_crypto_provider();
        let identity = match (
            &config.tls.cert,
            &config.tls.key,
            &config.tls.self_signed_cert_out,
        ) {
            (Some(cert), Some(key), _) => Identity::from_pem_files(cert, key)?,
            (_, _, Some(out)) => {
                let identity = Identity::self_signed(&config.tls.self_signed_names, out)?;
                info!(path = %out.display(), "wrote a self-signed development certificate");
                identity
            }
            _ => unreachable!("validate() requires a certificate source"),
        };
        let extended_metadata =
            Arc::new(extended_metadata::ExtendedMetadata::start(&config.backend));
        let accounts = accounts(&config, extended_metadata.socket())?;
        let key = match &config.sessions.signing_key {
            Some(secret) => {
                Sessions::key_from_secret(&secret.resolve("gateway.sessions.signing_key")?)
            }
            None => Sessions::random_key(),
        };
        let sessions = Arc::new(Sessions::new(
            key,
            config.sessions.idle_timeout,
            config.sessions.max_sessions,
        ));
        // Until the backend's max_connections is learned (`auto`), the
        // per-credential bound is the total too.
        let backend_shares =
            shares::BackendShares::new(match config.backend.max_connections_total {
                0 => config.backend.max_connections,
                total => total,
            });
        let service = Arc::new(Service {
            accounts,
            rpc: Rpc {
                sessions: sessions.clone(),
                limits: config.limits.clone(),
                connect_timeout: config.backend.connect_timeout,
                json_columns: Default::default(),
                statement_shapes: Default::default(),
                extended_metadata,
                backend_packet: Default::default(),
                backend_shares: backend_shares.clone(),
                fresh: Default::default(),
                loads: Default::default(),
            },
            in_flight: service::in_flight_gauge(),
            request_body_timeout: config.timeouts.request_body,
        });

        let (endpoint, tcp) = bind_pair(&config, &identity).await?;
        let addr = endpoint.local_addr().map_err(|e| GatewayError::Bind {
            addr: config.listen,
            reason: e.to_string(),
        })?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let handler: Arc<dyn Handler> = Arc::new(service.clone());
        // The transports' ceiling; each request's own limit is decided
        // after authentication (it follows the backend by default).
        let max_request = match config.limits.max_request_bytes {
            0 => packet_limit::MAX_BACKEND_PACKET + packet_limit::REQUEST_HEADROOM,
            n => n,
        };
        let limits = connection_limits(&config);
        tasks.spawn(h3_server::serve(
            endpoint,
            handler.clone(),
            max_request,
            limits,
            shutdown.clone(),
        ));
        let options = h2_server::Options {
            max_request_bytes: max_request,
            alt_svc: Some(format!("h3=\":{}\"; ma=86400", addr.port())),
            limits,
        };
        let token = shutdown.clone();
        tasks.spawn(async move {
            if let Err(e) = h2_server::serve(tcp, &identity, handler, options, token).await {
                warn!(error = %e, "HTTP/2 listener failed");
            }
        });
        tasks.spawn(reap_idle_sessions(
            sessions,
            config.sessions.idle_timeout,
            shutdown.clone(),
        ));
        for account in service.accounts.iter() {
            account
                .pools
                .all()
                .for_each(|pool| backend_shares.watch(pool));
        }
        // `auto`: read the backend's max_connections now, else retry.
        // Within the backend's connect timeout, not less: until it is
        // learned the bound is `max_connections` per credential (200),
        // which a first burst can push past the backend's own limit
        // (MariaDB's 1040 to every credential, as `tests/fair_shares.rs`
        // saw when a loaded start took over 1 s). A backend that is down
        // refuses at once and does not hold the start up.
        if config.backend.max_connections_total == 0
            && let Some(account) = service.accounts.iter().next()
            && !shares::learn_total_now(&backend_shares, account, config.backend.connect_timeout)
                .await
        {
            tasks.spawn(shares::learn_total(
                backend_shares.clone(),
                account.clone(),
                shutdown.clone(),
            ));
        }
        let warm = config.backend.warm_connections;
        for account in service.accounts.iter().cloned() {
            tasks.spawn(async move {
                // Whether the backend offers TLS first, so that the pools
                // warmed are the ones used. Failures are the health
                // check's to report.
                if account.pools.settle().await.is_err() {
                    return;
                }
                for pool in [account.pool_for(true), account.pool_for(false)] {
                    if let Err(e) = backend::warm(pool, warm).await {
                        warn!(user = %account.username, error = ?e.to_mysql().message, "could not pre-warm backend connections");
                    }
                }
            });
        }
        info!(
            %addr,
            quic_congestion = %config.congestion,
            tcp_congestion = config.tcp_congestion.as_ref().map_or("host default", |c| c.as_str()),
            "gateway listening (HTTP/3 on UDP, HTTP/2 and HTTP/1.1 on TCP)"
        );
        let health = Arc::new(health::GatewayHealth::new(service.clone()));
        tokio::spawn(health::check_backend(
            health.clone(),
            config.drain.backend_check_interval,
            shutdown.clone(),
        ));
        Ok(Self {
            addr,
            shutdown,
            tasks,
            service,
            health,
            drain: config.drain,
        })
    }

    /// Requests being served now (a streaming call once its body is read).
    pub fn requests_in_flight(&self) -> i64 {
        self.service.in_flight.get()
    }

    /// What the admin endpoint reports for this gateway.
    pub fn health(&self) -> Arc<dyn crate::admin::Health> {
        self.health.clone()
    }

    /// Drains: unready, GOAWAY on every connection (no new requests),
    /// in-flight requests finish (up to `drain.timeout`), then every
    /// session is closed, rolling back transactions left open. Returns
    /// whether everything in flight finished in time.
    pub async fn shutdown(self) -> bool {
        self.health.draining();
        self.shutdown.cancel();
        self.tasks.close();
        let orphans = self.service.rpc.sessions.begin_drain();
        if !orphans.is_empty() {
            info!(
                sessions = orphans.len(),
                "draining: rolling back transactions no request can continue here"
            );
            tokio::spawn(futures_util::future::join_all(orphans.into_iter().map(
                |mut conn| async move {
                    use mysql_async::prelude::Queryable;
                    let _ = conn.query_drop("ROLLBACK").await;
                },
            )));
        }
        let finished = tokio::time::timeout(self.drain.timeout, async {
            self.tasks.wait().await;
            // Streams are answered by their own tasks.
            while self.service.in_flight.get() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .is_ok();
        if !finished {
            warn!(timeout = ?self.drain.timeout, "drain timeout: requests still in flight are cut off");
        }
        let conns = self.service.rpc.sessions.close_all();
        info!(
            connections = conns.len(),
            "closing every session, rolling back open transactions"
        );
        let rollbacks = conns.into_iter().map(|mut conn| async move {
            use mysql_async::prelude::Queryable;
            let _ = conn.query_drop("ROLLBACK").await;
            let _ = conn.disconnect().await;
        });
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            futures_util::future::join_all(rollbacks),
        )
        .await;
        for account in self.service.accounts.iter() {
            // Waits for the pool's connections to be reset (rolled back)
            // and closed.
            for pool in account.pools.all() {
                let pool = pool.clone();
                let _ = tokio::time::timeout(Duration::from_secs(5), pool.disconnect()).await;
            }
        }
        finished
    }

    /// A token that stops the gateway when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

fn connection_limits(config: &GatewayConfig) -> ConnectionLimits {
    ConnectionLimits {
        tls_handshake: config.timeouts.tls_handshake,
        request_headers: config.timeouts.request_headers,
        max_streams: config.limits.max_streams_per_connection,
        max_pending_per_peer: config.limits.max_pending_connections_per_peer,
    }
}

/// The accounts' pools; plaintext ones connect through `relay` if given.
fn accounts(config: &GatewayConfig, relay: Option<&Path>) -> Result<Accounts, ConfigError> {
    let tls = Arc::new(BackendTls::from_config(&config.backend)?);
    info!(tls = ?tls.mode(), "backend connections");
    let mut list = Vec::new();
    for cred in &config.credentials {
        let password = cred.password.resolve("gateway.credentials.password")?;
        let backend_password = match &cred.backend_password {
            Some(secret) => secret.resolve("gateway.credentials.backend_password")?,
            None => password.clone(),
        };
        let backend_user = cred.backend_user.as_deref().unwrap_or(&cred.username);
        let pools = Pools::new(tls.clone(), |found_rows, ssl| {
            backend::pool(
                &config.backend,
                backend_user,
                &backend_password,
                cred.database.as_deref(),
                found_rows,
                ssl,
                relay,
            )
        });
        list.push(Account::new(
            cred.username.clone(),
            &password,
            pools,
            cred.database.clone(),
        ));
    }
    Ok(Accounts::new(list))
}

/// Binds UDP and TCP on the same port number. With port 0 the UDP port is
/// chosen first and TCP follows it, retrying if that TCP port is taken.
/// QUIC and TCP get their configured congestion controllers (TCP's on the
/// listener, which accepted connections inherit).
async fn bind_pair(
    config: &GatewayConfig,
    identity: &Identity,
) -> Result<(quinn::Endpoint, TcpListener), GatewayError> {
    let listen = config.listen;
    let bind_err = |reason: String| GatewayError::Bind {
        addr: listen,
        reason,
    };
    for _ in 0..20 {
        let max_streams = config.limits.max_streams_per_connection;
        let endpoint = h3_server::bind(listen, identity, config.congestion, max_streams)
            .map_err(|e| bind_err(e.to_string()))?;
        let addr = endpoint.local_addr().map_err(|e| bind_err(e.to_string()))?;
        match TcpListener::bind(addr).await {
            Ok(tcp) => {
                if let Some(cc) = config.tcp_congestion {
                    cc.apply(&tcp)
                        .map_err(|e| bind_err(format!("TCP congestion {cc}: {e}")))?;
                }
                return Ok((endpoint, tcp));
            }
            Err(e) if listen.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(bind_err(format!("TCP: {e}"))),
        }
    }
    Err(bind_err("no port free for both UDP and TCP".into()))
}

async fn reap_idle_sessions(
    sessions: Arc<Sessions>,
    idle_timeout: Duration,
    shutdown: CancellationToken,
) {
    // Often enough to give idle unpinned sessions' backend connections
    // back within about RELEASE_IDLE_CONNECTION_AFTER.
    let period = (idle_timeout / 4)
        .clamp(Duration::from_millis(100), Duration::from_secs(30))
        .min(session_state::RELEASE_IDLE_CONNECTION_AFTER / 2);
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = shutdown.cancelled() => return,
        }
        let expired = sessions.expire_idle();
        if expired > 0 {
            info!(expired, live = sessions.len(), "closed idle sessions");
        }
        let released = sessions.release_idle_connections();
        if released > 0 {
            tracing::debug!(
                released,
                "idle unpinned sessions gave their backend connections back"
            );
        }
    }
}
