//! A tier of two gateways (child processes sharing a signing key, one
//! private MariaDB) behind one sidecar that knows both (`tier_urls`).
//! 32 clients run autocommit reads and writes and bank transfers in
//! transactions; gateway A is drained (SIGTERM), then killed. Every
//! autocommit statement issued after the drain began succeeds on B, with
//! its session's settings (time zone, database) intact; every transaction
//! either commits with acknowledgment or errors; the bank's total holds;
//! every acknowledged write is in the database. The switch time (the
//! longest an autocommit statement waited across it) is printed.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tokio::sync::{Notify, mpsc, watch};

use common::MariaDb;
use common::gateway_child::GatewayChild;
use common::sidecar_child::{SidecarChild, spawn};

const CLIENTS: usize = 32;
const ACCOUNTS: i64 = 64;
const OPENING_BALANCE: i64 = 1000;
const TIME_ZONE: &str = "+03:00";

/// What one client saw.
#[derive(Default)]
struct Tally {
    /// (started, took, error) of each autocommit statement.
    autocommit: Vec<(Instant, Duration, Option<String>)>,
    acknowledged_inserts: u64,
    failed_inserts: u64,
    committed: u64,
    aborted: u64,
}

/// Two gateways sharing a signing key, and a sidecar that knows both
/// (A first).
struct Tier {
    a: GatewayChild,
    b: GatewayChild,
    sidecar: SidecarChild,
    _dir: tempfile::TempDir,
}

impl Tier {
    /// `transport`: the sidecar's `upstream.transport`.
    async fn start(db: &MariaDb, transport: &str) -> Self {
        let tier_toml = "[gateway.sessions]\nsigning_key = { value = \"one key for the tier\" }\n\
                         [gateway.drain]\ntimeout = \"45s\"\n";
        let a = GatewayChild::ready(db, tier_toml).await;
        let b = GatewayChild::ready(db, tier_toml).await;
        // One CA file trusting both self-signed gateways.
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("tier-ca.pem");
        let pems = [&a.cert, &b.cert].map(|c| std::fs::read_to_string(c).unwrap());
        std::fs::write(&ca, pems.join("\n")).unwrap();
        let sidecar = spawn(
            None,
            a.addr,
            &ca,
            &format!(
                "tier_urls = [\"https://{}\"]\ntransport = \"{transport}\"\n\
                 [sidecar.admin]\nlisten = \"127.0.0.1:0\"",
                b.addr
            ),
            Some("info"),
        );
        let sidecar = sidecar.wait_serving().await;
        Self {
            a,
            b,
            sidecar,
            _dir: dir,
        }
    }
}

/// What a session reads of its own settings.
const SETTINGS: &str = "SELECT @@sql_mode, @@time_zone, @@character_set_client, \
                        @@collation_connection, @@div_precision_increment, DATABASE(), \
                        LAST_INSERT_ID(), 1/3";

/// A session that set replayable things, moved to gateway B (A drained
/// away under it), reads them as the same session directly on MariaDB
/// does; a session holding backend state (a user variable, a temporary
/// table) is told it lost its connection instead of running without it.
#[tokio::test(flavor = "multi_thread")]
async fn a_moved_session_reads_as_a_direct_one() {
    let db = MariaDb::start().await;
    let Tier {
        mut a, b, sidecar, ..
    } = Tier::start(&db, "auto").await;
    let mut root = mysql_async::Conn::new(db.root_opts()).await.unwrap();
    root.query_drop("CREATE DATABASE app2; GRANT ALL ON app2.* TO app@localhost")
        .await
        .unwrap();
    let mut direct = db.direct().await;
    direct
        .query_drop(
            "CREATE TABLE app.direct (id INT AUTO_INCREMENT PRIMARY KEY, v INT); \
             CREATE TABLE app.moving LIKE app.direct",
        )
        .await
        .unwrap();
    let setup = [
        "SET sql_mode = 'ANSI_QUOTES,STRICT_ALL_TABLES', time_zone = '-05:30'",
        "SET NAMES latin1 COLLATE latin1_german2_ci",
        "SET SESSION div_precision_increment = 9",
        "USE app2",
        // Each into its own table: the same ids both ways.
        "INSERT INTO app.{table} (v) VALUES (1), (2)",
    ];
    let mut moving = sidecar.connect().await;
    let mut pinned_var = sidecar.connect().await;
    let mut pinned_temp = sidecar.connect().await;
    for sql in setup {
        direct
            .query_drop(sql.replace("{table}", "direct"))
            .await
            .unwrap();
        moving
            .query_drop(sql.replace("{table}", "moving"))
            .await
            .unwrap();
    }
    pinned_var.query_drop("SET @kept = 1").await.unwrap();
    pinned_temp
        .query_drop("CREATE TEMPORARY TABLE scratch (a INT)")
        .await
        .unwrap();
    type Settings = (String, String, String, String, u32, String, u64, String);
    let want: Settings = direct.query_first(SETTINGS).await.unwrap().unwrap();
    let before: Settings = moving.query_first(SETTINGS).await.unwrap().unwrap();
    assert_eq!(before, want, "through A");

    a.signal("TERM");
    assert!(a.exited_within(Duration::from_secs(15)).await, "A drains");
    let after: Settings = bounded("a statement on B", moving.query_first(SETTINGS))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, want, "through B, rebuilt from the cookie");
    for (mut conn, what) in [
        (pinned_var, "user variable"),
        (pinned_temp, "temporary table"),
    ] {
        let error = bounded("a pinned session on B", conn.query_drop("SELECT 1"))
            .await
            .expect_err(what);
        let code = match &error {
            mysql_async::Error::Server(e) => Some(e.code),
            _ => None,
        };
        assert_eq!(code, Some(1927), "{what}: {error}");
    }
    drop(b);
}

