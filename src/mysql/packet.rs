//! Packet framing: a 3-byte little-endian length, a sequence id, then the
//! payload. Payloads of 16 MiB − 1 bytes or more are split, and a split
//! payload that ends exactly on a boundary is followed by an empty packet.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Largest payload of one physical packet.
pub const MAX_CHUNK: usize = 0xff_ff_ff;

/// One logical packet (split parts already joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// Sequence id of its last physical packet.
    pub seq: u8,
    pub payload: Bytes,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PacketError {
    /// The client announced more than the configured maximum.
    #[error(
        "a packet of at least {size} bytes exceeds the sidecar's max_allowed_packet ({max} bytes)"
    )]
    TooLarge {
        size: usize,
        max: usize,
        /// The sequence id of the header that announced it: the answer
        /// (ERR 1153) follows it, as a reply to that packet.
        seq: u8,
    },
}

/// Takes one complete logical packet off the front of `buf`, if `buf`
/// holds one. Refuses a packet larger than `max` as soon as its header
/// says so, without waiting for (or buffering) the payload.
pub fn decode(buf: &mut BytesMut, max: usize) -> Result<Option<Packet>, PacketError> {
    // First pass: find the end of the logical packet without copying.
    let mut offset = 0usize;
    let mut total = 0usize;
    loop {
        if buf.len() < offset + 4 {
            return Ok(None);
        }
        let len = usize::from(buf[offset])
            | usize::from(buf[offset + 1]) << 8
            | usize::from(buf[offset + 2]) << 16;
        total += len;
        if total > max {
            return Err(PacketError::TooLarge {
                size: total,
                max,
                seq: buf[offset + 3],
            });
        }
        if buf.len() < offset + 4 + len {
            return Ok(None);
        }
        offset += 4 + len;
        if len < MAX_CHUNK {
            break;
        }
    }
    // Second pass: the common single-chunk case is zero-copy.
    let mut frame = buf.split_to(offset);
    let len = usize::from(frame[0]) | usize::from(frame[1]) << 8 | usize::from(frame[2]) << 16;
    if len < MAX_CHUNK {
        let seq = frame[3];
        frame.advance(4);
        return Ok(Some(Packet {
            seq,
            payload: frame.freeze(),
        }));
    }
    let mut payload = BytesMut::with_capacity(total);
    let mut seq = 0;
    while frame.has_remaining() {
        let len = usize::from(frame[0]) | usize::from(frame[1]) << 8 | usize::from(frame[2]) << 16;
        seq = frame[3];
        frame.advance(4);
        payload.extend_from_slice(&frame[..len]);
        frame.advance(len);
    }
    Ok(Some(Packet {
        seq,
        payload: payload.freeze(),
    }))
}

/// Outgoing packets, framed into one buffer that the I/O layer writes
/// out. Each `push` is one logical packet with the next sequence id.
#[derive(Debug, Default)]
pub struct Packets {
    pub buf: BytesMut,
    pub seq: u8,
}

impl Packets {
    /// Starts a response to a packet that had sequence id `request_seq`.
    pub fn reply_to(request_seq: u8) -> Self {
        Self {
            buf: BytesMut::with_capacity(1024),
            seq: request_seq.wrapping_add(1),
        }
    }

