//! Server → client packets of the MySQL protocol (4.1): OK, EOF, ERR,
//! column definitions, text and binary rows, and the responses to
//! COM_STMT_PREPARE and COM_FIELD_LIST.
//!
//! The sidecar never sees MariaDB's packets, only the psdb `Field`s and
//! `Row`s the gateway built from them, so these encoders rebuild the exact
//! bytes the server sent: the column definition from every `Field`
//! attribute (type code via [`mysql_type`]) and binary-protocol values
//! from the text the gateway read. Everything is written in place into the
//! [`Packets`] buffer: no per-row or per-value allocations.

use std::str::FromStr;

use bytes::{BufMut, BytesMut};
use mysql_common::io::BufMutExt;

use super::packet::Packets;
use super::temporal::{DateTime, Time};
use super::{CapabilityFlags, ColumnFlags, ColumnType, MariadbCapabilities, StatusFlags};
use crate::api::pb;
use crate::translate::errors::MysqlError;
use crate::translate::types::{BINARY_CHARSET, mysql_field_type};

const OK_HEADER: u8 = 0x00;
const EOF_HEADER: u8 = 0xfe;
const ERR_HEADER: u8 = 0xff;
/// A NULL cell in a text row (and "no default" in COM_FIELD_LIST).
const NULL_CELL: u8 = 0xfb;
/// Length of the fixed part of a column definition (always 0x0c).
const FIXED_FIELDS_LEN: u64 = 0x0c;
/// Binary rows' NULL bitmap starts at bit 2 (the first two are reserved).
const BINARY_NULL_BITMAP_OFFSET: usize = 2;

/// The figures of an OK packet.
struct OkBody<'a> {
    affected_rows: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
    info: &'a str,
    /// Session-state changes, already encoded ([`session_track_schema`]);
    /// empty: none.
    state: &'a [u8],
}

/// `SESSION_TRACK_SCHEMA`: the default database changed (to `schema`).
const SESSION_TRACK_SCHEMA: u8 = 1;

/// The session-state entry a server sends when the default database
/// changes (`session_track_schema`, on by default): drivers such as
/// MariaDB Connector/J keep their idea of the current database from it.
pub fn session_track_schema(schema: &[u8]) -> Vec<u8> {
    let mut data = BytesMut::new();
    data.put_lenenc_str(schema);
    let mut entry = BytesMut::new();
    entry.put_u8(SESSION_TRACK_SCHEMA);
    entry.put_lenenc_str(&data);
    entry.to_vec()
}

/// An OK packet that also reports session-state changes (`state`, from
/// [`session_track_schema`]) to a client that asked for them
/// (`CLIENT_SESSION_TRACK`); to others, a plain [`ok`].
#[allow(clippy::too_many_arguments)]
pub fn ok_tracked(
    out: &mut Packets,
    caps: CapabilityFlags,
    affected_rows: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
    info: &str,
    state: &[u8],
) {
    let body = OkBody {
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info,
        state,
    };
    out.push(|b| write_ok(b, OK_HEADER, caps, &body));
}

/// OK packet: the result of a statement without a result set.
pub fn ok(
    out: &mut Packets,
    caps: CapabilityFlags,
    affected_rows: u64,
    last_insert_id: u64,
    status: StatusFlags,
    warnings: u16,
    info: &str,
) {
    ok_tracked(
        out,
        caps,
        affected_rows,
        last_insert_id,
        status,
        warnings,
        info,
        &[],
    );
}

/// The classic EOF packet (0xfe, warnings, status): ends column
/// definitions, and rows when the client lacks `CLIENT_DEPRECATE_EOF`.
pub fn eof(out: &mut Packets, caps: CapabilityFlags, status: StatusFlags, warnings: u16) {
    out.push(|b| {
        b.put_u8(EOF_HEADER);
        if caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
            b.put_u16_le(warnings);
            b.put_u16_le(status.bits());
        }
    });
}

/// Ends a result set's rows: an OK packet with header 0xfe for clients
/// with `CLIENT_DEPRECATE_EOF` (it can carry more than an EOF), else the
/// classic EOF.
pub fn end_of_rows(out: &mut Packets, caps: CapabilityFlags, status: StatusFlags, warnings: u16) {
    if caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
        let body = OkBody {
            affected_rows: 0,
            last_insert_id: 0,
            status,
            warnings,
            info: "",
            state: &[],
        };
        out.push(|b| write_ok(b, EOF_HEADER, caps, &body));
    } else {
        eof(out, caps, status, warnings);
    }
}

/// The EOF that follows column (or parameter) definitions, which clients
/// with `CLIENT_DEPRECATE_EOF` do not expect.
fn metadata_eof(out: &mut Packets, caps: CapabilityFlags, status: StatusFlags) {
    if !caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
        eof(out, caps, status, 0);
    }
}

/// ERR packet: 0xff, errno, `#` + SQLSTATE, message. A malformed SQLSTATE
/// is sent as HY000 so the client can still parse the packet.
pub fn err(out: &mut Packets, error: &MysqlError) {
    let state = error.state.as_bytes();
    let state: &[u8] = if state.len() == 5 && state.is_ascii() {
        state
    } else {
        b"HY000"
    };
    out.push(|b| {
        b.put_u8(ERR_HEADER);
        b.put_u16_le(error.code);
        b.put_u8(b'#');
        b.put_slice(state);
        b.put_slice(error.message.as_bytes());
    });
}

