//! The server side of MySQL's connection phase, sans-IO.
//!
//! [`Handshake`] is a small state machine. The I/O layer writes
//! [`Handshake::greeting`], then hands every packet it reads to
//! [`Handshake::on_packet`] and writes out whatever the machine pushed into
//! `out` (always flush, also on `Err`: the ERR packet is in there), until
//! it returns [`Progress::Done`] or an error (then close the connection):
//!
//! ```text
//! server                       client
//! greeting (seq 0)       ──▶
//!                        ◀──   [SSLRequest (1) → Progress::StartTls, TLS upgrade]
//!                        ◀──   HandshakeResponse41 (1, or 2 after TLS)
//! [AuthSwitchRequest]    ──▶                        (when the plugins differ)
//!                        ◀──   [auth data for the switched-to plugin]
//! [caching_sha2: 01 03 fast-auth ok | 01 04 full auth → cleartext or RSA]
//! OK | ERR               ──▶
//! ```
//!
//! Sequence ids continue across the exchange; the machine checks the
//! client's and numbers its own replies from them, so `out` can be any
//! [`Packets`]. The same machine later re-runs authentication for
//! `COM_CHANGE_USER` ([`Handshake::change_user`]).
//!
//! Passwords are verified against a local plain-text user list (the
//! sidecar is a local process; the gateway authenticates it separately),
//! always in constant time and with the same work for unknown users, so
//! neither timing nor the exchange's shape reveals which users exist.
//!
//! This file is the state machine; beside it are what it returns
//! (`outcome`), what it is configured with (`config`), the
//! caching_sha2_password cache (`cache`) and RSA key (`rsa_key`), the
//! scrambles (`scramble`), and the client packets it reads (`parse`, over
//! `reader`).

use std::sync::Arc;

use bytes::BufMut;

use super::packet::{Packet, Packets};
use super::reader::attr_pairs;
use super::response;
use super::response::ColumnStyle;
use super::{CapabilityFlags, MariadbCapabilities, MysqlError, StatusFlags, server_capabilities};

mod cache;
mod config;
mod outcome;
mod parse;
mod rsa_key;
mod scramble;

pub use cache::AuthCache;
pub use config::{AuthConfig, Plugin};
pub use outcome::{AuthFailure, Authenticated, Progress};
pub use rsa_key::{RSA_BITS, RsaKey, RsaKeyError};

use parse::{ClientHello, non_empty, parse_change_user, parse_client_hello};
use scramble::{digest_eq, fresh_nonce, is_empty_response, native_matches, sha2_matches};

/// The only handshake protocol version clients still speak.
pub const PROTOCOL_VERSION: u8 = 10;
/// `utf8mb4_general_ci`: understood by every MySQL and MariaDB client.
pub const DEFAULT_CHARSET: u8 = 45;
/// Length of the authentication challenge (the "scramble").
pub const NONCE_LEN: usize = 20;

/// caching_sha2_password's in-band signals (after the 0x01 "more data" byte).
const FAST_AUTH_SUCCESS: u8 = 0x03;
const PERFORM_FULL_AUTH: u8 = 0x04;
const REQUEST_PUBLIC_KEY: u8 = 0x02;
const AUTH_MORE_DATA: u8 = 0x01;
const AUTH_SWITCH: u8 = 0xfe;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The greeting has not been written yet.
    Fresh,
    /// Waiting for an SSLRequest or a HandshakeResponse41.
    Greeted,
    /// Sent an AuthSwitchRequest; waiting for that plugin's auth data.
    AwaitSwitchReply(Plugin),
    /// caching_sha2: sent "perform full authentication".
    AwaitFullAuth,
    /// caching_sha2: sent the public key; waiting for the RSA ciphertext.
    AwaitRsaPassword,
    /// Logged in: only `change_user` is valid now.
    Authenticated,
    /// An ERR was sent; the connection must close.
    Failed,
}

/// What the client told us about itself; becomes [`Authenticated`].
#[derive(Debug, Clone, Default)]
struct Session {
    /// The name's bytes as the client sent them: never decoded, so a name
    /// that is not UTF-8 can only be refused, never become another one.
    user: Vec<u8>,
    database: Option<Vec<u8>>,
    capabilities: CapabilityFlags,
    mariadb_capabilities: MariadbCapabilities,
    charset: u16,
    max_packet: u32,
    /// The connection-attribute block as sent (empty: none).
    attrs: Vec<u8>,
    using_password: bool,
}

