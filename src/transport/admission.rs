//! A quota, per IP address, of connections that have not authenticated a
//! request yet: TLS handshakes, idle connections and connections that only
//! sent refused requests. Timeouts bound how long each may last; this
//! bounds how many one peer holds at once, so an anonymous client cannot
//! pile up connection state.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The unauthenticated connections of every peer.
pub struct PendingPeers {
    per_peer: usize,
    counts: Mutex<HashMap<IpAddr, usize>>,
}

impl PendingPeers {
    pub fn new(per_peer: usize) -> Arc<Self> {
        Arc::new(Self {
            per_peer,
            counts: Mutex::default(),
        })
    }

    /// A slot for a new connection from `ip`, or `None` when that address
    /// already holds its quota.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        // An IPv4 client on a dual-stack socket is the same peer either way.
        let ip = ip.to_canonical();
        let mut counts = self.lock();
        let count = counts.entry(ip).or_insert(0);
        if *count >= self.per_peer {
            return None;
        }
        *count += 1;
        Some(PeerSlot(Arc::new(Slot {
            peers: self.clone(),
            ip,
            held: AtomicBool::new(true),
        })))
    }

    fn give_back(&self, ip: IpAddr) {
        let mut counts = self.lock();
        if let Some(count) = counts.get_mut(&ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&ip);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        // A panic elsewhere cannot leave a count half-updated.
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One connection's place in its peer's quota, shared by the connection
/// and its requests; given back when a request authenticates or when the
/// connection ends, whichever comes first.
#[derive(Clone)]
pub struct PeerSlot(Arc<Slot>);

struct Slot {
    peers: Arc<PendingPeers>,
    ip: IpAddr,
    held: AtomicBool,
}

impl PeerSlot {
    /// A request on this connection authenticated: it no longer counts
    /// against its peer.
    pub fn release(&self) {
        self.0.release();
    }
}

impl Slot {
    fn release(&self) {
        if self.held.swap(false, Ordering::AcqRel) {
            self.peers.give_back(self.ip);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_holds_at_most_its_quota_until_it_authenticates() {
        let peers = PendingPeers::new(2);
        let ip: IpAddr = [10, 0, 0, 1].into();
        let first = peers.admit(ip).unwrap();
        let second = peers.admit(ip).unwrap();
        assert!(peers.admit(ip).is_none());
        assert!(peers.admit([10, 0, 0, 2].into()).is_some(), "per address");
        // The same IPv4 peer seen through a dual-stack socket.
        assert!(peers.admit("::ffff:10.0.0.1".parse().unwrap()).is_none());
        first.clone().release();
        first.release();
        let third = peers.admit(ip).unwrap();
        drop(second);
        drop(third);
        assert!(peers.lock().is_empty());
    }
}
