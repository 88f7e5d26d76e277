//! When the gateway must read a session's variables back from the backend.
//!
//! Every query the gateway runs on a client's backend connection is
//! visible to the client: `Com_select` counts it, the optimizer trace shows
//! it, and MariaDB's diagnostics area moves its row counter (the "at row
//! N" of the client's next warning). So the session's default database,
//! `character_set_client`, `sql_mode` and `wait_timeout` are asked for
//! only after a statement that can change one of them, found in its text:
//! a `SET` that names one, `USE`, `DROP DATABASE`, `EXECUTE`, compound
//! statements, multi-statements, executable comments and statements the
//! scan does not know. The transaction and autocommit come from the status
//! flags of every OK packet (after an error, of a `COM_PING`'s).

use crate::translate::sql_text::Dialect;
use crate::translate::statement::{self, leading_keyword};

use crate::translate::session_track::{self, Assignment};

use super::session_state::{Token, Tokens, set_assignments, set_targets};
use super::sessions::SessionState;

/// Leading keywords of statements that change none of the followed
/// variables (besides the data, transaction and schema statements of
/// [`statement::keeps_session_variables`]): administration, privileges,
/// locks, prepared-statement bookkeeping, diagnostics.
const KEEP: &[&str] = &[
    "ANALYZE",
    "BACKUP",
    "BINLOG",
    "CACHE",
    "CHECK",
    "CHECKSUM",
    "DEALLOCATE",
    "FLUSH",
    "GET",
    "GRANT",
    "HANDLER",
    "HELP",
    "INSTALL",
    "KILL",
    "LOAD",
    "LOCK",
    "OPTIMIZE",
    "PREPARE",
    "PURGE",
    "REPAIR",
    "RESET",
    "RESIGNAL",
    "REVOKE",
    "SIGNAL",
    "UNINSTALL",
    "UNLOCK",
    "XA",
];

/// What a `CREATE` with a body makes.
const ROUTINES: &[&str] = &["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"];

/// The session variables the gateway follows (lowercase), and what sets
/// the character set as a whole.
const FOLLOWED: &[&[u8]] = &[
    b"character_set_client",
    b"sql_mode",
    b"wait_timeout",
    b"names",
    b"charset",
    b"character",
];

/// True if `sql`, which ran (or failed), may have changed the session's
/// default database, `character_set_client`, `sql_mode` or
/// `wait_timeout`. `answered_rows`: it answered with a result set, which
/// tells that an `EXECUTE` ran a query (a `SET` or `USE` answers OK), not
/// what changes them.
pub fn may_change_followed(sql: &[u8], dialect: &Dialect, answered_rows: bool) -> bool {
    if statement::is_multi_statement(sql, dialect) {
        return true;
    }
    let Some(keyword) = leading_keyword(sql) else {
        // An executable comment, or nothing the scan can read.
        return true;
    };
    let keyword = keyword.to_ascii_uppercase();
    let mut tokens = Tokens::new(sql, dialect).skip(1);
    let second = tokens.next();
    let second_is = |word: &str| matches!(second, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word.as_bytes()));
    match &keyword[..] {
        // `BEGIN NOT ATOMIC … END` runs anything.
        b"BEGIN" if second_is("NOT") => true,
        b"SET" if second_is("STATEMENT") => true,
        b"SET" => {
            let tokens: Vec<_> = Tokens::new(sql, dialect).skip(1).collect();
            set_targets(&tokens).is_none_or(|names| {
                names
                    .iter()
                    .any(|name| FOLLOWED.iter().any(|f| f.eq_ignore_ascii_case(name)))
            })
        }
        b"DROP" => second_is("DATABASE") || second_is("SCHEMA"),
        b"EXECUTE" => !answered_rows,
        _ if statement::keeps_session_variables(sql, dialect) => false,
        // A routine, trigger or event body has semicolons of its own; any
        // other CREATE with one is followed by another statement.
        b"CREATE" => !Tokens::new(sql, dialect).take(16).any(|t| {
            matches!(t, Token::Word(w) if ROUTINES.iter().any(|r| w.eq_ignore_ascii_case(r.as_bytes())))
        }),
        k => !KEEP.iter().any(|keep| keep.as_bytes() == k),
    }
}

