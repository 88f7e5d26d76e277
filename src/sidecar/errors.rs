//! Every error the sidecar itself sends a client, in one place: MySQL
//! error numbers and SQLSTATEs chosen so that drivers and pools react as
//! they would to a MySQL server.

use crate::api::Code;
use crate::client::CallError;
use crate::mysql::packet::PacketError;
use crate::mysql::{ErrorText, MysqlError};

fn error(code: u16, state: &str, message: impl Into<ErrorText>) -> MysqlError {
    MysqlError {
        code,
        state: state.into(),
        message: message.into(),
    }
}

/// ER_ACCESS_DENIED_ERROR: the backend refused the account (it does not
/// exist, or the password differs), or the gateway the credential.
pub const ACCESS_DENIED: u16 = 1045;

/// ER_NET_PACKET_TOO_LARGE; the connection closes after it.
pub fn packet_too_large(e: &PacketError) -> MysqlError {
    error(
        1153,
        "08S01",
        format!("Got a packet bigger than 'max_allowed_packet' bytes ({e})"),
    )
}

/// ER_NET_PACKET_TOO_LARGE before login, where far less is accepted than
/// `max_allowed_packet`; the connection closes after it.
pub fn login_packet_too_large(e: &PacketError) -> MysqlError {
    let PacketError::TooLarge { size, max, .. } = e;
    error(
        1153,
        "08S01",
        format!(
            "Got a packet bigger than 'max_allowed_packet' bytes (at least {size} bytes before login, where at most {max} are accepted)"
        ),
    )
}

/// ER_SERVER_SHUTDOWN: the drain ended with this connection still inside
/// a transaction (or a statement); it is rolled back and the connection
/// closes. 08S01 makes pools discard the connection and retry elsewhere.
pub fn shutdown_in_progress() -> MysqlError {
    error(
        1053,
        "08S01",
        "Server shutdown in progress: the myquic sidecar is stopping and this transaction was not finished within drain.transaction_timeout; it was rolled back",
    )
}

/// ER_CON_COUNT_ERROR, sent instead of a greeting.
pub fn too_many_connections() -> MysqlError {
    error(1040, "08004", "Too many connections")
}

/// ER_UNKNOWN_COM_ERROR: never a blind OK for what is not implemented.
pub fn unknown_command(name: &str) -> MysqlError {
    error(
        1047,
        "08S01",
        format!("Unknown command: {name} is not supported by the myquic sidecar"),
    )
}

/// ER_UNKNOWN_STMT_HANDLER.
pub fn unknown_statement(id: u32, operation: &str) -> MysqlError {
    error(
        1243,
        "HY000",
        format!("Unknown prepared statement handler ({id}) given to {operation}"),
    )
}

/// ER_STMT_HAS_NO_OPEN_CURSOR.
pub fn no_cursor() -> MysqlError {
    error(1421, "HY000", "The statement has no open cursor.")
}

/// A cursor whose remaining rows had to be read ahead (another statement
/// needed the session) but were more than the sidecar keeps.
pub fn cursor_too_large(limit: usize) -> MysqlError {
    error(
        1105,
        "HY000",
        format!(
            "The cursor's remaining rows exceed {} MiB, more than the sidecar buffers while other statements run on the connection; read the cursor to its end first",
            limit >> 20
        ),
    )
}

/// A command that failed inside the sidecar (a bug): the connection
/// closes and its upstream session is closed, rolling back its
/// transaction, so nothing it held stays locked.
pub fn internal_failure() -> MysqlError {
    error(
        1105,
        "HY000",
        "The sidecar failed while running this command; the connection is closed and its transaction rolled back",
    )
}

/// ER_PS_MANY_PARAM.
pub fn too_many_placeholders() -> MysqlError {
    error(
        1390,
        "HY000",
        "Prepared statement contains too many placeholders",
    )
}

/// ER_BAD_DB_ERROR, for a login database the gateway refused without
/// saying why, or one whose name is not UTF-8 (the API names a session's
/// database as text): quoted as the client's bytes.
pub fn unknown_database(db: &[u8]) -> MysqlError {
    error(
        1049,
        "42000",
        [&b"Unknown database '"[..], db, b"'"].concat(),
    )
}

