//! Statements that came from a MySQL prepared statement
//! (`ExecuteRequest.prepared`, which our sidecar sets where the text
//! protocol would lose something): run at the backend as a server-side
//! prepared statement, in the binary protocol, so that
//! - a `CALL p(?, ?)` gets its OUT and INOUT arguments as parameters,
//!   which a literal cannot be (MariaDB refuses one with 1414), and the
//!   server answers their values as a last result set;
//! - parameters whose binary type mysql_async sends as the client did
//!   (LONGLONG, FLOAT, DOUBLE, DATETIME, TIME, NULL) reach the server as
//!   the values the client bound, typed as a server types them (`SELECT
//!   ?` of a FLOAT is a FLOAT; zero dates, fractions, negative and long
//!   times), not as literals;
//! - a string parameter that is not surely a valid string of the
//!   connection's character set reaches the server as the bytes the
//!   client sent, which it takes as directly (an introducer literal of
//!   them would be refused with 1300);
//! - rows come in the binary protocol and are written as text that reads
//!   back as exactly the same values: a FLOAT as the shortest text of its
//!   4-byte value, where MariaDB's text protocol prints about 6 digits.
//!
//! Every other bound value stays a literal ([`bind`]), as for any other
//! request: a parameter's binary protocol type is not ours to choose
//! (mysql_async sends bytes as VAR_STRING, where a client's BLOB
//! parameter is binary), and a literal keeps it.

use std::borrow::Cow;
use std::collections::HashMap;

use mysql_async::consts::ColumnType;
use mysql_async::prelude::Queryable;
use mysql_async::{Column, Conn, Value};

use crate::api::pb::{BindVariable, Type};
use crate::api::row_batch::Cells;
use crate::mysql::temporal::{DateTime, Time};
use crate::translate::bind::{self, BindError};
use crate::translate::sql_text::Dialect;
use crate::translate::statement::is_call;
use crate::translate::well_formed::Strings;

use super::backend::{
    BackendError, JsonLookup, Outcome, ResultSink, feed_results, with_connection_warnings,
};
use super::error_text::with_server_bytes;
use super::extended_metadata::{ParamType, Retype};
use super::statement_shapes::{Memo, Shape};

