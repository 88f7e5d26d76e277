//! Cheap statement classification, used to avoid asking the backend for the
//! session's state (transaction, default database) after statements that
//! cannot change it, and to find multi-statements. SQL is bytes in the
//! client's character set, read as the server's lexer reads it
//! ([`Dialect`]).

use super::sql_text::{Charset, Dialect, is_executable_comment};

/// True if `sql` is a single plain data statement (SELECT, INSERT, UPDATE,
/// DELETE, REPLACE, SHOW, …). Such a statement cannot start or end a
/// transaction, nor change autocommit: with autocommit on it commits
/// itself, inside a transaction it stays inside. Nor can it change the
/// default database, the character set or the `sql_mode`. Anything else
/// (BEGIN, COMMIT, SET, USE, DDL, CALL, multi-statements, executable
/// comments) returns false, and the caller asks the backend.
pub fn keeps_session_state(sql: &[u8], dialect: &Dialect) -> bool {
    single_statement_of(sql, dialect, &[PLAIN])
}

/// True if `sql` is a single statement that leaves the session's default
/// database, character set, `sql_mode` and `wait_timeout` as they were
/// (whatever it does to the transaction, which the status flags of every
/// OK packet report): a [`keeps_session_state`] statement, transaction
/// control, DDL other than `DROP` (`DROP DATABASE` can take the default
/// database away), or `CALL` (a routine runs with the `sql_mode`,
/// character set and database it was created with, and the server
/// restores the caller's when it returns; only a `SET SESSION
/// wait_timeout` inside it would go unseen, until the next `SET`).
pub fn keeps_session_variables(sql: &[u8], dialect: &Dialect) -> bool {
    const TRANSACTION_AND_SCHEMA: &[&str] = &[
        "BEGIN",
        "START",
        "COMMIT",
        "ROLLBACK",
        "SAVEPOINT",
        "RELEASE",
        "CREATE",
        "ALTER",
        "RENAME",
        "TRUNCATE",
        "CALL",
    ];
    single_statement_of(sql, dialect, &[PLAIN, TRANSACTION_AND_SCHEMA])
}

/// Data statements: one result each, and no effect on the session.
const PLAIN: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "REPLACE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN",
    "WITH", "VALUES", "TABLE", "DO",
];

/// True if `sql` is one statement (no inner `;`) whose leading keyword is
/// in one of `lists`.
fn single_statement_of(sql: &[u8], dialect: &Dialect, lists: &[&[&str]]) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        return false;
    };
    lists
        .iter()
        .flat_map(|list| list.iter())
        .any(|k| keyword.eq_ignore_ascii_case(k.as_bytes()))
        && inner_semicolon(sql, dialect).is_none()
}

/// True if `sql` is one statement of a kind that answers with one result
/// (a result set or an OK): not a procedure call, compound statement,
/// prepared `EXECUTE` or multi-statement, which may answer with several,
/// apart in time.
pub fn has_one_result(sql: &[u8], dialect: &Dialect) -> bool {
    let session_and_schema = &[
        "SET", "USE", "COMMIT", "ROLLBACK", "START", "CREATE", "ALTER", "DROP", "TRUNCATE",
        "RENAME",
    ];
    single_statement_of(sql, dialect, &[PLAIN, session_and_schema])
}

/// True if `sql` may change a table's columns: DDL, and what cannot be
/// told apart cheaply (routines, multi-statements, executable comments).
pub fn may_change_schema(sql: &[u8], dialect: &Dialect) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        return true;
    };
    let schema = [
        "CREATE", "ALTER", "DROP", "RENAME", "TRUNCATE", "CALL", "EXECUTE",
    ];
    schema
        .iter()
        .any(|k| keyword.eq_ignore_ascii_case(k.as_bytes()))
        || inner_semicolon(sql, dialect).is_some()
}

/// The first word of the statement, after whitespace, comments and
/// opening parentheses; `None` for executable comments (`/*! … */`).
/// Comments end at ASCII bytes no multibyte character contains, so no
/// character set is needed here.
pub fn leading_keyword(sql: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    loop {
        while i < sql.len() && (sql[i].is_ascii_whitespace() || sql[i] == b'(') {
            i += 1;
        }
        let rest = &sql[i..];
        if rest.starts_with(b"/*") {
            if is_executable_comment(rest) {
                return None;
            }
            let end = rest[2..].windows(2).position(|w| w == b"*/")?;
            i += 2 + end + 2;
        } else if rest.starts_with(b"#") || rest.starts_with(b"-- ") {
            let end = rest.iter().position(|&c| c == b'\n')?;
            i += end + 1;
        } else {
            break;
        }
    }
    let rest = &sql[i..];
    let len = rest
        .iter()
        .position(|c| !c.is_ascii_alphabetic())
        .unwrap_or(rest.len());
    (len > 0).then(|| &rest[..len])
}

