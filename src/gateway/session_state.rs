//! What lets a session move between the gateways of a tier.
//!
//! A session outside a transaction whose backend connection holds nothing
//! but replayable settings (default database, autocommit, the session
//! variables in [`REPLAYABLE`]) is described whole by its cookie: any
//! gateway with the shared signing key rebuilds it on a fresh pooled
//! connection, as Vitess keeps `system_variables` in its session and sets
//! them on whatever tablet connection serves it. Everything else a
//! statement can leave at the backend (temporary tables, user variables,
//! `PREPARE`d statements, `GET_LOCK`, `LOCK TABLES`, variables not in the
//! list, an open transaction) pins the session to its gateway and
//! connection: the cookie says so (`in_reserved_conn`, Vitess's name for
//! a session on a reserved connection), and another gateway refuses it
//! rather than run it without that state.
//!
//! The scan is conservative: a statement it cannot read (an executable
//! comment, a compound statement, a procedure call) pins.

use std::collections::BTreeMap;
use std::time::Duration;

use mysql_async::prelude::Queryable;

use crate::api::pb::VitessSession;
use crate::translate::session_track::{Assignment, Scope, is_tracked};
use crate::translate::sql_text::Dialect;
use crate::translate::statement::second_statement;

use super::backend::BackendError;

/// An unpinned session idle this long gives its backend connection back
/// to the pool: idle sessions hold no backend connection, and a busy one
/// does not pay the pool's reset on every statement.
pub const RELEASE_IDLE_CONNECTION_AFTER: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
}

/// Session variables a gateway sets on a fresh connection to rebuild a
/// session: each has the same meaning and syntax on MariaDB 10.x and
/// MySQL 8, and its value is plain data (no state behind it).
const REPLAYABLE: &[(&str, Kind)] = &[
    ("character_set_client", Kind::Text),
    ("character_set_connection", Kind::Text),
    ("character_set_results", Kind::Text),
    ("collation_connection", Kind::Text),
    ("div_precision_increment", Kind::Number),
    ("foreign_key_checks", Kind::Number),
    ("group_concat_max_len", Kind::Number),
    ("lc_time_names", Kind::Text),
    ("max_join_size", Kind::Number),
    ("net_read_timeout", Kind::Number),
    ("net_write_timeout", Kind::Number),
    ("sql_auto_is_null", Kind::Number),
    ("sql_big_selects", Kind::Number),
    ("sql_mode", Kind::Text),
    ("sql_notes", Kind::Number),
    ("sql_safe_updates", Kind::Number),
    ("sql_select_limit", Kind::Number),
    ("sql_warnings", Kind::Number),
    ("time_zone", Kind::Text),
    ("unique_checks", Kind::Number),
    ("wait_timeout", Kind::Number),
];

/// What `SET NAMES` and `SET CHARACTER SET` change.
const CHARSET_VARIABLES: &[&str] = &[
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

/// What a statement does to the session, as far as moving it goes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// Why the statement pins the session, if it does.
    pub pins: Option<&'static str>,
    /// Replayable variables it sets: read back after it ran.
    pub sets: Vec<&'static str>,
}

/// Classifies `sql` (every statement of a multi-statement) before it runs.
pub fn classify(sql: &[u8], dialect: &Dialect) -> Effect {
    let mut effect = Effect::default();
    for statement in statements(sql, dialect) {
        match classify_one(statement, dialect) {
            Ok(sets) => effect.sets.extend(sets),
            Err(why) => {
                effect.pins = Some(why);
                effect.sets.clear();
                return effect;
            }
        }
    }
    effect.sets.sort_unstable();
    effect.sets.dedup();
    effect
}

