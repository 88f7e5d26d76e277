//! COM_STMT_EXECUTE parameters, and the state a prepared statement keeps
//! for them between executes (types, long data).
//!
//! Values are read as the server reads them ([`ParamValue`]); what they
//! become upstream is `translate::params`' business.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use super::reader::Reader as LenencReader;
use super::temporal::{DateTime, Time};
use super::{ColumnType, MysqlError};

/// One parameter value as the client sent it in the binary protocol.
#[derive(Debug, PartialEq)]
pub enum ParamValue {
    Null,
    Signed(i64),
    Unsigned(u64),
    Double(f64),
    /// FLOAT: MariaDB keeps a FLOAT parameter a FLOAT (`SELECT ?` answers
    /// a FLOAT column).
    Float(f32),
    /// DECIMAL's text.
    Decimal(Bytes),
    Date(DateTime),
    /// DATETIME or TIMESTAMP.
    DateTime(DateTime),
    /// Clamped to TIME's range as the server does (see `param_time`).
    Time(Time),
    Bit(Bytes),
    /// A BLOB type: a binary string to the server (`my_charset_bin`, no
    /// conversion).
    Binary(Bytes),
    /// STRING, VAR_STRING, VARCHAR, ENUM, SET, JSON, GEOMETRY and anything
    /// unknown: text in the connection's character set
    /// (`character_set_client`), whatever its bytes.
    Text(Bytes),
}