/// The session variables whose new values a client that reads
/// session-state tracking must be told about after `sql` ran without
/// error ([`session_track::reported`]): those a single `SET` assigns. A
/// variable set by a statement in a multi-statement, a procedure or a
/// prepared statement is not followed (that would take a read after
/// statements that set nothing), nor is `SET STATEMENT … FOR`, whose
/// values are gone when it ends.
pub fn tracked_variables(sql: &[u8], dialect: &Dialect) -> Vec<String> {
    let is_set = leading_keyword(sql).is_some_and(|k| k.eq_ignore_ascii_case(b"SET"));
    if !is_set || statement::is_multi_statement(sql, dialect) {
        return Vec::new();
    }
    let tokens: Vec<_> = Tokens::new(sql, dialect).skip(1).collect();
    let word = |i: usize, w: &str| matches!(tokens.get(i), Some(Token::Word(x)) if x.eq_ignore_ascii_case(w.as_bytes()));
    if word(0, "STATEMENT") {
        return Vec::new();
    }
    if (word(0, "SESSION") || word(0, "LOCAL")) && word(1, "TRANSACTION") {
        // Each characteristic, comma-separated, by its first word.
        let firsts: Vec<&[u8]> = tokens[2..]
            .split(|t| *t == Token::Punct(b','))
            .filter_map(|part| match part.first() {
                Some(Token::Word(w)) => Some(*w),
                _ => None,
            })
            .collect();
        return session_track::transaction_characteristics(&firsts);
    }
    set_assignments(&tokens)
        .map(|assignments| session_track::reported(&assignments))
        .unwrap_or_default()
}

/// Whether `sql` (which ran without error) may have turned the session's
/// `session_track_state_change` on or off: a single `SET` naming it in
/// any session scope (a bare `@@name` too). Read back after it.
pub fn sets_state_change_tracking(sql: &[u8], dialect: &Dialect) -> bool {
    single_set(sql, dialect).is_some_and(|assignments| {
        assignments
            .iter()
            .any(|a| a.name.eq_ignore_ascii_case(b"session_track_state_change"))
    })
}

/// Whether the server reports a state change after `sql` ran without
/// error, to a session tracking state changes
/// ([`session_track::changes_state`]). A multi-statement's is not
/// followed.
pub fn marks_state_change(sql: &[u8], dialect: &Dialect) -> bool {
    if statement::is_multi_statement(sql, dialect) {
        return false;
    }
    let Some(keyword) = leading_keyword(sql) else {
        return false;
    };
    let keyword = keyword.to_ascii_uppercase();
    let words: Vec<Vec<u8>> = Tokens::new(sql, dialect)
        .skip(1)
        .take(4)
        .map_while(|t| match t {
            Token::Word(w) => Some(w.to_ascii_uppercase()),
            _ => None,
        })
        .collect();
    let word = |i: usize, w: &str| words.get(i).is_some_and(|x| x == w.as_bytes());
    let kind = match &keyword[..] {
        b"SET" if word(0, "STATEMENT") => session_track::Statement::SetStatement,
        b"SET" => {
            let assignments = single_set(sql, dialect).unwrap_or_default();
            return session_track::changes_state(session_track::Statement::Set(&assignments));
        }
        b"USE" | b"PREPARE" | b"DEALLOCATE" => session_track::Statement::ChangesState,
        b"DROP" if word(0, "PREPARE") || word(0, "TEMPORARY") => {
            session_track::Statement::ChangesState
        }
        b"CREATE" if word(0, "TEMPORARY") || word(2, "TEMPORARY") => {
            session_track::Statement::ChangesState
        }
        _ => session_track::Statement::Other,
    };
    session_track::changes_state(kind)
}

/// The assignments of `sql` if it is a single `SET` the scan can read.
fn single_set<'a>(sql: &'a [u8], dialect: &Dialect) -> Option<Vec<Assignment<'a>>> {
    let is_set = leading_keyword(sql).is_some_and(|k| k.eq_ignore_ascii_case(b"SET"));
    if !is_set || statement::is_multi_statement(sql, dialect) {
        return None;
    }
    let tokens: Vec<_> = Tokens::new(sql, dialect).skip(1).collect();
    set_assignments(&tokens)
}

/// What `SET NAMES 'charset' [COLLATE 'collation']` sets, read from its
/// text (what a sidecar sends for a client's handshake collation), so that
/// it needs no read back: `None` for any other statement, or names that
/// are not plain words, or `utf8` and `DEFAULT`, whose meaning depends on
/// the server.
#[derive(Debug, PartialEq, Eq)]
pub struct Names {
    /// The character set, lowercase: what `@@character_set_client` reads.
    pub charset: String,
    /// The collation, lowercase; `None`: the character set's default.
    pub collation: Option<String>,
}

