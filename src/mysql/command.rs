//! The command phase's requests, parsed from a packet payload (the command
//! byte first), sans-IO.
//!
//! Only the fixed layout is decoded here. Variable parts that need
//! session state stay raw: `COM_STMT_EXECUTE`'s parameters need the
//! statement's parameter count (`params.rs`), `COM_CHANGE_USER`'s body
//! needs the negotiated capabilities (`auth`). Payloads are `Bytes`, so
//! SQL text and long data are slices of the packet, never copies.
//!
//! Also here: [`parse_kill`], which spots `KILL [QUERY|CONNECTION] <id>`
//! in a `COM_QUERY` so that the sidecar can cancel its own connections,
//! whose ids it handed out in the greeting.

use bytes::Bytes;

use crate::mysql::MysqlError;

/// Command bytes, as in MySQL's `enum_server_command` (plus MariaDB's
/// `COM_STMT_BULK_EXECUTE` and friends at the top of the range).
pub mod code {
    pub const COM_SLEEP: u8 = 0x00;
    pub const COM_QUIT: u8 = 0x01;
    pub const COM_INIT_DB: u8 = 0x02;
    pub const COM_QUERY: u8 = 0x03;
    pub const COM_FIELD_LIST: u8 = 0x04;
    pub const COM_CREATE_DB: u8 = 0x05;
    pub const COM_DROP_DB: u8 = 0x06;
    pub const COM_REFRESH: u8 = 0x07;
    pub const COM_SHUTDOWN: u8 = 0x08;
    pub const COM_STATISTICS: u8 = 0x09;
    pub const COM_PROCESS_INFO: u8 = 0x0a;
    pub const COM_CONNECT: u8 = 0x0b;
    pub const COM_PROCESS_KILL: u8 = 0x0c;
    pub const COM_DEBUG: u8 = 0x0d;
    pub const COM_PING: u8 = 0x0e;
    pub const COM_TIME: u8 = 0x0f;
    pub const COM_DELAYED_INSERT: u8 = 0x10;
    pub const COM_CHANGE_USER: u8 = 0x11;
    pub const COM_BINLOG_DUMP: u8 = 0x12;
    pub const COM_TABLE_DUMP: u8 = 0x13;
    pub const COM_CONNECT_OUT: u8 = 0x14;
    pub const COM_REGISTER_SLAVE: u8 = 0x15;
    pub const COM_STMT_PREPARE: u8 = 0x16;
    pub const COM_STMT_EXECUTE: u8 = 0x17;
    pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const COM_STMT_CLOSE: u8 = 0x19;
    pub const COM_STMT_RESET: u8 = 0x1a;
    pub const COM_SET_OPTION: u8 = 0x1b;
    pub const COM_STMT_FETCH: u8 = 0x1c;
    pub const COM_DAEMON: u8 = 0x1d;
    pub const COM_BINLOG_DUMP_GTID: u8 = 0x1e;
    pub const COM_RESET_CONNECTION: u8 = 0x1f;
    pub const COM_CLONE: u8 = 0x20;
    pub const COM_SUBSCRIBE_GROUP_REPLICATION_STREAM: u8 = 0x21;
    pub const COM_STMT_BULK_EXECUTE: u8 = 0xfa;
    pub const COM_SLAVE_WORKER: u8 = 0xfb;
    pub const COM_SLAVE_IO: u8 = 0xfc;
    pub const COM_SLAVE_SQL: u8 = 0xfd;
    pub const COM_MULTI: u8 = 0xfe;
}

/// `COM_SET_OPTION` values.
pub const MULTI_STATEMENTS_ON: u16 = 0;
pub const MULTI_STATEMENTS_OFF: u16 = 1;

/// `COM_STMT_EXECUTE` flags (the cursor type).
pub const CURSOR_TYPE_NO_CURSOR: u8 = 0x00;
pub const CURSOR_TYPE_READ_ONLY: u8 = 0x01;
pub const CURSOR_TYPE_FOR_UPDATE: u8 = 0x02;
pub const CURSOR_TYPE_SCROLLABLE: u8 = 0x04;