/// Whether the statement is a `CALL` (its arguments may be OUT
/// parameters).
pub fn is_call(sql: &[u8]) -> bool {
    leading_keyword(sql).is_some_and(|k| k.eq_ignore_ascii_case(b"CALL"))
}

/// True if `sql` is `LOAD DATA LOCAL` or `LOAD XML LOCAL`: the server
/// would ask the client for a file, which cannot travel through the API.
/// An executable comment could hide it, so one that mentions both LOAD
/// and LOCAL counts too.
pub fn is_load_local(sql: &[u8]) -> bool {
    let Some(keyword) = leading_keyword(sql) else {
        let upper = sql.to_ascii_uppercase();
        let has = |word: &[u8]| upper.windows(word.len()).any(|w| w == word);
        return has(b"LOAD") && has(b"LOCAL");
    };
    if !keyword.eq_ignore_ascii_case(b"LOAD") {
        return false;
    }
    let at = keyword.as_ptr() as usize - sql.as_ptr() as usize + keyword.len();
    let mut words = sql[at..]
        .split(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .filter(|w| !w.is_empty());
    if !words
        .next()
        .is_some_and(|w| w.eq_ignore_ascii_case(b"DATA") || w.eq_ignore_ascii_case(b"XML"))
    {
        return false;
    }
    words
        .find(|w| {
            !w.eq_ignore_ascii_case(b"LOW_PRIORITY") && !w.eq_ignore_ascii_case(b"CONCURRENT")
        })
        .is_some_and(|w| w.eq_ignore_ascii_case(b"LOCAL"))
}

/// Whether `sql` holds several statements, which a client that did not
/// enable multi-statements must not be able to run (it is what keeps an
/// injected `; DROP TABLE …` from executing). Routine and trigger bodies
/// (`CREATE … BEGIN …; …; END`) and compound statements are one statement
/// despite their semicolons.
pub fn is_multi_statement(sql: &[u8], dialect: &Dialect) -> bool {
    second_statement(sql, dialect).is_some()
}

/// Where the second statement of a multi-statement `sql` starts (past the
/// whitespace after the first `;`), as [`is_multi_statement`] decides.
pub fn second_statement(sql: &[u8], dialect: &Dialect) -> Option<usize> {
    let compound = leading_keyword(sql).is_some_and(|k| {
        // `k` borrows from `sql`: what follows it.
        let at = k.as_ptr() as usize - sql.as_ptr() as usize;
        let rest = sql[at + k.len()..].trim_ascii_start();
        ["CREATE", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"]
            .iter()
            .any(|c| k.eq_ignore_ascii_case(c.as_bytes()))
            || (k.eq_ignore_ascii_case(b"BEGIN")
                && rest
                    .get(..10)
                    .is_some_and(|r| r.eq_ignore_ascii_case(b"NOT ATOMIC")))
    });
    if compound {
        return None;
    }
    inner_semicolon(sql, dialect)
}

/// How a statement of a multi-statement answers, which decides what the
/// server says in the EOF after a result set's column definitions (sent
/// before the rows, so before anything of the statement's end is known):
/// `SERVER_MORE_RESULTS_EXISTS` while a later statement remains (the
/// server knows it from the text: its parser found the next statement),
/// and throughout a procedure call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answers {
    /// One result: a result set or an OK.
    One,
    /// A `CALL`: its procedure's result sets, then the call's own OK.
    Call,
    /// Not known from its text: an `EXECUTE` (of a prepared `CALL`, or
    /// not), a compound statement, `SET STATEMENT … FOR`, an executable
    /// comment.
    Unknown,
}

/// The statements of a multi-statement, in order, by how each answers;
/// `None` for a single statement. Split where [`second_statement`]
/// splits, so where the server's parser ends each statement; a compound
/// statement ends the list (what follows its `END` is not looked for).
pub fn multi_statement_answers(sql: &[u8], dialect: &Dialect) -> Option<Vec<Answers>> {
    let mut at = second_statement(sql, dialect)?;
    let mut answers = vec![answers_of(sql)];
    loop {
        let rest = &sql[at..];
        answers.push(answers_of(rest));
        match second_statement(rest, dialect) {
            Some(next) => at += next,
            None => return Some(answers),
        }
    }
}

fn answers_of(statement: &[u8]) -> Answers {
    let Some(keyword) = leading_keyword(statement) else {
        return Answers::Unknown;
    };
    let at = keyword.as_ptr() as usize - statement.as_ptr() as usize;
    let next = next_word(&statement[at + keyword.len()..]);
    let is = |k: &[u8], name: &str| k.eq_ignore_ascii_case(name.as_bytes());
    if is(keyword, "CALL") {
        Answers::Call
    } else if ["EXECUTE", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR"]
        .iter()
        .any(|k| is(keyword, k))
        || (is(keyword, "BEGIN") && is(next, "NOT"))
        || (is(keyword, "SET") && is(next, "STATEMENT"))
        // A labelled compound statement (`label: BEGIN …`).
        || next.first() == Some(&b':')
    {
        Answers::Unknown
    } else {
        Answers::One
    }
}

/// The word `rest` starts with, after whitespace (letters, digits, `_`;
/// else the one byte there).
fn next_word(rest: &[u8]) -> &[u8] {
    let rest = rest.trim_ascii_start();
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
        .unwrap_or(rest.len());
    &rest[..end.max(rest.len().min(1))]
}

/// A `;` outside quotes and comments, as the server's lexer finds them,
/// with something after it: more than one statement. Returns where that
/// something starts.
fn inner_semicolon(sql: &[u8], dialect: &Dialect) -> Option<usize> {
    let mut i = 0;
    while i < sql.len() {
        if let Some(end) = dialect.skip_non_code(sql, i) {
            i = end;
            continue;
        }
        if sql[i] == b';' {
            let rest = &sql[i + 1..];
            let skipped = rest.len() - rest.trim_ascii_start().len();
            return (!rest.trim_ascii().is_empty()).then_some(i + 1 + skipped);
        }
        i = dialect.next(sql, i);
    }
    None
}

/// The `FLUSH` a `COM_REFRESH` of `options` (`REFRESH_*` bits) does, or
/// `None` for options no `FLUSH` names alone: none at all (the server
/// only checks the RELOAD privilege), `REFRESH_SLAVE` (0x40) and
/// `REFRESH_MASTER` (0x80), which reset replication. The server runs both
/// through `reload_acl_and_cache` after an implicit commit and the same
/// RELOAD check, writing nothing to the binary log (hence `LOCAL`);
/// `TABLES` goes last, since a name list may follow it.
pub fn refresh_as_flush(options: u8) -> Option<String> {
    const WORDS: [(u8, &str); 6] = [
        (0x01, "PRIVILEGES"),
        (0x02, "LOGS"),
        (0x08, "HOSTS"),
        (0x10, "STATUS"),
        (0x20, "THREADS"),
        (0x04, "TABLES"),
    ];
    if options == 0 || options & 0xc0 != 0 {
        return None;
    }
    let words: Vec<&str> = WORDS
        .iter()
        .filter(|(bit, _)| options & bit != 0)
        .map(|(_, word)| *word)
        .collect();
    Some(format!("FLUSH LOCAL {}", words.join(", ")))
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

/// `USE` for a database name in the client's character set, as its bytes:
/// backticks are doubled, but not a byte 0x60 inside a multibyte character
/// (gbk, big5, sjis), which the server's lexer reads as part of it.
pub fn use_database(name: &[u8], charset: Charset) -> Vec<u8> {
    let mut sql = b"USE `".to_vec();
    let mut i = 0;
    while i < name.len() {
        let len = charset.char_len(name, i);
        sql.extend_from_slice(&name[i..i + len]);
        if len == 1 && name[i] == b'`' {
            sql.push(b'`');
        }
        i += len;
    }
    sql.push(b'`');
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_name_is_quoted_as_its_bytes() {
        assert_eq!(
            use_database(b"caf\xe9", Charset::AsciiSafe),
            b"USE `caf\xe9`"
        );
        assert_eq!(use_database(b"a`b", Charset::AsciiSafe), b"USE `a``b`");
        // gbk: 0x81 0x60 is one character; the lone ` after it is not.
        assert_eq!(use_database(b"\x81`x`", Charset::Gbk), b"USE `\x81`x```");
    }

    const D: Dialect = Dialect {
        charset: Charset::AsciiSafe,
        backslash_escapes: true,
        ansi_quotes: false,
    };

    #[test]
    fn multibyte_text_never_panics() {
        // Once sliced by bytes inside a character: a panic that killed the
        // connection and left its transaction's locks held.
        for sql in [
            "BEGIN /* Привет мир */",
            "BEGIN; -- начало транзакции",
            "BEGIN -- 開始トランザクション",
            "BEGIN NOT ATOMI",
            "BEGIN é",
        ] {
            let _ = is_multi_statement(sql.as_bytes(), &D);
            let _ = keeps_session_state(sql.as_bytes(), &D);
            let _ = has_one_result(sql.as_bytes(), &D);
        }
        assert!(!is_multi_statement("BEGIN /* Привет мир */".as_bytes(), &D));
        assert!(is_multi_statement(
            "BEGIN; UPDATE t SET x = 'Привет'".as_bytes(),
            &D
        ));
    }

    #[test]
    fn load_local_is_found() {
        for sql in [
            "LOAD DATA LOCAL INFILE 'x' INTO TABLE t",
            " load data low_priority local infile '/etc/passwd' into table t",
            "LOAD XML CONCURRENT LOCAL INFILE 'a.xml' INTO TABLE t",
            "/*!LOAD DATA LOCAL INFILE 'x' INTO TABLE t */",
        ] {
            assert!(is_load_local(sql.as_bytes()), "{sql}");
        }
        for sql in [
            "LOAD DATA INFILE '/tmp/x' INTO TABLE t",
            "SELECT 'LOAD DATA LOCAL'",
            "LOAD INDEX INTO CACHE t",
        ] {
            assert!(!is_load_local(sql.as_bytes()), "{sql}");
        }
    }

    #[test]
    fn multi_statements_as_the_server_lexes_them() {
        let gbk = Dialect {
            charset: Charset::Gbk,
            ..D
        };
        // 0xE55C is one gbk character: the quote after it ends the string,
        // and what follows the `;` is a second statement.
        let sql = b"SELECT '\xe5\\'; DROP TABLE t; -- '";
        assert!(is_multi_statement(sql, &gbk));
        assert!(!is_multi_statement(sql, &D));
        let nbe = Dialect {
            backslash_escapes: false,
            ..D
        };
        let sql = b"SELECT '\\'; DROP TABLE t; -- '";
        assert!(is_multi_statement(sql, &nbe));
        assert!(!is_multi_statement(sql, &D));
        assert!(!is_multi_statement(b"SELECT 1 -- x; y", &D));
    }

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
            assert!(may_change_schema(sql.as_bytes(), &D), "{sql}");
        }
        for sql in [
            "SELECT j FROM t",
            "SET autocommit = 0",
            "INSERT INTO t VALUES (1)",
            "BEGIN",
        ] {
            assert!(!may_change_schema(sql.as_bytes(), &D), "{sql}");
        }
    }

    #[test]
    fn refresh_options_as_flush() {
        assert_eq!(
            refresh_as_flush(0x04).as_deref(),
            Some("FLUSH LOCAL TABLES")
        );
        assert_eq!(
            refresh_as_flush(0x3f).as_deref(),
            Some("FLUSH LOCAL PRIVILEGES, LOGS, HOSTS, STATUS, THREADS, TABLES")
        );
        for unmapped in [0, 0x40, 0x80, 0x44] {
            assert_eq!(refresh_as_flush(unmapped), None, "{unmapped:#x}");
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
        assert!(!is_multi_statement("SELECT 1".as_bytes(), &D));
        assert!(!is_multi_statement("SELECT 1;".as_bytes(), &D));
        assert!(!is_multi_statement("SELECT ';' FROM t; ".as_bytes(), &D));
        assert!(is_multi_statement("SELECT 1; DROP TABLE t".as_bytes(), &D));
        assert!(is_multi_statement("BEGIN; DELETE FROM t".as_bytes(), &D));
        assert_eq!(
            second_statement("SELECT 1;\n  SELECT 2".as_bytes(), &D),
            Some(12)
        );
        assert!(!is_multi_statement(
            "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END".as_bytes(),
            &D
        ));
        assert!(!is_multi_statement(
            "BEGIN NOT ATOMIC SELECT 1; SELECT 2; END".as_bytes(),
            &D
        ));
    }

    #[test]
    fn classification() {
        assert!(keeps_session_state("  select 1".as_bytes(), &D));
        assert!(keeps_session_state(
            "/* c */ (SELECT 1) UNION (SELECT 2);".as_bytes(),
            &D
        ));
        assert!(keeps_session_state(
            "insert into t values (';begin')".as_bytes(),
            &D
        ));
        assert!(!keeps_session_state("BEGIN".as_bytes(), &D));
        assert!(!keeps_session_state("start transaction".as_bytes(), &D));
        assert!(!keeps_session_state("commit".as_bytes(), &D));
        assert!(!keeps_session_state("set autocommit=0".as_bytes(), &D));
        assert!(!keeps_session_state(
            "create table t (a int)".as_bytes(),
            &D
        ));
        assert!(!keeps_session_state("select 1; commit".as_bytes(), &D));
        assert!(!keeps_session_state("/*!40101 begin */".as_bytes(), &D));
        assert!(!keeps_session_state("call p()".as_bytes(), &D));
        assert!(!keeps_session_state("use test".as_bytes(), &D));
        assert!(has_one_result(" select 1".as_bytes(), &D));
        assert!(has_one_result("insert into t values (';')".as_bytes(), &D));
        assert!(!has_one_result("select 1; select 2".as_bytes(), &D));
        assert!(!has_one_result("call p()".as_bytes(), &D));
        assert!(!has_one_result("execute s".as_bytes(), &D));
        assert!(!has_one_result("/*!50000 select 1 */".as_bytes(), &D));
        assert!(!has_one_result(
            "begin not atomic select 1; select 2; end".as_bytes(),
            &D
        ));
        assert!(!has_one_result(
            "create procedure p() begin select 1; select 2; end".as_bytes(),
            &D
        ));
        assert!(!keeps_session_state("drop database test".as_bytes(), &D));
        assert!(!keeps_session_state("".as_bytes(), &D));
        // What may change the session's variables or database, beyond
        // the transaction the OK packet reports.
        for kept in [
            "select 1",
            "BEGIN",
            "start transaction read only",
            "commit",
            "rollback to savepoint s",
            "create table t (a int)",
            "alter table t add b int",
            "call p('alpha', 'abcdef')",
        ] {
            assert!(keeps_session_variables(kept.as_bytes(), &D), "{kept}");
        }
        for changed in [
            "set names latin1",
            "set autocommit=0",
            "use test",
            "drop database test",
            "execute s",
            "call p(); set names latin1",
            "begin not atomic set names latin1; end",
            "/*!40101 set sql_mode='' */",
            "",
        ] {
            assert!(
                !keeps_session_variables(changed.as_bytes(), &D),
                "{changed}"
            );
        }
        assert_eq!(
            leading_keyword(b"-- x\n# y\n  update t"),
            Some(&b"update"[..])
        );
    }

    #[test]
    fn a_multi_statement_lists_how_each_statement_answers() {
        use Answers::{Call, One, Unknown};
        let plan = |sql: &str| multi_statement_answers(sql.as_bytes(), &D);
        assert_eq!(plan("SELECT 1"), None);
        assert_eq!(plan("CALL p()"), None);
        assert_eq!(plan("SELECT 1;"), None, "a trailing ; ends one statement");
        assert_eq!(plan("SELECT 1; SELECT 2"), Some(vec![One, One]));
        assert_eq!(plan("SELECT 1; SELECT 2;"), Some(vec![One, One]));
        assert_eq!(
            plan("SELECT ';'; call p(); DO 1"),
            Some(vec![One, Call, One])
        );
        assert_eq!(
            plan("EXECUTE s; SET STATEMENT x = 1 FOR CALL p(); SET @a = 1"),
            Some(vec![Unknown, Unknown, One])
        );
        assert_eq!(plan("/*!SELECT 1*/; SELECT 2"), Some(vec![Unknown, One]));
        // A compound statement ends the list: its inner `;` are not
        // statements of the multi-statement.
        assert_eq!(
            plan("SELECT 1; BEGIN NOT ATOMIC SELECT 2; SELECT 3; END"),
            Some(vec![One, Unknown])
        );
        // A labelled one is not seen as compound by `second_statement`,
        // which splits it; it is still Unknown, so what follows it is not
        // counted.
        let labelled = plan("DO 1; lbl: LOOP LEAVE lbl; END LOOP").unwrap();
        assert_eq!(labelled[..2], [One, Unknown]);
    }
}
