//! Live client connections by their handshake id, so `KILL [QUERY] id`
//! from one client can stop another's statement or connection — only a
//! connection of the same local user, as MariaDB allows without
//! privileges — and so the drain knows which connections carry work.
//!
//! Ids are sequential (from 2^30), as MySQL's and MariaDB's are: ids are
//! not secrets (`SHOW PROCESSLIST` and `CONNECTION_ID()` show them), so the
//! ownership check is what protects a connection, not an unguessable id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Backend thread ids are small numbers; starting far from them keeps a
/// KILL aimed at a backend id (from CONNECTION_ID()) from hitting a local
/// connection by accident. Ids wrap back here, skipping live ones.
const FIRST_ID: u32 = 1 << 30;

/// What another connection can do to this one.
#[derive(Default)]
pub struct Handle {
    /// Cancels the running statement, if one is running (no permit is
    /// stored for a later one).
    pub cancel_query: Notify,
    /// Closes the connection after cancelling its statement.
    pub kill: Notify,
    killed: AtomicBool,
    /// The sidecar is draining: close once outside a transaction (at
    /// once while still logging in).
    pub drain: Notify,
    draining: AtomicBool,
    /// Killed by the end of a drain: tell the client why (ERR 1053).
    cut: AtomicBool,
    /// The local user it authenticated as; `None` while it logs in.
    user: Mutex<Option<Arc<[u8]>>>,
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

    fn user(&self) -> Option<Arc<[u8]>> {
        self.user.lock().expect("not poisoned").clone()
    }

    fn kill(&self, query_only: bool) {
        if !query_only {
            self.killed.store(true, Ordering::Release);
            self.kill.notify_one();
        }
        self.cancel_query.notify_waiters();
    }
}

/// What a `KILL` from a client came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    Killed,
    /// The connection belongs to another local user (or has not logged
    /// in): ER_KILL_DENIED_ERROR, as MariaDB answers.
    NotOwner,
    /// No local connection has that id (it may be a backend thread id).
    NoSuchConnection,
}

pub struct Registry {
    inner: Mutex<Inner>,
    draining: AtomicBool,
}

struct Inner {
    next_id: u32,
    live: HashMap<u32, Arc<Handle>>,
}

/// Removes its connection from the registry when dropped.
pub struct Registration {
    pub id: u32,
    pub handle: Arc<Handle>,
    registry: Arc<Registry>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.lock().live.remove(&self.id);
    }
}

impl Registration {
    /// The connection authenticated (or re-authenticated with
    /// `COM_CHANGE_USER`) as `user`: from now on it counts as a client
    /// connection, and that user's other connections may kill it.
    pub fn logged_in(&self, user: &[u8]) {
        *self.handle.user.lock().expect("not poisoned") = Some(user.into());
    }

    pub fn is_logged_in(&self) -> bool {
        self.handle.user().is_some()
    }

    /// `KILL QUERY id` (`query_only`) or `KILL [CONNECTION] id` from this
    /// connection: allowed on connections of the same local user only.
    pub fn kill(&self, id: u64, query_only: bool) -> KillOutcome {
        let Some(target) = u32::try_from(id)
            .ok()
            .and_then(|id| self.registry.lock().live.get(&id).cloned())
        else {
            return KillOutcome::NoSuchConnection;
        };
        match (self.handle.user(), target.user()) {
            (Some(me), Some(owner)) if me == owner => {
                target.kill(query_only);
                KillOutcome::Killed
            }
            _ => KillOutcome::NotOwner,
        }
    }
}

