//! An error message's bytes as the backend sent them.
//!
//! mysql_async hands an ERR packet's message over as a `String` decoded
//! lossily (its `ServerError`), so a message quoting bytes that are not
//! UTF-8 — MariaDB's "near '…'" of a latin1 or gbk statement, a SIGNAL's
//! MESSAGE_TEXT in gbk, a message cut inside a multibyte character —
//! arrives with U+FFFD where those bytes were. The server keeps the error
//! in the session's diagnostics area, which `SHOW WARNINGS` reads without
//! clearing (it is a diagnostics statement), in the same
//! `character_set_results`: its bytes replace the decoded text. Only a
//! message holding U+FFFD costs this query, so valid text never does.

use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::mysql::MysqlError;

use super::vitess::WARNINGS_QUERY;

/// `error` with its message's bytes as the server sent them, when the
/// decoded text may have lost some; otherwise (or if the server no longer
/// lists it) `error` unchanged.
pub async fn with_server_bytes(conn: &mut Conn, error: MysqlError) -> MysqlError {
    if !error.message.contains(REPLACEMENT) {
        return error;
    }
    let rows: Vec<(Vec<u8>, u32, Vec<u8>)> = match conn.query(WARNINGS_QUERY).await {
        Ok(rows) => rows,
        Err(_) => return error,
    };
    match server_bytes(&rows, &error) {
        Some(bytes) => MysqlError {
            message: bytes.into(),
            ..error
        },
        None => error,
    }
}

const REPLACEMENT: &str = "\u{fffd}";

/// The `Error` row of `SHOW WARNINGS` that is `error`: the same number,
/// and a message that decodes to the same text (so bytes are only ever
/// replaced by the bytes they were decoded from).
fn server_bytes(rows: &[(Vec<u8>, u32, Vec<u8>)], error: &MysqlError) -> Option<Vec<u8>> {
    rows.iter()
        .find(|(level, code, message)| {
            level.as_slice() == b"Error"
                && *code == u32::from(error.code)
                && String::from_utf8_lossy(message).as_bytes() == error.message.as_bytes()
        })
        .map(|(_, _, message)| message.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(code: u16, bytes: &[u8]) -> MysqlError {
        MysqlError {
            code,
            state: "42000".into(),
            message: String::from_utf8_lossy(bytes).into_owned().into(),
        }
    }

    fn row(level: &str, code: u32, message: &[u8]) -> (Vec<u8>, u32, Vec<u8>) {
        (level.into(), code, message.to_vec())
    }

    #[test]
    fn the_matching_error_row_gives_its_bytes() {
        let sent = b"near '\xa9\xc3\xa8 foo' at line 1";
        let rows = [
            row("Warning", 1064, sent),
            row("Error", 1644, sent),
            row("Error", 1064, sent),
        ];
        assert_eq!(
            server_bytes(&rows, &decoded(1064, sent)).as_deref(),
            Some(&sent[..])
        );
    }

    #[test]
    fn nothing_else_replaces_the_text() {
        let sent = b"near '\xa9' at line 1";
        let error = decoded(1064, sent);
        // Another message (a later error's, a different cut), another
        // level, nothing listed (the diagnostics area was full).
        assert_eq!(
            server_bytes(&[row("Error", 1064, b"near '\xa9\xa9' at line 1")], &error),
            None
        );
        assert_eq!(server_bytes(&[row("Note", 1064, sent)], &error), None);
        assert_eq!(server_bytes(&[], &error), None);
    }
}