/// One connection's authentication; keep it for the connection's life so
/// that `COM_CHANGE_USER` can run the exchange again.
#[derive(Debug)]
pub struct Handshake {
    config: Arc<AuthConfig>,
    connection_id: u32,
    secure_transport: bool,
    tls: bool,
    nonce: [u8; NONCE_LEN],
    /// Sequence id the client's next packet must carry.
    next_seq: u8,
    state: State,
    session: Session,
}

/// How a user name resolves against the user list.
enum Account<'a> {
    /// Open mode: anyone gets in.
    Open,
    /// A configured user: its name and password.
    Known(&'a str, &'a str),
    Unknown,
}

impl Handshake {
    /// `secure_transport`: the client came over a unix socket, where a
    /// cleartext password cannot be observed (TLS is learnt in-band).
    pub fn new(config: Arc<AuthConfig>, connection_id: u32, secure_transport: bool) -> Self {
        Self {
            config,
            connection_id,
            secure_transport,
            tls: false,
            nonce: fresh_nonce(),
            next_seq: 0,
            state: State::Fresh,
            session: Session::default(),
        }
    }

    /// The id sent in the greeting (what `KILL <id>` names).
    pub fn connection_id(&self) -> u32 {
        self.connection_id
    }

    /// Whether the transport is secure (unix socket, or TLS started).
    pub fn is_secure(&self) -> bool {
        self.secure_transport || self.tls
    }

    /// The capabilities the greeting offers.
    pub fn capabilities(&self) -> CapabilityFlags {
        let mut caps = server_capabilities();
        if self.config.tls_available {
            caps |= CapabilityFlags::CLIENT_SSL;
        }
        if self.presents_mariadb() {
            // MariaDB clears CLIENT_MYSQL (CLIENT_LONG_PASSWORD's bit): it
            // tells clients that the greeting's last 4 reserved bytes hold
            // MariaDB's extended capabilities.
            caps -= CapabilityFlags::CLIENT_LONG_PASSWORD;
        }
        caps
    }

    /// The MariaDB extended capabilities the greeting offers: only the
    /// extended column metadata (`format=json`), which clients need to
    /// tell a JSON column from a LONGTEXT. Bulk operations and metadata
    /// caching are not implemented, so not offered.
    pub fn mariadb_capabilities(&self) -> MariadbCapabilities {
        if self.presents_mariadb() {
            MariadbCapabilities::MARIADB_CLIENT_EXTENDED_METADATA
        } else {
            MariadbCapabilities::empty()
        }
    }

    fn presents_mariadb(&self) -> bool {
        self.config.server_version.contains("MariaDB")
    }

    /// Writes the Initial Handshake v10 packet (sequence id 0).
    pub fn greeting(&mut self, out: &mut Packets) {
        let caps = self.capabilities().bits();
        let mariadb_caps = self.mariadb_capabilities().bits();
        let plugin = self.config.default_plugin.name();
        out.seq = 0;
        out.push(|b| {
            b.put_u8(PROTOCOL_VERSION);
            put_nul_str(b, self.config.server_version.as_bytes());
            b.put_u32_le(self.connection_id);
            b.put_slice(&self.nonce[..8]);
            b.put_u8(0);
            b.put_u16_le(caps as u16);
            b.put_u8(DEFAULT_CHARSET);
            b.put_u16_le(StatusFlags::SERVER_STATUS_AUTOCOMMIT.bits());
            b.put_u16_le((caps >> 16) as u16);
            // Length of the whole scramble including its terminating NUL.
            b.put_u8(NONCE_LEN as u8 + 1);
            b.put_bytes(0, 6);
            b.put_u32_le(mariadb_caps);
            b.put_slice(&self.nonce[8..]);
            b.put_u8(0);
            put_nul_str(b, plugin.as_bytes());
        });
        self.next_seq = out.seq;
        self.state = State::Greeted;
    }

    /// Feeds one packet from the client. Replies (including the final OK
    /// or ERR) are pushed into `out` with the right sequence ids.
    pub fn on_packet(
        &mut self,
        packet: &Packet,
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        out.seq = packet.seq.wrapping_add(1);
        let result = if packet.seq == self.next_seq {
            self.step(&packet.payload, out)
        } else {
            Err(AuthFailure::OutOfOrder {
                expected: self.next_seq,
                got: packet.seq,
            })
        };
        self.settle(result, out)
    }

