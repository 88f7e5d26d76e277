//! The MySQL client/server protocol, server side, as pure functions and
//! small state machines: packet framing, the handshake and authentication,
//! command parsing, and the encoders for OK/ERR/EOF, column definitions and
//! rows. No I/O: the sidecar's connection task moves the bytes.
//!
//! Written on `mysql_common`'s constants and scramble functions rather
//! than on `opensrv-mysql` (see the README for the measured reasons).

pub mod auth;
pub mod command;
mod error;
pub mod packet;
pub mod params;
pub(crate) mod reader;
pub mod response;
pub mod temporal;

pub use error::{ErrorText, MysqlError};

/// The collation id of binary strings (`binary`).
pub const BINARY_CHARSET: u16 = 63;

pub use mysql_common::constants::{
    CapabilityFlags, ColumnFlags, ColumnType, Command as CommandCode, MariadbCapabilities,
    StatusFlags,
};

/// What the sidecar offers in its handshake; a session uses the
/// intersection with what the client asks for.
pub fn server_capabilities() -> CapabilityFlags {
    CapabilityFlags::CLIENT_LONG_PASSWORD
        | CapabilityFlags::CLIENT_FOUND_ROWS
        | CapabilityFlags::CLIENT_LONG_FLAG
        | CapabilityFlags::CLIENT_CONNECT_WITH_DB
        | CapabilityFlags::CLIENT_NO_SCHEMA
        | CapabilityFlags::CLIENT_ODBC
        | CapabilityFlags::CLIENT_LOCAL_FILES
        | CapabilityFlags::CLIENT_IGNORE_SPACE
        | CapabilityFlags::CLIENT_PROTOCOL_41
        | CapabilityFlags::CLIENT_INTERACTIVE
        | CapabilityFlags::CLIENT_IGNORE_SIGPIPE
        | CapabilityFlags::CLIENT_TRANSACTIONS
        | CapabilityFlags::CLIENT_RESERVED
        | CapabilityFlags::CLIENT_SECURE_CONNECTION
        | CapabilityFlags::CLIENT_MULTI_STATEMENTS
        | CapabilityFlags::CLIENT_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PS_MULTI_RESULTS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH
        | CapabilityFlags::CLIENT_CONNECT_ATTRS
        | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CapabilityFlags::CLIENT_CAN_HANDLE_EXPIRED_PASSWORDS
        | CapabilityFlags::CLIENT_DEPRECATE_EOF
        // As MariaDB and MySQL 5.7+ do: state changes go to clients that
        // ask for them, and the info text of an OK is then read as the
        // length-encoded string we write (mysql2 reads it to the end of
        // the packet without this flag, length byte included: "&Records: 3 …").
        | CapabilityFlags::CLIENT_SESSION_TRACK
}
