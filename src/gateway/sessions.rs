//! Sessions: the state a client's opaque `Session` cookie stands for.
//!
//! The cookie names a session by its `SessionUUID` and carries an HMAC over
//! (owner, uuid, the fields a session is rebuilt from), so it can be
//! neither forged, edited nor used by another user. For a pinned session
//! (a transaction, or backend state: [`super::session_state`]) the truth
//! lives here, with its backend connection; an unpinned one is whole in
//! its cookie, and any gateway sharing the signing key rebuilds it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::api::pb::vitess::query::v22::{ExecuteOptions, execute_options::IncludedFields};
use crate::api::pb::{self, VitessSession};
use crate::api::{ApiError, Code};
use crate::translate::sql_text::Dialect;

use super::connect_attrs::ConnectAttrs;
use super::session_state::{self, RELEASE_IDLE_CONNECTION_AFTER};
use super::shares::{ConnectionPermit, SessionShares, SessionToken};

/// How long the gateway remembers that an expired session held a
/// transaction, to refuse it clearly rather than start afresh.
const TOMBSTONE_TTL: Duration = Duration::from_secs(3600);
const MAX_TOMBSTONES: usize = 100_000;

/// What one session holds between requests.
#[derive(Default)]
pub struct SessionState {
    /// The pinned backend connection; taken from the pool at first use.
    pub conn: Option<mysql_async::Conn>,
    /// The credential's share of backend connections `conn` counts
    /// against (`super::shares`): taken before it, given back with it when
    /// the session ends or idles (kept across a lost connection, which
    /// the session's next request replaces).
    pub backend_share: Option<ConnectionPermit>,
    pub in_transaction: bool,
    pub autocommit: bool,
    pub last_insert_id: u64,
    pub found_rows: u64,
    pub row_count: i64,
    pub warnings: Vec<pb::QueryWarning>,
    /// The database the session was created in: the creating request's
    /// `target_string` (Vitess's name for it), selected on every backend
    /// connection the session takes, and reported back in the cookie. It
    /// saves a client the separate `USE` request (a round trip) before its
    /// first statement. Cleared when the backend refuses it, which the
    /// client sees as an empty `target_string`.
    pub target: Option<String>,
    /// `@@character_set_client` and `@@sql_mode` as last read from the
    /// backend (`None`: not read since the connection was taken, so the
    /// pool's: utf8mb4 and the server's default mode). They decide how SQL
    /// text is scanned ([`SessionState::dialect`]) and travel in the
    /// cookie's `system_variables`, where a sidecar reads them for the
    /// same reason and for the status flags drivers escape by.
    pub charset: Option<String>,
    pub sql_mode: Option<String>,
    /// `@@wait_timeout` as last read: a sidecar closes an idle client
    /// after it, as the server would.
    pub wait_timeout: Option<u64>,
    /// Affected rows count the rows matched (the MySQL client flag
    /// `CLIENT_FOUND_ROWS`, a Vitess session's `options.client_found_rows`):
    /// the session's connections come from the pool opened with that flag.
    pub client_found_rows: bool,
    /// The client reads session-state tracking (the request's
    /// `options.session_state_tracking`): after a `SET`, the variables it
    /// reports are read back into `state_changes`.
    pub tracks_session_state: bool,
    /// The session-state tracking entries of the request's last statement
    /// (encoded, `SESSION_TRACK_SYSTEM_VARIABLES`), sent in the cookie's
    /// `session_state_changes`.
    pub state_changes: Vec<u8>,
    /// The session's `session_track_state_change` is on (read back after
    /// a `SET` of it; such a `SET` pins the session to its connection).
    pub tracks_state_change: bool,
    /// The session's `session_track_system_variables` as last read
    /// (`None`: not yet, the server's default).
    pub tracked_list: Option<Vec<u8>>,
    /// Why the session is bound to this gateway and its backend
    /// connection, besides a transaction (sticky: backend state is not
    /// tracked to its end). `None`: the cookie describes it whole.
    pub pinned: Option<&'static str>,
    /// Replayable session variables set by the client, as SQL literals:
    /// set again on every backend connection the session takes.
    pub replayed: BTreeMap<String, String>,
    /// The client's connection attributes, which every backend connection
    /// the session takes carries (`connect_attrs`), from the creating
    /// request. Not in the cookie (it would ride on every request): a
    /// session rebuilt from its cookie has none.
    pub connect_attrs: Option<ConnectAttrs>,
}