impl Names {
    /// Records in the session what the statement set, as reading it back
    /// would have: the character set it scans SQL text by and, for a
    /// session that moves between gateways, the variables to replay
    /// (`character_set_connection` without `collation_connection` sets
    /// that character set's default collation, as `SET NAMES` did).
    pub fn record(&self, state: &mut SessionState) {
        state.charset = Some(self.charset.clone());
        if state.pinned.is_some() {
            return;
        }
        // Plain words: nothing to escape.
        let quoted = |v: &str| format!("'{v}'");
        for name in [
            "character_set_client",
            "character_set_connection",
            "character_set_results",
        ] {
            state.replayed.insert(name.into(), quoted(&self.charset));
        }
        match &self.collation {
            Some(c) => state
                .replayed
                .insert("collation_connection".into(), quoted(c)),
            None => state.replayed.remove("collation_connection"),
        };
    }
}

pub fn set_names(sql: &[u8]) -> Option<Names> {
    let mut words = NameWords { sql, at: 0 };
    let keyword = |word: Option<&[u8]>, expected: &str| {
        word.is_some_and(|w| w.eq_ignore_ascii_case(expected.as_bytes()))
    };
    if !keyword(words.next(false), "SET") || !keyword(words.next(false), "NAMES") {
        return None;
    }
    let charset = words.next(true)?.to_ascii_lowercase();
    let collation = match words.next(false) {
        None => None,
        Some(w) if w.eq_ignore_ascii_case(b"COLLATE") => {
            Some(words.next(true)?.to_ascii_lowercase())
        }
        Some(_) => return None,
    };
    if words.next(false).is_some() || !words.sql[words.at..].trim_ascii().is_empty() {
        return None;
    }
    if charset == b"utf8" || charset == b"default" {
        return None;
    }
    let text = |bytes: Vec<u8>| String::from_utf8(bytes).ok();
    Some(Names {
        charset: text(charset)?,
        collation: match collation {
            Some(c) => Some(text(c)?),
            None => None,
        },
    })
}

/// Plain words (ASCII letters, digits, `_`), optionally quoted, separated
/// by ASCII spaces: anything else ends the scan.
struct NameWords<'a> {
    sql: &'a [u8],
    at: usize,
}

