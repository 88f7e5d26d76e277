//! Rows in Vitess's packed form: `lengths` (-1 = NULL) + concatenated
//! text-protocol `values` (psdb-protocol.md §4).

use bytes::{Bytes, BytesMut};

use crate::api::pb::Row;
use crate::api::row_batch::Cells;

/// Packs one row's cells. `None` is SQL NULL.
pub fn pack_row<'a>(cells: impl IntoIterator<Item = Option<&'a [u8]>>) -> Row {
    let cells = cells.into_iter();
    let mut lengths = Vec::with_capacity(cells.size_hint().0);
    let mut values = BytesMut::new();
    for cell in cells {
        match cell {
            None => lengths.push(-1),
            Some(bytes) => {
                lengths.push(bytes.len() as i64);
                values.extend_from_slice(bytes);
            }
        }
    }
    Row {
        lengths,
        values: values.freeze(),
    }
}

/// Packs the cells of a row the backend driver holds.
pub fn pack(cells: &dyn Cells) -> Row {
    pack_row((0..cells.count()).map(|i| cells.cell(i)))
}

/// Unpacks a row into cells; `None` if `lengths` and `values` disagree.
pub fn unpack_row(row: &Row) -> Option<Vec<Option<Bytes>>> {
    let mut offset = 0usize;
    let mut out = Vec::with_capacity(row.lengths.len());
    for &len in &row.lengths {
        if len < 0 {
            out.push(None);
            continue;
        }
        let end = offset.checked_add(usize::try_from(len).ok()?)?;
        if end > row.values.len() {
            return None;
        }
        out.push(Some(row.values.slice(offset..end)));
        offset = end;
    }
    (offset == row.values.len()).then_some(out)
}

/// Approximate encoded size of a row, used to bound message sizes.
pub fn row_size(row: &Row) -> usize {
    row.values.len() + row.lengths.len() * 2 + 4
}

/// [`row_size`] of the row `cells` pack into.
pub fn cells_size(cells: &dyn Cells) -> usize {
    let count = cells.count();
    let values: usize = (0..count)
        .filter_map(|i| cells.cell(i))
        .map(<[u8]>::len)
        .sum();
    values + count * 2 + 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_nulls_and_empties() {
        let row = pack_row([Some(&b"1"[..]), None, Some(&b""[..]), Some(&b"xyz"[..])]);
        assert_eq!(row.lengths, vec![1, -1, 0, 3]);
        assert_eq!(&row.values[..], b"1xyz");
        let cells = unpack_row(&row).unwrap();
        assert_eq!(cells[0].as_deref(), Some(&b"1"[..]));
        assert_eq!(cells[1], None);
        assert_eq!(cells[2].as_deref(), Some(&b""[..]));
    }

    #[test]
    fn cells_are_sized_as_their_row() {
        let cells = vec![Some(&b"1"[..]), None, Some(&b""[..]), Some(&b"xyz"[..])];
        assert_eq!(cells_size(&cells), row_size(&pack(&cells)));
        assert_eq!(pack(&cells), pack_row(cells.iter().copied()));
    }

    #[test]
    fn inconsistent_rows_are_rejected() {
        let bad = Row {
            lengths: vec![5],
            values: Bytes::from_static(b"abc"),
        };
        assert_eq!(unpack_row(&bad), None);
    }
}
