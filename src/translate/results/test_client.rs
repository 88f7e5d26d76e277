//! What tests of the result writer feed it and what a client makes of
//! its packets: psdb messages built by hand, and a minimal client (decoding
//! with mysql_common) that turns the framed output into [`Seen`] events.

use super::{ResultWriter, RowFormat};
use crate::api::pb;
use crate::mysql::MysqlError;
use crate::mysql::packet::{Packets, decode};
use crate::mysql::{CapabilityFlags, StatusFlags};
use crate::translate::rows::pack_row;
use crate::translate::types::vitess_type;
use mysql_common::Value;
use mysql_common::io::ParseBuf;
use mysql_common::packets::{
    Column, CommonOkPacket, ErrPacket, OkPacketDeserializer, OldEofPacket, ResultSetTerminator,
};
use mysql_common::proto::{Binary, Text};
use mysql_common::row::RowDeserializer;
use mysql_common::value::ServerSide;
use std::sync::Arc;

pub(super) fn modern() -> CapabilityFlags {
    crate::mysql::server_capabilities()
}

pub(super) fn classic() -> CapabilityFlags {
    modern() - CapabilityFlags::CLIENT_DEPRECATE_EOF
}

pub(super) const MID: StatusFlags = StatusFlags::SERVER_STATUS_IN_TRANS;
pub(super) const FINAL: StatusFlags = StatusFlags::SERVER_STATUS_AUTOCOMMIT;

/// What a client sees, decoded with mysql_common.
#[derive(Debug, PartialEq)]
pub(super) enum Seen {
    Columns(Vec<String>),
    Row(Vec<Value>),
    /// End of rows: status, warnings.
    End(StatusFlags, u16),
    Ok(u64, u64, StatusFlags, u16, String),
    Err(u16, String),
}

/// A minimal client state machine over the framed output.
pub(super) fn client(out: &mut Packets, caps: CapabilityFlags, format: RowFormat) -> Vec<Seen> {
    let mut buf = out.take();
    let mut packets = Vec::new();
    while let Some(p) = decode(&mut buf, usize::MAX).unwrap() {
        packets.push(p.payload);
    }
    assert!(buf.is_empty());
    let deprecate = caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
    let mut seen = Vec::new();
    let mut it = packets.into_iter();
    while let Some(p) = it.next() {
        match p[0] {
            0x00 => {
                let ok = ParseBuf(&p)
                    .parse::<OkPacketDeserializer<CommonOkPacket>>(caps)
                    .unwrap()
                    .into_inner();
                let info = ok.info_str().unwrap_or_default().into_owned();
                let more = ok
                    .status_flags()
                    .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                seen.push(Seen::Ok(
                    ok.affected_rows(),
                    ok.last_insert_id().unwrap_or(0),
                    ok.status_flags(),
                    ok.warnings(),
                    info,
                ));
                if !more {
                    break;
                }
            }
            0xff => {
                let e = ParseBuf(&p).parse::<ErrPacket>(caps).unwrap();
                let se = e.server_error();
                seen.push(Seen::Err(se.error_code(), se.message_str().into_owned()));
                break;
            }
            _ => {
                let count = p[0] as usize;
                let columns: Vec<Column> = (0..count)
                    .map(|_| ParseBuf(&it.next().unwrap()).parse(()).unwrap())
                    .collect();
                seen.push(Seen::Columns(
                    columns.iter().map(|c| c.name_str().into_owned()).collect(),
                ));
                if !deprecate {
                    let eof = it.next().unwrap();
                    assert_eq!(&eof[..], &[0xfe, 0, 0, MID.bits() as u8, 0][..]);
                }
                let columns: Arc<[Column]> = columns.into();
                let more = loop {
                    let p = it.next().unwrap();
                    if p[0] == 0xfe && p.len() < 9 {
                        let end = if deprecate {
                            ParseBuf(&p)
                                .parse::<OkPacketDeserializer<ResultSetTerminator>>(caps)
                                .unwrap()
                                .into_inner()
                        } else {
                            ParseBuf(&p)
                                .parse::<OkPacketDeserializer<OldEofPacket>>(caps)
                                .unwrap()
                                .into_inner()
                        };
                        seen.push(Seen::End(end.status_flags(), end.warnings()));
                        break end
                            .status_flags()
                            .contains(StatusFlags::SERVER_MORE_RESULTS_EXISTS);
                    }
                    if p[0] == 0xff {
                        let e = ParseBuf(&p).parse::<ErrPacket>(caps).unwrap();
                        let se = e.server_error();
                        seen.push(Seen::Err(se.error_code(), se.message_str().into_owned()));
                        break false;
                    }
                    let values = match format {
                        RowFormat::Text => ParseBuf(&p)
                            .parse::<RowDeserializer<ServerSide, Text>>(columns.clone())
                            .unwrap()
                            .into_inner()
                            .unwrap(),
                        RowFormat::Binary => ParseBuf(&p)
                            .parse::<RowDeserializer<ServerSide, Binary>>(columns.clone())
                            .unwrap()
                            .into_inner()
                            .unwrap(),
                    };
                    seen.push(Seen::Row(values));
                };
                if !more {
                    break;
                }
            }
        }
    }
    assert!(it.next().is_none(), "packets after the last result");
    seen
}

