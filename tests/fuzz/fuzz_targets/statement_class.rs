//! Statement classification and the SQL lexer under it, as both roles run
//! them on a client's text: every character set and quoting rule. (A byte
//! slice through a multibyte comment once panicked here: issue 11.)
//!
//! Input: 1 byte of settings (character set, `NO_BACKSLASH_ESCAPES`,
//! `ANSI_QUOTES`), then the SQL text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myquic::translate::sql_text::{Charset, Dialect, is_executable_comment};
use myquic::translate::statement::{
    has_one_result, is_load_local, is_multi_statement, keeps_session_state, leading_keyword,
    may_change_schema, second_statement, set_names,
};

const CHARSETS: [Charset; 5] = [
    Charset::AsciiSafe,
    Charset::Big5,
    Charset::Gbk,
    Charset::Gb18030,
    Charset::Sjis,
];

fuzz_target!(|data: &[u8]| {
    let Some((&settings, sql)) = data.split_first() else {
        return;
    };
    let dialect = Dialect {
        charset: CHARSETS[usize::from(settings & 7) % CHARSETS.len()],
        backslash_escapes: settings & 8 == 0,
        ansi_quotes: settings & 16 != 0,
    };
    let _ = keeps_session_state(sql, &dialect);
    let _ = has_one_result(sql, &dialect);
    let _ = may_change_schema(sql, &dialect);
    let _ = is_load_local(sql);
    let _ = is_executable_comment(sql);
    if let Some(keyword) = leading_keyword(sql) {
        assert!(keyword.len() <= sql.len());
    }
    if let Some(at) = second_statement(sql, &dialect) {
        assert!(
            at > 0 && at <= sql.len(),
            "a second statement at {at} of {}",
            sql.len()
        );
        assert!(is_multi_statement(sql, &dialect));
    }
    // The lexer always moves on, and never past the end.
    let mut i = 0;
    while i < sql.len() {
        let next = dialect.next(sql, i);
        assert!(
            next > i && next <= sql.len(),
            "the lexer stuck or overran at {i}"
        );
        i = next;
    }
    if let Some((&[a, b], _)) = sql.split_first_chunk::<2>() {
        let _ = set_names(u16::from_le_bytes([a, b]));
    }
});
