//! What one server connection is doing, for the drain: a connection that
//! never carried a request, or whose requests have all been answered, has
//! nothing to finish and is closed at once instead of being waited for.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::watch;

/// Requests of one connection: whether any arrived, how many are being
/// answered now.
#[derive(Clone)]
pub struct Activity(Arc<Inner>);

struct Inner {
    used: AtomicBool,
    in_flight: watch::Sender<usize>,
}

impl Default for Activity {
    fn default() -> Self {
        Self(Arc::new(Inner {
            used: AtomicBool::new(false),
            in_flight: watch::Sender::new(0),
        }))
    }
}

impl Activity {
    /// A request arrived; it counts until the guard is dropped (after its
    /// response has been handed to the transport whole).
    pub fn begin(&self) -> InFlight {
        self.0.used.store(true, Ordering::Release);
        self.0.in_flight.send_modify(|n| *n += 1);
        InFlight(self.0.clone())
    }

    /// Whether the connection ever carried a request.
    pub fn used(&self) -> bool {
        self.0.used.load(Ordering::Acquire)
    }

    /// Returns once no request has been in flight for `linger`: long enough
    /// for a client to see the last response and GOAWAY and close first.
    pub async fn idle_for(&self, linger: Duration) {
        let mut watch = self.0.in_flight.subscribe();
        loop {
            if watch.wait_for(|n| *n == 0).await.is_err() {
                return;
            }
            let busy_again = tokio::time::timeout(linger, watch.wait_for(|n| *n > 0)).await;
            if busy_again.is_err() {
                return;
            }
        }
    }
}

/// One request in flight on a connection.
pub struct InFlight(Arc<Inner>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|n| *n -= 1);
    }
}
