//! The gateway's readiness (listeners bound, backend answering, not
//! draining) and metrics, for the admin endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
    draining: AtomicBool,
}

impl GatewayHealth {
    pub fn new(service: Arc<Service>) -> Self {
        Self {
            service,
            backend_ok: AtomicBool::new(false),
            started: AtomicBool::new(false),
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
        // Asking for max_allowed_packet is the ping: an operator's change
        // to it is followed (the statement and request limits use it).
        let ping = async {
            let mut conn = account.pool.get_conn().await.ok()?;
            health.service.rpc.backend_packet.query(&mut conn).await
        };
        let ok = matches!(
            tokio::time::timeout(Duration::from_secs(2), ping).await,
            Ok(Some(_))
        );
        let was = health.backend_ok.swap(ok, Ordering::AcqRel);
        if ok && !health.started.swap(true, Ordering::AcqRel) {
            info!("backend answers: ready");
        } else if was != ok {
            if ok {
                info!("backend answers again: ready");
            } else {
                warn!("backend does not answer: not ready");
            }
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

impl Health for GatewayHealth {
    fn started(&self) -> Result<(), String> {
        if self.started.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err("the backend has not answered yet".into())
        }
    }

    fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::Acquire) {
            return Err("draining".into());
        }
        if !self.backend_ok.load(Ordering::Acquire) {
            return Err("the backend does not answer".into());
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
        // Both pools of each account: clients without CLIENT_FOUND_ROWS
        // (most drivers' default) use the second.
        let pools = self
            .service
            .accounts
            .iter()
            .flat_map(|account| [&account.pool, &account.changed_rows_pool]);
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