/// The text to prepare at the backend and the values of its remaining
/// `?`s: with `all` (the relay follows the connection and puts the
/// client's types back), every parameter; otherwise every argument of a
/// `CALL` (any may be OUT), and temporal values and strings not surely
/// valid in `charset` of other statements, the rest being literals.
pub fn statement<'a>(
    sql: &'a [u8],
    vars: &HashMap<String, BindVariable>,
    all: bool,
    dialect: &Dialect,
    charset: &str,
) -> Result<(Cow<'a, [u8]>, Params), BindError> {
    let is_call = is_call(sql);
    let strings = Strings::from_name(charset);
    let keep = |var: &BindVariable| match Type::try_from(var.r#type) {
        Ok(Type::Tuple) | Err(_) => false,
        _ if all => true,
        // A zero DATE goes as a DATETIME: stored as the DATE would be,
        // where a string is refused. Others are literals: `DATE'…'`, or an
        // invalid date's string, refused in the same words as directly.
        Ok(Type::Date) => is_call || DateTime::is_zero_in_date(&var.value),
        // mysql_async sends it as a VAR_STRING in the connection's
        // character set, as the client did: its bytes as sent, where an
        // introducer literal of bytes that are not a string of the
        // character set is refused (1300).
        Ok(Type::Varchar) => is_call || !strings.surely_valid(&var.value),
        Ok(ty) => is_call || same_type_as_parameter(ty),
    };
    let (sql, kept) = bind::substitute_keeping(sql, vars, dialect, charset, keep)?;
    let values = kept
        .iter()
        .enumerate()
        .map(|(i, var)| {
            server_value(var).ok_or_else(|| BindError::Invalid {
                name: format!("parameter {}", i + 1),
                reason: format!("not a valid {:?} value", Type::try_from(var.r#type)),
            })
        })
        .collect::<Result<_, _>>()?;
    let types = kept.iter().map(|var| client_type(var.r#type)).collect();
    Ok((sql, Params { values, types }))
}

/// The values of a statement's parameters, and the type the client sent
/// each in where mysql_async sends another (`None`: the same).
#[derive(Debug, Default, PartialEq)]
pub struct Params {
    pub values: Vec<Value>,
    pub types: Vec<Option<ParamType>>,
}

/// The client's type of a parameter bound as a variable of this type (the
/// sidecar's types say it: an Int8 was a TINY), where mysql_async's for
/// the value differs: a LONGLONG for every integer, a DATETIME for a DATE
/// or TIMESTAMP, a VAR_STRING for a BLOB or DECIMAL.
fn client_type(ty: i32) -> Option<ParamType> {
    use ColumnType::*;
    let (code, unsigned) = match Type::try_from(ty).ok()? {
        Type::Int8 => (MYSQL_TYPE_TINY, false),
        Type::Uint8 => (MYSQL_TYPE_TINY, true),
        Type::Int16 => (MYSQL_TYPE_SHORT, false),
        Type::Uint16 => (MYSQL_TYPE_SHORT, true),
        Type::Int24 => (MYSQL_TYPE_INT24, false),
        Type::Uint24 => (MYSQL_TYPE_INT24, true),
        Type::Int32 => (MYSQL_TYPE_LONG, false),
        Type::Uint32 => (MYSQL_TYPE_LONG, true),
        Type::Date => (MYSQL_TYPE_DATE, false),
        Type::Timestamp => (MYSQL_TYPE_TIMESTAMP, false),
        Type::Blob => (MYSQL_TYPE_BLOB, false),
        Type::Decimal => (MYSQL_TYPE_NEWDECIMAL, false),
        // A client's BIT (the sidecar's VARBINARY of its bytes).
        Type::Varbinary => (MYSQL_TYPE_BIT, false),
        _ => return None,
    };
    let code = code as u8;
    Some(ParamType { code, unsigned })
}

/// Whether the parameter mysql_async sends for a variable of this type is
/// the one the client sent (our sidecar's types say which it was): the
/// server then types it as directly (`SELECT ?` answers a FLOAT for a
/// FLOAT, a DATETIME for a zero DATETIME). mysql_async sends a LONGLONG,
/// FLOAT, DOUBLE, DATETIME, TIME or NULL, and the relay puts a narrower
/// integer's type or TIMESTAMP back ([`Params::types`]); not a DATE,
/// BLOB or DECIMAL, which stay literals (a zero DATE aside).
fn same_type_as_parameter(ty: Type) -> bool {
    matches!(
        ty,
        Type::NullType
            | Type::Int8
            | Type::Uint8
            | Type::Int16
            | Type::Uint16
            | Type::Int24
            | Type::Uint24
            | Type::Int32
            | Type::Uint32
            | Type::Int64
            | Type::Uint64
            | Type::Float32
            | Type::Float64
            | Type::Datetime
            | Type::Timestamp
            | Type::Time
    )
}

/// A bind variable as the binary-protocol value of a parameter.
fn server_value(var: &BindVariable) -> Option<Value> {
    let text = || std::str::from_utf8(&var.value).ok();
    Some(match Type::try_from(var.r#type).ok()? {
        Type::NullType => Value::NULL,
        Type::Int8 | Type::Int16 | Type::Int24 | Type::Int32 | Type::Int64 => {
            Value::Int(text()?.parse().ok()?)
        }
        Type::Uint8 | Type::Uint16 | Type::Uint24 | Type::Uint32 | Type::Uint64 | Type::Year => {
            Value::UInt(text()?.parse().ok()?)
        }
        // The text of the FLOAT's value as a double (exact).
        Type::Float32 => Value::Float(text()?.parse::<f64>().ok()? as f32),
        Type::Float64 => Value::Double(text()?.parse().ok()?),
        Type::Date | Type::Datetime | Type::Timestamp => {
            let d = DateTime::parse_text(&var.value)?;
            Value::Date(d.year, d.month, d.day, d.hour, d.minute, d.second, d.micros)
        }
        Type::Time => {
            let t = Time::parse_text(&var.value)?;
            let days = u32::try_from(t.hours / 24).ok()?;
            let hour = (t.hours % 24) as u8;
            Value::Time(t.negative, days, hour, t.minute, t.second, t.micros)
        }
        _ => Value::Bytes(var.value.to_vec()),
    })
}

/// Prepares `sql`, executes it with `params` and feeds every result set
/// to `sink`, as [`super::backend::run`] does for the text protocol; the
/// statement is closed at the backend whatever happened.
pub async fn run<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    sql: &[u8],
    params: Params,
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    let statement = match conn.prep(sql).await {
        Ok(statement) => statement,
        Err(e) => return Err(with_message_bytes(conn, e.into()).await),
    };
    let outcome = match execute(conn, json, &statement, params, sink).await {
        Err(e) => Err(with_message_bytes(conn, e).await),
        ran => ran,
    };
    closed(conn, statement, outcome).await
}

/// `outcome`, once `statement` is closed at the backend.
async fn closed(
    conn: &mut Conn,
    statement: mysql_async::Statement,
    outcome: Result<Outcome, BackendError>,
) -> Result<Outcome, BackendError> {
    match (outcome, conn.close(statement).await) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e.into()),
        (Ok(outcome), Ok(())) => Ok(outcome),
    }
}

/// Runs a client's prepared statement with every parameter kept (`all`,
/// see [`statement`] with `all`), prepared at the backend, executed and
/// closed (see `statement_shapes` for why nothing stays prepared). Where
/// its result columns are all tables' own ([`Shape`], known from an
/// earlier prepare of the text or learned from this one) and the literal
/// binding keeps no parameter, it runs as `literal` text instead: no
/// parameter's type shows, and the relay hands text rows over as they
/// come. Where the driver would not prepare the text as it is
/// ([`driver_prepares_as_is`]), refuses it before sending anything, or
/// the server is at `max_prepared_stmt_count`, nothing ran: it runs as
/// `literal` (with literals) instead.
pub async fn run_all<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    memo: &Memo<'_>,
    (sql, all): (&[u8], Params),
    (literal_sql, literal): (&[u8], Params),
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    let as_text = |shape: Shape| shape.table_columns_only && literal.values.is_empty();
    if !driver_prepares_as_is(sql) || memo.known().is_some_and(as_text) {
        // Text where it can (FLOAT columns of a text the driver would
        // rewrite then have their text's digits): the driver would scan a
        // literal text too.
        return match literal.values.is_empty() {
            true => super::backend::run(conn, json, literal_sql, sink).await,
            false => run(conn, json, literal_sql, literal, sink).await,
        };
    }
    let statement = match conn.prep(sql).await {
        Ok(statement) => statement,
        Err(mysql_async::Error::Driver(_)) => {
            return run(conn, json, literal_sql, literal, sink).await;
        }
        Err(mysql_async::Error::Server(e)) if e.code == ER_MAX_PREPARED_STMT_COUNT_REACHED => {
            return run(conn, json, literal_sql, literal, sink).await;
        }
        Err(e) => return Err(with_message_bytes(conn, e.into()).await),
    };
    let shape = Shape::of(sql, &statement.columns());
    memo.learn(shape);
    if as_text(shape) {
        conn.close(statement).await?;
        return super::backend::run(conn, json, literal_sql, sink).await;
    }
    let outcome = match execute(conn, json, &statement, all, sink).await {
        Err(e) => Err(with_message_bytes(conn, e).await),
        ran => ran,
    };
    closed(conn, statement, outcome).await
}

