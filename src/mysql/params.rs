//! COM_STMT_EXECUTE parameters → psdb bind variables.
//!
//! The gateway substitutes bind variables into SQL text (see
//! `translate::bind`), with each `?` bound as `v1`, `v2`, …, so a binary
//! parameter becomes the Vitess type whose literal means what the MySQL
//! server would have made of it: integers stay exact, floats keep their
//! bits, temporal values get MySQL's text forms, and strings are VARCHAR
//! (compared in the column's collation) unless they are not UTF-8.

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};

use super::ColumnType;
use super::temporal::{DateTime, Time};
use crate::api::pb::{BindVariable, Type};
use crate::mysql::MysqlError;

/// Bit of a parameter's flag byte that marks an unsigned integer.
const UNSIGNED_PARAM: u8 = 0x80;

/// A parameter's type as the client declared it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamType {
    pub column_type: ColumnType,
    pub unsigned: bool,
}

/// Per-statement parameter state that outlives one COM_STMT_EXECUTE:
/// the types from the last execute that sent them (a client sends them
/// only when they change) and data sent with COM_STMT_SEND_LONG_DATA.
#[derive(Debug)]
pub struct StatementParams {
    count: u16,
    types: Vec<ParamType>,
    long_data: Vec<Option<BytesMut>>,
    /// A SEND_LONG_DATA error, reported by the next execute (the command
    /// itself has no response).
    pending_error: Option<MysqlError>,
}

impl StatementParams {
    /// State for a statement with `count` placeholders.
    pub fn new(count: u16) -> Self {
        Self {
            count,
            types: Vec::new(),
            long_data: vec![None; usize::from(count)],
            pending_error: None,
        }
    }

    pub fn count(&self) -> u16 {
        self.count
    }

    /// The parameter types remembered from earlier executes (empty until
    /// the first execute that sends them).
    pub fn types(&self) -> &[ParamType] {
        &self.types
    }

    /// COM_STMT_SEND_LONG_DATA: appends `data` to parameter `index`.
    /// Errors (bad index, more than `max_bytes` in total) are kept for the
    /// next execute, as the server does, and the data is dropped.
    pub fn send_long_data(&mut self, index: u16, data: &[u8], max_bytes: usize) {
        let Some(slot) = self.long_data.get_mut(usize::from(index)) else {
            self.pending_error = Some(wrong_arguments());
            return;
        };
        let buf = slot.get_or_insert_with(BytesMut::new);
        if buf.len().saturating_add(data.len()) > max_bytes {
            *slot = None;
            self.pending_error = Some(MysqlError {
                code: 1105,
                state: "HY000".into(),
                message: "Parameter of prepared statement which is set through \
                          mysql_send_long_data() is longer than 'max_allowed_packet' bytes"
                    .into(),
            });
            return;
        }
        buf.extend_from_slice(data);
    }

    /// COM_STMT_RESET: forgets long data and any pending error; the types
    /// stay (a client may execute again without resending them).
    pub fn reset(&mut self) {
        self.long_data.iter_mut().for_each(|slot| *slot = None);
        self.pending_error = None;
    }

    /// Parses the parameter part of a COM_STMT_EXECUTE payload (what
    /// follows stmt_id, flags and iteration_count) into bind variables
    /// `v1`…`vN`. Long data is consumed: the server forgets it after each
    /// execute, whatever the outcome.
    pub fn bind(&mut self, rest: &Bytes) -> Result<HashMap<String, BindVariable>, MysqlError> {
        let long_data = std::mem::replace(&mut self.long_data, vec![None; usize::from(self.count)]);
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        if self.count == 0 {
            return Ok(HashMap::new());
        }
        let mut reader = Reader { buf: rest, pos: 0 };
        let count = usize::from(self.count);
        let null_bitmap = reader.take(count.div_ceil(8))?;
        if reader.u8()? != 0 {
            self.types = read_types(&mut reader, count)?;
        } else if self.types.len() != count {
            return Err(wrong_arguments());
        }
        let mut vars = HashMap::with_capacity(count);
        for (i, (ty, long)) in self.types.iter().zip(long_data).enumerate() {
            let var = match long {
                Some(data) => string_var(ty.column_type, data.freeze()),
                None if null_bitmap[i / 8] & (1 << (i % 8)) != 0 => null_var(),
                None => read_value(&mut reader, *ty)?,
            };
            vars.insert(format!("v{}", i + 1), var);
        }
        if reader.pos != rest.len() {
            // More values than the statement has placeholders.
            return Err(wrong_arguments());
        }
        Ok(vars)
    }
}

