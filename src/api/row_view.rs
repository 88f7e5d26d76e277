//! A streamed `QueryResult` read in place: its rows stay views of the
//! message they came in, `lengths` included.
//!
//! prost decodes a `Row`'s packed `lengths` into a `Vec<i64>` of its own:
//! one allocation per row (250 of the sidecar's 323 per medium SELECT),
//! for lengths that are read once, in order, when the row is written to
//! the client. Here they stay the message's bytes (zigzag varints, as the
//! wire has them) and are read as the cells are walked. The wire format is
//! protobuf's, unchanged: the same bytes decode as [`pb::QueryResult`].

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{
    DecodeContext, WireType, bytes as pb_bytes, decode_varint, encode_key, encode_varint,
    encoded_len_varint, key_len, message, skip_field,
};
use prost::{DecodeError, Message};

use super::pb;

/// `QueryResult.rows`; in `Row`, `lengths` and `values`.
const ROWS_TAG: u32 = 4;
const LENGTHS_TAG: u32 = 1;
const VALUES_TAG: u32 = 2;

/// One `Row`: its `lengths` (-1, or any negative length, is NULL) and
/// `values` as views of the message.
#[derive(Clone, Debug, PartialEq)]
pub struct RowView {
    /// The packed `lengths`: zigzag varints, each checked well-formed.
    lengths: Bytes,
    values: Bytes,
    /// How many lengths there are.
    count: usize,
    /// The non-negative lengths added up; `None` if that overflows.
    total: Option<usize>,
}

/// An empty row: what protobuf decodes into (no lengths add up to 0).
impl Default for RowView {
    fn default() -> Self {
        Self {
            lengths: Bytes::new(),
            values: Bytes::new(),
            count: 0,
            total: Some(0),
        }
    }
}

impl RowView {
    /// How many cells the row has (NULLs included).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The values, all cells' bytes one after the other.
    pub fn values(&self) -> &Bytes {
        &self.values
    }

    /// The cells, in order (`None`: NULL); `None` if `lengths` and
    /// `values` disagree, so that walking the row can neither run off its
    /// end nor leave bytes behind.
    pub fn cells(&self) -> Option<Cells<'_>> {
        (self.total == Some(self.values.len())).then(|| Cells {
            lengths: &self.lengths,
            values: &self.values,
            left: self.count,
        })
    }

    /// A copy that holds no view of the message (a row kept after its
    /// message would keep the whole message alive).
    pub fn to_owned_copy(&self) -> Self {
        Self {
            lengths: Bytes::copy_from_slice(&self.lengths),
            values: Bytes::copy_from_slice(&self.values),
            ..self.clone()
        }
    }

    /// Takes in one more stretch of packed lengths (protobuf allows a
    /// packed field in several pieces; they add up).
    fn add_lengths(&mut self, packed: Bytes) -> Result<(), DecodeError> {
        let mut rest = &packed[..];
        while !rest.is_empty() {
            self.add_length(decode_varint(&mut rest)?);
        }
        if self.lengths.is_empty() {
            self.lengths = packed;
        } else {
            let mut joined = BytesMut::with_capacity(self.lengths.len() + packed.len());
            joined.put_slice(&self.lengths);
            joined.put_slice(&packed);
            self.lengths = joined.freeze();
        }
        Ok(())
    }

    fn add_length(&mut self, zigzag: u64) {
        self.count += 1;
        if let Ok(len) = usize::try_from(unzigzag(zigzag)) {
            self.total = self.total.and_then(|total| total.checked_add(len));
        }
    }
}

impl From<&pb::Row> for RowView {
    fn from(row: &pb::Row) -> Self {
        let mut lengths = BytesMut::new();
        for &len in &row.lengths {
            encode_varint(zigzag(len), &mut lengths);
        }
        let mut view = Self {
            values: row.values.clone(),
            ..Self::default()
        };
        view.add_lengths(lengths.freeze())
            .expect("varints just encoded are well-formed");
        view
    }
}

