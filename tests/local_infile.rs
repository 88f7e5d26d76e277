//! `LOAD DATA LOCAL INFILE` through sidecar → gateway → MariaDB, against
//! the same statements on a direct connection to the same server: every
//! packet of each answer with its sequence id (the server's 0xFB ask and
//! its name byte for byte, then the statement's OK or ERR), and what the
//! table holds afterwards.
//!
//! - `every_byte_value_loads_as_directly_h3` / `_h2`: a 5 MiB file with
//!   every byte value in a BLOB column, sent in packets of several sizes
//!   (one over the sidecar's 1 MiB part), under a name that is not ASCII.
//!   `_unrelayed`: the same without the gateway's relay.
//! - `a_duplicate_key_mid_file_answers_as_directly`: the OK's figures and
//!   info, and its warnings.
//! - `a_statement_that_fails_first_never_asks`: unknown table, syntax
//!   error: the error, and the client is never asked.
//! - `a_client_without_local_files_gets_the_servers_refusal`.
//! - `off_answers_as_a_server_with_local_infile_off`: `sidecar.local_infile
//!   = false` (the default) against the server's own `local_infile = 0`.
//! - `a_packet_out_of_sequence_mid_file_loads_nothing`: the server's 1156.
//! - `the_mariadb_client_loads_as_directly`: its whole output, with
//!   `--local-infile=1` (also a file it cannot open) and `=0`.
//! - `a_load_in_a_multi_statement`: first, as directly; behind another
//!   statement's result, an empty file and the connection goes on.
//! - `a_client_gone_mid_file_loads_nothing`: the client hangs up with part
//!   of its file sent: nothing of it is loaded (directly, the server
//!   aborts the statement), and other sessions and new ones go on.

mod common;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use mysql_async::prelude::*;

use common::sidecar::Chain;
use myquic::config::TransportPreference;

/// CLIENT_LOCAL_FILES.
const LOCAL_FILES: u32 = 0x80;

async fn chain(transport: TransportPreference, local_infile: bool) -> Chain {
    Chain::start_with(|c| {
        c.upstream.transport = transport;
        c.local_infile = local_infile;
    })
    .await
}

/// The rows of `SELECT`, read directly (every packet).
async fn table(chain: &Chain, sql: &str) -> Vec<Vec<u8>> {
    let (mut direct, _) = chain.raw_clients(0).await;
    direct.query(sql).await
}

/// `blob` escaped for LOAD DATA's defaults (fields by tab, lines by
/// newline, escaped by backslash).
fn escaped(blob: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(blob.len() + blob.len() / 64);
    for &b in blob {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0 => out.extend_from_slice(b"\\0"),
            b => out.push(b),
        }
    }
    out
}

/// 40 rows of 128 KiB, every byte value in each (a simple generator:
/// the same bytes each run).
fn every_byte_file() -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut state = 0x2545_f491_u32;
    let mut blobs = Vec::new();
    let mut file = Vec::new();
    for id in 0..40u32 {
        let mut blob: Vec<u8> = (0..=255u8).collect();
        while blob.len() < 128 << 10 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            blob.push(state as u8);
        }
        file.extend_from_slice(format!("{id}\t").as_bytes());
        file.extend_from_slice(&escaped(&blob));
        file.push(b'\n');
        blobs.push(blob);
    }
    (blobs, file)
}

/// The file in packets of several sizes: small, 64 KiB, and one of 2 MiB
/// (over the sidecar's part).
fn packets(file: &[u8]) -> Vec<&[u8]> {
    let sizes = [1usize, 100, 65536, 2 << 20, 4096, 65536];
    let mut out = Vec::new();
    let mut at = 0;
    let mut i = 0;
    while at < file.len() {
        let n = sizes[i % sizes.len()].min(file.len() - at);
        out.push(&file[at..at + n]);
        at += n;
        i += 1;
    }
    out
}

async fn every_byte_value(transport: TransportPreference) {
    every_byte_value_on(chain(transport, true).await).await;
}