impl ParamValue {
    /// A string parameter: bytes for the BLOB types, text for the others
    /// (never checked or converted here: the bytes are the client's).
    fn string(column_type: ColumnType, value: Bytes) -> Self {
        use ColumnType::*;
        match column_type {
            MYSQL_TYPE_TINY_BLOB
            | MYSQL_TYPE_MEDIUM_BLOB
            | MYSQL_TYPE_LONG_BLOB
            | MYSQL_TYPE_BLOB => Self::Binary(value),
            _ => Self::Text(value),
        }
    }
}

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
    /// By parameter index; only parameters that were sent any (a map, not
    /// a slot per placeholder: 65,535 empty slots cost 2 MiB a statement).
    long_data: BTreeMap<u16, BytesMut>,
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
            long_data: BTreeMap::new(),
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
    /// Errors (bad index, more than `max_bytes` of long data in all: one
    /// request carries every parameter) are kept for the next execute, as
    /// the server does, and the statement's long data is dropped; until
    /// that execute, more long data is ignored (MySQL's statement in its
    /// error state), so a failed value cannot go on growing.
    pub fn send_long_data(&mut self, index: u16, data: &[u8], max_bytes: usize) {
        if self.pending_error.is_some() {
            return;
        }
        if index >= self.count {
            self.refuse_long_data(wrong_arguments());
            return;
        }
        if self.long_data_len().saturating_add(data.len()) > max_bytes {
            self.refuse_long_data(MysqlError {
                code: 1105,
                state: "HY000".into(),
                message: "Parameter of prepared statement which is set through \
                          mysql_send_long_data() is longer than 'max_allowed_packet' bytes"
                    .into(),
            });
            return;
        }
        self.long_data
            .entry(index)
            .or_default()
            .extend_from_slice(data);
    }

    /// Drops the long data sent so far; the next execute gets `error`.
    pub fn refuse_long_data(&mut self, error: MysqlError) {
        self.long_data.clear();
        self.pending_error = Some(error);
    }

    /// Bytes of long data held, all parameters together.
    pub fn long_data_len(&self) -> usize {
        self.long_data.values().map(BytesMut::len).sum()
    }

    /// Whether long data sent since the last execute was refused (the next
    /// execute reports it).
    pub fn long_data_refused(&self) -> bool {
        self.pending_error.is_some()
    }

    /// COM_STMT_RESET: forgets long data and any pending error; the types
    /// stay (a client may execute again without resending them).
    pub fn reset(&mut self) {
        self.long_data.clear();
        self.pending_error = None;
    }

    /// Parses the parameter part of a COM_STMT_EXECUTE payload (what
    /// follows stmt_id, flags and iteration_count) into one value per
    /// placeholder. Long data is consumed: the server forgets it after
    /// each execute, whatever the outcome.
    pub fn read(&mut self, rest: &Bytes) -> Result<Vec<ParamValue>, MysqlError> {
        let mut long_data = std::mem::take(&mut self.long_data);
        if let Some(error) = self.pending_error.take() {
            return Err(error);
        }
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let mut reader = Reader { buf: rest, pos: 0 };
        let count = usize::from(self.count);
        let null_bitmap = reader.take(count.div_ceil(8))?;
        if reader.u8()? != 0 {
            self.types = read_types(&mut reader, count)?;
        } else if self.types.len() != count {
            return Err(wrong_arguments());
        }
        let mut values = Vec::with_capacity(count);
        for (i, ty) in self.types.iter().enumerate() {
            let long = u16::try_from(i).ok().and_then(|i| long_data.remove(&i));
            values.push(match long {
                Some(data) => ParamValue::string(ty.column_type, data.freeze()),
                None if null_bitmap[i / 8] & (1 << (i % 8)) != 0 => ParamValue::Null,
                None => read_value(&mut reader, *ty)?,
            });
        }
        if reader.pos != rest.len() {
            // More values than the statement has placeholders.
            return Err(wrong_arguments());
        }
        Ok(values)
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

/// One parameter value in the binary protocol.
fn read_value(reader: &mut Reader<'_>, ty: ParamType) -> Result<ParamValue, MysqlError> {
    use ColumnType::*;
    let unsigned = ty.unsigned;
    Ok(match ty.column_type {
        MYSQL_TYPE_NULL => ParamValue::Null,
        MYSQL_TYPE_TINY => integer(
            unsigned,
            reader.take_array::<1>()?,
            |b| i8::from_le_bytes(b).into(),
            |b| b[0].into(),
        ),
        MYSQL_TYPE_SHORT | MYSQL_TYPE_YEAR => integer(
            unsigned,
            reader.take_array::<2>()?,
            |b| i16::from_le_bytes(b).into(),
            |b| u16::from_le_bytes(b).into(),
        ),
        MYSQL_TYPE_LONG | MYSQL_TYPE_INT24 => integer(
            unsigned,
            reader.take_array::<4>()?,
            |b| i32::from_le_bytes(b).into(),
            |b| u32::from_le_bytes(b).into(),
        ),
        MYSQL_TYPE_LONGLONG => integer(
            unsigned,
            reader.take_array::<8>()?,
            i64::from_le_bytes,
            u64::from_le_bytes,
        ),
        MYSQL_TYPE_FLOAT => ParamValue::Float(f32::from_le_bytes(reader.take_array()?)),
        MYSQL_TYPE_DOUBLE => ParamValue::Double(f64::from_le_bytes(reader.take_array()?)),
        MYSQL_TYPE_DECIMAL | MYSQL_TYPE_NEWDECIMAL => ParamValue::Decimal(reader.lenenc_bytes()?),
        MYSQL_TYPE_DATE => ParamValue::Date(DateTime::from_binary(reader.counted()?)),
        MYSQL_TYPE_DATETIME | MYSQL_TYPE_TIMESTAMP => {
            ParamValue::DateTime(DateTime::from_binary(reader.counted()?))
        }
        MYSQL_TYPE_TIME => ParamValue::Time(param_time(reader.counted()?)),
        MYSQL_TYPE_BIT => ParamValue::Bit(reader.lenenc_bytes()?),
        column_type => ParamValue::string(column_type, reader.lenenc_bytes()?),
    })
}

fn integer<const N: usize>(
    unsigned: bool,
    bytes: [u8; N],
    signed_value: impl Fn([u8; N]) -> i64,
    unsigned_value: impl Fn([u8; N]) -> u64,
) -> ParamValue {
    if unsigned {
        ParamValue::Unsigned(unsigned_value(bytes))
    } else {
        ParamValue::Signed(signed_value(bytes))
    }
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
        let rest = self.buf.get(self.pos..).ok_or_else(malformed)?;
        let mut length = LenencReader::new(rest);
        // 0xfb (NULL) and 0xff are not lengths.
        let len = length.lenenc_int().ok_or_else(malformed)?;
        self.pos += rest.len() - length.remaining();
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
pub fn wrong_arguments() -> MysqlError {
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
