//! Cheap statement classification, used to avoid asking the backend for the
//! session's state (transaction, default database) after statements that
//! cannot change it.

/// True if `sql` is a single plain data statement (SELECT, INSERT, UPDATE,
/// DELETE, REPLACE, SHOW, …). Such a statement cannot start or end a
/// transaction, nor change autocommit: with autocommit on it commits
/// itself, inside a transaction it stays inside. Nor can it change the
/// default database. Anything else (BEGIN, COMMIT, SET, USE, DDL, CALL,
/// multi-statements, executable comments) returns false, and the caller
/// asks the backend.
pub fn keeps_session_state(sql: &str) -> bool {
    single_statement_of(sql, &[PLAIN])
}

/// Data statements: one result each, and no effect on the session.
const PLAIN: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN",
    "WITH", "VALUES", "TABLE", "DO",
];

/// True if `sql` is one statement (no inner `;`) whose leading keyword is
/// in one of `lists`.
fn single_statement_of(sql: &str, lists: &[&[&str]]) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        return false;
    };
    lists
        .iter()
        .flat_map(|list| list.iter())
        .any(|k| keyword.eq_ignore_ascii_case(k))
        && inner_semicolon(sql).is_none()
}

/// True if `sql` is one statement of a kind that answers with one result
/// (a result set or an OK): not a procedure call, compound statement,
/// prepared `EXECUTE` or multi-statement, which may answer with several,
/// apart in time.
pub fn has_one_result(sql: &str) -> bool {
    let session_and_schema = &[
        "SET", "USE", "COMMIT", "ROLLBACK", "START", "CREATE", "ALTER", "DROP", "TRUNCATE",
        "RENAME",
    ];
    single_statement_of(sql, &[PLAIN, session_and_schema])
}

/// True if `sql` may change a table's columns: DDL, and what cannot be
/// told apart cheaply (routines, multi-statements, executable comments).
pub fn may_change_schema(sql: &str) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        return true;
    };
    let schema = [
        "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "CALL", "EXECUTE",
    ];
    schema.iter().any(|k| keyword.eq_ignore_ascii_case(k)) || inner_semicolon(sql).is_some()
}

/// The first word of the statement, after whitespace, comments and
/// opening parentheses; `None` for executable comments (`/*! … */`).
pub fn leading_keyword(sql: &str) -> Option<&str> {
    let bytes = sql.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b'(') {
            i += 1;
        }
        if bytes[i..].starts_with(b"/*") {
            if bytes[i..].starts_with(b"/*!") || bytes[i..].starts_with(b"/*M!") {
                return None;
            }
            let end = bytes[i + 2..].windows(2).position(|w| w == b"*/")?;
            i += 2 + end + 2;
        } else if bytes[i..].starts_with(b"#") || bytes[i..].starts_with(b"-- ") {
            let end = bytes[i..].iter().position(|&c| c == b'\n')?;
            i += end + 1;
        } else {
            break;
        }
    }
    let end = bytes[i..]
        .iter()
        .position(|c| !c.is_ascii_alphabetic())
        .map_or(bytes.len(), |p| i + p);
    (end > i).then(|| &sql[i..end])
}

/// Whether `sql` holds several statements, which a client that did not
/// enable multi-statements must not be able to run (it is what keeps an
/// injected `; DROP TABLE …` from executing). Routine and trigger bodies
/// (`CREATE … BEGIN …; …; END`) and compound statements are one statement
/// despite their semicolons.
pub fn is_multi_statement(sql: &str) -> bool {
    second_statement(sql).is_some()
}

/// Where the second statement of a multi-statement `sql` starts (past the
/// whitespace after the first `;`), as [`is_multi_statement`] decides.
pub fn second_statement(sql: &str) -> Option<usize> {
    let compound = leading_keyword(sql).is_some_and(|k| {
        // `k` borrows from `sql`: what follows it.
        let at = k.as_ptr() as usize - sql.as_ptr() as usize;
        let rest = sql[at + k.len()..].trim_start();
        ["CREATE", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"]
            .iter()
            .any(|c| k.eq_ignore_ascii_case(c))
            || (k.eq_ignore_ascii_case("BEGIN")
                && rest.len() >= 10
                && rest[..10].eq_ignore_ascii_case("NOT ATOMIC"))
    });
    if compound {
        return None;
    }
    inner_semicolon(sql)
}

/// A `;` outside quotes with something after it: more than one statement.
/// Returns where that something starts.
fn inner_semicolon(sql: &str) -> Option<usize> {
    let bytes = sql.as_bytes();
    let mut quote = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) if c == b'\\' && q != b'`' => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if matches!(c, b'\'' | b'"' | b'`') => quote = Some(c),
            None if c == b';' => {
                let rest = &sql[i + 1..];
                let skipped = rest.len() - rest.trim_start().len();
                return (!rest.trim().is_empty()).then_some(i + 1 + skipped);
            }
            None => {}
        }
        i += 1;
    }
    None
}