impl SessionState {
    /// How the backend reads this session's SQL text.
    pub fn dialect(&self) -> Dialect {
        Dialect::from_variables(self.charset.as_deref(), self.sql_mode.as_deref())
    }

    /// The character set string parameters are read in.
    pub fn charset_name(&self) -> &str {
        self.charset.as_deref().unwrap_or("utf8mb4")
    }

    /// Whether the session must stay on this gateway's connection.
    pub fn is_pinned(&self) -> bool {
        self.in_transaction || self.pinned.is_some()
    }

    /// Binds the session to this gateway (the first reason stays).
    pub fn pin(&mut self, why: &'static str) {
        self.pinned.get_or_insert(why);
    }

    /// Takes the rebuildable state a verified cookie carries, leaving the
    /// backend connection (if any) to the pool: the next request takes a
    /// fresh one and sets it up from this state.
    fn adopt(&mut self, vitess: &VitessSession) {
        self.conn = None;
        self.in_transaction = false;
        self.pinned = None;
        self.autocommit = vitess.autocommit;
        self.target = Some(vitess.target_string.clone()).filter(|t| !t.is_empty());
        self.last_insert_id = vitess.last_insert_id;
        if let Some(options) = &vitess.options {
            self.client_found_rows = options.client_found_rows;
            self.tracks_session_state = options.session_state_tracking;
        }
        self.state_changes.clear();
        self.replayed = session_state::replayed_from(vitess);
        let variable = |name: &str| {
            vitess
                .system_variables
                .get(name)
                .map(|v| session_state::unquote(v))
        };
        self.charset = variable("character_set_client");
        self.sql_mode = variable("sql_mode");
        self.wait_timeout = variable("wait_timeout").and_then(|v| v.parse().ok());
    }
}

/// The session variables a client must know, as a Vitess session keeps
/// the ones a client set: values as SQL string literals.
fn system_variables(state: &SessionState) -> HashMap<String, String> {
    let quoted = |v: &str| format!("'{}'", v.replace('\'', "''"));
    let mut variables: HashMap<String, String> = [
        ("character_set_client", &state.charset),
        ("sql_mode", &state.sql_mode),
    ]
    .into_iter()
    .filter_map(|(name, value)| Some((name.to_string(), quoted(value.as_deref()?))))
    .collect();
    if let Some(seconds) = state.wait_timeout {
        variables.insert("wait_timeout".into(), seconds.to_string());
    }
    variables.extend(state.replayed.clone());
    variables
}

/// One registered session.
pub struct Slot {
    pub id: String,
    pub owner: String,
    state: Arc<tokio::sync::Mutex<SessionState>>,
    last_used: Mutex<Instant>,
    /// The signature of the last cookie issued for it: a request naming
    /// another one carries state this gateway did not produce last.
    issued: Mutex<[u8; 32]>,
    /// Counts it in its owner's share of `max_sessions`.
    _share: SessionToken,
}

/// Exclusive use of a session for the length of one request.
pub struct Lease {
    pub slot: Arc<Slot>,
    pub state: tokio::sync::OwnedMutexGuard<SessionState>,
}

impl Drop for Lease {
    /// Idle time counts from the end of the last request, not its start.
    fn drop(&mut self) {
        *self.slot.last_used.lock().expect("not poisoned") = Instant::now();
    }
}

/// How long a request waits for its session's previous request to end.
pub const BUSY_WAIT: Duration = Duration::from_secs(2);

/// Why a request cannot use the session it named.
pub enum Refusal {
    /// A protocol-level failure (forgery, limits).
    Api(ApiError),
    /// Another request holds the session: [`Sessions::wait_for`] it.
    Busy(Arc<Slot>),
    /// The session expired, or the gateway restarted, while it held a
    /// transaction, or its transaction or backend state lives on another
    /// gateway: the client must not go on as if it had it (the reason
    /// says which). A fresh session is offered.
    TransactionLost(Lease, &'static str),
}

pub struct Sessions {
    key: [u8; 32],
    idle_timeout: Duration,
    max_sessions: usize,
    /// Live sessions per credential (see `super::shares`).
    shares: SessionShares,
    live: Mutex<HashMap<String, Arc<Slot>>>,
    /// Ended sessions that held a transaction or backend state, and when.
    tombstones: Mutex<HashMap<String, Instant>>,
    /// Set when the gateway drains: pinned sessions end as soon as no
    /// request holds them.
    draining: AtomicBool,
}

impl Sessions {
    pub fn new(key: [u8; 32], idle_timeout: Duration, max_sessions: usize) -> Self {
        Self {
            key,
            idle_timeout,
            max_sessions,
            shares: SessionShares::default(),
            live: Mutex::new(HashMap::new()),
            tombstones: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
        }
    }

