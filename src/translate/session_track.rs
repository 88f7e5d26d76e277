//! Which system variables a statement reports in session-state tracking
//! (`SESSION_TRACK_SYSTEM_VARIABLES`), as MariaDB 10.11 reports them to a
//! client that negotiated `CLIENT_SESSION_TRACK`. Measured against the
//! server with a raw-packet client:
//!
//! - every `SET` of a session variable named in the session's
//!   `session_track_system_variables` (`*`: all) is reported with the
//!   value it has afterwards, also when the value did not change;
//! - `SET name`, `SET SESSION name`, `SET LOCAL name`, `@@session.name`
//!   and `@@local.name` are reported, a bare `@@name` is not (MariaDB
//!   marks the variable changed only for an explicit or implied session
//!   scope), nor is `GLOBAL`;
//! - `SET NAMES` and `SET CHARACTER SET` report `character_set_client`,
//!   `character_set_connection` and `character_set_results` (not
//!   `collation_connection`, even with `*`);
//! - `SET SESSION TRANSACTION` reports `tx_isolation` for an `ISOLATION
//!   LEVEL` and `tx_read_only` for `READ ONLY`/`READ WRITE` (`SET
//!   TRANSACTION`, the next transaction's, reports nothing);
//! - `SET session_track_system_variables` is reported only when the new
//!   list names it (with the list as the server normalises it);
//! - a statement that fails reports nothing; `COM_RESET_CONNECTION` and
//!   `COM_INIT_DB` report no variable.
//!
//! With `session_track_state_change` on, a `SESSION_TRACK_STATE_CHANGE`
//! entry (`1`) follows the others after a statement that changes session
//! state: a `SET` of a user variable or of a session variable (not a bare
//! `@@name`, not GLOBAL, not `SET TRANSACTION`, but `SET SESSION
//! TRANSACTION` and `SET STATEMENT … FOR`), `USE`, `PREPARE`,
//! `DEALLOCATE`, `CREATE` and `DROP TEMPORARY TABLE` (even one that does
//! not exist); not `SELECT @a := 1`, `SELECT … INTO @a` or `EXECUTE`. The
//! `SET` that turns it on is reported, the one that turns it off is not.
//!
//! The server writes several entries in the order of its tracker's hash
//! table, which depends on where the variables sit in its memory and so
//! changes from one server start to the next; here they come in the order
//! the statement names them.

use crate::mysql::reader::Reader;
use crate::mysql::response::{session_track_state_change, session_track_system_variable};

/// A variable a `SET` assigns, as written (without `@@session.` or
/// `@@local.`): `NAMES`, `CHARSET` and `CHARACTER` stand for `SET NAMES`,
/// `SET CHARSET` and `SET CHARACTER SET`.
/// A user variable (`@x = …`) has an empty name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment<'a> {
    pub name: &'a [u8],
    pub scope: Scope,
}

/// How an assignment names its variable's scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `SET name`.
    Implied,
    /// `SET SESSION name`, `LOCAL`, `@@session.name`, `@@local.name`.
    Session,
    /// A bare `@@name`, which MariaDB does not report.
    BareAt,
}

/// What `SET NAMES` and `SET CHARACTER SET` report.
const NAMES: &[&str] = &[
    "character_set_client",
    "character_set_connection",
    "character_set_results",
];

/// Statements of the `SET` family that assign no variable the tracker
/// reports (`SET TRANSACTION` sets the next transaction's
/// characteristics, `SET SESSION TRANSACTION` is not followed here).
const NOT_VARIABLES: &[&str] = &["transaction", "password", "role", "default", "statement"];

/// The session variables a statement's assignments may report, lowercase,
/// each once, in the order written. Whether they are reported depends on
/// the tracked list ([`entries`]).
pub fn reported(assignments: &[Assignment<'_>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |name: &str| {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    };
    for a in assignments.iter().filter(|a| a.scope != Scope::BareAt) {
        let Ok(name) = std::str::from_utf8(a.name) else {
            continue;
        };
        let name = name.to_ascii_lowercase();
        match name.as_str() {
            "names" | "charset" | "character" => NAMES.iter().for_each(|n| add(n)),
            n if NOT_VARIABLES.contains(&n) => {}
            n if n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') && !n.is_empty() => {
                add(n)
            }
            _ => {}
        }
    }
    names
}

/// A statement, as far as `session_track_state_change` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statement<'s, 'a> {
    /// A `SET`'s assignments (user variables included, with an empty
    /// name; GLOBAL ones left out).
    Set(&'s [Assignment<'a>]),
    /// `SET STATEMENT … FOR …`.
    SetStatement,
    /// `USE`, `PREPARE`, `DEALLOCATE`/`DROP PREPARE`, `CREATE`/`DROP
    /// TEMPORARY TABLE`: they always change session state.
    ChangesState,
    /// Anything else.
    Other,
}

