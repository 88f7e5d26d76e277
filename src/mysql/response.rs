//! Server → client packets of the MySQL protocol (4.1): OK, EOF, ERR,
//! column definitions, text and binary rows, and the responses to
//! COM_STMT_PREPARE and COM_FIELD_LIST.
//!
//! Rows arrive as text (what the server sent in the text protocol), so
//! the binary protocol's values are parsed and re-encoded here. Nothing
//! here knows where columns and rows come from (`translate::to_mysql`
//! builds them from psdb results). Everything is written in place into
//! the [`Packets`] buffer: no per-row or per-value allocations.

use std::str::FromStr;

use bytes::{BufMut, BytesMut};
use mysql_common::io::BufMutExt;

use super::packet::Packets;
use super::temporal::{DateTime, Time};
use super::{
    BINARY_CHARSET, CapabilityFlags, ColumnFlags, ColumnType, MariadbCapabilities, MysqlError,
    StatusFlags,
};

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

/// `SESSION_TRACK_SYSTEM_VARIABLES`: a tracked system variable was set.
const SESSION_TRACK_SYSTEM_VARIABLES: u8 = 0;

/// The session-state entry a server sends when a statement sets a system
/// variable named in the session's `session_track_system_variables`:
/// its name and value, as `SHOW VARIABLES` shows it.
pub fn session_track_system_variable(name: &[u8], value: &[u8]) -> Vec<u8> {
    let mut data = BytesMut::new();
    data.put_lenenc_str(name);
    data.put_lenenc_str(value);
    let mut entry = BytesMut::new();
    entry.put_u8(SESSION_TRACK_SYSTEM_VARIABLES);
    entry.put_lenenc_str(&data);
    entry.to_vec()
}

/// `SESSION_TRACK_STATE_CHANGE`: the session's state changed.
const SESSION_TRACK_STATE_CHANGE: u8 = 2;

/// The entry a server sends, with `session_track_state_change` on, after
/// a statement that changed session state: its data is `1`.
pub fn session_track_state_change() -> [u8; 3] {
    [SESSION_TRACK_STATE_CHANGE, 1, b'1']
}

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
    end_of_rows_tracked(out, caps, status, warnings, &[]);
}

