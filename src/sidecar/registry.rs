//! Live client connections by their handshake id, so `KILL [QUERY] id`
//! from one client can stop another's statement or connection.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// What another connection can do to this one.
#[derive(Default)]
pub struct Handle {
    /// Cancels the running statement, if one is running (no permit is
    /// stored for a later one).
    pub cancel_query: Notify,
    /// Closes the connection after cancelling its statement.
    pub kill: Notify,
    killed: AtomicBool,
    /// The sidecar is draining: close once outside a transaction.
    pub drain: Notify,
    draining: AtomicBool,
    /// Killed by the end of a drain: tell the client why (ERR 1053).
    cut: AtomicBool,
}

impl Handle {
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Acquire)
    }
}

pub struct Registry {
    next_id: AtomicU32,
    live: Mutex<HashMap<u32, Arc<Handle>>>,
    draining: AtomicBool,
}

/// Removes its connection from the registry when dropped.
pub struct Registration {
    pub id: u32,
    pub handle: Arc<Handle>,
    registry: Arc<Registry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry
            .live
            .lock()
            .expect("not poisoned")
            .remove(&self.id);
    }
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            // Backend thread ids are small numbers; starting far from them
            // keeps a KILL aimed at a backend id (from CONNECTION_ID())
            // from hitting a local connection by accident.
            next_id: AtomicU32::new(1 << 30),
            live: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
        })
    }

    /// Asks every connection, and every later one, to close as soon as it
    /// is outside a transaction.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        for handle in self.live.lock().expect("not poisoned").values() {
            handle.draining.store(true, Ordering::Release);
            handle.drain.notify_one();
        }
    }

    /// Ends every connection now, telling each client the server is
    /// shutting down. Returns how many there were.
    pub fn cut_all(&self) -> usize {
        let live = self.live.lock().expect("not poisoned");
        for handle in live.values() {
            handle.cut.store(true, Ordering::Release);
            handle.killed.store(true, Ordering::Release);
            handle.kill.notify_one();
        }
        live.len()
    }

    pub fn register(self: &Arc<Self>) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let handle = Arc::new(Handle::default());
        if self.draining.load(Ordering::Acquire) {
            handle.draining.store(true, Ordering::Release);
        }
        self.live
            .lock()
            .expect("not poisoned")
            .insert(id, handle.clone());
        Registration {
            id,
            handle,
            registry: self.clone(),
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    pub fn ids(&self) -> Vec<u32> {
        self.live
            .lock()
            .expect("not poisoned")
            .keys()
            .copied()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.live.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `KILL QUERY id` (`query_only`) or `KILL [CONNECTION] id`; false if
    /// no local connection has that id.
    pub fn kill(&self, id: u64, query_only: bool) -> bool {
        let Ok(id) = u32::try_from(id) else {
            return false;
        };
        let Some(handle) = self.live.lock().expect("not poisoned").get(&id).cloned() else {
            return false;
        };
        if !query_only {
            handle.killed.store(true, Ordering::Release);
            handle.kill.notify_one();
        }
        handle.cancel_query.notify_waiters();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_unregister_on_drop() {
        let registry = Registry::new();
        let a = registry.register();
        let b = registry.register();
        assert_ne!(a.id, b.id);
        assert!(registry.kill(u64::from(a.id), true));
        assert!(!a.handle.is_killed());
        assert!(registry.kill(u64::from(b.id), false));
        assert!(b.handle.is_killed());
        drop(a);
        assert_eq!(registry.len(), 1);
        assert!(!registry.kill(7, true));
    }
}
