//! A MySQL server error, as an ERR packet carries it.

use std::borrow::Cow;
use std::fmt;

/// A MySQL server error: its number, SQLSTATE and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlError {
    pub code: u16,
    pub state: String,
    pub message: ErrorText,
}

/// An error message's bytes, exactly as the server sent them: in the
/// session's `character_set_results`, and not always valid in it (MariaDB
/// quotes a statement's bytes as they came, and cuts a long message in
/// the middle of a character). Never decoded, so a client gets the bytes
/// a direct connection would have given it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ErrorText(Vec<u8>);

impl ErrorText {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// For logs and for callers that can only carry text: bytes that are
    /// not UTF-8 become U+FFFD.
    pub fn to_text_lossy(&self) -> Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }

    pub fn contains(&self, needle: &str) -> bool {
        let needle = needle.as_bytes();
        needle.is_empty() || self.0.windows(needle.len()).any(|w| w == needle)
    }

    pub fn starts_with(&self, prefix: &str) -> bool {
        self.0.starts_with(prefix.as_bytes())
    }
}

impl From<String> for ErrorText {
    fn from(text: String) -> Self {
        Self(text.into_bytes())
    }
}

impl From<&str> for ErrorText {
    fn from(text: &str) -> Self {
        Self(text.as_bytes().to_vec())
    }
}

impl From<Vec<u8>> for ErrorText {
    fn from(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

impl From<&[u8]> for ErrorText {
    fn from(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }
}

impl PartialEq<&str> for ErrorText {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<str> for ErrorText {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Display for ErrorText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text_lossy())
    }
}

impl fmt::Debug for ErrorText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match std::str::from_utf8(&self.0) {
            Ok(text) => fmt::Debug::fmt(text, f),
            Err(_) => write!(f, "b\"{}\"", self.0.escape_ascii()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_kept_and_shown_lossily() {
        let text = ErrorText::from(&b"near '\xe9t\xe9' at line 1"[..]);
        assert_eq!(text.as_bytes(), b"near '\xe9t\xe9' at line 1");
        assert!(text.contains("at line") && text.starts_with("near") && text.contains(""));
        assert!(!text.contains("\u{fffd}"));
        assert_eq!(text.to_string(), "near '\u{fffd}t\u{fffd}' at line 1");
        assert_eq!(format!("{text:?}"), r#"b"near \'\xe9t\xe9\' at line 1""#);
        assert_eq!(format!("{:?}", ErrorText::from("é")), r#""é""#);
        assert_eq!(ErrorText::from("x"), "x");
    }
}
