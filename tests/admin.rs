//! The admin endpoint, metrics and graceful shutdown, through real parts:
//! a private MariaDB, the gateway (in the test process), `myquic sidecar`
//! and `myquic wait` as child processes, and `mysql_async` clients on the
//! sidecar's unix socket.
//!
//! - `readiness_waits_for_the_gateway`: a sidecar whose gateway is not
//!   there is live but neither started nor ready, and `myquic wait` fails
//!   on its timeout (exit 1).
//! - `probes_metrics_and_quitquitquit`: `myquic wait` returns once ready;
//!   the request counter rises by exactly the number of queries, the byte
//!   counters and latency histogram move, the connection gauge follows the
//!   clients, every metric the sidecar declares is on the page;
//!   `/quitquitquit` (POST only) drains an idle sidecar: exit 0.
//! - `sidecar_quitquitquit_with_a_token`: with `admin.quit_token` set,
//!   `/quitquitquit` is 401 without the bearer token and drains with it.
//! - `udp_blocked_shows_in_the_metrics`: with UDP cut the transport gauge
//!   flips to h2 and the fallback counter rises; with UDP back, h3 and the
//!   return counter.
//! - `sigterm_drains_transactions`: after SIGTERM the sidecar is unready at
//!   once but still serves (a new connection, a transaction that commits);
//!   after the drain period an idle connection is closed and new ones are
//!   refused; a transaction still open at the bound gets ERR 1053 and is
//!   rolled back at the backend; exit 3.
//! - `second_sigterm_exits_at_once`: exit 4 without waiting for the drain.
//! - `trace_id_joins_the_logs`: the trace id of the sidecar's command
//!   span is the one the gateway logs for the request; no SQL text in the
//!   sidecar's info-level log.
//! - `gateway_drain_http3` / `_http2`: unready when the drain begins; a long statement in
//!   flight finishes and is delivered; an open transaction is rolled back;
//!   its admin endpoint serves /ready and /metrics, with every metric
//!   the gateway declares.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::netns::{Block, NetNs};
use common::sidecar_child::{SidecarChild as Sidecar, free_port};
use common::{MariaDb, PASSWORD, USER};
use myquic::admin::wait::get;
use mysql_async::prelude::Queryable;

async fn root(db: &MariaDb) -> mysql_async::Conn {
    mysql_async::Conn::new(db.root_opts())
        .await
        .expect("root connection")
}

async fn open_transactions(direct: &mut mysql_async::Conn) -> u64 {
    direct
        // Thread 0: InnoDB's own background work, not a client's.
        .query_first(
            "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
             WHERE trx_mysql_thread_id NOT IN (0, CONNECTION_ID())",
        )
        .await
        .unwrap()
        .unwrap()
}

/// POST with a raw HTTP/1.1 request: status line.
async fn post(addr: SocketAddr, path: &str) -> String {
    post_with(addr, path, None).await
}