/// ER_NO_SUCH_THREAD.
pub fn unknown_thread(id: u64) -> MysqlError {
    error(1094, "HY000", format!("Unknown thread id: {id}"))
}

/// ER_KILL_DENIED_ERROR, as MariaDB words it: a `KILL` of another local
/// user's connection (nobody here has MariaDB's CONNECTION ADMIN).
pub fn not_owner(id: u64) -> MysqlError {
    error(1095, "HY000", format!("You are not owner of thread {id}"))
}

/// ER_CONNECTION_KILLED, for a `KILL` of the connection's own id.
pub fn connection_killed() -> MysqlError {
    error(1927, "70100", "Connection was killed")
}

/// ER_QUERY_INTERRUPTED, for a statement cancelled by `KILL QUERY`.
pub fn interrupted() -> MysqlError {
    error(1317, "70100", "Query execution was interrupted")
}

/// ER_PARSE_ERROR, word for word what the server answers a client that
/// did not enable multi-statements (its parser stops at the second
/// statement, which starts at `second`): drivers and tests match on it.
/// The quote is the statement's own bytes, never decoded. MariaDB
/// (`mariadb`) names itself and, past 80 bytes, keeps what fits in 77 up
/// to a character's end and marks the cut with "..."; MySQL cuts the quote
/// at 80 characters. Characters are UTF-8's here (an invalid byte counts
/// as one): the server measures the quote converted to UTF-8, so in
/// another client character set a long non-ASCII quote may be cut
/// elsewhere than the server cuts it.
pub fn multi_statements_disabled(sql: &[u8], second: usize, mariadb: bool) -> MysqlError {
    let rest = &sql[second..];
    let line = sql[..second].iter().filter(|&&c| c == b'\n').count() + 1;
    let near: Vec<u8> = if !mariadb {
        rest[..utf8_chars_end(rest, 80)].to_vec()
    } else if rest.len() <= 80 {
        rest.to_vec()
    } else {
        [&rest[..utf8_bytes_end(rest, 77)], b"..."].concat()
    };
    let server = if mariadb { "MariaDB" } else { "MySQL" };
    let head = format!(
        "You have an error in your SQL syntax; check the manual that corresponds to your {server} server version for the right syntax to use near '"
    );
    let tail = format!("' at line {line}");
    error(
        1064,
        "42000",
        [head.as_bytes(), &near, tail.as_bytes()].concat(),
    )
}

/// Where the first `max` UTF-8 characters of `text` end.
fn utf8_chars_end(text: &[u8], max: usize) -> usize {
    let mut end = 0;
    for _ in 0..max {
        if end == text.len() {
            break;
        }
        end += utf8_char_len(&text[end..]);
    }
    end
}

/// The longest prefix of `text` of at most `max` bytes that ends where a
/// UTF-8 character does.
fn utf8_bytes_end(text: &[u8], max: usize) -> usize {
    let mut end = 0;
    while end < text.len() {
        let next = end + utf8_char_len(&text[end..]);
        if next > max {
            break;
        }
        end = next;
    }
    end
}

/// The length of the UTF-8 character `text` starts with; 1 for a byte
/// that does not start a valid one.
fn utf8_char_len(text: &[u8]) -> usize {
    let want = match text[0] {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return 1,
    };
    match text.get(..want) {
        Some(c) if std::str::from_utf8(c).is_ok() => want,
        _ => 1,
    }
}

/// Multi-statements through a psdb server that is not a myquic gateway:
/// its streams do not mark where a result ends, so the results of several
/// statements could not be told apart (ER_NOT_SUPPORTED_YET). Refused
/// unrun.
pub fn multi_statements_unmarked() -> MysqlError {
    error(
        1235,
        "42000",
        "This version of myquic doesn't yet support 'multi-statements through a psdb server \
         other than a myquic gateway (its results carry no end markers)'"
            .to_string(),
    )
}

/// Whether the gateway reports that the session's transaction is gone
/// (errno 1927, ER_CONNECTION_KILLED): the client must not go on as if it
/// were still inside it.
pub fn is_session_lost(e: &MysqlError) -> bool {
    e.code == 1927
}

