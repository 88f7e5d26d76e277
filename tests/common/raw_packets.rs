//! A MySQL client at the packet level, for tests that compare what a
//! server and the sidecar send byte for byte: login with
//! mysql_native_password, then COM_STMT_PREPARE / COM_STMT_EXECUTE with
//! parameters typed as the test says (which no driver lets a test
//! choose), returning every packet of each answer.

use tokio::io::{AsyncRead, AsyncWrite};

use super::wire::{
    greeting_scramble, lenenc, lenenc_bytes, native_password, read_packet, write_packet,
};

const PROTOCOL_41: u32 = 0x200;
const CONNECT_WITH_DB: u32 = 0x8;
const TRANSACTIONS: u32 = 0x2000;
const SECURE_CONNECTION: u32 = 0x8000;
const MULTI_RESULTS: u32 = 0x2_0000;
const PS_MULTI_RESULTS: u32 = 0x4_0000;
const PLUGIN_AUTH: u32 = 0x8_0000;
const LONG_PASSWORD: u32 = 0x1;
const CONNECT_ATTRS: u32 = 0x10_0000;
/// CLIENT_DEPRECATE_EOF: result sets end with an OK-0xFE, not an EOF.
pub const DEPRECATE_EOF: u32 = 0x100_0000;

pub const MORE_RESULTS_EXISTS: u16 = 0x8;
pub const PS_OUT_PARAMS: u16 = 0x1000;

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A parameter as it goes into COM_STMT_EXECUTE: its MySQL type, the
/// unsigned flag, and its value's bytes (`None`: NULL).
pub struct Param {
    pub ty: u8,
    pub unsigned: bool,
    pub value: Option<Vec<u8>>,
}

impl Param {
    pub fn null() -> Self {
        Self {
            ty: 6,
            unsigned: false,
            value: None,
        }
    }
    pub fn long(v: i32) -> Self {
        Self::fixed(3, v.to_le_bytes().to_vec())
    }
    pub fn float(v: f32) -> Self {
        Self::fixed(4, v.to_le_bytes().to_vec())
    }
    pub fn double(v: f64) -> Self {
        Self::fixed(5, v.to_le_bytes().to_vec())
    }
    /// VAR_STRING (253), as drivers send strings.
    pub fn string(v: &[u8]) -> Self {
        Self::fixed(253, lenenc_bytes(v))
    }
    /// A DATE (10), DATETIME (12) or TIMESTAMP (7) of the binary form's
    /// length (0, 4, 7 or 11).
    pub fn date(ty: u8, parts: (u16, u8, u8, u8, u8, u8, u32), len: u8) -> Self {
        let (y, mo, d, h, mi, s, us) = parts;
        let mut b = vec![len];
        b.extend_from_slice(&y.to_le_bytes());
        b.extend_from_slice(&[mo, d, h, mi, s]);
        b.extend_from_slice(&us.to_le_bytes());
        b.truncate(1 + len as usize);
        Self::fixed(ty, b)
    }
    /// A TIME (11) of the binary form's length (0, 8 or 12).
    pub fn time(negative: bool, days: u32, h: u8, m: u8, s: u8, us: u32, len: u8) -> Self {
        let mut b = vec![len, u8::from(negative)];
        b.extend_from_slice(&days.to_le_bytes());
        b.extend_from_slice(&[h, m, s]);
        b.extend_from_slice(&us.to_le_bytes());
        b.truncate(1 + len as usize);
        Self::fixed(11, b)
    }
    pub fn longlong(v: i64) -> Self {
        Self::fixed(8, v.to_le_bytes().to_vec())
    }
    pub fn unsigned_longlong(v: u64) -> Self {
        Self {
            unsigned: true,
            ..Self::fixed(8, v.to_le_bytes().to_vec())
        }
    }
    /// NEWDECIMAL (246), its text as drivers send it.
    pub fn decimal(text: &str) -> Self {
        Self::fixed(246, lenenc_bytes(text.as_bytes()))
    }
    /// BLOB (252), as drivers send bytes.
    pub fn blob(v: &[u8]) -> Self {
        Self::fixed(252, lenenc_bytes(v))
    }
    fn fixed(ty: u8, value: Vec<u8>) -> Self {
        Self {
            ty,
            unsigned: false,
            value: Some(value),
        }
    }
}

pub struct RawClient {
    io: Box<dyn Io>,
    caps: u32,
}

impl RawClient {
    /// Logs in as `user` into `db` (mysql_native_password; charset
    /// utf8mb4_general_ci), with `extra` capabilities.
    pub async fn login(io: Box<dyn Io>, user: &str, password: &str, db: &str, extra: u32) -> Self {
        Self::login_mariadb(io, (user, password), db, extra, 0).await
    }

