//! What the gateway does differently when its backend refuses what
//! MariaDB allows — as Vitess's `vtgate` does. vtgate speaks the MySQL
//! protocol, but:
//!
//! - it refuses `KILL QUERY` (errno 1095, "VT07001: kill statement
//!   execution not permitted") unless started with
//!   `--allow-kill-statement`, so a statement cannot be stopped from a
//!   second connection ([`abandon`]);
//! - its parser refuses `SHOW WARNINGS LIMIT n` (errno 1105, syntax
//!   error) and takes plain `SHOW WARNINGS` ([`WARNINGS_QUERY`]);
//! - its `@@in_transaction` is 1 as soon as autocommit is off, before any
//!   statement has opened a transaction, and with autocommit off the
//!   gateway's session query opens one ([`in_transaction`]).

use crate::mysql::MysqlError;

use super::backend::OkStatus;
use super::sessions::SessionState;

/// Reads a statement's warnings: without `LIMIT`, which vtgate's parser
/// refuses. The server keeps at most `max_error_count` (64 by default)
/// and the gateway passes on [`MAX_WARNINGS`] of them.
pub const WARNINGS_QUERY: &str = "SHOW WARNINGS";

/// How many warnings a response carries at most.
pub const MAX_WARNINGS: usize = 64;

/// Whether the session is inside a transaction: the `status` flags the
/// client's statement ended with, else (after an error) `@@in_transaction`
/// as read after it (`variable`). `SERVER_STATUS_IN_TRANS` is what a client
/// connected directly sees (MariaDB sets both alike), while vtgate answers
/// `@@in_transaction` 1 whenever autocommit is off, before any statement
/// has opened a transaction — and, then, the gateway's own session query
/// opens one at vtgate, so its flags are no witness either.
pub fn in_transaction(status: Option<OkStatus>, variable: i64) -> bool {
    status.map_or(variable != 0, |status| status.in_transaction)
}

/// The error for a statement the gateway had to stop (`why`: the client
/// cancelled it, or `query_timeout`) when the backend refused to kill
/// it (`kill_error`). The gateway then gives the backend connection up
/// instead of waiting for the statement: it goes back to the pool, which
/// reads the statement's answer to its end and resets the connection —
/// vtgate turns a reset, as a close, into a rollback of that connection's
/// transaction. So:
///
/// - inside a transaction (or with autocommit off, where any statement
///   opens one) the transaction is gone: errno 1927 (70100), and the
///   session ends as one lost inside a transaction (its next request gets
///   1927 too: a client that cancelled, whose answer was the sidecar's own
///   1317, learns it there). The sidecar answers 1927 with a close, so the
///   client cannot go on as if its earlier statements were still pending;
/// - outside one, 1317 (70100) as for a killed statement — but the
///   statement runs on to its end at the backend (an autocommit write
///   may commit), and the message says so.
pub fn abandon(state: &mut SessionState, why: &str, kill_error: &MysqlError) -> MysqlError {
    // With autocommit off the statement opened a transaction.
    let in_transaction = state.in_transaction || !state.autocommit;
    // Dropped, the connection goes back to the pool (see above).
    state.conn = None;
    // With no connection and a transaction, the request's end discards
    // the session as lost (`Rpc::finish`): its next request gets 1927,
    // never a fresh autocommit connection.
    state.in_transaction = in_transaction;
    state.warnings.clear();
    abandoned(why, kill_error, in_transaction)
}

/// The error [`abandon`] answers.
fn abandoned(why: &str, kill_error: &MysqlError, in_transaction: bool) -> MysqlError {
    let refused = format!(
        "the backend refused to kill it ({} {}: {})",
        kill_error.code, kill_error.state, kill_error.message
    );
    if in_transaction {
        MysqlError {
            code: 1927,
            state: "70100".into(),
            message: format!(
                "Connection was killed: {why}; {refused}, so its backend connection was given up and the session's transaction rolled back"
            ).into(),
        }
    } else {
        MysqlError {
            code: 1317,
            state: "70100".into(),
            message: format!(
                "Query execution was interrupted: {why}; {refused}, so the statement may still run to its end at the backend"
            ).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vt07001() -> MysqlError {
        MysqlError {
            code: 1095,
            state: "HY000".into(),
            message: "VT07001: kill statement execution not permitted.".into(),
        }
    }

    #[test]
    fn a_transaction_whose_statement_could_not_be_killed_is_reported_lost() {
        let e = abandoned("the client went away", &vt07001(), true);
        // 1927 is what the sidecar closes the client connection on.
        assert_eq!((e.code, e.state.as_str()), (1927, "70100"));
        assert!(e.message.contains("rolled back"), "{}", e.message);
        assert!(e.message.contains("VT07001"), "{}", e.message);
    }

    #[test]
    fn an_autocommit_statement_that_could_not_be_killed_is_interrupted_but_may_finish() {
        let e = abandoned("query_timeout", &vt07001(), false);
        assert_eq!((e.code, e.state.as_str()), (1317, "70100"));
        assert!(e.message.contains("may still run"), "{}", e.message);
    }

    fn session(in_transaction: bool, autocommit: bool) -> SessionState {
        SessionState {
            in_transaction,
            autocommit,
            warnings: vec![Default::default()],
            ..Default::default()
        }
    }

    #[test]
    fn abandoning_outside_a_transaction_keeps_the_session() {
        let mut state = session(false, true);
        let e = abandon(&mut state, "query_timeout", &vt07001());
        assert_eq!(e.code, 1317);
        assert!(state.conn.is_none() && !state.in_transaction && state.warnings.is_empty());
    }

    #[test]
    fn abandoning_inside_a_transaction_or_without_autocommit_loses_it() {
        for (in_transaction, autocommit) in [(true, true), (true, false), (false, false)] {
            let mut state = session(in_transaction, autocommit);
            let e = abandon(&mut state, "the client went away", &vt07001());
            assert_eq!(
                e.code, 1927,
                "in_transaction {in_transaction}, autocommit {autocommit}"
            );
            // What makes the request's end discard the session as lost.
            assert!(state.conn.is_none() && state.in_transaction);
        }
    }

    #[test]
    fn the_status_flags_say_whether_a_transaction_is_open() {
        // vtgate after `SET autocommit = 0`: the variable says 1, the
        // flags (autocommit off, no transaction) say no.
        let status = |in_transaction, autocommit| OkStatus {
            in_transaction,
            autocommit,
            no_backslash_escapes: false,
        };
        assert!(!in_transaction(Some(status(false, false)), 1));
        assert!(in_transaction(Some(status(true, true)), 1));
        // No status known: the variable.
        assert!(in_transaction(None, 1));
        assert!(!in_transaction(None, 0));
    }

    #[test]
    fn warnings_are_read_without_a_limit_clause() {
        // vtgate: `SHOW WARNINGS LIMIT 64` -> 1105 "syntax error at
        // position 20 near 'LIMIT'".
        assert!(!WARNINGS_QUERY.to_ascii_uppercase().contains("LIMIT"));
    }
}
