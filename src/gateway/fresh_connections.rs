//! A new session must look like a fresh backend connection, though it
//! gets a pooled one (no backend handshake on the request path).
//!
//! A pooled connection differs from a fresh one in two ways that
//! `COM_RESET_CONNECTION` (the pool's reset when a session gives it back)
//! leaves alone:
//!
//! - its session variables were copied from the globals when it was
//!   opened: after a `SET GLOBAL max_allowed_packet`, a fresh connection
//!   reads the new value, an older one the old. A `SET GLOBAL` through the
//!   gateway marks every connection opened before it as stale (by thread
//!   id: the server numbers connections in the order they are opened), and
//!   a stale connection is closed instead of given to a session;
//! - it keeps its default database: a client that connects without one
//!   must find none, not the last session's. A connection a session left
//!   in a database is remembered, and given to a session without one only
//!   after `COM_CHANGE_USER` (which clears it) — accounts with a default
//!   database have it set again by the pool's reset.
//!
//! - its network buffer is as large as the largest packet it has read
//!   (MariaDB grows it from `net_buffer_length` and never shrinks it), and
//!   counts in the session's `memory_used`: a session given a connection
//!   that once read a 450 KB statement has that much less room under
//!   `max_session_mem_used` than a fresh one (MariaDB's own
//!   `main.func_sformat` got 1290 through the sidecar). A connection that
//!   read a request larger than [`FRESH_NET_BUFFER`] is closed when it
//!   comes up for a new session instead of given to it (a bulk load keeps
//!   its own for as long as its session does).
//!
//! And a connection no session has had yet (warmed, or opened since) is
//! reset once before its first session: the driver's connect-time `SELECT
//! @@wait_timeout` would show in the session's `Com_select`.
//!
//! And its connection attributes are the last session's client's: a
//! session whose client's differ gives it its own with `COM_CHANGE_USER`
//! ([`super::connect_attrs`]; what each connection carries is remembered
//! here).
//!
//! None of it costs a round trip on the common connect path (a reused
//! connection): a thread id compare and two set lookups.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use mysql_async::Conn;

use super::backend::BackendError;
use super::connect_attrs::Carried;
use crate::translate::sql_text::Dialect;
use crate::translate::statement::{is_multi_statement, leading_keyword};

use super::session_state::{Token, Tokens};

/// MariaDB's default `net_buffer_length`: the network buffer of a fresh
/// connection, which a larger packet grows for good.
pub const FRESH_NET_BUFFER: usize = 16 * 1024;

/// How many connections are remembered (left in a database, or had by a
/// session); beyond it the oldest (lowest thread ids: most likely closed
/// since) are forgotten.
const MAX_MOVED: usize = 10_000;

#[derive(Default)]
pub struct FreshConnections {
    /// Connections with a thread id up to this one were opened before the
    /// last `SET GLOBAL` through this gateway.
    stale_up_to: AtomicU32,
    /// Thread ids of connections a session left in a database.
    moved: Mutex<BTreeSet<u32>>,
    /// Thread ids of connections that read a packet larger than
    /// [`FRESH_NET_BUFFER`].
    grown: Mutex<BTreeSet<u32>>,
    /// Thread ids of connections sessions have had (the others are new:
    /// their statement counters show the driver's own connect-time
    /// `SELECT @@wait_timeout`).
    known: Mutex<BTreeSet<u32>>,
    /// API users whose backend account's `COM_CHANGE_USER` the backend
    /// answered with an error (vtgate does not implement it). Per
    /// account: one whose password changed or that was dropped since its
    /// connection opened is refused too, which says nothing of the others.
    no_change_user: Mutex<HashSet<String>>,
    /// The connection attributes each connection carries: a session whose
    /// client's differ re-identifies it (`super::connect_attrs`).
    pub attrs: Carried,
}

impl FreshConnections {
    /// Whether `conn` was opened before the last `SET GLOBAL`, or was sent
    /// a request that grew its network buffer ([`Self::sent`]; forgotten
    /// now: the caller closes it).
    pub fn is_stale(&self, conn: &Conn) -> bool {
        conn.id() <= self.stale_up_to.load(Ordering::Acquire)
            || self.grown.lock().expect("not poisoned").remove(&conn.id())
    }

