//! The gateway's readiness (listeners bound, backend answering, not
//! draining) and metrics, for the admin endpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::admin::Health;
use crate::admin::metrics::{Encoder, metrics};

use super::service::Service;

pub struct GatewayHealth {
    service: Arc<Service>,
    /// The last backend check succeeded.
    backend_ok: AtomicBool,
    /// A backend check has succeeded once.
    started: AtomicBool,
    /// Why the last backend check failed, for `/ready` and `/startup`.
    why: Mutex<String>,
    draining: AtomicBool,
}

impl GatewayHealth {
    pub fn new(service: Arc<Service>) -> Self {
        Self {
            service,
            backend_ok: AtomicBool::new(false),
            started: AtomicBool::new(false),
            why: Mutex::new("the backend has not been asked yet".into()),
            draining: AtomicBool::new(false),
        }
    }

    pub fn draining(&self) {
        self.draining.store(true, Ordering::Release);
    }
}

/// A ping over a pooled connection of the first credential, every
/// `interval` (sooner while it fails), so probes never reach the backend.
pub async fn check_backend(
    health: Arc<GatewayHealth>,
    interval: Duration,
    stop: CancellationToken,
) {
    let Some(account) = health.service.accounts.iter().next().cloned() else {
        return;
    };
    loop {
        // Every account settles `preferred` (a no-op once decided), so
        // none is left on the TLS pool of a server that offers no TLS;
        // the first account's failure is reported by the ping below.
        let settle_all = health.service.accounts.iter().map(|a| a.pools.settle());
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            futures_util::future::join_all(settle_all),
        )
        .await;
        // Asking for max_allowed_packet is the ping: an operator's change
        // to it is followed (the statement and request limits use it).
        // Whether the backend offers TLS is settled first (`preferred`).
        let ping = async {
            account.pools.settle().await?;
            let mut conn = account
                .pool()
                .get_conn()
                .await
                .map_err(|e| account.pools.explain(&e))?;
            let packet = &health.service.rpc.backend_packet;
            match packet.query(&mut conn).await {
                Some(_) => Ok(()),
                None => Err("the backend did not answer a query".to_string()),
            }
        };
        let result = tokio::time::timeout(Duration::from_secs(2), ping)
            .await
            .unwrap_or_else(|_| Err("the backend did not answer within 2 s".into()));
        let ok = result.is_ok();
        let was = health.backend_ok.swap(ok, Ordering::AcqRel);
        let changed = match result {
            Ok(()) => false,
            Err(why) => {
                let mut last = health.why.lock().unwrap_or_else(|e| e.into_inner());
                std::mem::replace(&mut *last, why.clone()) != why
            }
        };
        if ok && !health.started.swap(true, Ordering::AcqRel) {
            info!("backend answers: ready");
        } else if ok && !was {
            info!("backend answers again: ready");
        } else if !ok && (was || changed) {
            warn!(why = %health.reason(), "backend check failed: not ready");
        }
        let next = if ok {
            interval
        } else {
            interval.min(Duration::from_millis(500))
        };
        tokio::select! {
            () = tokio::time::sleep(next) => {}
            () = stop.cancelled() => return,
        }
    }
}

impl GatewayHealth {
    fn reason(&self) -> String {
        self.why.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Health for GatewayHealth {
    fn started(&self) -> Result<(), String> {
        if self.started.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(format!(
                "the backend has not answered yet: {}",
                self.reason()
            ))
        }
    }

    fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Acquire) {
            return Err("draining".into());
        }
        if !self.backend_ok.load(Ordering::Acquire) {
            return Err(format!("the backend does not answer: {}", self.reason()));
        }
        Ok(())
    }

    fn metrics(&self, out: &mut String) {
        let m = metrics();
        let mut e = Encoder::new(out);
        e.gauge(
            "myquic_ready",
            "1 while the gateway takes work (see /ready).",
            i64::from(self.ready().is_ok()),
        );
        e.gauge(
            "myquic_gateway_sessions",
            "Sessions open now.",
            self.service.rpc.sessions.len() as i64,
        );
        e.metrics(&[&*self.service.in_flight]);
        e.metrics(&m.gateway.all());
        let (mut in_use, mut idle, mut waiting) = (0, 0, 0);
        // Every pool of each account (with and without CLIENT_FOUND_ROWS,
        // TLS and, under `preferred`, plaintext): most drivers' default
        // (no found rows) uses the second.
        let pools = self
            .service
            .accounts
            .iter()
            .flat_map(|account| account.pools.all());
        for pool in pools {
            let pool = pool.metrics();
            in_use += pool.connections_in_use.load(Ordering::Relaxed) as i64;
            idle += pool.connections_in_pool.load(Ordering::Relaxed) as i64;
            waiting += pool.active_wait_requests.load(Ordering::Relaxed) as i64;
        }
        e.gauges(
            "myquic_gateway_backend_connections",
            "Backend connections by state (in_use: held by sessions or requests; idle: pooled).",
            &[("state=\"in_use\"", in_use), ("state=\"idle\"", idle)],
        );
        e.gauge(
            "myquic_gateway_backend_waiting",
            "Requests waiting for a backend connection.",
            waiting,
        );
    }
}