/// Whether mysql_async prepares `sql` as it is: it scans the text for
/// `:name` parameters (taking a backslash for an escape in a string, which
/// under NO_BACKSLASH_ESCAPES it is not, so `'a\', ':x'` has a `:x`
/// outside a string to it) and would prepare the text with each made a
/// `?`: another statement.
fn driver_prepares_as_is(sql: &[u8]) -> bool {
    mysql_common::named_params::ParsedNamedParams::parse(sql).is_ok_and(|p| p.params().is_empty())
}

/// Runs a client's prepared statement where the relay does not follow the
/// connection, bound by [`statement`] without `all`: where no parameter
/// is kept and it is no `CALL`, text does as well unless a result column
/// is a FLOAT, which the [`Shape`] of the client's text says (known, or
/// learned from a prepare of it, closed unexecuted); then `sql` runs in
/// the text protocol. Otherwise as [`run`].
pub async fn run_unrelayed<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    memo: &Memo<'_>,
    client_sql: &[u8],
    (sql, params): (&[u8], Params),
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    if params.values.is_empty() && !is_call(sql) {
        if !driver_prepares_as_is(client_sql) {
            return super::backend::run(conn, json, sql, sink).await;
        }
        let shape = match memo.known() {
            Some(shape) => Some(shape),
            None => match conn.prep(client_sql).await {
                Ok(stmt) => {
                    let shape = Shape::of(client_sql, &stmt.columns());
                    memo.learn(shape);
                    conn.close(stmt).await?;
                    Some(shape)
                }
                // Nothing ran; the statement's own prepare answers.
                Err(mysql_async::Error::Driver(_) | mysql_async::Error::Server(_)) => None,
                Err(e) => return Err(e.into()),
            },
        };
        if shape.is_some_and(|s| !s.has_float) {
            return super::backend::run(conn, json, sql, sink).await;
        }
    }
    run(conn, json, sql, params, sink).await
}

