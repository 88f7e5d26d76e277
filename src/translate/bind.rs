//! Bind variables → SQL text, as Vitess does before a query reaches MySQL.
//!
//! Placeholders: each `?` is bound as `v1`, `v2`, … in order; `:name` binds
//! the variable `name` (`::name` likewise, for tuples). Placeholders inside
//! quotes, backtick identifiers and comments are left alone. Values become
//! literals that cannot escape their position: numbers are checked to be
//! numbers, strings become hex in the session's character set
//! (`_gbk X'…'`), bytes `X'…'`. Large values (from [`ESCAPED_MIN`] bytes)
//! would double as hex, past the backend's `max_allowed_packet`; where the
//! lexer allows it they become escaped string literals instead
//! (`_utf8mb4'…'`, `_binary'…'`), about their own size. SQL text is bytes,
//! scanned as the server's lexer reads it (see [`Dialect`]).

use std::borrow::Cow;
use std::collections::HashMap;

use crate::api::pb::{BindVariable, Type, Value};
use crate::mysql::MysqlError;
use crate::translate::sql_text::{Charset, Dialect};
use crate::translate::types::{is_binary, is_numeric};

/// Why a query and its bind variables could not be combined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BindError {
    #[error("missing bind variable {0:?}")]
    Missing(String),
    #[error("bind variable {name:?}: {reason}")]
    Invalid { name: String, reason: String },
}

impl BindError {
    /// MySQL's own error for bad statement arguments (1210, HY000).
    pub fn to_mysql(&self) -> MysqlError {
        MysqlError {
            code: 1210,
            state: "HY000".into(),
            message: format!("Incorrect arguments to EXECUTE: {self}").into(),
        }
    }
}

/// Replaces placeholders in `sql` with the literals of `vars`. Without
/// variables the text is returned unchanged, so a literal `?` is harmless.
/// `sql` is scanned as the server will read it (`dialect`: the session's
/// character set and `sql_mode`), and string values are introduced as
/// `charset` (the session's `character_set_client`, the character set a
/// server reads string parameters in).
pub fn substitute<'a>(
    sql: &'a [u8],
    vars: &HashMap<String, BindVariable>,
    dialect: &Dialect,
    charset: &str,
) -> Result<Cow<'a, [u8]>, BindError> {
    let strings = StringLiterals::new(charset, dialect);
    substitute_with(sql, vars, dialect, &strings, |_| false).map(|(sql, _)| sql)
}

/// [`substitute`], except that each `?` whose variable `keep` accepts
/// stays a `?` — a parameter of a server-side prepared statement — and
/// its variable is returned, in placeholder order. The text is for the
/// gateway's driver to prepare, which first scans it for `:name`
/// parameters as if `\` always escaped: so under `NO_BACKSLASH_ESCAPES`
/// no value becomes an escaped literal (`'a\'` would end elsewhere for
/// it), only hex.
pub fn substitute_keeping<'a, 'v>(
    sql: &'a [u8],
    vars: &'v HashMap<String, BindVariable>,
    dialect: &Dialect,
    charset: &str,
    keep: impl Fn(&BindVariable) -> bool,
) -> Result<(Cow<'a, [u8]>, Vec<&'v BindVariable>), BindError> {
    let mut strings = StringLiterals::new(charset, dialect);
    strings.escaped = strings.escaped.filter(|e| matches!(e, Escaping::Backslash));
    substitute_with(sql, vars, dialect, &strings, keep)
}

