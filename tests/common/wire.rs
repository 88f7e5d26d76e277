//! The MySQL protocol's framing for the tests' raw-packet clients
//! (`raw_mysql`, `raw_packets`, and the tests that log in by hand): one
//! packet in, one packet out, the greeting's scramble and
//! `mysql_native_password`'s answer to it.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// How long one packet may take to arrive (a loaded 2-core machine,
/// debug builds): a peer that says nothing fails the test, never hangs it.
pub const PACKET_WITHIN: Duration = Duration::from_secs(60);

/// One packet: its sequence id and payload (a payload of 16 MiB − 1 is
/// one part of a longer one: the caller joins them).
pub async fn read_packet<S: AsyncRead + Unpin>(s: &mut S) -> (u8, Vec<u8>) {
    try_read_packet(s)
        .await
        .unwrap_or_else(|e| panic!("a packet within {PACKET_WITHIN:?}: {e}"))
}

/// [`read_packet`], for tests that expect the peer may close.
pub async fn try_read_packet<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<(u8, Vec<u8>)> {
    let read = async {
        let mut header = [0u8; 4];
        s.read_exact(&mut header).await?;
        let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
        let mut payload = vec![0; len];
        s.read_exact(&mut payload).await?;
        Ok((header[3], payload))
    };
    tokio::time::timeout(PACKET_WITHIN, read)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// One packet of at most 16 MiB − 1 bytes (a longer payload goes as
/// several, each full one followed by the next), in one write: a header and
/// payload written apart wait on Nagle's algorithm and the peer's delayed
/// acknowledgement (40 ms).
pub async fn write_packet<S: AsyncWrite + Unpin>(
    s: &mut S,
    seq: u8,
    payload: &[u8],
) -> std::io::Result<()> {
    assert!(
        payload.len() <= 0xff_ffff,
        "one packet: split longer payloads"
    );
    let len = (payload.len() as u32).to_le_bytes();
    let mut packet = Vec::with_capacity(4 + payload.len());
    packet.extend_from_slice(&[len[0], len[1], len[2], seq]);
    packet.extend_from_slice(payload);
    s.write_all(&packet).await
}

/// The 20-byte scramble of a protocol 10 greeting.
pub fn greeting_scramble(greeting: &[u8]) -> Vec<u8> {
    assert_eq!(greeting.first(), Some(&10), "protocol 10 greeting");
    let version_end = 1 + greeting[1..].iter().position(|b| *b == 0).unwrap();
    let mut at = version_end + 1 + 4; // NUL, connection id
    let mut scramble = greeting[at..at + 8].to_vec();
    at += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10; // filler, caps, charset, status, caps, len, reserved
    scramble.extend_from_slice(&greeting[at..at + 12]);
    scramble
}

/// `mysql_native_password`'s answer to `scramble` (empty for an empty
/// password, as clients send it).
pub fn native_password(password: &[u8], scramble: &[u8]) -> Vec<u8> {
    mysql_common::scramble::scramble_native(scramble, password)
        .map(|answer| answer.to_vec())
        .unwrap_or_default()
}

/// A length-encoded integer at the start of `b`, and its size.
pub fn lenenc(b: &[u8]) -> (u64, usize) {
    match b[0] {
        0xfc => (u64::from(u16::from_le_bytes([b[1], b[2]])), 3),
        0xfd => (u64::from(u32::from_le_bytes([b[1], b[2], b[3], 0])), 4),
        0xfe => (u64::from_le_bytes(b[1..9].try_into().unwrap()), 9),
        n => (u64::from(n), 1),
    }
}

/// `v` as a length-encoded string.
pub fn lenenc_bytes(v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + 9);
    match v.len() {
        n @ 0..=250 => out.push(n as u8),
        n @ 251..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        n @ 0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        n => {
            out.push(0xfe);
            out.extend_from_slice(&(n as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(v);
    out
}

/// A packet as the differential tests print it: its bytes in hex, then
/// as text with control characters as dots, so a failing comparison
/// shows both where bytes differ and what they spell.
pub fn shown(packet: &[u8]) -> String {
    format!(
        "{:02x?} {:?}",
        packet,
        String::from_utf8_lossy(packet).replace(|c: char| c.is_control(), ".")
    )
}
