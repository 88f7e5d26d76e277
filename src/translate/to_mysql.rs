//! psdb results as MySQL packets: a `Field` as the column definition the
//! server sent, a packed `Row` as a text or binary row.
//!
//! The sidecar never sees MariaDB's packets, only the psdb `Field`s and
//! `Row`s the gateway built from them, so every `Field` attribute goes
//! back into the column definition (the type code via
//! [`mysql_field_type`]) and each row's cells are walked in place, without
//! copying, into `mysql::response`'s encoders.

use crate::api::pb;
use crate::api::row_view::{Cells, RowView};
use crate::mysql::packet::Packets;
use crate::mysql::response::{self, BinaryType, ColumnDefinition, ColumnStyle};
use crate::mysql::{CapabilityFlags, ColumnFlags, ColumnType, MysqlError, StatusFlags};

use super::types::mysql_field_type;

/// The column definition the server sent for `field`.
pub fn definition(field: &pb::Field) -> ColumnDefinition<'_> {
    ColumnDefinition {
        schema: &field.database,
        table: &field.table,
        org_table: &field.org_table,
        name: &field.name,
        org_name: &field.org_name,
        charset: saturate_u16(field.charset),
        length: field.column_length,
        column_type: column_type(field),
        flags: saturate_u16(field.flags),
        decimals: u8::try_from(field.decimals).unwrap_or(u8::MAX),
        json: field.r#type == pb::Type::Json as i32,
        extended: &field.extended_metadata,
    }
}

pub fn column_definition(out: &mut Packets, style: ColumnStyle, field: &pb::Field) {
    response::column_definition(out, style, &definition(field));
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

/// A text-protocol row. A row whose `lengths` and `values` disagree is
/// refused (it would desynchronise the client).
pub fn text_row(out: &mut Packets, row: &RowView) -> Result<(), MysqlError> {
    response::text_row(out, checked_cells(row)?, row.values().len());
    Ok(())
}

/// A binary-protocol row (COM_STMT_EXECUTE results). A value that does
/// not parse as its column's type is an error (1105) and nothing of the
/// row is written.
pub fn binary_row(
    out: &mut Packets,
    fields: &[pb::Field],
    row: &RowView,
) -> Result<(), MysqlError> {
    let cells = checked_cells(row)?;
    if row.len() != fields.len() {
        return Err(malformed_row(format!(
            "{} values for {} columns",
            row.len(),
            fields.len()
        )));
    }
    let types = fields.iter().map(|field| BinaryType {
        column_type: column_type(field),
        unsigned: field.flags & u32::from(ColumnFlags::UNSIGNED_FLAG.bits()) != 0,
    });
    response::binary_row(out, types, cells.clone(), row.values().len()).map_err(|i| {
        let text = cells.clone().nth(i).flatten().unwrap_or_default();
        unconvertible(&fields[i], text)
    })
}

/// A prepared statement's parameters, as the prepare described them.
#[derive(Clone, Copy, Debug)]
pub enum Parameters<'a> {
    /// The backend's definitions (our gateway's `param_fields`).
    Defined(&'a [pb::Field]),
    /// Only their count (a psdb server that is not our gateway): each is
    /// described as an unbound `?`.
    Counted(u16),
}

impl<'a> Parameters<'a> {
    /// The definitions when there is one per counted parameter, else the
    /// count alone.
    pub fn new(count: u16, definitions: &'a [pb::Field]) -> Self {
        if definitions.len() == usize::from(count) {
            Self::Defined(definitions)
        } else {
            Self::Counted(count)
        }
    }
}

/// COM_STMT_PREPARE's response, with the parameters and result columns
/// the prepare reported.
#[allow(clippy::too_many_arguments)]
pub fn prepare_ok(
    out: &mut Packets,
    caps: CapabilityFlags,
    style: ColumnStyle,
    stmt_id: u32,
    params: Parameters<'_>,
    columns: &[pb::Field],
    warnings: u16,
    status: StatusFlags,
) {
    let params: Vec<_> = match params {
        Parameters::Defined(fields) => fields.iter().map(definition).collect(),
        Parameters::Counted(count) => {
            vec![response::unbound_parameter(style); usize::from(count)]
        }
    };
    let columns: Vec<_> = columns.iter().map(definition).collect();
    response::prepare_ok(
        out, caps, style, stmt_id, &params, &columns, warnings, status,
    );
}

/// COM_FIELD_LIST's response, from the columns of `SELECT … LIMIT 0`.
pub fn field_list(
    out: &mut Packets,
    caps: CapabilityFlags,
    style: ColumnStyle,
    fields: &[pb::Field],
    status: StatusFlags,
) {
    let columns: Vec<_> = fields.iter().map(definition).collect();
    response::field_list(out, caps, style, &columns, status);
}

/// The row's cells, walked in place, if its lengths add up to its
/// values, so that walking it cannot run off the end or leave bytes
/// behind.
fn checked_cells(row: &RowView) -> Result<Cells<'_>, MysqlError> {
    row.cells().ok_or_else(|| {
        malformed_row(format!(
            "lengths do not match {} bytes of values",
            row.values().len()
        ))
    })
}

fn malformed_row(detail: String) -> MysqlError {
    MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: format!("Malformed row from the gateway: {detail}").into(),
    }
}

