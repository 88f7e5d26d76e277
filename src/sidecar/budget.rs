//! Memory budgets: how much a client connection may make the sidecar
//! hold between its commands, and how much all connections together may.
//!
//! Without them one local client could make the process hold whatever it
//! liked: 40 prepared statements of 65,535 placeholders (+88 MiB),
//! `COM_STMT_SEND_LONG_DATA` of 8 × 60 MiB (+490 MiB), six open cursors
//! reading ahead 64 MiB each (+318 MiB) — and with 4096 connections, any
//! multiple of that. Memory is charged where it is held (a statement's
//! metadata, its long data, a cursor's read-ahead), through a [`Charge`]
//! that gives it back when dropped, so no path that forgets a statement or
//! a cursor can leak budget.
//!
//! What a refusal looks like is the caller's choice (a statement: 1461, a
//! value: 1153, the process: 1041); [`Exceeded`] has the texts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::mysql::MysqlError;

/// What all client connections of the process may hold together
/// (`sidecar.memory_total`).
#[derive(Debug)]
pub struct ProcessBudget {
    limit: usize,
    used: AtomicUsize,
}

impl ProcessBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// Bytes charged now, by every connection.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A new connection's budget of `limit` bytes
    /// (`sidecar.memory_per_connection`), drawn from this one.
    pub fn connection(self: &Arc<Self>, limit: usize) -> ConnectionBudget {
        ConnectionBudget(Arc::new(Inner {
            limit,
            used: AtomicUsize::new(0),
            process: Arc::clone(self),
        }))
    }
}

/// One client connection's budget. Clones share it.
#[derive(Clone, Debug)]
pub struct ConnectionBudget(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    limit: usize,
    used: AtomicUsize,
    process: Arc<ProcessBudget>,
}

/// Why memory was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// The connection's own budget: it holds `used` of `limit` bytes.
    Connection { limit: usize, used: usize },
    /// Every connection together holds the process's `limit`.
    Process { limit: usize },
}

impl ConnectionBudget {
    /// A budget that never refuses (unit tests of the command phase).
    pub fn unlimited() -> Self {
        ProcessBudget::new(usize::MAX).connection(usize::MAX)
    }

    /// Bytes this connection holds now.
    pub fn used(&self) -> usize {
        self.0.used.load(Ordering::Relaxed)
    }

    /// An empty charge against this budget.
    pub fn charge(&self) -> Charge {
        Charge {
            budget: self.clone(),
            bytes: 0,
            process_only: false,
        }
    }

    /// An empty charge against the process's budget only: for what the
    /// connection's own limits already bound (a packet being read, at
    /// most `max_allowed_packet`), but that thousands of connections
    /// could hold at once.
    pub fn process_charge(&self) -> Charge {
        Charge {
            budget: self.clone(),
            bytes: 0,
            process_only: true,
        }
    }

    fn reserve(&self, bytes: usize, process_only: bool) -> Result<(), Exceeded> {
        let inner = &*self.0;
        if !process_only {
            take(&inner.used, bytes, inner.limit).map_err(|used| Exceeded::Connection {
                limit: inner.limit,
                used,
            })?;
        }
        if take(&inner.process.used, bytes, inner.process.limit).is_err() {
            if !process_only {
                inner.used.fetch_sub(bytes, Ordering::Relaxed);
            }
            return Err(Exceeded::Process {
                limit: inner.process.limit,
            });
        }
        Ok(())
    }

    fn release(&self, bytes: usize, process_only: bool) {
        if !process_only {
            self.0.used.fetch_sub(bytes, Ordering::Relaxed);
        }
        self.0.process.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Adds `bytes` to `used` if the sum stays within `limit`; else the
/// amount used.
fn take(used: &AtomicUsize, bytes: usize, limit: usize) -> Result<(), usize> {
    used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |now| {
        now.checked_add(bytes).filter(|sum| *sum <= limit)
    })
    .map(drop)
}

/// Memory one thing holds (a statement, a cursor's rows), charged to a
/// connection's budget; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: ConnectionBudget,
    bytes: usize,
    /// Charged to the process's budget alone.
    process_only: bool,
}

