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

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::BufMut;
use rand::RngCore;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::{Oaep, Pkcs1v15Encrypt, RsaPrivateKey};
use sha1::Sha1;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::packet::{Packet, Packets};
use super::response;
use super::response::ColumnStyle;
use super::{CapabilityFlags, MariadbCapabilities, StatusFlags, server_capabilities};
use crate::mysql::MysqlError;

/// The only handshake protocol version clients still speak.
pub const PROTOCOL_VERSION: u8 = 10;
/// `utf8mb4_general_ci`: understood by every MySQL and MariaDB client.
pub const DEFAULT_CHARSET: u8 = 45;
/// Length of the authentication challenge (the "scramble").
pub const NONCE_LEN: usize = 20;
/// Size of a lazily generated RSA key, as MySQL's auto-generated keys.
pub const RSA_BITS: usize = 2048;

/// Bytes of the SSLRequest: capabilities, max packet, charset, filler.
const SSL_REQUEST_LEN: usize = 32;
/// caching_sha2_password's in-band signals (after the 0x01 "more data" byte).
const FAST_AUTH_SUCCESS: u8 = 0x03;
const PERFORM_FULL_AUTH: u8 = 0x04;
const REQUEST_PUBLIC_KEY: u8 = 0x02;
const AUTH_MORE_DATA: u8 = 0x01;
const AUTH_SWITCH: u8 = 0xfe;

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// An authentication plugin the sidecar can verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Plugin {
    /// MySQL 8's default; needs TLS, a unix socket or RSA for the first
    /// login of each user, then a cheap cached fast path.
    #[default]
    CachingSha2Password,
    /// The legacy SHA-1 challenge/response; works with every client.
    MysqlNativePassword,
}

impl Plugin {
    pub fn name(self) -> &'static str {
        match self {
            Plugin::CachingSha2Password => "caching_sha2_password",
            Plugin::MysqlNativePassword => "mysql_native_password",
        }
    }

    /// The plugin a server presenting `server_version` gives new accounts
    /// by default, so the one its clients expect out of the box: MariaDB
    /// and MySQL before 8.0 `mysql_native_password`, MySQL 8 and later
    /// `caching_sha2_password` (which such clients then expect to pass
    /// over TLS or with the server's RSA key).
    pub fn default_for(server_version: &str) -> Self {
        if server_version.contains("MariaDB") {
            return Plugin::MysqlNativePassword;
        }
        let major = server_version
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        match major {
            Some(major) if major < 8 => Plugin::MysqlNativePassword,
            _ => Plugin::CachingSha2Password,
        }
    }

    /// The plugin a client named, if it is one we verify.
    pub fn from_name(name: &[u8]) -> Option<Self> {
        match name {
            b"caching_sha2_password" => Some(Plugin::CachingSha2Password),
            b"mysql_native_password" => Some(Plugin::MysqlNativePassword),
            _ => None,
        }
    }
}

impl FromStr for Plugin {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Plugin::from_name(s.as_bytes()).ok_or_else(|| {
            format!("unknown auth plugin {s:?} (caching_sha2_password or mysql_native_password)")
        })
    }
}

impl fmt::Display for Plugin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What every connection's handshake shares; build once, wrap in an `Arc`.
#[derive(Clone)]
pub struct AuthConfig {
    /// Sent in the greeting; clients parse it to pick features, so keep a
    /// real-looking version first (e.g. `11.4.0-myquic`).
    pub server_version: String,
    /// Local accounts, user → password. `None` is open mode: any user and
    /// password is accepted, but the plugin exchange still runs properly so
    /// that clients see a normal login.
    pub users: Option<HashMap<String, String>>,
    /// The plugin every account uses (there is no per-user plugin).
    pub default_plugin: Plugin,
    /// Whether the I/O layer can upgrade to TLS (adds `CLIENT_SSL`).
    pub tls_available: bool,
    /// Users that completed caching_sha2 full authentication.
    pub cache: Arc<AuthCache>,
    /// The key caching_sha2 clients encrypt their password with.
    pub rsa_key: Arc<RsaKey>,
}

impl fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print passwords.
        f.debug_struct("AuthConfig")
            .field("server_version", &self.server_version)
            .field(
                "users",
                &self.users.as_ref().map(|u| {
                    let mut names: Vec<&str> = u.keys().map(String::as_str).collect();
                    names.sort_unstable();
                    names
                }),
            )
            .field("default_plugin", &self.default_plugin)
            .field("tls_available", &self.tls_available)
            .finish_non_exhaustive()
    }
}

/// MySQL's in-memory caching_sha2_password cache: a user that once proved
/// its password in full (over a secure channel or RSA) may afterwards log
/// in with the cheap scramble alone. Entries remember a digest of the
/// password they were proven with, so a changed password in the user list
/// needs a full authentication again.
#[derive(Debug, Default)]
pub struct AuthCache {
    entries: Mutex<HashMap<String, [u8; 32]>>,
}

impl AuthCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets one user (e.g. after its password changed).
    pub fn remove(&self, user: &str) {
        self.lock().remove(user);
    }

    /// Forgets everyone, like `FLUSH PRIVILEGES`.
    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn is_cached(&self, user: &str, password: &str) -> bool {
        let digest = double_sha256(password.as_bytes());
        self.lock()
            .get(user)
            .is_some_and(|cached| bool::from(cached.ct_eq(&digest)))
    }

    fn insert(&self, user: &str, password: &str) {
        let digest = double_sha256(password.as_bytes());
        self.lock().insert(user.to_string(), digest);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, [u8; 32]>> {
        // A panic elsewhere cannot leave a HashMap of digests inconsistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Why an RSA key could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RsaKeyError {
    #[error("cannot read RSA key file {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("not an RSA private key in PKCS#8 or PKCS#1 PEM form")]
    Parse,
    #[error("RSA key generation failed: {0}")]
    Generate(String),
    #[error("cannot encode the RSA public key: {0}")]
    Encode(String),
}

/// The RSA key pair for caching_sha2_password's password exchange over
/// insecure transports. Generated on first need (most sidecars listen on a
/// unix socket or loopback TLS and never need one; generating costs tens of
/// milliseconds to seconds) or loaded from a PEM file.
pub struct RsaKey {
    bits: usize,
    pair: OnceLock<Result<KeyPair, RsaKeyError>>,
}

struct KeyPair {
    private: RsaPrivateKey,
    public_pem: String,
}

impl KeyPair {
    fn new(private: RsaPrivateKey) -> Result<Self, RsaKeyError> {
        let public_pem = private
            .to_public_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| RsaKeyError::Encode(e.to_string()))?;
        Ok(Self {
            private,
            public_pem,
        })
    }
}

impl fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.pair.get() {
            None => "not generated yet",
            Some(Ok(_)) => "ready",
            Some(Err(_)) => "failed",
        };
        f.debug_struct("RsaKey")
            .field("bits", &self.bits)
            .field("state", &state)
            .finish()
    }
}

impl Default for RsaKey {
    fn default() -> Self {
        Self::generated()
    }
}

impl RsaKey {
    /// A 2048-bit key generated on first use. Generation blocks; the
    /// sidecar may call [`RsaKey::public_pem`] once on a blocking thread
    /// at start-up to keep it off the connection path.
    pub fn generated() -> Self {
        Self::generated_with_bits(RSA_BITS)
    }

    fn generated_with_bits(bits: usize) -> Self {
        Self {
            bits,
            pair: OnceLock::new(),
        }
    }

