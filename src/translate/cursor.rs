//! A server-side cursor (`COM_STMT_EXECUTE` with `CURSOR_TYPE_READ_ONLY`,
//! then `COM_STMT_FETCH`), sans-IO.
//!
//! MySQL answers such an execute with the column definitions and a
//! terminator carrying `SERVER_STATUS_CURSOR_EXISTS`, but no rows; each
//! fetch of `n` then gets up to `n` binary rows and a terminator with
//! `SERVER_STATUS_CURSOR_EXISTS` (more may follow) or
//! `SERVER_STATUS_LAST_ROW_SENT` (the cursor is exhausted and closed). As
//! in MySQL, the last row is only known to be last when a fetch asks for
//! more than remain, so a result of exactly `n` rows takes an empty second
//! fetch.
//!
//! The rows come from the statement's psdb stream, which the connection
//! reads only as fetches need rows (so a large result waits upstream, held
//! back by flow control), or drains into this buffer, up to a limit, when
//! another statement needs the session.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::api::pb;
use crate::api::row_view::{ResultView, RowView};
use crate::mysql::MysqlError;
use crate::mysql::packet::Packets;
use crate::mysql::response::{self, ColumnStyle};
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::connection_status::{ConnectionStatus, StatusColumns, rewritten_row};
use crate::translate::to_mysql;

#[derive(Debug)]
pub struct Cursor {
    fields: Vec<pb::Field>,
    rows: VecDeque<RowView>,
    /// Bytes of row values held in `rows`.
    buffered: usize,
    /// The result set has ended upstream: `rows` is all that is left.
    complete: bool,
    /// The client connection's own status variables, and where the set
    /// holds them (see [`crate::translate::connection_status`]).
    status_rows: Option<(StatusColumns, Arc<ConnectionStatus>)>,
}

impl Cursor {
    /// Answers the execute that opens the cursor: the column count and
    /// definitions, then (with or without `CLIENT_DEPRECATE_EOF`) one
    /// terminator with `SERVER_STATUS_CURSOR_EXISTS` and no rows.
    pub fn open(
        caps: CapabilityFlags,
        style: ColumnStyle,
        fields: Vec<pb::Field>,
        status: StatusFlags,
        out: &mut Packets,
    ) -> Self {
        response::result_set_header(out, fields.len() as u64);
        for field in &fields {
            to_mysql::column_definition(out, style, field);
        }
        let status = status - StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        response::end_of_rows(
            out,
            caps,
            status | StatusFlags::SERVER_STATUS_CURSOR_EXISTS,
            0,
        );
        Self {
            fields,
            rows: VecDeque::new(),
            buffered: 0,
            complete: false,
            status_rows: None,
        }
    }

    /// Rows of status variables that describe the connection itself say
    /// `status`'s values, as in a result written at once.
    #[must_use]
    pub fn with_connection_status(mut self, status: Arc<ConnectionStatus>) -> Self {
        self.status_rows = StatusColumns::of(&self.fields).map(|columns| (columns, status));
        self
    }

    /// A message of the statement's stream after the one with the fields:
    /// more rows, or (neither fields nor rows) the end of the set.
    pub fn push(&mut self, result: &ResultView) -> Result<(), MysqlError> {
        if !result.head.fields.is_empty() || self.complete {
            // A cursor's statement has one result set; a second one (or
            // rows after its end) is not something a SELECT produces.
            self.complete = true;
            return Err(MysqlError {
                code: 1105,
                state: "HY000".into(),
                message: "Malformed result from the gateway: more than one result set for a cursor"
                    .into(),
            });
        }
        if result.rows.is_empty() {
            self.complete = true;
        }
        for row in &result.rows {
            // A copy, not a view of the message: a row held here would
            // keep its whole message (up to 256 KiB) for as long, beyond
            // what `buffered` counts.
            let own = self
                .status_rows
                .as_ref()
                .and_then(|(columns, status)| rewritten_row(row, *columns, status))
                .unwrap_or_else(|| row.to_owned_copy());
            self.buffered += own.values().len();
            self.rows.push_back(own);
        }
        Ok(())
    }

    /// The stream ended (with or without an end-of-set message).
    pub fn upstream_done(&mut self) {
        self.complete = true;
    }

    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Bytes of row values held, for the buffering limit.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Writes held rows, at most `*remaining`, and counts them off.
    pub fn write_rows(&mut self, remaining: &mut u32, out: &mut Packets) -> Result<(), MysqlError> {
        while *remaining > 0 {
            let Some(row) = self.rows.pop_front() else {
                break;
            };
            self.buffered -= row.values().len();
            to_mysql::binary_row(out, &self.fields, &row)?;
            *remaining -= 1;
        }
        Ok(())
    }