/// Reads back the variables a statement set, as SQL literals to replay.
/// A value that cannot be written back safely pins the session instead.
pub async fn read_back(
    conn: &mut mysql_async::Conn,
    names: &[&'static str],
) -> Result<Result<Vec<(String, String)>, &'static str>, BackendError> {
    let select = names
        .iter()
        .map(|n| format!("@@session.{n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let row: Option<mysql_async::Row> = conn.query_first(format!("SELECT {select}")).await?;
    let Some(row) = row else {
        return Ok(Err("session variables that could not be read back"));
    };
    let mut values = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let kind = kind_of(name).unwrap_or(Kind::Text);
        match row.as_ref(i).and_then(|v| literal(v, kind)) {
            Some(literal) => values.push((name.to_string(), literal)),
            None => return Ok(Err("a session variable value that cannot be replayed")),
        }
    }
    Ok(Ok(values))
}

/// The session's `session_track_system_variables` and the values of the
/// `names` it tracks (lowercase, plain words), as `SHOW VARIABLES` shows
/// them — what session-state tracking reports (`ON` for autocommit, an
/// empty value for NULL), unlike `SELECT @@name`; also the list itself and
/// `session_track_state_change` (`ON`/`OFF`) when named.
///
/// The list comes first, from a query that reads no table: a query that
/// reads one (`information_schema`) clears the warnings of the client's
/// `SET` (MariaDB keeps them past statements that use no table), so it
/// runs only when a tracked variable was set.
pub async fn read_tracked(
    conn: &mut mysql_async::Conn,
    names: &[String],
) -> Result<(Vec<u8>, Vec<(String, Vec<u8>)>), BackendError> {
    const LIST: &str = "session_track_system_variables";
    const STATE: &str = "session_track_state_change";
    type Nullable = Option<Vec<u8>>;
    let row: Option<(Nullable, Nullable)> = conn
        .query_first(format!("SELECT @@session.{LIST}, @@session.{STATE}"))
        .await?;
    let (list, state) = row.unwrap_or_default();
    let list = list.unwrap_or_default();
    let mut values = Vec::new();
    if names.iter().any(|n| n == STATE) {
        let on = state.is_some_and(|v| v == b"1");
        values.push((
            STATE.to_string(),
            if on { b"ON".to_vec() } else { b"OFF".to_vec() },
        ));
    }
    if names.iter().any(|n| n == LIST) {
        values.push((LIST.to_string(), list.clone()));
    }
    let quoted: Vec<String> = names
        .iter()
        .filter(|n| *n != LIST && *n != STATE && is_tracked(&list, n))
        .filter(|n| n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .map(|n| format!("'{}'", n.to_ascii_uppercase()))
        .collect();
    if quoted.is_empty() {
        return Ok((list, values));
    }
    let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> = conn
        .query(format!(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.SESSION_VARIABLES \
             WHERE VARIABLE_NAME IN ({})",
            quoted.join(", ")
        ))
        .await?;
    for (name, value) in rows {
        let name = String::from_utf8_lossy(&name).to_ascii_lowercase();
        values.push((name, value.unwrap_or_default()));
    }
    Ok((list, values))
}

/// The statement that rebuilds a session's settings on a fresh backend
/// connection (after `USE`), or `None` when the pool's defaults are it.
pub fn replay_statement(
    replayed: &BTreeMap<String, String>,
    autocommit: bool,
    last_insert_id: u64,
) -> Option<String> {
    // Alphabetical order sets `character_set_connection` before
    // `collation_connection`, which it would otherwise reset.
    let mut parts: Vec<String> = replayed
        .iter()
        .filter(|(name, _)| kind_of(name).is_some())
        .map(|(name, value)| format!("{name} = {value}"))
        .collect();
    if !autocommit {
        parts.push("autocommit = 0".into());
    }
    if last_insert_id != 0 {
        parts.push(format!("last_insert_id = {last_insert_id}"));
    }
    (!parts.is_empty()).then(|| format!("SET SESSION {}", parts.join(", ")))
}

/// The replayable variables a cookie carries (values as SQL literals).
pub fn replayed_from(vitess: &VitessSession) -> BTreeMap<String, String> {
    vitess
        .system_variables
        .iter()
        .filter_map(|(name, value)| {
            let kind = kind_of(name)?;
            let literal = if value == "NULL" {
                "NULL".to_string()
            } else {
                literal(
                    &mysql_async::Value::Bytes(unquote(value).into_bytes()),
                    kind,
                )?
            };
            Some((name.clone(), literal))
        })
        .collect()
}

/// A quoted SQL literal's text (`'x''y'` → `x'y`); other text as it is.
pub fn unquote(value: &str) -> String {
    match value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => value.to_string(),
    }
}

/// The cookie fields a gateway rebuilds a session from, in one canonical
/// byte string for the signature: a client can read its session's
/// settings (they are its own), but not change what another gateway would
/// set on a backend connection.
pub fn signed_fields(vitess: &VitessSession) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut field = |bytes: &[u8]| {
        out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        out.extend_from_slice(bytes);
    };
    let client_found_rows = vitess.options.as_ref().is_some_and(|o| o.client_found_rows);
    field(&[
        u8::from(vitess.in_transaction),
        u8::from(vitess.in_reserved_conn),
        u8::from(vitess.autocommit),
        u8::from(client_found_rows),
    ]);
    field(&vitess.last_insert_id.to_be_bytes());
    field(vitess.target_string.as_bytes());
    let variables: BTreeMap<_, _> = vitess.system_variables.iter().collect();
    for (name, value) in variables {
        field(name.as_bytes());
        field(value.as_bytes());
    }
    out
}