/// Idle sessions hold no backend connection, unless something pins them
/// to theirs; a session that gave its connection back goes on with its
/// settings on the next one.
#[tokio::test(flavor = "multi_thread")]
async fn idle_unpinned_sessions_hold_no_backend_connection() {
    let db = MariaDb::start().await;
    let Tier { a, sidecar, .. } = Tier::start(&db, "auto").await;
    let mut unpinned = Vec::new();
    for _ in 0..4 {
        let mut conn = sidecar.connect().await;
        conn.query_drop(format!("SET time_zone = '{TIME_ZONE}'"))
            .await
            .unwrap();
        unpinned.push(conn);
    }
    let mut pinned = sidecar.connect().await;
    pinned.query_drop("SET @kept = 7").await.unwrap();
    let busy = backend_in_use(a.admin).await;
    assert!(busy >= 5, "each session took a backend connection: {busy}");
    // Polled: the release is the gateway's own 1 s timer.
    let start = Instant::now();
    while backend_in_use(a.admin).await != 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "idle sessions still hold backend connections: {}",
            backend_in_use(a.admin).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for conn in &mut unpinned {
        let tz: String = conn
            .query_first("SELECT @@time_zone")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(tz, TIME_ZONE, "the setting followed to the next connection");
    }
    let kept: i64 = pinned.query_first("SELECT @kept").await.unwrap().unwrap();
    assert_eq!(kept, 7, "the pinned session kept its connection");
}

/// The gateway's `myquic_gateway_backend_connections{state="in_use"}`.
async fn backend_in_use(admin: std::net::SocketAddr) -> i64 {
    let (status, body) = myquic::admin::wait::get(admin, "/metrics").await.unwrap();
    assert_eq!(status, 200);
    body.lines()
        .find_map(|l| l.strip_prefix("myquic_gateway_backend_connections{state=\"in_use\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the in_use gauge")
}

/// Over HTTP/3, A is killed while still draining (a long statement keeps
/// it busy): that statement is lost (1158), nothing else is.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_move_to_the_other_gateway_when_one_drains_http3() {
    sessions_move_when_a_gateway_drains("http3", End::KilledMidDrain).await;
}

/// Over HTTP/2, A drains to its end: it exits 0 (nothing cut), which
/// transactions left open on it would prevent by holding the locks its
/// last statements wait for.
#[tokio::test(flavor = "multi_thread")]
async fn sessions_move_to_the_other_gateway_when_one_drains_http2() {
    sessions_move_when_a_gateway_drains("http2", End::Drained).await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// SIGKILL once the clients work on B, the drain still going.
    KilledMidDrain,
    /// The drain finishes by itself.
    Drained,
}