/// MariaDB's refusal of a prepare past `max_prepared_stmt_count`.
const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;

/// An error whose message is the server's bytes (see
/// [`with_server_bytes`]), read before the statement is closed (which
/// leaves the diagnostics area as it is, but a request is a request).
async fn with_message_bytes(conn: &mut Conn, e: BackendError) -> BackendError {
    match e {
        BackendError::Sql(e) => BackendError::Sql(with_server_bytes(conn, e).await),
        other => other,
    }
}

async fn execute<S: ResultSink>(
    conn: &mut Conn,
    json: JsonLookup<'_>,
    statement: &mysql_async::Statement,
    params: Params,
    sink: &mut S,
) -> Result<Outcome, BackendError> {
    let id = conn.id();
    // Where the relay follows the connection, it sends the execute in the
    // client's types; elsewhere the values go in mysql_async's.
    let retyped = params.types.iter().any(Option::is_some)
        && json.relayed.retype(
            id,
            Retype {
                statement: statement.id(),
                types: params.types,
            },
        );
    let values = if params.values.is_empty() {
        mysql_async::Params::Empty
    } else {
        mysql_async::Params::Positional(params.values)
    };
    let result = conn.exec_iter(statement, values).await;
    if retyped {
        json.relayed.forget_retype(id);
    }
    let result = result?;
    let binary_row = |columns: &[Column], row: mysql_async::Row| {
        let made = (0..columns.len())
            .map(|i| match row.as_ref(i).and_then(|v| cell(&columns[i], v)) {
                Some(Cow::Borrowed(_)) => None,
                Some(Cow::Owned(text)) => Some(Some(text)),
                None => Some(None),
            })
            .collect();
        BinaryRow { row, made }
    };
    let outcome = feed_results(result, id, json, sink, None, binary_row).await?;
    Ok(with_connection_warnings(conn, outcome))
}

/// A binary-protocol row as text: the cells [`cell`] makes, the others
/// (strings, blobs, decimals) read where the driver holds them.
struct BinaryRow {
    row: mysql_async::Row,
    /// Per cell: made by [`cell`] (`Some`; NULL included), or the
    /// driver's bytes (`None`).
    made: Vec<Option<Option<Vec<u8>>>>,
}

impl Cells for BinaryRow {
    fn count(&self) -> usize {
        self.made.len()
    }
    fn cell(&self, i: usize) -> Option<&[u8]> {
        match &self.made[i] {
            Some(made) => made.as_deref(),
            None => match self
                .row
                .as_ref(i)
                .and_then(|v| cell(&self.row.columns_ref()[i], v))
            {
                Some(Cow::Borrowed(bytes)) => Some(bytes),
                _ => None,
            },
        }
    }
}

