//! The status flags and warning count of the packet that ends each result
//! (the EOF or OK after a set's rows, an OK result), byte for byte against
//! MariaDB: `SERVER_QUERY_NO_INDEX_USED` on a SELECT of an unindexed
//! column, alone, in a multi-statement and inside a procedure; the warning
//! count of a procedure's intermediate set (`CAST('1x' AS SIGNED)`); and
//! `SERVER_PS_OUT_PARAMS` on a prepared `CALL`'s OUT parameters but not on
//! a procedure's own set that looks like them — text and binary protocol,
//! with and without `CLIENT_DEPRECATE_EOF`. Before the gateway carried
//! each result's ending status (`QueryResult.server_status`), the sidecar
//! wrote the session's flags and a warning count of 0 into every
//! intermediate terminator, never set NO_INDEX_USED, and flagged the
//! look-alike set as OUT parameters.

mod common;

use common::Stack;
use common::raw_packets::{self, DEPRECATE_EOF, Param, RawClient};
use common::sidecar::Chain;
use common::wire::shown;

const MULTI_STATEMENTS: u32 = 0x1_0000;

const SETUP: &[&str] = &[
    "DROP TABLE IF EXISTS rf",
    "CREATE TABLE rf (id INT PRIMARY KEY, u INT)",
    "INSERT INTO rf VALUES (1, 1), (2, 2), (3, 1)",
    "DROP PROCEDURE IF EXISTS rf_sets",
    // An intermediate set with a warning, one read without an index, and
    // a last one that is neither.
    "CREATE PROCEDURE rf_sets()
     BEGIN
       SELECT CAST('1x' AS SIGNED) AS c;
       SELECT id FROM rf WHERE u = 1 ORDER BY id;
       SELECT 1 AS one;
     END",
    "DROP PROCEDURE IF EXISTS rf_out",
    "CREATE PROCEDURE rf_out(IN a INT, OUT n INT)
     BEGIN
       SELECT id FROM rf WHERE u = a ORDER BY id;
       SELECT CAST('2y' AS SIGNED) AS w;
       SET n = a + 1;
     END",
    // No OUT parameter; its last set is one row of an unaliased column of
    // a table named as the procedure, which the sidecar's guess took for
    // OUT parameters.
    "DROP TABLE IF EXISTS rf_like",
    "CREATE TABLE rf_like (x INT PRIMARY KEY)",
    "INSERT INTO rf_like VALUES (5), (6)",
    "DROP PROCEDURE IF EXISTS rf_like",
    "CREATE PROCEDURE rf_like(IN x INT) SELECT rf_like.x FROM rf_like WHERE rf_like.x = x",
];

const QUERIES: &[&str] = &[
    "SELECT id FROM rf WHERE u = 1 ORDER BY id",
    "SELECT id FROM rf WHERE id = 1",
    "SELECT CAST('1x' AS SIGNED) AS c",
    "CALL rf_sets()",
    "CALL rf_out(1, @n)",
    "SELECT CAST('1x' AS SIGNED) AS c; SELECT id FROM rf WHERE u = 1 ORDER BY id; SELECT 2 AS b",
    "UPDATE rf SET u = u WHERE u = 2; SELECT id FROM rf WHERE u = 2",
    // An OK result with a warning (a duplicate key ignored), then others.
    "INSERT IGNORE INTO rf VALUES (1, 9); DO 1; SELECT 1 AS a",
    // A set with a warning, then a statement that fails.
    "SELECT CAST('1x' AS SIGNED) AS c; SELECT nope FROM rf",
    // The session's flags as an earlier statement of the same answer left
    // them (AUTOCOMMIT, IN_TRANS), in the column EOF of a later set.
    "SET autocommit=0; SELECT 1 AS a; SET autocommit=1",
    "START TRANSACTION; SELECT id FROM rf WHERE id = 1; COMMIT; SELECT 2 AS b",
    // Autocommit off from an earlier answer. (Not here: a set whose own
    // statement starts the transaction, which the server flags IN_TRANS
    // in that set's column EOF — README, Known limits.)
    "SET autocommit=0",
    "SELECT 3 AS c; DO 1; SELECT 4 AS d",
    "SET autocommit=1",
];

const PREPARED: &[(&str, &[i32])] = &[
    ("SELECT id FROM rf WHERE u = ? ORDER BY id", &[1]),
    ("SELECT CAST('1x' AS SIGNED) AS c", &[]),
    ("CALL rf_sets()", &[]),
    ("CALL rf_out(?, ?)", &[1]),
    ("CALL rf_like(?)", &[5]),
];

/// Every packet of the answers to `queries` and to `prepared`, each
/// packet through `mask`.
async fn answers_to(
    client: &mut RawClient,
    queries: &[&str],
    prepared: &[(&str, &[i32])],
    mask: fn(Vec<Vec<u8>>) -> Vec<String>,
) -> Vec<String> {
    let mut seen = Vec::new();
    for sql in queries {
        seen.push(format!("QUERY {sql}"));
        seen.extend(mask(client.query(sql).await));
    }
    for (sql, ints) in prepared {
        seen.push(format!("EXECUTE {sql}"));
        let (id, params, _) = client.prepare(sql).await;
        let mut values: Vec<Param> = ints.iter().map(|&v| Param::long(v)).collect();
        values.resize_with(usize::from(params), Param::null);
        seen.extend(mask(client.execute(id, &values).await));
        client.close(id).await;
    }
    seen
}

