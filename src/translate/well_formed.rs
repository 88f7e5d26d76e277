//! Whether a string is surely a valid string of a character set, as the
//! server judges one (`Well_formed_prefix`, by byte structure).
//!
//! It matters for string parameters of a prepared statement: the server
//! takes a binary-protocol string parameter as sent, valid or not (a
//! VARBINARY column stores its bytes, a column of the character set
//! refuses or replaces them as it would any string), while the introducer
//! literal the gateway would write for it (`_gbk X'8120'`) is refused
//! with 1300 when its bytes are not a string of that character set. So a
//! value that is not surely valid stays a parameter of a statement
//! prepared at the backend; the common, valid one stays a literal.
//!
//! "Surely": where this does not know a character set's rules exactly it
//! says valid only for ASCII, which every client character set reads as
//! itself. A wrong "not valid" only costs a prepare at the backend; a
//! wrong "valid" would be a 1300, so the rules below are never looser
//! than the server's (`tests/prepared_types.rs` checks them against it).

/// How a client character set's strings are checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strings {
    /// A single-byte character set (latin1, cp1251, ascii, …): every byte
    /// is a character.
    AnyBytes,
    /// utf8mb4: UTF-8 (Rust's, which refuses encoded surrogates that the
    /// server may take: stricter, never looser).
    #[default]
    Utf8mb4,
    /// utf8mb3: UTF-8 of at most three bytes a character.
    Utf8mb3,
    /// gbk: ASCII, or a lead 0x81–0xFE and a trail 0x40–0x7E / 0x80–0xFE.
    Gbk,
    /// big5: ASCII, or a lead 0xA1–0xF9 and a trail 0x40–0x7E / 0xA1–0xFE.
    Big5,
    /// sjis and cp932: ASCII, single-byte katakana 0xA1–0xDF, or a lead
    /// 0x81–0x9F / 0xE0–0xFC and a trail 0x40–0x7E / 0x80–0xFC.
    Sjis,
    /// Any other (ujis, eucjpms, euckr, gb2312, gb18030, a name not
    /// known): only ASCII is surely valid.
    AsciiOnly,
}

impl Strings {
    /// From a character set name (`@@character_set_client`, or a
    /// collation's character set), case-insensitive, quoted or not (a
    /// session's `system_variables` are SQL string literals).
    pub fn from_name(name: &str) -> Self {
        match name.trim().trim_matches('\'').to_ascii_lowercase().as_str() {
            "utf8mb4" => Self::Utf8mb4,
            "utf8" | "utf8mb3" => Self::Utf8mb3,
            "gbk" => Self::Gbk,
            "big5" => Self::Big5,
            "sjis" | "cp932" => Self::Sjis,
            "armscii8" | "ascii" | "binary" | "cp1250" | "cp1251" | "cp1256" | "cp1257"
            | "cp850" | "cp852" | "cp866" | "dec8" | "geostd8" | "greek" | "hebrew" | "hp8"
            | "keybcs2" | "koi8r" | "koi8u" | "latin1" | "latin2" | "latin5" | "latin7"
            | "macce" | "macroman" | "swe7" | "tis620" => Self::AnyBytes,
            _ => Self::AsciiOnly,
        }
    }

    /// From a collation id (a handshake's), through mysql_common's table.
    pub fn from_collation(id: u16) -> Self {
        use mysql_common::collations::{Collation, CollationId};
        let id = CollationId::from(id);
        if id == CollationId::UNKNOWN_COLLATION_ID {
            return Self::AsciiOnly;
        }
        Self::from_name(Collation::from(id).charset())
    }