/// POST with a raw HTTP/1.1 request and an optional `Authorization`:
/// status line.
async fn post_with(addr: SocketAddr, path: &str, authorization: Option<&str>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    tcp.write_all(
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

const STREAM_OK_H3: &str =
    "myquic_upstream_requests_total{method=\"StreamExecute\",transport=\"h3\",outcome=\"ok\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readiness_waits_for_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(&ca, certified.cert.pem()).unwrap();
    // Nothing listens there.
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port([127, 0, 0, 1].into())));
    let sidecar = Sidecar::with_admin(None, nowhere, &ca, "", "info");
    let start = Instant::now();
    let out = sidecar.wait_command("1s").output().await.unwrap();
    assert_eq!(out.status.code(), Some(1), "myquic wait fails on timeout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not ready within"), "{stderr}");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(sidecar.get("/live").await.0, 200);
    let (status, why) = sidecar.get("/ready").await;
    assert_eq!(status, 503);
    assert!(why.contains("gateway has not answered"), "{why}");
    assert_eq!(sidecar.get("/startup").await.0, 503);
    assert_eq!(sidecar.metrics().await.value("myquic_ready"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probes_metrics_and_quitquitquit() {
    // Compressed answers, whose wire and decoded bytes differ (on loopback
    // they would otherwise go uncompressed: `compression_by_link`).
    let stack = common::Stack::start_with(|c| c.limits.compression_by_link = false).await;
    let mut sidecar = Sidecar::ready(None, stack.addr(), &stack.cert, "").await;
    for path in ["/live", "/ready", "/startup"] {
        assert_eq!(sidecar.get(path).await, (200, "ok\n".into()), "{path}");
    }
    assert_eq!(sidecar.get("/nope").await.0, 404);
    assert_eq!(
        sidecar.get("/quitquitquit").await.0,
        405,
        "GET does not stop it"
    );

    let before = sidecar.metrics().await;
    assert_eq!(before.value("myquic_ready"), 1.0);
    let declared = myquic::admin::metrics::metrics();
    for metric in declared
        .sidecar
        .all()
        .into_iter()
        .chain(declared.upstream.all())
    {
        let help = format!("# HELP {} ", metric.name());
        assert!(before.0.contains(&help), "{help:?} missing: {}", before.0);
    }
    assert_eq!(
        before.value("myquic_upstream_transport{version=\"h3\"}"),
        1.0
    );
    assert_eq!(before.value("myquic_sidecar_client_connections"), 0.0);

    let mut conn = sidecar.connect().await;
    let after_connect = sidecar.metrics().await;
    const QUERIES: u32 = 7;
    for i in 0..QUERIES {
        let got: Option<String> = conn
            .query_first(format!("SELECT REPEAT('x', {})", 1000 + i * 3000))
            .await
            .unwrap();
        assert!(got.unwrap().len() >= 1000);
    }
    let after = sidecar.metrics().await;
    assert_eq!(after.value("myquic_sidecar_client_connections"), 1.0);
    assert_eq!(
        after.value("myquic_sidecar_client_connections_total")
            - before.value("myquic_sidecar_client_connections_total"),
        1.0
    );
    assert_eq!(
        after.value(STREAM_OK_H3) - after_connect.value(STREAM_OK_H3),
        f64::from(QUERIES),
        "one StreamExecute per query:\n{}",
        after.0
    );
    let histogram =
        "myquic_upstream_request_duration_seconds_count{method=\"StreamExecute\",transport=\"h3\"}";
    assert_eq!(
        after.value(histogram) - after_connect.value(histogram),
        f64::from(QUERIES)
    );
    for series in [
        "myquic_upstream_message_bytes_total{direction=\"received\",form=\"decoded\"}",
        "myquic_upstream_message_bytes_total{direction=\"received\",form=\"wire\"}",
        "myquic_upstream_message_bytes_total{direction=\"sent\",form=\"wire\"}",
    ] {
        assert!(
            after.value(series) > after_connect.value(series),
            "{series} did not rise"
        );
    }
    // The results were compressible: fewer bytes on the wire than decoded.
    let delta = |s: &str| after.value(s) - after_connect.value(s);
    assert!(
        delta("myquic_upstream_message_bytes_total{direction=\"received\",form=\"decoded\"}")
            > 20_000.0
    );
    assert!(
        delta("myquic_upstream_message_bytes_total{direction=\"received\",form=\"wire\"}")
            < delta("myquic_upstream_message_bytes_total{direction=\"received\",form=\"decoded\"}")
    );
    conn.disconnect().await.unwrap();
    let start = Instant::now();
    while sidecar
        .metrics()
        .await
        .value("myquic_sidecar_client_connections")
        != 0.0
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the gauge stays up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // No client left: /quitquitquit drains at once and exits cleanly.
    assert_eq!(
        post(sidecar.admin(), "/quitquitquit").await,
        "HTTP/1.1 200 OK"
    );
    assert_eq!(sidecar.exit_code(Duration::from_secs(10)).await, Some(0));
}

/// A sidecar whose admin endpoint has a quit token (here from a file)
/// stops only for a request that carries it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sidecar_quitquitquit_with_a_token() {
    let stack = common::Stack::start().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("quit-token");
    std::fs::write(&token, "t0ken\n").unwrap();
    let extra = format!("quit_token = {{ file = \"{}\" }}\n", token.display());
    let mut sidecar = Sidecar::ready(None, stack.addr(), &stack.cert, &extra).await;
    for wrong in [None, Some("Bearer nope"), Some("t0ken")] {
        assert_eq!(
            post_with(sidecar.admin(), "/quitquitquit", wrong).await,
            "HTTP/1.1 401 Unauthorized",
            "{wrong:?}"
        );
    }
    assert_eq!(sidecar.get("/ready").await.0, 200, "still serving");
    assert_eq!(
        post_with(sidecar.admin(), "/quitquitquit", Some("Bearer t0ken")).await,
        "HTTP/1.1 200 OK"
    );
    assert_eq!(sidecar.exit_code(Duration::from_secs(10)).await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn udp_blocked_shows_in_the_metrics() {
    let ns = NetNs::create();
    let host = ns.host_addr();
    let stack = common::Stack::start_with(|c| {
        c.listen = SocketAddr::new(host.into(), 0);
        c.tls.self_signed_names = vec![host.to_string()];
    })
    .await;
    let sidecar = Sidecar::ready(Some(&ns), stack.addr(), &stack.cert, "").await;
    let m = sidecar.metrics().await;
    assert_eq!(m.value("myquic_upstream_transport{version=\"h3\"}"), 1.0);
    assert_eq!(m.value("myquic_upstream_fallbacks_total"), 0.0);

    ns.block_udp(Block::Reject);
    let start = Instant::now();
    let m = loop {
        let m = sidecar.metrics().await;
        if m.value("myquic_upstream_transport{version=\"h2\"}") == 1.0 {
            break m;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the transport gauge did not flip to h2:\n{}",
            m.0
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(m.value("myquic_upstream_transport{version=\"h3\"}"), 0.0);
    assert!(m.value("myquic_upstream_fallbacks_total") >= 1.0, "{}", m.0);
    assert_eq!(m.value("myquic_ready"), 1.0, "HTTP/2 still serves");
    // Queries now go over HTTP/2, and are counted so.
    let mut conn = sidecar.connect().await;
    conn.query_drop("SELECT 1").await.unwrap();
    let m = sidecar.metrics().await;
    assert!(
        m.value("myquic_upstream_requests_total{method=\"StreamExecute\",transport=\"h2\",outcome=\"ok\"}")
            >= 1.0,
        "{}",
        m.0
    );

    ns.unblock_udp();
    let start = Instant::now();
    loop {
        let m = sidecar.metrics().await;
        if m.value("myquic_upstream_transport{version=\"h3\"}") == 1.0 {
            assert!(m.value("myquic_upstream_returns_total") >= 1.0, "{}", m.0);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the transport gauge did not return to h3:\n{}",
            m.0
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(conn);
    drop(sidecar);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_drains_transactions() {
    let stack = common::Stack::start().await;
    let mut direct = root(&stack.db).await;
    direct
        .query_drop("CREATE TABLE app.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    let drain = "[sidecar.drain]\nperiod = \"2s\"\ntransaction_timeout = \"2s\"\n";
    let mut sidecar = Sidecar::ready(None, stack.addr(), &stack.cert, drain).await;

    let mut commits = sidecar.connect().await;
    commits.query_drop("BEGIN").await.unwrap();
    commits
        .query_drop("INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let mut abandoned = sidecar.connect().await;
    abandoned.query_drop("BEGIN").await.unwrap();
    abandoned
        .query_drop("INSERT INTO t VALUES (2)")
        .await
        .unwrap();
    let mut running = sidecar.connect().await;
    running.query_drop("BEGIN").await.unwrap();
    running
        .query_drop("INSERT INTO t VALUES (3)")
        .await
        .unwrap();
    let mut idle = sidecar.connect().await;
    idle.query_drop("SELECT 1").await.unwrap();

    sidecar.signal("TERM");
    let term = Instant::now();
    // Unready at once ...
    let start = Instant::now();
    while sidecar.get("/ready").await.0 != 503 {
        assert!(start.elapsed() < Duration::from_secs(1), "still ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sidecar.get("/ready").await.1, "draining\n");
    assert_eq!(sidecar.get("/live").await.0, 200);
    // ... but serving: a new connection, and a transaction that commits.
    let mut late = sidecar.connect().await;
    late.query_drop("INSERT INTO t VALUES (10)").await.unwrap();
    commits
        .query_drop("INSERT INTO t VALUES (4)")
        .await
        .unwrap();
    commits.query_drop("COMMIT").await.unwrap();
    // A statement that will still be running, inside a transaction, when
    // the drain ends.
    let statement = tokio::spawn(async move {
        let r = running.query_drop("SELECT SLEEP(30)").await;
        (r, running)
    });
    assert!(
        term.elapsed() < Duration::from_secs(2),
        "too slow to test the period"
    );

    // After the period: connections outside a transaction are closed, new
    // ones refused.
    tokio::time::sleep(Duration::from_secs(2) - term.elapsed() + Duration::from_millis(500)).await;
    assert!(
        idle.query_drop("SELECT 1").await.is_err(),
        "idle connection closed"
    );
    let refused = tokio::time::timeout(
        Duration::from_secs(5),
        mysql_async::Conn::new(sidecar.opts()),
    )
    .await
    .expect("refused, not hanging");
    assert!(refused.is_err(), "no new connections after the period");

    // At the bound: ERR 1053 for the statement, the transactions rolled back.
    let (result, _running) = tokio::time::timeout(Duration::from_secs(10), statement)
        .await
        .expect("the running statement is ended by the drain")
        .unwrap();
    let error = result.expect_err("cut by the drain");
    match &error {
        mysql_async::Error::Server(e) => {
            assert_eq!((e.code, e.state.as_str()), (1053, "08S01"), "{error}");
            assert!(e.message.contains("shutdown in progress"), "{error}");
        }
        other => panic!("expected ERR 1053, got {other}"),
    }
    assert!(abandoned.query_drop("SELECT 1").await.is_err());
    assert_eq!(sidecar.exit_code(Duration::from_secs(10)).await, Some(3));
    let ids: Vec<i64> = direct
        .query("SELECT id FROM app.t ORDER BY id")
        .await
        .unwrap();
    assert_eq!(ids, vec![1, 4, 10], "committed exactly what was committed");
    // Rolled back, not left holding locks.
    let start = Instant::now();
    while open_transactions(&mut direct).await != 0 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "transactions left open"
        );
        // INNODB_TRX is refreshed only after 100 ms without a read.
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn second_sigterm_exits_at_once() {
    let stack = common::Stack::start().await;
    let mut sidecar = Sidecar::ready(None, stack.addr(), &stack.cert, "").await;
    let mut conn = sidecar.connect().await;
    conn.query_drop("BEGIN").await.unwrap();
    sidecar.signal("TERM");
    let start = Instant::now();
    while sidecar.get("/ready").await.0 != 503 {
        assert!(start.elapsed() < Duration::from_secs(2), "still ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let start = Instant::now();
    sidecar.signal("TERM");
    // The default drain is 15 s + 10 s; the second signal does not wait
    // (the bound leaves room for a loaded machine, far below the drain's).
    assert_eq!(sidecar.exit_code(Duration::from_secs(10)).await, Some(4));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_drain_http3() {
    gateway_drain(myquic::client::TransportPreference::Http3, "h3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn gateway_drain_http2() {
    gateway_drain(myquic::client::TransportPreference::Http2, "h2").await;
}

async fn gateway_drain(transport: myquic::client::TransportPreference, label: &str) {
    use myquic::client::{Client, ClientConfig};
    let db = MariaDb::start().await;
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("gateway.pem");
    let mut config = common::config(&db, cert.clone());
    config.drain.backend_check_interval = Duration::from_millis(200);
    let gateway = myquic::gateway::Gateway::start(config).await.unwrap();
    let health = gateway.health();
    let quit = tokio_util::sync::CancellationToken::new();
    let admin = myquic::admin::start(
        &myquic::admin::AdminConfig::with_port(0),
        health.clone(),
        quit.clone(),
        tokio_util::sync::CancellationToken::new(),
    )
    .await
    .unwrap();
    let start = Instant::now();
    while get(admin.addr, "/ready").await.unwrap().0 != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "gateway not ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get(admin.addr, "/startup").await.unwrap().0, 200);

    let mut direct = root(&db).await;
    direct
        .query_drop("CREATE TABLE app.t (id INT PRIMARY KEY)")
        .await
        .unwrap();
    myquic::transport::tls::install_crypto_provider();
    let roots = myquic::transport::tls::roots_from_pem(&cert).unwrap();
    let tls = myquic::transport::tls::client_config(roots, &[]).unwrap();
    let mut client_config =
        ClientConfig::new(gateway.addr.to_string(), "localhost", tls, USER, PASSWORD);
    client_config.transport = transport;
    let client = Client::new(client_config).unwrap();
    let begun = client
        .execute(None, "BEGIN", Default::default())
        .await
        .unwrap();
    let in_tx = client
        .execute(
            begun.session.as_ref(),
            "INSERT INTO t VALUES (1)",
            Default::default(),
        )
        .await
        .unwrap();
    assert!(in_tx.message.error.is_none());
    let metrics_page = get(admin.addr, "/metrics").await.unwrap().1;
    for metric in myquic::admin::metrics::metrics().gateway.all() {
        let help = format!("# HELP {} ", metric.name());
        assert!(
            metrics_page.contains(&help),
            "{help:?} missing: {metrics_page}"
        );
    }
    assert!(
        metrics_page.contains(&format!(
            "myquic_gateway_requests_total{{method=\"Execute\",transport=\"{label}\",outcome=\"ok\"}}"
        )),
        "{metrics_page}"
    );
    assert!(
        metrics_page.contains("myquic_gateway_sessions 1\n"),
        "{metrics_page}"
    );

    // A statement in flight when the drain begins.
    let long = {
        let client = client.clone();
        tokio::spawn(async move {
            let mut stream = client
                .stream_execute(None, "SELECT SLEEP(2), 7", Default::default())
                .await?;
            let mut last = None;
            while let Some(reply) = stream.next().await? {
                if let Some(result) = reply.message.result
                    && let Some(row) = result.rows.first()
                {
                    last = row.cells().map(|cells| {
                        cells
                            .map(|c| c.map(bytes::Bytes::copy_from_slice))
                            .collect::<Vec<_>>()
                    });
                }
            }
            Ok::<_, myquic::client::CallError>(last)
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shutdown = tokio::spawn(gateway.shutdown());
    let start = Instant::now();
    while health.ready().is_ok() {
        assert!(start.elapsed() < Duration::from_secs(1), "still ready");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        get(admin.addr, "/ready").await.unwrap(),
        (503, "draining\n".into())
    );
    let row = long
        .await
        .unwrap()
        .expect("the statement in flight finishes")
        .expect("and its row arrives");
    assert_eq!(row[1].as_deref(), Some(&b"7"[..]));
    assert!(
        tokio::time::timeout(Duration::from_secs(15), shutdown)
            .await
            .expect("the drain ends")
            .unwrap(),
        "everything in flight finished in time"
    );
    // The transaction left open was rolled back.
    let ids: Vec<i64> = direct.query("SELECT id FROM app.t").await.unwrap();
    assert!(ids.is_empty(), "{ids:?}");
    assert_eq!(
        open_transactions(&mut direct).await,
        0,
        "rolled back before the drain returned"
    );
}

/// The gateway's log lines in this test process (every test's gateway).
static GATEWAY_LOG: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        GATEWAY_LOG.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trace_id_joins_the_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("myquic::gateway=debug")
        .with_writer(|| Capture)
        .with_ansi(false)
        .try_init();
    let stack = common::Stack::start().await;
    let sidecar = Sidecar::with_admin(None, stack.addr(), &stack.cert, "", "myquic=debug");
    sidecar.wait_ready().await;
    let mut conn = sidecar.connect().await;
    let got: Option<u32> = conn.query_first("SELECT 24680 + 1").await.unwrap();
    assert_eq!(got, Some(24681));
    drop(conn);
    let log = std::fs::read_to_string(&sidecar.log).unwrap();
    // The command that ran the query, by its trace id.
    let trace = log
        .lines()
        .rev()
        .filter(|l| l.contains("command{trace_id=") && l.contains("StreamExecute opened"))
        .find_map(|l| l.split("command{trace_id=").nth(1)?.split('}').next())
        .unwrap_or_else(|| panic!("no command span in the sidecar's debug log:\n{log}"))
        .to_string();
    assert_eq!(trace.len(), 32, "{trace}");
    let gateway_log = String::from_utf8_lossy(&GATEWAY_LOG.lock().unwrap()).into_owned();
    assert!(
        gateway_log.contains(&format!(
            "request{{trace_id={trace} path=/psdb.v1alpha1.Database/StreamExecute"
        )),
        "the gateway did not log trace {trace}:\n{gateway_log}"
    );

    // At info level the sidecar logs no SQL.
    let quiet = Sidecar::ready(None, stack.addr(), &stack.cert, "").await;
    let mut conn = quiet.connect().await;
    conn.query_drop("SELECT 97531 AS secret_marker")
        .await
        .unwrap();
    drop(conn);
    let log = std::fs::read_to_string(&quiet.log).unwrap();
    assert!(!log.contains("97531"), "{log}");
}
