//! What the gateway does differently when its backend refuses what
//! MariaDB allows — as Vitess's `vtgate` does. vtgate speaks the MySQL
//! protocol, but:
//!
//! - it refuses `KILL QUERY` (errno 1095, "VT07001: kill statement
//!   execution not permitted") unless started with
//!   `--allow-kill-statement`, so a statement cannot be stopped from a
//!   second connection ([`abandoned`]);
//! - its parser refuses `SHOW WARNINGS LIMIT n` (errno 1105, syntax
//!   error) and takes plain `SHOW WARNINGS` ([`WARNINGS_QUERY`]).

use crate::mysql::MysqlError;

/// Reads a statement's warnings: without `LIMIT`, which vtgate's parser
/// refuses. The server keeps at most `max_error_count` (64 by default)
/// and the gateway passes on [`MAX_WARNINGS`] of them.
pub const WARNINGS_QUERY: &str = "SHOW WARNINGS";

/// How many warnings a response carries at most.
pub const MAX_WARNINGS: usize = 64;

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
pub fn abandoned(why: &str, kill_error: &MysqlError, in_transaction: bool) -> MysqlError {
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
            ),
        }
    } else {
        MysqlError {
            code: 1317,
            state: "70100".into(),
            message: format!(
                "Query execution was interrupted: {why}; {refused}, so the statement may still run to its end at the backend"
            ),
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

    #[test]
    fn warnings_are_read_without_a_limit_clause() {
        // vtgate: `SHOW WARNINGS LIMIT 64` -> 1105 "syntax error at
        // position 20 near 'LIMIT'".
        assert!(!WARNINGS_QUERY.to_ascii_uppercase().contains("LIMIT"));
    }
}
