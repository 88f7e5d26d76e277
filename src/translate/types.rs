//! MySQL column types → Vitess `Type` (Vitess `go/sqltypes/type.go`
//! `mysqlToType` + `modifyType`; psdb-protocol.md §3).

use crate::api::pb::Type;

/// MySQL column flag bits that change the Vitess type.
const UNSIGNED_FLAG: u16 = 32;
const BINARY_FLAG: u16 = 128;
const ENUM_FLAG: u16 = 256;
const SET_FLAG: u16 = 2048;

/// The `binary` collation id: a column with it holds bytes, not text.
pub const BINARY_CHARSET: u16 = 63;

/// Maps a MySQL protocol column type and its flags to the Vitess type.
pub fn vitess_type(mysql_type: u8, flags: u16) -> Type {
    let unsigned = flags & UNSIGNED_FLAG != 0;
    let binary = flags & BINARY_FLAG != 0;
    let pick = |signed, unsigned_ty| if unsigned { unsigned_ty } else { signed };
    match mysql_type {
        0 | 246 => Type::Decimal,
        1 => pick(Type::Int8, Type::Uint8),
        2 => pick(Type::Int16, Type::Uint16),
        3 => pick(Type::Int32, Type::Uint32),
        4 => Type::Float32,
        5 => Type::Float64,
        6 => Type::NullType,
        7 | 17 => Type::Timestamp,
        8 => pick(Type::Int64, Type::Uint64),
        9 => pick(Type::Int24, Type::Uint24),
        10 => Type::Date,
        11 | 19 => Type::Time,
        12 | 18 => Type::Datetime,
        13 => Type::Year,
        16 => Type::Bit,
        242 => Type::Vector,
        245 => Type::Json,
        247 => Type::Enum,
        248 => Type::Set,
        249..=252 => {
            if binary {
                Type::Blob
            } else {
                Type::Text
            }
        }
        15 | 253 => {
            if binary {
                Type::Varbinary
            } else {
                Type::Varchar
            }
        }
        254 => {
            if flags & ENUM_FLAG != 0 {
                Type::Enum
            } else if flags & SET_FLAG != 0 {
                Type::Set
            } else if binary {
                Type::Binary
            } else {
                Type::Char
            }
        }
        255 => Type::Geometry,
        _ => Type::Varbinary,
    }
}

/// Whether values of this type are written as numbers in SQL (unquoted).
pub fn is_numeric(ty: Type) -> bool {
    let v = ty as i32;
    // ISINTEGRAL | ISFLOAT, or DECIMAL (ordinal only).
    v & (256 | 1024) != 0 || ty == Type::Decimal
}

/// Whether values of this type are raw bytes (written as hex literals).
pub fn is_binary(ty: Type) -> bool {
    (ty as i32) & 8192 != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_matches_vitess() {
        assert_eq!(vitess_type(8, 0), Type::Int64);
        assert_eq!(vitess_type(8, UNSIGNED_FLAG), Type::Uint64);
        assert_eq!(vitess_type(252, BINARY_FLAG | 16), Type::Blob);
        assert_eq!(vitess_type(252, 16), Type::Text);
        assert_eq!(vitess_type(253, BINARY_FLAG), Type::Varbinary);
        assert_eq!(vitess_type(254, ENUM_FLAG), Type::Enum);
        assert_eq!(vitess_type(254, SET_FLAG), Type::Set);
        assert_eq!(vitess_type(254, BINARY_FLAG), Type::Binary);
        assert_eq!(vitess_type(246, 0), Type::Decimal);
        assert_eq!(vitess_type(13, UNSIGNED_FLAG), Type::Year);
        assert!(is_numeric(Type::Uint64) && is_numeric(Type::Decimal) && is_numeric(Type::Float64));
        assert!(!is_numeric(Type::Varchar) && !is_numeric(Type::Datetime));
        assert!(is_binary(Type::Blob) && !is_binary(Type::Text));
    }
}