async fn every_byte_value_on(chain: Chain) {
    chain
        .setup(&["CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)"])
        .await;
    let (blobs, file) = every_byte_file();
    assert!(file.len() > 5 << 20, "{}", file.len());
    let parts = packets(&file);
    let sql: &[u8] = b"LOAD DATA LOCAL INFILE '/nowhere/f\xc3\xa9 \xff.tsv' INTO TABLE blobs";
    let (mut direct, mut via) = chain.raw_clients(LOCAL_FILES).await;
    let answered_directly = direct.load_local(sql, &parts).await;
    let rows_directly = table(&chain, "SELECT id, b FROM blobs ORDER BY id").await;
    chain.setup(&["TRUNCATE blobs"]).await;
    let answered_via = via.load_local(sql, &parts).await;
    let rows_via = table(&chain, "SELECT id, b FROM blobs ORDER BY id").await;
    assert_eq!(answered_directly[0].1[0], 0xfb, "{answered_directly:?}");
    assert_eq!(&answered_directly[0].1[1..], b"/nowhere/f\xc3\xa9 \xff.tsv");
    assert_eq!(answered_via, answered_directly);
    assert!(rows_via == rows_directly, "the rows differ");
    // And they are the file's.
    let mut direct = chain.direct().await;
    let loaded: Vec<(u32, Vec<u8>)> = direct
        .query("SELECT id, b FROM blobs ORDER BY id")
        .await
        .unwrap();
    assert_eq!(loaded.len(), blobs.len());
    for ((id, b), blob) in loaded.iter().zip(&blobs) {
        assert!(b == blob, "row {id} differs from the file");
    }
    // The connection goes on.
    assert_eq!(via.query("SELECT 1").await, direct_select_1(&chain).await);
}