    /// `conn` was sent a request of `size` bytes (statement text and
    /// bound values): past [`FRESH_NET_BUFFER`], its buffer grew, and a
    /// new session must not get it ([`Self::is_stale`]).
    pub fn sent(&self, conn: &Conn, size: usize) {
        if size > FRESH_NET_BUFFER {
            remember(&mut self.grown.lock().expect("not poisoned"), conn.id());
        }
    }

    /// After a statement that set global variables: every connection
    /// opened so far is stale. A new connection (with `conn`'s options)
    /// tells the highest thread id the server has given out; it is
    /// returned, to read the new globals from (the caller closes it).
    pub async fn globals_changed(&self, conn: &Conn) -> Result<Conn, BackendError> {
        let probe = Conn::new(conn.opts().clone()).await?;
        self.stale_up_to.fetch_max(probe.id(), Ordering::AcqRel);
        Ok(probe)
    }

    /// `conn` has a default database selected by a session.
    pub fn moved(&self, conn: &Conn) {
        remember(&mut self.moved.lock().expect("not poisoned"), conn.id());
    }

    /// Whether no session has had `conn` before (remembered from now on).
    pub fn first_use(&self, conn: &Conn) -> bool {
        remember(&mut self.known.lock().expect("not poisoned"), conn.id())
    }

    /// Whether `COM_CHANGE_USER` may clear the database of a connection
    /// of `account`.
    pub fn change_user_works(&self, account: &str) -> bool {
        !self
            .no_change_user
            .lock()
            .expect("not poisoned")
            .contains(account)
    }

    pub fn change_user_refused(&self, account: &str) {
        let mut refused = self.no_change_user.lock().expect("not poisoned");
        refused.insert(account.to_string());
    }

    /// Whether a session left `conn` in a database (forgotten now: the
    /// caller clears it or selects another).
    pub fn take_moved(&self, conn: &Conn) -> bool {
        self.moved.lock().expect("not poisoned").remove(&conn.id())
    }
}

/// Adds `id` (whether it was new), forgetting the lowest ids beyond
/// [`MAX_MOVED`].
fn remember(ids: &mut BTreeSet<u32>, id: u32) -> bool {
    let new = ids.insert(id);
    while ids.len() > MAX_MOVED {
        ids.pop_first();
    }
    new
}

/// True if `sql` may set a global variable (`SET GLOBAL`, `SET
/// @@global.`): a `SET`, multi-statement or compound statement that names
/// `GLOBAL`. A `SET GLOBAL` inside a procedure or a prepared statement is
/// not seen.
pub fn may_set_globals(sql: &[u8], dialect: &Dialect) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        return true;
    };
    let scanned = [
        "SET", "BEGIN", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR",
    ]
    .iter()
    .any(|k| keyword.eq_ignore_ascii_case(k.as_bytes()))
        || is_multi_statement(sql, dialect);
    let mut after_at = false;
    scanned
        && Tokens::new(sql, dialect).any(|t| {
            let global = match t {
                // `@global` is a user variable.
                Token::Word(w) => !after_at && w.eq_ignore_ascii_case(b"GLOBAL"),
                Token::SystemVariable(v) => v
                    .get(..7)
                    .is_some_and(|p| p.eq_ignore_ascii_case(b"global.")),
                _ => false,
            };
            after_at = t == Token::UserVariable;
            global
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_that_set_globals_are_found() {
        let d = Dialect::default();
        for sql in [
            "SET GLOBAL max_allowed_packet = 2048",
            "set @@global.net_buffer_length=1024",
            "SET @@GLOBAL.max_allowed_packet = 4096, sql_mode = ''",
            "SELECT 1; SET GLOBAL x = 1",
            "/*!40101 SET GLOBAL x = 1 */",
        ] {
            assert!(may_set_globals(sql.as_bytes(), &d), "{sql}");
        }
        for sql in [
            "SET SESSION max_allowed_packet = 2048",
            "SET @global = 1",
            "SELECT @@global.max_allowed_packet",
            "SELECT 'SET GLOBAL x = 1'",
            "INSERT INTO t VALUES ('global')",
            "SET x = 'GLOBAL'",
        ] {
            assert!(!may_set_globals(sql.as_bytes(), &d), "{sql}");
        }
    }

    #[test]
    fn the_oldest_moved_connections_are_forgotten_first() {
        let mut moved = BTreeSet::new();
        for id in (0..MAX_MOVED as u32 + 5).rev() {
            remember(&mut moved, id);
        }
        assert_eq!(moved.len(), MAX_MOVED);
        assert_eq!(moved.first(), Some(&5));
    }
}