    /// Starts re-authentication for `COM_CHANGE_USER`. `body` is the
    /// command's payload after the 0x11 command byte (what
    /// `command::Command::ChangeUser` carries), `request_seq` its sequence
    /// id. Continue with [`Handshake::on_packet`] as for a login; the
    /// result carries the new user, database and charset. On failure close
    /// the connection (MySQL does not keep a half-changed session either).
    pub fn change_user(
        &mut self,
        request_seq: u8,
        body: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        out.seq = request_seq.wrapping_add(1);
        let result = if self.state == State::Authenticated {
            self.start_change_user(body, out)
        } else {
            Err(AuthFailure::BadHandshake("COM_CHANGE_USER before login"))
        };
        self.settle(result, out)
    }

    /// Records where the exchange stands after one step; on failure writes
    /// the ERR packet and poisons the machine.
    fn settle(
        &mut self,
        result: Result<Progress, AuthFailure>,
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        if let Err(failure) = &result {
            self.state = State::Failed;
            response::err(out, &failure.to_mysql());
        }
        self.next_seq = out.seq;
        result
    }

    fn step(&mut self, payload: &[u8], out: &mut Packets) -> Result<Progress, AuthFailure> {
        match self.state {
            State::Greeted => self.on_client_hello(payload, out),
            State::AwaitSwitchReply(plugin) => self.verify(plugin, payload, out),
            State::AwaitFullAuth => self.on_full_auth(payload, out),
            State::AwaitRsaPassword => self.on_rsa_password(payload, out),
            State::Fresh => Err(AuthFailure::BadHandshake("packet before the greeting")),
            State::Authenticated | State::Failed => Err(AuthFailure::BadHandshake(
                "packet after the handshake ended",
            )),
        }
    }

    fn on_client_hello(
        &mut self,
        payload: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        let hello = match parse_client_hello(payload)? {
            ClientHello::SslRequest => {
                if !self.config.tls_available || self.tls {
                    return Err(AuthFailure::BadHandshake("unexpected SSLRequest"));
                }
                self.tls = true;
                return Ok(Progress::StartTls);
            }
            ClientHello::Response(r) => r,
        };
        if hello.capabilities.contains(CapabilityFlags::CLIENT_SSL) && !self.tls {
            return Err(AuthFailure::BadHandshake(
                "CLIENT_SSL set without an SSLRequest",
            ));
        }
        self.session = Session {
            user: hello.user.to_vec(),
            database: non_empty(hello.database),
            capabilities: hello.capabilities & self.capabilities(),
            mariadb_capabilities: hello.mariadb_capabilities & self.mariadb_capabilities(),
            charset: u16::from(hello.charset),
            max_packet: hello.max_packet,
            attrs: hello.attrs.unwrap_or_default().to_vec(),
            using_password: !is_empty_response(hello.auth_response),
        };
        let plugin = self.plugin_for(hello.plugin);
        if hello.plugin.is_some() && hello.plugin != Some(plugin.name().as_bytes()) {
            self.switch_to(plugin, out);
            return Ok(Progress::Continue);
        }
        self.verify(plugin, hello.auth_response, out)
    }

    /// The plugin to verify with: ours, except that a client without
    /// `CLIENT_PLUGIN_AUTH` (no plugin name, cannot be switched) only
    /// speaks mysql_native_password.
    fn plugin_for(&self, client_plugin: Option<&[u8]>) -> Plugin {
        match client_plugin {
            Some(_) => self.config.default_plugin,
            None => Plugin::MysqlNativePassword,
        }
    }

    fn switch_to(&mut self, plugin: Plugin, out: &mut Packets) {
        let nonce = self.nonce;
        out.push(|b| {
            b.put_u8(AUTH_SWITCH);
            put_nul_str(b, plugin.name().as_bytes());
            b.put_slice(&nonce);
            b.put_u8(0);
        });
        self.state = State::AwaitSwitchReply(plugin);
    }

