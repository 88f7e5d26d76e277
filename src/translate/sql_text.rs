//! SQL text as the server's lexer reads it: where quoted strings, quoted
//! identifiers and comments begin and end.
//!
//! Both roles scan SQL (the sidecar for multi-statements, the gateway for
//! placeholders and statement classes), and a scan that disagrees with the
//! server's is an injection: the server would run as code what the scan
//! took for the inside of a string. Two things decide where a string
//! ends, so both are part of the [`Dialect`]:
//!
//! - the client's character set: in big5, gbk, gb18030 and sjis/cp932 a
//!   two-byte character may end in `\` (0x5C) or `` ` `` (0x60), which is
//!   then not an escape nor a quote (the classic `0xBF5C` attack);
//! - the `sql_mode`: `NO_BACKSLASH_ESCAPES` makes `\` an ordinary
//!   character in strings, and `ANSI_QUOTES` makes `"` quote identifiers,
//!   in which `\` never escapes.
//!
//! Text is bytes throughout: SQL is not UTF-8 in most of these character
//! sets, and nothing here may alter it.

/// How bytes group into characters, for the character sets where a
/// multibyte character can contain an ASCII byte. In every other client
/// character set MySQL allows (latin1, utf8mb3/utf8mb4, ujis, euckr, …)
/// the bytes of a multibyte character are all ≥ 0x80, so a byte scan is
/// exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Charset {
    #[default]
    AsciiSafe,
    Big5,
    Gbk,
    Gb18030,
    /// sjis and cp932.
    Sjis,
}

impl Charset {
    /// From a character set name (`@@character_set_client`, or a
    /// collation's character set), case-insensitive.
    pub fn from_name(name: &str) -> Self {
        match name.to_ascii_lowercase().as_str() {
            "big5" => Self::Big5,
            "gbk" => Self::Gbk,
            "gb18030" => Self::Gb18030,
            "sjis" | "cp932" => Self::Sjis,
            _ => Self::AsciiSafe,
        }
    }

    /// From a collation id (a handshake's), through mysql_common's table.
    pub fn from_collation(id: u16) -> Self {
        use mysql_common::collations::{Collation, CollationId};
        let id = CollationId::from(id);
        if id == CollationId::UNKNOWN_COLLATION_ID {
            return Self::AsciiSafe;
        }
        Self::from_name(Collation::from(id).charset())
    }

    /// The length of the character at `bytes[i]` (`i` in bounds), as the
    /// server's `my_ismbchar` decides: a lead byte followed by a valid
    /// trail byte is one character; anything else is one byte.
    pub fn char_len(self, bytes: &[u8], i: usize) -> usize {
        let lead = bytes[i];
        let at = |k: usize| bytes.get(i + k).copied();
        let two = |lead_ok: bool, trail_ok: fn(u8) -> bool| {
            if lead_ok && at(1).is_some_and(trail_ok) {
                2
            } else {
                1
            }
        };
        match self {
            Self::AsciiSafe => 1,
            Self::Big5 => two((0xA1..=0xF9).contains(&lead), |t| {
                (0x40..=0x7E).contains(&t) || (0xA1..=0xFE).contains(&t)
            }),
            Self::Gbk => two((0x81..=0xFE).contains(&lead), |t| {
                (0x40..=0x7E).contains(&t) || (0x80..=0xFE).contains(&t)
            }),
            Self::Sjis => two(
                (0x81..=0x9F).contains(&lead) || (0xE0..=0xFC).contains(&lead),
                |t| (0x40..=0x7E).contains(&t) || (0x80..=0xFC).contains(&t),
            ),
            Self::Gb18030 => {
                let digit = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_digit());
                let high = |b: Option<u8>| b.is_some_and(|b| (0x81..=0xFE).contains(&b));
                if !(0x81..=0xFE).contains(&lead) {
                    1
                } else if digit(at(1)) && high(at(2)) && digit(at(3)) {
                    4
                } else {
                    two(true, |t| {
                        (0x40..=0x7E).contains(&t) || (0x80..=0xFE).contains(&t)
                    })
                }
            }
        }
    }
}