    /// Ends a fetch once its rows are written: `remaining` rows it asked
    /// for could not be sent. Returns whether the cursor is exhausted,
    /// which closes it (its terminator says `SERVER_STATUS_LAST_ROW_SENT`).
    ///
    /// Call only when the fetch is satisfied (`remaining == 0`) or no row
    /// is left (`is_complete` and nothing held).
    pub fn end_fetch(
        &self,
        caps: CapabilityFlags,
        remaining: u32,
        status: StatusFlags,
        warnings: u16,
        out: &mut Packets,
    ) -> bool {
        let exhausted = remaining > 0;
        debug_assert!(!exhausted || (self.complete && self.rows.is_empty()));
        let flag = if exhausted {
            StatusFlags::SERVER_STATUS_LAST_ROW_SENT
        } else {
            StatusFlags::SERVER_STATUS_CURSOR_EXISTS
        };
        let status = status - StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        response::end_of_rows(out, caps, status | flag, warnings);
        exhausted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::decode;
    use crate::translate::rows::pack_row;
    use crate::translate::types::vitess_type;
    use bytes::BytesMut;

    fn caps(deprecate_eof: bool) -> CapabilityFlags {
        let mut c = crate::mysql::server_capabilities();
        c.set(CapabilityFlags::CLIENT_DEPRECATE_EOF, deprecate_eof);
        c
    }

    fn field(name: &str) -> pb::Field {
        pb::Field {
            name: bytes::Bytes::copy_from_slice(name.as_bytes()),
            r#type: vitess_type(
                mysql_common::constants::ColumnType::MYSQL_TYPE_LONG as u8,
                0,
            ) as i32,
            charset: 63,
            ..Default::default()
        }
    }

    fn rows(from: i32, to: i32) -> ResultView {
        pb::QueryResult {
            rows: (from..to)
                .map(|i| pack_row([Some(i.to_string().as_bytes())]))
                .collect(),
            ..Default::default()
        }
        .into()
    }

    fn end() -> ResultView {
        ResultView::default()
    }

    /// The payloads written, in order.
    fn packets(out: &mut Packets) -> Vec<Vec<u8>> {
        let mut buf = BytesMut::from(&out.take()[..]);
        let mut all = Vec::new();
        while let Some(p) = decode(&mut buf, 1 << 24).unwrap() {
            all.push(p.payload.to_vec());
        }
        all
    }

    /// Status flags of a terminator: an EOF (0xfe, warnings, status) or an
    /// OK-0xfe (0xfe, affected 0, insert id 0, status, warnings) both
    /// have them at bytes 3..5.
    fn terminator_status(p: &[u8]) -> StatusFlags {
        assert_eq!(p[0], 0xfe);
        StatusFlags::from_bits_truncate(u16::from_le_bytes([p[3], p[4]]))
    }