    fn start_change_user(
        &mut self,
        body: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        let caps = self.session.capabilities;
        let req = parse_change_user(body, caps)?;
        self.session.user = req.user.to_vec();
        self.session.database = non_empty(Some(req.database));
        self.session.using_password = !is_empty_response(req.auth_response);
        if let Some(charset) = req.charset {
            self.session.charset = charset;
        }
        // As MariaDB: the new attributes replace the old, and a client
        // that sends none keeps them.
        if let Some(attrs) = req.attrs {
            self.session.attrs = attrs.to_vec();
        }
        if caps.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH) {
            // The response in the request was made for the old nonce and
            // perhaps another plugin: always switch, with a fresh nonce.
            self.nonce = fresh_nonce();
            self.switch_to(self.config.default_plugin, out);
            return Ok(Progress::Continue);
        }
        self.verify(Plugin::MysqlNativePassword, req.auth_response, out)
    }

    fn account(&self) -> Account<'_> {
        match &self.config.users {
            None => Account::Open,
            // Configured names are UTF-8: other bytes are nobody's.
            Some(users) => std::str::from_utf8(&self.session.user)
                .ok()
                .and_then(|name| users.get_key_value(name))
                .map_or(Account::Unknown, |(name, pw)| Account::Known(name, pw)),
        }
    }

    fn verify(
        &mut self,
        plugin: Plugin,
        response: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        self.session.using_password = !is_empty_response(response);
        match plugin {
            Plugin::MysqlNativePassword => {
                let ok = match self.account() {
                    Account::Open => true,
                    Account::Known(_, pw) => native_matches(&self.nonce, pw, response),
                    Account::Unknown => {
                        // Same work as for a known user.
                        native_matches(&self.nonce, "\u{1}unknown", response);
                        false
                    }
                };
                if ok {
                    Ok(self.finish(plugin, out))
                } else {
                    Err(self.denied())
                }
            }
            Plugin::CachingSha2Password => self.sha2_start(response, out),
        }
    }

    /// caching_sha2_password's first step: the scramble. MySQL semantics:
    /// only a cached user may log in with it; everyone else (including
    /// unknown users, so they are indistinguishable) must authenticate in
    /// full.
    fn sha2_start(&mut self, response: &[u8], out: &mut Packets) -> Result<Progress, AuthFailure> {
        let empty = is_empty_response(response);
        match self.account() {
            Account::Open => {
                if !empty {
                    self.more_data(out, &[FAST_AUTH_SUCCESS]);
                }
                return Ok(self.finish(Plugin::CachingSha2Password, out));
            }
            // An account without a password expects no response, and
            // nothing else logs in without one.
            Account::Known(_, "") if empty => {
                return Ok(self.finish(Plugin::CachingSha2Password, out));
            }
            Account::Known(_, "") => return Err(self.denied()),
            Account::Known(..) | Account::Unknown if empty => return Err(self.denied()),
            Account::Known(user, pw) if self.config.cache.is_cached(user, pw) => {
                if !sha2_matches(&self.nonce, pw, response) {
                    return Err(self.denied());
                }
                self.more_data(out, &[FAST_AUTH_SUCCESS]);
                return Ok(self.finish(Plugin::CachingSha2Password, out));
            }
            Account::Known(..) | Account::Unknown => {}
        }
        self.more_data(out, &[PERFORM_FULL_AUTH]);
        self.state = State::AwaitFullAuth;
        Ok(Progress::Continue)
    }

    /// An AuthMoreData packet: 0x01, then `body` (without the 0x01 for
    /// [`connector_j_on_old_version`](Self::connector_j_on_old_version)).
    fn more_data(&self, out: &mut Packets, body: &[u8]) {
        let legacy = self.connector_j_on_old_version();
        out.push(|b| {
            if !legacy {
                b.put_u8(AUTH_MORE_DATA);
            }
            b.put_slice(body);
        });
    }

    /// MySQL Connector/J while our version is MariaDB's "5.5.5-…": it
    /// takes that for MySQL 5.5.5 and speaks caching_sha2_password as to
    /// such an old server. Servers before 5.5.16 sent auth data without
    /// the 0x01 prefix (Connector/J reads the 0x01 as the data: "Unknown
    /// server response after fast auth"), and before 8.0.5 took RSA
    /// PKCS#1 v1.5 rather than OAEP. Real MariaDB servers never get here
    /// (they do not offer caching_sha2_password), so to Connector/J we
    /// answer as the server it believes it talks to.
    fn connector_j_on_old_version(&self) -> bool {
        self.config.server_version.starts_with("5.5.5-")
            && attr_pairs(&self.session.attrs)
                .any(|(k, v)| k == b"_client_name" && v == b"MySQL Connector/J")
    }

    /// After "perform full authentication": the cleartext password (secure
    /// transports), a public-key request, or an RSA ciphertext straight
    /// away (clients that were given the key out of band).
    fn on_full_auth(&mut self, payload: &[u8], out: &mut Packets) -> Result<Progress, AuthFailure> {
        if payload == [REQUEST_PUBLIC_KEY] {
            // Also honoured on secure transports: some clients do not count
            // a unix socket as secure. A cleartext password is never a lone
            // 0x02, it ends in NUL.
            let pem = self.config.rsa_key.public_pem().map_err(AuthFailure::Key)?;
            self.more_data(out, pem.as_bytes());
            self.state = State::AwaitRsaPassword;
            return Ok(Progress::Continue);
        }
        if self.is_secure() {
            let password = payload.strip_suffix(&[0]).unwrap_or(payload);
            return self.full_auth_check(password, out);
        }
        self.on_rsa_password(payload, out)
    }

    fn on_rsa_password(
        &mut self,
        payload: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        let key = Arc::clone(&self.config.rsa_key);
        if payload.len() != key.ciphertext_len().map_err(AuthFailure::Key)? {
            // Not a ciphertext: a cleartext password, fine only where it
            // cannot be observed.
            if self.is_secure() {
                let password = payload.strip_suffix(&[0]).unwrap_or(payload);
                return self.full_auth_check(password, out);
            }
            return Err(AuthFailure::InsecureCleartext {
                user: self.session.user.clone(),
            });
        }
        let legacy = self.connector_j_on_old_version();
        let Some(mut plain) = key.decrypt(payload, legacy).map_err(AuthFailure::Key)? else {
            return Err(self.denied());
        };
        for (byte, mask) in plain.iter_mut().zip(self.nonce.iter().cycle()) {
            *byte ^= mask;
        }
        match plain.strip_suffix(&[0]) {
            Some(password) => self.full_auth_check(password, out),
            None => Err(self.denied()),
        }
    }

    fn full_auth_check(
        &mut self,
        password: &[u8],
        out: &mut Packets,
    ) -> Result<Progress, AuthFailure> {
        self.session.using_password = !password.is_empty();
        let ok = match self.account() {
            Account::Open => true,
            Account::Known(user, pw) => {
                let ok = digest_eq(password, pw.as_bytes());
                if ok {
                    self.config.cache.insert(user, pw);
                }
                ok
            }
            Account::Unknown => {
                digest_eq(password, b"\x01unknown");
                false
            }
        };
        if ok {
            Ok(self.finish(Plugin::CachingSha2Password, out))
        } else {
            Err(self.denied())
        }
    }

    fn denied(&self) -> AuthFailure {
        AuthFailure::AccessDenied {
            user: self.session.user.clone(),
            using_password: self.session.using_password,
        }
    }

    fn finish(&mut self, plugin: Plugin, out: &mut Packets) -> Progress {
        write_ok(
            out,
            self.session.capabilities,
            self.session.database.as_deref(),
        );
        self.state = State::Authenticated;
        let s = &self.session;
        Progress::Done(Authenticated {
            user: s.user.clone(),
            database: s.database.clone(),
            capabilities: s.capabilities,
            mariadb_capabilities: s.mariadb_capabilities,
            column_style: ColumnStyle::new(&self.config.server_version, s.mariadb_capabilities),
            charset: s.charset,
            max_packet: s.max_packet,
            attrs: s.attrs.clone(),
            plugin,
            secure: self.is_secure(),
        })
    }
}

/// The login's OK: nothing affected, autocommit on (a new session); to a
/// client that reads session-state tracking, the database it logged in
/// to, as MariaDB reports it.
fn write_ok(out: &mut Packets, client: CapabilityFlags, database: Option<&[u8]>) {
    let caps =
        CapabilityFlags::CLIENT_PROTOCOL_41 | (client & CapabilityFlags::CLIENT_SESSION_TRACK);
    let state = database.map(response::session_track_schema);
    response::ok_tracked(
        out,
        caps,
        0,
        0,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        0,
        "",
        state.as_deref().unwrap_or_default(),
    );
}

fn put_nul_str(b: &mut bytes::BytesMut, s: &[u8]) {
    b.put_slice(s);
    b.put_u8(0);
}

#[cfg(test)]
mod tests;