fn substitute_with<'a, 'v>(
    sql: &'a [u8],
    vars: &'v HashMap<String, BindVariable>,
    dialect: &Dialect,
    strings: &StringLiterals,
    keep: impl Fn(&BindVariable) -> bool,
) -> Result<(Cow<'a, [u8]>, Vec<&'v BindVariable>), BindError> {
    let mut kept = Vec::new();
    if vars.is_empty() {
        return Ok((Cow::Borrowed(sql), kept));
    }
    let mut out = Vec::with_capacity(sql.len() + 16 * vars.len());
    let mut positional = 0usize;
    let mut copied = 0usize;
    let mut i = 0usize;
    // Inside `LIMIT a [, b]` / `LIMIT a OFFSET b`, which takes integers
    // only: a server converts a parameter there to one.
    let mut in_limit = false;
    while i < sql.len() {
        if let Some(end) = dialect.skip_non_code(sql, i) {
            i = end;
            continue;
        }
        match sql[i] {
            b'?' => {
                positional += 1;
                let name = format!("v{positional}");
                out.extend_from_slice(&sql[copied..i]);
                let var = vars.get(&name);
                match var.and_then(|v| limit_count(v, in_limit)) {
                    Some(count) => out.extend_from_slice(count.to_string().as_bytes()),
                    None => match var.filter(|v| keep(v)) {
                        Some(var) => {
                            out.push(b'?');
                            kept.push(var);
                        }
                        None => push_literal(&mut out, &name, vars, strings)?,
                    },
                }
                i += 1;
                copied = i;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let end = ident_end(sql, i);
                let word = &sql[i..end];
                in_limit =
                    word.eq_ignore_ascii_case(b"LIMIT") || word.eq_ignore_ascii_case(b"OFFSET");
                i = end;
            }
            c if c.is_ascii_whitespace() || c.is_ascii_digit() || c == b',' => i += 1,
            b':' if i == 0 || sql[i - 1] != b':' => {
                let start = if sql.get(i + 1) == Some(&b':') {
                    i + 2
                } else {
                    i + 1
                };
                let end = ident_end(sql, start);
                let is_name = end > start && !sql[start].is_ascii_digit();
                // ASCII by `ident_end`.
                let name = std::str::from_utf8(&sql[start..end]).unwrap_or_default();
                if is_name && vars.contains_key(name) {
                    out.extend_from_slice(&sql[copied..i]);
                    push_literal(&mut out, name, vars, strings)?;
                    copied = end;
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => {
                in_limit = false;
                i = dialect.next(sql, i);
            }
        }
    }
    out.extend_from_slice(&sql[copied..]);
    Ok((Cow::Owned(out), kept))
}

/// A parameter of a `LIMIT` clause as the integer a server makes of it
/// (a DOUBLE 2e4 is `LIMIT 20000` there, where the literal `2e4` would be
/// a syntax error); `None` outside one, or for a value that is not a
/// whole number (left as it is, for the server to refuse).
fn limit_count(var: &BindVariable, in_limit: bool) -> Option<u64> {
    if !in_limit || var.r#type == Type::Tuple as i32 {
        return None;
    }
    let text = std::str::from_utf8(&var.value).ok()?.trim();
    if let Ok(n) = text.parse::<u64>() {
        return Some(n);
    }
    let x: f64 = text.parse().ok()?;
    (x.fract() == 0.0 && (0.0..=u64::MAX as f64).contains(&x)).then_some(x as u64)
}

/// Values from this size on are written as escaped string literals where
/// the dialect allows it (see `StringLiterals::escaped`), not as hex.
pub const ESCAPED_MIN: usize = 64 << 10;

/// How string and byte values become literals: hex with an introducer
/// naming the character set the server reads string parameters in
/// (`_gbk X'…'`), or for large values an escaped string literal.
struct StringLiterals {
    introducer: String,
    /// The character set is UTF-8, whose validity can be checked here.
    utf8: bool,
    /// Large values may be escaped string literals: how, if so.
    escaped: Option<Escaping>,
}

/// How the server's lexer reads an escaped string literal.
#[derive(Clone, Copy)]
enum Escaping {
    /// `\` escapes (the default `sql_mode`): `\`, `'` and NUL are
    /// escaped with `\`.
    Backslash,
    /// `NO_BACKSLASH_ESCAPES`: `\` is a plain byte, `'` is doubled.
    QuoteDoubling,
}

impl StringLiterals {
    /// A name that is not a plain identifier (it comes from the backend,
    /// but is spliced into SQL) falls back to utf8mb4.
    fn new(charset: &str, dialect: &Dialect) -> Self {
        let plain = !charset.is_empty()
            && charset
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_');
        let charset = if plain { charset } else { "utf8mb4" };
        Self {
            introducer: format!("_{charset} "),
            utf8: charset.to_ascii_lowercase().starts_with("utf8"),
            escaped: Self::escaping(dialect),
        }
    }

    /// Escaped literals only where every byte of the value is read as
    /// one character up to the next quote or backslash: in character sets
    /// whose multibyte characters never hold an ASCII byte (not big5, gbk,
    /// gb18030, sjis/cp932, where `0xBF5C` would swallow an escaping
    /// backslash). The lexer reads a literal in the client's character
    /// set whatever its introducer, so this holds for `_binary` too.
    fn escaping(dialect: &Dialect) -> Option<Escaping> {
        if dialect.charset != Charset::AsciiSafe {
            return None;
        }
        Some(if dialect.backslash_escapes {
            Escaping::Backslash
        } else {
            Escaping::QuoteDoubling
        })
    }

    /// A server copies a string parameter's bytes without checking them
    /// (an invalid one still fits a VARBINARY column), while an introducer
    /// makes it check them: bytes that are not UTF-8 in a UTF-8 session
    /// go as a binary string, as the server would store them.
    fn push(&self, out: &mut Vec<u8>, text: &[u8]) {
        if self.utf8 && std::str::from_utf8(text).is_err() {
            self.push_bytes(out, text);
        } else if let Some(escaping) = self.large(text) {
            push_escaped(out, &self.introducer, text, escaping);
        } else {
            push_hex(out, &self.introducer, text);
        }
    }

    /// Bytes: `X'…'`, or `_binary'…'` when large.
    fn push_bytes(&self, out: &mut Vec<u8>, bytes: &[u8]) {
        match self.large(bytes) {
            Some(escaping) => push_escaped(out, "_binary", bytes, escaping),
            None => push_hex(out, "", bytes),
        }
    }

    fn large(&self, value: &[u8]) -> Option<Escaping> {
        self.escaped.filter(|_| value.len() >= ESCAPED_MIN)
    }
}

/// `prefix'…'` with `bytes` escaped as `escaping` says; the runs between
/// bytes that need escaping are copied whole.
fn push_escaped(out: &mut Vec<u8>, prefix: &str, bytes: &[u8], escaping: Escaping) {
    out.reserve(prefix.len() + bytes.len() + bytes.len() / 64 + 2);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b'\'');
    let mut rest = bytes;
    loop {
        let special = match escaping {
            Escaping::Backslash => memchr::memchr3(b'\\', b'\'', 0, rest),
            Escaping::QuoteDoubling => memchr::memchr(b'\'', rest),
        };
        let Some(at) = special else {
            out.extend_from_slice(rest);
            break;
        };
        out.extend_from_slice(&rest[..at]);
        match (escaping, rest[at]) {
            (Escaping::Backslash, 0) => out.extend_from_slice(b"\\0"),
            (Escaping::Backslash, c) => out.extend_from_slice(&[b'\\', c]),
            (Escaping::QuoteDoubling, _) => out.extend_from_slice(b"''"),
        }
        rest = &rest[at + 1..];
    }
    out.push(b'\'');
}