pub(super) fn field(name: &str, mysql: u8, flags: u16) -> pb::Field {
    pb::Field {
        name: bytes::Bytes::copy_from_slice(name.as_bytes()),
        r#type: vitess_type(mysql, flags) as i32,
        charset: 63,
        flags: u32::from(flags),
        ..pb::Field::default()
    }
}

pub(super) fn fields_msg(fields: Vec<pb::Field>, rows: Vec<pb::Row>) -> pb::QueryResult {
    pb::QueryResult {
        fields,
        rows,
        ..pb::QueryResult::default()
    }
}

pub(super) fn rows_msg(rows: Vec<pb::Row>) -> pb::QueryResult {
    fields_msg(vec![], rows)
}

pub(super) fn end_msg() -> pb::QueryResult {
    pb::QueryResult::default()
}

pub(super) fn ok_msg(affected: u64, id: u64, info: &str) -> pb::QueryResult {
    pb::QueryResult {
        rows_affected: affected,
        insert_id: id,
        info: info.into(),
        ..pb::QueryResult::default()
    }
}

pub(super) fn row(cells: &[Option<&str>]) -> pb::Row {
    pack_row(cells.iter().map(|c| c.map(str::as_bytes)))
}

pub(super) fn run(
    caps: CapabilityFlags,
    format: RowFormat,
    messages: &[pb::QueryResult],
    error: Option<&MysqlError>,
) -> Vec<Seen> {
    run_marked(true, caps, format, messages, error)
}

pub(super) fn run_marked(
    marked: bool,
    caps: CapabilityFlags,
    format: RowFormat,
    messages: &[pb::QueryResult],
    error: Option<&MysqlError>,
) -> Vec<Seen> {
    let mut out = Packets::reply_to(0);
    let mut writer = ResultWriter::new(caps, format, MID).with_marked_ends(marked);
    let mut error = error.cloned();
    for m in messages {
        if let Err(e) = writer.message(&m.clone().into(), &mut out) {
            error = Some(e);
            break;
        }
    }
    writer.finish(error.as_ref(), FINAL, 3, &mut out);
    client(&mut out, caps, format)
}

pub(super) fn bytes(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}

pub(super) fn more() -> StatusFlags {
    MID | StatusFlags::SERVER_MORE_RESULTS_EXISTS
}

pub(super) fn id_name() -> Vec<pb::Field> {
    vec![field("id", 8, 0), field("name", 253, 0)]
}

pub(super) fn columns() -> Seen {
    Seen::Columns(vec!["id".into(), "name".into()])
}

/// An end marker that says how the server ended the result.
pub(super) fn ended(
    result: pb::QueryResult,
    status: StatusFlags,
    warnings: u32,
) -> pb::QueryResult {
    pb::QueryResult {
        server_status: Some(status.bits().into()),
        warning_count: Some(warnings),
        ..result
    }
}