fn read_types(reader: &mut Reader<'_>, count: usize) -> Result<Vec<ParamType>, MysqlError> {
    let raw = reader.take(count * 2)?;
    Ok(raw
        .chunks_exact(2)
        .map(|pair| ParamType {
            // Unknown codes are read as strings, as the server does.
            column_type: ColumnType::try_from(pair[0]).unwrap_or(ColumnType::MYSQL_TYPE_VAR_STRING),
            unsigned: pair[1] & UNSIGNED_PARAM != 0,
        })
        .collect())
}

/// One parameter value in the binary protocol → a bind variable.
fn read_value(reader: &mut Reader<'_>, ty: ParamType) -> Result<BindVariable, MysqlError> {
    use ColumnType::*;
    let unsigned = ty.unsigned;
    Ok(match ty.column_type {
        MYSQL_TYPE_NULL => null_var(),
        MYSQL_TYPE_TINY => int_var(
            unsigned,
            reader.take_array::<1>()?,
            |b| i8::from_le_bytes(b).into(),
            |b| b[0].into(),
        ),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => int_var(
            unsigned,
            reader.take_array::<2>()?,
            |b| i16::from_le_bytes(b).into(),
            |b| u16::from_le_bytes(b).into(),
        ),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => int_var(
            unsigned,
            reader.take_array::<4>()?,
            |b| i32::from_le_bytes(b).into(),
            |b| u32::from_le_bytes(b).into(),
        ),
        MYSQL_TYPE_LONGLONG => int_var(
            unsigned,
            reader.take_array::<8>()?,
            i64::from_le_bytes,
            u64::from_le_bytes,
        ),
        // MySQL widens a FLOAT parameter to double (`set_param_float`); the
        // shortest text of that double is exact, so a FLOAT column stores
        // the client's bits and `SELECT ?` shows what MySQL shows.
        MYSQL_TYPE_FLOAT => float_var(f64::from(f32::from_le_bytes(reader.take_array()?)))?,
        MYSQL_TYPE_DOUBLE => float_var(f64::from_le_bytes(reader.take_array()?))?,
        MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => var(Type::Decimal, reader.lenenc_bytes()?),
        MYSQL_TYPE_DATE => text_var(
            Type::Date,
            DateTime::from_binary(reader.counted()?).date_text(),
        ),
        MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => text_var(
            Type::Datetime,
            DateTime::from_binary(reader.counted()?).datetime_text(),
        ),
        MYSQL_TYPE_TIME => text_var(Type::Time, param_time(reader.counted()?).text()),
        MYSQL_TYPE_BIT => var(Type::Varbinary, reader.lenenc_bytes()?),
        // The BLOBs are binary strings to the server (`my_charset_bin`, no
        // conversion); STRING, VAR_STRING, VARCHAR, ENUM, SET, JSON,
        // GEOMETRY and anything unknown are text in the connection's
        // character set (`character_set_client`), whatever its bytes.
        column_type => string_var(column_type, reader.lenenc_bytes()?),
    })
}

fn var(ty: Type, value: Bytes) -> BindVariable {
    BindVariable {
        r#type: ty as i32,
        value,
        values: Vec::new(),
    }
}

fn text_var(ty: Type, text: String) -> BindVariable {
    var(ty, Bytes::from(text))
}

fn null_var() -> BindVariable {
    var(Type::NullType, Bytes::new())
}

