//! Text-protocol rows read from the server's packets as the relay
//! diverted them (`extended_metadata::tap`): the bytes arrive in chunks
//! cut anywhere, a row may span chunks and, over 16 MiB, several
//! packets; each row is handed out as its cells' places in the bytes,
//! so the batch takes them from where they are (no value per cell).

use bytes::{Buf, Bytes};

use crate::api::row_batch::Cells;

use super::extended_metadata::MAX_PAYLOAD;

/// A chunk's rows could not be read as `columns` text cells each.
#[derive(Debug, PartialEq, Eq)]
pub struct BadRow(pub &'static str);

/// Where the row handed out last is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// The payload at `pending[4..end]`.
    Pending { end: usize },
    /// The payload at `partial[4..]`.
    Partial,
    /// The payload in `long` (a row over several packets).
    Long,
}

/// Rows of one result set, assembled from the packets' bytes.
#[derive(Default)]
pub struct TextRows {
    columns: usize,
    /// What is left of the last chunk.
    pending: Bytes,
    /// A packet begun in an earlier chunk, header included.
    partial: Vec<u8>,
    /// A row that spans packets: the payloads so far.
    long: Vec<u8>,
    /// Whether `long` is being assembled (its last packet is to come).
    in_long: bool,
    held: Option<Held>,
    /// Each cell of the row held: its place in the payload, `None` NULL.
    cells: Vec<Option<(usize, usize)>>,
}

/// A long row's room is given back past this.
const KEEP: usize = 1 << 20;

impl TextRows {
    /// A result set of `columns` columns starts.
    pub fn start(&mut self, columns: usize) {
        self.columns = columns;
    }

    /// More of the rows' bytes; only once [`Self::advance`] needs them.
    pub fn feed(&mut self, chunk: Bytes) {
        debug_assert!(self.pending.is_empty());
        self.pending = chunk;
    }

    /// Whether what was fed ended between rows (the result may end).
    pub fn between_rows(&self) -> bool {
        self.pending.is_empty() && self.partial.is_empty() && !self.in_long
    }

    /// Moves to the next row: `true` once it is whole (see
    /// [`Self::row`]), `false` when more bytes are needed.
    pub fn advance(&mut self) -> Result<bool, BadRow> {
        self.release();
        loop {
            let Some(packet) = self.next_packet() else {
                return Ok(false);
            };
            let bytes = match packet {
                Held::Pending { end } => &self.pending[..end],
                Held::Partial | Held::Long => &self.partial[..],
            };
            let payload_len = payload_len(bytes);
            if payload_len == MAX_PAYLOAD || self.in_long {
                self.long.extend_from_slice(&bytes[4..]);
                self.in_long = payload_len == MAX_PAYLOAD;
                self.held = Some(packet);
                self.release();
                if self.in_long {
                    continue;
                }
                self.held = Some(Held::Long);
            } else {
                self.held = Some(packet);
            }
            let mut cells = std::mem::take(&mut self.cells);
            let read = read_cells(self.payload(), self.columns, &mut cells);
            self.cells = cells;
            return read.map(|()| true);
        }
    }