/// Counts the `?` placeholders outside quotes and comments.
pub fn count_placeholders(sql: &[u8], dialect: &Dialect) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < sql.len() {
        match dialect.skip_non_code(sql, i) {
            Some(end) => i = end,
            None => {
                n += usize::from(sql[i] == b'?');
                i = dialect.next(sql, i);
            }
        }
    }
    n
}

fn push_literal(
    out: &mut Vec<u8>,
    name: &str,
    vars: &HashMap<String, BindVariable>,
    strings: &StringLiterals,
) -> Result<(), BindError> {
    let var = vars
        .get(name)
        .ok_or_else(|| BindError::Missing(name.to_string()))?;
    let invalid = |reason: &str| BindError::Invalid {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if var.r#type == Type::Tuple as i32 {
        if var.values.is_empty() {
            return Err(invalid("empty tuple"));
        }
        out.push(b'(');
        for (k, value) in var.values.iter().enumerate() {
            if k > 0 {
                out.extend_from_slice(b", ");
            }
            push_value(out, value, strings).map_err(|r| invalid(&r))?;
        }
        out.push(b')');
        return Ok(());
    }
    let value = Value {
        r#type: var.r#type,
        value: var.value.clone(),
    };
    push_value(out, &value, strings).map_err(|r| invalid(&r))
}