    /// A cursor over `SHOW STATUS` says the client connection's own
    /// `Ssl_cipher`, as a result written at once does, and counts what
    /// it holds by the rows it keeps.
    #[test]
    fn status_rows_say_the_clients_connection() {
        use crate::translate::connection_status::{NegotiatedTls, OfferedTls};
        let status_field = |org_name: &str| pb::Field {
            name: bytes::Bytes::copy_from_slice(org_name.as_bytes()),
            org_name: bytes::Bytes::copy_from_slice(org_name.as_bytes()),
            table: "SESSION_STATUS".into(),
            org_table: "SESSION_STATUS".into(),
            database: "information_schema".into(),
            r#type: vitess_type(
                mysql_common::constants::ColumnType::MYSQL_TYPE_VAR_STRING as u8,
                0,
            ) as i32,
            charset: 33,
            ..Default::default()
        };
        let status = Arc::new(ConnectionStatus::tls(
            NegotiatedTls {
                cipher: "TLS_AES_128_GCM_SHA256",
                version: "TLSv1.3",
                resumed: false,
            },
            OfferedTls::default(),
        ));
        let mut out = Packets::default();
        let mut cursor = Cursor::open(
            caps(true),
            ColumnStyle::Mysql,
            vec![
                status_field("VARIABLE_NAME"),
                status_field("VARIABLE_VALUE"),
            ],
            StatusFlags::SERVER_STATUS_AUTOCOMMIT,
            &mut out,
        )
        .with_connection_status(status);
        out.take();
        let rows: ResultView = pb::QueryResult {
            rows: vec![
                pack_row([Some(&b"Ssl_accepts"[..]), Some(&b"7"[..])]),
                pack_row([Some(&b"Ssl_cipher"[..]), Some(&b""[..])]),
            ],
            ..Default::default()
        }
        .into();
        cursor.push(&rows).unwrap();
        assert_eq!(
            cursor.buffered(),
            "Ssl_accepts7Ssl_cipherTLS_AES_128_GCM_SHA256".len()
        );
        cursor.write_rows(&mut 2, &mut out).unwrap();
        assert_eq!(cursor.buffered(), 0);
        let p = packets(&mut out);
        assert!(p[0].ends_with(b"\x01\x37"), "{:?}", p[0]);
        assert!(p[1].ends_with(b"\x16TLS_AES_128_GCM_SHA256"), "{:?}", p[1]);
    }

    #[test]
    fn open_sends_columns_and_a_cursor_exists_terminator_in_both_eof_styles() {
        for deprecate_eof in [false, true] {
            let mut out = Packets::default();
            Cursor::open(
                caps(deprecate_eof),
                ColumnStyle::Mysql,
                vec![field("a"), field("b")],
                StatusFlags::SERVER_STATUS_AUTOCOMMIT,
                &mut out,
            );
            let p = packets(&mut out);
            // count, two definitions, one terminator, no rows
            assert_eq!(p.len(), 4, "deprecate_eof={deprecate_eof}");
            assert_eq!(p[0], [2]);
            let status = terminator_status(&p[3]);
            assert!(status.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));
            assert!(status.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT));
        }
    }

    #[test]
    fn fetches_in_chunks_then_reports_the_last_row() {
        let caps = caps(false);
        let mut out = Packets::default();
        let mut cursor = Cursor::open(
            caps,
            ColumnStyle::Mysql,
            vec![field("n")],
            StatusFlags::empty(),
            &mut out,
        );
        packets(&mut out);
        cursor.push(&rows(0, 3)).unwrap();
        assert_eq!(cursor.buffered(), 3);

        // Fetch 2 of 3: two rows, cursor still open.
        let mut remaining = 2;
        cursor.write_rows(&mut remaining, &mut out).unwrap();
        assert_eq!(remaining, 0);
        assert!(!cursor.end_fetch(caps, remaining, StatusFlags::empty(), 0, &mut out));
        let p = packets(&mut out);
        assert_eq!(p.len(), 3);
        // A binary row: header, NULL bitmap, the INT 0.
        assert_eq!(p[0], [0x00, 0x00, 0, 0, 0, 0]);
        let status = terminator_status(&p[2]);
        assert!(status.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));

        // Fetch 2 more: one row is left, and the set is known to end.
        cursor.push(&end()).unwrap();
        assert!(cursor.is_complete());
        let mut remaining = 2;
        cursor.write_rows(&mut remaining, &mut out).unwrap();
        assert_eq!(remaining, 1);
        assert!(cursor.end_fetch(caps, remaining, StatusFlags::empty(), 0, &mut out));
        let p = packets(&mut out);
        assert_eq!(p.len(), 2);
        let status = terminator_status(&p[1]);
        assert!(status.contains(StatusFlags::SERVER_STATUS_LAST_ROW_SENT));
        assert!(!status.contains(StatusFlags::SERVER_STATUS_CURSOR_EXISTS));
        assert_eq!(cursor.buffered(), 0);
    }

    #[test]
    fn exactly_n_rows_take_an_empty_last_fetch_as_in_mysql() {
        let caps = caps(true);
        let mut out = Packets::default();
        let mut cursor = Cursor::open(
            caps,
            ColumnStyle::Mysql,
            vec![field("n")],
            StatusFlags::empty(),
            &mut out,
        );
        cursor.push(&rows(0, 2)).unwrap();
        let mut remaining = 2;
        cursor.write_rows(&mut remaining, &mut out).unwrap();
        assert!(!cursor.end_fetch(caps, remaining, StatusFlags::empty(), 0, &mut out));
        cursor.upstream_done();
        let mut out = Packets::default();
        let mut remaining = 2;
        cursor.write_rows(&mut remaining, &mut out).unwrap();
        assert!(cursor.end_fetch(caps, remaining, StatusFlags::empty(), 0, &mut out));
        let p = packets(&mut out);
        assert_eq!(p.len(), 1, "no rows, one OK-0xfe terminator");
        assert!(terminator_status(&p[0]).contains(StatusFlags::SERVER_STATUS_LAST_ROW_SENT));
    }

    #[test]
    fn a_second_result_set_is_refused() {
        let mut out = Packets::default();
        let mut cursor = Cursor::open(
            caps(true),
            ColumnStyle::Mysql,
            vec![field("n")],
            StatusFlags::empty(),
            &mut out,
        );
        let second = pb::QueryResult {
            fields: vec![field("m")],
            ..Default::default()
        };
        assert_eq!(cursor.push(&second.into()).unwrap_err().code, 1105);
        assert!(cursor.is_complete());
    }

    /// Held rows are copies: a view would keep its whole message alive
    /// beyond what `buffered` counts.
    #[test]
    fn held_rows_are_copies_of_their_own() {
        let message = bytes::Bytes::from(vec![b'x'; 4096]);
        let mut cursor = Cursor::open(
            CapabilityFlags::empty(),
            ColumnStyle::Mysql,
            vec![pb::Field::default()],
            StatusFlags::empty(),
            &mut Packets::default(),
        );
        let result = pb::QueryResult {
            rows: vec![pb::Row {
                lengths: vec![3],
                values: message.slice(10..13),
            }],
            ..Default::default()
        };
        cursor.push(&result.into()).unwrap();
        let held = cursor.rows[0].values();
        assert_eq!(held, &b"xxx"[..]);
        assert!(!message.as_ptr_range().contains(&held.as_ptr()));
        assert_eq!(cursor.buffered(), 3);
    }
}