    /// As [`Self::login`], asking for MariaDB's capabilities `mariadb`
    /// too (where MariaDB reads them: CLIENT_MYSQL cleared, the last four
    /// reserved bytes).
    pub async fn login_mariadb(
        io: Box<dyn Io>,
        creds: (&str, &str),
        db: &str,
        extra: u32,
        mariadb: u32,
    ) -> Self {
        Self::login_as(io, creds, db, extra, mariadb, 45, None).await
    }

    /// As [`Self::login_mariadb`], in `collation`, sending `attrs` (a
    /// connection-attribute block's content: length-encoded keys and
    /// values, as the test writes it) under CLIENT_CONNECT_ATTRS.
    pub async fn login_as(
        io: Box<dyn Io>,
        (user, password): (&str, &str),
        db: &str,
        extra: u32,
        mariadb: u32,
        collation: u8,
        attrs: Option<&[u8]>,
    ) -> Self {
        let extra = extra | if attrs.is_some() { CONNECT_ATTRS } else { 0 };
        let mut c = Self {
            io,
            caps: PROTOCOL_41
                | CONNECT_WITH_DB
                | TRANSACTIONS
                | SECURE_CONNECTION
                | MULTI_RESULTS
                | PS_MULTI_RESULTS
                | PLUGIN_AUTH
                | LONG_PASSWORD
                | extra,
        };
        if mariadb != 0 {
            c.caps &= !LONG_PASSWORD;
        }
        let greeting = c.read().await;
        let scramble = greeting_scramble(&greeting);
        let mut body = Vec::new();
        body.extend_from_slice(&c.caps.to_le_bytes());
        body.extend_from_slice(&(16u32 << 20).to_le_bytes());
        body.push(collation);
        body.extend_from_slice(&[0; 19]);
        body.extend_from_slice(&mariadb.to_le_bytes());
        body.extend_from_slice(user.as_bytes());
        body.push(0);
        let auth = native_password(password.as_bytes(), &scramble);
        body.push(auth.len() as u8);
        body.extend_from_slice(&auth);
        body.extend_from_slice(db.as_bytes());
        body.push(0);
        body.extend_from_slice(b"mysql_native_password\0");
        if let Some(attrs) = attrs {
            assert!(attrs.len() < 251, "a one-byte length");
            body.push(attrs.len() as u8);
            body.extend_from_slice(attrs);
        }
        c.write(1, &body).await;
        let mut answer = c.read().await;
        if answer[0] == 0xfe {
            // Auth switch: plugin name, then its scramble.
            let name_end = 1 + answer[1..].iter().position(|&b| b == 0).unwrap();
            assert_eq!(&answer[1..name_end], b"mysql_native_password");
            let data = &answer[name_end + 1..];
            let data = data.strip_suffix(&[0]).unwrap_or(data);
            let auth = native_password(password.as_bytes(), data);
            c.write(3, &auth).await;
            answer = c.read().await;
        }
        assert_eq!(answer[0], 0, "login OK: {answer:?}");
        c
    }

    /// COM_QUERY: every packet of every result of the answer.
    pub async fn query(&mut self, sql: &str) -> Vec<Vec<u8>> {
        let mut body = vec![0x03];
        body.extend_from_slice(sql.as_bytes());
        self.write(0, &body).await;
        self.read_results().await
    }

    /// COM_QUERY of a `LOAD DATA LOCAL INFILE`: every packet of the
    /// answer with its sequence id. When the server asks for the file
    /// (0xFB), `file` goes as one packet per part (sequence ids following
    /// the ask), then the empty packet that ends it.
    pub async fn load_local(&mut self, sql: &[u8], file: &[&[u8]]) -> Vec<(u8, Vec<u8>)> {
        self.load_local_ending(sql, file, true).await
    }

    /// As [`Self::load_local`]; without `end`, the file is left unended
    /// and nothing more is read (the caller then hangs up).
    pub async fn load_local_ending(
        &mut self,
        sql: &[u8],
        file: &[&[u8]],
        end: bool,
    ) -> Vec<(u8, Vec<u8>)> {
        let mut body = vec![0x03];
        body.extend_from_slice(sql);
        self.write(0, &body).await;
        let (seq, first) = read_packet(&mut self.io).await;
        let mut packets = vec![(seq, first.clone())];
        if first[0] != 0xfb {
            return packets;
        }
        let mut seq = seq;
        for part in file {
            seq = seq.wrapping_add(1);
            self.write(seq, part).await;
        }
        if !end {
            return packets;
        }
        self.write(seq.wrapping_add(1), b"").await;
        packets.push(read_packet(&mut self.io).await);
        packets
    }