/// [`end_of_rows`], reporting session-state changes (`state`) in the OK
/// of a client that asked for them (the classic EOF has no room: a server
/// reports them in the next OK).
pub fn end_of_rows_tracked(
    out: &mut Packets,
    caps: CapabilityFlags,
    status: StatusFlags,
    warnings: u16,
    state: &[u8],
) {
    if caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF) {
        let body = OkBody {
            affected_rows: 0,
            last_insert_id: 0,
            status,
            warnings,
            info: "",
            state,
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

/// Error numbers a client library makes up itself (CR_SERVER_LOST 2013,
/// CR_CONN_HOST_ERROR 2003, …). A server never sends them, and libmariadb
/// reads an ERR packet carrying one as a malformed packet (2027); yet a
/// psdb server reports a lost backend connection as 2013, as Vitess does.
const CLIENT_LIBRARY_CODES: std::ops::RangeInclusive<u16> = 2000..=2999;

/// ER_NET_READ_ERROR (08S01): what such an error is sent as — a
/// communication failure, on which drivers and pools act as on 2013.
const ER_NET_READ_ERROR: u16 = 1158;

/// ERR packet: 0xff, errno, `#` + SQLSTATE, message. A malformed SQLSTATE
/// is sent as HY000 so the client can still parse the packet; a client
/// library's error number as [`ER_NET_READ_ERROR`].
pub fn err(out: &mut Packets, error: &MysqlError) {
    let state = error.state.as_bytes();
    let state: &[u8] = if state.len() == 5 && state.is_ascii() {
        state
    } else {
        b"HY000"
    };
    let (code, state) = if CLIENT_LIBRARY_CODES.contains(&error.code) {
        (ER_NET_READ_ERROR, &b"08S01"[..])
    } else {
        (error.code, state)
    };
    out.push(|b| {
        b.put_u8(ERR_HEADER);
        b.put_u16_le(code);
        b.put_u8(b'#');
        b.put_slice(state);
        b.put_slice(error.message.as_bytes());
    });
}

/// Writes an OK payload (header 0x00, or 0xfe as an end-of-rows marker).
/// The info string is length-encoded, as `net_send_ok` writes it (clients
/// read it that way whatever the manual says). `SERVER_SESSION_STATE_CHANGED`
/// is claimed only to a client that takes it, with state data to send or
/// where the caller passes it on from the server.
fn write_ok(b: &mut BytesMut, header: u8, caps: CapabilityFlags, ok: &OkBody<'_>) {
    // A status that says the state changed (the server's own, relayed)
    // carries the state's string even when it is empty, as MariaDB's does
    // after `SET session_track_transaction_info = STATE`.
    let tracked = (!ok.state.is_empty()
        || ok
            .status
            .contains(StatusFlags::SERVER_SESSION_STATE_CHANGED))
        && caps.contains(CapabilityFlags::CLIENT_SESSION_TRACK);
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

/// A column definition (protocol 4.1), as the server describes a column.
#[derive(Clone, Copy, Debug)]
pub struct ColumnDefinition<'a> {
    /// Names are bytes in the session's `character_set_results`.
    pub schema: &'a [u8],
    pub table: &'a [u8],
    pub org_table: &'a [u8],
    pub name: &'a [u8],
    pub org_name: &'a [u8],
    /// Collation id (63 for binary).
    pub charset: u16,
    pub length: u32,
    pub column_type: ColumnType,
    pub flags: u16,
    pub decimals: u8,
    /// A JSON column: described per [`ColumnStyle`].
    pub json: bool,
    /// MariaDB's extended type info as the backend sent it (the string's
    /// content), written as it is to clients that take it; empty when
    /// the backend sent none or it is not known (then `json` decides).
    pub extended: &'a [u8],
}

impl Default for ColumnDefinition<'_> {
    fn default() -> Self {
        Self {
            schema: b"",
            table: b"",
            org_table: b"",
            name: b"",
            org_name: b"",
            charset: 0,
            length: 0,
            column_type: ColumnType::MYSQL_TYPE_VAR_STRING,
            flags: 0,
            decimals: 0,
            json: false,
            extended: b"",
        }
    }
}

pub fn column_definition(out: &mut Packets, style: ColumnStyle, column: &ColumnDefinition<'_>) {
    out.push(|b| write_column(b, style, column));
}

fn write_column(b: &mut BytesMut, style: ColumnStyle, column: &ColumnDefinition<'_>) {
    b.put_lenenc_str(b"def");
    b.put_lenenc_str(column.schema);
    b.put_lenenc_str(column.table);
    b.put_lenenc_str(column.org_table);
    b.put_lenenc_str(column.name);
    b.put_lenenc_str(column.org_name);
    if style == ColumnStyle::MariadbExtended {
        // A length-encoded block of [kind][lenenc value] entries, placed
        // between org_name and the fixed fields.
        if !column.extended.is_empty() {
            b.put_lenenc_str(column.extended);
        } else if column.json {
            const FORMAT: &[u8] = b"json";
            b.put_lenenc_int(2 + FORMAT.len() as u64);
            b.put_u8(METADATA_FORMAT_NAME);
            b.put_lenenc_str(FORMAT);
        } else {
            b.put_lenenc_int(0);
        }
    }
    b.put_lenenc_int(FIXED_FIELDS_LEN);
    b.put_u16_le(column.charset);
    b.put_u32_le(column.length);
    let ty = if column.json && style != ColumnStyle::Mysql {
        ColumnType::MYSQL_TYPE_BLOB
    } else {
        column.column_type
    };
    b.put_u8(ty as u8);
    b.put_u16_le(column.flags);
    b.put_u8(column.decimals);
    b.put_u16_le(0);
}

/// A text-protocol row: each value length-encoded, NULL (`None`) as 0xfb.
/// `size` is the row's bytes of values, to reserve room once.
pub fn text_row<'a>(
    out: &mut Packets,
    cells: impl ExactSizeIterator<Item = Option<&'a [u8]>>,
    size: usize,
) {
    out.push(|b| {
        b.reserve(size + cells.len() * 2);
        for cell in cells {
            match cell {
                None => b.put_u8(NULL_CELL),
                Some(value) => b.put_lenenc_str(value),
            }
        }
    });
}

/// A column's type as the binary protocol encodes its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinaryType {
    pub column_type: ColumnType,
    pub unsigned: bool,
}

/// A binary-protocol row (COM_STMT_EXECUTE results): 0x00, the NULL bitmap
/// (offset 2), then each non-NULL value in its column type's binary form.
///
/// Values are MySQL text, so numbers and temporal values are parsed and
/// re-encoded; `Err(i)` if the value of column `i` does not parse as its
/// type, and then nothing of the row is written. `size` is the row's bytes
/// of values, to reserve room once.
pub fn binary_row<'a>(
    out: &mut Packets,
    types: impl ExactSizeIterator<Item = BinaryType>,
    cells: impl Iterator<Item = Option<&'a [u8]>>,
    size: usize,
) -> Result<(), usize> {
    let (start, seq) = (out.buf.len(), out.seq);
    let mut failure = None;
    out.push(|b| failure = write_binary_row(b, types, cells, size).err());
    match failure {
        None => Ok(()),
        Some(column) => {
            // Roll the half-written packet back: the caller sends ERR.
            out.buf.truncate(start);
            out.seq = seq;
            Err(column)
        }
    }
}