/// One request of the command phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Quit,
    /// `USE <name>`: the database name, unquoted.
    InitDb(Bytes),
    Query(Bytes),
    /// Deprecated column listing (`mysql` client's tab completion).
    FieldList {
        table: Bytes,
        wildcard: Bytes,
    },
    Ping,
    Statistics,
    /// `mysql_refresh()`: its `REFRESH_*` options (0 when the byte is
    /// missing, as the server reads the packet's terminating NUL).
    Refresh(u8),
    /// `mysql_kill()`: the connection id to kill.
    ProcessKill(u32),
    /// The body after the command byte; see `auth::Handshake::change_user`.
    ChangeUser(Bytes),
    ResetConnection,
    /// [`MULTI_STATEMENTS_ON`] or [`MULTI_STATEMENTS_OFF`]; other values
    /// are answered with an error by MySQL.
    SetOption(u16),
    StmtPrepare(Bytes),
    StmtExecute {
        stmt_id: u32,
        /// Cursor type, `CURSOR_TYPE_*`.
        flags: u8,
        /// Always 1 in practice.
        iteration_count: u32,
        /// NULL bitmap, new-params-bound flag, types and values: parsed
        /// elsewhere, given the statement's parameter count.
        params: Bytes,
    },
    StmtSendLongData {
        stmt_id: u32,
        param_id: u16,
        data: Bytes,
    },
    StmtClose(u32),
    StmtReset(u32),
    StmtFetch {
        stmt_id: u32,
        rows: u32,
    },
    /// A command the sidecar does not carry (replication, server admin,
    /// internal ones): answer with [`Unsupported::to_mysql`], never OK.
    Unsupported(Unsupported),
}

/// A command byte the sidecar refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsupported {
    pub code: u8,
    /// MySQL's name for it (`COM_BINLOG_DUMP`), or `"unknown"`.
    pub name: &'static str,
}

impl Unsupported {
    /// `ER_UNKNOWN_COM_ERROR`, what MySQL answers to commands it refuses.
    pub fn to_mysql(&self) -> MysqlError {
        MysqlError {
            code: 1047,
            state: "08S01".into(),
            message: format!("Unknown command {} (0x{:02x})", self.name, self.code).into(),
        }
    }
}

/// A request whose fixed part is missing or cut short.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("malformed {command} packet: {reason}")]
    Malformed {
        command: &'static str,
        reason: &'static str,
    },
}

impl CommandError {
    /// `ER_MALFORMED_PACKET`, as MySQL answers such packets.
    pub fn to_mysql(&self) -> MysqlError {
        MysqlError {
            code: 1835,
            state: "HY000".into(),
            message: "Malformed communication packet.".into(),
        }
    }
}

