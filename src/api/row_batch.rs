//! A `StreamExecute` rows message written in place: each row's cells go
//! straight into the buffer the message leaves from, in the protobuf
//! layout prost gives `ExecuteResponse { result: QueryResult { rows } }`,
//! with no `Row` and no `Vec<Row>` per batch and no copy of the batch
//! when it is sent. The bytes are prost's to the byte (a test compares
//! them), so no client can tell.
//!
//! Protobuf puts a length before each message, known only once the rows
//! are in: the batch leaves room for the envelope and the field header
//! sized for a usual batch (a 3-byte length: 16 KiB – 2 MiB), and moves
//! the rows only when the batch ended up outside that range (a short
//! last batch, or a batch of one huge row).

use bytes::{BufMut, BytesMut};
use prost::encoding::{encode_varint, encoded_len_varint};

use super::Encoding;
use super::connect::{ENVELOPE_HEADER, FLAG_COMPRESSED, put_envelope};
use super::effort::Effort;

/// One row's cells as the backend driver holds them (`None`: SQL NULL),
/// read where they are.
pub trait Cells: Sync {
    fn count(&self) -> usize;
    fn cell(&self, i: usize) -> Option<&[u8]>;
}

/// Cells held one by one (the binary protocol's, as text).
impl<T: AsRef<[u8]> + Sync> Cells for Vec<Option<T>> {
    fn count(&self) -> usize {
        self.len()
    }
    fn cell(&self, i: usize) -> Option<&[u8]> {
        self[i].as_ref().map(AsRef::as_ref)
    }
}

/// `ExecuteResponse.result` (field 2) and `QueryResult.rows` (field 4),
/// length-delimited; in `Row`, `lengths` (1, packed sint64) and `values`
/// (2, bytes).
const RESULT_TAG: u8 = 2 << 3 | 2;
const ROW_TAG: u8 = 4 << 3 | 2;
const LENGTHS_TAG: u8 = 1 << 3 | 2;
const VALUES_TAG: u8 = 2 << 3 | 2;
/// The room left before the rows: the envelope, the result's tag and a
/// 3-byte length.
const ROOM: usize = ENVELOPE_HEADER + 1 + 3;

/// One message of rows being written at the end of `out`.
#[derive(Debug)]
pub struct RowBatch {
    /// Where its envelope starts in `out`.
    start: usize,
}

impl RowBatch {
    /// Starts a message at the end of `out`.
    pub fn open(out: &mut BytesMut) -> Self {
        let start = out.len();
        out.put_bytes(0, ROOM);
        Self { start }
    }

    /// Appends one row, as prost encodes a `Row` in `QueryResult.rows`.
    pub fn push(&mut self, out: &mut BytesMut, cells: &dyn Cells) {
        let count = cells.count();
        let (mut lengths, mut values) = (0usize, 0usize);
        for i in 0..count {
            match cells.cell(i) {
                None => lengths += 1,
                Some(cell) => {
                    lengths += encoded_len_varint(zigzag(cell.len()));
                    values += cell.len();
                }
            }
        }
        let row = field_len(lengths) + field_len(values);
        out.reserve(1 + encoded_len_varint(row as u64) + row);
        out.put_u8(ROW_TAG);
        encode_varint(row as u64, out);
        if lengths > 0 {
            out.put_u8(LENGTHS_TAG);
            encode_varint(lengths as u64, out);
            for i in 0..count {
                // zigzag(-1) for NULL.
                encode_varint(cells.cell(i).map_or(1, |c| zigzag(c.len())), out);
            }
        }
        if values > 0 {
            out.put_u8(VALUES_TAG);
            encode_varint(values as u64, out);
            for i in 0..count {
                if let Some(cell) = cells.cell(i) {
                    out.put_slice(cell);
                }
            }
        }
    }

    /// Ends the message: its envelope and lengths written, compressed as
    /// `put_message_with` would (at `effort`'s level once it is at least
    /// `compress_min` bytes under an encoding other than identity).
    /// Returns the payload's size as sent.
    pub fn close(
        self,
        out: &mut BytesMut,
        encoding: Encoding,
        compress_min: usize,
        effort: impl FnOnce() -> Effort,
    ) -> usize {
        let rows_at = self.start + ROOM;
        let rows = out.len() - rows_at;
        let head = ENVELOPE_HEADER + 1 + encoded_len_varint(rows as u64);
        let (end, at) = (out.len(), self.start + head);
        if at < rows_at {
            out.copy_within(rows_at..end, at);
            out.truncate(end - (rows_at - at));
        } else if at > rows_at {
            out.resize(end + (at - rows_at), 0);
            out.copy_within(rows_at..end, at);
        }
        let message = out.len() - self.start - ENVELOPE_HEADER;
        let mut header = &mut out[self.start..at];
        header.put_u8(0);
        header.put_u32(u32::try_from(message).expect("messages are bounded well below 4 GiB"));
        header.put_u8(RESULT_TAG);
        encode_varint(rows as u64, &mut header);
        let effort = if encoding == Encoding::Identity || message < compress_min {
            Effort::None
        } else {
            effort()
        };
        let Effort::Zstd(level) = effort else {
            return message;
        };
        let payload = encoding.compress_at(&out[self.start + ENVELOPE_HEADER..], level);
        out.truncate(self.start);
        put_envelope(out, FLAG_COMPRESSED, &payload);
        payload.len()
    }
}

fn zigzag(len: usize) -> u64 {
    (len as u64) << 1
}