async fn sessions_move_when_a_gateway_drains(transport: &str, end: End) {
    let db = MariaDb::start().await;
    let Tier {
        mut a, b, sidecar, ..
    } = Tier::start(&db, transport).await;

    let mut direct = db.direct().await;
    direct
        .query_drop(
            "CREATE TABLE app.accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB; \
             CREATE TABLE app.writes (id BIGINT AUTO_INCREMENT PRIMARY KEY, client INT, n INT) ENGINE=InnoDB",
        )
        .await
        .unwrap();
    direct
        .query_drop(format!(
            "INSERT INTO app.accounts SELECT seq, {OPENING_BALANCE} FROM seq_1_to_{ACCOUNTS}"
        ))
        .await
        .unwrap();

    // Each client reports once it has done `warm` rounds since the last
    // mark, so the test moves on events, not time.
    let (stop_tx, stop) = watch::channel(false);
    let mark = Arc::new(Notify::new());
    let (progress_tx, mut progress) = mpsc::unbounded_channel::<usize>();
    let tallies: Vec<Arc<Mutex<Tally>>> = (0..CLIENTS).map(|_| Default::default()).collect();
    let mut workers = Vec::new();
    for (client, tally) in tallies.iter().enumerate() {
        workers.push(tokio::spawn(client_loop(
            client,
            sidecar.opts(),
            tally.clone(),
            stop.clone(),
            mark.clone(),
            progress_tx.clone(),
        )));
    }
    bounded(
        "every client working through A",
        all_progressed(&mut progress),
    )
    .await;

    // A statement that keeps A draining until it is killed.
    let long = if end == End::KilledMidDrain {
        let mut conn = connect(&sidecar.opts()).await;
        let running = tokio::spawn(async move { conn.query_drop("SELECT SLEEP(120)").await });
        let start = Instant::now();
        loop {
            let n: u64 = direct
                .query_first(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP(120)%'",
                )
                .await
                .unwrap()
                .unwrap();
            if n == 1 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "SLEEP not running"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some(running)
    } else {
        None
    };

    let drain_began = Instant::now();
    a.signal("TERM");
    mark.notify_waiters();
    match end {
        End::KilledMidDrain => {
            bounded(
                "every client working after A began to drain",
                all_progressed(&mut progress),
            )
            .await;
            assert!(a.is_running(), "A is still draining (the SLEEP)");
            eprintln!(
                "{transport}: every client worked through B {:.1?} after SIGTERM; A killed mid-drain",
                drain_began.elapsed()
            );
            a.signal("KILL");
            assert_eq!(a.exit_code(Duration::from_secs(10)).await, Some(None));
            let lost = long.expect("started").await.unwrap();
            let code = match &lost {
                Err(mysql_async::Error::Server(e)) => Some(e.code),
                _ => None,
            };
            assert_eq!(code, Some(1158), "the statement cut by the kill: {lost:?}");
        }
        End::Drained => {
            let (_, exit) = tokio::join!(
                bounded(
                    "every client working after A began to drain",
                    all_progressed(&mut progress),
                ),
                a.exit_code(Duration::from_secs(40)),
            );
            eprintln!(
                "{transport}: A exited {exit:?} {:.1?} after SIGTERM",
                drain_began.elapsed()
            );
            assert_eq!(exit, Some(Some(0)), "A drained cleanly:\n{}", a.log_text());
        }
    }
    mark.notify_waiters();
    bounded(
        "every client working with A gone",
        all_progressed(&mut progress),
    )
    .await;
    stop_tx.send(true).unwrap();
    for worker in workers {
        worker.await.unwrap();
    }

    let mut late_errors = Vec::new();
    let mut switch = Duration::ZERO;
    let (mut acknowledged, mut failed, mut committed, mut aborted, mut statements) =
        (0, 0, 0, 0, 0);
    for tally in &tallies {
        let t = tally.lock().unwrap();
        for (started, took, error) in &t.autocommit {
            if *started >= drain_began {
                statements += 1;
                switch = switch.max(*took);
                if let Some(e) = error {
                    late_errors.push(e.clone());
                }
            }
        }
        acknowledged += t.acknowledged_inserts;
        failed += t.failed_inserts;
        committed += t.committed;
        aborted += t.aborted;
    }
    eprintln!(
        "{transport}: switch: {statements} autocommit statements issued after SIGTERM, the slowest took {switch:.1?}; \
         transactions: {committed} committed, {aborted} errored (and never acknowledged)"
    );
    assert!(
        late_errors.is_empty(),
        "autocommit statements failed after the drain began: {late_errors:?}\nA:\n{}\nB:\n{}",
        a.log_text(),
        b.log_text()
    );
    assert!(committed > 0, "transfers ran");

    let total: i64 = direct
        .query_first("SELECT SUM(balance) FROM app.accounts")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, ACCOUNTS * OPENING_BALANCE, "the bank's total holds");
    let rows: u64 = direct
        .query_first("SELECT COUNT(*) FROM app.writes")
        .await
        .unwrap()
        .unwrap();
    assert!(
        rows >= acknowledged && rows <= acknowledged + failed,
        "every acknowledged write is there: {rows} rows, {acknowledged} acknowledged, {failed} failed"
    );
    drop(b);
}

