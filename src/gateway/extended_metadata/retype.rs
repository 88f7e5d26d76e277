//! The client's parameter types, put back into the driver's
//! COM_STMT_EXECUTE.
//!
//! The gateway runs some of a client's prepared statements as prepared
//! statements at the backend (`gateway::binary`), and mysql_async sends
//! each value in its own type: every integer a LONGLONG, a DATE a
//! DATETIME, a TIMESTAMP a DATETIME, bytes and decimals a VAR_STRING.
//! The server types a parameter by what it is sent, so `SELECT ?` of a
//! client's TINY would answer a LONGLONG column, a DATE passed to a
//! procedure's VARCHAR parameter would read `2024-01-02 00:00:00`, and a
//! BLOB would be converted from the connection's character set. The
//! gateway says what the client sent ([`ParamType`] per parameter); the
//! relay, seeing the driver's execute of that statement, rewrites its
//! parameter block: type codes and unsigned flags as the client's, and
//! each integer narrowed to its type's width. Nothing else changes, and
//! nothing grows: the packet is never longer than the driver's.
//!
//! Pure: a payload in, a payload out (`None`: leave it as it is).

/// A parameter type as the client declared it: MySQL's type code and
/// whether the unsigned flag was set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamType {
    pub code: u8,
    pub unsigned: bool,
}

/// What the relay holds for one connection: the client's types of the
/// parameters of statement `statement`'s next execute (`None` for a
/// parameter whose driver type stays).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retype {
    pub statement: u32,
    pub types: Vec<Option<ParamType>>,
}

// MySQL: Protocol::MYSQL_TYPE_* codes the rewrite reads.
const TINY: u8 = 1;
const SHORT: u8 = 2;
const LONG: u8 = 3;
const FLOAT: u8 = 4;
const DOUBLE: u8 = 5;
const NULL: u8 = 6;
const TIMESTAMP: u8 = 7;
const LONGLONG: u8 = 8;
const INT24: u8 = 9;
const DATE: u8 = 10;
const TIME: u8 = 11;
const DATETIME: u8 = 12;
const YEAR: u8 = 13;
const VAR_STRING: u8 = 253;

const UNSIGNED_FLAG: u8 = 0x80;

/// COM_STMT_EXECUTE's command byte.
pub const COM_STMT_EXECUTE: u8 = 0x17;
/// COM_STMT_SEND_LONG_DATA's: a parameter sent so has no value in the
/// execute, which is then not rewritten.
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;

/// The statement id of a COM_STMT_EXECUTE payload.
pub fn statement_id(payload: &[u8]) -> Option<u32> {
    match payload {
        [COM_STMT_EXECUTE, a, b, c, d, ..] => Some(u32::from_le_bytes([*a, *b, *c, *d])),
        _ => None,
    }
}

impl Retype {
    /// `payload` (a whole COM_STMT_EXECUTE of this statement) with the
    /// client's types; `None` when it is not one this can rewrite exactly
    /// (another statement, types not sent, a driver type or value this
    /// does not expect, an integer that does not fit the client's width),
    /// which then goes as it is.
    // MySQL: Protocol::COM_STMT_EXECUTE — command, statement id (4),
    // flags (1), iteration count (4), then with parameters: the NULL
    // bitmap, new-params-bound (1), type and flag per parameter, values.
    pub fn execute(&self, payload: &[u8]) -> Option<Vec<u8>> {
        if statement_id(payload)? != self.statement {
            return None;
        }
        let n = self.types.len();
        let bitmap_at = 10;
        let bound_at = bitmap_at + n.div_ceil(8);
        let types_at = bound_at + 1;
        let values_at = types_at + 2 * n;
        if n == 0 || payload.get(bound_at) != Some(&1) || payload.len() < values_at {
            return None;
        }
        let bitmap = &payload[bitmap_at..bound_at];
        let mut out = payload[..values_at].to_vec();
        out.reserve(payload.len() - values_at);
        let mut at = values_at;
        let mut changed = false;
        for (i, client) in self.types.iter().enumerate() {
            let driver = payload[types_at + 2 * i];
            let null = bitmap[i / 8] & (1 << (i % 8)) != 0;
            let len = if null {
                0
            } else {
                value_len(driver, &payload[at..])?
            };
            let value = payload.get(at..at + len)?;
            at += len;
            let Some(client) = client else {
                out.extend_from_slice(value);
                continue;
            };
            let written = if null {
                &[][..]
            } else {
                retyped(driver, *client, value)?
            };
            out[types_at + 2 * i] = client.code;
            out[types_at + 2 * i + 1] = if client.unsigned { UNSIGNED_FLAG } else { 0 };
            out.extend_from_slice(written);
            changed |=
                driver != client.code || payload[types_at + 2 * i + 1] != out[types_at + 2 * i + 1];
        }
        // Trailing bytes would be something this does not know.
        (at == payload.len() && changed).then_some(out)
    }
}