/// Writes an OK payload (header 0x00, or 0xfe as an end-of-rows marker).
/// The info string is length-encoded, as `net_send_ok` writes it (clients
/// read it that way whatever the manual says). `SERVER_SESSION_STATE_CHANGED`
/// is claimed only with state data to send, to a client that takes it.
fn write_ok(b: &mut BytesMut, header: u8, caps: CapabilityFlags, ok: &OkBody<'_>) {
    let tracked = !ok.state.is_empty() && caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK);
    let mut status = ok.status - StatusFlags::SERVER_SESSION_STATE_CHANGED;
    if tracked {
        status |= StatusFlags::SERVER_SESSION_STATE_CHANGED;
    }
    b.put_u8(header);
    b.put_lenenc_int(ok.affected_rows);
    b.put_lenenc_int(ok.last_insert_id);
    if caps.contains(CapabilityFlags::CLIENT_PROTOCOL_41) {
        b.put_u16_le(status.bits());
        b.put_u16_le(ok.warnings);
    } else if caps.contains(CapabilityFlags::CLIENT_TRANSACTIONS) {
        b.put_u16_le(status.bits());
    }
    if !ok.info.is_empty() || tracked {
        b.put_lenenc_str(ok.info.as_bytes());
    }
    if tracked {
        b.put_lenenc_str(ok.state);
    }
}

/// The first packet of a result set: its number of columns.
pub fn result_set_header(out: &mut Packets, column_count: u64) {
    out.push(|b| b.put_lenenc_int(column_count));
}

/// How column definitions describe a JSON column, which depends on the
/// server the sidecar presents itself as and on what the client accepted.
///
/// MySQL has a JSON wire type (245). MariaDB's JSON is a LONGTEXT (BLOB
/// 252) that only its extended column metadata marks as `format=json`,
/// sent to clients that accepted `MARIADB_CLIENT_EXTENDED_METADATA`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ColumnStyle {
    /// A MySQL server: JSON is type 245.
    #[default]
    Mysql,
    /// A MariaDB server, to a client without extended metadata.
    Mariadb,
    /// A MariaDB server, to a client with extended metadata: every column
    /// definition carries the extended metadata field (empty for most).
    MariadbExtended,
}

impl ColumnStyle {
    /// The style for a server of version `server_version` and a session
    /// whose negotiated MariaDB capabilities are `mariadb_caps`.
    pub fn new(server_version: &str, mariadb_caps: MariadbCapabilities) -> Self {
        if !server_version.contains("MariaDB") {
            Self::Mysql
        } else if mariadb_caps.contains(MariadbCapabilities::MARIADB_CLIENT_EXTENDED_METADATA) {
            Self::MariadbExtended
        } else {
            Self::Mariadb
        }
    }
}

/// Extended metadata entry kinds (MariaDB `enum_column_metadata`).
const METADATA_FORMAT_NAME: u8 = 1;

/// A column definition (protocol 4.1) rebuilt from every attribute the
/// gateway kept, so the client receives what MariaDB sent the gateway.
pub fn column_definition(out: &mut Packets, style: ColumnStyle, field: &pb::Field) {
    out.push(|b| write_column(b, style, field));
}

fn write_column(b: &mut BytesMut, style: ColumnStyle, field: &pb::Field) {
    let json = field.r#type == pb::Type::Json as i32;
    b.put_lenenc_str(b"def");
    b.put_lenenc_str(field.database.as_bytes());
    b.put_lenenc_str(field.table.as_bytes());
    b.put_lenenc_str(field.org_table.as_bytes());
    b.put_lenenc_str(field.name.as_bytes());
    b.put_lenenc_str(field.org_name.as_bytes());
    if style == ColumnStyle::MariadbExtended {
        // A length-encoded block of [kind][lenenc value] entries, placed
        // between org_name and the fixed fields.
        if json {
            const FORMAT: &[u8] = b"json";
            b.put_lenenc_int(2 + FORMAT.len() as u64);
            b.put_u8(METADATA_FORMAT_NAME);
            b.put_lenenc_str(FORMAT);
        } else {
            b.put_lenenc_int(0);
        }
    }
    b.put_lenenc_int(FIXED_FIELDS_LEN);
    b.put_u16_le(saturate_u16(field.charset));
    b.put_u32_le(field.column_length);
    let ty = if json && style != ColumnStyle::Mysql {
        ColumnType::MYSQL_TYPE_BLOB
    } else {
        column_type(field)
    };
    b.put_u8(ty as u8);
    b.put_u16_le(saturate_u16(field.flags));
    b.put_u8(u8::try_from(field.decimals).unwrap_or(u8::MAX));
    b.put_u16_le(0);
}

