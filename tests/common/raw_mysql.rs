//! A MySQL client that writes the protocol's packets itself, for what no
//! driver in the tests does on request: server-side cursors
//! (`COM_STMT_EXECUTE` with `CURSOR_TYPE_READ_ONLY`, `COM_STMT_FETCH`) and
//! `COM_STMT_SEND_LONG_DATA` in chunks of the test's choosing. Logs in
//! with `mysql_native_password` (also after an auth switch).

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::wire::{PACKET_WITHIN, greeting_scramble, native_password, read_packet, write_packet};

const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_CONNECT_WITH_DB: u32 = 8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x80000;

/// The status flag of a result whose rows wait in a cursor.
pub const SERVER_STATUS_CURSOR_EXISTS: u16 = 0x40;

/// What a command got back, in the parts the tests look at.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    Ok,
    /// Error number and message.
    Err(u16, String),
    /// Rows (binary or text) and the status flags of the closing EOF.
    Rows {
        rows: usize,
        status: u16,
    },
}

pub struct RawClient<S> {
    stream: S,
    seq: u8,
}

impl<S: AsyncRead + AsyncWrite + Unpin> RawClient<S> {
    /// Reads the greeting and logs in as `user` into `db` (none if empty).
    pub async fn login(stream: S, user: &str, password: &str, db: &str) -> Self {
        match Self::try_login(stream, user, password, db).await {
            Ok(client) => client,
            Err(refused) => panic!("login refused: {refused:?}"),
        }
    }

    /// The same, or the server's refusal of the login ([`Answer::Err`]):
    /// exactly what the login's last packet says, with no command after
    /// it (drivers run queries of their own as they connect).
    pub async fn try_login(
        stream: S,
        user: &str,
        password: &str,
        db: &str,
    ) -> Result<Self, Answer> {
        let mut client = Self { stream, seq: 0 };
        let greeting = client.read().await;
        assert_eq!(greeting[0], 10, "protocol 10 greeting");
        let scramble = greeting_scramble(&greeting);
        let mut caps = CLIENT_LONG_PASSWORD
            | CLIENT_PROTOCOL_41
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH;
        if !db.is_empty() {
            caps |= CLIENT_CONNECT_WITH_DB;
        }
        let mut response = Vec::new();
        response.extend_from_slice(&caps.to_le_bytes());
        response.extend_from_slice(&(1u32 << 30).to_le_bytes());
        response.push(45); // utf8mb4_general_ci
        response.extend_from_slice(&[0; 23]);
        response.extend_from_slice(user.as_bytes());
        response.push(0);
        let auth = native_password(password.as_bytes(), &scramble);
        response.push(auth.len() as u8);
        response.extend_from_slice(&auth);
        if !db.is_empty() {
            response.extend_from_slice(db.as_bytes());
            response.push(0);
        }
        response.extend_from_slice(b"mysql_native_password\0");
        client.write(&response).await;
        let mut answer = client.read().await;
        if answer[0] == 0xfe {
            // Auth switch: plugin name, then the new scramble.
            let rest = &answer[1..];
            let name_end = rest.iter().position(|b| *b == 0).unwrap();
            assert_eq!(&rest[..name_end], b"mysql_native_password");
            let seed = &rest[name_end + 1..];
            let seed = &seed[..seed.len().min(20)];
            client
                .write(&native_password(password.as_bytes(), seed))
                .await;
            answer = client.read().await;
        }
        match answer[0] {
            0 => Ok(client),
            0xff => Err(err(&answer)),
            _ => panic!("neither OK nor ERR after the login: {answer:?}"),
        }
    }

    /// The connection itself, to write what no well-behaved client would
    /// (a packet cut short).
    pub fn into_stream(self) -> S {
        self.stream
    }

    /// Sends one command packet (sequence 0), split as the protocol
    /// splits payloads of 16 MiB − 1 and more.
    pub async fn command(&mut self, payload: &[u8]) {
        self.seq = 0;
        self.write(payload).await;
    }

    /// Sends a command the server may refuse (and close) before it has
    /// read all of it, so the write may fail; then its answer.
    pub async fn command_refused_early(&mut self, payload: &[u8]) -> Answer {
        self.seq = 0;
        let _ = self.try_write(payload).await;
        self.answer().await
    }

