//! MySQL errors ⇄ Vitess `RPCError`.
//!
//! Vitess carries the MySQL error number and SQLSTATE only inside the
//! message, as `… (errno 1062) (sqlstate 23000)`; clients parse them back.

use crate::api::pb::{RpcError, VtCode};
use crate::mysql::MysqlError;

/// Renders a MySQL error the way vttablet does.
pub fn to_rpc_error(err: &MysqlError) -> RpcError {
    RpcError {
        message: format!(
            "{} (errno {}) (sqlstate {})",
            err.message, err.code, err.state
        ),
        code: vtrpc_code(err.code) as i32,
    }
}

/// Recovers errno, SQLSTATE and the bare message from an `RPCError`
/// message. Errors without the suffix get `ER_UNKNOWN_ERROR` (1105/HY000).
pub fn from_rpc_message(message: &str) -> MysqlError {
    parse_suffix(message).unwrap_or_else(|| MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: message.to_string(),
    })
}

fn parse_suffix(message: &str) -> Option<MysqlError> {
    let errno_at = message.rfind("(errno ")?;
    let rest = &message[errno_at + "(errno ".len()..];
    let code: u16 = rest[..rest.find(')')?].parse().ok()?;
    let state_at = rest.find("(sqlstate ")?;
    let state = &rest[state_at + "(sqlstate ".len()..];
    let state = &state[..state.find(')')?];
    if state.len() != 5 {
        return None;
    }
    Some(MysqlError {
        code,
        state: state.to_string(),
        message: message[..errno_at].trim_end().to_string(),
    })
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
    fn vitess_style_messages_parse() {
        let m = "target: test.0.primary: vttablet: rpc error: code = NotFound desc = Table 'vt_test_0.foo' doesn't exist (errno 1146) (sqlstate 42S02) (CallerID: x): Sql: \"select * from foo\"";
        let err = from_rpc_message(m);
        assert_eq!((err.code, err.state.as_str()), (1146, "42S02"));
        let plain = from_rpc_message("something broke");
        assert_eq!((plain.code, plain.state.as_str()), (1105, "HY000"));
    }
}
