//! MySQL column types → Vitess `Type` (Vitess `go/sqltypes/type.go`
//! `mysqlToType` + `modifyType`; psdb-protocol.md §3).

use crate::api::pb::Type;

/// MySQL column flag bits that change the Vitess type.
const UNSIGNED_FLAG: u16 = 32;
const BINARY_FLAG: u16 = 128;
const ENUM_FLAG: u16 = 256;
const SET_FLAG: u16 = 2048;

pub use crate::mysql::BINARY_CHARSET;

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

/// The inverse of [`vitess_type`]: the MySQL protocol column type code a
/// server sends for a column of Vitess type `ty`.
///
/// The sidecar only receives `Field`s, so it must rebuild the type byte
/// MariaDB/MySQL put in the column definition. The flags need not be
/// consulted: they travel unchanged in `Field.flags`, and the only types
/// that `vitess_type` derives from flags (unsigned integers, ENUM/SET,
/// BINARY/BLOB) each come from a single wire code. Codes that servers use
/// only internally (VARCHAR 15, TIMESTAMP2/DATETIME2/TIME2, the sized BLOB
/// codes, ENUM 247 and SET 248, old DECIMAL 0) come back as the code the
/// server actually sends for such a column; Vitess types that no column
/// has (expressions, tuples, hex literals) become VAR_STRING.
/// Vitess has one type for the four BLOB/TEXT wire types (TINY_BLOB,
/// MEDIUM_BLOB, LONG_BLOB, BLOB). Servers send BLOB for table columns of
/// every size but the others for expressions (MariaDB: a NULL user
/// variable is a LONG_BLOB), and clients show the type they received.
/// The gateway names the three rarer ones in `Field.column_type`, which is
/// then accurate metadata too; empty for everything else.
pub fn blob_subtype_name(mysql_type: u8, flags: u16) -> &'static str {
    let binary = flags & BINARY_FLAG != 0;
    match (mysql_type, binary) {
        (249, true) => "tinyblob",
        (249, false) => "tinytext",
        (250, true) => "mediumblob",
        (250, false) => "mediumtext",
        (251, true) => "longblob",
        (251, false) => "longtext",
        _ => "",
    }
}

/// The MySQL type of a Vitess field, [`blob_subtype_name`] included.
pub fn mysql_field_type(ty: Type, column_type: &str) -> u8 {
    match (ty, column_type) {
        (Type::Blob | Type::Text, "tinyblob" | "tinytext") => 249,
        (Type::Blob | Type::Text, "mediumblob" | "mediumtext") => 250,
        (Type::Blob | Type::Text, "longblob" | "longtext") => 251,
        _ => mysql_type(ty),
    }
}

pub fn mysql_type(ty: Type) -> u8 {
    match ty {
        Type::NullType => 6,
        Type::Int8 | Type::Uint8 => 1,
        Type::Int16 | Type::Uint16 => 2,
        Type::Int24 | Type::Uint24 => 9,
        Type::Int32 | Type::Uint32 => 3,
        Type::Int64 | Type::Uint64 => 8,
        Type::Float32 => 4,
        Type::Float64 => 5,
        Type::Timestamp => 7,
        Type::Date => 10,
        Type::Time => 11,
        Type::Datetime => 12,
        Type::Year => 13,
        Type::Decimal => 246,
        Type::Text | Type::Blob => 252,
        Type::Char | Type::Binary | Type::Enum | Type::Set => 254,
        Type::Bit => 16,
        Type::Geometry => 255,
        Type::Json => 245,
        Type::Vector => 242,
        Type::Varchar
        | Type::Varbinary
        | Type::Tuple
        | Type::Expression
        | Type::Hexnum
        | Type::Hexval
        | Type::Bitnum
        | Type::Raw
        | Type::RowTuple => 253,
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

    /// Every type code MariaDB/MySQL put in a result set's column
    /// definitions, with each flag that changes the Vitess type.
    #[test]
    fn inverse_restores_every_wire_type() {
        let wire = [
            1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 242, 245, 246, 252, 253, 254, 255,
        ];
        let flag_sets = [
            0,
            UNSIGNED_FLAG,
            BINARY_FLAG,
            UNSIGNED_FLAG | BINARY_FLAG,
            ENUM_FLAG,
            SET_FLAG,
            BINARY_FLAG | 16 | 1,
        ];
        for code in wire {
            for flags in flag_sets {
                assert_eq!(
                    mysql_type(vitess_type(code, flags)),
                    code,
                    "type {code} flags {flags}"
                );
            }
        }
    }

    #[test]
    fn internal_codes_map_to_what_servers_send() {
        for (internal, sent) in [
            (0u8, 246u8),
            (15, 253),
            (17, 7),
            (18, 12),
            (19, 11),
            (247, 254),
            (248, 254),
            (249, 252),
            (250, 252),
            (251, 252),
        ] {
            assert_eq!(mysql_type(vitess_type(internal, 0)), sent, "{internal}");
        }
        assert_eq!(mysql_type(Type::Hexval), 253);
    }

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