/// A non-empty length-delimited field: tag, length and bytes; proto3
/// leaves an empty one out.
fn field_len(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        1 + encoded_len_varint(len as u64) + len
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::api::connect::{Codec, put_message_with};
    use crate::api::pb;

    /// The `Row` prost encodes: lengths (-1 for NULL) and the values.
    fn row(cells: &[Option<Vec<u8>>]) -> pb::Row {
        pb::Row {
            lengths: cells
                .iter()
                .map(|c| c.as_ref().map_or(-1, |c| c.len() as i64))
                .collect(),
            values: cells.iter().flatten().flatten().copied().collect(),
        }
    }

    fn message(rows: &[Vec<Option<Vec<u8>>>]) -> pb::ExecuteResponse {
        pb::ExecuteResponse {
            result: Some(pb::QueryResult {
                rows: rows.iter().map(|r| row(r)).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// `rows` as the batch writes them after `before`, and as prost
    /// through `put_message_with` does.
    fn both(
        rows: &[Vec<Option<Vec<u8>>>],
        before: &[u8],
        encoding: Encoding,
        effort: Effort,
    ) -> ((BytesMut, usize), (BytesMut, usize)) {
        let mut ours = BytesMut::from(before);
        let mut batch = RowBatch::open(&mut ours);
        for cells in rows {
            batch.push(&mut ours, cells);
        }
        let sent = batch.close(&mut ours, encoding, 1024, || effort);
        let mut prost = BytesMut::from(before);
        let prost_sent = put_message_with(
            &mut prost,
            Codec::Proto,
            encoding,
            1024,
            || effort,
            &message(rows),
        );
        ((ours, sent), (prost, prost_sent))
    }

    fn random_cell(rng: &mut impl Rng) -> Option<Vec<u8>> {
        let len = match rng.random_range(0..10) {
            0 => return None,
            1 => 0,
            2 => rng.random_range(100..20_000),
            3 => rng.random_range(120..140),
            _ => rng.random_range(1..40),
        };
        Some((0..len).map(|_| rng.random()).collect())
    }

    /// Random rows (NULLs, empty strings, all-NULL and all-empty rows,
    /// cells around the varints' 128 boundary and large ones) in batches
    /// of every size class: the same bytes as prost's.
    #[test]
    fn rows_are_encoded_as_prost_encodes_them() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        for round in 0..300 {
            let width = rng.random_range(1..12);
            let count = match round % 4 {
                0 => 1,
                1 => rng.random_range(1..10),
                _ => rng.random_range(10..400),
            };
            let mut rows: Vec<Vec<Option<Vec<u8>>>> = (0..count)
                .map(|_| (0..width).map(|_| random_cell(&mut rng)).collect())
                .collect();
            if round % 7 == 0 {
                rows.push(vec![None; width]);
                rows.push(vec![Some(Vec::new()); width]);
            }
            let before: Vec<u8> = (0..rng.random_range(0..50)).map(|_| rng.random()).collect();
            let ((ours, sent), (prost, prost_sent)) =
                both(&rows, &before, Encoding::Identity, Effort::None);
            assert_eq!(sent, prost_sent, "round {round}");
            assert!(ours == prost, "round {round}: the bytes differ");
        }
    }

    /// A batch longer than the room's 3-byte length (one row over 2 MiB)
    /// and ones shorter (a length of 1 and 2 bytes).
    #[test]
    fn batches_outside_the_usual_size() {
        for len in [
            0,
            1,
            100,
            126,
            127,
            128,
            16_000,
            16_384,
            (2 << 20) + 7,
            5 << 20,
        ] {
            let rows = vec![vec![Some(vec![b'v'; len]), None]];
            let ((ours, sent), (prost, prost_sent)) =
                both(&rows, b"xy", Encoding::Identity, Effort::None);
            assert_eq!(sent, prost_sent, "{len}");
            assert!(ours == prost, "a cell of {len} bytes");
        }
    }

    /// Compressed as `put_message_with` compresses, at the level chosen,
    /// and not under `compress_min` or the identity encoding.
    #[test]
    fn compressed_as_prost_messages_are() {
        let rows: Vec<Vec<Option<Vec<u8>>>> = (0..200)
            .map(|i| vec![Some(format!("row {i} of some text").into_bytes()), None])
            .collect();
        for encoding in [Encoding::Zstd, Encoding::Gzip, Encoding::Identity] {
            for effort in [Effort::None, Effort::Zstd(1), Effort::Zstd(3)] {
                let ((ours, sent), (prost, prost_sent)) = both(&rows, b"", encoding, effort);
                assert_eq!(sent, prost_sent);
                assert!(ours == prost, "{encoding:?} at {effort:?}");
            }
        }
        let small = vec![vec![Some(b"tiny".to_vec())]];
        let ((ours, _), (prost, _)) = both(&small, b"", Encoding::Zstd, Effort::Zstd(1));
        assert_eq!(ours, prost);
        assert_eq!(ours[0], 0, "under compress_min: not compressed");
    }

    /// What a client decodes is the rows it was given.
    #[test]
    fn a_client_reads_the_rows_back() {
        use prost::Message;
        let rows = vec![
            vec![Some(b"1".to_vec()), None, Some(Vec::new())],
            vec![None, None, None],
        ];
        let mut out = BytesMut::new();
        let mut batch = RowBatch::open(&mut out);
        for cells in &rows {
            batch.push(&mut out, cells);
        }
        batch.close(&mut out, Encoding::Identity, 1024, || Effort::None);
        let decoded = pb::ExecuteResponse::decode(&out[ENVELOPE_HEADER..]).unwrap();
        let got = decoded.result.unwrap().rows;
        assert_eq!(got[0].lengths, vec![1, -1, 0]);
        assert_eq!(got[0].values, Bytes::from_static(b"1"));
        assert_eq!(got[1].lengths, vec![-1, -1, -1]);
    }
}