    /// Waits for the server to close the connection.
    pub async fn closed(mut self) {
        let mut buf = [0u8; 1024];
        loop {
            let read = tokio::time::timeout(PACKET_WITHIN, self.stream.read(&mut buf));
            match read.await.expect("closed in time") {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }

    /// `COM_STMT_PREPARE`: the statement id (panics on an error).
    pub async fn prepare(&mut self, sql: &str) -> u32 {
        let mut payload = vec![0x16];
        payload.extend_from_slice(sql.as_bytes());
        self.command(&payload).await;
        let ok = self.read().await;
        assert_eq!(ok[0], 0, "prepared: {:?}", String::from_utf8_lossy(&ok));
        let id = u32::from_le_bytes(ok[1..5].try_into().unwrap());
        let columns = u16::from_le_bytes([ok[5], ok[6]]);
        let params = u16::from_le_bytes([ok[7], ok[8]]);
        for count in [params, columns] {
            if count > 0 {
                for _ in 0..count {
                    self.read().await;
                }
                self.read().await; // EOF
            }
        }
        id
    }

    /// `COM_STMT_EXECUTE` of a statement without placeholders, with a
    /// read-only cursor when `cursor`.
    pub async fn execute(&mut self, id: u32, cursor: bool) -> Answer {
        let mut payload = vec![0x17];
        payload.extend_from_slice(&id.to_le_bytes());
        payload.push(u8::from(cursor));
        payload.extend_from_slice(&1u32.to_le_bytes());
        self.command(&payload).await;
        self.answer().await
    }

    /// `COM_STMT_EXECUTE` of a statement whose parameters (all strings)
    /// were all sent as long data.
    pub async fn execute_long_data(&mut self, id: u32, params: u16) -> Answer {
        let mut payload = vec![0x17];
        payload.extend_from_slice(&id.to_le_bytes());
        payload.push(0);
        payload.extend_from_slice(&1u32.to_le_bytes());
        payload.extend(std::iter::repeat_n(0u8, usize::from(params).div_ceil(8)));
        payload.push(1); // types follow
        for _ in 0..params {
            payload.extend_from_slice(&[0xfc, 0]); // MYSQL_TYPE_BLOB
        }
        self.command(&payload).await;
        self.answer().await
    }

    /// `COM_STMT_SEND_LONG_DATA` (no answer, by protocol).
    pub async fn send_long_data(&mut self, id: u32, param: u16, data: &[u8]) {
        let mut payload = Vec::with_capacity(7 + data.len());
        payload.push(0x18);
        payload.extend_from_slice(&id.to_le_bytes());
        payload.extend_from_slice(&param.to_le_bytes());
        payload.extend_from_slice(data);
        self.command(&payload).await;
    }

    /// `COM_STMT_FETCH` of up to `rows` rows.
    pub async fn fetch(&mut self, id: u32, rows: u32) -> Answer {
        let mut payload = vec![0x1c];
        payload.extend_from_slice(&id.to_le_bytes());
        payload.extend_from_slice(&rows.to_le_bytes());
        self.command(&payload).await;
        self.rows().await
    }

    /// `COM_QUERY`.
    pub async fn query(&mut self, sql: &str) -> Answer {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        self.command(&payload).await;
        self.answer().await
    }

    /// An OK, an ERR, or a result set (column definitions, then rows; a
    /// cursor's opening has none).
    async fn answer(&mut self) -> Answer {
        let first = self.read().await;
        match first[0] {
            0x00 => Answer::Ok,
            0xff => err(&first),
            _ => {
                // Column count, definitions, EOF; then rows, unless the
                // EOF says they wait in a cursor.
                let eof = loop {
                    let packet = self.read().await;
                    if is_eof(&packet) {
                        break packet;
                    }
                };
                let status = u16::from_le_bytes([eof[3], eof[4]]);
                if status & SERVER_STATUS_CURSOR_EXISTS != 0 {
                    return Answer::Rows { rows: 0, status };
                }
                self.rows().await
            }
        }
    }

    /// Rows up to the EOF that ends them (or an ERR).
    async fn rows(&mut self) -> Answer {
        let mut rows = 0;
        loop {
            let packet = self.read().await;
            if is_eof(&packet) {
                let status = u16::from_le_bytes([packet[3], packet[4]]);
                return Answer::Rows { rows, status };
            }
            if packet[0] == 0xff {
                return err(&packet);
            }
            rows += 1;
        }
    }

    async fn write(&mut self, payload: &[u8]) {
        self.try_write(payload).await.expect("written");
    }

    async fn try_write(&mut self, payload: &[u8]) -> std::io::Result<()> {
        // A payload of 16 MiB − 1 or more goes in full packets, ended by a
        // shorter one (empty if need be).
        let mut rest = payload;
        loop {
            let n = rest.len().min(0xff_ffff);
            self.write_packet(&rest[..n]).await?;
            rest = &rest[n..];
            if n < 0xff_ffff {
                break;
            }
        }
        self.stream.flush().await
    }

    async fn write_packet(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        write_packet(&mut self.stream, seq, chunk).await
    }

    /// One logical packet (joined if split).
    async fn read(&mut self) -> Vec<u8> {
        let mut payload = Vec::new();
        loop {
            let (seq, part) = read_packet(&mut self.stream).await;
            self.seq = seq.wrapping_add(1);
            let last = part.len() < 0xff_ffff;
            payload.extend_from_slice(&part);
            if last {
                return payload;
            }
        }
    }
}

fn is_eof(packet: &[u8]) -> bool {
    packet.first() == Some(&0xfe) && packet.len() < 9
}

fn err(packet: &[u8]) -> Answer {
    let code = u16::from_le_bytes([packet[1], packet[2]]);
    // `#` and the SQLSTATE precede the message.
    let message = String::from_utf8_lossy(&packet[9..]).into_owned();
    Answer::Err(code, message)
}