/// The MySQL column type of a field, from its Vitess type.
pub fn column_type(field: &pb::Field) -> ColumnType {
    let ty = pb::Type::try_from(field.r#type).unwrap_or(pb::Type::Varbinary);
    ColumnType::try_from(mysql_field_type(ty, &field.column_type))
        .unwrap_or(ColumnType::MYSQL_TYPE_VAR_STRING)
}

fn saturate_u16(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

/// A text-protocol row: each value length-encoded, NULL as 0xfb.
/// A row whose `lengths` and `values` disagree is refused (it would
/// desynchronise the client).
pub fn text_row(out: &mut Packets, row: &pb::Row) -> Result<(), MysqlError> {
    check_row(row)?;
    out.push(|b| {
        b.reserve(row.values.len() + row.lengths.len() * 2);
        for cell in Cells::new(row) {
            match cell {
                None => b.put_u8(NULL_CELL),
                Some(value) => b.put_lenenc_str(value),
            }
        }
    });
    Ok(())
}

/// A binary-protocol row (COM_STMT_EXECUTE results): 0x00, the NULL bitmap
/// (offset 2), then each non-NULL value in its column type's binary form.
///
/// Values arrive as MySQL text, so numbers and temporal values are parsed
/// and re-encoded; a value that does not parse as its column's type is an
/// error (1105) and nothing of the row is written.
pub fn binary_row(
    out: &mut Packets,
    fields: &[pb::Field],
    row: &pb::Row,
) -> Result<(), MysqlError> {
    check_row(row)?;
    if row.lengths.len() != fields.len() {
        return Err(malformed_row(format!(
            "{} values for {} columns",
            row.lengths.len(),
            fields.len()
        )));
    }
    let (start, seq) = (out.buf.len(), out.seq);
    let mut failure = None;
    out.push(|b| failure = write_binary_row(b, fields, row).err());
    match failure {
        None => Ok(()),
        Some(error) => {
            // Roll the half-written packet back: the caller sends ERR.
            out.buf.truncate(start);
            out.seq = seq;
            Err(error)
        }
    }
}

fn write_binary_row(
    b: &mut BytesMut,
    fields: &[pb::Field],
    row: &pb::Row,
) -> Result<(), MysqlError> {
    b.reserve(row.values.len() + row.lengths.len() * 4 + 8);
    b.put_u8(OK_HEADER);
    let bitmap_at = b.len();
    b.put_bytes(0, (fields.len() + 7 + BINARY_NULL_BITMAP_OFFSET) / 8);
    for (i, (field, cell)) in fields.iter().zip(Cells::new(row)).enumerate() {
        let Some(text) = cell else {
            let bit = i + BINARY_NULL_BITMAP_OFFSET;
            b[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        };
        let ty = column_type(field);
        let unsigned = field.flags & u32::from(ColumnFlags::UNSIGNED_FLAG.bits()) != 0;
        if write_binary_value(b, ty, unsigned, text).is_none() {
            return Err(unconvertible(field, ty, text));
        }
    }
    Ok(())
}

/// Writes one value in the binary protocol; `None` if `text` is not a
/// valid value of `ty`.
fn write_binary_value(b: &mut BytesMut, ty: ColumnType, unsigned: bool, text: &[u8]) -> Option<()> {
    use ColumnType::*;
    match (ty, unsigned) {
        (MYSQL_TYPE_TINY, false) => b.put_i8(parse(text)?),
        (MYSQL_TYPE_TINY, true) => b.put_u8(parse(text)?),
        (MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR, false) => b.put_i16_le(parse(text)?),
        (MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR, true) => b.put_u16_le(parse(text)?),
        (MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG, false) => b.put_i32_le(parse(text)?),
        (MYSQL_TYPE_INT24 | MYSQL_TYPE_LONG, true) => b.put_u32_le(parse(text)?),
        (MYSQL_TYPE_LONGLONG, false) => b.put_i64_le(parse(text)?),
        (MYSQL_TYPE_LONGLONG, true) => b.put_u64_le(parse(text)?),
        (MYSQL_TYPE_FLOAT, _) => b.put_f32_le(parse(text)?),
        (MYSQL_TYPE_DOUBLE, _) => b.put_f64_le(parse(text)?),
        (MYSQL_TYPE_DATE | MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP | MYSQL_TYPE_NEWDATE, _) => {
            DateTime::parse_text(text)?.write_binary(b)
        }
        (MYSQL_TYPE_TIME, _) => Time::parse_text(text)?.write_binary(b),
        // A NULL-typed column has no binary form but NULL.
        (MYSQL_TYPE_NULL, _) => return None,
        // DECIMAL, strings, blobs, JSON, BIT, ENUM, SET, GEOMETRY, VECTOR:
        // the binary protocol sends the same bytes as the text protocol.
        _ => b.put_lenenc_str(text),
    }
    Some(())
}

/// Parses a number written by the server; no allocation (the UTF-8 check
/// is a scan of the slice).
fn parse<T: FromStr>(text: &[u8]) -> Option<T> {
    std::str::from_utf8(text).ok()?.parse().ok()
}

/// The cells of a checked row, without copying: `None` is NULL.
struct Cells<'a> {
    lengths: std::slice::Iter<'a, i64>,
    values: &'a [u8],
}

impl<'a> Cells<'a> {
    /// Only for rows that passed [`check_row`].
    fn new(row: &'a pb::Row) -> Self {
        Self {
            lengths: row.lengths.iter(),
            values: &row.values,
        }
    }
}

impl<'a> Iterator for Cells<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        let len = *self.lengths.next()?;
        let Ok(len) = usize::try_from(len) else {
            return Some(None);
        };
        let (value, rest) = self.values.split_at(len.min(self.values.len()));
        self.values = rest;
        Some(Some(value))
    }
}

/// Checks that a row's lengths add up to its values, so that walking it
/// cannot run off the end or leave bytes behind.
fn check_row(row: &pb::Row) -> Result<(), MysqlError> {
    let total = row
        .lengths
        .iter()
        .filter_map(|&len| usize::try_from(len).ok())
        .try_fold(0usize, usize::checked_add);
    if total == Some(row.values.len()) {
        Ok(())
    } else {
        Err(malformed_row(format!(
            "lengths do not match {} bytes of values",
            row.values.len()
        )))
    }
}

fn malformed_row(detail: String) -> MysqlError {
    MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: format!("Malformed row from the gateway: {detail}"),
    }
}

fn unconvertible(field: &pb::Field, ty: ColumnType, text: &[u8]) -> MysqlError {
    const SHOWN: usize = 64;
    let shown = String::from_utf8_lossy(&text[..text.len().min(SHOWN)]);
    let ellipsis = if text.len() > SHOWN { "…" } else { "" };
    MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: format!(
            "Cannot send value '{shown}{ellipsis}' of column '{}' as {ty:?} in the binary protocol",
            field.name
        ),
    }
}