    /// Appends one logical packet whose payload `write` produces, written
    /// in place (no intermediate copy unless it needs splitting).
    pub fn push(&mut self, write: impl FnOnce(&mut BytesMut)) {
        let start = self.buf.len();
        self.buf.put_bytes(0, 4);
        write(&mut self.buf);
        let len = self.buf.len() - start - 4;
        if len < MAX_CHUNK {
            self.buf[start..start + 3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
            self.buf[start + 3] = self.seq;
            self.seq = self.seq.wrapping_add(1);
            return;
        }
        let payload = self.buf.split_off(start + 4);
        self.buf.truncate(start);
        self.push_split(&payload);
    }

    /// Appends one logical packet with the given payload.
    pub fn push_payload(&mut self, payload: &[u8]) {
        if payload.len() < MAX_CHUNK {
            self.push(|b| b.extend_from_slice(payload));
        } else {
            self.push_split(payload);
        }
    }

    fn push_split(&mut self, payload: &[u8]) {
        let mut chunks = payload.chunks(MAX_CHUNK).peekable();
        let mut last_len = 0;
        while let Some(chunk) = chunks.next() {
            self.header(chunk.len());
            self.buf.extend_from_slice(chunk);
            last_len = chunk.len();
            if chunks.peek().is_none() && last_len == MAX_CHUNK {
                self.header(0);
            }
        }
        let _ = last_len;
    }

    fn header(&mut self, len: usize) {
        self.buf.put_slice(&(len as u32).to_le_bytes()[..3]);
        self.buf.put_u8(self.seq);
        self.seq = self.seq.wrapping_add(1);
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Removes the last packet (one shorter than a full chunk, such as a
    /// login's final OK) and rewinds the sequence to it, so that another
    /// can take its place. `false` if there is no such packet.
    pub fn drop_last(&mut self) -> bool {
        let mut at = 0;
        let mut last = None;
        while at + 4 <= self.buf.len() {
            let len = usize::from(self.buf[at])
                | usize::from(self.buf[at + 1]) << 8
                | usize::from(self.buf[at + 2]) << 16;
            last = Some((at, len, self.buf[at + 3]));
            at += 4 + len;
        }
        match last {
            Some((start, len, seq)) if len < MAX_CHUNK && start + 4 + len == self.buf.len() => {
                self.buf.truncate(start);
                self.seq = seq;
                true
            }
            _ => false,
        }
    }

    /// Takes the framed bytes, keeping the sequence counter.
    pub fn take(&mut self) -> BytesMut {
        self.buf.split()
    }
}

/// Splits framed output into payloads, checking that sequence ids run on
/// from `first_seq` and that nothing partial is left (for tests of what
/// encoders write).
#[cfg(test)]
pub fn payloads(out: &mut Packets, first_seq: u8) -> Vec<Bytes> {
    let mut buf = out.take();
    let mut seq = first_seq;
    let mut all = Vec::new();
    while let Some(p) = decode(&mut buf, usize::MAX).unwrap() {
        assert_eq!(p.seq, seq);
        seq = seq.wrapping_add(1);
        all.push(p.payload);
    }
    assert!(buf.is_empty());
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_last_packet_can_be_replaced() {
        let mut out = Packets::reply_to(2);
        out.push(|b| b.extend_from_slice(&[0x01, 0x03]));
        out.push(|b| b.extend_from_slice(&[0x00, 0, 0, 2, 0, 0, 0]));
        assert!(out.drop_last());
        assert_eq!(out.seq, 4);
        assert_eq!(&out.buf[..], &[2, 0, 0, 3, 0x01, 0x03]);
        out.push(|b| b.put_u8(0xff));
        assert_eq!(&out.buf[6..], &[1, 0, 0, 4, 0xff]);
        assert!(!Packets::default().drop_last());
    }

    use super::*;

    #[test]
    fn round_trip_small_and_split() {
        for size in [
            0usize,
            1,
            300,
            MAX_CHUNK - 1,
            MAX_CHUNK,
            MAX_CHUNK + 5,
            2 * MAX_CHUNK,
        ] {
            let payload: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
            let mut out = Packets::reply_to(0);
            out.push_payload(&payload);
            out.push(|b| b.extend_from_slice(b"next"));
            let mut buf = out.take();
            let first = decode(&mut buf, usize::MAX).unwrap().unwrap();
            assert_eq!(first.payload.len(), size);
            assert_eq!(&first.payload[..], &payload[..]);
            let second = decode(&mut buf, usize::MAX).unwrap().unwrap();
            assert_eq!(&second.payload[..], b"next");
            assert_eq!(second.seq, first.seq.wrapping_add(1));
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn in_place_push_splits_large_payloads() {
        let mut out = Packets::reply_to(3);
        out.push(|b| b.put_bytes(7, MAX_CHUNK + 10));
        let mut buf = out.take();
        let p = decode(&mut buf, usize::MAX).unwrap().unwrap();
        assert_eq!(p.payload.len(), MAX_CHUNK + 10);
        assert_eq!(p.seq, 5);
    }

    #[test]
    fn partial_input_waits_and_oversize_is_refused_early() {
        let mut buf = BytesMut::from(&[5u8, 0, 0, 0, b'a'][..]);
        assert_eq!(decode(&mut buf, 100), Ok(None));
        let mut big = BytesMut::from(&[0xff, 0xff, 0x1f, 1][..]);
        assert_eq!(
            decode(&mut big, 1 << 20),
            Err(PacketError::TooLarge {
                size: 0x1f_ffff,
                max: 1 << 20,
                seq: 1
            })
        );
    }
}
