//! Fair shares per credential of what the gateway has a fixed number of:
//! session slots (`sessions.max_sessions`) and backend connections held
//! by sessions (`backend.max_connections_total`).
//!
//! One API credential could otherwise take them all: 10,000
//! `CreateSession` calls in 3.5 s left every other credential with 429,
//! and 150 concurrent `Execute` calls took every connection MariaDB
//! allows. The rule for both: a credential may use what nobody else asks
//! for, but while another credential needs some it gets no more than its
//! share — the total divided by the credentials active (holding or
//! waiting) — and the others get what it gives back.
//!
//! - Sessions: a session outside a transaction and without backend state
//!   is whole in its signed cookie (a later request rebuilds it), so when
//!   the table is full the gateway forgets an idle one of the credential
//!   furthest over its share (the caller's own, if that is the caller)
//!   rather than refuse anyone under its share. Only sessions pinned by a
//!   transaction or backend state really hold a slot, and those hold a
//!   backend connection too, bounded below.
//! - Backend connections: a session takes a [`ConnectionPermit`] before it
//!   takes a connection from its pool, and gives it back with the
//!   connection. When none is free a request waits in a queue with a
//!   deadline (`backend.connect_timeout`); a credential over its share
//!   cannot take one while another waits. At the deadline: MySQL's 1040.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tracing::info;

use crate::api::{ApiError, Code};
use crate::mysql::MysqlError;

use super::auth::Account;

/// How often a request waiting only for connections being reset looks
/// again.
const RECYCLING_RECHECK: Duration = Duration::from_millis(5);

/// `total` divided among `active` credentials (at least one each).
fn share(total: usize, active: usize) -> usize {
    (total / active.max(1)).max(1)
}

// === sessions ===

/// Live sessions per credential.
#[derive(Clone, Default)]
pub struct SessionShares {
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

/// Counts one session for its credential while it lives.
pub struct SessionToken {
    counts: Arc<Mutex<HashMap<String, usize>>>,
    owner: String,
}

impl SessionShares {
    /// Counts a new session of `owner`.
    pub fn token(&self, owner: &str) -> SessionToken {
        *self
            .counts
            .lock()
            .expect("not poisoned")
            .entry(owner.to_string())
            .or_default() += 1;
        SessionToken {
            counts: self.counts.clone(),
            owner: owner.to_string(),
        }
    }

    /// With all `max` slots taken, whose idle session `owner` may have
    /// forgotten for its new one: its own when it holds its share or
    /// more, else that of the credential furthest over its share. `Err`:
    /// every credential is within its share (the slots are really used).
    pub fn victim(&self, owner: &str, max: usize) -> Result<String, ApiError> {
        let counts = self.counts.lock().expect("not poisoned");
        let (mine, fair) = fair_share(&counts, owner, max);
        if mine >= fair {
            return Ok(owner.to_string());
        }
        match counts.iter().max_by_key(|(_, held)| **held) {
            Some((other, held)) if *held > fair => Ok(other.clone()),
            _ => Err(sessions_full(max, mine, fair)),
        }
    }

    /// The refusal of `owner`'s new session when nothing could be
    /// forgotten for it (429).
    pub fn refusal(&self, owner: &str, max: usize) -> ApiError {
        let counts = self.counts.lock().expect("not poisoned");
        let (mine, fair) = fair_share(&counts, owner, max);
        sessions_full(max, mine, fair)
    }

    /// Sessions `owner` holds now.
    #[cfg(test)]
    pub fn held(&self, owner: &str) -> usize {
        (self.counts.lock().expect("not poisoned"))
            .get(owner)
            .copied()
            .unwrap_or(0)
    }
}

/// What `owner` holds, and its share of `max` among the credentials
/// holding sessions, itself included.
fn fair_share(counts: &HashMap<String, usize>, owner: &str, max: usize) -> (usize, usize) {
    let mine = counts.get(owner).copied().unwrap_or(0);
    let active = counts.len() + usize::from(mine == 0);
    (mine, share(max, active))
}

impl Drop for SessionToken {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().expect("not poisoned");
        if let Some(held) = counts.get_mut(&self.owner) {
            *held -= 1;
            if *held == 0 {
                counts.remove(&self.owner);
            }
        }
    }
}

/// The refusal (429) when no session can be forgotten for a new one.
pub fn sessions_full(max: usize, held: usize, fair: usize) -> ApiError {
    ApiError::new(
        Code::ResourceExhausted,
        format!(
            "too many sessions (limit {max}): every one is in use, in a transaction or holding backend state; this credential holds {held}, its share is {fair}"
        ),
    )
}

// === backend connections ===

