//! MySQL errors ⇄ Vitess `RPCError`.
//!
//! Vitess carries the MySQL error number and SQLSTATE only inside the
//! message, as `… (errno 1062) (sqlstate 23000)`; clients parse them back.
//! The message is the server's bytes (our proto's `RPCError.message` is
//! `bytes`): it is never decoded, only its ASCII suffix is read.

use bytes::Bytes;

use crate::api::pb::{RpcError, VtCode};
use crate::mysql::MysqlError;

/// The answer to `LOAD DATA LOCAL INFILE` whose client may not send a
/// file: MariaDB's own, for a server run with `--local-infile=0` or a
/// client without `CLIENT_LOCAL_FILES` (ER_LOCAL_INFILE_DISABLED, tried on
/// 10.11; the statement is not run).
pub fn local_infile_disabled() -> MysqlError {
    MysqlError {
        code: 4166,
        state: "HY000".into(),
        message: "The used command is not allowed because the MariaDB server or client has disabled the local infile capability".into(),
    }
}

/// Renders a MySQL error the way vttablet does.
pub fn to_rpc_error(err: &MysqlError) -> RpcError {
    let suffix = format!(" (errno {}) (sqlstate {})", err.code, err.state);
    let mut message = Vec::with_capacity(err.message.as_bytes().len() + suffix.len());
    message.extend_from_slice(err.message.as_bytes());
    message.extend_from_slice(suffix.as_bytes());
    RpcError {
        message: Bytes::from(message),
        code: vtrpc_code(err.code) as i32,
    }
}

/// Recovers errno, SQLSTATE and the bare message from an `RPCError`
/// message. Errors without the suffix get `ER_UNKNOWN_ERROR` (1105/HY000).
pub fn from_rpc_message(message: &[u8]) -> MysqlError {
    parse_suffix(message).unwrap_or_else(|| MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: message.into(),
    })
}

fn parse_suffix(message: &[u8]) -> Option<MysqlError> {
    let errno_at = rfind(message, b"(errno ")?;
    let rest = &message[errno_at + b"(errno ".len()..];
    let code: u16 = std::str::from_utf8(&rest[..find(rest, b")")?])
        .ok()?
        .parse()
        .ok()?;
    let state_at = find(rest, b"(sqlstate ")?;
    let state = &rest[state_at + b"(sqlstate ".len()..];
    let state = &state[..find(state, b")")?];
    if state.len() != 5 || !state.is_ascii() {
        return None;
    }
    let bare = &message[..errno_at];
    Some(MysqlError {
        code,
        state: String::from_utf8_lossy(state).into_owned(),
        // The one space `to_rpc_error` put before the suffix: a message of
        // the server's own that ends in spaces keeps them.
        message: bare.strip_suffix(b" ").unwrap_or(bare).into(),
    })
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn rfind(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).rposition(|w| w == needle)
}

/// vttablet's `convertErrorCode`: MySQL errno → vtrpc code.
pub fn vtrpc_code(errno: u16) -> VtCode {
    match errno {
        1146 | 1054 | 1049 | 1305 => VtCode::NotFound,
        1062 | 1050 | 1007 | 1022 => VtCode::AlreadyExists,
        1213 => VtCode::Aborted,
        1205 | 1317 | 3024 | 1969 => VtCode::DeadlineExceeded,
        1064 | 1406 | 1149 | 1048 | 1264 | 1292 | 1366 | 1452 | 1451 | 1216 | 1217 => {
            VtCode::InvalidArgument
        }
        1045 | 1044 | 1142 | 1143 | 1227 | 1370 => VtCode::PermissionDenied,
        1290 | 1792 => VtCode::ReadOnly,
        1040 | 1203 | 1114 | 1153 => VtCode::ResourceExhausted,
        2002 | 2003 | 2006 | 2013 | 1053 => VtCode::Unavailable,
        1105 => VtCode::Unknown,
        _ => VtCode::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_and_sqlstate_survive_the_round_trip() {
        let err = MysqlError {
            code: 1062,
            state: "23000".into(),
            message: "Duplicate entry 'a' for key 'name'".into(),
        };
        let rpc = to_rpc_error(&err);
        assert_eq!(rpc.code, VtCode::AlreadyExists as i32);
        assert_eq!(from_rpc_message(&rpc.message), err);
    }

    #[test]
    fn message_bytes_that_are_not_utf8_cross_unaltered() {
        // MariaDB's parse error quoting a latin1 statement, cut by the
        // lexer inside a UTF-8 character, then trailing spaces of its own.
        let err = MysqlError {
            code: 1064,
            state: "42000".into(),
            message: (&b"near '\xa9\xe8 foo' at line 1 \xc3"[..]).into(),
        };
        let rpc = to_rpc_error(&err);
        assert!(rpc.message.ends_with(b"\xc3 (errno 1064) (sqlstate 42000)"));
        assert_eq!(from_rpc_message(&rpc.message), err);
        // No suffix: the whole message, as bytes.
        let plain = from_rpc_message(b"broken \xff (errno x)");
        assert_eq!(plain.message.as_bytes(), b"broken \xff (errno x)");
        assert_eq!(plain.code, 1105);
        // A SQLSTATE that is not ASCII is no SQLSTATE.
        assert_eq!(
            from_rpc_message(b"m (errno 1) (sqlstate \xe9\xe9\xe9)").code,
            1105
        );
        // Trailing spaces of the server's own message stay.
        let spaced = MysqlError {
            message: "MESSAGE_TEXT  ".into(),
            ..err
        };
        assert_eq!(from_rpc_message(&to_rpc_error(&spaced).message), spaced);
    }

    #[test]
    fn vitess_style_messages_parse() {
        let m = "target: test.0.primary: vttablet: rpc error: code = NotFound desc = Table 'vt_test_0.foo' doesn't exist (errno 1146) (sqlstate 42S02) (CallerID: x): Sql: \"select * from foo\"";
        let err = from_rpc_message(m.as_bytes());
        assert_eq!((err.code, err.state.as_str()), (1146, "42S02"));
        let plain = from_rpc_message(b"something broke");
        assert_eq!((plain.code, plain.state.as_str()), (1105, "HY000"));
    }
}
