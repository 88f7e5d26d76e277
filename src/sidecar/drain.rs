//! The sidecar's graceful shutdown (see [`DrainConfig`] for the rules)
//! and how it reports its health to the admin endpoint.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{info, warn};

use crate::admin::Health;
use crate::admin::metrics::{Encoder, metrics};
use crate::config::DrainConfig;
use crate::transport::HttpVersion;

use super::Sidecar;

/// How a drain ended; `main` turns it into the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Every connection ended outside a transaction.
    Clean,
    /// `transaction_timeout` passed: this many connections were cut off
    /// (ERR 1053, transaction rolled back).
    Cut(usize),
    /// A second signal: the process ends at once.
    Forced,
}

/// How often the drain looks at the open connections.
const TICK: Duration = Duration::from_millis(50);
/// How long cut connections get to tell their clients and close their
/// sessions before the process goes.
const CUT_GRACE: Duration = Duration::from_secs(5);

impl Sidecar {
    /// Drains as configured; `force` (a second signal) ends it at once.
    pub async fn drain(self, config: &DrainConfig, force: impl Future<Output = ()>) -> Drained {
        tokio::pin!(force);
        let shared = self.shared.clone();
        let registry = &shared.registry;
        // Readiness reads this: unready from now on.
        shared
            .draining
            .store(true, std::sync::atomic::Ordering::Release);
        let started = Instant::now();
        info!(
            connections = registry.len(),
            period = ?config.period,
            "draining: not ready; still serving"
        );
        // Connections still logging in are not work to wait for: they
        // close as soon as the sidecar stops accepting.
        let serving = async {
            loop {
                let elapsed = started.elapsed();
                if elapsed >= config.period
                    || (elapsed >= config.min_period && registry.logged_in() == 0)
                {
                    return;
                }
                tokio::time::sleep(TICK).await;
            }
        };
        tokio::select! {
            () = serving => {}
            () = &mut force => return Drained::Forced,
        }

        // Stop accepting; connections close once outside a transaction
        // (at once if idle or still logging in).
        self.shutdown.cancel();
        registry.drain();
        info!(
            connections = registry.len(),
            timeout = ?config.transaction_timeout,
            "draining: no longer accepting; closing connections as their transactions end"
        );
        let deadline = Instant::now() + config.transaction_timeout;
        let finishing = async {
            while !registry.is_empty() && Instant::now() < deadline {
                tokio::time::sleep(TICK).await;
            }
        };
        tokio::select! {
            () = finishing => {}
            () = &mut force => return Drained::Forced,
        }
        let cut = registry.cut_all();
        if cut > 0 {
            metrics().sidecar.drain_transactions_cut.add(cut as u64);
            warn!(
                connections = cut,
                "drain timeout: ending connections still inside a transaction (ERR 1053, rolled back)"
            );
        }
        self.tasks.close();
        tokio::select! {
            _ = tokio::time::timeout(CUT_GRACE, self.tasks.wait()) => {}
            () = &mut force => return Drained::Forced,
        }
        if let Some(path) = &self.socket {
            let _ = std::fs::remove_file(path);
        }
        if cut > 0 {
            Drained::Cut(cut)
        } else {
            Drained::Clean
        }
    }

    /// What the admin endpoint reports for this sidecar.
    pub fn health(&self) -> std::sync::Arc<dyn Health> {
        std::sync::Arc::new(SidecarHealth {
            shared: self.shared.clone(),
        })
    }
}

struct SidecarHealth {
    shared: std::sync::Arc<super::Shared>,
}

impl Health for SidecarHealth {
    /// The listeners are bound before the admin endpoint starts, so
    /// "started" is "the gateway has answered once": a native-sidecar
    /// startup probe then holds the app back until queries can work.
    fn started(&self) -> Result<(), String> {
        if self.shared.client.has_answered() {
            Ok(())
        } else {
            Err("the gateway has not answered yet".into())
        }
    }

    /// Not the gateway's current health: once it has answered, a gateway
    /// blip makes queries fail fast (and the transport fall back), not the
    /// pod leave its Service.
    fn ready(&self) -> Result<(), String> {
        if self
            .shared
            .draining
            .load(std::sync::atomic::Ordering::Acquire)
        {
            return Err("draining".into());
        }
        self.started()
    }

    fn metrics(&self, out: &mut String) {
        let m = metrics();
        let client = &self.shared.client;
        let stats = client.stats();
        let mut e = Encoder::new(out);
        e.gauge(
            "myquic_ready",
            "1 while the sidecar takes work (see /ready).",
            i64::from(self.ready().is_ok()),
        );
        e.metrics(&m.sidecar.all());
        let transport = client.transport();
        let on = |v: HttpVersion| i64::from(transport == Some(v));
        e.gauges(
            "myquic_upstream_transport",
            "The transport new requests use: 1 for the current one (none: disconnected).",
            &[
                ("version=\"h3\"", on(HttpVersion::Http3)),
                ("version=\"h2\"", on(HttpVersion::Http2)),
                ("version=\"none\"", i64::from(transport.is_none())),
            ],
        );
        e.counter(
            "myquic_upstream_fallbacks",
            "Times HTTP/3 did not connect and HTTP/2 was used instead.",
            stats.fallbacks,
        );
        e.counter(
            "myquic_upstream_returns",
            "Times a background probe moved from HTTP/2 back to HTTP/3.",
            stats.returns,
        );
        e.counter(
            "myquic_upstream_reconnects",
            "Gateway connections established after one was lost.",
            stats.reconnects,
        );
        e.metrics(&m.upstream.all());
    }
}