/// MySQL's name for a command byte, `"unknown"` for unassigned ones.
pub fn command_name(code: u8) -> &'static str {
    use code::*;
    match code {
        COM_SLEEP => "COM_SLEEP",
        COM_QUIT => "COM_QUIT",
        COM_INIT_DB => "COM_INIT_DB",
        COM_QUERY => "COM_QUERY",
        COM_FIELD_LIST => "COM_FIELD_LIST",
        COM_CREATE_DB => "COM_CREATE_DB",
        COM_DROP_DB => "COM_DROP_DB",
        COM_REFRESH => "COM_REFRESH",
        COM_SHUTDOWN => "COM_SHUTDOWN",
        COM_STATISTICS => "COM_STATISTICS",
        COM_PROCESS_INFO => "COM_PROCESS_INFO",
        COM_CONNECT => "COM_CONNECT",
        COM_PROCESS_KILL => "COM_PROCESS_KILL",
        COM_DEBUG => "COM_DEBUG",
        COM_PING => "COM_PING",
        COM_TIME => "COM_TIME",
        COM_DELAYED_INSERT => "COM_DELAYED_INSERT",
        COM_CHANGE_USER => "COM_CHANGE_USER",
        COM_BINLOG_DUMP => "COM_BINLOG_DUMP",
        COM_TABLE_DUMP => "COM_TABLE_DUMP",
        COM_CONNECT_OUT => "COM_CONNECT_OUT",
        COM_REGISTER_SLAVE => "COM_REGISTER_SLAVE",
        COM_STMT_PREPARE => "COM_STMT_PREPARE",
        COM_STMT_EXECUTE => "COM_STMT_EXECUTE",
        COM_STMT_SEND_LONG_DATA => "COM_STMT_SEND_LONG_DATA",
        COM_STMT_CLOSE => "COM_STMT_CLOSE",
        COM_STMT_RESET => "COM_STMT_RESET",
        COM_SET_OPTION => "COM_SET_OPTION",
        COM_STMT_FETCH => "COM_STMT_FETCH",
        COM_DAEMON => "COM_DAEMON",
        COM_BINLOG_DUMP_GTID => "COM_BINLOG_DUMP_GTID",
        COM_RESET_CONNECTION => "COM_RESET_CONNECTION",
        COM_CLONE => "COM_CLONE",
        COM_SUBSCRIBE_GROUP_REPLICATION_STREAM => "COM_SUBSCRIBE_GROUP_REPLICATION_STREAM",
        COM_STMT_BULK_EXECUTE => "COM_STMT_BULK_EXECUTE",
        COM_SLAVE_WORKER => "COM_SLAVE_WORKER",
        COM_SLAVE_IO => "COM_SLAVE_IO",
        COM_SLAVE_SQL => "COM_SLAVE_SQL",
        COM_MULTI => "COM_MULTI",
        _ => "unknown",
    }
}

/// Parses one command-phase request. Trailing bytes after a fixed-size
/// request are ignored, as MySQL does.
pub fn parse(payload: Bytes) -> Result<Command, CommandError> {
    use code::*;
    let Some(&command) = payload.first() else {
        return Err(CommandError::Malformed {
            command: "command",
            reason: "empty packet",
        });
    };
    let body = Body {
        command: command_name(command),
        bytes: payload.slice(1..),
    };
    Ok(match command {
        COM_QUIT => Command::Quit,
        COM_INIT_DB => Command::InitDb(body.bytes),
        COM_QUERY => Command::Query(body.bytes),
        COM_FIELD_LIST => body.field_list(),
        COM_PING => Command::Ping,
        COM_STATISTICS => Command::Statistics,
        COM_REFRESH => Command::Refresh(body.bytes.first().copied().unwrap_or(0)),
        COM_PROCESS_KILL => Command::ProcessKill(body.u32_at(0)?),
        COM_CHANGE_USER => Command::ChangeUser(body.bytes),
        COM_RESET_CONNECTION => Command::ResetConnection,
        COM_SET_OPTION => Command::SetOption(body.u16_at(0)?),
        COM_STMT_PREPARE => Command::StmtPrepare(body.bytes),
        COM_STMT_EXECUTE => Command::StmtExecute {
            stmt_id: body.u32_at(0)?,
            flags: body.u8_at(4)?,
            iteration_count: body.u32_at(5)?,
            params: body.bytes.slice(9..),
        },
        COM_STMT_SEND_LONG_DATA => Command::StmtSendLongData {
            stmt_id: body.u32_at(0)?,
            param_id: body.u16_at(4)?,
            data: body.bytes.slice(6..),
        },
        COM_STMT_CLOSE => Command::StmtClose(body.u32_at(0)?),
        COM_STMT_RESET => Command::StmtReset(body.u32_at(0)?),
        COM_STMT_FETCH => Command::StmtFetch {
            stmt_id: body.u32_at(0)?,
            rows: body.u32_at(4)?,
        },
        code => Command::Unsupported(Unsupported {
            code,
            name: command_name(code),
        }),
    })
}

/// A request's bytes after the command byte, with bounds-checked readers
/// whose errors name the command.
struct Body {
    command: &'static str,
    bytes: Bytes,
}

impl Body {
    fn array_at<const N: usize>(&self, at: usize) -> Result<[u8; N], CommandError> {
        self.bytes
            .get(at..at + N)
            .and_then(|s| s.try_into().ok())
            .ok_or(CommandError::Malformed {
                command: self.command,
                reason: "truncated",
            })
    }