async fn direct_select_1(chain: &Chain) -> Vec<Vec<u8>> {
    table(chain, "SELECT 1").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_value_loads_as_directly_h3() {
    every_byte_value(TransportPreference::Http3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_value_loads_as_directly_h2() {
    every_byte_value(TransportPreference::Http2).await;
}

/// Without the gateway's relay (as over TLS, or to a remote backend): the
/// driver reads the server itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_byte_value_loads_as_directly_unrelayed() {
    let stack = common::Stack::start_with(|c| c.backend.relay_extended_metadata = false).await;
    let chain = Chain::launch_on(stack, |c| c.local_infile = true).await;
    // The version the sidecar greets with, learned at start.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !chain.sidecar.server_version().contains("MariaDB") {
        assert!(Instant::now() < deadline, "the sidecar learns the version");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    every_byte_value_on(chain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_key_mid_file_answers_as_directly() {
    let chain = chain(TransportPreference::Auto, true).await;
    chain
        .setup(&["CREATE TABLE keyed (id INT PRIMARY KEY, v VARCHAR(20))"])
        .await;
    let mut file = Vec::new();
    for id in 1..=2000 {
        // Line 1500 repeats key 1000 (LOCAL: skipped with a warning).
        let id = if id == 1500 { 1000 } else { id };
        file.extend_from_slice(format!("{id}\tv{id}\n").as_bytes());
    }
    // A value too long for its column: a second warning.
    file.extend_from_slice(b"3000\tabcdefghijklmnopqrstuvwxyz\n");
    let parts = packets(&file);
    let sql = b"LOAD DATA LOCAL INFILE 'keys.tsv' INTO TABLE keyed";
    let (mut direct, mut via) = chain.raw_clients(LOCAL_FILES).await;
    let answered_directly = direct.load_local(sql, &parts).await;
    let warnings_directly = direct.query("SHOW WARNINGS").await;
    let rows_directly = table(&chain, "SELECT * FROM keyed ORDER BY id").await;
    chain.setup(&["TRUNCATE keyed"]).await;
    let answered_via = via.load_local(sql, &parts).await;
    let warnings_via = via.query("SHOW WARNINGS").await;
    let rows_via = table(&chain, "SELECT * FROM keyed ORDER BY id").await;
    assert_eq!(answered_directly.len(), 2, "{answered_directly:?}");
    assert_eq!(answered_directly[1].1[0], 0, "an OK: {answered_directly:?}");
    assert_eq!(answered_via, answered_directly);
    assert_eq!(warnings_via, warnings_directly);
    assert!(rows_via == rows_directly, "the rows differ");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_that_fails_first_never_asks() {
    let chain = chain(TransportPreference::Auto, true).await;
    let (mut direct, mut via) = chain.raw_clients(LOCAL_FILES).await;
    for sql in [
        &b"LOAD DATA LOCAL INFILE 'x.tsv' INTO TABLE nope"[..],
        b"LOAD DATA LOCAL INFILE 'x.tsv' INTO TABLE",
    ] {
        let answered_directly = direct.load_local(sql, &[b"1\n"]).await;
        let answered_via = via.load_local(sql, &[b"1\n"]).await;
        assert_eq!(
            answered_directly.len(),
            1,
            "never asked: {answered_directly:?}"
        );
        assert_eq!(answered_directly[0].1[0], 0xff);
        assert_eq!(answered_via, answered_directly);
    }
    assert_eq!(via.query("SELECT 1").await, direct.query("SELECT 1").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_without_local_files_gets_the_servers_refusal() {
    let chain = chain(TransportPreference::Auto, true).await;
    chain.setup(&["CREATE TABLE t (a INT)"]).await;
    let (mut direct, mut via) = chain.raw_clients(0).await;
    let sql = b"LOAD DATA LOCAL INFILE 'x.tsv' INTO TABLE t";
    let answered_directly = direct.load_local(sql, &[b"1\n"]).await;
    let answered_via = via.load_local(sql, &[b"1\n"]).await;
    assert_eq!(answered_directly.len(), 1, "{answered_directly:?}");
    assert_eq!(&answered_directly[0].1[..3], b"\xff\x46\x10", "4166");
    assert_eq!(answered_via, answered_directly);
    // In the diagnostics area as directly.
    for sql in ["SHOW WARNINGS", "SELECT @@error_count"] {
        assert_eq!(via.query(sql).await, direct.query(sql).await, "{sql}");
    }
    assert_eq!(via.query("SELECT 1").await, direct.query("SELECT 1").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_answers_as_a_server_with_local_infile_off() {
    let chain = chain(TransportPreference::Auto, false).await;
    chain.setup(&["CREATE TABLE t (a INT)"]).await;
    root(&chain, "SET GLOBAL local_infile = 0").await;
    let (mut direct, mut via) = chain.raw_clients(LOCAL_FILES).await;
    let sql = b"LOAD DATA LOCAL INFILE 'x.tsv' INTO TABLE t";
    let answered_directly = direct.load_local(sql, &[b"1\n"]).await;
    let answered_via = via.load_local(sql, &[b"1\n"]).await;
    root(&chain, "SET GLOBAL local_infile = 1").await;
    assert_eq!(&answered_directly[0].1[..3], b"\xff\x46\x10", "4166");
    assert_eq!(answered_via, answered_directly);
    // In the diagnostics area as directly.
    for sql in ["SHOW WARNINGS", "SELECT @@error_count"] {
        assert_eq!(via.query(sql).await, direct.query(sql).await, "{sql}");
    }
    assert_eq!(via.query("SELECT 1").await, direct.query("SELECT 1").await);
    assert_eq!(count(&chain, "t").await, 0);
}

async fn root(chain: &Chain, sql: &str) {
    let mut root = mysql_async::Conn::new(chain.stack.db.root_opts())
        .await
        .unwrap();
    root.query_drop(sql).await.unwrap();
    root.disconnect().await.unwrap();
}

async fn count(chain: &Chain, table: &str) -> u64 {
    let mut direct = chain.direct().await;
    let n = direct
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .unwrap()
        .unwrap();
    direct.disconnect().await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packet_out_of_sequence_mid_file_loads_nothing() {
    let chain = chain(TransportPreference::Auto, true).await;
    chain.setup(&["CREATE TABLE t (a INT)"]).await;
    let sql = b"LOAD DATA LOCAL INFILE 'x.tsv' INTO TABLE t";
    let (mut direct, mut via) = chain.raw_clients(LOCAL_FILES).await;
    let answered_directly = direct.load_local_out_of_order(sql, b"1\n2\n").await;
    no_load_running(&chain).await;
    let answered_via = via.load_local_out_of_order(sql, b"1\n2\n").await;
    no_load_running(&chain).await;
    // 1156 (08S01), as the server's sequence ids go; directly the
    // connection then stays open, through the sidecar it closes (README,
    // Known limits).
    assert_eq!(
        &answered_directly[1].1[..3],
        b"\xff\x84\x04",
        "{answered_directly:?}"
    );
    assert_eq!(answered_via, answered_directly);
    assert_eq!(count(&chain, "t").await, 0);
}

/// The `mariadb` client with `--local-infile=1`: a file with a duplicate
/// key, one it cannot open (it sends an empty file and reports its own
/// error 2), one into an unknown table, and the statements after them, the
/// same output directly and through the sidecar; with `--local-infile=0`
/// (no CLIENT_LOCAL_FILES) the server's refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mariadb_client_loads_as_directly() {
    let chain = chain(TransportPreference::Auto, true).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rows é.tsv");
    std::fs::write(&path, b"1\tone\n2\ttwo\n1\tagain\n3\t\xff\xfe\n").unwrap();
    let path = path.display().to_string();
    let script = format!(
        "CREATE TABLE cli (id INT PRIMARY KEY, v VARBINARY(10));
         LOAD DATA LOCAL INFILE '{path}' INTO TABLE cli;
         SHOW WARNINGS;
         SELECT id, HEX(v) FROM cli ORDER BY id;
         LOAD DATA LOCAL INFILE '{path}.missing' INTO TABLE cli;
         LOAD DATA LOCAL INFILE '{path}' INTO TABLE nope;
         SELECT COUNT(*) FROM cli;
         DROP TABLE cli;"
    );
    let run = |local_infile: &'static str, args: Vec<String>| {
        let script = script.clone();
        async move {
            let mut child = tokio::process::Command::new("mariadb")
                .args(["--no-defaults", "--batch", "--force", "--verbose"])
                .arg(local_infile)
                .args(&args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the mariadb client runs");
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(script.as_bytes()).await.unwrap();
            drop(stdin);
            let output = child.wait_with_output().await.unwrap();
            (
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        }
    };
    for local_infile in ["--local-infile=1", "--local-infile=0"] {
        let via = run(
            local_infile,
            vec![
                format!("--socket={}", chain.socket.display()),
                format!("--user={}", common::LOCAL_USER),
                format!("--password={}", common::LOCAL_PASSWORD),
                "app".into(),
            ],
        )
        .await;
        let direct = run(
            local_infile,
            vec![
                format!("--socket={}", chain.stack.db.socket.display()),
                "--user=app".into(),
                "--password=app-backend-pw".into(),
                "app".into(),
            ],
        )
        .await;
        if local_infile == "--local-infile=1" {
            assert!(direct.0.contains("Duplicate entry"), "{direct:?}");
            assert!(direct.1.contains("ERROR 1146"), "{direct:?}");
        } else {
            assert!(direct.1.contains("ERROR 4166"), "{direct:?}");
        }
        assert_eq!(via, direct, "{local_infile}");
    }
}

/// The results of `sql`, a multi-statement, by mysql_async with its own
/// handler sending "1\n2\n3\n", directly or through the sidecar.
async fn multi(
    chain: &Chain,
    sql: &str,
    directly: bool,
) -> Vec<(Vec<Vec<mysql_async::Value>>, u64, String)> {
    let mut conn = if directly {
        chain.direct().await
    } else {
        chain.client().await
    };
    conn.set_infile_handler(async {
        let parts = vec![
            Ok(bytes::Bytes::from_static(b"1\n2\n")),
            Ok(bytes::Bytes::from_static(b"3\n")),
        ];
        Ok(futures_util::stream::iter(parts).boxed())
    });
    let mut result = conn.query_iter(sql).await.unwrap();
    let mut sets = Vec::new();
    while !result.is_empty() {
        let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
        let rows = rows.into_iter().map(|r| r.unwrap()).collect();
        sets.push((rows, result.affected_rows(), result.info().into_owned()));
    }
    drop(result);
    conn.disconnect().await.unwrap();
    sets
}

/// A LOAD DATA LOCAL first in a multi-statement: every result as
/// directly. Behind another statement's result it is sent an empty file
/// (README, Known limits): nothing loaded, the statements after it and
/// the connection go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_in_a_multi_statement() {
    let chain = chain(TransportPreference::Auto, true).await;
    chain
        .setup(&["CREATE TABLE multi (id INT PRIMARY KEY)"])
        .await;
    let first = "LOAD DATA LOCAL INFILE 'multi.tsv' INTO TABLE multi; SELECT COUNT(*) FROM multi";
    chain.setup(&["TRUNCATE multi"]).await;
    let directly = multi(&chain, first, true).await;
    chain.setup(&["TRUNCATE multi"]).await;
    let via = multi(&chain, first, false).await;
    assert_eq!(directly.len(), 2, "{directly:?}");
    assert_eq!(via, directly);
    chain.setup(&["TRUNCATE multi"]).await;
    let behind =
        "SELECT 1; LOAD DATA LOCAL INFILE 'multi.tsv' INTO TABLE multi; SELECT COUNT(*) FROM multi";
    let via = multi(&chain, behind, false).await;
    assert_eq!(via.len(), 3, "{via:?}");
    assert_eq!(
        via[2].0,
        vec![vec![mysql_async::Value::Bytes(b"0".to_vec())]],
        "{via:?}"
    );
    assert_eq!(count(&chain, "multi").await, 0);
}

/// Waits (up to a minute) until no LOAD DATA runs at the server.
async fn no_load_running(chain: &Chain) {
    let mut direct = chain.direct().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running: u64 = direct
            .query_first(
                "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE 'LOAD DATA%'",
            )
            .await
            .unwrap()
            .unwrap();
        if running == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "a LOAD DATA still runs");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_file_loads_nothing() {
    let chain = chain(TransportPreference::Auto, true).await;
    chain
        .setup(&["CREATE TABLE gone (id INT PRIMARY KEY, v VARCHAR(20))"])
        .await;
    let mut file = Vec::new();
    for id in 1..=200_000 {
        file.extend_from_slice(format!("{id}\tv{id}\n").as_bytes());
    }
    // Most of the file (several parts), never ended.
    let parts = packets(&file[..file.len() - 10]);
    let sql = b"LOAD DATA LOCAL INFILE 'gone.tsv' INTO TABLE gone";
    // Another session through the sidecar, open meanwhile.
    let mut other = chain.client().await;
    other.query_drop("SET @mine = 42").await.unwrap();
    for way in ["directly", "through the sidecar"] {
        let (direct, via) = chain.raw_clients(LOCAL_FILES).await;
        let mut client = if way == "directly" { direct } else { via };
        let asked = client.load_local_ending(sql, &parts, false).await;
        assert_eq!(asked[0].1[0], 0xfb, "{way}: {asked:?}");
        drop(client);
        no_load_running(&chain).await;
        assert_eq!(count(&chain, "gone").await, 0, "{way}: nothing loaded");
    }
    // Other sessions go on, and new ones get healthy connections.
    let mine: Option<u32> = other.query_first("SELECT @mine").await.unwrap();
    assert_eq!(mine, Some(42));
    for _ in 0..3 {
        let mut fresh = chain.client().await;
        let one: Option<u32> = fresh.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
        fresh.disconnect().await.unwrap();
    }
    let (_, mut via) = chain.raw_clients(LOCAL_FILES).await;
    let answered = via.load_local(sql, &[b"1\tafter\n"]).await;
    assert_eq!(answered[1].1[0], 0, "a load after: {answered:?}");
}

/// How long a 32 MiB file takes to load directly and through the sidecar
/// over each transport, mysql_async's own handler as the client, runs
/// alternated (`cargo test --test local_infile load_time -- --ignored
/// --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement"]
async fn load_time() {
    let mut file = Vec::new();
    let mut id = 0u32;
    while file.len() < 32 << 20 {
        id += 1;
        file.extend_from_slice(format!("{id}\tsome text for row {id} of the file\n").as_bytes());
    }
    let file = bytes::Bytes::from(file);
    let h3 = chain(TransportPreference::Http3, true).await;
    let h2 = chain(TransportPreference::Http2, true).await;
    for c in [&h3, &h2] {
        c.setup(&["CREATE TABLE timed (id INT PRIMARY KEY, v VARCHAR(100))"])
            .await;
    }
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..3 {
        for (way, times) in times.iter_mut().enumerate() {
            let c = if way == 2 { &h2 } else { &h3 };
            c.setup(&["TRUNCATE timed"]).await;
            let mut conn = if way == 0 {
                c.direct().await
            } else {
                c.client().await
            };
            let data = file.clone();
            conn.set_infile_handler(async move {
                let chunks: Vec<std::io::Result<bytes::Bytes>> = (0..data.len())
                    .step_by(64 << 10)
                    .map(|at| Ok(data.slice(at..(at + (64 << 10)).min(data.len()))))
                    .collect();
                Ok(futures_util::stream::iter(chunks).boxed())
            });
            let started = Instant::now();
            conn.query_drop("LOAD DATA LOCAL INFILE 'timed.tsv' INTO TABLE timed")
                .await
                .unwrap();
            times.push(started.elapsed());
            assert_eq!(conn.affected_rows(), u64::from(id));
            conn.disconnect().await.unwrap();
        }
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort();
        t[t.len() / 2]
    };
    let [direct, h3, h2] = &mut times;
    let (direct, h3, h2) = (median(direct), median(h3), median(h2));
    eprintln!(
        "32 MiB ({id} rows): direct {direct:?}, sidecar h3 {h3:?} ({:.2}x), h2 {h2:?} ({:.2}x)",
        h3.as_secs_f64() / direct.as_secs_f64(),
        h2.as_secs_f64() / direct.as_secs_f64()
    );
}

/// The test process's peak resident memory (VmHWM), in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// What a load holds does not grow with its file: the peak memory of
/// this process (client, sidecar and gateway) after a 16 MiB file and
/// after a 256 MiB one, each generated as it is sent (`cargo test --test
/// local_infile memory_per_load -- --ignored --nocapture`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement"]
async fn memory_per_load() {
    let chain = chain(TransportPreference::Http3, true).await;
    chain
        .setup(&["CREATE TABLE big (id INT PRIMARY KEY, v VARCHAR(100)) ENGINE=InnoDB"])
        .await;
    let before = peak_kib();
    let mut peaks = Vec::new();
    for mib in [16usize, 256] {
        chain.setup(&["TRUNCATE big"]).await;
        let mut conn = chain.client().await;
        conn.set_infile_handler(async move {
            // 64 KiB chunks of lines, made as the driver asks for them.
            let chunks = futures_util::stream::iter(0..mib * 16).map(|chunk| {
                let mut data = Vec::with_capacity(65 << 10);
                let mut line = chunk * 4000;
                while data.len() < 64 << 10 {
                    line += 1;
                    data.extend_from_slice(
                        format!("{line}\tsome text for row {line}\n").as_bytes(),
                    );
                }
                Ok(bytes::Bytes::from(data))
            });
            Ok(chunks.boxed())
        });
        let started = Instant::now();
        conn.query_drop("LOAD DATA LOCAL INFILE 'big.tsv' INTO TABLE big")
            .await
            .unwrap();
        let rows = conn.affected_rows();
        conn.disconnect().await.unwrap();
        peaks.push(peak_kib());
        eprintln!(
            "{mib} MiB ({rows} rows) in {:?}: peak {} KiB (+{} KiB over the start)",
            started.elapsed(),
            peak_kib(),
            peak_kib() - before
        );
    }
    eprintln!(
        "the 256 MiB file raised the peak by {} KiB over the 16 MiB one's",
        peaks[1] - peaks[0]
    );
}