fn push_value(out: &mut Vec<u8>, value: &Value, strings: &StringLiterals) -> Result<(), String> {
    let ty = Type::try_from(value.r#type).map_err(|_| format!("unknown type {}", value.r#type))?;
    let text = &value.value[..];
    match ty {
        Type::NullType => out.extend_from_slice(b"NULL"),
        Type::Tuple | Type::Expression | Type::Raw | Type::RowTuple => {
            return Err(format!("type {} cannot be bound here", ty.as_str_name()));
        }
        Type::Hexnum => push_checked(out, text, is_hexnum, "0x hex number")?,
        Type::Hexval => push_checked(out, text, is_hexval, "X'…' hex value")?,
        Type::Bitnum => push_checked(out, text, is_bitnum, "0b bit number")?,
        _ if is_numeric(ty) => push_checked(out, text, is_number, "number")?,
        _ if is_binary(ty) || ty == Type::Bit => strings.push_bytes(out, text),
        Type::Date | Type::Datetime | Type::Timestamp | Type::Time
            if let Some(keyword) = temporal_keyword(ty, text) =>
        {
            // `DATE'…'`, `TIMESTAMP'…'`, `TIME'…'`: typed as the server
            // types a temporal parameter (`SELECT ?` is a DATETIME column,
            // comparisons are temporal). Only plain valid values take this
            // form (digits and separators, nothing to quote); others stay
            // strings, which the server reads as it would.
            out.extend_from_slice(keyword);
            out.push(b'\'');
            out.extend_from_slice(text);
            out.push(b'\'');
        }
        // Text is the client's bytes in its character set: never checked
        // or converted here, the server reads it as it would a parameter.
        _ => strings.push(out, text),
    }
    Ok(())
}

/// The literal keyword for a temporal value written as MySQL writes it
/// (`YYYY-MM-DD`, `YYYY-MM-DD hh:mm:ss[.ffffff]`, `[-]h:mm:ss[.ffffff]`)
/// with a date that exists (no zero or invalid dates, which some
/// `sql_mode`s refuse in a literal but not in a parameter).
fn temporal_keyword(ty: Type, text: &[u8]) -> Option<&'static [u8]> {
    let text = std::str::from_utf8(text).ok()?;
    match ty {
        Type::Date => valid_date(text).then_some(&b"DATE"[..]),
        Type::Datetime | Type::Timestamp => {
            let (date, time) = text.split_once(' ')?;
            (valid_date(date) && valid_clock(time, 23)).then_some(&b"TIMESTAMP"[..])
        }
        Type::Time => {
            valid_clock(text.strip_prefix('-').unwrap_or(text), 838).then_some(&b"TIME"[..])
        }
        _ => None,
    }
}

fn digits(s: &str, len: std::ops::RangeInclusive<usize>) -> Option<u32> {
    if !len.contains(&s.len()) || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn valid_date(s: &str) -> bool {
    let mut parts = s.split('-');
    let (Some(y), Some(m), Some(d), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let (Some(y), Some(m), Some(d)) = (digits(y, 4..=4), digits(m, 2..=2), digits(d, 2..=2)) else {
        return false;
    };
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    y >= 1 && (1..=days).contains(&d)
}

/// `h:mm:ss[.ffffff]` with hours up to `max_hours`.
fn valid_clock(s: &str, max_hours: u32) -> bool {
    let (clock, fraction) = match s.split_once('.') {
        Some((c, f)) => (c, Some(f)),
        None => (s, None),
    };
    if fraction.is_some_and(|f| digits(f, 1..=6).is_none()) {
        return false;
    }
    let mut parts = clock.split(':');
    let (Some(h), Some(m), Some(sec), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    matches!(
        (digits(h, 1..=3), digits(m, 2..=2), digits(sec, 2..=2)),
        (Some(h), Some(m), Some(sec)) if h <= max_hours && m <= 59 && sec <= 59
    )
}

fn push_checked(
    out: &mut Vec<u8>,
    text: &[u8],
    valid: fn(&[u8]) -> bool,
    what: &str,
) -> Result<(), String> {
    if !valid(text) {
        return Err(format!("value is not a valid {what}"));
    }
    out.extend_from_slice(text);
    Ok(())
}

/// `prefixX'…'` (`prefix` is empty or an introducer and a space).
fn push_hex(out: &mut Vec<u8>, prefix: &str, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(prefix.len() + 3 + 2 * bytes.len());
    out.extend_from_slice(prefix.as_bytes());
    out.extend_from_slice(b"X'");
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 15)]);
    }
    out.push(b'\'');
}