fn kind_of(name: &str) -> Option<Kind> {
    REPLAYABLE
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, kind)| kind)
}

fn static_name(name: &[u8]) -> Option<&'static str> {
    REPLAYABLE
        .iter()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|&(n, _)| n)
}

/// A value as a literal that means the same under any `sql_mode` and
/// character set: digits, or printable ASCII without quotes or
/// backslashes in single quotes; `NULL` as itself.
fn literal(value: &mysql_async::Value, kind: Kind) -> Option<String> {
    use mysql_async::Value;
    match value {
        Value::NULL => Some("NULL".into()),
        Value::Int(n) => Some(n.to_string()),
        Value::UInt(n) => Some(n.to_string()),
        Value::Bytes(bytes) => {
            let text = std::str::from_utf8(bytes).ok()?;
            match kind {
                Kind::Number => {
                    let digits = text.strip_prefix('-').unwrap_or(text);
                    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| text.to_string())
                }
                Kind::Text => text
                    .bytes()
                    .all(|b| (b' '..=b'~').contains(&b) && b != b'\'' && b != b'\\')
                    .then(|| format!("'{text}'")),
            }
        }
        _ => None,
    }
}

fn statements<'a>(sql: &'a [u8], dialect: &'a Dialect) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut rest = Some(sql);
    std::iter::from_fn(move || {
        let s = rest?;
        match second_statement(s, dialect) {
            Some(at) => {
                rest = Some(&s[at..]);
                Some(&s[..at])
            }
            None => {
                rest = None;
                Some(s)
            }
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token<'a> {
    Word(&'a [u8]),
    /// `@name`, `@'name'`: a user variable.
    UserVariable,
    /// `@@name`, `@@session.name`: a system variable.
    SystemVariable(&'a [u8]),
    Number,
    Punct(u8),
}

/// The statement's code, as words and punctuation (strings, quoted
/// identifiers and comments skipped; executable comments are code), one
/// at a time: a 16 MiB INSERT is scanned without a list of its tokens.
pub(super) struct Tokens<'a, 'd> {
    sql: &'a [u8],
    dialect: &'d Dialect,
    at: usize,
}

impl<'a, 'd> Tokens<'a, 'd> {
    pub(super) fn new(sql: &'a [u8], dialect: &'d Dialect) -> Self {
        Self {
            sql,
            dialect,
            at: 0,
        }
    }
}

impl<'a> Iterator for Tokens<'a, '_> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let word_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        let sql = self.sql;
        let mut i = self.at;
        let token = loop {
            if i >= sql.len() {
                self.at = i;
                return None;
            }
            if let Some(end) = self.dialect.skip_non_code(sql, i) {
                i = end;
                continue;
            }
            let c = sql[i];
            if c.is_ascii_whitespace() {
                i += 1;
            } else if c == b'@' && sql.get(i + 1) == Some(&b'@') {
                let start = i + 2;
                let mut end = start;
                while end < sql.len() && (word_byte(sql[end]) || sql[end] == b'.') {
                    end += 1;
                }
                i = end;
                break Token::SystemVariable(&sql[start..end]);
            } else if c == b'@' {
                i += 1;
                break Token::UserVariable;
            } else if c.is_ascii_alphabetic() || c == b'_' {
                let start = i;
                while i < sql.len() && word_byte(sql[i]) {
                    i += 1;
                }
                break Token::Word(&sql[start..i]);
            } else if c.is_ascii_digit() {
                while i < sql.len() && (word_byte(sql[i]) || sql[i] == b'.') {
                    i += 1;
                }
                break Token::Number;
            } else {
                i = self.dialect.next(sql, i);
                break Token::Punct(c);
            }
        };
        self.at = i;
        Some(token)
    }
}

fn is(token: Option<&Token<'_>>, word: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(word.as_bytes()))
}

/// The replayable variables one statement sets, or why it pins.
fn classify_one(statement: &[u8], dialect: &Dialect) -> Result<Vec<&'static str>, &'static str> {
    let mut tokens = Tokens::new(statement, dialect);
    let Some(first) = tokens.next() else {
        return Ok(Vec::new());
    };
    let Token::Word(leading) = first else {
        return Err("a statement the gateway cannot classify (an executable comment)");
    };
    let leading = leading.to_ascii_uppercase();
    let second = Tokens::new(statement, dialect).nth(1);
    let pins = match &leading[..] {
        b"LOCK" => Some("LOCK TABLES"),
        b"CALL" => Some("a procedure call"),
        b"PREPARE" | b"EXECUTE" | b"DEALLOCATE" => Some("a prepared statement at the backend"),
        b"HANDLER" => Some("an open HANDLER"),
        b"XA" => Some("an XA transaction"),
        b"IF" | b"CASE" | b"LOOP" | b"WHILE" | b"REPEAT" | b"FOR" => Some("a compound statement"),
        b"BEGIN" if is(second.as_ref(), "NOT") => Some("a compound statement"),
        _ => None,
    };
    if let Some(why) = pins {
        return Err(why);
    }
    // The two tokens before the current one, for `LAST_INSERT_ID(x)`.
    let (mut before, mut last) = (None, Some(first));
    for token in tokens {
        match token {
            Token::UserVariable => return Err("user variables"),
            Token::Word(w) if w.eq_ignore_ascii_case(b"TEMPORARY") => {
                return Err("a temporary table");
            }
            Token::Word(w) if w.eq_ignore_ascii_case(b"GET_LOCK") => return Err("GET_LOCK"),
            _ => {}
        }
        if let (Some(Token::Word(w)), Some(Token::Punct(b'('))) = (before, last)
            && w.eq_ignore_ascii_case(b"LAST_INSERT_ID")
            && token != Token::Punct(b')')
        {
            return Err("LAST_INSERT_ID(expr)");
        }
        (before, last) = (last, Some(token));
    }
    if leading == b"SET" {
        // A SET is short (its values' strings are skipped): listed whole.
        let tokens: Vec<_> = Tokens::new(statement, dialect).skip(1).collect();
        return set_variables(&tokens);
    }
    Ok(Vec::new())
}

/// `SET a = …, SESSION b = …, @@c = …`: the replayable variables set, or
/// why the statement pins. Assignments to GLOBAL variables do not touch
/// the session.
fn set_variables(tokens: &[Token<'_>]) -> Result<Vec<&'static str>, &'static str> {
    const NOT_REPLAYED: &str = "a session variable the gateway does not replay";
    let targets = set_targets(tokens).ok_or("a SET the gateway cannot read")?;
    let mut names = Vec::new();
    for name in targets {
        match &name.to_ascii_uppercase()[..] {
            b"NAMES" | b"CHARSET" | b"CHARACTER" => names.extend_from_slice(CHARSET_VARIABLES),
            b"TRANSACTION" => {
                return Err("SET TRANSACTION (the next transaction's characteristics)");
            }
            // The cookie carries it (and the backend reports it).
            b"AUTOCOMMIT" => {}
            _ => names.push(static_name(name).ok_or(NOT_REPLAYED)?),
        }
    }
    Ok(names)
}

/// The session variables a `SET` (its tokens after `SET`) assigns, as
/// written (`@@session.` and `@@local.` taken off; `NAMES`, `CHARSET` and
/// `CHARACTER` for `SET NAMES`, `SET CHARSET` and `SET CHARACTER SET`,
/// `TRANSACTION`, `PASSWORD`, `ROLE` for those statements), leaving out
/// GLOBAL variables and user variables; `None` if the scan cannot read it.
pub(super) fn set_targets<'a>(tokens: &[Token<'a>]) -> Option<Vec<&'a [u8]>> {
    let assignments = set_assignments(tokens)?;
    Some(
        assignments
            .into_iter()
            .map(|a| a.name)
            .filter(|name| !name.is_empty())
            .collect(),
    )
}

