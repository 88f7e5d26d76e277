//! The sidecar binary end to end, through real parts: a private MariaDB,
//! the gateway in the test process, `myquic sidecar` as a child process
//! (inside a network namespace where UDP has to be cut), and unmodified
//! MySQL clients on its unix socket — the `mariadb` / `mariadb-admin`
//! command-line clients and `mysql_async`.
//!
//! - `udp_blocked_falls_back_to_http2_and_returns_to_http3`: QUIC
//!   black-holed (and then actively rejected): new queries work again over
//!   HTTP/2 within 3 s (the path is given up after 1 s of silence); a statement that was in flight on the dead path
//!   fails with 1158 (never re-sent) and its transaction is rolled back; a
//!   transaction idle during the switch carries on over HTTP/2 and commits;
//!   once UDP is back the sidecar returns to HTTP/3.
//! - `gateway_restart_ends_transactions_loudly` (and its variant with a
//!   configured session signing key): a client inside a transaction gets
//!   an error, not a silent commit, and its connection closes; its row is
//!   never committed and no backend transaction lingers; new and idle
//!   clients work after the restart.
//! - `large_result_streams_with_bounded_sidecar_memory`: a ~30 MB result
//!   of random bytes (text and binary protocol), and a ~90 MB one, pass
//!   through a client that pauses: the sidecar's peak RSS grows by what
//!   flow control lets the gateway send ahead (the sidecar's 8 MiB QUIC
//!   stream window) plus the message in hand, not with the result size.
//! - `disconnect_and_kill_query_cancel_at_the_backend`: a client that
//!   hangs up mid-statement has its statement finish, as at MariaDB (an
//!   autocommit INSERT commits, directly and through the sidecar), unless
//!   its answer outgrows the network buffer (a streaming SELECT stops at
//!   the backend); one whose statement is `KILL QUERY`'d from another
//!   connection stops at once.
//! - `kill_query_while_the_response_head_is_awaited`: the same `KILL
//!   QUERY` while the statement's response head is held on its way (a
//!   relay): the victim is answered 1317 at once and the statement stops
//!   at the backend.
//!
//! The transport in use is read from the sidecar itself: its admin
//! endpoint's `/metrics` (`myquic_upstream_transport`).
//! Every wait is polled with a bound and a message saying what did not
//! happen; children are killed on drop and the sidecar's log is printed
//! when a test fails.

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::hold_relay::HoldRelay;
use common::netns::{Block, NetNs};
use common::sidecar_child::SidecarChild as Sidecar;
use common::{MariaDb, Stack};
use myquic::gateway::Gateway;
use mysql_async::prelude::Queryable;

/// `fut`, or a panic naming `what` after `limit`.
async fn bounded<T>(what: &str, limit: Duration, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within {limit:?}"))
}

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

async fn root(db: &MariaDb) -> mysql_async::Conn {
    mysql_async::Conn::new(db.root_opts())
        .await
        .expect("root connection")
}

/// The ids in `app.t`, committed, as another connection sees them.
async fn committed_ids(direct: &mut mysql_async::Conn) -> Vec<i64> {
    direct
        .query("SELECT id FROM app.t ORDER BY id")
        .await
        .unwrap()
}

