//! A MySQL server error, as an ERR packet carries it.

/// A MySQL server error: its number, SQLSTATE and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MysqlError {
    pub code: u16,
    pub state: String,
    pub message: String,
}