impl<'a> NameWords<'a> {
    fn next(&mut self, may_quote: bool) -> Option<&'a [u8]> {
        let rest = &self.sql[self.at..];
        let start = rest.len() - rest.trim_ascii_start().len();
        let rest = &rest[start..];
        let quote = rest
            .first()
            .filter(|&&q| may_quote && matches!(q, b'\'' | b'"' | b'`'))
            .copied();
        let body = &rest[usize::from(quote.is_some())..];
        let len = body
            .iter()
            .position(|&b| !(b.is_ascii_alphanumeric() || b == b'_'))
            .unwrap_or(body.len());
        if len == 0 {
            return None;
        }
        let mut end = usize::from(quote.is_some()) + len;
        if let Some(q) = quote {
            if rest.get(end) != Some(&q) {
                return None;
            }
            end += 1;
        } else if rest.get(end).is_some_and(|b| !b.is_ascii_whitespace()) {
            return None;
        }
        self.at += start + end;
        Some(&body[..len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(sql: &str) -> bool {
        may_change_followed(sql.as_bytes(), &Dialect::default(), false)
    }

    #[test]
    fn statements_that_cannot_move_the_followed_variables_are_not_followed_by_a_read() {
        for sql in [
            "SELECT 1",
            "FLUSH STATUS",
            "set optimizer_trace=1",
            "SET @tmp = @@optimizer_trace",
            "SET GLOBAL sql_mode = ''",
            "SET @@global.wait_timeout = 5, @@global.max_allowed_packet = 2048",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "SET autocommit = 0",
            "set @x = 'sql_mode', @y = (select 'names')",
            "BEGIN",
            "COMMIT",
            "CALL p(1)",
            "CREATE TABLE t (a INT)",
            "CREATE PROCEDURE p(x CHAR(3)) BEGIN SELECT x; SELECT 1; END",
            "create definer=`root`@`%` trigger tr before insert on t for each row begin set @a = 1; end",
            "DROP TABLE t",
            "DROP PROCEDURE IF EXISTS p",
            "ANALYZE TABLE t",
            "PREPARE s FROM 'SET sql_mode = 1'",
            "GRANT SELECT ON *.* TO u",
        ] {
            assert!(!changes(sql), "{sql}");
        }
    }

    #[test]
    fn statements_that_may_move_them_are() {
        for sql in [
            "SET sql_mode = 'ANSI'",
            "set @@session.SQL_MODE = ''",
            "SET @a = 1, LOCAL wait_timeout = 3",
            "SET NAMES latin1",
            "SET CHARACTER SET gbk",
            "set charset utf8",
            "SET character_set_client = binary",
            "SET STATEMENT sql_mode = '' FOR SELECT 1",
            "USE test",
            "DROP DATABASE test",
            "drop schema if exists test",
            "EXECUTE s",
            "BEGIN NOT ATOMIC SET sql_mode = ''; END",
            "IF 1 THEN SET sql_mode = ''; END IF",
            "SELECT 1; USE test",
            "CREATE TABLE t (a INT); USE test",
            "/*!40101 SET NAMES utf8 */",
            "FROBNICATE x",
            "SET", // unreadable
        ] {
            assert!(changes(sql), "{sql}");
        }
    }

    #[test]
    fn an_execute_that_answered_rows_ran_a_query() {
        let d = Dialect::default();
        assert!(!may_change_followed(b"EXECUTE s", &d, true));
        assert!(may_change_followed(b"EXECUTE s", &d, false));
        assert!(may_change_followed(
            b"execute immediate 'set sql_mode = 1'",
            &d,
            false
        ));
        // Rows say nothing about a multi-statement's other parts.
        assert!(may_change_followed(b"EXECUTE s; USE test", &d, true));
    }

    #[test]
    fn a_set_tells_which_variables_tracking_may_report() {
        let tracked = |sql: &str| tracked_variables(sql.as_bytes(), &Dialect::default());
        assert_eq!(
            tracked("SET autocommit = 0, @@session.Time_Zone = '+01:00', @x = 1"),
            ["autocommit", "time_zone"]
        );
        assert_eq!(
            tracked("set names latin1"),
            [
                "character_set_client",
                "character_set_connection",
                "character_set_results"
            ]
        );
        assert_eq!(
            tracked("SET GLOBAL wait_timeout = 5, LOCAL wait_timeout = 6"),
            ["wait_timeout"]
        );
        assert_eq!(
            tracked("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY"),
            ["tx_isolation", "tx_read_only"]
        );
        assert_eq!(
            tracked("set local transaction read write"),
            ["tx_read_only"]
        );
        for none in [
            "SET @@autocommit = 1",
            "SET GLOBAL time_zone = '+00:00'",
            "SET STATEMENT time_zone = '+00:00' FOR SELECT 1",
            "SET time_zone = '+00:00'; SELECT 1",
            "SET TRANSACTION READ ONLY",
            "SELECT 1",
            "SET",
        ] {
            assert!(tracked(none).is_empty(), "{none}");
        }
    }

    #[test]
    fn state_changes_are_read_from_the_statement() {
        let d = Dialect::default();
        for sql in [
            "SET @a = 1",
            "set names latin1",
            "SET SESSION TRANSACTION READ WRITE",
            "SET STATEMENT time_zone = '+01:00' FOR DO 1",
            "USE app",
            "PREPARE s FROM 'SELECT 1'",
            "DEALLOCATE PREPARE s",
            "drop prepare s",
            "CREATE TEMPORARY TABLE t (a INT)",
            "CREATE OR REPLACE TEMPORARY TABLE t (a INT)",
            "DROP TEMPORARY TABLE IF EXISTS t",
        ] {
            assert!(marks_state_change(sql.as_bytes(), &d), "{sql}");
        }
        for sql in [
            "SET @@time_zone = '+01:00'",
            "SET GLOBAL wait_timeout = 5",
            "SET TRANSACTION READ ONLY",
            "SELECT @b := 1",
            "EXECUTE s",
            "DO 1",
            "CREATE TABLE t (a INT)",
            "DROP TABLE t",
            "SET @a = 1; SET @b = 2",
        ] {
            assert!(!marks_state_change(sql.as_bytes(), &d), "{sql}");
        }
        assert!(sets_state_change_tracking(
            b"SET @@session_track_state_change = 0",
            &d
        ));
        assert!(!sets_state_change_tracking(
            b"SET GLOBAL session_track_state_change = 1",
            &d
        ));
    }

    #[test]
    fn set_names_is_read_from_its_text() {
        let names = |sql: &str| set_names(sql.as_bytes());
        assert_eq!(
            names("SET NAMES 'latin1' COLLATE 'latin1_swedish_ci'"),
            Some(Names {
                charset: "latin1".into(),
                collation: Some("latin1_swedish_ci".into())
            })
        );
        assert_eq!(
            names("  set names GBK "),
            Some(Names {
                charset: "gbk".into(),
                collation: None
            })
        );
        for other in [
            "SET NAMES utf8",
            "SET NAMES DEFAULT",
            "SET NAMES 'latin1' COLLATE 'latin1_bin', sql_mode = ''",
            "SET NAMES 'latin1",
            "SET NAMES latin1; USE x",
            "SET NAMES 'lat\\'in1'",
            "SET NAMES _utf8mb4'latin1'",
            "SET NAMES latin1 COLLATE",
            "SET CHARACTER SET latin1",
            "SET NAMES",
        ] {
            assert_eq!(names(other), None, "{other}");
        }
    }
}