/// COM_STMT_PREPARE's response: the statement header, `params` parameter
/// definitions, then the result columns, each list followed by an EOF
/// unless the client has `CLIENT_DEPRECATE_EOF`.
///
/// `status` goes into those EOFs: clients take the server status from
/// them, so it must be the session's real one (e.g. IN_TRANS).
#[allow(clippy::too_many_arguments)]
pub fn prepare_ok(
    out: &mut Packets,
    caps: CapabilityFlags,
    style: ColumnStyle,
    stmt_id: u32,
    params: u16,
    columns: &[pb::Field],
    warnings: u16,
    status: StatusFlags,
) {
    let column_count = u16::try_from(columns.len()).unwrap_or(u16::MAX);
    out.push(|b| {
        b.put_u8(OK_HEADER);
        b.put_u32_le(stmt_id);
        b.put_u16_le(column_count);
        b.put_u16_le(params);
        b.put_u8(0);
        b.put_u16_le(warnings);
    });
    if params > 0 {
        let param = parameter_definition();
        for _ in 0..params {
            column_definition(out, style, &param);
        }
        metadata_eof(out, caps, status);
    }
    if !columns.is_empty() {
        for column in &columns[..usize::from(column_count)] {
            column_definition(out, style, column);
        }
        metadata_eof(out, caps, status);
    }
}

/// What MySQL and MariaDB describe a `?` as before it is bound: a
/// binary VAR_STRING named "?" of length 0.
fn parameter_definition() -> pb::Field {
    pb::Field {
        name: "?".into(),
        r#type: pb::Type::Varbinary as i32,
        charset: u32::from(BINARY_CHARSET),
        flags: u32::from(ColumnFlags::BINARY_FLAG.bits()),
        ..pb::Field::default()
    }
}