/// `SET NAMES` for a collation id from a handshake, or `None` for an id
/// mysql_common does not know.
pub fn set_names(collation_id: u16) -> Option<String> {
    use mysql_common::collations::{Collation, CollationId};
    let id = CollationId::from(collation_id);
    if id == CollationId::UNKNOWN_COLLATION_ID {
        return None;
    }
    let collation = Collation::from(id);
    // Names are ASCII identifiers from a fixed table: nothing to escape.
    Some(format!(
        "SET NAMES '{}' COLLATE '{}'",
        collation.charset(),
        collation.collation()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_changes() {
        for sql in [
            "ALTER TABLE t MODIFY j JSON",
            " create table t (j json)",
            "DROP TABLE t",
            "/*!50001 CREATE */",
            "SELECT 1; ALTER TABLE t ADD x INT",
            "CALL p()",
        ] {
            assert!(may_change_schema(sql), "{sql}");
        }
        for sql in [
            "SELECT j FROM t",
            "SET autocommit = 0",
            "INSERT INTO t VALUES (1)",
            "BEGIN",
        ] {
            assert!(!may_change_schema(sql), "{sql}");
        }
    }

    #[test]
    fn set_names_for_handshake_collations() {
        assert_eq!(
            set_names(224).as_deref(),
            Some("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'")
        );
        assert_eq!(
            set_names(8).as_deref(),
            Some("SET NAMES 'latin1' COLLATE 'latin1_swedish_ci'")
        );
        assert_eq!(set_names(0), None);
    }

    #[test]
    fn multi_statements() {
        assert!(!is_multi_statement("SELECT 1"));
        assert!(!is_multi_statement("SELECT 1;"));
        assert!(!is_multi_statement("SELECT ';' FROM t; "));
        assert!(is_multi_statement("SELECT 1; DROP TABLE t"));
        assert!(is_multi_statement("BEGIN; DELETE FROM t"));
        assert_eq!(second_statement("SELECT 1;\n  SELECT 2"), Some(12));
        assert!(!is_multi_statement(
            "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END"
        ));
        assert!(!is_multi_statement(
            "BEGIN NOT ATOMIC SELECT 1; SELECT 2; END"
        ));
    }

    #[test]
    fn classification() {
        assert!(keeps_session_state("  select 1"));
        assert!(keeps_session_state("/* c */ (SELECT 1) UNION (SELECT 2);"));
        assert!(keeps_session_state("insert into t values (';begin')"));
        assert!(!keeps_session_state("BEGIN"));
        assert!(!keeps_session_state("start transaction"));
        assert!(!keeps_session_state("commit"));
        assert!(!keeps_session_state("set autocommit=0"));
        assert!(!keeps_session_state("create table t (a int)"));
        assert!(!keeps_session_state("select 1; commit"));
        assert!(!keeps_session_state("/*!40101 begin */"));
        assert!(!keeps_session_state("call p()"));
        assert!(!keeps_session_state("use test"));
        assert!(has_one_result(" select 1"));
        assert!(has_one_result("insert into t values (';')"));
        assert!(!has_one_result("select 1; select 2"));
        assert!(!has_one_result("call p()"));
        assert!(!has_one_result("execute s"));
        assert!(!has_one_result("/*!50000 select 1 */"));
        assert!(!has_one_result("begin not atomic select 1; select 2; end"));
        assert!(!has_one_result(
            "create procedure p() begin select 1; select 2; end"
        ));
        assert!(!keeps_session_state("drop database test"));
        assert!(!keeps_session_state(""));
        assert_eq!(leading_keyword("-- x\n# y\n  update t"), Some("update"));
    }
}