/// A string parameter: bytes to the server for the BLOB types, text in
/// the client's character set for the others (never checked or converted
/// here: the bytes are the client's).
fn string_var(column_type: ColumnType, value: Bytes) -> BindVariable {
    use ColumnType::*;
    match column_type {
        MYSQL_TYPE_TINY_BLOB | MYSQL_TYPE_MEDIUM_BLOB | MYSQL_TYPE_LONG_BLOB | MYSQL_TYPE_BLOB => {
            var(Type::Varbinary, value)
        }
        _ => var(Type::Varchar, value),
    }
}

fn int_var<const N: usize>(
    unsigned: bool,
    bytes: [u8; N],
    signed_value: impl Fn([u8; N]) -> i64,
    unsigned_value: impl Fn([u8; N]) -> u64,
) -> BindVariable {
    if unsigned {
        text_var(Type::Uint64, unsigned_value(bytes).to_string())
    } else {
        text_var(Type::Int64, signed_value(bytes).to_string())
    }
}

/// Shortest round-trip text, always with an exponent so that MySQL reads
/// it as a DOUBLE literal (without one, `1.5` would be DECIMAL). MySQL has
/// no literal for NaN or infinities.
fn float_var(value: f64) -> Result<BindVariable, MysqlError> {
    if !value.is_finite() {
        return Err(wrong_arguments());
    }
    Ok(text_var(Type::Float64, format!("{value:e}")))
}

/// A cursor over the payload; every read is bounds-checked and a short
/// read is the server's "Malformed communication packet".
struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], MysqlError> {
        let end = self.pos.checked_add(n).ok_or_else(malformed)?;
        let buf: &'a [u8] = self.buf;
        let bytes = buf.get(self.pos..end).ok_or_else(malformed)?;
        self.pos = end;
        Ok(bytes)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], MysqlError> {
        let bytes = self.take(N)?;
        bytes.try_into().map_err(|_| malformed())
    }

    fn u8(&mut self) -> Result<u8, MysqlError> {
        Ok(self.take_array::<1>()?[0])
    }

    /// Bytes preceded by a one-byte count (the binary temporal forms).
    fn counted(&mut self) -> Result<&'a [u8], MysqlError> {
        let len = usize::from(self.u8()?);
        self.take(len)
    }

    /// A length-encoded string, as a zero-copy slice of the payload.
    fn lenenc_bytes(&mut self) -> Result<Bytes, MysqlError> {
        let len = match self.u8()? {
            n @ 0..=0xfa => u64::from(n),
            0xfc => u64::from(u16::from_le_bytes(self.take_array()?)),
            0xfd => {
                let [a, b, c] = self.take_array()?;
                u64::from(u32::from_le_bytes([a, b, c, 0]))
            }
            0xfe => u64::from_le_bytes(self.take_array()?),
            // 0xfb (NULL) and 0xff are not lengths.
            _ => return Err(malformed()),
        };
        let len = usize::try_from(len).map_err(|_| malformed())?;
        let start = self.pos;
        self.take(len)?;
        Ok(self.buf.slice(start..self.pos))
    }
}

/// ER_MALFORMED_PACKET.
fn malformed() -> MysqlError {
    MysqlError {
        code: 1835,
        state: "HY000".into(),
        message: "Malformed communication packet.".into(),
    }
}

/// ER_WRONG_ARGUMENTS, as the server words it for COM_STMT_EXECUTE.
fn wrong_arguments() -> MysqlError {
    MysqlError {
        code: 1210,
        state: "HY000".into(),
        message: "Incorrect arguments to mysqld_stmt_execute".into(),
    }
}