/// The bytes a value of the driver's type `driver` takes at the front of
/// `rest`; `None` for a type mysql_async does not send or a value cut
/// short.
fn value_len(driver: u8, rest: &[u8]) -> Option<usize> {
    let len = match driver {
        NULL => 0,
        TINY => 1,
        SHORT | YEAR => 2,
        LONG | INT24 | FLOAT => 4,
        LONGLONG | DOUBLE => 8,
        DATE | DATETIME | TIMESTAMP | TIME => 1 + usize::from(*rest.first()?),
        VAR_STRING => {
            let (len, header) = super::wire::lenenc(rest)?;
            header.checked_add(usize::try_from(len).ok()?)?
        }
        _ => return None,
    };
    (rest.len() >= len).then_some(len)
}

/// The value `value` of the driver's type as a value of the client's:
/// a LONGLONG narrowed to TINY/SHORT/YEAR/INT24/LONG when it fits; a
/// DATETIME's bytes as a DATE (its date-only forms) or TIMESTAMP; a
/// VAR_STRING's as any string, BLOB or DECIMAL type; anything else only
/// when the type is the same.
fn retyped(driver: u8, client: ParamType, value: &[u8]) -> Option<&[u8]> {
    match (driver, client.code) {
        (LONGLONG, TINY | SHORT | YEAR | LONG | INT24) => {
            let width = match client.code {
                TINY => 1,
                SHORT | YEAR => 2,
                _ => 4,
            };
            let narrow = &value[..width];
            // Read back as the client's type reads it, the value must be
            // the same: upper bytes are the sign's (or zero if unsigned).
            let negative = !client.unsigned && narrow[width - 1] & 0x80 != 0;
            let fill = if negative { 0xff } else { 0 };
            value[width..].iter().all(|&b| b == fill).then_some(narrow)
        }
        (DATETIME, DATE) => matches!(value, [0] | [4, ..]).then_some(value),
        (DATETIME, TIMESTAMP) => Some(value),
        (VAR_STRING, 0 | 15 | 16 | 245..=255) => Some(value),
        (d, c) if d == c => Some(value),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(code: u8, unsigned: bool) -> Option<ParamType> {
        Some(ParamType { code, unsigned })
    }

    /// An execute of statement 7: the bitmap, new-params-bound, the
    /// types, then the values.
    fn execute(nulls: &[usize], types: &[(u8, u8)], values: &[u8]) -> Vec<u8> {
        let mut p = vec![COM_STMT_EXECUTE, 7, 0, 0, 0, 0, 1, 0, 0, 0];
        let mut bitmap = vec![0u8; types.len().div_ceil(8)];
        for &i in nulls {
            bitmap[i / 8] |= 1 << (i % 8);
        }
        p.extend_from_slice(&bitmap);
        p.push(1);
        for &(code, flag) in types {
            p.extend_from_slice(&[code, flag]);
        }
        p.extend_from_slice(values);
        p
    }

    #[test]
    fn integers_narrow_dates_and_strings_are_retyped() {
        let mut values = Vec::new();
        values.extend_from_slice(&(-1i64).to_le_bytes());
        values.extend_from_slice(&255u64.to_le_bytes());
        values.extend_from_slice(&(-32768i64).to_le_bytes());
        values.extend_from_slice(&(i64::from(i32::MIN)).to_le_bytes());
        values.extend_from_slice(&[4, 0xe8, 0x07, 1, 2]);
        values.extend_from_slice(&[2, 0xc3, 0xa9]);
        values.extend_from_slice(&[7, 0xe8, 0x07, 1, 2, 3, 4, 5]);
        values.extend_from_slice(&0.5f32.to_le_bytes());
        let driver = execute(
            &[8],
            &[
                (8, 0),
                (8, 0x80),
                (8, 0),
                (8, 0),
                (12, 0),
                (253, 0),
                (12, 0),
                (4, 0),
                (6, 0),
            ],
            &values,
        );
        let retype = Retype {
            statement: 7,
            types: vec![
                ty(TINY, false),
                ty(TINY, true),
                ty(SHORT, false),
                ty(LONG, false),
                ty(DATE, false),
                ty(252, false),
                ty(TIMESTAMP, false),
                ty(FLOAT, false),
                ty(LONG, false),
            ],
        };
        let mut want_values = vec![0xff, 0xff, 0x00, 0x80];
        want_values.extend_from_slice(&i32::MIN.to_le_bytes());
        want_values.extend_from_slice(&values[32..]);
        let want = execute(
            &[8],
            &[
                (1, 0),
                (1, 0x80),
                (2, 0),
                (3, 0),
                (10, 0),
                (252, 0),
                (7, 0),
                (4, 0),
                (3, 0),
            ],
            &want_values,
        );
        assert_eq!(retype.execute(&driver), Some(want));
    }

    #[test]
    fn what_it_cannot_rewrite_exactly_goes_as_it_is() {
        let one = |code, unsigned| Retype {
            statement: 7,
            types: vec![ty(code, unsigned)],
        };
        let long = |v: i64| execute(&[], &[(8, 0)], &v.to_le_bytes());
        // Does not fit the client's width.
        assert_eq!(one(TINY, false).execute(&long(128)), None);
        assert_eq!(one(TINY, true).execute(&long(-1)), None);
        assert_eq!(one(SHORT, false).execute(&long(1 << 20)), None);
        assert!(one(TINY, false).execute(&long(-128)).is_some());
        // Another statement; types not sent; a short or long packet.
        let other = Retype {
            statement: 8,
            types: vec![ty(TINY, false)],
        };
        assert_eq!(other.execute(&long(1)), None);
        let mut unbound = long(1);
        unbound[11] = 0;
        assert_eq!(one(TINY, false).execute(&unbound), None);
        let whole = long(1);
        for cut in 0..whole.len() {
            assert_eq!(one(TINY, false).execute(&whole[..cut]), None, "{cut}");
        }
        let mut longer = long(1);
        longer.push(0);
        assert_eq!(one(TINY, false).execute(&longer), None);
        // A DATETIME with a time is no DATE; a type it does not map.
        let datetime = execute(&[], &[(12, 0)], &[7, 0xe8, 0x07, 1, 2, 3, 4, 5]);
        assert_eq!(one(DATE, false).execute(&datetime), None);
        assert_eq!(one(DOUBLE, false).execute(&long(1)), None);
        // Nothing to change: left as it is.
        assert_eq!(one(LONGLONG, false).execute(&long(1)), None);
        // Not an execute at all.
        assert_eq!(one(TINY, false).execute(&[0x03, b'x']), None);
        assert_eq!(one(TINY, false).execute(&[]), None);
    }

    #[test]
    fn lengths_of_strings() {
        let mut values = vec![0xfc, 0x2c, 0x01];
        values.extend_from_slice(&[b'z'; 300]);
        let driver = execute(&[], &[(253, 0)], &values);
        let retype = Retype {
            statement: 7,
            types: vec![ty(252, false)],
        };
        let out = retype.execute(&driver).unwrap();
        assert_eq!(out.len(), driver.len());
        assert_eq!(out[12], 252);
        // A length past the end.
        let cut = execute(&[], &[(253, 0)], &[0xfc, 0x2c, 0x01, b'z']);
        assert_eq!(retype.execute(&cut), None);
        assert_eq!(retype.execute(&execute(&[], &[(253, 0)], &[0xff])), None);
    }
}