/// Whether a failed call leaves the client connection unusable.
pub fn call_ends_session(e: &CallError) -> bool {
    match e {
        CallError::Api(api) => matches!(api.code, Code::PermissionDenied | Code::Unauthenticated),
        CallError::Unavailable { .. } => false,
        _ => true,
    }
}

/// ER_NET_READ_ERROR (08S01, a communication failure: drivers and pools
/// discard the connection). Not 2013: that number belongs to the client
/// library's own range (2000–2999), and libmariadb rejects such a number
/// from a server as a malformed packet.
const LOST: u16 = 1158;

/// A request that failed as a whole, as the client's error.
pub fn from_call(e: &CallError, in_transaction: bool) -> MysqlError {
    match e {
        CallError::Unavailable { .. } => error(
            1105,
            "HY000",
            format!("Lost connection to MySQL server: {e}; the statement was not sent"),
        ),
        CallError::Lost(detail) => error(
            LOST,
            "08S01",
            format!(
                "Lost connection to MySQL server during query: the connection to the gateway failed ({detail}); the statement may have executed{}",
                if in_transaction {
                    " and the transaction is rolled back"
                } else {
                    ""
                }
            ),
        ),
        CallError::Api(api) => match api.code {
            Code::Unauthenticated => error(
                ACCESS_DENIED,
                "28000",
                format!(
                    "Access denied: the gateway refused the sidecar's credential ({})",
                    api.message
                ),
            ),
            // Our gateway's refusal of a request body over its
            // max_request_bytes: the statement is too large, not the
            // server too busy (it never ran; the connection goes on).
            Code::ResourceExhausted if api.message.contains("max_request_bytes") => error(
                1153,
                "08S01",
                format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes: the statement is larger than the gateway accepts ({}); it was not run",
                    api.message
                ),
            ),
            Code::ResourceExhausted => error(
                1040,
                "08004",
                format!("Too many connections: {}", api.message),
            ),
            Code::PermissionDenied => error(
                LOST,
                "08S01",
                format!(
                    "Lost connection to MySQL server: the gateway no longer knows this session ({}){}",
                    api.message,
                    if in_transaction {
                        "; the transaction is rolled back"
                    } else {
                        ""
                    }
                ),
            ),
            _ => error(1105, "HY000", format!("gateway: {}", api.message)),
        },
        other => error(
            LOST,
            "08S01",
            format!("Lost connection to MySQL server: {other}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn near(e: &MysqlError) -> &[u8] {
        let m = e.message.as_bytes();
        let start = m.windows(6).position(|w| w == b"near '").expect("a quote") + 6;
        let end = m
            .windows(10)
            .rposition(|w| w == b"' at line ")
            .expect("a line");
        &m[start..end]
    }

    #[test]
    fn the_quote_is_the_statements_bytes() {
        let sql = b"SELECT 1;\nSELECT 'caf\xe9'";
        let e = multi_statements_disabled(sql, 10, true);
        assert_eq!(near(&e), b"SELECT 'caf\xe9'");
        assert!(e.message.as_bytes().ends_with(b"' at line 2"));
    }

    #[test]
    fn mariadb_cuts_a_long_quote_at_a_character_end() {
        // What MariaDB 10.11 answers for these (utf8mb4): 77 bytes at most,
        // ending where a character ends, then "...".
        let chinese = "中文".repeat(30);
        for (prefix, kept) in [("", 76), ("x", 77), ("xy", 75)] {
            let rest = format!("WHERE '{prefix}{chinese}'");
            let sql = format!("SELECT 1;{rest}");
            let e = multi_statements_disabled(sql.as_bytes(), 9, true);
            let want = [&rest.as_bytes()[..kept], b"..."].concat();
            assert_eq!(near(&e), &want[..], "{prefix:?}");
        }
        // At most 80 bytes: whole.
        let rest = "é".repeat(40);
        let e = multi_statements_disabled(format!("SELECT 1;{rest}").as_bytes(), 9, true);
        assert_eq!(near(&e), rest.as_bytes());
        // MySQL: 80 characters.
        let rest = "é".repeat(90);
        let e = multi_statements_disabled(format!("SELECT 1;{rest}").as_bytes(), 9, false);
        assert_eq!(near(&e), "é".repeat(80).as_bytes());
    }
}