/// One client: rounds of an autocommit read (which also checks that its
/// session's time zone and database survived), an autocommit write and a
/// transfer in a transaction, until `stop`. A transaction that errors
/// ends its connection (the sidecar closes it, as a server whose
/// connection died would): the client connects anew.
async fn client_loop(
    client: usize,
    opts: mysql_async::Opts,
    tally: Arc<Mutex<Tally>>,
    stop: watch::Receiver<bool>,
    mark: Arc<Notify>,
    progress: mpsc::UnboundedSender<usize>,
) {
    const WARM: usize = 5;
    let mut conn = connect(&opts).await;
    let mut rounds = 0usize;
    let mut marked = std::pin::pin!(mark.notified());
    marked.as_mut().enable();
    let mut n = 0i64;
    while !*stop.borrow() {
        n += 1;
        // The autocommit read.
        let started = Instant::now();
        let read: Result<Option<(String, String, i64)>, _> = conn
            .query_first(format!(
                "SELECT @@session.time_zone, DATABASE(), balance FROM accounts WHERE id = {}",
                1 + (n + client as i64) % ACCOUNTS
            ))
            .await;
        let error = match read {
            Ok(Some((tz, db, _))) if tz == TIME_ZONE && db == "app" => None,
            Ok(other) => Some(format!("client {client}: session settings lost: {other:?}")),
            Err(e) => Some(format!("client {client}: read: {e}")),
        };
        let failed = error.is_some();
        tally
            .lock()
            .unwrap()
            .autocommit
            .push((started, started.elapsed(), error));
        if failed {
            conn = connect(&opts).await;
            continue;
        }
        // The autocommit write.
        let started = Instant::now();
        let write = conn
            .exec_drop(
                "INSERT INTO writes (client, n) VALUES (?, ?)",
                (client as i64, n),
            )
            .await;
        {
            let mut t = tally.lock().unwrap();
            match &write {
                Ok(()) => t.acknowledged_inserts += 1,
                Err(_) => t.failed_inserts += 1,
            }
            let error = write
                .as_ref()
                .err()
                .map(|e| format!("client {client}: write: {e}"));
            t.autocommit.push((started, started.elapsed(), error));
        }
        if write.is_err() {
            conn = connect(&opts).await;
            continue;
        }
        // The transfer.
        let from = 1 + (client as i64 * 7 + n) % ACCOUNTS;
        let to = 1 + (from + 1 + n % (ACCOUNTS - 1)) % ACCOUNTS;
        let transfer = async {
            conn.query_drop("START TRANSACTION").await?;
            conn.exec_drop(
                "UPDATE accounts SET balance = balance - 1 WHERE id = ?",
                (from,),
            )
            .await?;
            conn.exec_drop(
                "UPDATE accounts SET balance = balance + 1 WHERE id = ?",
                (to,),
            )
            .await?;
            conn.query_drop("COMMIT").await
        };
        match transfer.await {
            Ok(()) => tally.lock().unwrap().committed += 1,
            Err(_) => {
                tally.lock().unwrap().aborted += 1;
                conn = connect(&opts).await;
            }
        }
        // A mark starts a new count (the round it fell in counts).
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if marked.as_mut().poll(&mut cx).is_ready() {
            rounds = 0;
            marked.set(mark.notified());
            marked.as_mut().enable();
        }
        rounds += 1;
        if rounds == WARM {
            let _ = progress.send(client);
        }
    }
}

/// Until every client has reported progress since the last mark.
async fn all_progressed(progress: &mut mpsc::UnboundedReceiver<usize>) {
    let mut seen = std::collections::HashSet::new();
    while seen.len() < CLIENTS {
        seen.insert(progress.recv().await.expect("workers alive"));
    }
}

/// A connection through the sidecar with this test's session settings:
/// they must follow the session to the other gateway.
async fn connect(opts: &mysql_async::Opts) -> mysql_async::Conn {
    let mut conn = bounded(
        "connecting through the sidecar",
        mysql_async::Conn::new(opts.clone()),
    )
    .await
    .expect("a connection through the sidecar");
    conn.query_drop(format!("SET time_zone = '{TIME_ZONE}'"))
        .await
        .expect("SET time_zone");
    conn
}

async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 60 s"))
}