/// Whether the server reports a state change after `statement` ran, to
/// a session that tracks state changes.
pub fn changes_state(statement: Statement<'_, '_>) -> bool {
    match statement {
        // `SET TRANSACTION` is the next transaction's, `SET SESSION
        // TRANSACTION` the session's.
        Statement::Set(assignments) => assignments.iter().any(|a| match a.scope {
            Scope::BareAt => false,
            Scope::Implied => !a.name.eq_ignore_ascii_case(b"TRANSACTION"),
            Scope::Session => true,
        }),
        Statement::SetStatement | Statement::ChangesState => true,
        Statement::Other => false,
    }
}

/// The `SESSION_TRACK_STATE_CHANGE` entry, placed after the others
/// (`changes`: encoded entries of the variables, then the schema).
pub fn with_state_change(mut changes: Vec<u8>) -> Vec<u8> {
    changes.extend(session_track_state_change());
    changes
}

/// What `SET SESSION TRANSACTION` reports: each characteristic (its first
/// word, in the order written) sets a variable.
pub fn transaction_characteristics(first_words: &[&[u8]]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for word in first_words {
        let name = if word.eq_ignore_ascii_case(b"ISOLATION") {
            "tx_isolation"
        } else if word.eq_ignore_ascii_case(b"READ") {
            "tx_read_only"
        } else {
            continue;
        };
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// Whether `session_track_system_variables` (`list`, as the server shows
/// it: comma-separated, `*` for all) names `name`.
pub fn is_tracked(list: &[u8], name: &str) -> bool {
    list.split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .any(|item| item == b"*" || item.eq_ignore_ascii_case(name.as_bytes()))
}

/// The encoded `SESSION_TRACK_SYSTEM_VARIABLES` entries for `reported`
/// variables the session tracks (`list`, read after the statement), with
/// their values after it (`values`: name, lowercase, and value as
/// `SHOW VARIABLES` shows it). A variable without a value (the server did
/// not show it) is left out.
pub fn entries(list: &[u8], reported: &[String], values: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for name in reported.iter().filter(|n| is_tracked(list, n)) {
        if let Some((_, value)) = values.iter().find(|(n, _)| n == name) {
            out.extend(session_track_system_variable(name.as_bytes(), value));
        }
    }
    out
}

/// The session-state information a server reports on one OK for changes
/// it would have reported on two: `earlier`, which a result set's end
/// carried (an OK-0xFE to the backend connection), and `later`, the next
/// OK's. A classic EOF (a client without `CLIENT_DEPRECATE_EOF`) has no
/// room for it, so MariaDB keeps the changes for the next OK, each tracker
/// once, in tracker order (variables, schema, state change, GTIDs,
/// transaction characteristics and state): an entry of `later` takes the
/// place of the same variable's (or, for the others, the same kind's) of
/// `earlier`. The variables keep `earlier`'s order, then `later`'s new
/// ones (the server's hash order is not known). Unreadable input is
/// concatenated as it is.
pub fn merge(earlier: &[u8], later: &[u8]) -> Vec<u8> {
    if earlier.is_empty() {
        return later.to_vec();
    }
    let (Some(a), Some(b)) = (split_entries(earlier), split_entries(later)) else {
        return [earlier, later].concat();
    };
    let mut merged: Vec<(u8, &[u8])> = Vec::new();
    for (kind, entry) in a.into_iter().chain(b) {
        let same = merged
            .iter_mut()
            .find(|(k, e)| *k == kind && (kind != 0 || variable_name(e) == variable_name(entry)));
        match same {
            Some(slot) => slot.1 = entry,
            None => merged.push((kind, entry)),
        }
    }
    // Stable: the variables keep their order among themselves.
    merged.sort_by_key(|(kind, _)| *kind);
    merged
        .into_iter()
        .flat_map(|(_, e)| e.iter().copied())
        .collect()
}

/// Each entry (its kind, and its whole bytes), or `None` if one cannot
/// be read.
fn split_entries(state: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let mut entries = Vec::new();
    let mut reader = Reader::new(state);
    while !reader.is_empty() {
        let start = state.len() - reader.remaining();
        let kind = reader.u8()?;
        reader.lenenc_bytes()?;
        let end = state.len() - reader.remaining();
        entries.push((kind, &state[start..end]));
    }
    Some(entries)
}

/// A system variable entry's name (its data's first string).
fn variable_name(entry: &[u8]) -> Option<&[u8]> {
    let mut reader = Reader::new(entry);
    reader.u8()?;
    Reader::new(reader.lenenc_bytes()?).lenenc_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT_LIST: &[u8] =
        b"autocommit,character_set_client,character_set_connection,character_set_results,time_zone";

    fn plain(name: &str) -> Assignment<'_> {
        Assignment {
            name: name.as_bytes(),
            scope: Scope::Implied,
        }
    }

    #[test]
    fn set_names_reports_the_three_character_sets() {
        assert_eq!(reported(&[plain("NAMES")]), NAMES);
        assert_eq!(reported(&[plain("character")]), NAMES);
        assert_eq!(
            reported(&[plain("time_zone"), plain("CHARSET"), plain("Time_Zone")]),
            ["time_zone", NAMES[0], NAMES[1], NAMES[2]]
        );
    }

    #[test]
    fn a_bare_at_at_name_and_set_transaction_report_nothing() {
        let bare = Assignment {
            name: b"autocommit",
            scope: Scope::BareAt,
        };
        assert!(reported(&[bare]).is_empty());
        assert!(reported(&[plain("TRANSACTION"), plain("password")]).is_empty());
        assert!(reported(&[plain("na\u{e9}me"), plain("")]).is_empty());
    }

    #[test]
    fn state_changes_follow_what_the_server_marks() {
        let user = plain("");
        let bare = Assignment {
            name: b"time_zone",
            scope: Scope::BareAt,
        };
        let session = Assignment {
            name: b"TRANSACTION",
            scope: Scope::Session,
        };
        assert!(changes_state(Statement::Set(&[user])));
        assert!(changes_state(Statement::Set(&[bare, plain("NAMES")])));
        assert!(!changes_state(Statement::Set(&[bare])));
        assert!(!changes_state(Statement::Set(&[plain("TRANSACTION")])));
        assert!(changes_state(Statement::Set(&[session])));
        assert!(!changes_state(Statement::Set(&[])));
        assert!(changes_state(Statement::SetStatement));
        assert!(changes_state(Statement::ChangesState));
        assert!(!changes_state(Statement::Other));
        assert_eq!(with_state_change(vec![1]), [1, 0x02, 0x01, b'1']);
    }

    #[test]
    fn session_transaction_characteristics_report_their_variables() {
        let names = |words: &[&str]| {
            let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            transaction_characteristics(&words)
        };
        assert_eq!(
            names(&["read", "ISOLATION"]),
            ["tx_read_only", "tx_isolation"]
        );
        assert_eq!(names(&["READ", "read"]), ["tx_read_only"]);
        assert!(names(&["WITH", ""]).is_empty());
    }

    #[test]
    fn the_tracked_list_decides() {
        assert!(is_tracked(DEFAULT_LIST, "time_zone"));
        assert!(!is_tracked(DEFAULT_LIST, "sql_mode"));
        assert!(is_tracked(b"*", "sql_mode"));
        assert!(is_tracked(b"Autocommit , TIME_ZONE", "time_zone"));
        assert!(!is_tracked(b"", "autocommit"));
    }

    #[test]
    fn entries_are_encoded_as_the_server_writes_them() {
        let values = vec![
            ("autocommit".to_string(), b"OFF".to_vec()),
            ("sql_mode".to_string(), b"ANSI".to_vec()),
        ];
        let names = vec!["autocommit".to_string(), "sql_mode".to_string()];
        // 0x00, length 15, then "autocommit" and "OFF", length-encoded.
        let mut expected = vec![0x00, 15, 10];
        expected.extend(b"autocommit");
        expected.push(3);
        expected.extend(b"OFF");
        assert_eq!(entries(DEFAULT_LIST, &names, &values), expected);
        assert_eq!(entries(b"", &names, &values), Vec::<u8>::new());
        // Not shown by the server: left out.
        assert_eq!(
            entries(b"*", &["time_zone".to_string()], &values),
            Vec::<u8>::new()
        );
    }

    #[test]
    fn changes_kept_from_a_set_end_merge_into_the_next_ok() {
        use crate::mysql::response::session_track_schema;
        let var = |name: &str, value: &str| {
            session_track_system_variable(name.as_bytes(), value.as_bytes())
        };
        let state = session_track_state_change();
        let earlier = [var("time_zone", "+05:00"), state.to_vec()].concat();
        let later = [var("autocommit", "ON"), state.to_vec()].concat();
        assert_eq!(
            merge(&earlier, &later),
            [
                var("time_zone", "+05:00"),
                var("autocommit", "ON"),
                state.to_vec()
            ]
            .concat()
        );
        // The same variable once, with its later value, in its place; the
        // schema before the state change.
        let earlier = [var("autocommit", "OFF"), var("time_zone", "+01:00")].concat();
        let later = [
            var("autocommit", "ON"),
            state.to_vec(),
            session_track_schema(b"app"),
        ]
        .concat();
        assert_eq!(
            merge(&earlier, &later),
            [
                var("autocommit", "ON"),
                var("time_zone", "+01:00"),
                session_track_schema(b"app"),
                state.to_vec(),
            ]
            .concat()
        );
        assert_eq!(merge(&[], &later), later);
        assert_eq!(merge(&earlier, &[]), earlier);
        // Unreadable: as they came.
        assert_eq!(merge(&[0, 9], &later), [&[0, 9][..], &later].concat());
    }
}
