//! The status flags of every packet of a multi-statement's answer, byte
//! for byte against MariaDB: in particular `SERVER_MORE_RESULTS_EXISTS`
//! on the EOF after a result set's column definitions (classic clients,
//! without `CLIENT_DEPRECATE_EOF`), which the server sets before the
//! rows while a later statement remains, and throughout a procedure
//! call. Statements of every shape: sets and OKs in any order, a `CALL`
//! first, in the middle and last, a single `CALL`, a failing statement,
//! a prepared `EXECUTE` (first and last), a trailing `;` and whitespace;
//! with and without `CLIENT_DEPRECATE_EOF`. Before the sidecar counted
//! results to statements, the first set's column EOF of every
//! multi-statement lacked the flag.

mod common;

use common::raw_packets::{DEPRECATE_EOF, RawClient};
use common::sidecar::Chain;
use common::wire::shown;

const MULTI_STATEMENTS: u32 = 0x1_0000;

const SETUP: &[&str] = &[
    "DROP TABLE IF EXISTS mr",
    "CREATE TABLE mr (id INT PRIMARY KEY, v VARCHAR(10))",
    "INSERT INTO mr VALUES (1, 'a'), (2, 'b')",
    "DROP PROCEDURE IF EXISTS two_sets",
    "CREATE PROCEDURE two_sets() BEGIN SELECT v FROM mr ORDER BY id; SELECT 'x' AS x; END",
    "DROP PROCEDURE IF EXISTS no_set",
    "CREATE PROCEDURE no_set() BEGIN DO 1; END",
];

const QUERIES: &[&str] = &[
    "SELECT 1 AS a; SELECT 2 AS b",
    "SELECT id FROM mr ORDER BY id; UPDATE mr SET v = v WHERE id = 1; SELECT v FROM mr ORDER BY id",
    "DO 1; SELECT 1 AS a",
    "SELECT 1 AS a; DO 1",
    "SELECT 1 AS a; SELECT 2 AS b;",
    "SELECT 1 AS a; SELECT 2 AS b; ",
    "CALL two_sets()",
    "CALL two_sets(); SELECT 3 AS c",
    "SELECT 3 AS c; CALL two_sets()",
    "SELECT 3 AS c; CALL two_sets(); SELECT 4 AS d",
    "SELECT 3 AS c; CALL no_set(); SELECT 4 AS d",
    "SELECT 1 AS a; SELECT nope FROM mr; SELECT 2 AS b",
    "PREPARE s FROM 'SELECT 5 AS e'; EXECUTE s; SELECT 6 AS f",
    "SELECT 7 AS g; EXECUTE s",
];

/// Every packet of every answer, readable, with the two index bits
/// cleared in the EOF after a set's column definitions (README, Known
/// limits: `SERVER_QUERY_NO_INDEX_USED` / `…_NO_GOOD_INDEX_USED` are set
/// there as the server plans a statement, before its rows, and that EOF
/// never reaches the gateway's driver). The EOFs and OKs that end each
/// result are compared whole.
async fn answers(client: &mut RawClient, deprecate_eof: bool) -> Vec<String> {
    let mut seen = Vec::new();
    for sql in QUERIES {
        seen.push(format!("QUERY {sql}"));
        let mut after_definition = false;
        for mut p in client.query(sql).await {
            if after_definition && !deprecate_eof && p[0] == 0xfe && p.len() == 5 {
                p[3] &= !0x30;
            }
            after_definition = p.starts_with(b"\x03def");
            seen.push(shown(&p));
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_results_flags_are_the_servers() {
    let chain = Chain::start().await;
    chain.setup(SETUP).await;
    let mut differences = Vec::new();
    for caps in [MULTI_STATEMENTS, MULTI_STATEMENTS | DEPRECATE_EOF] {
        let (mut direct, mut via) = chain.raw_clients(caps).await;
        let deprecate_eof = caps & DEPRECATE_EOF != 0;
        let want = answers(&mut direct, deprecate_eof).await;
        let got = answers(&mut via, deprecate_eof).await;
        if got != want {
            let first = got.iter().zip(&want).position(|(g, w)| g != w);
            differences.push(format!(
                "caps {caps:#x}: first difference at {first:?}\nthrough the sidecar:\n{got:#?}\ndirectly:\n{want:#?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}