/// Backend connections held by sessions, per credential, within a total.
pub struct BackendShares {
    total: AtomicUsize,
    holdings: Mutex<Holdings>,
    /// The pools' own figures: a connection a session gave back is being
    /// reset (`COM_RESET_CONNECTION`) for a moment before it can be taken
    /// again, and a session taking one meanwhile would make its pool open
    /// another — so those count as in use too.
    pools: Mutex<Vec<Arc<mysql_async::Metrics>>>,
    /// Signalled whenever a connection is given back or a waiter leaves.
    changed: Notify,
}

#[derive(Default)]
struct Holdings {
    in_use: usize,
    held: HashMap<String, usize>,
    waiting: HashMap<String, usize>,
}

impl Holdings {
    /// Whether `owner` may take a connection now, with `recycling` more
    /// on their way back to their pools.
    fn may_take(&self, owner: &str, total: usize, recycling: usize) -> bool {
        if self.in_use + recycling >= total {
            return false;
        }
        let others_wait = self.waiting.keys().any(|o| o != owner);
        !others_wait || self.held(owner) < self.share_of(owner, total)
    }

    fn held(&self, owner: &str) -> usize {
        self.held.get(owner).copied().unwrap_or(0)
    }

    /// `owner`'s share: the total divided among the credentials holding
    /// or waiting, `owner` included.
    fn share_of(&self, owner: &str, total: usize) -> usize {
        let mut active: Vec<&String> = self.held.keys().chain(self.waiting.keys()).collect();
        active.sort_unstable();
        active.dedup();
        let counted = active.iter().any(|o| *o == owner);
        share(total, active.len() + usize::from(!counted))
    }

    fn adjust(map: &mut HashMap<String, usize>, owner: &str, up: bool) {
        if up {
            *map.entry(owner.to_string()).or_default() += 1;
        } else if let Some(n) = map.get_mut(owner) {
            *n -= 1;
            if *n == 0 {
                map.remove(owner);
            }
        }
    }
}

/// A backend connection a session may hold; given back when dropped.
pub struct ConnectionPermit {
    shares: Arc<BackendShares>,
    owner: String,
}

impl std::fmt::Debug for ConnectionPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionPermit")
            .field("owner", &self.owner)
            .finish()
    }
}

impl BackendShares {
    pub fn new(total: usize) -> Arc<Self> {
        Arc::new(Self {
            total: AtomicUsize::new(total.max(1)),
            holdings: Mutex::default(),
            pools: Mutex::default(),
            changed: Notify::new(),
        })
    }

    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// A new total (learned from the backend).
    pub fn set_total(&self, total: usize) {
        self.total.store(total.max(1), Ordering::Relaxed);
        self.changed.notify_waiters();
    }

    /// Connections `owner` holds now.
    pub fn held(&self, owner: &str) -> usize {
        self.holdings.lock().expect("not poisoned").held(owner)
    }

    /// Counts the connections `pool` is resetting as in use.
    pub fn watch(&self, pool: &mysql_async::Pool) {
        self.pools
            .lock()
            .expect("not poisoned")
            .push(pool.metrics());
    }

    /// Connections open but neither in use nor ready in their pool.
    fn recycling(&self) -> usize {
        let pools = self.pools.lock().expect("not poisoned");
        pools
            .iter()
            .map(|m| {
                let open = m.connection_count.load(Ordering::Relaxed);
                let in_use = m.connections_in_use.load(Ordering::Relaxed);
                let ready = m.connections_in_pool.load(Ordering::Relaxed);
                open.saturating_sub(in_use + ready)
            })
            .sum()
    }

    /// A permit for one more backend connection of `owner`, waiting up to
    /// `within` for one to be given back; then MySQL's 1040.
    pub async fn acquire(
        self: &Arc<Self>,
        owner: &str,
        within: Duration,
    ) -> Result<ConnectionPermit, MysqlError> {
        let deadline = tokio::time::Instant::now() + within;
        let mut queued = false;
        loop {
            // Registered before the check, so a release in between wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let recycling = self.recycling();
            {
                let mut h = self.holdings.lock().expect("not poisoned");
                if h.may_take(owner, self.total(), recycling) {
                    if queued {
                        Holdings::adjust(&mut h.waiting, owner, false);
                    }
                    Holdings::adjust(&mut h.held, owner, true);
                    h.in_use += 1;
                    return Ok(ConnectionPermit {
                        shares: self.clone(),
                        owner: owner.to_string(),
                    });
                }
                if !queued {
                    Holdings::adjust(&mut h.waiting, owner, true);
                    queued = true;
                }
            }
            // A reset ends without a signal here: look again shortly.
            let until = match recycling {
                0 => deadline,
                _ => deadline.min(tokio::time::Instant::now() + RECYCLING_RECHECK),
            };
            if tokio::time::timeout_at(until, changed).await.is_err() && until == deadline {
                let refusal = {
                    let mut h = self.holdings.lock().expect("not poisoned");
                    Holdings::adjust(&mut h.waiting, owner, false);
                    let total = self.total();
                    too_many_connections(total, h.held(owner), h.share_of(owner, total), within)
                };
                // Whoever this one held back may go on.
                self.changed.notify_waiters();
                return Err(refusal);
            }
        }
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        {
            let mut h = self.shares.holdings.lock().expect("not poisoned");
            Holdings::adjust(&mut h.held, &self.owner, false);
            h.in_use -= 1;
        }
        self.shares.changed.notify_waiters();
    }
}

