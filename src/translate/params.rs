//! COM_STMT_EXECUTE parameters → psdb bind variables.
//!
//! The gateway substitutes bind variables into SQL text (see
//! [`super::bind`]), with each `?` bound as `v1`, `v2`, …, so a binary
//! parameter becomes the Vitess type whose literal means what the MySQL
//! server would have made of it: integers stay exact, floats keep their
//! bits, temporal values get MySQL's text forms, BLOB-typed strings are
//! bytes and other strings text in the client's character set.

use std::collections::HashMap;

use bytes::Bytes;

use crate::api::pb::{BindVariable, Type};
use crate::mysql::params::{ParamType, ParamValue, wrong_arguments};
use crate::mysql::{ColumnType, MysqlError};

/// The bind variables `v1`…`vN` for a statement's parameter values, of
/// the types the client declared (`types`, as many; missing ones are
/// taken as the value's widest type).
pub fn bind_variables(
    values: Vec<ParamValue>,
    types: &[ParamType],
) -> Result<HashMap<String, BindVariable>, MysqlError> {
    let mut vars = HashMap::with_capacity(values.len());
    for (i, value) in values.into_iter().enumerate() {
        let declared = types.get(i).map(|t| t.column_type);
        vars.insert(format!("v{}", i + 1), bind_variable(value, declared)?);
    }
    Ok(vars)
}

/// A value as the Vitess type that says what the client sent: an
/// integer's width (a TINY is an Int8), a TIMESTAMP, a BLOB. A literal
/// of any of them is the same as of the widest; a parameter prepared at
/// the backend is sent in the client's type (`gateway::binary`).
fn bind_variable(
    value: ParamValue,
    declared: Option<ColumnType>,
) -> Result<BindVariable, MysqlError> {
    use ColumnType::*;
    let (signed, unsigned) = match declared {
        Some(MYSQL_TYPE_TINY) => (Type::Int8, Type::Uint8),
        Some(MYSQL_TYPE_SHORT) => (Type::Int16, Type::Uint16),
        Some(MYSQL_TYPE_INT24) => (Type::Int24, Type::Uint24),
        Some(MYSQL_TYPE_LONG) => (Type::Int32, Type::Uint32),
        _ => (Type::Int64, Type::Uint64),
    };
    Ok(match value {
        ParamValue::Null => var(Type::NullType, Bytes::new()),
        ParamValue::Signed(v) => text_var(signed, v.to_string()),
        ParamValue::Unsigned(v) => text_var(unsigned, v.to_string()),
        // The shortest text of the double is exact, so a FLOAT column
        // stores the client's bits and `SELECT ?` shows what MySQL shows.
        ParamValue::Double(v) => float_var(Type::Float64, v)?,
        // As a literal, the double of the same value (exact); as a
        // parameter at the backend, the FLOAT again (gateway/binary.rs).
        ParamValue::Float(v) => float_var(Type::Float32, f64::from(v))?,
        ParamValue::Decimal(text) => var(Type::Decimal, text),
        ParamValue::Date(d) => text_var(Type::Date, d.date_text()),
        ParamValue::DateTime(d) if declared == Some(MYSQL_TYPE_TIMESTAMP) => {
            text_var(Type::Timestamp, d.datetime_text())
        }
        ParamValue::DateTime(d) => text_var(Type::Datetime, d.datetime_text()),
        ParamValue::Time(t) => text_var(Type::Time, t.text()),
        ParamValue::Binary(bytes) => var(Type::Blob, bytes),
        ParamValue::Bit(bytes) => var(Type::Varbinary, bytes),
        ParamValue::Text(bytes) => var(Type::Varchar, bytes),
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

/// Shortest round-trip text, always with an exponent so that MySQL reads
/// it as a DOUBLE literal (without one, `1.5` would be DECIMAL). MySQL has
/// no literal for NaN or infinities.
fn float_var(ty: Type, value: f64) -> Result<BindVariable, MysqlError> {
    if !value.is_finite() {
        return Err(wrong_arguments());
    }
    Ok(text_var(ty, format!("{value:e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::ColumnType;
    use crate::mysql::params::StatementParams;

    /// Execute bytes → bind variables, as the sidecar does them.
    trait Bind {
        fn bind(&mut self, rest: &Bytes) -> Result<HashMap<String, BindVariable>, MysqlError>;
    }

    impl Bind for StatementParams {
        fn bind(&mut self, rest: &Bytes) -> Result<HashMap<String, BindVariable>, MysqlError> {
            let values = self.read(rest)?;
            bind_variables(values, self.types())
        }
    }

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
            ty(Type::Float32, "1.0000000149011612e-1"),
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
            ty(Type::Float32, "3.4028234663852886e38"),
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
        // Integers of the client's width, a BLOB a Blob.
        let expected = [
            ty(Type::Int8, "-128"),
            ty(Type::Uint8, "255"),
            ty(Type::Int16, "-32768"),
            ty(Type::Uint16, "65535"),
            ty(Type::Uint64, "2024"),
            ty(Type::Int24, "-8388608"),
            ty(Type::Int32, "-2147483648"),
            ty(Type::Uint32, "4294967295"),
            ty(Type::Decimal, decimal),
            ty(Type::Date, "2024-12-31"),
            ty(Type::Timestamp, "1970-01-19 03:14:07"),
            (
                Type::Varbinary,
                String::from_utf8_lossy(&[1, 0xff]).into_owned(),
            ),
            ty(Type::Varchar, r#"{"a":1}"#),
            ty(Type::Blob, &"z".repeat(300)),
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
        assert_eq!(bound(&vars, "v2"), ty(Type::Blob, "part one, part two 😀"));
        // Forgotten after the execute: now the packet must carry v2.
        assert_eq!(params.bind(&payload).unwrap_err().code, 1835);
        params.send_long_data(1, &[0xff, 0xfe], 1 << 20);
        let vars = params.bind(&payload).unwrap();
        assert_eq!(vars["v2"].r#type, Type::Blob as i32);
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
             TIMESTAMP'2024-01-02 03:04:05.000006', TIME'-26:03:04')"
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
        assert_eq!(sql, "SELECT -1.5 + 0, DATE'2024-02-29', X'05', 200");
    }
}
