//! What a step of the [`Handshake`](super::Handshake) returns: go on,
//! upgrade to TLS, logged in, or why not.

use super::response::ColumnStyle;
use super::{CapabilityFlags, MariadbCapabilities, MysqlError, Plugin, RsaKeyError};

/// What [`Handshake::on_packet`](super::Handshake::on_packet) asks of the I/O layer next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A reply is in `out`: write it, then read the next packet.
    Continue,
    /// The client sent an SSLRequest: upgrade the socket to TLS (nothing to
    /// write), then feed the next packet; the connection counts as secure.
    StartTls,
    /// The OK packet is in `out`: write it and enter the command phase.
    Done(Authenticated),
}

/// A logged-in session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authenticated {
    /// The user name's bytes as the client sent them.
    pub user: Vec<u8>,
    /// The default database the client asked for (`None` if none or
    /// empty), as its bytes.
    pub database: Option<Vec<u8>>,
    /// The client's capabilities intersected with ours: what the session
    /// may use (`CLIENT_DEPRECATE_EOF`, `CLIENT_MULTI_STATEMENTS`, …).
    pub capabilities: CapabilityFlags,
    /// The same for MariaDB's extended capabilities (empty unless we
    /// present ourselves as MariaDB).
    pub mariadb_capabilities: MariadbCapabilities,
    /// How this session's column definitions describe JSON columns.
    pub column_style: ColumnStyle,
    /// The connection's collation id.
    pub charset: u16,
    /// The client's max packet size.
    pub max_packet: u32,
    /// The connection-attribute block (`_client_name`, `program_name`, …:
    /// length-encoded keys and values) exactly as the client sent it, in
    /// its character set; empty if it sent none. Read its pairs with
    /// [`attr_pairs`](crate::mysql::reader::attr_pairs).
    pub attrs: Vec<u8>,
    /// The plugin that verified the password.
    pub plugin: Plugin,
    /// Whether the transport was TLS or a unix socket.
    pub secure: bool,
}

/// Why a login failed. The matching ERR packet has already been written
/// into `out`; flush it and close the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("access denied for user '{}' (using password: {})", user.escape_ascii(), yes_no(*using_password))]
    AccessDenied { user: Vec<u8>, using_password: bool },
    #[error("user '{}' offered a cleartext password over an insecure transport", user.escape_ascii())]
    InsecureCleartext { user: Vec<u8> },
    #[error("bad handshake: {0}")]
    BadHandshake(&'static str),
    #[error("packets out of order: expected sequence id {expected}, got {got}")]
    OutOfOrder { expected: u8, got: u8 },
    #[error("RSA key unavailable: {0}")]
    Key(RsaKeyError),
}

impl AuthFailure {
    /// The error the client sees.
    pub fn to_mysql(&self) -> MysqlError {
        match self {
            AuthFailure::AccessDenied {
                user,
                using_password,
            } => access_denied(user, *using_password, ""),
            AuthFailure::InsecureCleartext { user } => access_denied(
                user,
                true,
                ": caching_sha2_password requires a secure connection (TLS or a unix socket) \
                 or an RSA-encrypted password; connect with TLS or let the client request \
                 the server's public key",
            ),
            AuthFailure::BadHandshake(_) => MysqlError {
                code: 1043,
                state: "08S01".into(),
                message: "Bad handshake".into(),
            },
            AuthFailure::OutOfOrder { .. } => MysqlError {
                code: 1156,
                state: "08S01".into(),
                message: "Got packets out of order".into(),
            },
            AuthFailure::Key(_) => MysqlError {
                code: 1105,
                state: "HY000".into(),
                message: "Authentication failed: the server's RSA key is unavailable".into(),
            },
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "YES" } else { "NO" }
}

/// ER_ACCESS_DENIED_ERROR, quoting the name as the client sent it (as the
/// server does when the client's character set is its results' one).
fn access_denied(user: &[u8], using_password: bool, suffix: &str) -> MysqlError {
    let tail = format!(
        "'@'localhost' (using password: {}){suffix}",
        yes_no(using_password)
    );
    MysqlError {
        code: 1045,
        state: "28000".into(),
        message: [&b"Access denied for user '"[..], user, tail.as_bytes()]
            .concat()
            .into(),
    }
}
