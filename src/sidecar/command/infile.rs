//! `LOAD DATA LOCAL INFILE`: the client's side of the file exchange,
//! without I/O.
//!
//! When the statement's stream says the backend asks for a file
//! ([`Flow::Infile`](super::Flow)), the client is asked as a server asks
//! (0xFB and the name, the backend's bytes), and [`Infile`] turns the
//! packets the client sends back into the parts the socket loop sends to
//! the gateway (`local_infile_data` requests, one at a time): at most
//! [`PART_BYTES`] each, the last marked `end` once the client's empty
//! packet ends the file. The statement's answer follows in the stream,
//! with sequence ids after the client's last packet.

use bytes::{Bytes, BytesMut};

use crate::api::pb;
use crate::mysql::MysqlError;
use crate::mysql::packet::{Packet, Packets};

use super::CommandPhase;

/// Most bytes of the file per request to the gateway: what a load holds
/// here beyond the client's packet being read.
pub const PART_BYTES: usize = 1 << 20;

/// How long the client may take to send its next packet, as MariaDB's
/// default `net_read_timeout`.
pub const PACKET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The largest payload of one physical packet.
const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// A file being read from the client.
#[derive(Debug)]
pub struct Infile {
    /// The gateway's name for the load.
    load: Bytes,
    /// The sequence id the client's next packet must start with.
    next_seq: u8,
    /// The file's bytes not sent yet.
    part: BytesMut,
    /// Most bytes per part: [`PART_BYTES`], less where the gateway takes
    /// smaller requests.
    part_bytes: usize,
    /// The client's empty packet came: the file is complete.
    ended: bool,
    /// The last part (with `end`) was handed out.
    finished: bool,
}

impl<S> CommandPhase<S> {
    /// Asks the client for the file the backend asks for, as a server
    /// asks: 0xFB and the name, byte for byte.
    pub fn ask_for_file(&mut self, request: pb::LocalInfileRequest, out: &mut Packets) -> Infile {
        out.push(|buf| {
            buf.extend_from_slice(&[0xFB]);
            buf.extend_from_slice(&request.name);
        });
        // A request's envelope and session take a few hundred bytes.
        let part_bytes = match self.max_request {
            0 => PART_BYTES,
            max => PART_BYTES.min(max.saturating_sub(16 << 10).max(4 << 10)),
        };
        Infile {
            load: request.load,
            next_seq: out.seq,
            part: BytesMut::new(),
            part_bytes,
            ended: false,
            finished: false,
        }
    }
}

impl Infile {
    /// One packet from the client: its bytes are the file's next (an
    /// empty one ends it). A packet out of sequence is refused as the
    /// server refuses it (the load is then abandoned).
    pub fn on_packet(&mut self, packet: Packet) -> Result<(), MysqlError> {
        if self.ended {
            return Err(out_of_order());
        }
        // A logical packet of n physical ones ends with sequence id
        // first + n - 1 (a payload of exactly k·2^24−1 bytes has an empty
        // last one).
        let physical = packet.payload.len() / MAX_PAYLOAD + 1;
        let first = packet.seq.wrapping_sub((physical - 1) as u8);
        if first != self.next_seq {
            return Err(out_of_order());
        }
        self.next_seq = packet.seq.wrapping_add(1);
        if packet.payload.is_empty() {
            self.ended = true;
        } else {
            self.part.extend_from_slice(&packet.payload);
        }
        Ok(())
    }

    /// The next part to send, if one is due: a full one, or the last once
    /// the file ended.
    pub fn next_part(&mut self) -> Option<pb::LocalInfileData> {
        if self.finished {
            return None;
        }
        if self.part.len() >= self.part_bytes {
            let data = self.part.split_to(self.part_bytes).freeze();
            return Some(self.data(data, false));
        }
        if self.ended {
            self.finished = true;
            let data = self.part.split().freeze();
            return Some(self.data(data, true));
        }
        None
    }

    /// Whether the last part has been handed out.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The request that abandons the load (nothing of it is loaded).
    pub fn abort(&self) -> pb::LocalInfileData {
        pb::LocalInfileData {
            abort: true,
            load: self.load.clone(),
            ..Default::default()
        }
    }