    fn u8_at(&self, at: usize) -> Result<u8, CommandError> {
        self.array_at::<1>(at).map(|[b]| b)
    }

    fn u16_at(&self, at: usize) -> Result<u16, CommandError> {
        self.array_at(at).map(u16::from_le_bytes)
    }

    fn u32_at(&self, at: usize) -> Result<u32, CommandError> {
        self.array_at(at).map(u32::from_le_bytes)
    }

    /// Table NUL wildcard. As in MySQL (which reads the table with
    /// `strlen`), a missing NUL makes everything the table name.
    fn field_list(self) -> Command {
        match self.bytes.iter().position(|&b| b == 0) {
            Some(nul) => Command::FieldList {
                table: self.bytes.slice(..nul),
                wildcard: self.bytes.slice(nul + 1..),
            },
            None => Command::FieldList {
                table: self.bytes,
                wildcard: Bytes::new(),
            },
        }
    }
}

// ---------------------------------------------------------------------------
// KILL
// ---------------------------------------------------------------------------

/// A recognised `KILL` statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// `KILL QUERY`: cancel the running statement, keep the connection.
    pub query_only: bool,
    pub id: u64,
    /// MariaDB's `KILL QUERY ID n`: `id` is a *query* id, not a connection
    /// id. Never match it against connection ids.
    pub by_query_id: bool,
}

/// Recognises `KILL [HARD|SOFT] [QUERY [ID] | CONNECTION] <integer> [;]`,
/// case-insensitively, around whitespace and comments. Anything else
/// (`KILL USER x`, an expression, a second statement, a versioned
/// `/*! … */` comment whose content MySQL would execute) is `None`, left
/// for the server to judge.
pub fn parse_kill(sql: &str) -> Option<Kill> {
    let mut tokens = Tokens { rest: sql };
    if !tokens.word()?.eq_ignore_ascii_case("KILL") {
        return None;
    }
    let mut word = tokens.word()?;
    if word.eq_ignore_ascii_case("HARD") || word.eq_ignore_ascii_case("SOFT") {
        word = tokens.word()?;
    }
    let mut kill = Kill {
        query_only: false,
        id: 0,
        by_query_id: false,
    };
    if word.eq_ignore_ascii_case("QUERY") {
        kill.query_only = true;
        word = tokens.word()?;
        if word.eq_ignore_ascii_case("ID") {
            kill.by_query_id = true;
            word = tokens.word()?;
        }
    } else if word.eq_ignore_ascii_case("CONNECTION") {
        word = tokens.word()?;
    }
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    kill.id = word.parse().ok()?;
    tokens.end().then_some(kill)
}

/// Just enough of a SQL lexer for `KILL`: words, whitespace, comments.
struct Tokens<'a> {
    rest: &'a str,
}

impl<'a> Tokens<'a> {
    /// The next word (letters, digits, `_`, `$`), after skipping blanks and
    /// comments; `None` at the end, at any other character, or at a
    /// comment MySQL would execute.
    fn word(&mut self) -> Option<&'a str> {
        self.skip_blanks()?;
        let len = self
            .rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(self.rest.len());
        if len == 0 {
            return None;
        }
        let (word, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(word)
    }

    /// True if only blanks, comments and at most one `;` remain.
    fn end(&mut self) -> bool {
        if self.skip_blanks().is_none() {
            return false;
        }
        if let Some(rest) = self.rest.strip_prefix(';') {
            self.rest = rest;
            if self.skip_blanks().is_none() {
                return false;
            }
        }
        self.rest.is_empty()
    }

