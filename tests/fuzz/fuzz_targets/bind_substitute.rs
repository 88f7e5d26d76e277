//! Bind-variable substitution as the gateway runs it on a client's SQL and
//! values: every value of every type, in every client character set and
//! `sql_mode` quoting rule. A value must never escape its position: a
//! single statement stays a single statement.
//!
//! Input: 1 byte of settings (character set, `NO_BACKSLASH_ESCAPES`,
//! `ANSI_QUOTES`), 1 byte number of variables (low 3 bits), each as type
//! index, length and value; the rest is the SQL text.
#![no_main]

use std::collections::HashMap;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use myquic::api::pb::{BindVariable, Type, Value};
use myquic::translate::bind::{count_placeholders, substitute};
use myquic::translate::sql_text::{Charset, Dialect};
use myquic::translate::statement::is_multi_statement;

const CHARSETS: [&str; 8] = [
    "utf8mb4", "gbk", "big5", "sjis", "gb18030", "latin1", "binary", "cp932",
];
const NAMES: [&str; 8] = ["v1", "v2", "v3", "a", "b", "v4", "long_name", "v5"];
const TYPES: [Type; 24] = [
    Type::NullType,
    Type::Int8,
    Type::Uint32,
    Type::Int64,
    Type::Uint64,
    Type::Float32,
    Type::Float64,
    Type::Decimal,
    Type::Timestamp,
    Type::Date,
    Type::Time,
    Type::Datetime,
    Type::Year,
    Type::Text,
    Type::Blob,
    Type::Varchar,
    Type::Varbinary,
    Type::Bit,
    Type::Json,
    Type::Hexnum,
    Type::Hexval,
    Type::Bitnum,
    Type::Tuple,
    Type::Expression,
];

fuzz_target!(|data: &[u8]| {
    let Some((&[settings, count], mut rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let charset = CHARSETS[usize::from(settings & 7)];
    let dialect = Dialect {
        charset: Charset::from_name(charset),
        backslash_escapes: settings & 8 == 0,
        ansi_quotes: settings & 16 != 0,
    };
    let mut vars = HashMap::new();
    for name in NAMES.iter().take(usize::from(count & 7)) {
        let Some((&[ty, len], after)) = rest.split_first_chunk::<2>() else {
            return;
        };
        let len = usize::from(len).min(after.len());
        let (value, after) = after.split_at(len);
        rest = after;
        let ty = TYPES[usize::from(ty) % TYPES.len()];
        let values = if ty == Type::Tuple {
            // A tuple's members: its bytes split at commas, each text.
            value
                .split(|&b| b == b',')
                .map(|v| Value {
                    r#type: Type::Varchar as i32,
                    value: Bytes::copy_from_slice(v),
                })
                .collect()
        } else {
            Vec::new()
        };
        let var = BindVariable {
            r#type: ty as i32,
            value: Bytes::copy_from_slice(value),
            values,
        };
        vars.insert((*name).to_string(), var);
    }
    let sql = rest;
    let _ = count_placeholders(sql, &dialect);
    if let Ok(text) = substitute(sql, &vars, &dialect, charset) {
        if !is_multi_statement(sql, &dialect) {
            assert!(
                !is_multi_statement(&text, &dialect),
                "a value became a second statement: {:?}",
                String::from_utf8_lossy(&text)
            );
        }
    }
});