/// Every packet of every answer, text and binary protocol, with the
/// index flags of the EOF after a set's column definitions (clients
/// without `CLIENT_DEPRECATE_EOF`) cleared: the server sets them there as
/// it plans the statement, before the rows, and never sends that EOF to
/// the gateway's driver (README, Known limits).
async fn answers(client: &mut RawClient) -> Vec<String> {
    answers_to(client, QUERIES, PREPARED, masked).await
}

fn masked(mut packets: Vec<Vec<u8>>) -> Vec<String> {
    for i in 1..packets.len() {
        let after_definition = packets[i - 1].starts_with(b"\x03def");
        let p = &mut packets[i];
        if after_definition && p.len() == 5 && p[0] == 0xfe {
            p[3] &= !0x30;
        }
    }
    packets.iter().map(|p| shown(p)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_results_ending_status_and_warnings_are_the_servers() {
    let chain = Chain::start().await;
    chain.setup(SETUP).await;
    let mut differences = Vec::new();
    let mut flags_seen = 0u16;
    for caps in [MULTI_STATEMENTS, MULTI_STATEMENTS | DEPRECATE_EOF] {
        let (mut direct, mut via) = chain.raw_clients(caps).await;
        let want = answers(&mut direct).await;
        let got = answers(&mut via).await;
        flags_seen |= want.iter().map(|p| end_status(p)).fold(0, |a, b| a | b);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            if g != w {
                differences.push(format!(
                    "caps {caps:#x}, packet {i} (after {:?}):\n  sidecar {g}\n  direct  {w}",
                    want[..i]
                        .iter()
                        .rev()
                        .find(|p| p.starts_with("QUERY") || p.starts_with("EXECUTE"))
                ));
            }
        }
        if got.len() != want.len() {
            differences.push(format!(
                "caps {caps:#x}: {} packets through the sidecar, {} directly:\n{got:#?}\n{want:#?}",
                got.len(),
                want.len()
            ));
        }
    }
    // The server did set what is compared, so the test can fail.
    assert_eq!(flags_seen & 0x20, 0x20, "MariaDB sets NO_INDEX_USED");
    assert_eq!(flags_seen & 0x1000, 0x1000, "MariaDB sets PS_OUT_PARAMS");
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// [`masked`], and the index flags cleared in every terminator and OK
/// too (a binary row that looks like an OK is changed alike both ways).
fn all_index_flags_masked(mut packets: Vec<Vec<u8>>) -> Vec<String> {
    for p in &mut packets {
        let at = match p[0] {
            0xfe if p.len() == 5 => Some(3),
            0x00 | 0xfe if p.len() < 0xff_ffff => {
                let size = |b: Option<&u8>| match b {
                    Some(0xfc) => Some(3),
                    Some(0xfd) => Some(4),
                    Some(0xfe) => Some(9),
                    Some(_) => Some(1),
                    None => None,
                };
                size(p.get(1)).and_then(|a| size(p.get(1 + a)).map(|b| 1 + a + b))
            }
            _ => None,
        };
        if let Some(at) = at.filter(|&at| at + 1 < p.len()) {
            p[at] &= !0x30;
        }
    }
    masked(packets)
}

/// Where the gateway's relay does not follow the backend connection
/// (`relay_extended_metadata = false`, as over TLS) no status flags
/// cross: the index flags are not set, but the warning counts are the
/// server's (the driver's; not of a set an error follows), and a prepared
/// CALL's OUT parameters are still
/// flagged, by what MariaDB writes in them (the look-alike `rf_like` would
/// be too: a known limit, left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_relay_warnings_and_out_parameters_are_still_the_servers() {
    let stack = Stack::start_with(|c| c.backend.relay_extended_metadata = false).await;
    let chain = Chain::start_on(stack).await;
    chain.setup(SETUP).await;
    // The driver does not show the warning count of a set an error
    // follows, and an intermediate result's own session flags
    // (autocommit, a transaction) do not cross (known limits without the
    // relay).
    let queries: Vec<_> = QUERIES
        .iter()
        .copied()
        .filter(|sql| !sql.contains("nope") && !sql.contains("autocommit"))
        .filter(|sql| !sql.starts_with("START TRANSACTION") && !sql.starts_with("SELECT 3"))
        .collect();
    let prepared: Vec<_> = PREPARED
        .iter()
        .copied()
        .filter(|(sql, _)| !sql.contains("rf_like"))
        .collect();
    for caps in [MULTI_STATEMENTS, MULTI_STATEMENTS | DEPRECATE_EOF] {
        let (mut direct, mut via) = chain.raw_clients(caps).await;
        let want = answers_to(&mut direct, &queries, &prepared, all_index_flags_masked).await;
        let got = answers_to(&mut via, &queries, &prepared, all_index_flags_masked).await;
        assert_eq!(got, want, "caps {caps:#x}");
    }
}

/// The status flags of a shown EOF or OK, else 0.
fn end_status(shown: &str) -> u16 {
    let Some(end) = shown.strip_prefix('[').and_then(|s| s.find(']')) else {
        return 0;
    };
    let list = &shown[1..1 + end];
    let bytes: Vec<u8> = list
        .split(", ")
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    match bytes[0] {
        0xfe if bytes.len() == 5 => u16::from_le_bytes([bytes[3], bytes[4]]),
        0xfe if bytes.len() < 9 => raw_packets::ok_status(&bytes),
        _ => 0,
    }
}