impl Charge {
    /// Charges `bytes` in all from now on: more is reserved (or refused,
    /// leaving the charge as it was), less is given back.
    pub fn set(&mut self, bytes: usize) -> Result<(), Exceeded> {
        if bytes > self.bytes {
            (self.budget).reserve(bytes - self.bytes, self.process_only)?;
        } else {
            (self.budget).release(self.bytes - bytes, self.process_only);
        }
        self.bytes = bytes;
        Ok(())
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes, self.process_only);
    }
}

// === impl Exceeded ===

impl Exceeded {
    /// The refusal of a prepared statement: MySQL's answer when a server
    /// keeps too many (1461, `ER_MAX_PREPARED_STMT_COUNT_REACHED`), which
    /// drivers know to mean "close some statements".
    pub fn statement_refused(self) -> MysqlError {
        match self {
            Self::Connection { limit, used } => MysqlError {
                code: 1461,
                state: "42000".into(),
                message: format!(
                    "Can't create more than max_prepared_stmt_count statements: this connection's prepared statements, long data and cursors hold {used} bytes of its {limit} (sidecar.memory_per_connection); close some"
                ).into(),
            },
            Self::Process { .. } => self.process_refused(),
        }
    }

    /// The refusal of a value or a cursor's rows larger than the
    /// connection may hold: 1153 (`ER_NET_PACKET_TOO_LARGE`), what a
    /// server answers a value over its per-connection `max_allowed_packet`.
    pub fn value_refused(self, what: &str) -> MysqlError {
        match self {
            Self::Connection { limit, used } => MysqlError {
                code: 1153,
                state: "08S01".into(),
                message: format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes: {what} does not fit in this connection's memory budget ({limit} bytes, sidecar.memory_per_connection; {used} held by its prepared statements, long data and cursors)"
                ).into(),
            },
            Self::Process { .. } => self.process_refused(),
        }
    }

    /// Every connection together holds the process's budget: 1041
    /// (`ER_OUT_OF_RESOURCES`, SQLSTATE HY000), what MariaDB answers when
    /// it cannot allocate for a statement while the connection itself is
    /// fine — not 1040, which refuses a new connection: this one is
    /// logged in and goes on once others give memory back.
    pub fn process_refused(self) -> MysqlError {
        let limit = match self {
            Self::Process { limit } | Self::Connection { limit, .. } => limit,
        };
        MysqlError {
            code: 1041,
            state: "HY000".into(),
            message: format!(
                "Out of memory: the sidecar's client connections together hold its memory budget ({limit} bytes, sidecar.memory_total); try again when others have finished"
            ).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_are_bounded_per_connection_and_per_process() {
        let process = ProcessBudget::new(100);
        let a = process.connection(60);
        let b = process.connection(60);
        let mut a1 = a.charge();
        a1.set(50).unwrap();
        assert_eq!(
            a.charge().set(11),
            Err(Exceeded::Connection {
                limit: 60,
                used: 50
            })
        );
        let mut b1 = b.charge();
        assert_eq!(b1.set(51), Err(Exceeded::Process { limit: 100 }));
        // A refusal leaves nothing charged.
        assert_eq!((b.used(), process.used()), (0, 50));
        b1.set(50).unwrap();
        // Shrinking gives back; dropping gives back the rest.
        a1.set(10).unwrap();
        assert_eq!((a.used(), process.used()), (10, 60));
        drop(a1);
        drop(b1);
        assert_eq!((a.used(), b.used(), process.used()), (0, 0, 0));
    }

    #[test]
    fn a_process_charge_leaves_the_connections_budget_alone() {
        let process = ProcessBudget::new(100);
        let a = process.connection(10);
        let mut packet = a.process_charge();
        packet.set(90).unwrap();
        assert_eq!((a.used(), process.used()), (0, 90));
        assert_eq!(packet.set(101), Err(Exceeded::Process { limit: 100 }));
        drop(packet);
        assert_eq!(process.used(), 0);
    }

    #[test]
    fn refusals_carry_the_servers_codes() {
        let conn = Exceeded::Connection { limit: 8, used: 7 };
        let process = Exceeded::Process { limit: 9 };
        assert_eq!(conn.statement_refused().code, 1461);
        assert_eq!(conn.value_refused("x").code, 1153);
        assert_eq!(process.statement_refused().code, 1041);
        assert_eq!(process.value_refused("x").code, 1041);
        assert!(process.process_refused().message.contains("memory_total"));
    }
}
