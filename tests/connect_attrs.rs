//! A client's connection attributes (`CLIENT_CONNECT_ATTRS`: `_client_name`,
//! `_pid`, `program_name`, a driver's own) reach the backend session: the
//! backend's `performance_schema.session_connect_attrs` shows the same
//! rows for the client's connection through sidecar → gateway as for the
//! same client straight to MariaDB (issue 12; go-sql-driver's
//! `TestConnectionAttributes`). Pooled backend connections pass from one
//! client's sessions to another's without showing the previous one's.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder};

use common::mariadb::{MariaDb, Options};
use common::raw_packets::RawClient;
use common::sidecar::Chain;
use common::{LOCAL_PASSWORD, LOCAL_USER, Stack};

/// What `session_connect_attrs` shows for the asking connection.
const ATTRS: &str = "SELECT ATTR_NAME, ATTR_VALUE FROM performance_schema.session_connect_attrs \
                     WHERE PROCESSLIST_ID = CONNECTION_ID() ORDER BY ATTR_NAME";

/// The chain in front of a MariaDB with `performance_schema` on.
async fn chain() -> Chain {
    let db = MariaDb::start_with(Options {
        server_args: vec!["--performance-schema".into()],
        ..Options::default()
    })
    .await;
    let mut root = Conn::new(db.root_opts()).await.unwrap();
    root.query_drop("GRANT SELECT ON performance_schema.* TO app@localhost")
        .await
        .unwrap();
    root.disconnect().await.unwrap();
    Chain::start_on(Stack::start_on(db, |_| {}).await).await
}