    /// COM_QUERY of a `LOAD DATA LOCAL INFILE` whose file's first packet
    /// skips a sequence id: the server's ask, then its answer.
    pub async fn load_local_out_of_order(&mut self, sql: &[u8], part: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut body = vec![0x03];
        body.extend_from_slice(sql);
        self.write(0, &body).await;
        let (seq, first) = read_packet(&mut self.io).await;
        let mut packets = vec![(seq, first)];
        self.write(seq.wrapping_add(2), part).await;
        packets.push(read_packet(&mut self.io).await);
        packets
    }

    /// COM_STMT_PREPARE: the statement id, the parameter count and every
    /// packet of the answer. `sql` is bytes in the connection's character
    /// set (which need not be UTF-8).
    pub async fn prepare(&mut self, sql: impl AsRef<[u8]>) -> (u32, u16, Vec<Vec<u8>>) {
        let mut body = vec![0x16];
        body.extend_from_slice(sql.as_ref());
        self.write(0, &body).await;
        let first = self.read().await;
        if first[0] == 0xff {
            return (0, 0, vec![first]);
        }
        let id = u32::from_le_bytes(first[1..5].try_into().unwrap());
        let columns = u16::from_le_bytes([first[5], first[6]]);
        let params = u16::from_le_bytes([first[7], first[8]]);
        let mut packets = vec![first];
        for count in [params, columns] {
            if count == 0 {
                continue;
            }
            for _ in 0..count {
                packets.push(self.read().await);
            }
            if self.caps & DEPRECATE_EOF == 0 {
                packets.push(self.read().await);
            }
        }
        // The ids differ (the server's count statements of every session).
        packets[0][1..5].copy_from_slice(&[0; 4]);
        (id, params, packets)
    }

    /// COM_STMT_EXECUTE with `params` (types sent), every packet of every
    /// result of the answer.
    pub async fn execute(&mut self, id: u32, params: &[Param]) -> Vec<Vec<u8>> {
        let mut body = vec![0x17];
        body.extend_from_slice(&id.to_le_bytes());
        body.push(0);
        body.extend_from_slice(&1u32.to_le_bytes());
        if !params.is_empty() {
            let mut bitmap = vec![0u8; params.len().div_ceil(8)];
            for (i, p) in params.iter().enumerate() {
                if p.value.is_none() {
                    bitmap[i / 8] |= 1 << (i % 8);
                }
            }
            body.extend_from_slice(&bitmap);
            body.push(1);
            for p in params {
                body.push(p.ty);
                body.push(if p.unsigned { 0x80 } else { 0 });
            }
            for p in params {
                body.extend_from_slice(p.value.as_deref().unwrap_or_default());
            }
        }
        self.write(0, &body).await;
        self.read_results().await
    }

    pub async fn close(&mut self, id: u32) {
        let mut body = vec![0x19];
        body.extend_from_slice(&id.to_le_bytes());
        self.write(0, &body).await;
    }

    /// Every packet of a command's answer: results until one whose
    /// terminator does not say MORE_RESULTS_EXISTS, or an ERR.
    async fn read_results(&mut self) -> Vec<Vec<u8>> {
        let mut packets = Vec::new();
        loop {
            let first = self.read().await;
            let kind = first[0];
            packets.push(first.clone());
            let status = match kind {
                0xff => return packets,
                0x00 => ok_status(&first),
                _ => {
                    let (columns, _) = lenenc(&first);
                    for _ in 0..columns {
                        packets.push(self.read().await);
                    }
                    if self.caps & DEPRECATE_EOF == 0 {
                        packets.push(self.read().await);
                    }
                    loop {
                        let p = self.read().await;
                        packets.push(p.clone());
                        if p[0] == 0xff {
                            return packets;
                        }
                        if p[0] == 0xfe && p.len() < 0xff_ffff {
                            break if self.caps & DEPRECATE_EOF == 0 {
                                u16::from_le_bytes([p[3], p[4]])
                            } else {
                                ok_status(&p)
                            };
                        }
                    }
                }
            };
            if status & MORE_RESULTS_EXISTS == 0 {
                return packets;
            }
        }
    }

    /// The next packet; a server that says nothing fails the test.
    async fn read(&mut self) -> Vec<u8> {
        read_packet(&mut self.io).await.1
    }

    async fn write(&mut self, seq: u8, payload: &[u8]) {
        write_packet(&mut self.io, seq, payload).await.unwrap();
    }
}

/// The status flags of an OK packet (0x00 or 0xFE header).
pub fn ok_status(p: &[u8]) -> u16 {
    let (_, n1) = lenenc(&p[1..]);
    let (_, n2) = lenenc(&p[1 + n1..]);
    let at = 1 + n1 + n2;
    u16::from_le_bytes([p[at], p[at + 1]])
}