impl Message for RowView {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        if !self.lengths.is_empty() {
            encode_key(LENGTHS_TAG, WireType::LengthDelimited, buf);
            encode_varint(self.lengths.len() as u64, buf);
            buf.put_slice(&self.lengths);
        }
        if !self.values.is_empty() {
            pb_bytes::encode(VALUES_TAG, &self.values, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        match (tag, wire_type) {
            // A length sent unpacked, as protobuf allows (never by us).
            (LENGTHS_TAG, WireType::Varint) => {
                let mut one = BytesMut::new();
                encode_varint(decode_varint(buf)?, &mut one);
                self.add_lengths(one.freeze())
            }
            (LENGTHS_TAG, _) => {
                let mut packed = Bytes::new();
                pb_bytes::merge(wire_type, &mut packed, buf, ctx)?;
                self.add_lengths(packed)
            }
            (VALUES_TAG, _) => pb_bytes::merge(wire_type, &mut self.values, buf, ctx),
            _ => skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        let lengths = if self.lengths.is_empty() {
            0
        } else {
            key_len(LENGTHS_TAG)
                + encoded_len_varint(self.lengths.len() as u64)
                + self.lengths.len()
        };
        let values = if self.values.is_empty() {
            0
        } else {
            pb_bytes::encoded_len(VALUES_TAG, &self.values)
        };
        lengths + values
    }

    fn clear(&mut self) {
        *self = Self::default();
    }
}

/// The cells of a row whose lengths add up to its values, read in place.
#[derive(Clone, Debug)]
pub struct Cells<'a> {
    lengths: &'a [u8],
    values: &'a [u8],
    left: usize,
}

impl<'a> Iterator for Cells<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.lengths.is_empty() {
            return None;
        }
        // The varints were checked when the row was decoded (an error
        // here would also allocate: prost boxes them).
        let zigzag = decode_varint(&mut self.lengths).ok()?;
        self.left = self.left.saturating_sub(1);
        let Ok(len) = usize::try_from(unzigzag(zigzag)) else {
            return Some(None);
        };
        let (value, rest) = self.values.split_at(len.min(self.values.len()));
        self.values = rest;
        Some(Some(value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Cells<'_> {}

/// A streamed `QueryResult`: every field as prost decodes it into
/// [`pb::QueryResult`], but the rows, which are [`RowView`]s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultView {
    /// Everything but the rows (its `rows` stay empty).
    pub head: pb::QueryResult,
    pub rows: Vec<RowView>,
}

impl From<pb::QueryResult> for ResultView {
    fn from(mut head: pb::QueryResult) -> Self {
        let rows = std::mem::take(&mut head.rows);
        Self {
            head,
            rows: rows.iter().map(RowView::from).collect(),
        }
    }
}

impl Message for ResultView {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        // Field order does not matter to a decoder; rows after the rest.
        self.head.encode_raw(buf);
        message::encode_repeated(ROWS_TAG, &self.rows, buf);
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl bytes::Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag == ROWS_TAG {
            message::merge_repeated(wire_type, &mut self.rows, buf, ctx)
        } else {
            self.head.merge_field(tag, wire_type, buf, ctx)
        }
    }

    fn encoded_len(&self) -> usize {
        self.head.encoded_len() + message::encoded_len_repeated(ROWS_TAG, &self.rows)
    }

    fn clear(&mut self) {
        self.head.clear();
        self.rows.clear();
    }
}

fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn unzigzag(n: u64) -> i64 {
    ((n >> 1) as i64) ^ -((n & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(lengths: Vec<i64>, values: &'static [u8]) -> pb::Row {
        pb::Row {
            lengths,
            values: Bytes::from_static(values),
        }
    }

    fn cells(view: &RowView) -> Option<Vec<Option<&[u8]>>> {
        view.cells().map(Iterator::collect)
    }

    /// What prost encodes decodes as the same cells, without a copy of
    /// either field; and encodes back to the same bytes.
    #[test]
    fn rows_are_read_in_place() {
        let result = pb::QueryResult {
            rows_affected: 7,
            info: "i".into(),
            server_status: Some(2),
            rows: vec![
                row(vec![5, -1, 0, 3], b"helloabc"),
                row(vec![], b""),
                row(vec![-1, -1], b""),
                row(vec![300], &[b'x'; 300]),
            ],
            fields: vec![pb::Field {
                name: Bytes::from_static(b"c"),
                ..Default::default()
            }],
            ..Default::default()
        };
        let wire = Bytes::from(result.encode_to_vec());
        let view = ResultView::decode(wire.clone()).unwrap();
        assert_eq!(view, ResultView::from(result.clone()));
        assert_eq!(view.head.rows, vec![]);
        assert_eq!(
            pb::QueryResult {
                rows: vec![],
                ..result.clone()
            },
            view.head
        );
        let within = |b: &Bytes| wire.as_ptr_range().contains(&b.as_ptr());
        assert!(within(&view.rows[0].lengths) && within(&view.rows[0].values));
        assert_eq!(
            cells(&view.rows[0]).unwrap(),
            vec![Some(&b"hello"[..]), None, Some(&b""[..]), Some(&b"abc"[..])]
        );
        assert_eq!(view.rows[0].len(), 4);
        assert_eq!(cells(&view.rows[1]).unwrap(), vec![]);
        assert_eq!(cells(&view.rows[2]).unwrap(), vec![None, None]);
        assert_eq!(cells(&view.rows[3]).unwrap()[0].unwrap().len(), 300);
        let again = pb::QueryResult::decode(view.encode_to_vec().as_slice()).unwrap();
        assert_eq!(again, result);
    }

    /// Lengths that do not add up to the values: no cells, never a panic
    /// (too few, too many, negative but for NULL, overflowing the sum).
    #[test]
    fn rows_whose_lengths_disagree_have_no_cells() {
        for bad in [
            row(vec![5], b"abc"),
            row(vec![1], b"abc"),
            row(vec![], b"abc"),
            row(vec![-2, 3], b"ab"),
            row(vec![i64::MAX, i64::MAX, 2], b"ab"),
            row(vec![i64::MAX], b""),
        ] {
            let wire = pb::QueryResult {
                rows: vec![bad.clone()],
                ..Default::default()
            }
            .encode_to_vec();
            let view = ResultView::decode(wire.as_slice()).unwrap();
            assert_eq!(view.rows[0].cells().map(|c| c.count()), None, "{bad:?}");
            assert_eq!(view.rows[0].len(), bad.lengths.len());
        }
        // Any negative length is NULL, as -1 is.
        let view = RowView::from(&row(vec![-7, 2], b"ab"));
        assert_eq!(cells(&view).unwrap(), vec![None, Some(&b"ab"[..])]);
    }

    /// Lengths packed in two pieces, or sent one by one unpacked: the
    /// same row, as protobuf's parsers must read it.
    #[test]
    fn lengths_in_pieces_or_unpacked() {
        let mut wire = Vec::new();
        encode_key(LENGTHS_TAG, WireType::LengthDelimited, &mut wire);
        wire.extend_from_slice(&[2, 0x0a, 0x01]); // 5, -1
        encode_key(LENGTHS_TAG, WireType::Varint, &mut wire);
        wire.push(0x00); // 0
        encode_key(LENGTHS_TAG, WireType::LengthDelimited, &mut wire);
        wire.extend_from_slice(&[1, 0x06]); // 3
        pb_bytes::encode(VALUES_TAG, &Bytes::from_static(b"helloabc"), &mut wire);
        encode_key(99, WireType::Varint, &mut wire);
        wire.push(1);
        let view = RowView::decode(wire.as_slice()).unwrap();
        let prost = pb::Row::decode(wire.as_slice()).unwrap();
        assert_eq!(prost.lengths, vec![5, -1, 0, 3]);
        assert_eq!(view, RowView::from(&prost));
        assert_eq!(
            cells(&view).unwrap(),
            vec![Some(&b"hello"[..]), None, Some(&b""[..]), Some(&b"abc"[..])]
        );
    }

    /// Malformed lengths fail the decode, as prost's does, never panic:
    /// a truncated or overlong varint, a packed length past the message.
    #[test]
    fn malformed_lengths_fail_the_decode() {
        for wire in [
            &[0x0a, 0x01, 0x80][..],
            &[0x0a, 0x02, 0x80][..],
            &[
                0x0a, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ][..],
            &[0x0a, 0x05, 0x02][..],
            &[0x08][..],
            &[0x0d, 0, 0, 0, 0][..],
        ] {
            assert!(pb::Row::decode(wire).is_err(), "prost took {wire:?}");
            assert!(RowView::decode(wire).is_err(), "{wire:?}");
        }
    }

    /// Random and mangled rows: decoded exactly when prost decodes them,
    /// into the same cells (or none where prost's lengths do not add up),
    /// and never a panic.
    #[test]
    fn agrees_with_prost_on_any_bytes() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        for round in 0..20_000 {
            let lengths = (0..rng.random_range(0..6))
                .map(|_| match rng.random_range(0..4) {
                    0 => -1,
                    1 => rng.random_range(-3..300),
                    _ => rng.random_range(0..4),
                })
                .collect();
            let values: Vec<u8> = (0..rng.random_range(0..12)).map(|_| rng.random()).collect();
            let mut wire = pb::Row {
                lengths,
                values: values.into(),
            }
            .encode_to_vec();
            for _ in 0..rng.random_range(0..3) {
                match rng.random_range(0..3) {
                    0 if !wire.is_empty() => {
                        let at = rng.random_range(0..wire.len());
                        wire[at] = rng.random();
                    }
                    1 if !wire.is_empty() => {
                        wire.truncate(rng.random_range(0..wire.len()));
                    }
                    _ => wire.push(rng.random()),
                }
            }
            let prost = pb::Row::decode(wire.as_slice());
            let ours = RowView::decode(Bytes::from(wire.clone()));
            assert_eq!(prost.is_ok(), ours.is_ok(), "round {round}: {wire:02x?}");
            if let (Ok(prost), Ok(ours)) = (prost, ours) {
                let want = unpacked(&prost);
                let got = ours
                    .cells()
                    .map(|c| c.map(|c| c.map(Bytes::copy_from_slice)).collect::<Vec<_>>());
                assert_eq!(got, want, "round {round}: {wire:02x?}");
                assert_eq!(ours.len(), prost.lengths.len());
            }
        }
    }

    /// The cells of a row as the generated type reads them: lengths
    /// (negative: NULL) over the values, which they must use up. (Written
    /// here, not borrowed from `translate`: `api` imports nothing of it.)
    fn unpacked(row: &pb::Row) -> Option<Vec<Option<Bytes>>> {
        let mut offset = 0usize;
        let mut cells = Vec::new();
        for &len in &row.lengths {
            let Ok(len) = usize::try_from(len) else {
                cells.push(None);
                continue;
            };
            let end = offset.checked_add(len).filter(|&e| e <= row.values.len())?;
            cells.push(Some(row.values.slice(offset..end)));
            offset = end;
        }
        (offset == row.values.len()).then_some(cells)
    }
}