fn write_binary_row<'a>(
    b: &mut BytesMut,
    types: impl ExactSizeIterator<Item = BinaryType>,
    cells: impl Iterator<Item = Option<&'a [u8]>>,
    size: usize,
) -> Result<(), usize> {
    let columns = types.len();
    b.reserve(size + columns * 4 + 8);
    b.put_u8(OK_HEADER);
    let bitmap_at = b.len();
    b.put_bytes(0, (columns + 7 + BINARY_NULL_BITMAP_OFFSET) / 8);
    for (i, (ty, cell)) in types.zip(cells).enumerate() {
        let Some(text) = cell else {
            let bit = i + BINARY_NULL_BITMAP_OFFSET;
            b[bitmap_at + bit / 8] |= 1 << (bit % 8);
            continue;
        };
        if write_binary_value(b, ty.column_type, ty.unsigned, text).is_none() {
            return Err(i);
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

/// COM_STMT_PREPARE's response: the statement header, the parameter
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
    params: &[ColumnDefinition<'_>],
    columns: &[ColumnDefinition<'_>],
    warnings: u16,
    status: StatusFlags,
) {
    let param_count = u16::try_from(params.len()).unwrap_or(u16::MAX);
    let column_count = u16::try_from(columns.len()).unwrap_or(u16::MAX);
    out.push(|b| {
        b.put_u8(OK_HEADER);
        b.put_u32_le(stmt_id);
        b.put_u16_le(column_count);
        b.put_u16_le(param_count);
        b.put_u8(0);
        b.put_u16_le(warnings);
    });
    for list in [
        &params[..usize::from(param_count)],
        &columns[..usize::from(column_count)],
    ] {
        if !list.is_empty() {
            for definition in list {
                column_definition(out, style, definition);
            }
            metadata_eof(out, caps, status);
        }
    }
}

/// What a server describes a `?` as before it is bound: a binary column
/// named "?" of length 0, of type VAR_STRING (MySQL) or NULL (MariaDB,
/// whose unbound parameter has no type yet). For a prepare whose
/// parameter definitions are not known (a psdb server that is not our
/// gateway sends only their count).
pub fn unbound_parameter(style: ColumnStyle) -> ColumnDefinition<'static> {
    ColumnDefinition {
        name: b"?",
        column_type: match style {
            ColumnStyle::Mysql => ColumnType::MYSQL_TYPE_VAR_STRING,
            ColumnStyle::Mariadb | ColumnStyle::MariadbExtended => ColumnType::MYSQL_TYPE_NULL,
        },
        charset: BINARY_CHARSET,
        flags: ColumnFlags::BINARY_FLAG.bits(),
        ..ColumnDefinition::default()
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
    columns: &[ColumnDefinition<'_>],
    status: StatusFlags,
) {
    for column in columns {
        out.push(|b| {
            write_column(b, style, column);
            b.put_u8(NULL_CELL);
        });
    }
    end_of_rows(out, caps, status, 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::payloads;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::{
        CommonOkPacket, ErrPacket, OkPacketDeserializer, OldEofPacket, ResultSetTerminator,
    };

    fn caps() -> CapabilityFlags {
        crate::mysql::server_capabilities()
    }

    fn classic_caps() -> CapabilityFlags {
        caps() - CapabilityFlags::CLIENT_DEPRECATE_EOF
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
        // The flag is the server's (relayed): its state's string follows,
        // empty, as MariaDB writes it.
        assert_eq!(parsed.status_flags(), status);
        assert_eq!(parsed.info_str().as_deref(), Some("info"));
        assert_eq!(&p[0][p[0].len() - 6..], b"\x04info\x00");
        // Without the flag and no state, nothing is claimed.
        let mut out = Packets::reply_to(0);
        let status = StatusFlags::SERVER_STATUS_AUTOCOMMIT;
        ok(&mut out, caps, 1, 0, status, 0, "");
        assert_eq!(&payloads(&mut out, 1)[0][..], &[0, 1, 0, 2, 0, 0, 0][..]);
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
        assert_eq!(se.message_ref(), e.message.as_bytes());
        let parsed = ParseBuf(&p[1]).parse::<ErrPacket>(caps()).unwrap();
        assert_eq!(
            parsed.server_error().sql_state_ref().unwrap().as_str(),
            "HY000"
        );
    }

    /// A relayed CR_SERVER_LOST would be a malformed packet to libmariadb.
    #[test]
    fn client_library_error_numbers_go_out_as_a_communication_failure() {
        let mut out = Packets::reply_to(0);
        for code in [1999, 2000, 2013, 2999, 3000] {
            err(
                &mut out,
                &MysqlError {
                    code,
                    state: "HY000".into(),
                    message: "Lost connection to backend MySQL server during query".into(),
                },
            );
        }
        let sent: Vec<(u16, String)> = payloads(&mut out, 1)
            .iter()
            .map(|p| {
                let e = ParseBuf(p).parse::<ErrPacket>(caps()).unwrap();
                let se = e.server_error();
                let state = se.sql_state_ref().unwrap().as_str().to_string();
                (se.error_code(), state)
            })
            .collect();
        let want = [
            (1999, "HY000"),
            (1158, "08S01"),
            (1158, "08S01"),
            (1158, "08S01"),
            (3000, "HY000"),
        ]
        .map(|(c, s)| (c, s.to_string()));
        assert_eq!(sent, want);
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
