//! The client's packets of the connection phase, parsed: the
//! SSLRequest, HandshakeResponse41 and COM_CHANGE_USER.

use super::{AuthFailure, CapabilityFlags, MariadbCapabilities};
use crate::mysql::reader::Reader;

/// Bytes of the SSLRequest: capabilities, max packet, charset, filler.
const SSL_REQUEST_LEN: usize = 32;

pub(super) enum ClientHello<'a> {
    SslRequest,
    Response(HandshakeResponse<'a>),
}

/// HandshakeResponse41 as sent (parsed by the client's own flags).
pub(super) struct HandshakeResponse<'a> {
    pub(super) capabilities: CapabilityFlags,
    /// Read only when the client cleared CLIENT_MYSQL, as MariaDB does.
    pub(super) mariadb_capabilities: MariadbCapabilities,
    pub(super) max_packet: u32,
    pub(super) charset: u8,
    pub(super) user: &'a [u8],
    pub(super) auth_response: &'a [u8],
    pub(super) database: Option<&'a [u8]>,
    /// `None` without `CLIENT_PLUGIN_AUTH`.
    pub(super) plugin: Option<&'a [u8]>,
    pub(super) attrs: Option<&'a [u8]>,
}

const BAD: AuthFailure = AuthFailure::BadHandshake("truncated handshake response");

pub(super) fn parse_client_hello(payload: &[u8]) -> Result<ClientHello<'_>, AuthFailure> {
    let mut r = Reader::new(payload);
    let caps = CapabilityFlags::from_bits_truncate(r.u32().ok_or(BAD)?);
    if !caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
        return Err(AuthFailure::BadHandshake("client lacks CLIENT_PROTOCOL_41"));
    }
    let max_packet = r.u32().ok_or(BAD)?;
    let charset = r.u8().ok_or(BAD)?;
    let filler = r.take(23).ok_or(BAD)?;
    // The last 4 reserved bytes are MariaDB's extended capabilities when
    // the client cleared CLIENT_MYSQL (CLIENT_LONG_PASSWORD's bit).
    let mariadb_caps = if caps.contains(CapabilityFlags::CLIENT_LONG_PASSWORD) {
        MariadbCapabilities::empty()
    } else {
        let raw = u32::from_le_bytes(filler[19..].try_into().expect("4 bytes"));
        MariadbCapabilities::from_bits_truncate(raw)
    };
    if payload.len() == SSL_REQUEST_LEN && caps.contains(CapabilityFlags::CLIENT_SSL) {
        return Ok(ClientHello::SslRequest);
    }
    let user = r.nul_str().ok_or(BAD)?;
    let auth_response = if caps.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
        r.lenenc_bytes()
    } else if caps.contains(CapabilityFlags::CLIENT_SECURE_CONNECTION) {
        r.u8().and_then(|n| r.take(usize::from(n)))
    } else {
        r.nul_str()
    }
    .ok_or(BAD)?;
    let database = caps
        .contains(CapabilityFlags::CLIENT_CONNECT_WITH_DB)
        .then(|| r.nul_str_or_rest());
    let plugin = caps
        .contains(CapabilityFlags::CLIENT_PLUGIN_AUTH)
        .then(|| r.nul_str_or_rest());
    let attrs = if caps.contains(CapabilityFlags::CLIENT_CONNECT_ATTRS) && !r.is_empty() {
        Some(r.attrs().ok_or(BAD)?)
    } else {
        None
    };
    Ok(ClientHello::Response(HandshakeResponse {
        capabilities: caps,
        mariadb_capabilities: mariadb_caps,
        max_packet,
        charset,
        user,
        auth_response,
        database,
        plugin,
        attrs,
    }))
}

pub(super) struct ChangeUser<'a> {
    pub(super) user: &'a [u8],
    pub(super) auth_response: &'a [u8],
    pub(super) database: &'a [u8],
    pub(super) charset: Option<u16>,
    pub(super) attrs: Option<&'a [u8]>,
}

/// COM_CHANGE_USER's body (after the command byte), laid out by the
/// capabilities negotiated at login.
pub(super) fn parse_change_user(
    body: &[u8],
    caps: CapabilityFlags,
) -> Result<ChangeUser<'_>, AuthFailure> {
    const BAD: AuthFailure = AuthFailure::BadHandshake("truncated COM_CHANGE_USER");
    let mut r = Reader::new(body);
    let user = r.nul_str().ok_or(BAD)?;
    let auth_response = if caps.contains(CapabilityFlags::CLIENT_SECURE_CONNECTION) {
        r.u8().and_then(|n| r.take(usize::from(n)))
    } else {
        r.nul_str()
    }
    .ok_or(BAD)?;
    let database = r.nul_str_or_rest();
    let mut change = ChangeUser {
        user,
        auth_response,
        database,
        charset: None,
        attrs: None,
    };
    if r.is_empty() {
        return Ok(change);
    }
    change.charset = Some(r.u16().ok_or(BAD)?);
    if caps.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH) {
        // The client's plugin is ignored: we always switch.
        r.nul_str_or_rest();
    }
    if caps.contains(CapabilityFlags::CLIENT_CONNECT_ATTRS) && !r.is_empty() {
        change.attrs = Some(r.attrs().ok_or(BAD)?);
    }
    Ok(change)
}

/// A database name as the client's bytes (`None` when empty).
pub(super) fn non_empty(name: Option<&[u8]>) -> Option<Vec<u8>> {
    name.filter(|n| !n.is_empty()).map(<[u8]>::to_vec)
}