/// What the server's lexer depends on: the client character set and the
/// quoting rules of the session's `sql_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialect {
    pub charset: Charset,
    /// `\` escapes in strings (off under `NO_BACKSLASH_ESCAPES`).
    pub backslash_escapes: bool,
    /// `"` quotes identifiers (`ANSI_QUOTES`, also in `ANSI`).
    pub ansi_quotes: bool,
}

impl Default for Dialect {
    fn default() -> Self {
        Self {
            charset: Charset::AsciiSafe,
            backslash_escapes: true,
            ansi_quotes: false,
        }
    }
}

impl Dialect {
    /// From `@@character_set_client` and `@@sql_mode` (either may be
    /// quoted, as a session's system variables hold them).
    pub fn from_variables(charset: Option<&str>, sql_mode: Option<&str>) -> Self {
        let unquote = |s: &str| s.trim().trim_matches('\'').to_ascii_uppercase();
        let modes = sql_mode.map(unquote).unwrap_or_default();
        let has = |mode: &str| modes.split(',').any(|m| m.trim() == mode);
        Self {
            charset: charset.map_or(Charset::AsciiSafe, |c| Charset::from_name(&unquote(c))),
            backslash_escapes: !has("NO_BACKSLASH_ESCAPES"),
            ansi_quotes: has("ANSI_QUOTES") || has("ANSI"),
        }
    }

    /// If a quoted string, quoted identifier or comment starts at `i`, the
    /// index just past it (the end of the text if it is not closed).
    /// Executable comments (`/*! … */`, `/*M! … */`) hold code: they are
    /// not skipped.
    pub fn skip_non_code(&self, bytes: &[u8], i: usize) -> Option<usize> {
        match bytes[i] {
            q @ (b'\'' | b'"' | b'`') => Some(self.skip_quoted(bytes, i, q)),
            b'#' => Some(skip_line(bytes, i)),
            b'-' if bytes.get(i + 1) == Some(&b'-')
                && bytes.get(i + 2).is_none_or(|c| c.is_ascii_whitespace()) =>
            {
                Some(skip_line(bytes, i))
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') && !is_executable_comment(&bytes[i..]) => {
                Some(skip_block_comment(bytes, i))
            }
            _ => None,
        }
    }

    /// The index of the next character after the one at `i`.
    pub fn next(&self, bytes: &[u8], i: usize) -> usize {
        i + self.charset.char_len(bytes, i)
    }

    /// Index just past a quoted string or identifier starting at `start`:
    /// a doubled quote is a quote; `\` escapes in strings unless the mode
    /// says otherwise; multibyte characters are stepped over whole.
    fn skip_quoted(&self, bytes: &[u8], start: usize, quote: u8) -> usize {
        let identifier = quote == b'`' || (quote == b'"' && self.ansi_quotes);
        let escapes = self.backslash_escapes && !identifier;
        let mut i = start + 1;
        while i < bytes.len() {
            let c = bytes[i];
            if c == b'\\' && escapes {
                i = match bytes.get(i + 1) {
                    Some(_) => self.next(bytes, i + 1),
                    None => bytes.len(),
                };
            } else if c == quote {
                if bytes.get(i + 1) == Some(&quote) {
                    i += 2;
                } else {
                    return i + 1;
                }
            } else if self.charset == Charset::AsciiSafe {
                // Every other byte is text here: jump to the next byte
                // that may end the string (a 16 MiB literal in one step).
                let rest = &bytes[i + 1..];
                let found = if escapes {
                    memchr::memchr2(quote, b'\\', rest)
                } else {
                    memchr::memchr(quote, rest)
                };
                i = found.map_or(bytes.len(), |p| i + 1 + p);
            } else {
                i = self.next(bytes, i);
            }
        }
        bytes.len()
    }
}

