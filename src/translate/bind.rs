//! Bind variables → SQL text, as Vitess does before a query reaches MySQL.
//!
//! Placeholders: each `?` is bound as `v1`, `v2`, … in order; `:name` binds
//! the variable `name` (`::name` likewise, for tuples). Placeholders inside
//! quotes, backtick identifiers and comments are left alone. Values become
//! literals that cannot escape their position whatever the `sql_mode`:
//! numbers are checked to be numbers, strings become `_utf8mb4 X'…'`, bytes
//! `X'…'`.

use std::collections::HashMap;
use std::fmt::Write;

use crate::api::pb::{BindVariable, Type, Value};
use crate::translate::errors::MysqlError;
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
            message: format!("Incorrect arguments to EXECUTE: {self}"),
        }
    }
}

/// Replaces placeholders in `sql` with the literals of `vars`. Without
/// variables the text is returned unchanged, so a literal `?` is harmless.
pub fn substitute(sql: &str, vars: &HashMap<String, BindVariable>) -> Result<String, BindError> {
    if vars.is_empty() {
        return Ok(sql.to_string());
    }
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len() + 16 * vars.len());
    let mut positional = 0usize;
    let mut copied = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        if let Some(end) = skip_non_code(bytes, i) {
            i = end;
            continue;
        }
        match bytes[i] {
            b'?' => {
                positional += 1;
                let name = format!("v{positional}");
                out.push_str(&sql[copied..i]);
                push_literal(&mut out, &name, vars)?;
                i += 1;
                copied = i;
            }
            b':' if i == 0 || bytes[i - 1] != b':' => {
                let start = if bytes.get(i + 1) == Some(&b':') {
                    i + 2
                } else {
                    i + 1
                };
                let end = ident_end(bytes, start);
                let is_name = end > start && !bytes[start].is_ascii_digit();
                if is_name && vars.contains_key(&sql[start..end]) {
                    out.push_str(&sql[copied..i]);
                    push_literal(&mut out, &sql[start..end], vars)?;
                    copied = end;
                    i = end;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&sql[copied..]);
    Ok(out)
}

/// Counts the `?` placeholders outside quotes and comments.
pub fn count_placeholders(sql: &str) -> usize {
    let bytes = sql.as_bytes();
    let (mut i, mut n) = (0, 0);
    while i < bytes.len() {
        match skip_non_code(bytes, i) {
            Some(end) => i = end,
            None => {
                n += usize::from(bytes[i] == b'?');
                i += 1;
            }
        }
    }
    n
}

fn push_literal(
    out: &mut String,
    name: &str,
    vars: &HashMap<String, BindVariable>,
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
        out.push('(');
        for (k, value) in var.values.iter().enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            push_value(out, value).map_err(|r| invalid(&r))?;
        }
        out.push(')');
        return Ok(());
    }
    let value = Value {
        r#type: var.r#type,
        value: var.value.clone(),
    };
    push_value(out, &value).map_err(|r| invalid(&r))
}

fn push_value(out: &mut String, value: &Value) -> Result<(), String> {
    let ty = Type::try_from(value.r#type).map_err(|_| format!("unknown type {}", value.r#type))?;
    let text = &value.value[..];
    match ty {
        Type::NullType => out.push_str("NULL"),
        Type::Tuple | Type::Expression | Type::Raw | Type::RowTuple => {
            return Err(format!("type {} cannot be bound here", ty.as_str_name()));
        }
        Type::Hexnum => push_checked(out, text, is_hexnum, "0x hex number")?,
        Type::Hexval => push_checked(out, text, is_hexval, "X'…' hex value")?,
        Type::Bitnum => push_checked(out, text, is_bitnum, "0b bit number")?,
        _ if is_numeric(ty) => push_checked(out, text, is_number, "number")?,
        _ if is_binary(ty) || ty == Type::Bit => push_hex(out, "X", text),
        _ => {
            if std::str::from_utf8(text).is_err() {
                return Err(format!("{} value is not valid UTF-8", ty.as_str_name()));
            }
            push_hex(out, "_utf8mb4 X", text)
        }
    }
    Ok(())
}

fn push_checked(
    out: &mut String,
    text: &[u8],
    valid: fn(&[u8]) -> bool,
    what: &str,
) -> Result<(), String> {
    if !valid(text) {
        return Err(format!("value is not a valid {what}"));
    }
    out.push_str(std::str::from_utf8(text).expect("validated as ASCII"));
    Ok(())
}

fn push_hex(out: &mut String, prefix: &str, bytes: &[u8]) {
    out.push_str(prefix);
    out.push('\'');
    for b in bytes {
        write!(out, "{b:02X}").expect("writing to a String cannot fail");
    }
    out.push('\'');
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

/// If a quoted string, quoted identifier or comment starts at `i`, the
/// index just past it; placeholders inside those are not placeholders.
fn skip_non_code(bytes: &[u8], i: usize) -> Option<usize> {
    match bytes[i] {
        q @ (b'\'' | b'"' | b'`') => Some(skip_quoted(bytes, i, q)),
        b'#' => Some(skip_line(bytes, i)),
        b'-' if bytes.get(i + 1) == Some(&b'-')
            && bytes.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
        {
            Some(skip_line(bytes, i))
        }
        b'/' if bytes.get(i + 1) == Some(&b'*') => Some(skip_block_comment(bytes, i)),
        _ => None,
    }
}

/// Index just past a quoted string or identifier starting at `start`.
/// Handles doubled quotes and, in strings, backslash escapes.
fn skip_quoted(bytes: &[u8], start: usize, quote: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\\' && quote != b'`' {
            i += 2;
        } else if c == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    bytes.len()
}

fn skip_line(bytes: &[u8], start: usize) -> usize {
    bytes[start..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(bytes.len(), |p| start + p + 1)
}

fn skip_block_comment(bytes: &[u8], start: usize) -> usize {
    bytes[start + 2..]
        .windows(2)
        .position(|w| w == b"*/")
        .map_or(bytes.len(), |p| start + 2 + p + 2)
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
        let sql = substitute("select ?, '?', `a?`, ? /* ? */ -- ?\n, :name, @x := 1", &v).unwrap();
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
        assert_eq!(substitute("x in ::ids", &v).unwrap(), "x in (1, X'00FF')");
    }

    #[test]
    fn injection_is_impossible() {
        let v = vars(&[("v1", var(Type::Int64, b"1 OR 1=1"))]);
        assert!(matches!(
            substitute("select ?", &v),
            Err(BindError::Invalid { .. })
        ));
        let v = vars(&[("v1", var(Type::Varchar, b"'; DROP TABLE t; --"))]);
        let sql = substitute("select ?", &v).unwrap();
        assert!(!sql.contains('\'') || sql.starts_with("select _utf8mb4 X'"));
        assert!(!sql.contains("DROP"));
    }

    #[test]
    fn missing_variable_is_an_error() {
        let v = vars(&[("v1", var(Type::Int64, b"1"))]);
        assert_eq!(
            substitute("select ?, ?", &v),
            Err(BindError::Missing("v2".into()))
        );
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

    #[test]
    fn counts_placeholders() {
        assert_eq!(count_placeholders("select ?, '?', \"?\", ? # ?"), 2);
    }
}