/// A binary TIME parameter as the server takes it (`set_param_time`): more
/// than 838 hours (days × 24 + hours) becomes 838:59:59, keeping the
/// fraction, silently. Sent on as text it would be an out-of-range error
/// instead (Connector/Python encodes -838:59:59 as -841:00:01).
fn param_time(binary: &[u8]) -> Time {
    let mut t = Time::from_binary(binary);
    if t.hours > 838 {
        (t.hours, t.minute, t.second) = (838, 59, 59);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    /// The gateway's substitution, in utf8mb4 with the default `sql_mode`.
    fn substitute(
        sql: &str,
        vars: &HashMap<String, BindVariable>,
    ) -> Result<String, crate::translate::bind::BindError> {
        let dialect = crate::translate::sql_text::Dialect::default();
        crate::translate::bind::substitute(sql.as_bytes(), vars, &dialect, "utf8mb4")
            .map(|sql| String::from_utf8(sql.into_owned()).expect("ASCII"))
    }
    use mysql_common::Value;
    use mysql_common::packets::ComStmtExecuteRequestBuilder;
    use mysql_common::proto::MySerialize;

    /// The params part of an execute built by mysql_common's client side.
    fn client_params(values: &[Value]) -> Bytes {
        let (request, _) = ComStmtExecuteRequestBuilder::new(1).build(values);
        let mut buf = Vec::new();
        request.serialize(&mut buf);
        // command (1) + stmt_id (4) + flags (1) + iteration_count (4)
        Bytes::copy_from_slice(&buf[10..])
    }

    /// A params part built by hand: bitmap, types, then values.
    fn by_hand(types: &[(ColumnType, bool)], nulls: &[usize], values: &[u8]) -> Bytes {
        let mut buf = vec![0u8; types.len().div_ceil(8)];
        for &i in nulls {
            buf[i / 8] |= 1 << (i % 8);
        }
        buf.push(1);
        for &(ty, unsigned) in types {
            buf.push(ty as u8);
            buf.push(if unsigned { 0x80 } else { 0 });
        }
        buf.extend_from_slice(values);
        Bytes::from(buf)
    }

    fn bound(vars: &HashMap<String, BindVariable>, name: &str) -> (Type, String) {
        let v = &vars[name];
        (
            Type::try_from(v.r#type).unwrap(),
            String::from_utf8_lossy(&v.value).into_owned(),
        )
    }

    fn ty(t: Type, s: &str) -> (Type, String) {
        (t, s.to_string())
    }

    #[test]
    fn client_built_values() {
        let values = [
            Value::Int(i64::MIN),
            Value::UInt(u64::MAX),
            Value::Float(0.1),
            Value::Double(f64::MAX),
            Value::Bytes("héllo 😀".into()),
            Value::Bytes(vec![0, 159, 255]),
            Value::NULL,
            Value::Date(2024, 2, 29, 13, 14, 15, 123_456),
            Value::Date(2024, 2, 29, 0, 0, 0, 0),
            Value::Date(0, 0, 0, 0, 0, 0, 0),
            Value::Time(true, 34, 22, 59, 59, 0),
            Value::Time(false, 0, 1, 2, 3, 4),
            Value::Time(false, 0, 0, 0, 0, 0),
            Value::Double(-0.0),
            Value::Float(3.4028235e38),
            Value::Time(true, 35, 1, 0, 1, 0),
            Value::Time(false, 40, 0, 0, 0, 7),
        ];
        let mut params = StatementParams::new(values.len() as u16);
        let vars = params.bind(&client_params(&values)).unwrap();
        assert_eq!(vars.len(), values.len());
        let expected = [
            ty(Type::Int64, "-9223372036854775808"),
            ty(Type::Uint64, "18446744073709551615"),
            ty(Type::Float64, "1.0000000149011612e-1"),
            ty(Type::Float64, "1.7976931348623157e308"),
            ty(Type::Varchar, "héllo 😀"),
            // VAR_STRING: text in the client's character set, bytes as sent.
            (
                Type::Varchar,
                String::from_utf8_lossy(&[0, 159, 255]).into_owned(),
            ),
            ty(Type::NullType, ""),
            ty(Type::Datetime, "2024-02-29 13:14:15.123456"),
            ty(Type::Datetime, "2024-02-29 00:00:00"),
            ty(Type::Datetime, "0000-00-00 00:00:00"),
            ty(Type::Time, "-838:59:59"),
            ty(Type::Time, "1:02:03.000004"),
            ty(Type::Time, "0:00:00"),
            ty(Type::Float64, "-0e0"),
            ty(Type::Float64, "3.4028234663852886e38"),
            // Out of TIME's range: clamped, as the server does.
            ty(Type::Time, "-838:59:59"),
            ty(Type::Time, "838:59:59.000007"),
        ];
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(&bound(&vars, &format!("v{}", i + 1)), e, "v{}", i + 1);
        }
        assert_eq!(&vars["v6"].value[..], &[0, 159, 255]);
        // The FLOAT's text reads back as exactly the client's f32.
        let f: f64 = "1.0000000149011612e-1".parse().unwrap();
        assert_eq!((f as f32).to_bits(), 0.1f32.to_bits());
    }

    #[test]
    fn every_type_by_hand() {
        use ColumnType::*;
        let types = [
            (MYSQL_TYPE_TINY, false),
            (MYSQL_TYPE_TINY, true),
            (MYSQL_TYPE_SHORT, false),
            (MYSQL_TYPE_SHORT, true),
            (MYSQL_TYPE_YEAR, true),
            (MYSQL_TYPE_INT24, false),
            (MYSQL_TYPE_LONG, false),
            (MYSQL_TYPE_LONG, true),
            (MYSQL_TYPE_NEWDECIMAL, false),
            (MYSQL_TYPE_DATE, false),
            (MYSQL_TYPE_TIMESTAMP, false),
            (MYSQL_TYPE_BIT, false),
            (MYSQL_TYPE_JSON, false),
            (MYSQL_TYPE_BLOB, false),
            (MYSQL_TYPE_STRING, false),
            (MYSQL_TYPE_ENUM, false),
            (MYSQL_TYPE_NULL, false),
            (MYSQL_TYPE_DECIMAL, false),
            (MYSQL_TYPE_GEOMETRY, false),
        ];
        let mut v = Vec::new();
        v.extend_from_slice(&(-128i8).to_le_bytes());
        v.push(255);
        v.extend_from_slice(&i16::MIN.to_le_bytes());
        v.extend_from_slice(&u16::MAX.to_le_bytes());
        v.extend_from_slice(&2024u16.to_le_bytes());
        v.extend_from_slice(&(-8_388_608i32).to_le_bytes());
        v.extend_from_slice(&i32::MIN.to_le_bytes());
        v.extend_from_slice(&u32::MAX.to_le_bytes());
        let decimal = "-99999999999999999999999999999999999.999999999999999999999999999999";
        v.push(decimal.len() as u8);
        v.extend_from_slice(decimal.as_bytes());
        v.extend_from_slice(&[4, 0xe8, 0x07, 12, 31]); // DATE 2024-12-31
        v.extend_from_slice(&[7, 0xb2, 0x07, 1, 19, 3, 14, 7]); // 1970-01-19 03:14:07
        v.extend_from_slice(&[2, 0x01, 0xff]); // BIT
        v.extend_from_slice(&[7]);
        v.extend_from_slice(br#"{"a":1}"#);
        let blob = vec![b'z'; 300];
        v.extend_from_slice(&[0xfc, 0x2c, 0x01]);
        v.extend_from_slice(&blob);
        v.extend_from_slice(&[1, b'x']);
        v.extend_from_slice(&[5]);
        v.extend_from_slice(b"small");
        // NULL type: no bytes.
        v.extend_from_slice(&[4]);
        v.extend_from_slice(b"1.50");
        v.extend_from_slice(&[3, 0, 0, 0xff]); // GEOMETRY bytes, not UTF-8
        let payload = by_hand(&types, &[], &v);
        let mut params = StatementParams::new(types.len() as u16);
        let vars = params.bind(&payload).unwrap();
        let expected = [
            ty(Type::Int64, "-128"),
            ty(Type::Uint64, "255"),
            ty(Type::Int64, "-32768"),
            ty(Type::Uint64, "65535"),
            ty(Type::Uint64, "2024"),
            ty(Type::Int64, "-8388608"),
            ty(Type::Int64, "-2147483648"),
            ty(Type::Uint64, "4294967295"),
            ty(Type::Decimal, decimal),
            ty(Type::Date, "2024-12-31"),
            ty(Type::Datetime, "1970-01-19 03:14:07"),
            (
                Type::Varbinary,
                String::from_utf8_lossy(&[1, 0xff]).into_owned(),
            ),
            ty(Type::Varchar, r#"{"a":1}"#),
            ty(Type::Varbinary, &"z".repeat(300)),
            ty(Type::Varchar, "x"),
            ty(Type::Varchar, "small"),
            ty(Type::NullType, ""),
            ty(Type::Decimal, "1.50"),
            (
                Type::Varchar,
                String::from_utf8_lossy(&[0, 0, 0xff]).into_owned(),
            ),
        ];
        for (i, e) in expected.iter().enumerate() {
            assert_eq!(&bound(&vars, &format!("v{}", i + 1)), e, "v{}", i + 1);
        }
    }

    #[test]
    fn types_are_remembered_and_nulls_come_from_the_bitmap() {
        let mut params = StatementParams::new(3);
        let first = client_params(&[Value::Int(1), Value::NULL, Value::Bytes(b"a".to_vec())]);
        let vars = params.bind(&first).unwrap();
        assert_eq!(bound(&vars, "v2").0, Type::NullType);
        assert_eq!(params.types().len(), 3);
        // Second execute: new_params_bound_flag = 0 (types reused), v1 NULL
        // in the bitmap, v2 typed NULL (no bytes), v3 a string.
        let again = Bytes::from_static(&[0b001, 0, 2, b'h', b'i']);
        let vars = params.bind(&again).unwrap();
        assert_eq!(bound(&vars, "v1"), ty(Type::NullType, ""));
        assert_eq!(bound(&vars, "v2"), ty(Type::NullType, ""));
        assert_eq!(bound(&vars, "v3"), ty(Type::Varchar, "hi"));
    }

    #[test]
    fn long_data_replaces_the_value_and_is_forgotten() {
        let mut params = StatementParams::new(2);
        params.send_long_data(1, "part one, ".as_bytes(), 1 << 20);
        params.send_long_data(1, "part two 😀".as_bytes(), 1 << 20);
        // mysql_common leaves long-data params out of the packet only when
        // it decides to; build it by hand: v1 BIGINT 7, v2 BLOB (long data).
        let v = 7i64.to_le_bytes();
        let payload = by_hand(
            &[
                (ColumnType::MYSQL_TYPE_LONGLONG, false),
                (ColumnType::MYSQL_TYPE_BLOB, false),
            ],
            &[],
            &v,
        );
        let vars = params.bind(&payload).unwrap();
        assert_eq!(bound(&vars, "v1"), ty(Type::Int64, "7"));
        // Declared BLOB: bytes to the server.
        assert_eq!(
            bound(&vars, "v2"),
            ty(Type::Varbinary, "part one, part two 😀")
        );
        // Forgotten after the execute: now the packet must carry v2.
        assert_eq!(params.bind(&payload).unwrap_err().code, 1835);
        params.send_long_data(1, &[0xff, 0xfe], 1 << 20);
        let vars = params.bind(&payload).unwrap();
        assert_eq!(vars["v2"].r#type, Type::Varbinary as i32);
        // COM_STMT_RESET drops it.
        params.send_long_data(1, b"gone", 1 << 20);
        params.reset();
        assert_eq!(params.bind(&payload).unwrap_err().code, 1835);
    }

    #[test]
    fn long_data_errors_surface_at_execute() {
        let mut params = StatementParams::new(1);
        params.send_long_data(5, b"x", 100);
        let payload = client_params(&[Value::Int(1)]);
        assert_eq!(params.bind(&payload).unwrap_err().code, 1210);
        assert!(params.bind(&payload).is_ok());
        params.send_long_data(0, &[0; 60], 100);
        params.send_long_data(0, &[0; 60], 100);
        assert_eq!(params.bind(&payload).unwrap_err().code, 1105);
        let vars = params.bind(&payload).unwrap();
        assert_eq!(bound(&vars, "v1"), ty(Type::Int64, "1"));
    }

    #[test]
    fn malformed_and_wrong_arguments() {
        let err = |count: u16, payload: &[u8]| {
            StatementParams::new(count)
                .bind(&Bytes::copy_from_slice(payload))
                .unwrap_err()
        };
        let malformed_code = 1835;
        // Empty, bitmap only, truncated types, truncated value.
        assert_eq!(err(1, &[]).code, malformed_code);
        assert_eq!(err(1, &[0]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 8]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 8, 0, 1, 2, 3]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 253, 0, 5, b'a']).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 253, 0, 0xff]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 253, 0, 0xfb]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 12, 0, 11, 1, 2]).code, malformed_code);
        assert_eq!(err(1, &[0, 1, 11, 0, 12, 0]).code, malformed_code);
        let e = err(
            1,
            &[
                0, 1, 253, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ],
        );
        assert_eq!(e.code, malformed_code);
        assert_eq!(e.message, "Malformed communication packet.");
        // First execute without types.
        let e = err(2, &[0, 0, 1, b'a']);
        assert_eq!((e.code, e.state.as_str()), (1210, "HY000"));
        assert_eq!(e.message, "Incorrect arguments to mysqld_stmt_execute");
        // More values than placeholders.
        let two = client_params(&[Value::Int(1), Value::Int(2)]);
        assert_eq!(err(1, &two).code, 1210);
        // Non-finite floats have no SQL literal.
        assert_eq!(
            err(1, &client_params(&[Value::Double(f64::NAN)])).code,
            1210
        );
        assert_eq!(
            err(1, &client_params(&[Value::Float(f32::INFINITY)])).code,
            1210
        );
        // No placeholders: nothing to read.
        assert!(
            StatementParams::new(0)
                .bind(&Bytes::new())
                .unwrap()
                .is_empty()
        );
    }

    /// Execute bytes → bind variables → the SQL the gateway runs.
    #[test]
    fn substituted_sql_is_what_mysql_would_run() {
        let values = [
            Value::Int(-5),
            Value::UInt(u64::MAX),
            Value::Float(1.5),
            Value::Double(0.1),
            Value::Bytes(b"it's".to_vec()),
            Value::Bytes(vec![0xff, 0x00]),
            Value::NULL,
            Value::Date(2024, 1, 2, 3, 4, 5, 6),
            Value::Time(true, 1, 2, 3, 4, 0),
        ];
        let mut params = StatementParams::new(values.len() as u16);
        let vars = params.bind(&client_params(&values)).unwrap();
        let sql = substitute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", &vars).unwrap();
        assert_eq!(
            sql,
            "INSERT INTO t VALUES (-5, 18446744073709551615, 1.5e0, 1e-1, \
             _utf8mb4 X'69742773', X'FF00', NULL, \
             _utf8mb4 X'323032342D30312D30322030333A30343A30352E303030303036', \
             _utf8mb4 X'2D32363A30333A3034')"
        );
        // Hand-built: DECIMAL, DATE, BIT and TINY UNSIGNED.
        use ColumnType::*;
        let mut v = vec![4];
        v.extend_from_slice(b"-1.5");
        v.extend_from_slice(&[4, 0xe8, 0x07, 2, 29]);
        v.extend_from_slice(&[1, 0x05, 200]);
        let payload = by_hand(
            &[
                (MYSQL_TYPE_NEWDECIMAL, false),
                (MYSQL_TYPE_DATE, false),
                (MYSQL_TYPE_BIT, false),
                (MYSQL_TYPE_TINY, true),
            ],
            &[],
            &v,
        );
        let vars = StatementParams::new(4).bind(&payload).unwrap();
        let sql = substitute("SELECT ? + 0, ?, ?, ?", &vars).unwrap();
        assert_eq!(
            sql,
            "SELECT -1.5 + 0, _utf8mb4 X'323032342D30322D3239', X'05', 200"
        );
    }
}