fn is_number(s: &[u8]) -> bool {
    let s = s
        .strip_prefix(b"-")
        .or_else(|| s.strip_prefix(b"+"))
        .unwrap_or(s);
    let (mantissa, exponent) = match s.iter().position(|&c| c == b'e' || c == b'E') {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let mut parts = mantissa.splitn(2, |&c| c == b'.');
    let int = parts.next().unwrap_or_default();
    let frac = parts.next().unwrap_or_default();
    let digits = |p: &[u8]| p.iter().all(u8::is_ascii_digit);
    let mantissa_ok = digits(int) && digits(frac) && !(int.is_empty() && frac.is_empty());
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e
            .strip_prefix(b"-")
            .or_else(|| e.strip_prefix(b"+"))
            .unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

fn is_hexnum(s: &[u8]) -> bool {
    (s.starts_with(b"0x") || s.starts_with(b"0X"))
        && s.len() > 2
        && s[2..].iter().all(u8::is_ascii_hexdigit)
}

fn is_hexval(s: &[u8]) -> bool {
    s.len() >= 3
        && (s[0] == b'x' || s[0] == b'X')
        && s[1] == b'\''
        && s[s.len() - 1] == b'\''
        && s[2..s.len() - 1].iter().all(u8::is_ascii_hexdigit)
}

fn is_bitnum(s: &[u8]) -> bool {
    (s.starts_with(b"0b") || s.starts_with(b"0B"))
        && s.len() > 2
        && s[2..].iter().all(|c| *c == b'0' || *c == b'1')
}

fn ident_end(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
        .map_or(bytes.len(), |p| start + p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn var(ty: Type, v: &[u8]) -> BindVariable {
        BindVariable {
            r#type: ty as i32,
            value: Bytes::copy_from_slice(v),
            values: vec![],
        }
    }

    /// `substitute` in utf8mb4 with the default `sql_mode`, as text.
    fn sub(sql: &str, vars: &HashMap<String, BindVariable>) -> Result<String, BindError> {
        substitute(sql.as_bytes(), vars, &Dialect::default(), "utf8mb4")
            .map(|b| String::from_utf8(b.into_owned()).unwrap())
    }

    #[test]
    fn limit_parameters_are_the_integers_a_server_makes_of_them() {
        let v = vars(&[
            ("v1", var(Type::Float64, b"2e4")),
            ("v2", var(Type::Float64, b"1e1")),
            ("v3", var(Type::Float64, b"2e4")),
        ]);
        assert_eq!(
            sub("SELECT ? FROM t LIMIT ?, ?", &v).unwrap(),
            "SELECT 2e4 FROM t LIMIT 10, 20000"
        );
        let v = vars(&[
            ("v1", var(Type::Varchar, b"5")),
            ("v2", var(Type::Float64, b"2.5")),
        ]);
        assert_eq!(
            sub("SELECT 1 LIMIT ? OFFSET ?", &v).unwrap(),
            "SELECT 1 LIMIT 5 OFFSET 2.5"
        );
        let v = vars(&[("v1", var(Type::Float64, b"3e0"))]);
        assert_eq!(sub("SELECT (?)", &v).unwrap(), "SELECT (3e0)");
    }

    #[test]
    fn placeholders_as_the_server_lexes_them() {
        use crate::translate::sql_text::Charset;
        let v = vars(&[("v1", var(Type::Varchar, b"\xe5\x81"))]);
        // 0xE55C is one gbk character: the string ends at the quote after
        // it, and the `?` is a placeholder; the value keeps its bytes.
        let gbk = Dialect {
            charset: Charset::Gbk,
            ..Dialect::default()
        };
        let sql = substitute(b"SELECT '\xe5\\', ?", &v, &gbk, "gbk").unwrap();
        assert_eq!(&sql[..], &b"SELECT '\xe5\\', _gbk X'E581'"[..]);
        // Bytes that are not UTF-8 pass through, text or value.
        let latin1 = substitute(b"SELECT 'caf\xe9', ?", &v, &Dialect::default(), "latin1");
        assert_eq!(
            &latin1.unwrap()[..],
            &b"SELECT 'caf\xe9', _latin1 X'E581'"[..]
        );
        // A character set name that is not an identifier is never spliced;
        // bytes that are not UTF-8 in a UTF-8 session go as a binary string.
        let odd = substitute(
            b"?, ?",
            &vars(&[
                ("v1", var(Type::Varchar, b"ok")),
                ("v2", var(Type::Varchar, b"\xff")),
            ]),
            &Dialect::default(),
            "x' OR 1",
        );
        assert_eq!(&odd.unwrap()[..], &b"_utf8mb4 X'6F6B', X'FF'"[..]);
    }

    fn vars(list: &[(&str, BindVariable)]) -> HashMap<String, BindVariable> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn positional_and_named() {
        let v = vars(&[
            ("v1", var(Type::Int64, b"42")),
            ("v2", var(Type::Varchar, b"it's")),
            ("name", var(Type::NullType, b"")),
        ]);
        let sql = sub("select ?, '?', `a?`, ? /* ? */ -- ?\n, :name, @x := 1", &v).unwrap();
        assert_eq!(
            sql,
            "select 42, '?', `a?`, _utf8mb4 X'69742773' /* ? */ -- ?\n, NULL, @x := 1"
        );
    }

    #[test]
    fn tuples_and_bytes() {
        let tuple = BindVariable {
            r#type: Type::Tuple as i32,
            value: Bytes::new(),
            values: vec![
                Value {
                    r#type: Type::Int64 as i32,
                    value: Bytes::from_static(b"1"),
                },
                Value {
                    r#type: Type::Varbinary as i32,
                    value: Bytes::from_static(&[0, 255]),
                },
            ],
        };
        let v = vars(&[("ids", tuple)]);
        assert_eq!(sub("x in ::ids", &v).unwrap(), "x in (1, X'00FF')");
    }

    #[test]
    fn injection_is_impossible() {
        let v = vars(&[("v1", var(Type::Int64, b"1 OR 1=1"))]);
        assert!(matches!(
            sub("select ?", &v),
            Err(BindError::Invalid { .. })
        ));
        let v = vars(&[("v1", var(Type::Varchar, b"'; DROP TABLE t; --"))]);
        let sql = sub("select ?", &v).unwrap();
        assert!(!sql.contains('\'') || sql.starts_with("select _utf8mb4 X'"));
        assert!(!sql.contains("DROP"));
    }

    #[test]
    fn missing_variable_is_an_error() {
        let v = vars(&[("v1", var(Type::Int64, b"1"))]);
        assert_eq!(sub("select ?, ?", &v), Err(BindError::Missing("v2".into())));
    }

    #[test]
    fn numbers() {
        for ok in [
            "1",
            "-1",
            "+1.5",
            ".5",
            "1.",
            "1e10",
            "1.5E-3",
            "18446744073709551615",
        ] {
            assert!(is_number(ok.as_bytes()), "{ok}");
        }
        for bad in ["", "-", ".", "1e", "1x", "0x10", "1 ", "e5"] {
            assert!(!is_number(bad.as_bytes()), "{bad}");
        }
    }

    /// A string literal read back as the server's lexer reads it: where
    /// [`Dialect`] says it ends, and the bytes it stands for.
    fn unescape(literal: &[u8], dialect: &Dialect) -> (usize, Vec<u8>) {
        assert_eq!(literal[0], b'\'');
        let end = dialect.skip_non_code(literal, 0).unwrap();
        let inner = &literal[1..end - 1];
        let mut out = Vec::with_capacity(inner.len());
        let mut i = 0;
        while i < inner.len() {
            match (inner[i], dialect.backslash_escapes) {
                (b'\\', true) => {
                    out.push(if inner[i + 1] == b'0' {
                        0
                    } else {
                        inner[i + 1]
                    });
                    i += 2;
                }
                (b'\'', _) => {
                    assert_eq!(inner[i + 1], b'\'', "a lone quote inside");
                    out.push(b'\'');
                    i += 2;
                }
                (c, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        (end, out)
    }

    /// Large values are escaped literals, about their own size, that end
    /// exactly where the lexer ends them and stand for the value's bytes,
    /// in both quoting modes; in big5/gbk/gb18030/sjis they stay hex.
    #[test]
    fn large_values_are_escaped_literals_where_the_lexer_allows() {
        use crate::translate::sql_text::Charset;
        let mut value: Vec<u8> = (0..=255u8).cycle().take(ESCAPED_MIN + 3).collect();
        value.extend_from_slice(b"\\' OR 1=1 -- \\");
        let nbe = Dialect {
            backslash_escapes: false,
            ..Dialect::default()
        };
        for (dialect, ty, prefix) in [
            (Dialect::default(), Type::Varbinary, &b"SELECT _binary'"[..]),
            (nbe, Type::Blob, b"SELECT _binary'"),
            // Not UTF-8: a binary string, as before.
            (Dialect::default(), Type::Varchar, b"SELECT _binary'"),
        ] {
            let v = vars(&[("v1", var(ty, &value))]);
            let sql = substitute(b"SELECT ?", &v, &dialect, "utf8mb4").unwrap();
            assert!(sql.starts_with(prefix), "{:?}", &sql[..20]);
            assert!(
                sql.len() < value.len() + value.len() / 32 + 32,
                "not inflated"
            );
            let at = prefix.len() - 1;
            let (end, bytes) = unescape(&sql[at..], &dialect);
            assert_eq!(at + end, sql.len(), "the literal ends at its end");
            assert!(bytes == value, "the same bytes");
        }
        // Text keeps its character set.
        let text: Vec<u8> = "é'\\ü".repeat(ESCAPED_MIN).into_bytes();
        let v = vars(&[("v1", var(Type::Varchar, &text))]);
        let sql = substitute(b"?", &v, &Dialect::default(), "latin1").unwrap();
        assert!(sql.starts_with(b"_latin1 '"));
        let (end, bytes) = unescape(&sql[8..], &Dialect::default());
        assert_eq!((8 + end, bytes), (sql.len(), text.clone()));
        // Character sets with ASCII trail bytes: hex, in both modes.
        for charset in [Charset::Gbk, Charset::Big5, Charset::Sjis, Charset::Gb18030] {
            for backslash_escapes in [true, false] {
                let dialect = Dialect {
                    charset,
                    backslash_escapes,
                    ..Dialect::default()
                };
                let v = vars(&[
                    ("v1", var(Type::Varchar, &value)),
                    ("v2", var(Type::Blob, &value)),
                ]);
                let sql = substitute(b"?, ?", &v, &dialect, "gbk").unwrap();
                let hex = 2 * value.len() + 3;
                assert_eq!(sql.len(), "_gbk ".len() + hex + ", ".len() + hex);
                assert!(sql.starts_with(b"_gbk X'") && sql.ends_with(b"5C'"));
            }
        }
        // Small values are hex whatever the dialect.
        let v = vars(&[("v1", var(Type::Varbinary, b"'\\"))]);
        assert_eq!(sub("?", &v).unwrap(), "X'275C'");
    }

    #[test]
    fn counts_placeholders() {
        assert_eq!(
            count_placeholders(b"select ?, '?', \"?\", ? # ?", &Dialect::default()),
            2
        );
    }
    /// Temporal values become typed literals only when plainly valid;
    /// anything else stays a string, read as the server would read it.
    #[test]
    fn temporal_literals_only_for_valid_values() {
        use super::temporal_keyword as kw;
        assert_eq!(kw(Type::Date, b"2024-02-29"), Some(&b"DATE"[..]));
        assert_eq!(kw(Type::Date, b"2023-02-29"), None, "not a leap year");
        assert_eq!(kw(Type::Date, b"0000-00-00"), None, "zero date");
        assert_eq!(kw(Type::Date, b"2024-13-01"), None);
        assert_eq!(kw(Type::Date, b"2024-1-01"), None);
        assert_eq!(
            kw(Type::Datetime, b"2024-02-29 23:59:59.123456"),
            Some(&b"TIMESTAMP"[..])
        );
        assert_eq!(kw(Type::Datetime, b"2024-02-29 24:00:00"), None);
        assert_eq!(kw(Type::Datetime, b"2024-02-29 00:00:00.1234567"), None);
        assert_eq!(kw(Type::Datetime, b"2024-02-29T00:00:00"), None);
        assert_eq!(kw(Type::Datetime, b"2024-02-29 00:00:00' OR 1"), None);
        assert_eq!(kw(Type::Time, b"-838:59:59"), Some(&b"TIME"[..]));
        assert_eq!(kw(Type::Time, b"838:59:59.000007"), Some(&b"TIME"[..]));
        assert_eq!(kw(Type::Time, b"839:00:00"), None);
        assert_eq!(kw(Type::Time, b"1:60:00"), None);
        assert_eq!(kw(Type::Varchar, b"2024-02-29"), None);
    }
}