    /// Whether `bytes` is surely a string the server takes in this
    /// character set (see the module documentation).
    pub fn surely_valid(self, bytes: &[u8]) -> bool {
        if bytes.is_ascii() {
            return true;
        }
        match self {
            Self::AnyBytes => true,
            Self::Utf8mb4 => std::str::from_utf8(bytes).is_ok(),
            Self::Utf8mb3 => {
                std::str::from_utf8(bytes).is_ok_and(|s| s.chars().all(|c| c.len_utf8() <= 3))
            }
            Self::Gbk => pairs(
                bytes,
                |b| b < 0x80,
                |l| (0x81..=0xFE).contains(&l),
                |t| (0x40..=0x7E).contains(&t) || (0x80..=0xFE).contains(&t),
            ),
            Self::Big5 => pairs(
                bytes,
                |b| b < 0x80,
                |l| (0xA1..=0xF9).contains(&l),
                |t| (0x40..=0x7E).contains(&t) || (0xA1..=0xFE).contains(&t),
            ),
            Self::Sjis => pairs(
                bytes,
                |b| b < 0x80 || (0xA1..=0xDF).contains(&b),
                |l| (0x81..=0x9F).contains(&l) || (0xE0..=0xFC).contains(&l),
                |t| (0x40..=0x7E).contains(&t) || (0x80..=0xFC).contains(&t),
            ),
            Self::AsciiOnly => false,
        }
    }
}

/// Whether `bytes` is a sequence of single-byte characters (`single`)
/// and two-byte ones (`lead` then `trail`), as the server's
/// `well_formed_char_length` for these character sets reads them.
fn pairs(
    bytes: &[u8],
    single: fn(u8) -> bool,
    lead: fn(u8) -> bool,
    trail: fn(u8) -> bool,
) -> bool {
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if single(b) {
            i += 1;
        } else if lead(b) && bytes.get(i + 1).is_some_and(|&t| trail(t)) {
            i += 2;
        } else {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_valid_everywhere() {
        for name in ["gbk", "ujis", "euckr", "nonsense", "utf8mb3", "latin1"] {
            assert!(
                Strings::from_name(name).surely_valid(b"plain 'text' \\"),
                "{name}"
            );
            assert!(Strings::from_name(name).surely_valid(b""), "{name}");
        }
    }

    #[test]
    fn multibyte_rules() {
        let gbk = Strings::from_name("GBK");
        assert!(gbk.surely_valid(b"\xd6\xd0a\xe5\\"));
        for bad in [&b"\x81\x20"[..], b"\x81", b"a\xff", b"\x80", b"\xff\xff"] {
            assert!(!gbk.surely_valid(bad), "{bad:x?}");
        }
        let big5 = Strings::from_name("big5");
        assert!(big5.surely_valid(b"\xa4\x40\xf9\xfe"));
        assert!(!big5.surely_valid(b"\x81\x40"));
        assert!(!big5.surely_valid(b"\xa4\x80"));
        let sjis = Strings::from_name("cp932");
        assert!(
            sjis.surely_valid(b"\xb1\x82\xa0\x81\x40"),
            "katakana, pairs"
        );
        assert!(!sjis.surely_valid(b"\x80"));
        assert!(!sjis.surely_valid(b"\xa0"));
        assert!(!sjis.surely_valid(b"\x81\xfd"));
        let utf8 = Strings::from_name("utf8");
        assert!(utf8.surely_valid("é中".as_bytes()));
        assert!(!utf8.surely_valid("😀".as_bytes()), "four bytes in utf8mb3");
        assert!(Strings::Utf8mb4.surely_valid("😀".as_bytes()));
        assert!(!Strings::Utf8mb4.surely_valid(b"\xc3"));
        assert!(Strings::from_name("latin1").surely_valid(b"\xff\x80"));
        assert_eq!(
            Strings::from_name("'latin1'"),
            Strings::AnyBytes,
            "as reported"
        );
        assert_eq!(Strings::from_name(" 'GBK' "), Strings::Gbk);
        assert!(
            !Strings::from_name("ujis").surely_valid(b"\xa4\xa2"),
            "not known: not surely"
        );
    }

    #[test]
    fn from_a_collation() {
        assert_eq!(Strings::from_collation(28), Strings::Gbk);
        assert_eq!(Strings::from_collation(45), Strings::Utf8mb4);
        assert_eq!(Strings::from_collation(33), Strings::Utf8mb3);
        assert_eq!(Strings::from_collation(8), Strings::AnyBytes);
        assert_eq!(Strings::from_collation(13), Strings::Sjis);
        assert_eq!(Strings::from_collation(0), Strings::AsciiOnly);
    }
}