fn attrs(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Options straight to MariaDB (its socket, as the gateway's account)
/// and through the sidecar, both with `attributes` if any.
fn both(chain: &Chain, attributes: Option<&HashMap<String, String>>) -> [Opts; 2] {
    let direct = OptsBuilder::default()
        .ip_or_hostname("localhost")
        .socket(Some(chain.stack.db.socket.to_string_lossy().into_owned()))
        .prefer_socket(true)
        .user(Some("app"))
        .pass(Some("app-backend-pw"))
        .db_name(Some("app"));
    let via = chain.opts(LOCAL_USER, LOCAL_PASSWORD).db_name(Some("app"));
    [direct, via].map(|o| match attributes {
        Some(a) => o.connect_attributes(a.clone()).into(),
        None => o.into(),
    })
}

/// Connects with `opts`, reads its attributes, disconnects.
async fn shown(opts: Opts) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut conn = Conn::new(opts).await.expect("connects");
    let rows = conn.query(ATTRS).await.unwrap();
    conn.disconnect().await.unwrap();
    rows
}

/// mysql_async with attributes of its own, and one without: the same
/// rows directly and through the sidecar.
#[tokio::test]
async fn a_clients_attributes_reach_its_backend_session() {
    let chain = chain().await;
    let mine = attrs(&[
        ("program_name", "attrs-test"),
        ("_pid", "4242"),
        ("fo/o", "bo/o"),
        ("émoji", "✓ ünïcode"),
    ]);
    let [direct, via] = both(&chain, Some(&mine));
    let want = shown(direct).await;
    assert_eq!(want.len(), 4, "directly: {want:?}");
    assert_eq!(shown(via).await, want, "through the sidecar");
    // A client without attributes, on the pooled connection the last
    // one had: none, as directly.
    let [direct, via] = both(&chain, None);
    assert_eq!(shown(direct).await, vec![]);
    assert_eq!(shown(via).await, vec![], "through the sidecar");
}

/// Clients of different attributes take turns on one sidecar (and so on
/// the gateway's pooled connections): each sees its own, never the one
/// before's, and a client that comes back with the same attributes finds
/// them again.
#[tokio::test]
async fn sessions_of_different_attributes_take_turns_on_pooled_connections() {
    let chain = chain().await;
    let clients = [
        Some(attrs(&[("program_name", "first"), ("_pid", "1")])),
        Some(attrs(&[("program_name", "second"), ("x", "y")])),
        None,
        Some(attrs(&[("program_name", "first"), ("_pid", "1")])),
    ];
    for round in 0..3 {
        for attributes in &clients {
            let [direct, via] = both(&chain, attributes.as_ref());
            let want = shown(direct).await;
            assert_eq!(
                shown(via).await,
                want,
                "round {round}, {attributes:?}, through the sidecar"
            );
        }
    }
    // Two at once: each its own.
    let [_, a] = both(&chain, clients[0].as_ref());
    let [_, b] = both(&chain, clients[1].as_ref());
    let (mut a, mut b) = (Conn::new(a).await.unwrap(), Conn::new(b).await.unwrap());
    let a_rows: Vec<(String, String)> = a.query(ATTRS).await.unwrap();
    let b_rows: Vec<(String, String)> = b.query(ATTRS).await.unwrap();
    assert!(a_rows.contains(&("program_name".into(), "first".into())));
    assert!(b_rows.contains(&("program_name".into(), "second".into())));
}

/// The attribute block as the client wrote it: its order, bytes in the
/// client's character set (latin1 `é`, which MariaDB shows converted),
/// and a block whose last pair runs past its end (MariaDB logs the
/// client in and shows what it can): the same rows, byte for byte.
#[tokio::test]
async fn the_block_crosses_as_the_client_wrote_it() {
    let chain = chain().await;
    let read = "SELECT ATTR_NAME, HEX(ATTR_VALUE) FROM performance_schema.session_connect_attrs \
                WHERE PROCESSLIST_ID = CONNECTION_ID() ORDER BY ORDINAL_POSITION";
    let blocks: [(u8, &[u8]); 4] = [
        (45, b"\x01z\x011\x01a\x012\x04fo/o\x04bo/o"),
        (8, b"\x04name\x04caf\xe9"),
        (28, b"\x01k\x02\x81\x40"),
        (45, b"\x01k\x01v\x01j\x09short"),
    ];
    for (collation, block) in blocks {
        let mut answers = Vec::new();
        for through_sidecar in [false, true] {
            let (io, creds): (Box<dyn common::raw_packets::Io>, _) = if through_sidecar {
                (Box::new(chain.raw().await), (LOCAL_USER, LOCAL_PASSWORD))
            } else {
                let unix = tokio::net::UnixStream::connect(&chain.stack.db.socket)
                    .await
                    .unwrap();
                (Box::new(unix), ("app", "app-backend-pw"))
            };
            let mut client =
                RawClient::login_as(io, creds, "app", 0, 0, collation, Some(block)).await;
            // The rows and the packet that ends them (the EOF after the
            // definitions carries the statement's flags only directly: a
            // known limit of the sidecar's).
            let mut packets = client.query(read).await;
            packets.drain(..4);
            answers.push(packets);
        }
        assert!(answers[0].len() > 1, "directly: {:?}", answers[0]);
        assert_eq!(
            answers[1],
            answers[0],
            "through the sidecar, collation {collation}, {}",
            block.escape_ascii()
        );
    }
}

/// A libmariadb-like attribute block (fixed order, as C clients send it)
/// for process `pid`.
fn libmariadb_block(pid: &str) -> Vec<u8> {
    let mut block = Vec::new();
    for (k, v) in [
        ("_os", "Linux"),
        ("_client_name", "libmariadb"),
        ("_pid", pid),
        ("_client_version", "3.3.20"),
        ("_platform", "x86_64"),
        ("program_name", "mysql"),
    ] {
        for s in [k, v] {
            block.push(s.len() as u8);
            block.extend_from_slice(s.as_bytes());
        }
    }
    block
}

/// What carrying attributes costs the common case: the same client
/// process opening session after session (connect + `SELECT 1` +
/// hang up), with libmariadb's attributes, against a client without any;
/// two processes' clients in turn, and a new process's each session,
/// whose sessions re-identify their pooled connections where the
/// attributes differ (`COM_CHANGE_USER`, counted by the server). Blocks
/// of 40 sessions of each kind in turn, medians. (mysql_async is no such
/// client: it sends its attributes in another order on each connection.)
/// `cargo test --test connect_attrs attrs_cost -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement"]
async fn attrs_cost() {
    let chain = chain().await;
    let (a, b) = (libmariadb_block("1001"), libmariadb_block("1002"));
    let each: Vec<Vec<u8>> = (0..40)
        .map(|n| libmariadb_block(&format!("2{n:03}")))
        .collect();
    let kinds: [(&str, Vec<Option<&[u8]>>); 4] = [
        ("none", vec![None]),
        ("same attributes", vec![Some(&a)]),
        ("two in turn", vec![Some(&a), Some(&b)]),
        (
            "a new process each",
            each.iter().map(|e| Some(&e[..])).collect(),
        ),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    let mut changes = vec![0u64; kinds.len()];
    let mut root = Conn::new(chain.stack.db.root_opts()).await.unwrap();
    const CHANGES: &str = "SELECT COUNT_STAR FROM \
        performance_schema.events_statements_summary_global_by_event_name \
        WHERE EVENT_NAME = 'statement/com/Change user'";
    for _block in 0..10 {
        for (i, (_, clients)) in kinds.iter().enumerate() {
            let before: u64 = root.query_first(CHANGES).await.unwrap().unwrap();
            for n in 0..40 {
                let started = Instant::now();
                let creds = (LOCAL_USER, LOCAL_PASSWORD);
                let io = Box::new(chain.raw().await);
                let attrs = clients[n % clients.len()];
                let mut client = RawClient::login_as(io, creds, "app", 0, 0, 45, attrs).await;
                let answer = client.query("SELECT 1").await;
                assert_eq!(answer[answer.len() - 2], b"\x011");
                drop(client);
                // The first few find connections the last kind left.
                if n >= 4 {
                    times[i].push(started.elapsed());
                }
            }
            let after: u64 = root.query_first(CHANGES).await.unwrap().unwrap();
            changes[i] += after - before;
        }
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort();
        t[t.len() / 2].as_secs_f64() * 1e3
    };
    let base = median(&mut times[0]);
    for (i, (name, _)) in kinds.iter().enumerate() {
        let m = median(&mut times[i]);
        println!(
            "{name}: median {m:.3} ms, {:.3}x none; COM_CHANGE_USER {} in 400 sessions",
            m / base,
            changes[i]
        );
    }
}

/// Which is cheaper for giving a pooled connection other attributes: a
/// `COM_CHANGE_USER` on it, or a new connection (what the gateway's pool
/// runs on each: `SET NAMES utf8mb4`, `USE app`), straight to MariaDB's
/// socket with mysql_async, interleaved, medians.
/// `cargo test --test connect_attrs change_user_or_connect -- --ignored --nocapture`
#[tokio::test]
#[ignore = "a measurement"]
async fn change_user_or_connect() {
    let chain = chain().await;
    let [direct, _] = both(&chain, None);
    let opts: Opts = OptsBuilder::from_opts(direct)
        .setup(vec!["SET NAMES utf8mb4".to_string(), "USE app".to_string()])
        .into();
    let mut kept = Conn::new(opts.clone()).await.unwrap();
    let (mut change, mut connect) = (Vec::new(), Vec::new());
    for _ in 0..300 {
        let started = Instant::now();
        kept.change_user(Default::default()).await.unwrap();
        change.push(started.elapsed());
        let started = Instant::now();
        let conn = Conn::new(opts.clone()).await.unwrap();
        connect.push(started.elapsed());
        conn.disconnect().await.unwrap();
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort();
        t[t.len() / 2].as_secs_f64() * 1e3
    };
    let (c, n) = (median(&mut change), median(&mut connect));
    println!(
        "COM_CHANGE_USER {c:.3} ms, new connection {n:.3} ms ({:.2}x)",
        n / c
    );
}