    /// Skips whitespace and comments; `None` on an unterminated or
    /// executable (`/*!`, `/*+` hint) comment.
    fn skip_blanks(&mut self) -> Option<()> {
        loop {
            let trimmed = self.rest.trim_start();
            self.rest = trimmed;
            if let Some(body) = trimmed.strip_prefix("/*") {
                if body.starts_with('!') || body.starts_with('+') {
                    return None;
                }
                let end = body.find("*/")?;
                self.rest = &body[end + 2..];
            } else if let Some(line) = trimmed.strip_prefix('#') {
                self.rest = line.find('\n').map_or("", |i| &line[i + 1..]);
            } else if let Some(line) = trimmed.strip_prefix("--") {
                // `--` starts a comment only when followed by a blank.
                if !line.is_empty() && !line.starts_with(|c: char| c.is_ascii_whitespace()) {
                    return Some(());
                }
                self.rest = line.find('\n').map_or("", |i| &line[i + 1..]);
            } else {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::CommandCode;
    use mysql_common::packets::{
        ComBinlogDump, ComBinlogDumpGtid, ComRegisterSlave, ComStmtClose,
        ComStmtExecuteRequestBuilder, ComStmtSendLongData, ComTableDump,
    };
    use mysql_common::proto::MySerialize;
    use mysql_common::value::Value;

    fn ser(x: &impl MySerialize) -> Bytes {
        let mut buf = Vec::new();
        x.serialize(&mut buf);
        Bytes::from(buf)
    }

    fn cmd(code: u8, body: &[u8]) -> Bytes {
        let mut v = vec![code];
        v.extend_from_slice(body);
        Bytes::from(v)
    }

    fn malformed(r: Result<Command, CommandError>) -> CommandError {
        match r {
            Err(e) => e,
            Ok(c) => panic!("expected Malformed, got {c:?}"),
        }
    }

    #[test]
    fn simple_commands() {
        use code::*;
        assert_eq!(parse(cmd(COM_QUIT, b"")), Ok(Command::Quit));
        assert_eq!(parse(cmd(COM_PING, b"")), Ok(Command::Ping));
        assert_eq!(parse(cmd(COM_STATISTICS, b"")), Ok(Command::Statistics));
        assert_eq!(parse(cmd(COM_REFRESH, b"\x04")), Ok(Command::Refresh(4)));
        assert_eq!(parse(cmd(COM_REFRESH, b"")), Ok(Command::Refresh(0)));
        assert_eq!(
            parse(cmd(COM_RESET_CONNECTION, b"")),
            Ok(Command::ResetConnection)
        );
        assert_eq!(
            parse(cmd(COM_QUERY, b"SELECT 1")),
            Ok(Command::Query(Bytes::from_static(b"SELECT 1")))
        );
        assert_eq!(parse(cmd(COM_QUERY, b"")), Ok(Command::Query(Bytes::new())));
        assert_eq!(
            parse(cmd(COM_INIT_DB, b"shop")),
            Ok(Command::InitDb(Bytes::from_static(b"shop")))
        );
        assert_eq!(
            parse(cmd(COM_STMT_PREPARE, b"SELECT ?")),
            Ok(Command::StmtPrepare(Bytes::from_static(b"SELECT ?")))
        );
        assert_eq!(
            parse(cmd(COM_PROCESS_KILL, &77u32.to_le_bytes())),
            Ok(Command::ProcessKill(77))
        );
        assert_eq!(
            parse(cmd(COM_SET_OPTION, &[1, 0])),
            Ok(Command::SetOption(MULTI_STATEMENTS_OFF))
        );
        assert_eq!(
            parse(cmd(COM_CHANGE_USER, b"bob\0\0\0")),
            Ok(Command::ChangeUser(Bytes::from_static(b"bob\0\0\0")))
        );
        assert_eq!(
            parse(cmd(COM_STMT_RESET, &9u32.to_le_bytes())),
            Ok(Command::StmtReset(9))
        );
        let mut fetch = 3u32.to_le_bytes().to_vec();
        fetch.extend_from_slice(&100u32.to_le_bytes());
        assert_eq!(
            parse(cmd(COM_STMT_FETCH, &fetch)),
            Ok(Command::StmtFetch {
                stmt_id: 3,
                rows: 100
            })
        );
    }

    #[test]
    fn sql_is_a_slice_of_the_packet() {
        let payload = cmd(code::COM_QUERY, b"SELECT 42");
        let Ok(Command::Query(sql)) = parse(payload.clone()) else {
            panic!("not a query");
        };
        assert_eq!(sql.as_ptr(), payload[1..].as_ptr());
    }

    #[test]
    fn field_list() {
        assert_eq!(
            parse(cmd(code::COM_FIELD_LIST, b"users\0na%")),
            Ok(Command::FieldList {
                table: Bytes::from_static(b"users"),
                wildcard: Bytes::from_static(b"na%"),
            })
        );
        assert_eq!(
            parse(cmd(code::COM_FIELD_LIST, b"users")),
            Ok(Command::FieldList {
                table: Bytes::from_static(b"users"),
                wildcard: Bytes::new(),
            })
        );
    }

    #[test]
    fn statement_commands_from_mysql_common() {
        let values = [Value::Int(1), Value::Bytes(b"x".to_vec()), Value::NULL];
        let (exec, _) = ComStmtExecuteRequestBuilder::new(5).build(&values);
        let payload = ser(&exec);
        let Ok(Command::StmtExecute {
            stmt_id,
            flags,
            iteration_count,
            params,
        }) = parse(payload.clone())
        else {
            panic!("not an execute");
        };
        assert_eq!(
            (stmt_id, flags, iteration_count),
            (5, CURSOR_TYPE_NO_CURSOR, 1)
        );
        assert_eq!(&params[..], &payload[10..]);
        // NULL bitmap for 3 params: the third is NULL.
        assert_eq!(params[0], 0b100);

        let long = ser(&ComStmtSendLongData::new(6, 2, &b"chunk"[..]));
        assert_eq!(
            parse(long),
            Ok(Command::StmtSendLongData {
                stmt_id: 6,
                param_id: 2,
                data: Bytes::from_static(b"chunk"),
            })
        );
        assert_eq!(parse(ser(&ComStmtClose::new(8))), Ok(Command::StmtClose(8)));
        // An execute without parameters has an empty rest.
        let mut bare = vec![code::COM_STMT_EXECUTE];
        bare.extend_from_slice(&1u32.to_le_bytes());
        bare.push(CURSOR_TYPE_READ_ONLY);
        bare.extend_from_slice(&1u32.to_le_bytes());
        assert!(matches!(
            parse(Bytes::from(bare)),
            Ok(Command::StmtExecute { flags: CURSOR_TYPE_READ_ONLY, params, .. }) if params.is_empty()
        ));
    }

    #[test]
    fn empty_and_truncated_are_malformed() {
        use code::*;
        let e = malformed(parse(Bytes::new()));
        let m = e.to_mysql();
        assert_eq!((m.code, m.state.as_str()), (1835, "HY000"));
        assert_eq!(m.message, "Malformed communication packet.");
        for (code, full_len) in [
            (COM_PROCESS_KILL, 4),
            (COM_SET_OPTION, 2),
            (COM_STMT_EXECUTE, 9),
            (COM_STMT_SEND_LONG_DATA, 6),
            (COM_STMT_CLOSE, 4),
            (COM_STMT_RESET, 4),
            (COM_STMT_FETCH, 8),
        ] {
            for len in 0..full_len {
                let e = malformed(parse(cmd(code, &vec![1; len])));
                assert!(e.to_string().contains(command_name(code)), "{e}");
            }
            assert!(parse(cmd(code, &vec![1; full_len])).is_ok());
        }
    }

    #[test]
    fn unsupported_commands_are_named() {
        let cases = [
            (ser(&ComBinlogDump::new(1)), "COM_BINLOG_DUMP"),
            (ser(&ComBinlogDumpGtid::new(1)), "COM_BINLOG_DUMP_GTID"),
            (ser(&ComRegisterSlave::new(1)), "COM_REGISTER_SLAVE"),
            (
                ser(&ComTableDump::new(&b"db"[..], &b"t"[..])),
                "COM_TABLE_DUMP",
            ),
            (cmd(code::COM_CLONE, b""), "COM_CLONE"),
            (
                cmd(code::COM_STMT_BULK_EXECUTE, b"..."),
                "COM_STMT_BULK_EXECUTE",
            ),
            (cmd(0x42, b""), "unknown"),
        ];
        for (payload, name) in cases {
            let Ok(Command::Unsupported(u)) = parse(payload) else {
                panic!("{name} should be unsupported");
            };
            assert_eq!(u.name, name);
            let e = u.to_mysql();
            assert_eq!((e.code, e.state.as_str()), (1047, "08S01"));
            assert!(e.message.starts_with("Unknown command") && e.message.contains(name));
        }
        // Every command byte parses to something, never panics.
        for code in 0..=u8::MAX {
            let _ = parse(cmd(code, b""));
            let _ = parse(cmd(code, &[0xff; 16]));
        }
    }

    #[test]
    fn names_agree_with_mysql_common() {
        use CommandCode::*;
        for c in [
            COM_SLEEP,
            COM_QUIT,
            COM_INIT_DB,
            COM_QUERY,
            COM_FIELD_LIST,
            COM_CREATE_DB,
            COM_DROP_DB,
            COM_REFRESH,
            COM_STATISTICS,
            COM_PROCESS_INFO,
            COM_CONNECT,
            COM_PROCESS_KILL,
            COM_DEBUG,
            COM_PING,
            COM_TIME,
            COM_DELAYED_INSERT,
            COM_CHANGE_USER,
            COM_BINLOG_DUMP,
            COM_TABLE_DUMP,
            COM_CONNECT_OUT,
            COM_REGISTER_SLAVE,
            COM_STMT_PREPARE,
            COM_STMT_EXECUTE,
            COM_STMT_SEND_LONG_DATA,
            COM_STMT_CLOSE,
            COM_STMT_RESET,
            COM_SET_OPTION,
            COM_STMT_FETCH,
            COM_DAEMON,
            COM_BINLOG_DUMP_GTID,
            COM_RESET_CONNECTION,
            COM_STMT_BULK_EXECUTE,
        ] {
            assert_eq!(command_name(c as u8), format!("{c:?}"));
        }
        // mysql_common calls 0x08 COM_DEPRECATED_1; MySQL's docs COM_SHUTDOWN.
        assert_eq!(COM_DEPRECATED_1 as u8, code::COM_SHUTDOWN);
    }

    fn kill(query_only: bool, id: u64) -> Option<Kill> {
        Some(Kill {
            query_only,
            id,
            by_query_id: false,
        })
    }

    #[test]
    fn kill_statements() {
        assert_eq!(parse_kill("KILL 5"), kill(false, 5));
        assert_eq!(parse_kill("kill connection 5"), kill(false, 5));
        assert_eq!(
            parse_kill("  Kill\tQuery\n 18446744073709551615 ;  "),
            kill(true, u64::MAX)
        );
        assert_eq!(parse_kill("KILL /* why */ QUERY 7;"), kill(true, 7));
        assert_eq!(parse_kill("KILL QUERY 7 -- the slow one\n"), kill(true, 7));
        assert_eq!(parse_kill("KILL QUERY 7 # the slow one"), kill(true, 7));
        assert_eq!(parse_kill("/* lead */ KILL 9"), kill(false, 9));
        assert_eq!(parse_kill("KILL HARD QUERY 3"), kill(true, 3));
        assert_eq!(parse_kill("kill soft connection 3"), kill(false, 3));
        assert_eq!(parse_kill("KILL SOFT 3"), kill(false, 3));
        assert_eq!(
            parse_kill("KILL QUERY ID 12"),
            Some(Kill {
                query_only: true,
                id: 12,
                by_query_id: true,
            })
        );
    }

    #[test]
    fn not_kill_statements() {
        for sql in [
            "",
            "KILL",
            "KILL QUERY",
            "KILL USER bob",
            "KILL CONNECTION ID 5",
            "KILL 5abc",
            "KILL5",
            "KILL -5",
            "KILL 1+1",
            "KILL CONNECTION_ID()",
            "KILL 0x10",
            "KILL 18446744073709551616",
            "KILL 5; SELECT 1",
            "KILL 5;;",
            "KILL /*! QUERY */ 5",
            "KILL /*+ hint */ 5",
            "KILL /* unterminated 5",
            "KILL 5 --x",
            "KILL HARD SOFT 5",
            "SELECT 'KILL 5'",
            "KILLQUERY 5",
        ] {
            assert_eq!(parse_kill(sql), None, "{sql:?}");
        }
    }
}