    /// The row [`Self::advance`] moved to.
    pub fn row(&self) -> TextRow<'_> {
        TextRow {
            payload: self.payload(),
            cells: &self.cells,
        }
    }

    fn payload(&self) -> &[u8] {
        match self.held {
            Some(Held::Pending { end }) => &self.pending[4..end],
            Some(Held::Partial) => &self.partial[4..],
            Some(Held::Long) => &self.long,
            None => &[],
        }
    }

    /// Forgets the row held.
    fn release(&mut self) {
        match self.held.take() {
            Some(Held::Pending { end }) => self.pending.advance(end),
            Some(Held::Partial) => {
                self.partial.clear();
                if self.partial.capacity() > KEEP {
                    self.partial = Vec::new();
                }
            }
            Some(Held::Long) => {
                self.long.clear();
                if self.long.capacity() > KEEP {
                    self.long = Vec::new();
                }
            }
            None => {}
        }
    }

    /// The next whole packet, where it is; `None` when it has not all
    /// arrived (what did is kept in `partial`).
    fn next_packet(&mut self) -> Option<Held> {
        if self.partial.is_empty() {
            if let Some(header) = self.pending.get(..4) {
                let end = 4 + payload_len(header);
                if self.pending.len() >= end {
                    return Some(Held::Pending { end });
                }
            }
            self.partial.extend_from_slice(&self.pending);
            self.pending.clear();
            return None;
        }
        if self.partial.len() < 4 {
            let n = (4 - self.partial.len()).min(self.pending.len());
            self.partial.extend_from_slice(&self.pending[..n]);
            self.pending.advance(n);
            if self.partial.len() < 4 {
                return None;
            }
        }
        let end = 4 + payload_len(&self.partial);
        let n = (end - self.partial.len()).min(self.pending.len());
        self.partial.extend_from_slice(&self.pending[..n]);
        self.pending.advance(n);
        (self.partial.len() == end).then_some(Held::Partial)
    }
}

fn payload_len(header: &[u8]) -> usize {
    usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16
}

/// The places of a text row's `columns` cells in `payload`: each a
/// length-encoded string, or 0xfb for NULL, and nothing after the last.
fn read_cells(
    payload: &[u8],
    columns: usize,
    cells: &mut Vec<Option<(usize, usize)>>,
) -> Result<(), BadRow> {
    cells.clear();
    let mut at = 0;
    while at < payload.len() {
        if payload[at] == 0xfb {
            cells.push(None);
            at += 1;
            continue;
        }
        let (len, size) =
            super::extended_metadata::lenenc(&payload[at..]).ok_or(BadRow("a cell's length"))?;
        let start = at + size;
        let end = usize::try_from(len)
            .ok()
            .and_then(|len| start.checked_add(len))
            .filter(|&end| end <= payload.len())
            .ok_or(BadRow("a cell longer than its row"))?;
        cells.push(Some((start, end)));
        at = end;
    }
    if cells.len() != columns {
        return Err(BadRow("a row of another number of cells"));
    }
    Ok(())
}

/// One row's cells, where they are in its packet.
pub struct TextRow<'a> {
    payload: &'a [u8],
    cells: &'a [Option<(usize, usize)>],
}