    /// The sequence id the statement's answer starts with, after the
    /// client's last packet.
    pub fn answer_seq(&self) -> u8 {
        self.next_seq
    }

    fn data(&self, data: Bytes, end: bool) -> pb::LocalInfileData {
        pb::LocalInfileData {
            data,
            end,
            abort: false,
            load: self.load.clone(),
        }
    }
}

/// ER_NET_PACKETS_OUT_OF_ORDER, as the server answers it.
pub fn out_of_order() -> MysqlError {
    MysqlError {
        code: 1156,
        state: "08S01".into(),
        message: "Got packets out of order".into(),
    }
}

/// ER_NET_READ_INTERRUPTED: the client sent nothing for
/// [`PACKET_TIMEOUT`] in the middle of its file.
pub fn read_timeout() -> MysqlError {
    MysqlError {
        code: 1159,
        state: "08S01".into(),
        message: "Got timeout reading communication packets".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infile(next_seq: u8) -> Infile {
        Infile {
            load: Bytes::from_static(b"id"),
            next_seq,
            part: BytesMut::new(),
            part_bytes: PART_BYTES,
            ended: false,
            finished: false,
        }
    }

    fn packet(seq: u8, payload: &[u8]) -> Packet {
        Packet {
            seq,
            payload: Bytes::copy_from_slice(payload),
        }
    }

    #[test]
    fn parts_are_bounded_and_the_empty_packet_ends_the_file() {
        let mut f = infile(2);
        let chunk = vec![7u8; PART_BYTES / 2 + 1];
        f.on_packet(packet(2, &chunk)).unwrap();
        assert!(f.next_part().is_none());
        f.on_packet(packet(3, &chunk)).unwrap();
        let part = f.next_part().unwrap();
        assert_eq!((part.data.len(), part.end), (PART_BYTES, false));
        assert!(f.next_part().is_none());
        f.on_packet(packet(4, b"")).unwrap();
        let last = f.next_part().unwrap();
        assert_eq!((last.data.len(), last.end), (2, true));
        assert!(f.next_part().is_none() && f.is_finished());
        assert_eq!(f.answer_seq(), 5);
        assert_eq!(last.load, Bytes::from_static(b"id"));
    }

    /// 0xFB and the name's bytes, the next sequence id; parts no larger
    /// than the gateway's requests allow.
    #[test]
    fn the_client_is_asked_as_a_server_asks() {
        let mut p = crate::sidecar::command::tests::phase();
        p.set_request_limit(24 << 10);
        let mut out = Packets::reply_to(0);
        let mut f = p.ask_for_file(
            pb::LocalInfileRequest {
                name: Bytes::from_static(b"f\xff.tsv"),
                load: Bytes::from_static(b"id"),
            },
            &mut out,
        );
        assert_eq!(&out.buf[..], b"\x07\x00\x00\x01\xfbf\xff.tsv");
        f.on_packet(packet(2, &[1u8; 10 << 10])).unwrap();
        assert_eq!(f.next_part().unwrap().data.len(), 8 << 10);
        assert!(f.next_part().is_none());
    }

    #[test]
    fn an_empty_file_is_one_last_part() {
        let mut f = infile(255);
        f.on_packet(packet(255, b"")).unwrap();
        let last = f.next_part().unwrap();
        assert!(last.end && last.data.is_empty() && !last.abort);
        assert_eq!(f.answer_seq(), 0);
    }

    #[test]
    fn a_packet_out_of_sequence_is_refused() {
        let mut f = infile(2);
        assert_eq!(f.on_packet(packet(3, b"x")).unwrap_err().code, 1156);
        let mut f = infile(2);
        f.on_packet(packet(2, b"")).unwrap();
        assert_eq!(f.on_packet(packet(3, b"x")).unwrap_err().code, 1156);
    }

    #[test]
    fn a_logical_packet_counts_its_physical_ones() {
        let mut f = infile(2);
        // 2^24−1 bytes: that packet and an empty one, ids 2 and 3.
        f.on_packet(packet(3, &vec![1u8; MAX_PAYLOAD])).unwrap();
        assert_eq!(f.answer_seq(), 4);
        assert!(f.abort().abort);
    }
}