/// Quotes the value and the column name as their bytes, in the session's
/// character set, as the server quotes values in its own messages.
fn unconvertible(field: &pb::Field, text: &[u8]) -> MysqlError {
    const SHOWN: usize = 64;
    let shown = &text[..text.len().min(SHOWN)];
    let ellipsis: &[u8] = if text.len() > SHOWN { b"..." } else { b"" };
    let kind = format!("' as {:?} in the binary protocol", column_type(field));
    MysqlError {
        code: 1105,
        state: "HY000".into(),
        message: [
            &b"Cannot send value '"[..],
            shown,
            ellipsis,
            b"' of column '",
            &field.name,
            kind.as_bytes(),
        ]
        .concat()
        .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::packet::payloads;
    use crate::translate::rows::pack_row;
    use crate::translate::types::vitess_type;
    use bytes::{BufMut, Bytes, BytesMut};
    use mysql_common::Value;
    use mysql_common::io::BufMutExt;
    use mysql_common::io::ParseBuf;
    use mysql_common::packets::Column;
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

    fn field(name: &str, mysql: u8, flags: u16, charset: u32) -> pb::Field {
        pb::Field {
            name: Bytes::copy_from_slice(name.as_bytes()),
            r#type: vitess_type(mysql, flags) as i32,
            table: "t".into(),
            org_table: "t_real".into(),
            database: "db".into(),
            org_name: format!("{name}_org").into(),
            column_length: 20,
            charset,
            decimals: 0,
            flags: u32::from(flags),
            column_type: String::new(),
            extended_metadata: Bytes::new(),
        }
    }

    fn parse_column(payload: &[u8]) -> Column {
        ParseBuf(payload).parse::<Column>(()).unwrap()
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
            assert_eq!(c.name_ref(), &f.name[..]);
            assert_eq!(c.org_name_ref(), &f.org_name[..]);
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
        text_row(&mut out, &(&row).into()).unwrap();
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
        let bad = RowView::from(&bad);
        let mut out = Packets::reply_to(0);
        assert_eq!(text_row(&mut out, &bad).unwrap_err().code, 1105);
        let f = [field("a", 253, 0, 45), field("b", 253, 0, 45)];
        assert_eq!(binary_row(&mut out, &f, &bad).unwrap_err().code, 1105);
        let short = RowView::from(&pack_row([Some(&b"a"[..])]));
        assert_eq!(binary_row(&mut out, &f, &short).unwrap_err().code, 1105);
        assert!(out.is_empty());
        assert_eq!(out.seq, 1);
    }

    /// Encodes one binary row and decodes it with mysql_common.
    fn binary_values(fields: &[pb::Field], cells: &[Option<&[u8]>]) -> Vec<Value> {
        let row = RowView::from(&pack_row(cells.iter().copied()));
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
            binary_row(
                &mut out,
                &f,
                &RowView::from(&pack_row([Some(text.as_bytes())])),
            )
            .unwrap();
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
            let row = RowView::from(&pack_row([Some(text.as_bytes()), Some(&b"fine"[..])]));
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
                Parameters::Counted(2),
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
            Parameters::Counted(0),
            &[],
            0,
            status,
        );
        assert_eq!(payloads(&mut out, 1).len(), 1);
    }

    /// The gateway's parameter definitions are written as they are (a
    /// parameter named by its alias, in latin1); a list that does not
    /// match the count is not used.
    #[test]
    fn prepare_ok_with_the_parameter_definitions_of_the_prepare() {
        let mut alias = field("a", 6, 128, 63);
        alias.name = Bytes::from_static(b"caf\xe9");
        let params = [alias, field("?", 6, 128, 63)];
        let defined = Parameters::new(2, &params);
        assert!(matches!(defined, Parameters::Defined(p) if p.len() == 2));
        assert!(matches!(
            Parameters::new(3, &params),
            Parameters::Counted(3)
        ));
        assert!(matches!(Parameters::new(1, &[]), Parameters::Counted(1)));
        for caps in [caps(), classic_caps()] {
            let classic = !caps.contains(CapabilityFlags::CLIENT_DEPRECATE_EOF);
            let mut out = Packets::reply_to(0);
            let status = StatusFlags::empty();
            prepare_ok(
                &mut out,
                caps,
                ColumnStyle::Mariadb,
                4,
                defined,
                &[],
                0,
                status,
            );
            let p = payloads(&mut out, 1);
            assert_eq!(p.len(), if classic { 4 } else { 3 });
            assert_eq!(&p[0][5..9], &[0, 0, 2, 0]);
            for (payload, param) in p[1..3].iter().zip(&params) {
                let c = parse_column(payload);
                assert_eq!(c.name_ref(), &param.name[..]);
                assert_eq!(c.org_name_ref(), &param.org_name[..]);
                assert_eq!(c.column_type(), ColumnType::MYSQL_TYPE_NULL);
                assert_eq!(c.character_set(), 63);
            }
        }
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
                &b"def"[..],
                &f.database,
                &f.table,
                &f.org_table,
                &f.name,
                &f.org_name,
            ] {
                b.put_lenenc_str(s);
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
                assert_eq!(c.name_ref(), &f.name[..]);
                assert_eq!(c.column_length(), f.column_length);
                let expected = match (&f.name[..], style) {
                    (b"j", ColumnStyle::Mysql) => ColumnType::MYSQL_TYPE_JSON,
                    (b"j", _) => ColumnType::MYSQL_TYPE_BLOB,
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
            Parameters::Counted(1),
            &fields[..1],
            0,
            StatusFlags::empty(),
        );
        let p = payloads(&mut out, 1);
        let param = &p[1];
        assert_eq!(
            &param[head(&pb::Field {
                name: "?".into(),
                ..pb::Field::default()
            })..][..1],
            &[0x00]
        );
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
            assert_eq!(parse_column(payload).name_ref(), &f.name[..]);
        }
        assert_eq!(&p[2][..], &[0xfe, 0, 0, 2, 0][..]);
    }
}