/// A binary-protocol value as text that the sidecar turns back into the
/// same binary value (`None`: NULL). Not MariaDB's text form where that
/// loses bits: a FLOAT is the shortest text that reads back as its f32.
fn cell<'v>(column: &Column, value: &'v Value) -> Option<Cow<'v, [u8]>> {
    let text = |s: String| Some(Cow::Owned(s.into_bytes()));
    match *value {
        Value::NULL => None,
        Value::Bytes(ref b) => Some(Cow::Borrowed(b)),
        Value::Int(v) => text(v.to_string()),
        Value::UInt(v) => text(v.to_string()),
        Value::Float(v) => text(v.to_string()),
        Value::Double(v) => text(v.to_string()),
        Value::Date(year, month, day, hour, minute, second, micros) => {
            let d = DateTime {
                year,
                month,
                day,
                hour,
                minute,
                second,
                micros,
            };
            match column.column_type() {
                ColumnType::MYSQL_TYPE_DATE | ColumnType::MYSQL_TYPE_NEWDATE => text(d.date_text()),
                _ => text(d.datetime_text()),
            }
        }
        Value::Time(negative, days, hour, minute, second, micros) => text(
            Time {
                negative,
                hours: u64::from(days) * 24 + u64::from(hour),
                minute,
                second,
                micros,
            }
            .text(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::sql_text::Dialect;

    fn var(ty: Type, text: &str) -> BindVariable {
        BindVariable {
            r#type: ty as i32,
            value: bytes::Bytes::copy_from_slice(text.as_bytes()),
            values: Vec::new(),
        }
    }

    fn vars(list: &[(Type, &str)]) -> HashMap<String, BindVariable> {
        list.iter()
            .enumerate()
            .map(|(i, &(ty, text))| (format!("v{}", i + 1), var(ty, text)))
            .collect()
    }

    fn prepared(sql: &str, list: &[(Type, &str)]) -> (String, Vec<Value>) {
        let vars = vars(list);
        let (sql, params) =
            statement(sql.as_bytes(), &vars, false, &Dialect::default(), "utf8mb4").unwrap();
        (String::from_utf8(sql.into_owned()).unwrap(), params.values)
    }

    #[test]
    fn every_argument_of_a_call_stays_a_parameter() {
        let (sql, values) = prepared(
            "/* c */ call p(?, ?, ?, ?)",
            &[
                (Type::Int64, "-7"),
                (Type::NullType, ""),
                (Type::Varchar, "x'y"),
                (Type::Float64, "1.5e0"),
            ],
        );
        assert_eq!(sql, "/* c */ call p(?, ?, ?, ?)");
        assert_eq!(
            values,
            [
                Value::Int(-7),
                Value::NULL,
                Value::Bytes(b"x'y".to_vec()),
                Value::Double(1.5)
            ]
        );
    }

    #[test]
    fn only_values_of_the_clients_type_stay_parameters_elsewhere() {
        let (sql, values) = prepared(
            "SELECT ?, ?, ?, ?, ?",
            &[
                (Type::Decimal, "1"),
                (Type::Datetime, "0000-00-00 00:00:00"),
                (Type::Time, "-838:59:59.000001"),
                (Type::Date, "2024-02-29"),
                (Type::Datetime, "2024-02-30 01:02:03.5"),
            ],
        );
        assert_eq!(sql, "SELECT 1, ?, ?, DATE'2024-02-29', ?");
        let (zero, zero_values) = prepared("SELECT ?", &[(Type::Date, "0000-00-00")]);
        assert_eq!(zero, "SELECT ?");
        assert_eq!(zero_values, [Value::Date(0, 0, 0, 0, 0, 0, 0)]);
        assert_eq!(
            values,
            [
                Value::Date(0, 0, 0, 0, 0, 0, 0),
                Value::Time(true, 34, 22, 59, 59, 1),
                Value::Date(2024, 2, 30, 1, 2, 3, 500_000),
            ]
        );
    }

    #[test]
    fn the_clients_types_go_with_the_values() {
        let vars = vars(&[
            (Type::Int8, "-1"),
            (Type::Uint32, "7"),
            (Type::Int64, "8"),
            (Type::Date, "2024-01-02"),
            (Type::Blob, "b"),
            (Type::Varchar, "s"),
        ]);
        let (_, params) = statement(
            b"CALL p(?, ?, ?, ?, ?, ?)",
            &vars,
            false,
            &Dialect::default(),
            "utf8mb4",
        )
        .unwrap();
        let ty = |code, unsigned| Some(ParamType { code, unsigned });
        assert_eq!(
            params.types,
            [
                ty(1, false),
                ty(3, true),
                None,
                ty(10, false),
                ty(252, false),
                None
            ]
        );
        assert_eq!(params.values[0], Value::Int(-1));
        assert_eq!(params.values[3], Value::Date(2024, 1, 2, 0, 0, 0, 0));
        // Outside a CALL a narrower integer stays a parameter, as a
        // LONGLONG does.
        let (sql, params) =
            statement(b"SELECT ?, ?", &vars, false, &Dialect::default(), "utf8mb4").unwrap();
        assert_eq!(&sql[..], b"SELECT ?, ?");
        assert_eq!(params.types, [ty(1, false), ty(3, true)]);
    }

    /// The driver scans the text it prepares for `:name` as if `\`
    /// always escaped: under NO_BACKSLASH_ESCAPES a large value is hex,
    /// never an escaped literal it would end elsewhere.
    #[test]
    fn large_values_are_hex_where_the_driver_would_misread_a_literal() {
        let large = "a\\', :x ".repeat(crate::translate::bind::ESCAPED_MIN);
        let vars = vars(&[(Type::Float64, "1e0"), (Type::Varchar, large.as_str())]);
        let nbe = Dialect {
            backslash_escapes: false,
            ..Dialect::default()
        };
        let (sql, _) = statement(b"SELECT ?, ?", &vars, false, &nbe, "utf8mb4").unwrap();
        assert!(sql.starts_with(b"SELECT ?, _utf8mb4 X'"));
        let (sql, _) =
            statement(b"SELECT ?, ?", &vars, false, &Dialect::default(), "utf8mb4").unwrap();
        assert!(sql.starts_with(b"SELECT ?, _utf8mb4 'a\\\\\\', :x "));
    }

    #[test]
    fn strings_not_valid_in_the_charset_stay_parameters() {
        let vars = HashMap::from([
            ("v1".to_string(), var(Type::Varchar, "x")),
            (
                "v2".to_string(),
                BindVariable {
                    r#type: Type::Varchar as i32,
                    value: bytes::Bytes::from_static(b"\x81\x20"),
                    values: Vec::new(),
                },
            ),
            (
                "v3".to_string(),
                BindVariable {
                    r#type: Type::Varchar as i32,
                    value: bytes::Bytes::from_static(b"\xd6\xd0"),
                    values: Vec::new(),
                },
            ),
        ]);
        let (sql, params) =
            statement(b"SELECT ?, ?, ?", &vars, false, &Dialect::default(), "gbk").unwrap();
        assert_eq!(&sql[..], b"SELECT _gbk X'78', ?, _gbk X'D6D0'");
        assert_eq!(params.values, [Value::Bytes(b"\x81\x20".to_vec())]);
        assert_eq!(params.types, [None], "a VAR_STRING, as sent");
        // Valid in latin1: a literal.
        let (sql, params) = statement(
            b"SELECT ?, ?, ?",
            &vars,
            false,
            &Dialect::default(),
            "latin1",
        )
        .unwrap();
        assert_eq!(
            &sql[..],
            b"SELECT _latin1 X'78', _latin1 X'8120', _latin1 X'D6D0'"
        );
        assert!(params.values.is_empty());
    }

    #[test]
    fn with_all_every_parameter_stays_one_in_the_clients_type() {
        let vars = vars(&[
            (Type::Int32, "5"),
            (Type::Varchar, "x'y"),
            (Type::Decimal, "-1.50"),
            (Type::Date, "2024-01-02"),
            (Type::Blob, "\u{0}"),
            (Type::NullType, ""),
        ]);
        let (sql, params) = statement(
            b"SELECT ?, ?, ?, ?, ?, ?",
            &vars,
            true,
            &Dialect::default(),
            "utf8mb4",
        )
        .unwrap();
        assert_eq!(&sql[..], b"SELECT ?, ?, ?, ?, ?, ?");
        assert_eq!(
            params.values,
            [
                Value::Int(5),
                Value::Bytes(b"x'y".to_vec()),
                Value::Bytes(b"-1.50".to_vec()),
                Value::Date(2024, 1, 2, 0, 0, 0, 0),
                Value::Bytes(b"\0".to_vec()),
                Value::NULL,
            ]
        );
        let ty = |code| {
            Some(ParamType {
                code,
                unsigned: false,
            })
        };
        assert_eq!(params.types, [ty(3), None, ty(246), ty(10), ty(252), None]);
    }

    #[test]
    fn texts_the_driver_would_rewrite_are_known() {
        assert!(driver_prepares_as_is(b"SELECT ?, ':x', \"?\" -- :y"));
        // Under NO_BACKSLASH_ESCAPES `'a\'` ends; the driver reads on.
        assert!(!driver_prepares_as_is(
            b"SELECT 'a\\', ':x' FROM t WHERE ? > 0"
        ));
        assert!(!driver_prepares_as_is(b"SELECT :x, ?"));
    }

    #[test]
    fn a_value_that_is_not_its_type_is_refused() {
        let vars = vars(&[(Type::Int64, "1; DROP")]);
        let e = statement(b"CALL p(?)", &vars, false, &Dialect::default(), "utf8mb4").unwrap_err();
        assert_eq!(e.to_mysql().code, 1210);
        let vars = vars_of_time("25:61:00");
        assert!(statement(b"SELECT ?", &vars, false, &Dialect::default(), "utf8mb4").is_err());
    }

    fn vars_of_time(text: &str) -> HashMap<String, BindVariable> {
        vars(&[(Type::Time, text)])
    }

    #[test]
    fn binary_values_become_text_that_reads_back_the_same() {
        let float = Column::new(ColumnType::MYSQL_TYPE_FLOAT);
        for f in [0.1f32, 1.234_567_8, -3.402_823_5e38, 1e-45, -0.0] {
            let value = Value::Float(f);
            let text = cell(&float, &value).unwrap();
            let back: f32 = std::str::from_utf8(&text).unwrap().parse().unwrap();
            assert_eq!(back.to_bits(), f.to_bits(), "{f}");
        }
        let double = Column::new(ColumnType::MYSQL_TYPE_DOUBLE);
        let value = Value::Double(0.1);
        let text = cell(&double, &value).unwrap();
        assert_eq!(&text[..], b"0.1");
        let date = Column::new(ColumnType::MYSQL_TYPE_DATE);
        let datetime = Column::new(ColumnType::MYSQL_TYPE_DATETIME);
        let d = Value::Date(2024, 2, 29, 0, 0, 0, 0);
        assert_eq!(&cell(&date, &d).unwrap()[..], b"2024-02-29");
        assert_eq!(&cell(&datetime, &d).unwrap()[..], b"2024-02-29 00:00:00");
        let d = Value::Date(1, 2, 3, 4, 5, 6, 7);
        assert_eq!(
            &cell(&datetime, &d).unwrap()[..],
            b"0001-02-03 04:05:06.000007"
        );
        let time = Column::new(ColumnType::MYSQL_TYPE_TIME);
        let t = Value::Time(true, 34, 22, 59, 59, 0);
        assert_eq!(&cell(&time, &t).unwrap()[..], b"-838:59:59");
        assert_eq!(cell(&time, &Value::NULL), None);
    }
}