/// [`set_targets`], each with how it names its scope (a bare `@@name`,
/// which session-state tracking does not report), and user variables
/// (with an empty name).
pub(super) fn set_assignments<'a>(tokens: &[Token<'a>]) -> Option<Vec<Assignment<'a>>> {
    let mut names = Vec::new();
    let mut i = 0;
    loop {
        let mut global = false;
        let mut scope = Scope::Implied;
        if is(tokens.get(i), "GLOBAL") {
            global = true;
            i += 1;
        } else if is(tokens.get(i), "SESSION") || is(tokens.get(i), "LOCAL") {
            scope = Scope::Session;
            i += 1;
        }
        let name: &[u8] = match tokens.get(i)? {
            Token::Word(w) => w,
            Token::SystemVariable(v) => {
                let lower = v.to_ascii_lowercase();
                if let Some(rest) = lower.strip_prefix(b"global.") {
                    global = true;
                    &v[v.len() - rest.len()..]
                } else if let Some(rest) = lower
                    .strip_prefix(b"session.")
                    .or_else(|| lower.strip_prefix(b"local."))
                {
                    scope = Scope::Session;
                    &v[v.len() - rest.len()..]
                } else {
                    scope = Scope::BareAt;
                    v
                }
            }
            // `@x = …`: the variable's name follows, and is skipped below.
            Token::UserVariable => b"",
            _ => return None,
        };
        i += 1;
        if !global {
            names.push(Assignment { name, scope });
        }
        // On to the next assignment: a comma outside parentheses.
        let mut depth = 0usize;
        loop {
            match tokens.get(i) {
                None => return Some(names),
                Some(Token::Punct(b'(')) => depth += 1,
                Some(Token::Punct(b')')) => depth = depth.saturating_sub(1),
                Some(Token::Punct(b',')) if depth == 0 => {
                    i += 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn effect(sql: &str) -> Effect {
        classify(sql.as_bytes(), &Dialect::default())
    }

    fn pins(sql: &str) -> bool {
        effect(sql).pins.is_some()
    }

    #[test]
    fn plain_statements_neither_pin_nor_set() {
        for sql in [
            "SELECT 1",
            "select * from t where a = '@x' and b = \"TEMPORARY\" -- @y",
            "INSERT INTO t VALUES (1, 'GET_LOCK(1)')",
            "SELECT @@session.sql_mode, @@autocommit",
            "SELECT LAST_INSERT_ID()",
            "USE app",
            "BEGIN",
            "COMMIT",
            "SET GLOBAL max_connections = 10",
            "SET autocommit = 0",
            "",
        ] {
            assert_eq!(effect(sql), Effect::default(), "{sql}");
        }
    }

    #[test]
    fn backend_state_pins() {
        for sql in [
            "SET @x = 1",
            "SELECT @x",
            "SELECT a INTO @a FROM t",
            "SELECT 1; SET @x := 2",
            "CREATE TEMPORARY TABLE t (a INT)",
            "SELECT GET_LOCK('a', 1)",
            "PREPARE s FROM 'SELECT 1'",
            "EXECUTE s",
            "LOCK TABLES t WRITE",
            "CALL p()",
            "BEGIN NOT ATOMIC SELECT 1; END",
            "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "SET SESSION TRANSACTION READ ONLY",
            "SET tx_isolation = 'READ-COMMITTED'",
            "SET optimizer_switch = 'index_merge=off'",
            "/*!40101 SET NAMES utf8 */",
            "SELECT LAST_INSERT_ID(5)",
            "HANDLER t OPEN",
            "XA START 'x'",
        ] {
            assert!(pins(sql), "{sql} should pin");
        }
    }

    #[test]
    fn replayable_settings_are_named() {
        assert_eq!(
            effect("SET sql_mode = 'ANSI', @@session.time_zone = '+01:00', SESSION wait_timeout = (1 + 2)").sets,
            vec!["sql_mode", "time_zone", "wait_timeout"]
        );
        assert_eq!(
            effect("SET NAMES 'latin1' COLLATE 'latin1_bin'").sets,
            CHARSET_VARIABLES.to_vec()
        );
        assert_eq!(
            effect("set character set utf8mb4").sets,
            CHARSET_VARIABLES.to_vec()
        );
        assert_eq!(
            effect("SET GLOBAL sql_mode = '', @@local.sql_mode = 'ANSI'").sets,
            vec!["sql_mode"]
        );
    }

    #[test]
    fn replay_statements_use_only_safe_literals() {
        use mysql_async::Value;
        assert_eq!(
            literal(
                &Value::Bytes(b"STRICT_TRANS_TABLES,ANSI".to_vec()),
                Kind::Text
            )
            .as_deref(),
            Some("'STRICT_TRANS_TABLES,ANSI'")
        );
        assert_eq!(literal(&Value::Bytes(b"x'y".to_vec()), Kind::Text), None);
        assert_eq!(literal(&Value::Bytes(b"a\\b".to_vec()), Kind::Text), None);
        assert_eq!(literal(&Value::Bytes(b"12a".to_vec()), Kind::Number), None);
        assert_eq!(literal(&Value::NULL, Kind::Text).as_deref(), Some("NULL"));
        let replayed: BTreeMap<String, String> = [
            ("time_zone".to_string(), "'+01:00'".to_string()),
            ("collation_connection".into(), "'latin1_bin'".into()),
            ("character_set_connection".into(), "'latin1'".into()),
            ("evil; DROP TABLE t".into(), "1".into()),
        ]
        .into();
        assert_eq!(
            replay_statement(&replayed, false, 7).as_deref(),
            Some(
                "SET SESSION character_set_connection = 'latin1', collation_connection = 'latin1_bin', time_zone = '+01:00', autocommit = 0, last_insert_id = 7"
            )
        );
        assert_eq!(replay_statement(&BTreeMap::new(), true, 0), None);
    }

    #[test]
    fn a_cookie_only_yields_replayable_safe_variables() {
        let vitess = VitessSession {
            system_variables: [
                ("sql_mode".to_string(), "'ANSI'".to_string()),
                ("wait_timeout".into(), "28800".into()),
                ("time_zone".into(), "'+00:00'; DROP TABLE t".into()),
                ("lc_time_names".into(), "en_US; DROP TABLE t".into()),
                ("character_set_results".into(), "NULL".into()),
                ("optimizer_switch".into(), "'x'".into()),
            ]
            .into(),
            ..Default::default()
        };
        let replayed = replayed_from(&vitess);
        // Values are written anew as literals, never copied as text.
        assert_eq!(
            replayed.into_iter().collect::<Vec<_>>(),
            [
                ("character_set_results", "NULL"),
                ("lc_time_names", "'en_US; DROP TABLE t'"),
                ("sql_mode", "'ANSI'"),
                ("wait_timeout", "28800"),
            ]
            .map(|(n, v)| (n.to_string(), v.to_string()))
        );
    }
}