/// `/*!…` (MySQL) or `/*M!…` (MariaDB): the server runs what is inside.
pub fn is_executable_comment(text: &[u8]) -> bool {
    text.starts_with(b"/*!") || text.starts_with(b"/*M!")
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

#[cfg(test)]
mod tests {
    use super::*;

    fn end_of_string(dialect: Dialect, sql: &[u8]) -> usize {
        dialect.skip_non_code(sql, 0).unwrap()
    }

    #[test]
    fn a_trail_byte_0x5c_is_not_an_escape() {
        // PyMySQL's escaping of "\xe5\x81' OR 1=1 -- " in gbk: the server
        // reads 0xE55C as one character, so the quote after it ends the
        // string.
        let sql = b"'\xe5\x5c' OR 1=1 -- '";
        for charset in [Charset::Gbk, Charset::Big5, Charset::Sjis, Charset::Gb18030] {
            let d = Dialect {
                charset,
                ..Dialect::default()
            };
            assert_eq!(end_of_string(d, sql), 4, "{charset:?}");
        }
        // In utf8mb4 (or latin1) the backslash escapes the quote.
        assert_eq!(end_of_string(Dialect::default(), sql), sql.len());
    }

    #[test]
    fn a_trail_byte_0x60_is_not_a_backtick() {
        let d = Dialect {
            charset: Charset::Gbk,
            ..Dialect::default()
        };
        let sql = b"SELECT \x81\x60; DROP TABLE t";
        let mut i = 0;
        let mut semicolon = None;
        while i < sql.len() {
            if let Some(end) = d.skip_non_code(sql, i) {
                i = end;
                continue;
            }
            if sql[i] == b';' {
                semicolon = Some(i);
                break;
            }
            i = d.next(sql, i);
        }
        assert_eq!(semicolon, Some(9));
    }

    #[test]
    fn sql_modes_change_where_strings_end() {
        let sql = b"'\\' OR 1=1 -- '";
        let nbe = Dialect::from_variables(None, Some("'STRICT_TRANS_TABLES,NO_BACKSLASH_ESCAPES'"));
        assert!(!nbe.backslash_escapes);
        assert_eq!(end_of_string(nbe, sql), 3);
        assert_eq!(end_of_string(Dialect::default(), sql), sql.len());
        let ansi = Dialect::from_variables(None, Some("ANSI"));
        assert!(ansi.ansi_quotes && ansi.backslash_escapes);
        assert_eq!(end_of_string(ansi, b"\"\\\" x \""), 3);
        assert_eq!(end_of_string(ansi, b"'\\' x '"), 7);
    }

    #[test]
    fn charsets_by_name_and_collation() {
        assert_eq!(Charset::from_name("GBK"), Charset::Gbk);
        assert_eq!(Charset::from_name("cp932"), Charset::Sjis);
        assert_eq!(Charset::from_name("utf8mb4"), Charset::AsciiSafe);
        assert_eq!(Charset::from_collation(28), Charset::Gbk); // gbk_chinese_ci
        assert_eq!(Charset::from_collation(1), Charset::Big5);
        assert_eq!(Charset::from_collation(13), Charset::Sjis);
        assert_eq!(Charset::from_collation(45), Charset::AsciiSafe);
        assert_eq!(Charset::from_collation(0), Charset::AsciiSafe);
    }

    #[test]
    fn truncated_text_never_panics() {
        for charset in [Charset::Gbk, Charset::Gb18030, Charset::Big5, Charset::Sjis] {
            let d = Dialect {
                charset,
                ..Dialect::default()
            };
            for sql in [
                &b"'\\"[..],
                b"'\x81",
                b"'\x81\x30\x81",
                b"`\xfe",
                b"/*",
                b"'",
            ] {
                let _ = d.skip_non_code(sql, 0);
            }
        }
    }
}