    /// A random key, for deployments that configure none.
    pub fn random_key() -> [u8; 32] {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        key
    }

    /// A key derived from configured secret text.
    pub fn key_from_secret(secret: &str) -> [u8; 32] {
        use sha2::Digest;
        Sha256::digest(secret.as_bytes()).into()
    }

    pub fn len(&self) -> usize {
        self.live.lock().expect("not poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Leases the session a request names, or a new one.
    pub fn lease(&self, owner: &str, cookie: Option<&pb::Session>) -> Result<Lease, Refusal> {
        let named = cookie
            .and_then(|c| c.vitess_session.as_ref())
            .filter(|v| !v.session_uuid.is_empty());
        let Some(vitess) = named else {
            // The only place a client's target counts: afterwards the
            // cookie merely reports it.
            let asked = cookie.and_then(|c| c.vitess_session.as_ref());
            let target = asked
                .map(|v| v.target_string.as_str())
                .filter(|t| !t.is_empty());
            let options = asked.and_then(|v| v.options.as_ref());
            let connect_attrs = match options {
                Some(options) => ConnectAttrs::of(options).map_err(Refusal::Api)?,
                None => None,
            };
            let mut lease = self.create(owner, new_id()).map_err(Refusal::Api)?;
            lease.state.target = target.map(str::to_string);
            if let Some(options) = options {
                lease.state.client_found_rows = options.client_found_rows;
                lease.state.tracks_session_state = options.session_state_tracking;
            }
            lease.state.connect_attrs = connect_attrs;
            return Ok(lease);
        };
        let id = &vitess.session_uuid;
        let signature = cookie.map(|c| &c.signature[..]).unwrap_or_default();
        if !self.verify(owner, vitess, signature) {
            return Err(Refusal::Api(ApiError::new(
                Code::PermissionDenied,
                "invalid session: signature does not match (sessions cannot be edited or shared between users)",
            )));
        }
        let existing = self.live.lock().expect("not poisoned").get(id).cloned();
        if let Some(slot) = existing {
            let Ok(state) = slot.state.clone().try_lock_owned() else {
                return Err(Refusal::Busy(slot));
            };
            *slot.last_used.lock().expect("not poisoned") = Instant::now();
            let mut lease = Lease { slot, state };
            self.catch_up(&mut lease, vitess, signature);
            return Ok(lease);
        }
        let tombstone = self
            .tombstones
            .lock()
            .expect("not poisoned")
            .remove(id)
            .is_some();
        if tombstone || vitess.in_transaction || vitess.in_reserved_conn {
            let fresh = self.create(owner, new_id()).map_err(Refusal::Api)?;
            let why = if tombstone {
                LOST_HERE
            } else if vitess.in_transaction {
                TRANSACTION_ELSEWHERE
            } else {
                STATE_ELSEWHERE
            };
            return Err(Refusal::TransactionLost(fresh, why));
        }
        // Unpinned: idle-expired, closed, or served by another gateway of
        // the tier until now. Nothing lives at a backend, so the session
        // continues on a new backend connection, rebuilt from its cookie.
        let mut lease = self.create(owner, id.clone()).map_err(Refusal::Api)?;
        lease.state.adopt(vitess);
        Ok(lease)
    }

    /// A session this gateway knows, named by a cookie: a pinned one is
    /// what this gateway holds (only here could it have moved on). An
    /// unpinned one may have moved on elsewhere in the tier since (another
    /// gateway served it while this one was unreachable, draining or
    /// not chosen): a cookie other than the last one issued here is then
    /// the truth, the state its client last saw. (So is an older cookie
    /// after a lost response: that client got an error, never the new
    /// state.)
    fn catch_up(&self, lease: &mut Lease, vitess: &VitessSession, signature: &[u8]) {
        if lease.state.is_pinned() {
            return;
        }
        if *lease.slot.issued.lock().expect("not poisoned") != *signature {
            lease.state.adopt(vitess);
        }
    }

    /// Waits for the request that holds `slot` to end, up to
    /// [`BUSY_WAIT`]. A session runs one request at a time; the one before
    /// may still be ending (a statement the client just cancelled ends
    /// when the backend has killed it), and the next request of a client
    /// that cancelled must not fail for that.
    pub async fn wait_for(&self, slot: Arc<Slot>) -> Result<Lease, Refusal> {
        let state = tokio::time::timeout(BUSY_WAIT, slot.state.clone().lock_owned())
            .await
            .map_err(|_| {
                Refusal::Api(ApiError::new(
                    Code::Aborted,
                    "session is already in use by another request; a session runs one request at a time",
                ))
            })?;
        *slot.last_used.lock().expect("not poisoned") = Instant::now();
        Ok(Lease { slot, state })
    }

    /// Whether `slot` is still the live session of its id: the request a
    /// later one waited for ([`Sessions::wait_for`]) may have ended it.
    pub fn is_live(&self, slot: &Arc<Slot>) -> bool {
        self.live
            .lock()
            .expect("not poisoned")
            .get(&slot.id)
            .is_some_and(|live| Arc::ptr_eq(live, slot))
    }

    /// Ends every session (at shutdown, after in-flight requests) and
    /// hands over their backend connections, for the caller to roll back
    /// and close.
    pub fn close_all(&self) -> Vec<mysql_async::Conn> {
        let all: Vec<_> = self.live.lock().expect("not poisoned").drain().collect();
        all.into_iter()
            .filter_map(|(_, slot)| slot.state.try_lock().ok()?.conn.take())
            .collect()
    }

    /// Starts the drain. A pinned session that no request holds
    /// can only go on here, and requests no longer reach this gateway, so
    /// it ends now (remembered, for a request that was already on its way)
    /// and its backend connection is handed over to be rolled back. Its
    /// locks go at once, not at the end of the drain: statements in flight
    /// here may be waiting for them.
    pub fn begin_drain(&self) -> Vec<mysql_async::Conn> {
        self.draining.store(true, Ordering::Relaxed);
        self.end_idle_pinned()
    }

    /// Whether the gateway drains: a pinned session whose request ends
    /// then ends too ([`Sessions::begin_drain`]).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    fn end_idle_pinned(&self) -> Vec<mysql_async::Conn> {
        let now = Instant::now();
        let mut conns = Vec::new();
        let mut live = self.live.lock().expect("not poisoned");
        let mut tombstones = self.tombstones.lock().expect("not poisoned");
        live.retain(|id, slot| {
            let Ok(mut state) = slot.state.try_lock() else {
                return true;
            };
            if !state.is_pinned() {
                return true;
            }
            if tombstones.len() < MAX_TOMBSTONES {
                tombstones.insert(id.clone(), now);
            }
            conns.extend(state.conn.take());
            false
        });
        conns
    }

    /// Ends a session now; its connection returns to the pool, which
    /// resets it (rolling back any transaction).
    pub fn close(&self, lease: Lease) {
        self.live
            .lock()
            .expect("not poisoned")
            .remove(&lease.slot.id);
    }

    /// Ends a session whose backend connection broke. If it was inside a
    /// transaction, later requests naming it are told the transaction is
    /// gone instead of silently running on a new connection.
    pub fn discard(&self, lease: Lease, was_in_transaction: bool) {
        if was_in_transaction {
            let mut tombstones = self.tombstones.lock().expect("not poisoned");
            if tombstones.len() < MAX_TOMBSTONES {
                tombstones.insert(lease.slot.id.clone(), Instant::now());
            }
        }
        self.close(lease);
    }

    /// Removes sessions idle past the timeout, remembering those that
    /// were inside a transaction. Returns how many were removed.
    pub fn expire_idle(&self) -> usize {
        let now = Instant::now();
        let mut expired = Vec::new();
        {
            let mut live = self.live.lock().expect("not poisoned");
            live.retain(|_, slot| {
                let idle = now.duration_since(*slot.last_used.lock().expect("not poisoned"));
                if idle < self.idle_timeout {
                    return true;
                }
                // A session in use is not idle, whatever its timestamp.
                match slot.state.clone().try_lock_owned() {
                    Ok(state) => {
                        expired.push((slot.id.clone(), state));
                        false
                    }
                    Err(_) => true,
                }
            });
        }
        let mut tombstones = self.tombstones.lock().expect("not poisoned");
        tombstones.retain(|_, at| now.duration_since(*at) < TOMBSTONE_TTL);
        let count = expired.len();
        for (id, state) in expired {
            if state.is_pinned() && tombstones.len() < MAX_TOMBSTONES {
                tombstones.insert(id, now);
            }
            // Dropping the state drops the connection back into the pool.
        }
        count
    }

    /// Gives the backend connections of unpinned sessions idle for
    /// [`RELEASE_IDLE_CONNECTION_AFTER`] back to the pool. Returns how many.
    pub fn release_idle_connections(&self) -> usize {
        let now = Instant::now();
        let slots: Vec<_> = self
            .live
            .lock()
            .expect("not poisoned")
            .values()
            .cloned()
            .collect();
        let mut released = 0;
        for slot in slots {
            let idle = now.duration_since(*slot.last_used.lock().expect("not poisoned"));
            if idle < RELEASE_IDLE_CONNECTION_AFTER {
                continue;
            }
            // A session in use is not idle.
            let Ok(mut state) = slot.state.try_lock() else {
                continue;
            };
            if state.is_pinned() {
                continue;
            }
            if state.conn.take().is_some() {
                released += 1;
            }
            // Also a share kept after its connection was lost.
            state.backend_share = None;
        }
        released
    }

    /// The cookie for a session's current state.
    pub fn cookie(&self, slot: &Slot, state: &SessionState) -> pb::Session {
        let vitess = VitessSession {
            in_transaction: state.in_transaction,
            autocommit: state.autocommit,
            options: Some(ExecuteOptions {
                included_fields: IncludedFields::All as i32,
                client_found_rows: state.client_found_rows,
                session_state_tracking: state.tracks_session_state,
                ..Default::default()
            }),
            session_state_changes: state.state_changes.clone().into(),
            target_string: state.target.clone().unwrap_or_default(),
            in_reserved_conn: state.pinned.is_some(),
            last_insert_id: state.last_insert_id,
            found_rows: state.found_rows,
            row_count: state.row_count,
            warnings: state.warnings.clone(),
            ddl_strategy: "direct".into(),
            session_uuid: slot.id.clone(),
            system_variables: system_variables(state),
            enable_system_settings: true,
            ..Default::default()
        };
        let signature = self.sign(&slot.owner, &vitess);
        *slot.issued.lock().expect("not poisoned") = signature;
        pb::Session {
            signature: signature.to_vec().into(),
            vitess_session: Some(vitess),
        }
    }

    fn create(&self, owner: &str, id: String) -> Result<Lease, ApiError> {
        let mut live = self.live.lock().expect("not poisoned");
        if live.len() >= self.max_sessions {
            // Full: an idle session of whoever is over its share is
            // forgotten (its cookie rebuilds it), or the request refused.
            let victim = self.shares.victim(owner, self.max_sessions)?;
            if !forget_one_idle(&mut live, &victim) {
                return Err(self.shares.refusal(owner, self.max_sessions));
            }
        }
        let state = SessionState {
            autocommit: true,
            row_count: -1,
            // What psdb clients have always had here; a request may ask
            // otherwise.
            client_found_rows: true,
            ..Default::default()
        };
        let slot = Arc::new(Slot {
            id: id.clone(),
            owner: owner.to_string(),
            state: Arc::new(tokio::sync::Mutex::new(state)),
            last_used: Mutex::new(Instant::now()),
            issued: Mutex::new([0; 32]),
            _share: self.shares.token(owner),
        });
        let state = slot
            .state
            .clone()
            .try_lock_owned()
            .expect("a new session is free");
        live.insert(id, slot.clone());
        Ok(Lease { slot, state })
    }

    fn mac(&self, owner: &str, vitess: &VitessSession) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(b"myquic-session-v2\0");
        mac.update(owner.as_bytes());
        mac.update(b"\0");
        mac.update(vitess.session_uuid.as_bytes());
        mac.update(b"\0");
        mac.update(&session_state::signed_fields(vitess));
        mac
    }