impl Cells for TextRow<'_> {
    fn count(&self) -> usize {
        self.cells.len()
    }
    fn cell(&self, i: usize) -> Option<&[u8]> {
        self.cells[i].map(|(start, end)| &self.payload[start..end])
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    type Row = Vec<Option<Vec<u8>>>;

    /// `row` as the server sends it: a text row's payload in packets of
    /// at most `max` bytes (MAX_PAYLOAD in the protocol; smaller in
    /// tests stands for it only through `split`).
    fn packets(row: &Row) -> Vec<u8> {
        let mut payload = Vec::new();
        for cell in row {
            match cell {
                None => payload.push(0xfb),
                Some(v) => {
                    let len = v.len();
                    if len < 251 {
                        payload.push(len as u8);
                    } else if len < 1 << 16 {
                        payload.push(0xfc);
                        payload.extend_from_slice(&(len as u16).to_le_bytes());
                    } else if len < 1 << 24 {
                        payload.push(0xfd);
                        payload.extend_from_slice(&(len as u32).to_le_bytes()[..3]);
                    } else {
                        payload.push(0xfe);
                        payload.extend_from_slice(&(len as u64).to_le_bytes());
                    }
                    payload.extend_from_slice(v);
                }
            }
        }
        let mut out = Vec::new();
        let mut rest = &payload[..];
        loop {
            let n = rest.len().min(MAX_PAYLOAD);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
            out.push(7);
            out.extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            if n < MAX_PAYLOAD {
                return out;
            }
        }
    }

    /// Every row read from `bytes` fed in pieces of the given sizes.
    fn read(
        bytes: &[u8],
        columns: usize,
        mut sizes: impl Iterator<Item = usize>,
    ) -> Result<Vec<Row>, BadRow> {
        let mut rows = TextRows::default();
        rows.start(columns);
        let mut got = Vec::new();
        let mut rest = bytes;
        loop {
            while rows.advance()? {
                let row = rows.row();
                got.push(
                    (0..row.count())
                        .map(|i| row.cell(i).map(<[u8]>::to_vec))
                        .collect(),
                );
            }
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at(sizes.next().unwrap_or(1).clamp(1, rest.len()));
            rest = after;
            rows.feed(Bytes::copy_from_slice(piece));
        }
        if !rows.between_rows() {
            return Err(BadRow("cut"));
        }
        Ok(got)
    }

    fn random_row(rng: &mut impl Rng, width: usize) -> Row {
        (0..width)
            .map(|_| match rng.random_range(0..8) {
                0 => None,
                1 => Some(Vec::new()),
                2 => {
                    let most = if rng.random_range(0..8) == 0 {
                        70_000
                    } else {
                        3_000
                    };
                    Some(
                        (0..rng.random_range(240..most))
                            .map(|_| rng.random())
                            .collect(),
                    )
                }
                _ => Some((0..rng.random_range(1..30)).map(|_| rng.random()).collect()),
            })
            .collect()
    }

    /// Rows of NULLs, empty strings and values of every length-encoded
    /// size, cut anywhere: each row whole and exact, in order.
    #[test]
    fn rows_cut_anywhere_are_read_whole_in_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(15);
        for round in 0..100 {
            let width = rng.random_range(1..8);
            let mut expected: Vec<Row> = (0..rng.random_range(0..40))
                .map(|_| random_row(&mut rng, width))
                .collect();
            expected.push(vec![None; width]);
            expected.push(vec![Some(Vec::new()); width]);
            let bytes: Vec<u8> = expected.iter().flat_map(packets).collect();
            let most = [3, 40, 300, 20_000, 1 << 20][round % 5];
            let sizes = std::iter::repeat_with(|| rng.random_range(1..=most));
            let got = read(&bytes, width, sizes).unwrap();
            assert!(got == expected, "round {round}, pieces of at most {most}");
        }
    }

    /// A row over 16 MiB comes in several packets (the first full): it
    /// is read as one row, between two short ones.
    #[test]
    fn a_row_over_several_packets_is_one_row() {
        for len in [
            MAX_PAYLOAD - 4,
            MAX_PAYLOAD - 3,
            MAX_PAYLOAD,
            2 * MAX_PAYLOAD + 5,
        ] {
            let long: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let expected = vec![
                vec![Some(b"a".to_vec()), None],
                vec![Some(long), Some(b"z".to_vec())],
                vec![None, Some(Vec::new())],
            ];
            let bytes: Vec<u8> = expected.iter().flat_map(packets).collect();
            for most in [128 << 10, 40 << 20] {
                let got = read(&bytes, 2, std::iter::repeat(most)).unwrap();
                assert!(got == expected, "a cell of {len} in pieces of {most}");
            }
        }
    }

    /// Rows that are not `columns` text cells, and garbage: an error,
    /// never a panic.
    #[test]
    fn malformed_rows_are_refused() {
        let row = packets(&vec![Some(b"abc".to_vec()), None]);
        assert!(read(&row, 2, std::iter::once(99)).is_ok());
        assert!(read(&row, 3, std::iter::once(99)).is_err());
        assert!(read(&row, 1, std::iter::once(99)).is_err());
        // A cell that runs past its packet; a length byte 0xff.
        assert!(read(&[2, 0, 0, 0, 5, b'a'], 1, std::iter::once(9)).is_err());
        assert!(read(&[1, 0, 0, 0, 0xff], 1, std::iter::once(9)).is_err());
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..500 {
            let noise: Vec<u8> = (0..rng.random_range(0..200))
                .map(|_| rng.random())
                .collect();
            let columns = rng.random_range(1..4);
            let sizes = std::iter::repeat_with(|| rng.random_range(1..=64));
            let _ = read(&noise, columns, sizes);
        }
    }
}