/// ER_CON_COUNT_ERROR, what a server answers when it has no connection
/// to give; the message says whose share ran out.
fn too_many_connections(total: usize, held: usize, fair: usize, waited: Duration) -> MysqlError {
    MysqlError {
        code: 1040,
        state: "08004".into(),
        message: format!(
            "Too many connections: no backend connection became free within {waited:?} (gateway.backend.max_connections_total = {total}; this credential holds {held}, its share while others wait is {fair})"
        ).into(),
    }
}

/// Learns the backend's `max_connections` (as `account`) and makes the
/// total 80 % of it — the rest for the gateway's own queries, other
/// gateways' and administrators' connections. Tried once at start, within
/// `within`, so the first requests already see it; whether it was.
pub async fn learn_total_now(shares: &BackendShares, account: &Account, within: Duration) -> bool {
    tokio::time::timeout(within, learn_total_once(shares, account))
        .await
        .unwrap_or(false)
}

/// [`learn_total_now`] again every second until the backend answers.
pub async fn learn_total(
    shares: Arc<BackendShares>,
    account: Arc<Account>,
    stop: tokio_util::sync::CancellationToken,
) {
    while !learn_total_once(&shares, &account).await {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

async fn learn_total_once(shares: &BackendShares, account: &Account) -> bool {
    use mysql_async::prelude::Queryable;
    // Whether the backend offers TLS first: the pool asked is the one used.
    if account.pools.settle().await.is_err() {
        return false;
    }
    let asked = async {
        let mut conn = account.pool().get_conn().await?;
        conn.query_first::<usize, _>("SELECT @@max_connections")
            .await
    };
    let Ok(Some(backend)) = asked.await else {
        return false;
    };
    let total = (backend * 4 / 5).max(1);
    info!(
        backend_max_connections = backend,
        total, "backend connections shared among credentials"
    );
    shares.set_total(total);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_forgets_a_session_of_whoever_is_over_its_share() {
        let shares = SessionShares::default();
        let flood: Vec<_> = (0..10).map(|_| shares.token("flood")).collect();
        // Another credential takes from the flood's.
        assert_eq!(shares.victim("other", 10).unwrap(), "flood");
        let _other: Vec<_> = (0..5).map(|_| shares.token("other")).collect();
        // At its share (5 of 10 with two active), it recycles its own.
        assert_eq!(shares.victim("other", 10).unwrap(), "other");
        assert_eq!(shares.victim("flood", 10).unwrap(), "flood");
        // A full table always has someone at or over its share; when none
        // of their sessions can be forgotten (all in use or pinned), 429.
        let e = shares.refusal("other", 10);
        assert_eq!(e.code, Code::ResourceExhausted);
        assert!(
            e.message.contains("holds 5, its share is 5"),
            "{}",
            e.message
        );
        drop(flood);
        assert_eq!(shares.held("flood"), 0);
    }

    #[tokio::test]
    async fn a_waiting_credential_gets_the_next_connection_before_one_over_its_share() {
        let shares = BackendShares::new(4);
        let within = Duration::from_secs(5);
        let mut flood = Vec::new();
        for _ in 0..4 {
            flood.push(shares.acquire("flood", within).await.unwrap());
        }
        // Full: the other credential waits…
        let waiting = {
            let shares = shares.clone();
            tokio::spawn(async move { shares.acquire("other", within).await })
        };
        while shares.holdings.lock().unwrap().waiting.is_empty() {
            tokio::task::yield_now().await;
        }
        // …the flood, over its share of 2 while it waits, cannot take the
        // connection given back…
        flood.pop();
        let refused = shares.acquire("flood", Duration::from_millis(50)).await;
        assert_eq!(refused.unwrap_err().code, 1040);
        // …which goes to the waiting credential.
        let permit = waiting.await.unwrap().unwrap();
        assert_eq!((shares.held("flood"), shares.held("other")), (3, 1));
        drop(permit);
        drop(flood);
        assert_eq!(shares.holdings.lock().unwrap().in_use, 0);
    }

    #[tokio::test]
    async fn alone_a_credential_may_use_everything() {
        let shares = BackendShares::new(3);
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(shares.acquire("only", Duration::ZERO).await.unwrap());
        }
        let e = shares.acquire("only", Duration::from_millis(10)).await;
        assert!(e.unwrap_err().message.contains("max_connections_total = 3"));
    }
}