    fn sign(&self, owner: &str, vitess: &VitessSession) -> [u8; 32] {
        self.mac(owner, vitess).finalize().into_bytes().into()
    }

    fn verify(&self, owner: &str, vitess: &VitessSession, signature: &[u8]) -> bool {
        self.mac(owner, vitess).verify_slice(signature).is_ok()
    }
}

const LOST_HERE: &str = "the session's transaction was rolled back (or its backend state, such as temporary tables or user variables, is gone): the session expired, its gateway drained, or its backend connection was lost, while it held them; the statement was not run";
const TRANSACTION_ELSEWHERE: &str = "the session's transaction is not on this gateway (it is on another gateway of the tier, or was on this one before it restarted) and is rolled back there; the statement was not run";
const STATE_ELSEWHERE: &str = "the session's backend state (temporary tables, user variables, locks, prepared statements or settings that are not replayed) is not on this gateway (it is on another gateway of the tier, or was on this one before it restarted); the statement was not run";

/// 128 random bits, URL-safe base64 (22 characters, like Vitess's nanoid).
/// Forgets one session of `owner` that no request holds and that lives
/// whole in its cookie (no transaction, no backend state): its next
/// request rebuilds it, as on another gateway of a tier. Whether there
/// was one.
fn forget_one_idle(live: &mut HashMap<String, Arc<Slot>>, owner: &str) -> bool {
    let idle = live.iter().find_map(|(id, slot)| {
        if slot.owner != owner {
            return None;
        }
        let state = slot.state.try_lock().ok()?;
        (!state.is_pinned()).then(|| id.clone())
    });
    idle.and_then(|id| live.remove(&id)).is_some()
}

fn new_id() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sessions() -> Sessions {
        Sessions::new([7; 32], Duration::from_millis(0), 10)
    }