    /// A key from PEM text: PKCS#8 (`BEGIN PRIVATE KEY`) or PKCS#1
    /// (`BEGIN RSA PRIVATE KEY`), as MySQL's `private_key.pem`.
    pub fn from_pem(pem: &str) -> Result<Self, RsaKeyError> {
        let private = RsaPrivateKey::from_pkcs8_pem(pem)
            .or_else(|_| RsaPrivateKey::from_pkcs1_pem(pem))
            .map_err(|_| RsaKeyError::Parse)?;
        let bits = private.size() * 8;
        let pair = KeyPair::new(private)?;
        Ok(Self {
            bits,
            pair: OnceLock::from(Ok(pair)),
        })
    }

    /// A key from a PEM file, read now so that a bad path fails at start-up.
    pub fn from_pem_file(path: &Path) -> Result<Self, RsaKeyError> {
        let pem = std::fs::read_to_string(path).map_err(|e| RsaKeyError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        Self::from_pem(&pem)
    }

    /// The public key as SPKI PEM (`-----BEGIN PUBLIC KEY-----`), what
    /// clients expect in answer to a public-key request.
    pub fn public_pem(&self) -> Result<&str, RsaKeyError> {
        self.pair().map(|p| p.public_pem.as_str())
    }

    fn pair(&self) -> Result<&KeyPair, RsaKeyError> {
        self.pair
            .get_or_init(|| {
                let private = RsaPrivateKey::new(&mut rsa::rand_core::OsRng, self.bits)
                    .map_err(|e| RsaKeyError::Generate(e.to_string()))?;
                KeyPair::new(private)
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Modulus length in bytes: the length of every ciphertext.
    fn ciphertext_len(&self) -> Result<usize, RsaKeyError> {
        self.pair().map(|p| p.private.size())
    }

    /// RSA-OAEP (SHA-1, as MySQL uses) decryption, blinded against timing;
    /// PKCS#1 v1.5 with `legacy_padding` (what clients send to servers
    /// older than MySQL 8.0.5). Either failure is the same "denied" to
    /// the client, so padding errors are no oracle beyond timing.
    fn decrypt(
        &self,
        ciphertext: &[u8],
        legacy_padding: bool,
    ) -> Result<Option<Vec<u8>>, RsaKeyError> {
        let pair = self.pair()?;
        let mut rng = rsa::rand_core::OsRng;
        let plain = if legacy_padding {
            pair.private
                .decrypt_blinded(&mut rng, Pkcs1v15Encrypt, ciphertext)
        } else {
            pair.private
                .decrypt_blinded(&mut rng, Oaep::new::<Sha1>(), ciphertext)
        };
        Ok(plain.ok())
    }
}

// ---------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------

/// What [`Handshake::on_packet`] asks of the I/O layer next.
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
    pub user: String,
    /// The default database the client asked for (`None` if none or empty).
    pub database: Option<String>,
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
    /// Connection attributes (`_client_name`, `program_name`, …) in the
    /// order the client sent them.
    pub attrs: Vec<(String, String)>,
    /// The plugin that verified the password.
    pub plugin: Plugin,
    /// Whether the transport was TLS or a unix socket.
    pub secure: bool,
}

/// Why a login failed. The matching ERR packet has already been written
/// into `out`; flush it and close the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("access denied for user '{user}' (using password: {})", yes_no(*using_password))]
    AccessDenied { user: String, using_password: bool },
    #[error("user '{user}' offered a cleartext password over an insecure transport")]
    InsecureCleartext { user: String },
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

fn access_denied(user: &str, using_password: bool, suffix: &str) -> MysqlError {
    MysqlError {
        code: 1045,
        state: "28000".into(),
        message: format!(
            "Access denied for user '{user}'@'localhost' (using password: {}){suffix}",
            yes_no(using_password)
        ),
    }
}

// ---------------------------------------------------------------------------
// The state machine
// ---------------------------------------------------------------------------

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
    user: String,
    /// False when the user name is not UTF-8: such a user is never found.
    user_is_utf8: bool,
    database: Option<String>,
    capabilities: CapabilityFlags,
    mariadb_capabilities: MariadbCapabilities,
    charset: u16,
    max_packet: u32,
    attrs: Vec<(String, String)>,
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
    Known(&'a str),
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
        let (user, user_is_utf8) = decode_name(hello.user);
        self.session = Session {
            user,
            user_is_utf8,
            database: non_empty(hello.database),
            capabilities: hello.capabilities & self.capabilities(),
            mariadb_capabilities: hello.mariadb_capabilities & self.mariadb_capabilities(),
            charset: u16::from(hello.charset),
            max_packet: hello.max_packet,
            attrs: hello.attrs.unwrap_or_default(),
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
        let (user, user_is_utf8) = decode_name(req.user);
        self.session.user = user;
        self.session.user_is_utf8 = user_is_utf8;
        self.session.database = non_empty(Some(req.database));
        self.session.using_password = !is_empty_response(req.auth_response);
        if let Some(charset) = req.charset {
            self.session.charset = charset;
        }
        if let Some(attrs) = req.attrs {
            self.session.attrs = attrs;
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
            Some(_) if !self.session.user_is_utf8 => Account::Unknown,
            Some(users) => users
                .get(&self.session.user)
                .map_or(Account::Unknown, |pw| Account::Known(pw)),
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
                    Account::Known(pw) => native_matches(&self.nonce, pw, response),
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
            Account::Known("") if empty => {
                return Ok(self.finish(Plugin::CachingSha2Password, out));
            }
            Account::Known("") => return Err(self.denied()),
            Account::Known(_) | Account::Unknown if empty => return Err(self.denied()),
            Account::Known(pw) if self.config.cache.is_cached(&self.session.user, pw) => {
                if !sha2_matches(&self.nonce, pw, response) {
                    return Err(self.denied());
                }
                self.more_data(out, &[FAST_AUTH_SUCCESS]);
                return Ok(self.finish(Plugin::CachingSha2Password, out));
            }
            Account::Known(_) | Account::Unknown => {}
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
            && self
                .session
                .attrs
                .iter()
                .any(|(k, v)| k == "_client_name" && v == "MySQL Connector/J")
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
            Account::Known(pw) => {
                let ok = digest_eq(password, pw.as_bytes());
                if ok {
                    self.config.cache.insert(&self.session.user, pw);
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
        write_ok(out);
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

// ---------------------------------------------------------------------------
// Scrambles
// ---------------------------------------------------------------------------

/// A 20-byte challenge as MySQL makes them: 7-bit, never NUL (clients
/// treat it as a C string) nor `$`.
fn fresh_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    for b in &mut nonce {
        *b &= 0x7f;
        if *b == 0 || *b == b'$' {
            *b += 1;
        }
    }
    nonce
}

/// MySQL treats a missing response and a lone NUL alike: no password.
fn is_empty_response(response: &[u8]) -> bool {
    response.is_empty() || response == [0]
}

/// mysql_native_password: SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw))).
fn native_scramble(nonce: &[u8], password: &[u8]) -> [u8; 20] {
    let stage1: [u8; 20] = Sha1::digest(password).into();
    let stage2: [u8; 20] = Sha1::digest(stage1).into();
    let mut hasher = Sha1::new();
    hasher.update(nonce);
    hasher.update(stage2);
    let mask: [u8; 20] = hasher.finalize().into();
    xor(stage1, &mask)
}

/// caching_sha2_password: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + nonce).
fn sha2_scramble(nonce: &[u8], password: &[u8]) -> [u8; 32] {
    let stage1: [u8; 32] = Sha256::digest(password).into();
    let mut hasher = Sha256::new();
    hasher.update(Sha256::digest(stage1));
    hasher.update(nonce);
    let mask: [u8; 32] = hasher.finalize().into();
    xor(stage1, &mask)
}

fn xor<const N: usize>(mut a: [u8; N], b: &[u8; N]) -> [u8; N] {
    for (x, y) in a.iter_mut().zip(b) {
        *x ^= y;
    }
    a
}

/// An empty password expects an empty response; otherwise the scramble.
fn native_matches(nonce: &[u8], password: &str, response: &[u8]) -> bool {
    if password.is_empty() {
        return is_empty_response(response);
    }
    let expected = native_scramble(nonce, password.as_bytes());
    bool::from(expected.as_slice().ct_eq(response))
}

fn sha2_matches(nonce: &[u8], password: &str, response: &[u8]) -> bool {
    let expected = sha2_scramble(nonce, password.as_bytes());
    bool::from(expected.as_slice().ct_eq(response))
}

fn double_sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(Sha256::digest(bytes)).into()
}

/// Compares passwords without leaking their lengths or contents.
fn digest_eq(a: &[u8], b: &[u8]) -> bool {
    let (a, b): ([u8; 32], [u8; 32]) = (Sha256::digest(a).into(), Sha256::digest(b).into());
    bool::from(a.ct_eq(&b))
}

// ---------------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------------

/// The login's OK: nothing affected, autocommit on (a new session).
fn write_ok(out: &mut Packets) {
    response::ok(
        out,
        CapabilityFlags::CLIENT_PROTOCOL_41,
        0,
        0,
        StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        0,
        "",
    );
}

fn put_nul_str(b: &mut bytes::BytesMut, s: &[u8]) {
    b.put_slice(s);
    b.put_u8(0);
}

/// A user or database name as text; `false` when it was not UTF-8.
fn decode_name(bytes: &[u8]) -> (String, bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), true),
        Err(_) => (String::from_utf8_lossy(bytes).into_owned(), false),
    }
}

fn non_empty(name: Option<&[u8]>) -> Option<String> {
    name.filter(|n| !n.is_empty()).map(|n| decode_name(n).0)
}

/// A bounds-checked cursor over a payload; `None` means truncated.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn nul_str(&mut self) -> Option<&'a [u8]> {
        let end = self.0.iter().position(|&b| b == 0)?;
        let s = &self.0[..end];
        self.0 = &self.0[end + 1..];
        Some(s)
    }

    /// A NUL-terminated string, or the rest if the NUL is missing (some
    /// clients omit it on the last field).
    fn nul_str_or_rest(&mut self) -> &'a [u8] {
        match self.nul_str() {
            Some(s) => s,
            None => std::mem::take(&mut self.0),
        }
    }

