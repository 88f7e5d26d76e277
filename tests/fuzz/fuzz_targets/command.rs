//! Command parsing: any payload a logged-in client sends is a command or a
//! refusal; `KILL` spotting reads any text.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use myquic::mysql::command::{Command, parse, parse_kill};

fuzz_target!(|data: &[u8]| {
    if let Ok(Command::Query(sql)) = parse(Bytes::copy_from_slice(data)) {
        let _ = parse_kill(&String::from_utf8_lossy(&sql));
    }
});
