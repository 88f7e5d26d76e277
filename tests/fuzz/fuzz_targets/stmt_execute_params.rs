//! `COM_STMT_EXECUTE` parameters (NULL bitmap, types, values) and
//! `COM_STMT_SEND_LONG_DATA`, as a client may send them for a statement
//! with any number of placeholders.
//!
//! Input: 2 bytes placeholder count (low 10 bits), 1 byte number of long
//! data chunks (low 3 bits), each chunk as param id (2 bytes), length
//! (1 byte) and data; the rest is the COM_STMT_EXECUTE payload after the
//! command byte.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use myquic::mysql::command::{Command, parse};
use myquic::mysql::params::StatementParams;
use myquic::translate::bind::substitute;
use myquic::translate::params::bind_variables;
use myquic::translate::sql_text::Dialect;
use myquic::translate::statement::is_multi_statement;

fuzz_target!(|data: &[u8]| {
    let Some((head, mut rest)) = data.split_first_chunk::<3>() else {
        return;
    };
    let count = u16::from_le_bytes([head[0], head[1]]) & 0x3ff;
    let mut params = StatementParams::new(count);
    for _ in 0..head[2] & 7 {
        let Some((chunk, after)) = rest.split_first_chunk::<3>() else {
            return;
        };
        let len = usize::from(chunk[2]).min(after.len());
        let id = u16::from_le_bytes([chunk[0], chunk[1]]);
        // A small limit, so that the over-the-limit path is reached.
        params.send_long_data(id, &after[..len], 300);
        rest = &after[len..];
    }
    let mut payload = vec![0x17];
    payload.extend_from_slice(rest);
    let Ok(Command::StmtExecute { params: values, .. }) = parse(Bytes::from(payload)) else {
        return;
    };
    // Twice: a second execute may leave the types out and reuse the first's.
    for _ in 0..2 {
        if let Ok(values) = params.read(&values) {
            assert_eq!(
                values.len(),
                usize::from(count),
                "one value per placeholder"
            );
            let Ok(vars) = bind_variables(values, params.types()) else {
                continue;
            };
            // On to the gateway: whatever the values, each stays in its
            // place and the statement stays one statement.
            let mut sql = b"SELECT 0".to_vec();
            (0..count).for_each(|_| sql.extend_from_slice(b", ?"));
            let dialect = Dialect::default();
            if let Ok(text) = substitute(&sql, &vars, &dialect, "utf8mb4") {
                assert!(
                    !is_multi_statement(&text, &dialect),
                    "{:?}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }
});