    fn lenenc_int(&mut self) -> Option<u64> {
        match self.u8()? {
            n @ 0..=0xfa => Some(u64::from(n)),
            0xfc => self.u16().map(u64::from),
            0xfd => self
                .take(3)
                .map(|b| u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16),
            0xfe => self.take(8).map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a)
            }),
            _ => None,
        }
    }

    fn lenenc_bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.lenenc_int()?).ok()?;
        self.take(len)
    }

    /// Connection attributes: a lenenc total length, then key/value pairs.
    fn attrs(&mut self) -> Option<Vec<(String, String)>> {
        let mut block = Reader(self.lenenc_bytes()?);
        let mut attrs = Vec::new();
        while !block.is_empty() {
            let key = String::from_utf8_lossy(block.lenenc_bytes()?).into_owned();
            let value = String::from_utf8_lossy(block.lenenc_bytes()?).into_owned();
            attrs.push((key, value));
        }
        Some(attrs)
    }
}

enum ClientHello<'a> {
    SslRequest,
    Response(HandshakeResponse<'a>),
}

/// HandshakeResponse41 as sent (parsed by the client's own flags).
struct HandshakeResponse<'a> {
    capabilities: CapabilityFlags,
    /// Read only when the client cleared CLIENT_MYSQL, as MariaDB does.
    mariadb_capabilities: MariadbCapabilities,
    max_packet: u32,
    charset: u8,
    user: &'a [u8],
    auth_response: &'a [u8],
    database: Option<&'a [u8]>,
    /// `None` without `CLIENT_PLUGIN_AUTH`.
    plugin: Option<&'a [u8]>,
    attrs: Option<Vec<(String, String)>>,
}

const BAD: AuthFailure = AuthFailure::BadHandshake("truncated handshake response");

fn parse_client_hello(payload: &[u8]) -> Result<ClientHello<'_>, AuthFailure> {
    let mut r = Reader(payload);
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

struct ChangeUser<'a> {
    user: &'a [u8],
    auth_response: &'a [u8],
    database: &'a [u8],
    charset: Option<u16>,
    attrs: Option<Vec<(String, String)>>,
}