impl Registry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner {
                next_id: FIRST_ID,
                live: HashMap::new(),
            }),
            draining: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("not poisoned")
    }

    /// Asks every connection, and every later one, to close as soon as it
    /// is outside a transaction (connections still logging in: at once).
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        for handle in self.lock().live.values() {
            handle.draining.store(true, Ordering::Release);
            handle.drain.notify_one();
        }
    }

    /// Ends every connection now, telling each logged-in client the
    /// server is shutting down. Returns how many logged-in connections
    /// there were: one still logging in had no work to cut.
    pub fn cut_all(&self) -> usize {
        let inner = self.lock();
        let mut cut = 0;
        for handle in inner.live.values() {
            if handle.user().is_some() {
                handle.cut.store(true, Ordering::Release);
                cut += 1;
            }
            handle.kill(false);
        }
        cut
    }

    /// Closes every connection, without a word to its client.
    pub fn close_all(&self) {
        for handle in self.lock().live.values() {
            handle.kill(false);
        }
    }

    /// A new connection, not logged in yet.
    pub fn register(self: &Arc<Self>) -> Registration {
        let handle = Arc::new(Handle::default());
        if self.draining.load(Ordering::Acquire) {
            handle.draining.store(true, Ordering::Release);
        }
        let mut inner = self.lock();
        // Live connections are far fewer than ids: this ends at once.
        let id = loop {
            let id = inner.next_id;
            inner.next_id = id.checked_add(1).unwrap_or(FIRST_ID);
            if !inner.live.contains_key(&id) {
                break id;
            }
        };
        inner.live.insert(id, handle.clone());
        Registration {
            id,
            handle,
            registry: self.clone(),
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Open connections, logged in or not.
    pub fn len(&self) -> usize {
        self.lock().live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections that have logged in: the ones that may carry work.
    pub fn logged_in(&self) -> usize {
        self.lock()
            .live
            .values()
            .filter(|h| h.user().is_some())
            .count()
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
        a.logged_in(b"app");
        b.logged_in(b"app");
        assert_eq!(b.kill(u64::from(a.id), true), KillOutcome::Killed);
        assert!(!a.handle.is_killed());
        assert_eq!(a.kill(u64::from(b.id), false), KillOutcome::Killed);
        assert!(b.handle.is_killed());
        drop(a);
        assert_eq!(registry.len(), 1);
        assert_eq!(b.kill(7, true), KillOutcome::NoSuchConnection);
        assert_eq!(b.kill(u64::MAX, true), KillOutcome::NoSuchConnection);
    }

    #[test]
    fn only_the_same_user_may_kill() {
        let registry = Registry::new();
        let alice = registry.register();
        let bob = registry.register();
        let stranger = registry.register();
        alice.logged_in(b"alice");
        bob.logged_in(b"bob");
        assert_eq!(bob.kill(u64::from(alice.id), false), KillOutcome::NotOwner);
        assert_eq!(bob.kill(u64::from(alice.id), true), KillOutcome::NotOwner);
        assert!(!alice.handle.is_killed());
        // Not logged in: neither killer nor victim.
        assert_eq!(
            stranger.kill(u64::from(alice.id), false),
            KillOutcome::NotOwner
        );
        assert_eq!(
            alice.kill(u64::from(stranger.id), false),
            KillOutcome::NotOwner
        );
        // COM_CHANGE_USER moves the connection to its new user.
        bob.logged_in(b"alice");
        assert_eq!(bob.kill(u64::from(alice.id), false), KillOutcome::Killed);
        assert!(alice.handle.is_killed());
    }

    #[test]
    fn ids_wrap_past_live_ones() {
        let registry = Registry::new();
        let first = registry.register();
        assert_eq!(first.id, FIRST_ID);
        registry.lock().next_id = u32::MAX;
        assert_eq!(registry.register().id, u32::MAX);
        // Wraps to FIRST_ID, which is still live: skipped.
        assert_eq!(registry.register().id, FIRST_ID + 1);
    }

    #[test]
    fn the_drain_cuts_only_logged_in_connections() {
        let registry = Registry::new();
        let client = registry.register();
        let stranger = registry.register();
        client.logged_in(b"app");
        assert_eq!(registry.logged_in(), 1);
        assert_eq!(registry.cut_all(), 1);
        assert!(client.handle.is_cut() && client.handle.is_killed());
        assert!(!stranger.handle.is_cut() && stranger.handle.is_killed());
    }
}