/// Waits until no transaction is open at the backend: whatever a lost
/// client connection had open was rolled back, not left holding locks.
async fn no_open_transactions(direct: &mut mysql_async::Conn, within: Duration) {
    let start = Instant::now();
    loop {
        let open: Option<u64> = direct
            .query_first("SELECT COUNT(*) FROM information_schema.INNODB_TRX")
            .await
            .unwrap();
        if open == Some(0) {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{open:?} backend transactions still open after {within:?}"
        );
        // INNODB_TRX is refreshed only after 100 ms without a read.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Starts `SELECT 42` in a fresh `mariadb` process every 200 ms, without
/// waiting for the earlier ones, until one succeeds: the time that took,
/// and the attempts that failed before. Attempts are not serialised, so a
/// query written into the dead path (which fails with 1158, 08S01, once
/// that connection dies: it may have run) does not hide how soon new
/// queries work; attempts still pending at the end are killed.
async fn until_a_query_works(sidecar: &Sidecar, within: Duration) -> (Duration, Vec<String>) {
    use futures_util::StreamExt;
    let start = Instant::now();
    let mut failures = Vec::new();
    let mut attempts = futures_util::stream::FuturesUnordered::new();
    let mut next_attempt = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = next_attempt.tick() => {
                assert!(
                    start.elapsed() < within,
                    "no query worked within {within:?}: {failures:#?}"
                );
                let started = start.elapsed();
                attempts.push(async move { (started, sidecar.mariadb("SELECT 42").await) });
            }
            Some((started, result)) = attempts.next() => match result {
                Ok(out) => {
                    assert_eq!(out, "42");
                    return (start.elapsed(), failures);
                }
                Err(e) => failures.push(format!("started at {started:.1?}: {e}")),
            },
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn udp_blocked_falls_back_to_http2_and_returns_to_http3() {
    let ns = NetNs::create();
    let host = ns.host_addr();
    // The gateway on the veth's host side, its certificate naming that
    // address: the sidecar checks the name in the URL, as in production.
    let stack = Stack::start_with(|c| {
        c.listen = SocketAddr::new(host.into(), 0);
        c.tls.self_signed_names = vec![host.to_string()];
    })
    .await;
    let mut direct = root(&stack.db).await;
    direct
        .query_drop("CREATE TABLE app.t (id INT PRIMARY KEY, note VARCHAR(32))")
        .await
        .unwrap();
    let sidecar = Sidecar::start(Some(&ns), stack.addr(), &stack.cert).await;
    sidecar
        .wait_transport("Http3", Duration::from_secs(10))
        .await;
    assert_eq!(sidecar.mariadb("SELECT 40 + 2").await.unwrap(), "42");

    // Two transactions: `lost` sends its next statement while the path is
    // dark, `kept` only after the sidecar is on HTTP/2.
    let mut lost = sidecar.connect().await;
    lost.query_drop("BEGIN").await.unwrap();
    lost.query_drop("INSERT INTO t VALUES (1, 'lost')")
        .await
        .unwrap();
    let mut kept = sidecar.connect().await;
    kept.query_drop("BEGIN").await.unwrap();
    kept.query_drop("INSERT INTO t VALUES (2, 'kept')")
        .await
        .unwrap();

    ns.block_udp(Block::Drop);
    let blocked = Instant::now();
    let in_flight = tokio::spawn(async move {
        let r = lost.query_drop("INSERT INTO t VALUES (3, 'lost')").await;
        (r, blocked.elapsed(), lost)
    });
    let (fallback, failures) = until_a_query_works(&sidecar, Duration::from_secs(20)).await;
    sidecar
        .wait_transport("Http2", Duration::from_secs(5))
        .await;
    eprintln!(
        "UDP dropped: first new query answered after {:.1?} ({} failed attempts before: {failures:?}); on Http2 at {:.1?}",
        fallback,
        failures.len(),
        blocked.elapsed()
    );
    // The path is given up after 1 s of silence, well before QUIC's 3 s
    // idle timeout would end the connection.
    assert!(
        fallback < Duration::from_secs(3),
        "new queries work over HTTP/2 within 3 s of the block, not {fallback:?}"
    );

    // The statement written to the dead QUIC connection was lost with it:
    // the client is told so (never a silent re-send on HTTP/2), and the
    // connection is closed.
    let (result, took, mut lost) = bounded(
        "the statement in flight when UDP went dark",
        Duration::from_secs(15),
        in_flight,
    )
    .await
    .unwrap();
    let error = result.expect_err("a statement sent into a black hole cannot have succeeded");
    eprintln!("in-flight statement failed after {took:.1?}: {error}");
    assert_eq!(server_code(&error), Some(1158), "{error}");
    assert!(error.to_string().contains("rolled back"), "{error}");
    let after = lost.query_drop("SELECT 1").await;
    assert!(
        after.as_ref().is_err_and(|e| server_code(e).is_none()),
        "the connection is closed after 1158: {after:?}"
    );
    drop(lost);

    // The transaction that was idle during the switch goes on over HTTP/2.
    kept.query_drop("INSERT INTO t VALUES (4, 'kept')")
        .await
        .expect("a session survives the switch to HTTP/2");
    kept.query_drop("COMMIT").await.unwrap();

    // Committed: exactly what clients were told was committed.
    no_open_transactions(&mut direct, Duration::from_secs(10)).await;
    assert_eq!(committed_ids(&mut direct).await, vec![2, 4]);

    ns.unblock_udp();
    let back = sidecar
        .wait_transport("Http3", Duration::from_secs(10))
        .await;
    eprintln!("UDP restored: back on Http3 after {back:.1?}");
    kept.query_drop("INSERT INTO t VALUES (5, 'after')")
        .await
        .unwrap();
    assert_eq!(
        sidecar.mariadb("SELECT COUNT(*) FROM t").await.unwrap(),
        "3"
    );

    // Active refusal (ICMP port unreachable) ends the same way.
    ns.block_udp(Block::Reject);
    let rejected = Instant::now();
    let (fallback, _) = until_a_query_works(&sidecar, Duration::from_secs(20)).await;
    sidecar
        .wait_transport("Http2", Duration::from_secs(5))
        .await;
    eprintln!(
        "UDP rejected: first new query answered after {fallback:.1?}, on Http2 at {:.1?}",
        rejected.elapsed()
    );
    kept.query_drop("INSERT INTO t VALUES (6, 'rejected')")
        .await
        .expect("an idle session survives the switch to HTTP/2");
    ns.unblock_udp();
    let back = sidecar
        .wait_transport("Http3", Duration::from_secs(10))
        .await;
    eprintln!("UDP restored: back on Http3 after {back:.1?}");
    assert_eq!(
        sidecar.mariadb("SELECT COUNT(*) FROM t").await.unwrap(),
        "4"
    );
    drop(kept);
    drop(sidecar);
}

/// A self-signed certificate and key in files, so that a restarted
/// gateway presents the certificate the sidecar already trusts.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

async fn gateway_restart(signing_key: bool) {
    let db = MariaDb::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate(dir.path());
    let mut config = common::config(&db, cert.clone());
    config.tls.self_signed_cert_out = None;
    config.tls.cert = Some(cert.clone());
    config.tls.key = Some(key);
    if signing_key {
        config.sessions.signing_key = Some(myquic::config::Secret {
            value: Some("a key both gateway processes share".into()),
            ..Default::default()
        });
    }
    let gateway = Gateway::start(config.clone())
        .await
        .expect("gateway starts");
    let addr = gateway.addr;
    let mut direct = root(&db).await;
    direct
        .query_drop("CREATE TABLE app.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let sidecar = Sidecar::start(None, addr, &cert).await;

    let mut in_tx = sidecar.connect().await;
    in_tx.query_drop("BEGIN").await.unwrap();
    in_tx.query_drop("INSERT INTO t VALUES (1)").await.unwrap();
    let mut idle = sidecar.connect().await;
    idle.query_drop("INSERT INTO t VALUES (100)").await.unwrap();

    gateway.shutdown().await;
    let stopped = Instant::now();
    config.listen = addr;
    // quinn releases the old UDP socket in the background, once the
    // connections it closed have drained: retry briefly, as a supervisor
    // restarting a process would.
    let gateway = loop {
        match Gateway::start(config.clone()).await {
            Ok(gateway) => break gateway,
            Err(e) => assert!(
                stopped.elapsed() < Duration::from_secs(5),
                "the gateway cannot listen on {addr} again: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let restarted = Instant::now();
    eprintln!(
        "gateway restarted on {addr}; the port was free again after {:.1?}",
        restarted - stopped
    );

    // The transaction's backend connection died with the old gateway.
    let error = bounded(
        "the next statement of a transaction across the restart",
        Duration::from_secs(15),
        in_tx.query_drop("INSERT INTO t VALUES (2)"),
    )
    .await
    .expect_err("a transaction cannot go on across a gateway restart");
    eprintln!(
        "signing key {signing_key}: in-transaction client told after {:.1?}: {error}",
        restarted.elapsed()
    );
    // With a shared signing key the new gateway recognises the session and
    // says its transaction is gone (1927); without one it does not know the
    // session at all (1158, lost connection).
    let expected = if signing_key { 1927 } else { 1158 };
    assert_eq!(server_code(&error), Some(expected), "{error}");
    let after = in_tx.query_drop("COMMIT").await;
    assert!(
        after.as_ref().is_err_and(|e| server_code(e).is_none()),
        "the connection is closed, so no COMMIT can follow: {after:?}"
    );
    drop(in_tx);

    no_open_transactions(&mut direct, Duration::from_secs(10)).await;
    assert_eq!(
        committed_ids(&mut direct).await,
        vec![100],
        "the restart committed nothing"
    );

    let mut fresh = sidecar.connect().await;
    fresh.query_drop("INSERT INTO t VALUES (3)").await.unwrap();

    // The idle client: with a shared key its session simply continues;
    // without, it is told its session is gone, and reconnects.
    let next = idle.query_drop("INSERT INTO t VALUES (101)").await;
    if signing_key {
        next.expect("a session outside a transaction survives the restart");
    } else {
        let error = next.expect_err("the new gateway does not know the session");
        assert_eq!(server_code(&error), Some(1158), "{error}");
        let after = idle.query_drop("SELECT 1").await;
        assert!(
            after.as_ref().is_err_and(|e| server_code(e).is_none()),
            "the connection is closed after 1158: {after:?}"
        );
        idle = sidecar.connect().await;
        idle.query_drop("INSERT INTO t VALUES (101)").await.unwrap();
    }
    let count: Option<u64> = idle.query_first("SELECT COUNT(*) FROM t").await.unwrap();
    assert_eq!(count, Some(3));
    assert_eq!(committed_ids(&mut direct).await, vec![3, 100, 101]);
    drop((fresh, idle, sidecar));
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_restart_ends_transactions_loudly() {
    gateway_restart(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_restart_with_shared_signing_key() {
    gateway_restart(true).await;
}

/// The sidecar's per-stream QUIC receive window (`CLIENT_STREAM_WINDOW`
/// in src/transport/quic.rs): how far the gateway may send ahead of a
/// client that reads slowly, so what the sidecar may have to hold per
/// result, besides the message being turned into MySQL packets (its wire,
/// decompressed and decoded copies).
const STREAM_WINDOW: u64 = 8 << 20;

/// ~1 KB of random bytes per row: compression (zstd between gateway and
/// sidecar) cannot shrink what the sidecar has to hold.
fn large(rows: u64) -> String {
    format!("SELECT seq, RANDOM_BYTES(1000) FROM seq_1_to_{rows}")
}

/// Reads a result row by row, keeping nothing: (rows, bytes). Pauses
/// after the first thousand rows, as a client busy with them would, so
/// that the gateway runs as far ahead as flow control lets it.
async fn drain<P: mysql_async::prelude::Protocol>(
    mut result: mysql_async::QueryResult<'_, '_, P>,
) -> (u64, u64) {
    let (mut rows, mut bytes) = (0, 0);
    while let Some(row) = result.next().await.unwrap() {
        rows += 1;
        for i in 0..row.len() {
            bytes += match row.as_ref(i) {
                Some(mysql_async::Value::Bytes(b)) => b.len() as u64,
                _ => 8,
            };
        }
        if rows == 1000 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    (rows, bytes)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn large_result_streams_with_bounded_sidecar_memory() {
    let stack = Stack::start().await;
    let sidecar = Sidecar::start(None, stack.addr(), &stack.cert).await;
    let mut conn = sidecar.connect().await;
    // Warm up: buffers and connections that any query needs.
    let (rows, _) = drain(conn.query_iter(large(1000)).await.unwrap()).await;
    assert_eq!(rows, 1000);
    let base = sidecar.memory("VmHWM");
    eprintln!("sidecar peak RSS before: {:.1} MiB", mib(base));

    for (protocol, rows) in [("text", 30_000), ("text", 90_000), ("binary", 30_000)] {
        let start = Instant::now();
        let sql = large(rows);
        let (got, bytes) = if protocol == "text" {
            let result = conn.query_iter(sql).await.unwrap();
            bounded("the text result", Duration::from_secs(60), drain(result)).await
        } else {
            let statement = conn.prep(sql).await.unwrap();
            let result = conn.exec_iter(&statement, ()).await.unwrap();
            bounded("the binary result", Duration::from_secs(60), drain(result)).await
        };
        let peak = sidecar.memory("VmHWM");
        eprintln!(
            "{protocol} protocol: {got} rows, {:.1} MiB in {:.1?}; sidecar peak RSS {:.1} MiB (+{:.1} MiB)",
            mib(bytes),
            start.elapsed(),
            mib(peak),
            mib(peak - base)
        );
        assert_eq!(got, rows);
        assert!(bytes > rows * 1000, "{bytes} bytes");
        // What the sidecar holds is bounded by flow control, not by the
        // result: a window's worth of data, plus allocator and buffer
        // overhead. The 90 MB result is what tells the two apart.
        // Measured with the 8 MiB window: +12.6–12.9 MiB for the 29 MB text
        // result, +15–21 MiB for the 86 MB one, +20.5 MiB for the binary
        // one (issue 15 asks ≤ 16 MiB: not yet).
        assert!(
            peak - base < 4 * STREAM_WINDOW,
            "{protocol}: the sidecar's peak RSS grew by {:.1} MiB for a {:.1} MiB result",
            mib(peak - base),
            mib(bytes)
        );
    }
    drop(conn);
    drop(sidecar);
}

/// Waits until `want` backend threads run a statement that starts with
/// `prefix` (the query asking does not: it starts with `SELECT COUNT`);
/// the time it took.
async fn wait_running(
    root: &mut mysql_async::Conn,
    prefix: &str,
    want: u64,
    what: &str,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let running: u64 = root
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE COMMAND = 'Query' AND INFO LIKE CONCAT(?, '%')",
                (prefix,),
            )
            .await
            .unwrap()
            .unwrap();
        if running == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?} ({running} running)"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn disconnect_and_kill_query_cancel_at_the_backend() {
    let stack = Stack::start().await;
    let sidecar = Sidecar::start(None, stack.addr(), &stack.cert).await;
    let mut root = root(&stack.db).await;

    // A client that goes away mid-statement, once directly and once
    // through the sidecar: MariaDB notices only when it writes to the
    // socket, so the statement runs to its end and an autocommit write
    // commits. The sidecar must not lose it either.
    root.query_drop("CREATE TABLE app.hung_up (via VARCHAR(8))")
        .await
        .unwrap();
    for via in ["direct", "sidecar"] {
        let sql = format!("INSERT INTO app.hung_up SELECT '{via}' FROM (SELECT SLEEP(2)) AS s");
        let mut cli = match via {
            "direct" => {
                let mut cli = tokio::process::Command::new("mariadb");
                cli.arg("--no-defaults")
                    .arg(format!("--socket={}", stack.db.socket.display()))
                    .args(["--user=app", "--password=app-backend-pw"])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .kill_on_drop(true);
                cli
            }
            _ => sidecar.cli("mariadb"),
        };
        cli.args(["--batch", "-e", &sql, "app"]);
        let mut client = cli.spawn().expect("running mariadb");
        wait_running(
            &mut root,
            &sql,
            1,
            &format!("{via}: the client's INSERT running at the backend"),
            Duration::from_secs(10),
        )
        .await;
        client.kill().await.unwrap();
        wait_running(
            &mut root,
            &sql,
            0,
            &format!("{via}: the INSERT of a client that hung up finished"),
            Duration::from_secs(10),
        )
        .await;
        let rows: Vec<String> = root
            .exec("SELECT via FROM app.hung_up WHERE via = ?", (via,))
            .await
            .unwrap();
        assert_eq!(rows, [via], "{via}: the hung-up client's INSERT committed");
    }

    // One whose answer outgrows the network buffer is stopped at the
    // backend, as MariaDB stops a statement whose rows cannot be written.
    const HUNG_UP: &str = "SELECT REPEAT('x', 1000) AS hung_up, SLEEP(0.01) FROM seq_1_to_100000";
    let mut cli = sidecar.cli("mariadb");
    cli.args(["--batch", "-e", HUNG_UP, "app"]);
    let mut client = cli.spawn().expect("running mariadb");
    wait_running(
        &mut root,
        HUNG_UP,
        1,
        "the client's SELECT running at the backend",
        Duration::from_secs(10),
    )
    .await;
    client.kill().await.unwrap();
    let killed = Instant::now();
    wait_running(
        &mut root,
        HUNG_UP,
        0,
        "the SELECT of a client that hung up stopped at the backend",
        Duration::from_secs(10),
    )
    .await;
    eprintln!(
        "client killed: its streaming SELECT gone from the backend after {:.1?}",
        killed.elapsed()
    );

    // KILL QUERY <handshake id> from another connection.
    const VICTIM: &str = "SELECT SLEEP(30) AS victim";
    let mut victim = sidecar.connect().await;
    let id = victim.id();
    let sleeping = tokio::spawn(async move {
        let r = victim.query_drop(VICTIM).await;
        (r, Instant::now(), victim)
    });
    wait_running(
        &mut root,
        VICTIM,
        1,
        "the victim's SLEEP running at the backend",
        Duration::from_secs(10),
    )
    .await;
    let mut killer = sidecar.connect().await;
    let kill = Instant::now();
    killer
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .expect("KILL QUERY of a sidecar connection id");
    let (result, answered, mut victim) = bounded(
        "the victim's answer after KILL QUERY",
        Duration::from_secs(5),
        sleeping,
    )
    .await
    .unwrap();
    let error = result.expect_err("a killed statement fails");
    eprintln!(
        "KILL QUERY: victim answered after {:.1?}: {error}",
        answered - kill
    );
    assert_eq!(server_code(&error), Some(1317), "{error}");
    assert!(answered - kill < Duration::from_secs(2));
    stopped_and_still_usable(&mut root, VICTIM, &mut victim).await;
    drop((victim, killer));
    drop(sidecar);
}

/// `KILL QUERY` while the sidecar still awaits the statement's response
/// head (a slow path, or a gateway that sends the head with the first
/// rows): the statement is cancelled all the same, at the backend too.
/// The head is held by a relay on the gateway's HTTP/2 connection (no
/// UDP there: the sidecar is on HTTP/2) from before the statement is
/// sent until the victim has its answer. It once hung: the sidecar
/// listened for the KILL only once the head had come, and `KILL QUERY`
/// wakes only who listens, so the statement ran on (gwcpu's step 2,
/// which held heads for the first rows, showed it; see
/// `benches/results/profiles/gateway.md`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_query_while_the_response_head_is_awaited() {
    let stack = Stack::start().await;
    let relay = HoldRelay::start(stack.addr()).await;
    let sidecar = Sidecar::start(None, relay.addr, &stack.cert).await;
    let mut root = root(&stack.db).await;
    let mut victim = sidecar.connect().await;
    let mut killer = sidecar.connect().await;
    // Both sessions open upstream before anything is held.
    victim.query_drop("DO 1").await.unwrap();
    killer.query_drop("DO 1").await.unwrap();
    const VICTIM: &str = "SELECT SLEEP(30) AS head_held";
    let id = victim.id();
    relay.hold();
    let sleeping = tokio::spawn(async move {
        let r = victim.query_drop(VICTIM).await;
        (r, victim)
    });
    wait_running(
        &mut root,
        VICTIM,
        1,
        "the victim's SLEEP running at the backend, its head held",
        Duration::from_secs(10),
    )
    .await;
    killer
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .expect("KILL QUERY of a sidecar connection id");
    let (result, mut victim) = bounded(
        "the victim's answer after KILL QUERY, its response head held",
        Duration::from_secs(5),
        sleeping,
    )
    .await
    .unwrap();
    // Held no longer than needed: the sidecar's PINGs wait behind it too.
    relay.release();
    let error = result.expect_err("a killed statement fails");
    assert_eq!(server_code(&error), Some(1317), "{error}");
    // Cancelled upstream (the request dropped: a reset, which the relay
    // let through), so the gateway killed it at the backend.
    stopped_and_still_usable(&mut root, VICTIM, &mut victim).await;
    drop((victim, killer));
    drop(sidecar);
}

/// After `KILL QUERY`: the victim's statement no longer runs at the
/// backend, and its connection still works, as MariaDB leaves it.
async fn stopped_and_still_usable(
    root: &mut mysql_async::Conn,
    victim_sql: &str,
    victim: &mut mysql_async::Conn,
) {
    wait_running(
        root,
        victim_sql,
        0,
        "the killed SLEEP stopped at the backend",
        Duration::from_secs(5),
    )
    .await;
    let one: Option<u8> = bounded(
        "a statement after KILL QUERY",
        Duration::from_secs(10),
        victim.query_first("SELECT 1"),
    )
    .await
    .expect("the victim's connection still works");
    assert_eq!(one, Some(1));
}