    #[test]
    fn cookies_are_bound_to_their_owner() {
        let s = sessions();
        let lease = s.lease("alice", None).ok().unwrap();
        let cookie = s.cookie(&lease.slot, &lease.state);
        drop(lease);
        assert!(s.lease("alice", Some(&cookie)).is_ok());
        match s.lease("mallory", Some(&cookie)) {
            Err(Refusal::Api(e)) => assert_eq!(e.code, Code::PermissionDenied),
            _ => panic!("another user's cookie was accepted"),
        }
        let mut forged = cookie.clone();
        forged.vitess_session.as_mut().unwrap().session_uuid = "someone-else".into();
        assert!(matches!(
            s.lease("alice", Some(&forged)),
            Err(Refusal::Api(_))
        ));
    }

    /// One request at a time: a second one waits for the first to end
    /// (never runs beside it).
    #[tokio::test]
    async fn a_second_request_waits_for_the_first() {
        let s = Arc::new(sessions());
        let lease = s.lease("alice", None).ok().unwrap();
        let cookie = s.cookie(&lease.slot, &lease.state);
        let Err(Refusal::Busy(slot)) = s.lease("alice", Some(&cookie)) else {
            panic!("a session in use was leased twice");
        };
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.wait_for(slot).await.is_ok() }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "waits while the first holds it");
        drop(lease);
        assert!(waiting.await.unwrap(), "leased once the first ended");
    }

    /// The request waited for lost the transaction with its connection
    /// (vtgate, which cannot kill a statement: the gateway gives the
    /// connection up): the waiting one must not run on the ended session.
    #[tokio::test]
    async fn a_request_that_waited_for_a_lost_transaction_is_told() {
        let s = Arc::new(sessions());
        let mut lease = s.lease("alice", None).ok().unwrap();
        lease.state.in_transaction = true;
        let cookie = s.cookie(&lease.slot, &lease.state);
        let Err(Refusal::Busy(slot)) = s.lease("alice", Some(&cookie)) else {
            panic!("a session in use was leased twice");
        };
        let waiting = tokio::spawn({
            let s = s.clone();
            async move { s.wait_for(slot).await.ok().unwrap() }
        });
        tokio::task::yield_now().await;
        s.discard(lease, true);
        let waited = waiting.await.unwrap();
        assert!(
            !s.is_live(&waited.slot),
            "the waiter holds an ended session"
        );
        drop(waited);
        assert!(matches!(
            s.lease("alice", Some(&cookie)),
            Err(Refusal::TransactionLost(_, _))
        ));
    }

    #[test]
    fn expiry_inside_a_transaction_is_remembered() {
        let s = sessions();
        let mut lease = s.lease("alice", None).ok().unwrap();
        lease.state.in_transaction = true;
        let mut cookie = s.cookie(&lease.slot, &lease.state);
        drop(lease);
        assert_eq!(s.expire_idle(), 1);
        assert!(matches!(
            s.lease("alice", Some(&cookie)),
            Err(Refusal::TransactionLost(_, LOST_HERE))
        ));
        // A client cannot claim to be outside its transaction: the
        // signature covers the state.
        cookie.vitess_session.as_mut().unwrap().in_transaction = false;
        assert!(matches!(
            s.lease("alice", Some(&cookie)),
            Err(Refusal::Api(_))
        ));
    }

    fn tier() -> (Sessions, Sessions) {
        let gateway = || Sessions::new([9; 32], Duration::from_secs(60), 10);
        (gateway(), gateway())
    }

    /// An unpinned session continues on another gateway with what it had:
    /// database, autocommit, replayable variables, found-rows mode.
    #[test]
    fn an_unpinned_session_is_rebuilt_by_another_gateway() {
        let (a, b) = tier();
        let mut lease = a.lease("alice", None).ok().unwrap();
        lease.state.target = Some("app".into());
        lease.state.autocommit = false;
        lease.state.client_found_rows = false;
        lease.state.last_insert_id = 42;
        lease.state.sql_mode = Some("ANSI".into());
        lease
            .state
            .replayed
            .insert("time_zone".into(), "'+01:00'".into());
        let cookie = a.cookie(&lease.slot, &lease.state);
        drop(lease);
        let moved = b.lease("alice", Some(&cookie)).ok().unwrap();
        assert_eq!(
            moved.slot.id,
            cookie.vitess_session.as_ref().unwrap().session_uuid
        );
        assert_eq!(moved.state.target.as_deref(), Some("app"));
        assert!(!moved.state.autocommit);
        assert!(!moved.state.client_found_rows);
        assert_eq!(moved.state.last_insert_id, 42);
        assert_eq!(moved.state.sql_mode.as_deref(), Some("ANSI"));
        assert_eq!(moved.state.replayed["time_zone"], "'+01:00'");
        assert!(moved.state.conn.is_none() && !moved.state.is_pinned());
        // The cookie it answers with is the same session, signed alike.
        assert_eq!(
            b.cookie(&moved.slot, &moved.state).signature,
            cookie.signature
        );
    }

    /// A pinned session is refused elsewhere, and its state cannot be
    /// edited into an unpinned one.
    #[test]
    fn a_pinned_session_is_refused_by_another_gateway() {
        let (a, b) = tier();
        for (in_transaction, pinned, why) in [
            (true, None, TRANSACTION_ELSEWHERE),
            (false, Some("a temporary table"), STATE_ELSEWHERE),
        ] {
            let mut lease = a.lease("alice", None).ok().unwrap();
            lease.state.in_transaction = in_transaction;
            lease.state.pinned = pinned;
            let mut cookie = a.cookie(&lease.slot, &lease.state);
            let original = cookie.clone();
            drop(lease);
            match b.lease("alice", Some(&cookie)) {
                Err(Refusal::TransactionLost(_, reason)) => assert_eq!(reason, why),
                _ => panic!("a pinned session was served by another gateway"),
            }
            let vitess = cookie.vitess_session.as_mut().unwrap();
            vitess.in_transaction = false;
            vitess.in_reserved_conn = false;
            assert!(matches!(
                b.lease("alice", Some(&cookie)),
                Err(Refusal::Api(_))
            ));
            // Its own gateway still serves it.
            assert!(a.lease("alice", Some(&original)).is_ok());
        }
    }

    /// A gateway that served a session before it moved away and back takes
    /// the newer cookie over its own stale copy.
    #[test]
    fn a_stale_copy_gives_way_to_a_newer_cookie() {
        let (a, b) = tier();
        let lease = a.lease("alice", None).ok().unwrap();
        let first = a.cookie(&lease.slot, &lease.state);
        drop(lease);
        let mut moved = b.lease("alice", Some(&first)).ok().unwrap();
        moved.state.target = Some("other".into());
        let newer = b.cookie(&moved.slot, &moved.state);
        drop(moved);
        let back = a.lease("alice", Some(&newer)).ok().unwrap();
        assert_eq!(back.state.target.as_deref(), Some("other"));
    }
}