/// COM_CHANGE_USER's body (after the command byte), laid out by the
/// capabilities negotiated at login.
fn parse_change_user(body: &[u8], caps: CapabilityFlags) -> Result<ChangeUser<'_>, AuthFailure> {
    const BAD: AuthFailure = AuthFailure::BadHandshake("truncated COM_CHANGE_USER");
    let mut r = Reader(body);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::decode;
    use bytes::Bytes;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{
        AuthPlugin, AuthSwitchRequest, ComChangeUser, ComChangeUserMoreData, CommonOkPacket,
        ErrPacket, HandshakePacket, HandshakeResponse, OkPacketDeserializer, SslRequest,
    };
    use mysql_common::proto::MySerialize;
    use mysql_common::scramble::{scramble_native, scramble_sha256};
    use std::sync::LazyLock;

    /// One key for the whole test run: generation is the slow part.
    static KEY: LazyLock<Arc<RsaKey>> = LazyLock::new(|| Arc::new(RsaKey::generated()));

    const USERS: &[(&str, &str)] = &[("app", "s3cret"), ("nopw", ""), ("üser", "pässword")];

    fn config(users: Option<&[(&str, &str)]>, plugin: Plugin, tls: bool) -> Arc<AuthConfig> {
        Arc::new(AuthConfig {
            server_version: "11.4.0-myquic".into(),
            users: users.map(|u| {
                u.iter()
                    .map(|(u, p)| (u.to_string(), p.to_string()))
                    .collect()
            }),
            default_plugin: plugin,
            tls_available: tls,
            cache: Arc::new(AuthCache::new()),
            rsa_key: Arc::clone(&KEY),
        })
    }

    fn client_caps() -> CapabilityFlags {
        CapabilityFlags::CLIENT_PROTOCOL_41
            | CapabilityFlags::CLIENT_LONG_PASSWORD
            | CapabilityFlags::CLIENT_SECURE_CONNECTION
            | CapabilityFlags::CLIENT_TRANSACTIONS
            | CapabilityFlags::CLIENT_MULTI_RESULTS
            | CapabilityFlags::CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | CapabilityFlags::CLIENT_DEPRECATE_EOF
            // Not offered by us: must not survive the intersection.
            | CapabilityFlags::CLIENT_COMPRESS
    }

    fn ser(x: &impl MySerialize) -> Vec<u8> {
        let mut buf = Vec::new();
        x.serialize(&mut buf);
        buf
    }

    fn packets(out: &mut Packets) -> Vec<Packet> {
        let mut buf = out.take();
        let mut v = Vec::new();
        while let Some(p) = decode(&mut buf, usize::MAX).expect("frame") {
            v.push(p);
        }
        assert!(buf.is_empty());
        v
    }

    /// Runs the greeting and parses it with mysql_common's client parser.
    fn greet(hs: &mut Handshake) -> (HandshakePacket<'static>, Vec<u8>) {
        let mut out = Packets::default();
        hs.greeting(&mut out);
        let ps = packets(&mut out);
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].seq, 0);
        let greeting: HandshakePacket = ParseBuf(&ps[0].payload).parse(()).expect("greeting");
        let nonce = greeting.nonce();
        (greeting.into_owned(), nonce)
    }

    fn feed(
        hs: &mut Handshake,
        seq: u8,
        payload: &[u8],
    ) -> (Result<Progress, AuthFailure>, Vec<Packet>) {
        let mut out = Packets::default();
        let r = hs.on_packet(
            &Packet {
                seq,
                payload: Bytes::copy_from_slice(payload),
            },
            &mut out,
        );
        (r, packets(&mut out))
    }

    fn response(
        user: &str,
        scramble: Option<Vec<u8>>,
        db: Option<&str>,
        plugin: Option<AuthPlugin<'static>>,
        attrs: Option<HashMap<String, String>>,
    ) -> Vec<u8> {
        ser(&HandshakeResponse::new(
            scramble,
            (8, 0, 36),
            Some(user.as_bytes().to_vec()),
            db.map(|d| d.as_bytes().to_vec()),
            plugin,
            client_caps(),
            attrs,
            16 << 20,
        ))
    }

    fn assert_ok(p: &Packet, seq: u8) {
        assert_eq!(p.seq, seq);
        let ok: OkPacketDeserializer<CommonOkPacket> = ParseBuf(&p.payload)
            .parse(client_caps())
            .expect("OK packet");
        let ok = ok.into_inner();
        assert_eq!(ok.affected_rows(), 0);
        assert_eq!(ok.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
    }

    fn assert_err(p: &Packet, code: u16, state: &str, message_part: &str) {
        let err: ErrPacket = ParseBuf(&p.payload)
            .parse(client_caps())
            .expect("ERR packet");
        let err = err.server_error();
        assert_eq!(err.error_code(), code);
        assert_eq!(
            err.sql_state_ref()
                .map(|s| s.as_str().into_owned())
                .as_deref(),
            Some(state)
        );
        let msg = err.message_str();
        assert!(msg.contains(message_part), "{msg:?} lacks {message_part:?}");
    }

    fn done(r: Result<Progress, AuthFailure>) -> Authenticated {
        match r {
            Ok(Progress::Done(a)) => a,
            other => panic!("expected Done, got {other:?}"),
        }
    }

    /// A mysql_common client's RSA answer: (password + NUL) XOR nonce.
    fn rsa_answer(pem: &[u8], password: &str, nonce: &[u8]) -> Vec<u8> {
        let mut pass = password.as_bytes().to_vec();
        pass.push(0);
        for (i, b) in pass.iter_mut().enumerate() {
            *b ^= nonce[i % nonce.len()];
        }
        mysql_common::crypto::encrypt(&pass, pem)
    }

    #[test]
    fn greeting_parses_with_mysql_common() {
        let mut hs = Handshake::new(
            config(Some(USERS), Plugin::CachingSha2Password, false),
            42,
            false,
        );
        let (g, nonce) = greet(&mut hs);
        assert_eq!(g.protocol_version(), 10);
        assert_eq!(g.server_version_str(), "11.4.0-myquic");
        assert_eq!(g.server_version_parsed(), Some((11, 4, 0)));
        assert_eq!(g.connection_id(), 42);
        assert_eq!(g.capabilities(), server_capabilities());
        assert!(!g.capabilities().contains(CapabilityFlags::CLIENT_SSL));
        assert_eq!(g.default_collation(), 45);
        assert_eq!(g.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        assert_eq!(g.auth_plugin(), Some(AuthPlugin::CachingSha2Password));
        assert_eq!(nonce, hs.nonce);
        assert_eq!(
            g.scramble_2_ref().map(<[u8]>::len),
            Some(13),
            "12 bytes + NUL"
        );
        assert!(nonce.iter().all(|&b| b != 0 && b < 0x80 && b != b'$'));

        let mut tls = Handshake::new(config(None, Plugin::MysqlNativePassword, true), 7, false);
        let (g2, nonce2) = greet(&mut tls);
        assert!(g2.capabilities().contains(CapabilityFlags::CLIENT_SSL));
        assert_eq!(g2.auth_plugin(), Some(AuthPlugin::MysqlNativePassword));
        assert_ne!(nonce, nonce2, "every connection gets a fresh nonce");
    }

    #[test]
    fn native_login_and_session_fields() {
        let mut hs = Handshake::new(
            config(Some(USERS), Plugin::MysqlNativePassword, false),
            1,
            false,
        );
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
        let attrs = HashMap::from([
            ("_client_name".to_string(), "libmysql".to_string()),
            ("program_name".to_string(), "mysql".to_string()),
        ]);
        let payload = response(
            "app",
            scramble,
            Some("shop"),
            Some(AuthPlugin::MysqlNativePassword),
            Some(attrs.clone()),
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        let a = done(r);
        assert_eq!(ps.len(), 1);
        assert_ok(&ps[0], 2);
        assert_eq!(a.user, "app");
        assert_eq!(a.database.as_deref(), Some("shop"));
        assert_eq!(a.plugin, Plugin::MysqlNativePassword);
        assert_eq!(a.charset, 45);
        assert_eq!(a.max_packet, 16 << 20);
        assert!(!a.secure);
        assert_eq!(a.attrs.iter().cloned().collect::<HashMap<_, _>>(), attrs);
        let caps = a.capabilities;
        assert!(
            caps.contains(
                CapabilityFlags::CLIENT_DEPRECATE_EOF | CapabilityFlags::CLIENT_PLUGIN_AUTH
            )
        );
        assert!(!caps.contains(CapabilityFlags::CLIENT_COMPRESS));
        assert!(
            !caps.contains(CapabilityFlags::CLIENT_MULTI_STATEMENTS),
            "client did not ask"
        );
        // The machine is done: more packets are a protocol error.
        let (r, ps) = feed(&mut hs, 3, b"x");
        assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
        assert_err(&ps[0], 1043, "08S01", "Bad handshake");
    }

    #[test]
    fn native_wrong_password_unknown_user_and_empty_password() {
        let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
        let attempt = |user: &str, password: &str| {
            let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
            let (_, nonce) = greet(&mut hs);
            let scramble = scramble_native(&nonce, password.as_bytes()).map(|s| s.to_vec());
            let payload = response(
                user,
                scramble,
                None,
                Some(AuthPlugin::MysqlNativePassword),
                None,
            );
            feed(&mut hs, 1, &payload)
        };
        let (r, ps) = attempt("app", "wrong");
        assert_eq!(
            r,
            Err(AuthFailure::AccessDenied {
                user: "app".into(),
                using_password: true
            })
        );
        assert_eq!(ps[0].seq, 2);
        assert_err(
            &ps[0],
            1045,
            "28000",
            "Access denied for user 'app'@'localhost' (using password: YES)",
        );
        let (r, ps) = attempt("ghost", "s3cret");
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        assert_err(
            &ps[0],
            1045,
            "28000",
            "'ghost'@'localhost' (using password: YES)",
        );
        let (_, ps) = attempt("app", "");
        assert_err(&ps[0], 1045, "28000", "(using password: NO)");
        done(attempt("nopw", "").0);
        assert!(attempt("nopw", "something").0.is_err());
        done(attempt("üser", "pässword").0);
    }

    #[test]
    fn caching_sha2_full_auth_over_rsa_then_fast_path() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        // First login: not cached ⇒ full authentication with the RSA key.
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(r, Ok(Progress::Continue));
        assert_eq!((ps[0].seq, &ps[0].payload[..]), (2, &[1u8, 4][..]));
        let (r, ps) = feed(&mut hs, 3, &[2]);
        assert_eq!(r, Ok(Progress::Continue));
        assert_eq!(ps[0].seq, 4);
        assert_eq!(ps[0].payload[0], 1);
        let pem = &ps[0].payload[1..];
        assert!(pem.starts_with(b"-----BEGIN PUBLIC KEY-----"));
        let (r, ps) = feed(&mut hs, 5, &rsa_answer(pem, "s3cret", &nonce));
        let a = done(r);
        assert_eq!(a.plugin, Plugin::CachingSha2Password);
        assert_ok(&ps[0], 6);
        assert_eq!(cfg.cache.len(), 1);

        // Second login: cached ⇒ 01 03 and OK.
        let mut hs = Handshake::new(Arc::clone(&cfg), 2, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        done(r);
        assert_eq!(ps.len(), 2);
        assert_eq!((ps[0].seq, &ps[0].payload[..]), (2, &[1u8, 3][..]));
        assert_ok(&ps[1], 3);

        // Cached, wrong scramble ⇒ denied at once (MySQL semantics).
        let mut hs = Handshake::new(Arc::clone(&cfg), 3, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"nope").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        assert_err(&ps[0], 1045, "28000", "using password: YES");

        // A changed password invalidates the cache entry.
        let mut changed = (*cfg).clone();
        changed.users = Some(HashMap::from([("app".to_string(), "n3w".to_string())]));
        let mut hs = Handshake::new(Arc::new(changed), 4, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"n3w").map(|s| s.to_vec());
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (_, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
    }

    /// As MariaDB: CLIENT_MYSQL cleared and extended metadata offered in
    /// the greeting's last reserved bytes; taken only from a client that
    /// cleared CLIENT_MYSQL too, and only for a MariaDB version.
    #[test]
    fn mariadb_extended_metadata_is_negotiated() {
        use crate::mysql::MariadbCapabilities as Ext;
        let login = |version: &str, client_caps: CapabilityFlags, ext: Ext| {
            let mut cfg = (*config(Some(USERS), Plugin::MysqlNativePassword, false)).clone();
            cfg.server_version = version.into();
            let mut hs = Handshake::new(Arc::new(cfg), 1, false);
            let (g, nonce) = greet(&mut hs);
            let payload = ser(&HandshakeResponse::new(
                Some(scramble_native(&nonce, b"s3cret").unwrap().to_vec()),
                (10, 11, 0),
                Some(b"app".to_vec()),
                None::<Vec<u8>>,
                Some(AuthPlugin::MysqlNativePassword),
                client_caps,
                None,
                16 << 20,
            )
            .with_mariadb_ext_capabilities(ext));
            (g, done(feed(&mut hs, 1, &payload).0))
        };
        let mariadb = "5.5.5-10.11.19-MariaDB";
        let mariadb_client = client_caps() - CapabilityFlags::CLIENT_LONG_PASSWORD;
        let all = Ext::MARIADB_CLIENT_EXTENDED_METADATA | Ext::MARIADB_CLIENT_STMT_BULK_OPERATIONS;

        let (g, a) = login(mariadb, mariadb_client, all);
        assert!(
            !g.capabilities()
                .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
        );
        assert_eq!(
            g.mariadb_ext_capabilities(),
            Ext::MARIADB_CLIENT_EXTENDED_METADATA
        );
        assert_eq!(
            a.mariadb_capabilities,
            Ext::MARIADB_CLIENT_EXTENDED_METADATA
        );
        assert_eq!(a.column_style, ColumnStyle::MariadbExtended);

        // A client that kept CLIENT_MYSQL: those bytes are filler.
        let (_, a) = login(mariadb, client_caps(), all);
        assert_eq!(a.mariadb_capabilities, Ext::empty());
        assert_eq!(a.column_style, ColumnStyle::Mariadb);

        let (g, a) = login("8.0.36-myquic", mariadb_client, all);
        assert!(
            g.capabilities()
                .contains(CapabilityFlags::CLIENT_LONG_PASSWORD)
        );
        assert_eq!(g.mariadb_ext_capabilities(), Ext::empty());
        assert_eq!(a.mariadb_capabilities, Ext::empty());
        assert_eq!(a.column_style, ColumnStyle::Mysql);
    }

    /// Connector/J against a "5.5.5-…" (MariaDB) version: auth data
    /// without the 0x01 prefix, RSA with PKCS#1 v1.5; other clients and
    /// versions keep MySQL 8's shape.
    #[test]
    fn caching_sha2_for_connector_j_on_a_mariadb_version() {
        use rsa::pkcs8::DecodePublicKey;
        let mut mariadb = (*config(Some(USERS), Plugin::CachingSha2Password, false)).clone();
        mariadb.server_version = "5.5.5-10.11.19-MariaDB".into();
        let cfg = Arc::new(mariadb);
        let connector_j = || {
            Some(HashMap::from([(
                "_client_name".to_string(),
                "MySQL Connector/J".to_string(),
            )]))
        };
        let login = |hs: &mut Handshake, attrs| {
            let (_, nonce) = greet(hs);
            let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
            let payload = response(
                "app",
                scramble,
                None,
                Some(AuthPlugin::CachingSha2Password),
                attrs,
            );
            (nonce, feed(hs, 1, &payload))
        };

        // Another client: MySQL 8's 01 04.
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, (_, ps)) = login(&mut hs, None);
        assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);

        // Connector/J: 04, then the bare PEM, then PKCS#1 v1.5.
        let mut hs = Handshake::new(Arc::clone(&cfg), 2, false);
        let (nonce, (r, ps)) = login(&mut hs, connector_j());
        assert_eq!(r, Ok(Progress::Continue));
        assert_eq!(&ps[0].payload[..], &[4u8][..]);
        let (_, ps) = feed(&mut hs, 3, &[2]);
        let pem = std::str::from_utf8(&ps[0].payload).unwrap();
        assert!(pem.starts_with("-----BEGIN PUBLIC KEY-----"));
        let public = rsa::RsaPublicKey::from_public_key_pem(pem).unwrap();
        let mut pass = b"s3cret\0".to_vec();
        for (i, b) in pass.iter_mut().enumerate() {
            *b ^= nonce[i % nonce.len()];
        }
        let ciphertext = public
            .encrypt(&mut rsa::rand_core::OsRng, Pkcs1v15Encrypt, &pass)
            .unwrap();
        let (r, ps) = feed(&mut hs, 5, &ciphertext);
        done(r);
        assert_ok(&ps[0], 6);

        // Cached now: a bare 03, then OK.
        let mut hs = Handshake::new(Arc::clone(&cfg), 3, false);
        let (_, (r, ps)) = login(&mut hs, connector_j());
        done(r);
        assert_eq!(&ps[0].payload[..], &[3u8][..]);
        assert_ok(&ps[1], 3);
    }

    #[test]
    fn caching_sha2_rsa_without_key_request_and_wrong_password() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let pem = KEY.public_pem().expect("key").as_bytes().to_vec();
        let login = |password: &str| {
            let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
            let (_, nonce) = greet(&mut hs);
            let scramble = scramble_sha256(&nonce, password.as_bytes()).map(|s| s.to_vec());
            let payload = response(
                "app",
                scramble,
                None,
                Some(AuthPlugin::CachingSha2Password),
                None,
            );
            assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
            // The client already knows the key (--server-public-key-path).
            feed(&mut hs, 3, &rsa_answer(&pem, password, &nonce))
        };
        let (r, ps) = login("wrong");
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        assert_err(&ps[0], 1045, "28000", "'app'@'localhost'");
        assert!(cfg.cache.is_empty(), "a failure caches nothing");
        let (r, ps) = login("s3cret");
        done(r);
        assert_ok(&ps[0], 4);
        // Garbage of the right length is a failed decryption, not a panic.
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"x").map(|s| s.to_vec());
        cfg.cache.clear();
        let payload = response(
            "app",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
        let (r, _) = feed(&mut hs, 3, &[0x55; 256]);
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
    }

    #[test]
    fn caching_sha2_cleartext_only_on_secure_transports() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let start = |secure: bool| {
            let mut hs = Handshake::new(Arc::clone(&cfg), 1, secure);
            let (_, nonce) = greet(&mut hs);
            let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
            let payload = response(
                "app",
                scramble,
                None,
                Some(AuthPlugin::CachingSha2Password),
                None,
            );
            let (_, ps) = feed(&mut hs, 1, &payload);
            assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
            hs
        };
        // Insecure TCP: refused, with a message that says what to do.
        let mut hs = start(false);
        let (r, ps) = feed(&mut hs, 3, b"s3cret\0");
        assert_eq!(
            r,
            Err(AuthFailure::InsecureCleartext { user: "app".into() })
        );
        assert_err(&ps[0], 1045, "28000", "secure connection");
        assert!(cfg.cache.is_empty());
        // Unix socket: accepted.
        let mut hs = start(true);
        let a = done(feed(&mut hs, 3, b"s3cret\0").0);
        assert!(a.secure);
        assert_eq!(cfg.cache.len(), 1);
        // Unix socket, wrong password.
        cfg.cache.clear();
        let mut hs = start(true);
        let (r, _) = feed(&mut hs, 3, b"s3cre\0");
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        // A key request is honoured even on a unix socket (some clients do
        // not count it as secure); a cleartext answer is then still
        // refused on TCP only.
        for secure in [true, false] {
            cfg.cache.clear();
            let mut hs = start(secure);
            let (r, ps) = feed(&mut hs, 3, &[2]);
            assert_eq!(r, Ok(Progress::Continue));
            assert!(ps[0].payload[1..].starts_with(b"-----BEGIN PUBLIC KEY-----"));
            let (r, _) = feed(&mut hs, 5, b"s3cret\0");
            assert_eq!(r.is_ok(), secure, "{r:?}");
            if !secure {
                assert!(matches!(r, Err(AuthFailure::InsecureCleartext { .. })));
            }
        }
    }

    #[test]
    fn caching_sha2_unknown_user_looks_like_an_uncached_one() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let mut hs = Handshake::new(cfg, 1, true);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response(
            "ghost",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (_, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
        let (r, ps) = feed(&mut hs, 3, b"s3cret\0");
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        assert_err(
            &ps[0],
            1045,
            "28000",
            "'ghost'@'localhost' (using password: YES)",
        );
    }

    #[test]
    fn caching_sha2_empty_passwords() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let login = |user: &str, scramble: Option<Vec<u8>>| {
            let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
            greet(&mut hs);
            let payload = response(
                user,
                scramble,
                None,
                Some(AuthPlugin::CachingSha2Password),
                None,
            );
            feed(&mut hs, 1, &payload)
        };
        let (r, ps) = login("nopw", None);
        done(r);
        assert_ok(&ps[0], 2);
        let (r, ps) = login("app", None);
        assert!(r.is_err());
        assert_err(&ps[0], 1045, "28000", "(using password: NO)");
        assert!(login("nopw", Some(vec![7; 32])).0.is_err());
        assert!(login("ghost", None).0.is_err());
    }

    #[test]
    fn auth_switch_when_plugins_differ() {
        for (default, client_plugin) in [
            (Plugin::CachingSha2Password, AuthPlugin::MysqlNativePassword),
            (Plugin::MysqlNativePassword, AuthPlugin::CachingSha2Password),
            (Plugin::MysqlNativePassword, AuthPlugin::MysqlClearPassword),
            (Plugin::MysqlNativePassword, AuthPlugin::Ed25519),
            (
                Plugin::MysqlNativePassword,
                AuthPlugin::Other(b"".as_slice().into()),
            ),
        ] {
            let mut hs = Handshake::new(config(Some(USERS), default, false), 1, true);
            let (_, nonce) = greet(&mut hs);
            let payload = response(
                "app",
                Some(vec![1, 2, 3]),
                None,
                Some(client_plugin.clone()),
                None,
            );
            let (r, ps) = feed(&mut hs, 1, &payload);
            assert_eq!(r, Ok(Progress::Continue), "{client_plugin:?}");
            assert_eq!(ps[0].seq, 2);
            let switch: AuthSwitchRequest = ParseBuf(&ps[0].payload).parse(()).expect("switch");
            assert_eq!(switch.auth_plugin().as_bytes(), default.name().as_bytes());
            assert_eq!(switch.plugin_data(), &nonce[..]);
            let data = AuthPlugin::from_bytes(default.name().as_bytes())
                .gen_data(Some("s3cret"), switch.plugin_data())
                .expect("scramble");
            let (r, ps) = feed(&mut hs, 3, &data);
            match default {
                Plugin::MysqlNativePassword => {
                    done(r);
                    assert_ok(&ps[0], 4);
                }
                Plugin::CachingSha2Password => {
                    assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
                    assert_eq!(ps[0].seq, 4);
                    done(feed(&mut hs, 5, b"s3cret\0").0);
                }
            }
        }
    }

    #[test]
    fn client_without_plugin_auth_is_verified_as_native() {
        let mut hs = Handshake::new(
            config(Some(USERS), Plugin::CachingSha2Password, false),
            1,
            false,
        );
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = response("app", scramble, None, None, None);
        let (r, ps) = feed(&mut hs, 1, &payload);
        let a = done(r);
        assert_eq!(a.plugin, Plugin::MysqlNativePassword);
        assert!(!a.capabilities.contains(CapabilityFlags::CLIENT_PLUGIN_AUTH));
        assert_ok(&ps[0], 2);
    }

    #[test]
    fn tls_upgrade_continues_the_sequence_and_counts_as_secure() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, true);
        let mut hs = Handshake::new(Arc::clone(&cfg), 9, false);
        let (_, nonce) = greet(&mut hs);
        let caps =
            client_caps() | CapabilityFlags::CLIENT_SSL | CapabilityFlags::CLIENT_PLUGIN_AUTH;
        let ssl = ser(&SslRequest::new(caps, 16 << 20, 45));
        assert_eq!(ssl.len(), 32);
        let (r, ps) = feed(&mut hs, 1, &ssl);
        assert_eq!(r, Ok(Progress::StartTls));
        assert!(ps.is_empty());
        assert!(hs.is_secure());
        let scramble = scramble_sha256(&nonce, b"s3cret").map(|s| s.to_vec());
        let payload = ser(&HandshakeResponse::new(
            scramble,
            (8, 0, 36),
            Some(b"app".to_vec()),
            None::<Vec<u8>>,
            Some(AuthPlugin::CachingSha2Password),
            caps,
            None,
            16 << 20,
        ));
        let (r, ps) = feed(&mut hs, 2, &payload);
        assert_eq!(r, Ok(Progress::Continue));
        assert_eq!((ps[0].seq, &ps[0].payload[..]), (3, &[1u8, 4][..]));
        let (r, ps) = feed(&mut hs, 4, b"s3cret\0");
        let a = done(r);
        assert!(a.secure);
        assert!(a.capabilities.contains(CapabilityFlags::CLIENT_SSL));
        assert_ok(&ps[0], 5);
    }

    #[test]
    fn ssl_request_without_tls_and_ssl_flag_without_request_are_bad_handshakes() {
        let mut hs = Handshake::new(config(None, Plugin::CachingSha2Password, false), 1, false);
        greet(&mut hs);
        let ssl = ser(&SslRequest::new(
            client_caps() | CapabilityFlags::CLIENT_SSL,
            1 << 24,
            45,
        ));
        let (r, ps) = feed(&mut hs, 1, &ssl);
        assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
        assert_err(&ps[0], 1043, "08S01", "Bad handshake");

        let mut hs = Handshake::new(config(None, Plugin::CachingSha2Password, true), 1, false);
        greet(&mut hs);
        let payload = ser(&HandshakeResponse::new(
            None::<Vec<u8>>,
            (8, 0, 36),
            Some(b"app".to_vec()),
            None::<Vec<u8>>,
            Some(AuthPlugin::CachingSha2Password),
            client_caps() | CapabilityFlags::CLIENT_SSL,
            None,
            16 << 20,
        ));
        assert!(matches!(
            feed(&mut hs, 1, &payload).0,
            Err(AuthFailure::BadHandshake(_))
        ));
    }

    #[test]
    fn malformed_responses_are_bad_handshakes_never_panics() {
        let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let attrs = HashMap::from([("k".to_string(), "v".repeat(300))]);
        let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
        let full = response(
            "app",
            scramble,
            Some("db"),
            Some(AuthPlugin::MysqlNativePassword),
            Some(attrs),
        );
        for len in 0..full.len() {
            let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
            greet(&mut hs);
            let (r, ps) = feed(&mut hs, 1, &full[..len]);
            // Truncations inside the trailing NUL-or-rest fields may parse;
            // none may panic, and every failure carries an ERR packet.
            if let Err(e) = r {
                assert_eq!(ps.len(), 1, "{e}");
            }
        }
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        let (r, ps) = feed(&mut hs, 1, &full[..20]);
        assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
        assert_err(&ps[0], 1043, "08S01", "Bad handshake");
        // Pre-4.1 clients are refused.
        let mut old = full.clone();
        old[0] &= !0x0200u32.to_le_bytes()[0];
        old[1] &= !(CapabilityFlags::CLIENT_PROTOCOL_41.bits() >> 8) as u8;
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        assert!(matches!(
            feed(&mut hs, 1, &old).0,
            Err(AuthFailure::BadHandshake(_))
        ));
    }

    #[test]
    fn out_of_order_and_out_of_place_packets() {
        let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
        let (r, ps) = feed(&mut hs, 0, b"early");
        assert!(matches!(
            r,
            Err(AuthFailure::OutOfOrder { .. }) | Err(AuthFailure::BadHandshake(_))
        ));
        assert_eq!(ps.len(), 1);
        let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
        greet(&mut hs);
        let (r, ps) = feed(&mut hs, 5, &response("x", None, None, None, None));
        assert_eq!(
            r,
            Err(AuthFailure::OutOfOrder {
                expected: 1,
                got: 5
            })
        );
        assert_err(&ps[0], 1156, "08S01", "out of order");
    }

    #[test]
    fn open_mode_accepts_anyone_with_a_proper_exchange() {
        let cfg = config(None, Plugin::CachingSha2Password, false);
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_sha256(&nonce, b"whatever").map(|s| s.to_vec());
        let payload = response(
            "anyone",
            scramble,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        assert_eq!(done(r).user, "anyone");
        assert_eq!(&ps[0].payload[..], &[1u8, 3][..]);
        assert_ok(&ps[1], 3);
        // Empty password: OK straight away.
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        let payload = response(
            "anyone",
            None,
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        let (r, ps) = feed(&mut hs, 1, &payload);
        done(r);
        assert_ok(&ps[0], 2);
        // Native, after a switch.
        let mut hs = Handshake::new(config(None, Plugin::MysqlNativePassword, false), 1, false);
        greet(&mut hs);
        let payload = response(
            "a",
            Some(vec![1; 32]),
            None,
            Some(AuthPlugin::CachingSha2Password),
            None,
        );
        assert_eq!(feed(&mut hs, 1, &payload).0, Ok(Progress::Continue));
        done(feed(&mut hs, 3, &[9; 20]).0);
    }

    fn logged_in(cfg: &Arc<AuthConfig>) -> (Handshake, Vec<u8>) {
        let mut hs = Handshake::new(Arc::clone(cfg), 1, true);
        let (_, nonce) = greet(&mut hs);
        let plugin = AuthPlugin::from_bytes(cfg.default_plugin.name().as_bytes()).into_owned();
        let scramble = plugin.gen_data(Some("s3cret"), &nonce).map(|d| d.to_vec());
        // Announce attributes so that CLIENT_CONNECT_ATTRS is negotiated.
        let payload = response(
            "app",
            scramble,
            Some("shop"),
            Some(plugin),
            Some(HashMap::new()),
        );
        let (r, _) = feed(&mut hs, 1, &payload);
        if r == Ok(Progress::Continue) {
            done(feed(&mut hs, 3, b"s3cret\0").0);
        } else {
            done(r);
        }
        (hs, nonce)
    }

    fn change_user_body(user: &str, db: &str, charset: u16, attrs: bool) -> Vec<u8> {
        let more = ComChangeUserMoreData::new(charset)
            .with_auth_plugin(Some(AuthPlugin::MysqlNativePassword))
            .with_connect_attributes(
                attrs.then(|| HashMap::from([("a".to_string(), "b".to_string())])),
            );
        let cmd = ComChangeUser::new()
            .with_user(Some(user.as_bytes()))
            .with_database(Some(db.as_bytes()))
            .with_auth_plugin_data(Some(&[1u8; 20][..]))
            .with_more_data(Some(more));
        let bytes = ser(&cmd);
        assert_eq!(bytes[0], 0x11);
        bytes[1..].to_vec()
    }

    #[test]
    fn change_user_switches_with_a_fresh_nonce() {
        for plugin in [Plugin::MysqlNativePassword, Plugin::CachingSha2Password] {
            let cfg = config(Some(USERS), plugin, false);
            let (mut hs, old_nonce) = logged_in(&cfg);
            let mut out = Packets::default();
            let body = change_user_body("üser", "other", 33, true);
            assert_eq!(hs.change_user(0, &body, &mut out), Ok(Progress::Continue));
            let ps = packets(&mut out);
            assert_eq!(ps[0].seq, 1);
            let switch: AuthSwitchRequest = ParseBuf(&ps[0].payload).parse(()).expect("switch");
            assert_eq!(switch.auth_plugin().as_bytes(), plugin.name().as_bytes());
            assert_ne!(switch.plugin_data(), &old_nonce[..]);
            let data = AuthPlugin::from_bytes(plugin.name().as_bytes())
                .gen_data(Some("pässword"), switch.plugin_data())
                .expect("scramble");
            let (r, ps) = feed(&mut hs, 2, &data);
            let r = if plugin == Plugin::CachingSha2Password {
                // Secure transport (unix socket): cleartext full auth.
                assert_eq!(&ps[0].payload[..], &[1u8, 4][..]);
                feed(&mut hs, 4, "pässword\0".as_bytes()).0
            } else {
                assert_ok(&ps[0], 3);
                r
            };
            let a = done(r);
            assert_eq!(a.user, "üser");
            assert_eq!(a.database.as_deref(), Some("other"));
            assert_eq!(a.charset, 33);
            assert_eq!(a.attrs, vec![("a".to_string(), "b".to_string())]);
        }
    }

    #[test]
    fn change_user_failures() {
        let cfg = config(Some(USERS), Plugin::MysqlNativePassword, false);
        let (mut hs, _) = logged_in(&cfg);
        let mut out = Packets::default();
        let body = change_user_body("app", "", 45, false);
        assert_eq!(hs.change_user(0, &body, &mut out), Ok(Progress::Continue));
        let switch = packets(&mut out).remove(0);
        let switch: AuthSwitchRequest = ParseBuf(&switch.payload).parse(()).expect("switch");
        let wrong = scramble_native(switch.plugin_data(), b"wrong").expect("scramble");
        let (r, ps) = feed(&mut hs, 2, &wrong);
        assert!(matches!(r, Err(AuthFailure::AccessDenied { .. })));
        assert_err(&ps[0], 1045, "28000", "'app'@'localhost'");
        assert_eq!(ps[0].seq, 3);

        // Truncated body.
        let (mut hs, _) = logged_in(&cfg);
        let mut out = Packets::default();
        let r = hs.change_user(0, b"app", &mut out);
        assert!(matches!(r, Err(AuthFailure::BadHandshake(_))));
        assert_err(&packets(&mut out)[0], 1043, "08S01", "Bad handshake");

        // Before login.
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        greet(&mut hs);
        let mut out = Packets::default();
        assert!(hs.change_user(0, &body, &mut out).is_err());
    }

    #[test]
    fn change_user_without_plugin_auth_verifies_native_on_the_old_nonce() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let mut hs = Handshake::new(Arc::clone(&cfg), 1, false);
        let (_, nonce) = greet(&mut hs);
        let scramble = scramble_native(&nonce, b"s3cret").map(|s| s.to_vec());
        done(feed(&mut hs, 1, &response("app", scramble, None, None, None)).0);
        let mut body = b"nopw\0".to_vec();
        body.push(0); // empty auth response (1-byte length)
        body.extend_from_slice(b"db2\0");
        let mut out = Packets::default();
        let a = done(hs.change_user(0, &body, &mut out));
        assert_eq!(
            (a.user.as_str(), a.database.as_deref()),
            ("nopw", Some("db2"))
        );
        assert_eq!(a.charset, 45, "kept when the client sends none");
        assert_ok(&packets(&mut out)[0], 1);
        let mut body = b"app\0\x14".to_vec();
        body.extend_from_slice(&scramble_native(&nonce, b"s3cret").expect("scramble"));
        body.push(0);
        let mut out = Packets::default();
        assert_eq!(done(hs.change_user(0, &body, &mut out)).database, None);
    }

    #[test]
    fn rsa_keys_load_from_pkcs8_and_pkcs1_pem() {
        use rsa::pkcs1::EncodeRsaPrivateKey;
        use rsa::pkcs8::EncodePrivateKey;
        let pair = KEY.pair().expect("key");
        assert_eq!(pair.private.size(), RSA_BITS / 8);
        let pkcs8 = pair.private.to_pkcs8_pem(LineEnding::LF).expect("pkcs8");
        let pkcs1 = pair.private.to_pkcs1_pem(LineEnding::LF).expect("pkcs1");
        for pem in [pkcs8.as_str(), pkcs1.as_str()] {
            let key = RsaKey::from_pem(pem).expect("loads");
            assert_eq!(key.public_pem(), KEY.public_pem());
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("private_key.pem");
        std::fs::write(&path, pkcs1.as_bytes()).expect("write");
        let key = RsaKey::from_pem_file(&path).expect("loads");
        let public = key.public_pem().expect("public");
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"));
        // mysql_common's client parses and uses it.
        let c = mysql_common::crypto::encrypt(b"hi\0", public.as_bytes());
        assert_eq!(key.decrypt(&c, false), Ok(Some(b"hi\0".to_vec())));
        assert_eq!(RsaKey::from_pem("nonsense").err(), Some(RsaKeyError::Parse));
        assert!(matches!(
            RsaKey::from_pem_file(&dir.path().join("missing.pem")),
            Err(RsaKeyError::Read { .. })
        ));
    }

    #[test]
    fn scrambles_match_mysql_common() {
        let nonce = fresh_nonce();
        for pw in ["", "a", "s3cret", "pässword", &"x".repeat(100)] {
            if let Some(s) = scramble_native(&nonce, pw.as_bytes()) {
                assert_eq!(native_scramble(&nonce, pw.as_bytes()), s);
                assert!(native_matches(&nonce, pw, &s));
            }
            if let Some(s) = scramble_sha256(&nonce, pw.as_bytes()) {
                assert_eq!(sha2_scramble(&nonce, pw.as_bytes()), s);
                assert!(sha2_matches(&nonce, pw, &s));
            }
        }
        assert!(native_matches(&nonce, "", b""));
        assert!(native_matches(&nonce, "", b"\0"));
        assert!(!native_matches(&nonce, "a", b""));
        assert!(!native_matches(&nonce, "a", &[0; 19]));
    }

    #[test]
    fn the_default_plugin_follows_the_server_flavour() {
        for (version, plugin) in [
            (
                "5.5.5-10.11.19-MariaDB-0+deb12u1",
                Plugin::MysqlNativePassword,
            ),
            ("11.4.2-MariaDB", Plugin::MysqlNativePassword),
            ("5.7.44-log", Plugin::MysqlNativePassword),
            ("8.0.40-myquic", Plugin::CachingSha2Password),
            ("8.4.3", Plugin::CachingSha2Password),
            ("9.1.0-commercial", Plugin::CachingSha2Password),
            ("", Plugin::CachingSha2Password),
            ("not a version", Plugin::CachingSha2Password),
        ] {
            assert_eq!(Plugin::default_for(version), plugin, "{version}");
        }
    }

    #[test]
    fn config_debug_hides_passwords() {
        let cfg = config(Some(USERS), Plugin::CachingSha2Password, false);
        let s = format!("{cfg:?}");
        assert!(s.contains("app") && !s.contains("s3cret"), "{s}");
        assert_eq!(
            "mysql_native_password".parse(),
            Ok(Plugin::MysqlNativePassword)
        );
        assert!("client_ed25519".parse::<Plugin>().is_err());
    }
}