/// COM_FIELD_LIST's response: column definitions, each followed by the
/// default-value field (0xfb: the gateway does not carry defaults), then
/// the end marker (EOF, or OK-0xfe with `CLIENT_DEPRECATE_EOF`, as MySQL
/// sends it).
pub fn field_list(
    out: &mut Packets,
    caps: CapabilityFlags,
    style: ColumnStyle,
    fields: &[pb::Field],
    status: StatusFlags,
) {
    for field in fields {
        out.push(|b| {
            write_column(b, style, field);
            b.put_u8(NULL_CELL);
        });
    }
    end_of_rows(out, caps, status, 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::decode;
    use crate::translate::rows::pack_row;
    use crate::translate::types::vitess_type;
    use bytes::Bytes;
    use mysql_common::Value;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{
        Column, CommonOkPacket, ErrPacket, OkPacketDeserializer, OldEofPacket, ResultSetTerminator,
    };
    use mysql_common::proto::{Binary, Text};
    use mysql_common::row::RowDeserializer;
    use mysql_common::value::ServerSide;
    use std::sync::Arc;

    fn caps() -> CapabilityFlags {
        crate::mysql::server_capabilities()
    }

    fn classic_caps() -> CapabilityFlags {
        caps() - CapabilityFlags::CLIENT_DEPRECATE_EOF
    }

    /// Splits framed output into payloads, checking sequence ids.
    fn payloads(out: &mut Packets, first_seq: u8) -> Vec<Bytes> {
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

    fn field(name: &str, mysql: u8, flags: u16, charset: u32) -> pb::Field {
        pb::Field {
            name: name.into(),
            r#type: vitess_type(mysql, flags) as i32,
            table: "t".into(),
            org_table: "t_real".into(),
            database: "db".into(),
            org_name: format!("{name}_org"),
            column_length: 20,
            charset,
            decimals: 0,
            flags: u32::from(flags),
            column_type: String::new(),
        }
    }

    fn parse_column(payload: &[u8]) -> Column {
        ParseBuf(payload).parse::<Column>(()).unwrap()
    }

    #[test]
    fn ok_packet_round_trips() {
        let mut out = Packets::reply_to(0);
        let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_STATUS_IN_TRANS;
        ok(
            &mut out,
            caps(),
            3,
            42,
            status,
            2,
            "Rows matched: 3  Changed: 3",
        );
        ok(&mut out, caps(), 0, 0, status, 0, "");
        let p = payloads(&mut out, 1);
        let parsed = ParseBuf(&p[0])
            .parse::<OkPacketDeserializer<CommonOkPacket>>(caps())
            .unwrap()
            .into_inner();
        assert_eq!(parsed.affected_rows(), 3);
        assert_eq!(parsed.last_insert_id(), Some(42));
        assert_eq!(parsed.status_flags(), status);
        assert_eq!(parsed.warnings(), 2);
        assert_eq!(
            parsed.info_str().as_deref(),
            Some("Rows matched: 3  Changed: 3")
        );
        // AUTOCOMMIT | IN_TRANS, no warnings, no info.
        assert_eq!(&p[1][..], &[0, 0, 0, 3, 0, 0, 0][..]);
    }

    /// The info text is a length-encoded string, as MySQL's and MariaDB's
    /// `net_send_ok` write it, with or without CLIENT_SESSION_TRACK.
    #[test]
    fn ok_info_is_length_encoded() {
        let mut out = Packets::reply_to(0);
        ok(
            &mut out,
            caps(),
            1,
            0,
            StatusFlags::empty(),
            0,
            "Records: 3",
        );
        let p = payloads(&mut out, 1);
        // header, affected, insert id, status, warnings; then the text
        assert_eq!(p[0][7], 10);
        assert_eq!(&p[0][8..], b"Records: 3");
        assert!(caps().contains(CapabilityFlags::CLIENT_SESSION_TRACK));
    }

    #[test]
    fn ok_packet_with_session_track_and_large_numbers() {
        let caps = caps() | CapabilityFlags::CLIENT_SESSION_TRACK;
        let mut out = Packets::reply_to(0);
        let status =
            StatusFlags::SERVER_STATUS_AUTOCOMMIT | StatusFlags::SERVER_SESSION_STATE_CHANGED;
        ok(&mut out, caps, u64::MAX, 70_000, status, 1, "info");
        let p = payloads(&mut out, 1);
        let parsed = ParseBuf(&p[0])
            .parse::<OkPacketDeserializer<CommonOkPacket>>(caps)
            .unwrap()
            .into_inner();
        assert_eq!(parsed.affected_rows(), u64::MAX);
        assert_eq!(parsed.last_insert_id(), Some(70_000));
        // We carry no session state, so we never claim to.
        assert_eq!(parsed.status_flags(), StatusFlags::SERVER_STATUS_AUTOCOMMIT);
        assert_eq!(parsed.info_str().as_deref(), Some("info"));
    }

    #[test]
    fn eof_and_end_of_rows() {
        let status = StatusFlags::SERVER_MORE_RESULTS_EXISTS;
        let mut out = Packets::reply_to(4);
        eof(&mut out, caps(), status, 7);
        end_of_rows(&mut out, classic_caps(), status, 7);
        end_of_rows(&mut out, caps(), status, 7);
        let p = payloads(&mut out, 5);
        assert_eq!(&p[0][..], &[0xfe, 7, 0, 8, 0][..]);
        assert_eq!(p[1], p[0]);
        let old = ParseBuf(&p[0])
            .parse::<OkPacketDeserializer<OldEofPacket>>(caps())
            .unwrap()
            .into_inner();
        assert_eq!((old.status_flags(), old.warnings()), (status, 7));
        let term = ParseBuf(&p[2])
            .parse::<OkPacketDeserializer<ResultSetTerminator>>(caps())
            .unwrap()
            .into_inner();
        assert_eq!(p[2][0], 0xfe);
        assert_eq!((term.status_flags(), term.warnings()), (status, 7));
    }

    #[test]
    fn err_packet_round_trips() {
        let mut out = Packets::reply_to(0);
        let e = MysqlError {
            code: 1146,
            state: "42S02".into(),
            message: "Table 'db.nope' doesn't exist 🙂".into(),
        };
        err(&mut out, &e);
        err(
            &mut out,
            &MysqlError {
                code: 1,
                state: "bad".into(),
                message: "x".into(),
            },
        );
        let p = payloads(&mut out, 1);
        let parsed = ParseBuf(&p[0]).parse::<ErrPacket>(caps()).unwrap();
        let se = parsed.server_error();
        assert_eq!(se.error_code(), 1146);
        assert_eq!(se.sql_state_ref().unwrap().as_str(), "42S02");
        assert_eq!(se.message_str(), e.message);
        let parsed = ParseBuf(&p[1]).parse::<ErrPacket>(caps()).unwrap();
        assert_eq!(
            parsed.server_error().sql_state_ref().unwrap().as_str(),
            "HY000"
        );
    }

    #[test]
    fn column_definition_is_what_the_server_sent() {
        // (type, flags, charset, length, decimals) as MariaDB sends them.
        let columns = [
            (1u8, 0u16, 63u32, 4u32, 0u32),
            (1, 32, 63, 3, 0),
            (3, 1 | 2 | 512 | 32, 63, 10, 0),
            (8, 32, 63, 20, 0),
            (4, 0, 63, 12, 31),
            (246, 0, 63, 67, 30),
            (12, 128 | 1024, 63, 26, 6),
            (252, 16 | 128, 63, 65535, 0),
            (252, 16, 45, 262140, 0),
            (253, 0, 224, 1020, 0),
            (254, 256, 45, 4, 0),
            (254, 2048, 45, 12, 0),
            (16, 32, 63, 8, 0),
            (255, 128 | 16, 63, u32::MAX, 0),
            (6, 128, 63, 0, 0),
            (13, 32 | 64, 63, 4, 0),
            // TINY/MEDIUM/LONG BLOB and TEXT (expressions; a NULL user
            // variable is a LONG_BLOB), told apart through column_type.
            (251, 128 | 16, 63, u32::MAX, 0),
            (250, 16, 45, 16777215, 0),
            (249, 128, 63, 255, 0),
        ];
        let mut out = Packets::reply_to(0);
        let mut fields = Vec::new();
        for (i, &(ty, flags, charset, len, decimals)) in columns.iter().enumerate() {
            let mut f = field(&format!("c{i}_é"), ty, flags, charset);
            f.column_length = len;
            f.decimals = decimals;
            f.column_type = crate::translate::types::blob_subtype_name(ty, flags).into();
            column_definition(&mut out, ColumnStyle::Mysql, &f);
            fields.push(f);
        }
        for ((payload, &(ty, flags, charset, len, decimals)), f) in
            payloads(&mut out, 1).iter().zip(&columns).zip(&fields)
        {
            let c = parse_column(payload);
            assert_eq!(c.column_type() as u8, ty);
            assert_eq!(c.flags().bits(), flags);
            assert_eq!(u32::from(c.character_set()), charset);
            assert_eq!(c.column_length(), len);
            assert_eq!(u32::from(c.decimals()), decimals);
            assert_eq!(c.schema_str(), "db");
            assert_eq!(c.table_str(), "t");
            assert_eq!(c.org_table_str(), "t_real");
            assert_eq!(c.name_str(), f.name);
            assert_eq!(c.org_name_str(), f.org_name);
            assert_eq!(&payload[..4], b"\x03def");
        }
    }

    #[test]
    fn text_rows_with_nulls_and_all_bytes() {
        let all: Vec<u8> = (0..=255).collect();
        let big = vec![b'x'; 70_000];
        let row = pack_row([
            Some(&b"1"[..]),
            None,
            Some(&b""[..]),
            Some(&all[..]),
            Some("😀".as_bytes()),
            Some(&big[..]),
        ]);
        let mut out = Packets::reply_to(0);
        text_row(&mut out, &row).unwrap();
        let p = payloads(&mut out, 1);
        let columns: Arc<[Column]> = (0..6)
            .map(|_| Column::new(ColumnType::MYSQL_TYPE_VAR_STRING))
            .collect();
        let values = ParseBuf(&p[0])
            .parse::<RowDeserializer<ServerSide, Text>>(columns)
            .unwrap()
            .into_inner()
            .unwrap();
        assert_eq!(
            values,
            vec![
                Value::Bytes(b"1".to_vec()),
                Value::NULL,
                Value::Bytes(vec![]),
                Value::Bytes(all.clone()),
                Value::Bytes("😀".as_bytes().to_vec()),
                Value::Bytes(big.clone()),
            ]
        );
    }

    #[test]
    fn inconsistent_rows_are_refused_not_sent() {
        let bad = pb::Row {
            lengths: vec![2, 5],
            values: Bytes::from_static(b"abc"),
        };
        let mut out = Packets::reply_to(0);
        assert_eq!(text_row(&mut out, &bad).unwrap_err().code, 1105);
        let f = [field("a", 253, 0, 45), field("b", 253, 0, 45)];
        assert_eq!(binary_row(&mut out, &f, &bad).unwrap_err().code, 1105);
        let short = pack_row([Some(&b"a"[..])]);
        assert_eq!(binary_row(&mut out, &f, &short).unwrap_err().code, 1105);
        assert!(out.is_empty());
        assert_eq!(out.seq, 1);
    }

    /// Encodes one binary row and decodes it with mysql_common.
    fn binary_values(fields: &[pb::Field], cells: &[Option<&[u8]>]) -> Vec<Value> {
        let row = pack_row(cells.iter().copied());
        let mut out = Packets::reply_to(0);
        binary_row(&mut out, fields, &row).unwrap();
        let p = payloads(&mut out, 1);
        let columns: Arc<[Column]> = fields
            .iter()
            .map(|f| {
                Column::new(column_type(f))
                    .with_flags(ColumnFlags::from_bits_truncate(f.flags as u16))
            })
            .collect();
        let mut buf = ParseBuf(&p[0]);
        let row = buf
            .parse::<RowDeserializer<ServerSide, Binary>>(columns)
            .unwrap();
        assert!(buf.is_empty(), "trailing bytes");
        row.into_inner().unwrap()
    }

    /// One column of MySQL type `ty` (with `flags`) holding `text`.
    fn one(ty: u8, flags: u16, text: &str) -> Value {
        let f = [field("c", ty, flags, 63)];
        binary_values(&f, &[Some(text.as_bytes())]).remove(0)
    }

    const UNSIGNED: u16 = 32;

    #[test]
    fn binary_integers_at_their_limits() {
        use Value::{Int, UInt};
        assert_eq!(one(1, 0, "-128"), Int(-128));
        assert_eq!(one(1, 0, "127"), Int(127));
        assert_eq!(one(1, UNSIGNED, "255"), Int(255));
        assert_eq!(one(2, 0, "-32768"), Int(-32768));
        assert_eq!(one(2, UNSIGNED, "65535"), Int(65535));
        assert_eq!(one(9, 0, "-8388608"), Int(-8_388_608));
        assert_eq!(one(9, UNSIGNED, "16777215"), Int(16_777_215));
        assert_eq!(one(3, 0, "-2147483648"), Int(i64::from(i32::MIN)));
        assert_eq!(one(3, UNSIGNED, "4294967295"), Int(i64::from(u32::MAX)));
        assert_eq!(one(8, 0, "-9223372036854775808"), Int(i64::MIN));
        assert_eq!(one(8, 0, "9223372036854775807"), Int(i64::MAX));
        assert_eq!(one(8, UNSIGNED, "18446744073709551615"), UInt(u64::MAX));
        assert_eq!(one(3, UNSIGNED | 64, "0000000042"), Int(42));
        assert_eq!(one(13, UNSIGNED | 64, "2155"), Int(2155));
        assert_eq!(one(13, UNSIGNED | 64, "0000"), Int(0));
    }

    #[test]
    fn binary_floats() {
        assert_eq!(one(4, 0, "3.40282e38"), Value::Float(3.40282e38));
        assert_eq!(one(4, 0, "-1.5"), Value::Float(-1.5));
        assert_eq!(one(4, 0, "1e-45"), Value::Float(1e-45));
        assert_eq!(one(5, 0, "1.7976931348623157e308"), Value::Double(f64::MAX));
        assert_eq!(one(5, 0, "0.1"), Value::Double(0.1));
        assert_eq!(one(5, 0, "-0"), Value::Double(-0.0));
        assert_eq!(one(5, 0, "5e-324"), Value::Double(5e-324));
    }

    #[test]
    fn binary_decimals_and_strings_pass_through() {
        let d = "-12345678901234567890123456789012345.123456789012345678901234567890";
        assert_eq!(one(246, 0, d), Value::Bytes(d.as_bytes().to_vec()));
        let all: Vec<u8> = (0..=255).collect();
        for (ty, flags) in [
            (253, 0),
            (253, 128),
            (254, 0),
            (254, 256),
            (254, 2048),
            (252, 16),
            (252, 16 | 128),
            (245, 0),
            (16, 32),
            (255, 128),
        ] {
            let f = [field("c", ty, flags, 63)];
            assert_eq!(
                binary_values(&f, &[Some(&all[..])]),
                vec![Value::Bytes(all.clone())],
                "type {ty}"
            );
        }
        assert_eq!(one(253, 0, "emoji 😀👍"), Value::Bytes("emoji 😀👍".into()));
        assert_eq!(
            one(245, 0, r#"{"a": [1, 2]}"#),
            Value::Bytes(r#"{"a": [1, 2]}"#.into())
        );
        assert_eq!(one(254, 2048, "a,b"), Value::Bytes(b"a,b".to_vec()));
    }

    #[test]
    fn binary_dates_use_the_minimal_length() {
        use Value::Date;
        assert_eq!(one(10, 0, "2024-02-29"), Date(2024, 2, 29, 0, 0, 0, 0));
        assert_eq!(one(10, 0, "0000-00-00"), Date(0, 0, 0, 0, 0, 0, 0));
        assert_eq!(
            one(12, 0, "9999-12-31 23:59:59.999999"),
            Date(9999, 12, 31, 23, 59, 59, 999_999)
        );
        assert_eq!(
            one(12, 0, "2024-01-02 03:04:05"),
            Date(2024, 1, 2, 3, 4, 5, 0)
        );
        assert_eq!(
            one(12, 0, "2024-01-02 00:00:00.000000"),
            Date(2024, 1, 2, 0, 0, 0, 0)
        );
        assert_eq!(
            one(12, 0, "2024-01-02 00:00:00.5"),
            Date(2024, 1, 2, 0, 0, 0, 500_000)
        );
        assert_eq!(one(12, 0, "0000-00-00 00:00:00"), Date(0, 0, 0, 0, 0, 0, 0));
        assert_eq!(
            one(7, 0, "2038-01-19 03:14:07.123"),
            Date(2038, 1, 19, 3, 14, 7, 123_000)
        );
        assert_eq!(
            one(7, 0, "1970-01-01 00:00:01"),
            Date(1970, 1, 1, 0, 0, 1, 0)
        );
        // Exactly MySQL's lengths: 0, 4, 7, 11 (+ the length byte).
        for (text, len) in [
            ("0000-00-00 00:00:00", 0u8),
            ("2024-01-02 00:00:00", 4),
            ("2024-01-02 00:00:01", 7),
            ("2024-01-02 00:00:00.000001", 11),
        ] {
            let f = [field("c", 12, 0, 63)];
            let mut out = Packets::reply_to(0);
            binary_row(&mut out, &f, &pack_row([Some(text.as_bytes())])).unwrap();
            let p = payloads(&mut out, 1);
            assert_eq!(p[0][2], len, "{text}");
            assert_eq!(p[0].len(), 3 + usize::from(len));
        }
    }

    #[test]
    fn binary_times_fold_hours_into_days() {
        use Value::Time;
        assert_eq!(one(11, 0, "12:34:56"), Time(false, 0, 12, 34, 56, 0));
        assert_eq!(
            one(11, 0, "-838:59:59.000000"),
            Time(true, 34, 22, 59, 59, 0)
        );
        assert_eq!(one(11, 0, "838:59:59"), Time(false, 34, 22, 59, 59, 0));
        assert_eq!(one(11, 0, "-00:00:01.5"), Time(true, 0, 0, 0, 1, 500_000));
        assert_eq!(one(11, 0, "100:00:00.000001"), Time(false, 4, 4, 0, 0, 1));
        assert_eq!(one(11, 0, "00:00:00"), Time(false, 0, 0, 0, 0, 0));
    }

    #[test]
    fn null_bitmap_at_every_position() {
        let fields: Vec<pb::Field> = (0..17)
            .map(|i| field(&format!("c{i}"), if i % 2 == 0 { 8 } else { 253 }, 0, 63))
            .collect();
        for pattern in [
            0u32,
            1,
            0b10,
            0b1_0000_0000,
            0x1_ffff,
            0xaaaa,
            0x1_5555,
            1 << 16,
            1 << 5 | 1 << 6,
        ] {
            let texts: Vec<String> = (0..17).map(|i| i.to_string()).collect();
            let cells: Vec<Option<&[u8]>> = (0..17)
                .map(|i| (pattern & (1 << i) == 0).then_some(texts[i].as_bytes()))
                .collect();
            let values = binary_values(&fields, &cells);
            for (i, v) in values.iter().enumerate() {
                let expected = if pattern & (1 << i) != 0 {
                    Value::NULL
                } else if i % 2 == 0 {
                    Value::Int(i as i64)
                } else {
                    Value::Bytes(texts[i].clone().into_bytes())
                };
                assert_eq!(v, &expected, "pattern {pattern:#x} column {i}");
            }
        }
        // A NULL-typed column holding NULL.
        let f = [field("n", 6, 128, 63)];
        assert_eq!(binary_values(&f, &[None]), vec![Value::NULL]);
    }

    #[test]
    fn unconvertible_values_are_errors_and_write_nothing() {
        for (ty, flags, text) in [
            (1u8, 0u16, "128"),
            (1, UNSIGNED, "-1"),
            (2, 0, "12a"),
            (8, UNSIGNED, "18446744073709551616"),
            (3, 0, ""),
            (4, 0, "abc"),
            (10, 0, "2024-13-01"),
            (10, 0, "24-01-01"),
            (12, 0, "2024-01-01 25:00:00"),
            (12, 0, "2024-01-01 10:00:00.1234567"),
            (11, 0, "10:61:00"),
            (11, 0, "1:2:3"),
            (6, 0, "x"),
        ] {
            let f = [field("bad", ty, flags, 63), field("ok", 253, 0, 45)];
            let row = pack_row([Some(text.as_bytes()), Some(&b"fine"[..])]);
            let mut out = Packets::reply_to(0);
            out.push(|b| b.put_u8(1));
            let before = out.buf.len();
            let e = binary_row(&mut out, &f, &row).unwrap_err();
            assert_eq!((e.code, e.state.as_str()), (1105, "HY000"), "{ty} {text}");
            assert!(e.message.contains("'bad'"), "{}", e.message);
            assert_eq!((out.buf.len(), out.seq), (before, 2));
        }
    }

    #[test]
    fn prepare_ok_with_and_without_deprecate_eof() {
        let columns = [field("a", 8, 0, 63), field("b", 253, 0, 45)];
        let status = StatusFlags::SERVER_STATUS_IN_TRANS;
        for caps in [caps(), classic_caps()] {
            let classic = !caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
            let mut out = Packets::reply_to(0);
            prepare_ok(
                &mut out,
                caps,
                ColumnStyle::Mysql,
                7,
                2,
                &columns,
                3,
                status,
            );
            let p = payloads(&mut out, 1);
            assert_eq!(p.len(), if classic { 7 } else { 5 });
            assert_eq!(&p[0][..], &[0, 7, 0, 0, 0, 2, 0, 2, 0, 0, 3, 0][..]);
            for param in &p[1..3] {
                let c = parse_column(param);
                assert_eq!(c.name_str(), "?");
                assert_eq!(c.column_type(), ColumnType::MYSQL_TYPE_VAR_STRING);
                assert_eq!(c.character_set(), 63);
                assert_eq!(c.flags(), ColumnFlags::BINARY_FLAG);
                assert_eq!(c.column_length(), 0);
            }
            let cols = if classic {
                assert_eq!(&p[3][..], &[0xfe, 0, 0, 1, 0][..]);
                assert_eq!(&p[6][..], &[0xfe, 0, 0, 1, 0][..]);
                &p[4..6]
            } else {
                &p[3..5]
            };
            assert_eq!(
                parse_column(&cols[0]).column_type(),
                ColumnType::MYSQL_TYPE_LONGLONG
            );
            assert_eq!(parse_column(&cols[1]).name_str(), "b");
        }
        let mut out = Packets::reply_to(0);
        prepare_ok(
            &mut out,
            classic_caps(),
            ColumnStyle::Mysql,
            1,
            0,
            &[],
            0,
            status,
        );
        assert_eq!(payloads(&mut out, 1).len(), 1);
    }

    /// A JSON column as each server shows it: MySQL's JSON type; MariaDB's
    /// LONGTEXT, with `format=json` in the extended metadata for clients
    /// that took it (and an empty block for every other column).
    #[test]
    fn json_columns_in_each_style() {
        let mut json = field("j", 252, 16, 224);
        json.r#type = pb::Type::Json as i32;
        json.column_length = u32::MAX;
        let text = field("s", 253, 0, 224);
        let fields = [json, text];
        // Where the extended block goes: after org_name.
        let head = |f: &pb::Field| {
            let mut b = BytesMut::new();
            for s in [
                "def",
                &f.database,
                &f.table,
                &f.org_table,
                &f.name,
                &f.org_name,
            ] {
                b.put_lenenc_str(s.as_bytes());
            }
            b.len()
        };
        for style in [
            ColumnStyle::Mysql,
            ColumnStyle::Mariadb,
            ColumnStyle::MariadbExtended,
        ] {
            let mut out = Packets::reply_to(0);
            for f in &fields {
                column_definition(&mut out, style, f);
            }
            let p = payloads(&mut out, 1);
            for (payload, (f, block)) in p.iter().zip(
                fields
                    .iter()
                    .zip([&[0x06, 0x01, 0x04, b'j', b's', b'o', b'n'][..], &[0x00][..]]),
            ) {
                let at = head(f);
                let standard = if style == ColumnStyle::MariadbExtended {
                    assert_eq!(&payload[at..at + block.len()], block, "{style:?}");
                    [&payload[..at], &payload[at + block.len()..]].concat()
                } else {
                    payload.to_vec()
                };
                let c = parse_column(&standard);
                assert_eq!(c.name_str(), f.name);
                assert_eq!(c.column_length(), f.column_length);
                let expected = match (f.name.as_str(), style) {
                    ("j", ColumnStyle::Mysql) => ColumnType::MYSQL_TYPE_JSON,
                    ("j", _) => ColumnType::MYSQL_TYPE_BLOB,
                    _ => ColumnType::MYSQL_TYPE_VAR_STRING,
                };
                assert_eq!(c.column_type(), expected, "{style:?}");
            }
        }
        // COM_STMT_PREPARE's columns and parameters carry the block too.
        let mut out = Packets::reply_to(0);
        prepare_ok(
            &mut out,
            caps(),
            ColumnStyle::MariadbExtended,
            1,
            1,
            &fields[..1],
            0,
            StatusFlags::empty(),
        );
        let p = payloads(&mut out, 1);
        let param = &p[1];
        assert_eq!(&param[head(&parameter_definition())..][..1], &[0x00]);
        assert!(
            p[2].windows(7)
                .any(|w| w == [0x06, 0x01, 0x04, b'j', b's', b'o', b'n'])
        );
    }

    #[test]
    fn field_list_has_defaults_and_an_end() {
        let fields = [field("a", 3, 0, 63), field("b", 252, 16, 45)];
        let mut out = Packets::reply_to(0);
        field_list(
            &mut out,
            classic_caps(),
            ColumnStyle::Mysql,
            &fields,
            StatusFlags::SERVER_STATUS_AUTOCOMMIT,
        );
        let p = payloads(&mut out, 1);
        assert_eq!(p.len(), 3);
        for (payload, f) in p.iter().zip(&fields) {
            assert_eq!(*payload.last().unwrap(), 0xfb);
            assert_eq!(parse_column(payload).name_str(), f.name);
        }
        assert_eq!(&p[2][..], &[0xfe, 0, 0, 2, 0][..]);
    }

    #[test]
    fn result_set_header_is_a_lenenc_count() {
        let mut out = Packets::reply_to(0);
        result_set_header(&mut out, 3);
        result_set_header(&mut out, 300);
        let p = payloads(&mut out, 1);
        assert_eq!(
            (&p[0][..], &p[1][..]),
            (&[3u8][..], &[0xfc, 0x2c, 0x01][..])
        );
    }
}
