//! What a local client can do to the sidecar and to other clients, through
//! real parts (a private MariaDB, the gateway, the sidecar in-process or as
//! `myquic sidecar`, raw sockets and `mysql_async` clients):
//!
//! - `a_client_that_never_answers_is_closed_after_the_login_timeout`:
//!   greeted, silent, disconnected without a word at `login_timeout`.
//! - `a_large_packet_before_login_gets_1153_at_once`: refused from its
//!   header, nothing buffered; a real login with connect attributes works.
//! - `clients_that_never_log_in_cannot_take_every_slot`: beyond
//!   `max_connections_logging_in` they get ERR 1040; clients that log in
//!   still get the other slots.
//! - `kill_is_only_for_the_same_users_connections`: ERR 1095 (MariaDB's
//!   words) for another user's connection, which keeps working; a user's
//!   own connections may be killed.
//! - `kill_query_id_goes_to_the_backend`: `KILL QUERY ID n` is a query id,
//!   never one of the sidecar's connection ids.
//! - `sigterm_with_a_client_still_logging_in_exits_at_once`: exit 0, not a
//!   drain timeout.
//! - `any_user_on_the_network_must_be_asked_for`: `--check-config` exits 64
//!   (a warning once allowed); `myquic doctor` warns.
//!
//! Memory budgets (`memory_per_connection`, `memory_total`): the three
//! attacks of issue 11 item 10 against `myquic sidecar` at its defaults,
//! its RSS read from `/proc/PID/status`, and the refusals' codes:
//!
//! - `many_prepared_statements_of_65535_placeholders_stay_small`: 40 held
//!   statements grow RSS by well under the 88 MiB they took before.
//! - `long_data_stops_at_the_gateways_request_limit`: 8 × 60 MiB of
//!   `COM_STMT_SEND_LONG_DATA` peaks far below the 1 GB it reached; the
//!   execute gets 1153 naming `max_request_bytes`; the connection goes on.
//! - `open_cursors_read_ahead_within_the_connections_budget`: six cursors
//!   of 100 MiB hold one budget, not 6 × 64 MiB; their fetches get 1153;
//!   the connection and another client go on.
//! - `budget_refusals_name_their_limit_and_leave_connections_usable`:
//!   1461 past the connection's budget, 1041 past the process's, both
//!   given back when statements close.
//! - `a_packet_beyond_the_process_budget_gets_1041`: a packet being read
//!   counts against `memory_total`: past it ERR 1041 and a close, as a
//!   server that cannot allocate a packet buffer; the budget is free again.
//! - `a_row_beyond_the_process_budget_gets_1041`: rows waiting to be
//!   written count too: the statement ends in 1041, the connection goes on.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use myquic::sidecar::SidecarConfig;

use common::Stack;
use common::raw_mysql::{Answer, RawClient, SERVER_STATUS_CURSOR_EXISTS};
use common::sidecar::{Chain, local_user};
use common::sidecar_child::SidecarChild;
use common::wire::read_packet;

const APP: (&str, &str) = ("app", "local-secret");
const OTHER: (&str, &str) = ("other", "other-secret");

/// The chain with users `app` and `other`, a server version known at once
/// and no RSA key; `tweak` adjusts the sidecar's configuration last.
async fn start(tweak: impl FnOnce(&mut SidecarConfig)) -> Chain {
    Chain::launch(|config| {
        // Known at once: greetings do not wait for the backend's.
        config.server_version = "5.5.5-10.11.0-MariaDB".into();
        // No RSA key to wait for (generating one in a debug build can take
        // longer than the short login timeouts used here).
        config.auth.plugin = "mysql_native_password".into();
        config.auth.users = [APP, OTHER]
            .iter()
            .map(|(user, password)| local_user(user, password))
            .collect();
        tweak(config);
    })
    .await
}

fn err_code(payload: &[u8]) -> u16 {
    assert_eq!(payload.first(), Some(&0xff), "an ERR packet: {payload:?}");
    u16::from_le_bytes([payload[1], payload[2]])
}

/// Waits (up to `within`) for the peer to close; what it sent meanwhile.
async fn wait_closed(s: &mut TcpStream, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "still open after {within:?}");
    got
}

fn server_error(e: &mysql_async::Error) -> (u16, String, String) {
    match e {
        mysql_async::Error::Server(e) => (e.code, e.state.clone(), e.message.clone()),
        other => panic!("expected a server error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_answers_is_closed_after_the_login_timeout() {
    let chain = start(|c| c.login_timeout = Duration::from_secs(1)).await;
    let mut silent = chain.raw().await;
    let start = Instant::now();
    let (_, greeting) = read_packet(&mut silent).await;
    assert_eq!(greeting[0], 10, "protocol 10 greeting");
    let after = wait_closed(&mut silent, Duration::from_secs(5)).await;
    assert!(after.is_empty(), "closed without a word, as MariaDB does");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "closed at the timeout, not before: {waited:?}"
    );
    // The clock runs from the connect, so a slow dribble is cut as well.
    let mut dribbling = chain.raw().await;
    read_packet(&mut dribbling).await;
    dribbling.write_all(&[100, 0, 0, 1, 0]).await.unwrap();
    wait_closed(&mut dribbling, Duration::from_secs(5)).await;
    // Clients that log in are not affected, however long they then stay.
    let mut conn = chain.client_as(APP).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_packet_before_login_gets_1153_at_once() {
    let chain = start(|_| {}).await;
    for announced in [0xff_ffff_u32, 20 << 10] {
        let mut s = chain.raw().await;
        read_packet(&mut s).await;
        // Only the header and a few bytes: the answer must not wait for the
        // rest (the 64 MiB max_allowed_packet applies only after login).
        let len = announced.to_le_bytes();
        s.write_all(&[len[0], len[1], len[2], 1, 0x0d, 0xa2])
            .await
            .unwrap();
        let (seq, err) = read_packet(&mut s).await;
        assert_eq!(err_code(&err), 1153, "{announced} bytes announced");
        assert_eq!(&err[3..9], b"#08S01");
        assert_eq!(seq, 2, "a reply to the client's packet 1");
        wait_closed(&mut s, Duration::from_secs(5)).await;
    }
    // A real login, with mysql_async's connect attributes, fits.
    let mut conn = chain.client_as(APP).await;
    // And after it the configured max_allowed_packet applies.
    let big: usize = conn
        .query_first(format!("SELECT LENGTH('{}')", "x".repeat(100 << 10)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(big, 100 << 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_never_log_in_cannot_take_every_slot() {
    let chain = start(|c| {
        c.max_connections = 3;
        c.max_connections_logging_in = 1;
        c.login_timeout = Duration::from_secs(1);
    })
    .await;
    let mut a = chain.client_as(APP).await;
    let mut stranger = chain.raw().await;
    assert_eq!(read_packet(&mut stranger).await.1[0], 10, "greeted");
    // A second one still logging in is refused, as when full, although a
    // slot is free: strangers hold at most max_connections_logging_in.
    let mut refused = chain.raw().await;
    assert_eq!(err_code(&read_packet(&mut refused).await.1), 1040);
    wait_closed(&mut refused, Duration::from_secs(5)).await;
    // The stranger goes at the login timeout; then clients log in again
    // and get every remaining slot.
    wait_closed(&mut stranger, Duration::from_secs(5)).await;
    let mut b = chain.client_as(OTHER).await;
    let mut c = chain.client_as(APP).await;
    for conn in [&mut a, &mut b, &mut c] {
        let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
        assert_eq!(one, 1);
    }
    assert_eq!(chain.sidecar.connections(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_is_only_for_the_same_users_connections() {
    let chain = start(|_| {}).await;
    let mut victim = chain.client_as(APP).await;
    let id = victim.id();
    let mut intruder = chain.client_as(OTHER).await;
    for sql in [format!("KILL {id}"), format!("KILL QUERY {id}")] {
        let e = intruder.query_drop(&sql).await.expect_err("refused");
        assert_eq!(
            server_error(&e),
            (
                1095,
                "HY000".to_string(),
                format!("You are not owner of thread {id}")
            ),
            "{sql}"
        );
    }
    let one: i64 = victim.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1, "the victim keeps working");
    // The same user may: KILL QUERY leaves the connection open, KILL ends it.
    let mut owner = chain.client_as(APP).await;
    owner.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let one: i64 = victim.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
    owner.query_drop(format!("KILL {id}")).await.unwrap();
    assert!(victim.query_drop("SELECT 1").await.is_err(), "killed");
    // The intruder's own connection is still its own to end.
    let own = intruder.id();
    let mut again = chain.client_as(OTHER).await;
    again.query_drop(format!("KILL {own}")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_id_goes_to_the_backend() {
    let chain = start(|_| {}).await;
    let mut victim = chain.client_as(APP).await;
    let id = victim.id();
    let mut other = chain.client_as(APP).await;
    // A query id, not a connection id: the backend judges it (no such
    // query there), and the sidecar's connection `id` is untouched.
    let e = other
        .query_drop(format!("KILL QUERY ID {id}"))
        .await
        .expect_err("no such query at the backend");
    let (code, _, message) = server_error(&e);
    assert_eq!(code, 1957, "ER_NO_SUCH_QUERY from MariaDB: {message}");
    let one: i64 = victim.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

/// `myquic` with `args`: exit code and stderr.
async fn myquic(args: &[&str]) -> (i32, String) {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_myquic"))
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("myquic finishes")
    .expect("myquic runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("--- myquic {args:?}: {:?}\n{stdout}{stderr}", out.status);
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_a_client_still_logging_in_exits_at_once() {
    let stack = Stack::start().await;
    let mut sidecar = common::sidecar_child::spawn(
        None,
        stack.addr(),
        &stack.cert,
        "[sidecar.admin]\nenabled = false\n",
        None,
    );
    let socket = sidecar.socket.clone();
    let mut stranger = connect_when_listening(&socket).await;
    let mut header = [0u8; 4];
    stranger.read_exact(&mut header).await.expect("greeted");
    let term = Instant::now();
    // SAFETY: signals the child this test started.
    assert_eq!(unsafe { libc::kill(sidecar.pid as i32, libc::SIGTERM) }, 0);
    let child = sidecar.child.inner();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            term.elapsed() < Duration::from_secs(5),
            "still draining after 5 s (default drain: 15 s + 10 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let log = std::fs::read_to_string(&sidecar.log).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "a clean drain:\n{log}");
    assert!(!log.contains("inside a transaction"), "nothing cut:\n{log}");
}

/// A unix-socket connection once the sidecar listens (its socket file
/// appears and accepts), within 10 s.
async fn connect_when_listening(socket: &Path) -> tokio::net::UnixStream {
    let start = Instant::now();
    loop {
        if let Ok(s) = tokio::net::UnixStream::connect(socket).await {
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "not listening");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn sidecar_config(
    dir: &Path,
    listen: &str,
    extra_auth: &str,
    upstream: &str,
    ca: &Path,
) -> PathBuf {
    let path = dir.join(format!(
        "{}.toml",
        listen.replace([':', '.', '[', ']'], "_")
    ));
    std::fs::write(
        &path,
        format!(
            "[sidecar]\nlisten = \"{listen}\"\n[sidecar.auth]\n{extra_auth}\n[sidecar.upstream]\nurl = \"{upstream}\"\nca = {ca:?}\nusername = \"{user}\"\npassword = {{ value = \"{password}\" }}\n",
            ca = ca.display().to_string(),
            user = common::USER,
            password = common::PASSWORD,
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_user_on_the_network_must_be_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, "").unwrap();
    let check = |config: &Path| {
        let config = config.display().to_string();
        async move { myquic(&["--config", &config, "sidecar", "--check-config"]).await }
    };
    let url = "https://gateway.example:8443";
    let open = sidecar_config(dir.path(), "0.0.0.0:3306", "", url, &ca);
    let (code, out) = check(&open).await;
    assert_eq!(code, 64, "{out}");
    assert!(
        out.contains("sidecar.auth.allow_any_user_on_network"),
        "{out}"
    );
    // The flag counts as much as the file.
    let loopback = sidecar_config(dir.path(), "127.0.0.1:3306", "", url, &ca);
    let (code, out) = check(&loopback).await;
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains("warning"), "{out}");
    let loopback = loopback.display().to_string();
    let (code, _) = myquic(&[
        "--config",
        &loopback,
        "sidecar",
        "--listen",
        "[::]:3306",
        "--check-config",
    ])
    .await;
    assert_eq!(code, 64);
    // Allowed by name: valid, with a warning.
    let allowed = sidecar_config(
        dir.path(),
        "[::]:3306",
        "allow_any_user_on_network = true",
        url,
        &ca,
    );
    let (code, out) = check(&allowed).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("warning") && out.contains("any user name and password"),
        "{out}"
    );

    // The doctor says so too, next to a working gateway (exit 2: works,
    // with a warning), and fails the configuration that will not start.
    let stack = Stack::start().await;
    let url = format!("https://localhost:{}", stack.addr().port());
    let allowed = sidecar_config(
        dir.path(),
        "0.0.0.0:3306",
        "allow_any_user_on_network = true",
        &url,
        &stack.cert,
    )
    .display()
    .to_string();
    let (code, out) = myquic(&["--config", &allowed, "doctor"]).await;
    assert!(out.contains("WARN clients"), "{out}");
    assert_eq!(code, 2, "{out}");
    let refused = sidecar_config(dir.path(), "0.0.0.0:3307", "", &url, &stack.cert)
        .display()
        .to_string();
    let (code, out) = myquic(&["--config", &refused, "doctor"]).await;
    assert!(out.contains("FAIL clients"), "{out}");
    assert_eq!(code, 1, "{out}");
}

// === memory budgets ===

const MIB: u64 = 1 << 20;

/// A raw client logged in to the sidecar child over its unix socket.
async fn raw_client(sidecar: &SidecarChild) -> RawClient<tokio::net::UnixStream> {
    let socket = tokio::net::UnixStream::connect(&sidecar.socket)
        .await
        .unwrap();
    RawClient::login(socket, common::LOCAL_USER, common::LOCAL_PASSWORD, "app").await
}

/// `SELECT … WHERE 1 IN (?, … ?)` with 65,535 placeholders, the most a
/// statement may have; `tag` makes each text distinct.
fn most_placeholders(tag: usize) -> String {
    let placeholders = vec!["?"; 65_535].join(",");
    format!("SELECT {tag} FROM DUAL WHERE 1 IN ({placeholders})")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_prepared_statements_of_65535_placeholders_stay_small() {
    let stack = Stack::start().await;
    let sidecar = SidecarChild::start(None, stack.addr(), &stack.cert).await;
    // Statements stay prepared while the driver caches them.
    let opts = mysql_async::OptsBuilder::from_opts(sidecar.opts()).stmt_cache_size(64);
    let mut conn = mysql_async::Conn::new(opts).await.unwrap();
    conn.prep(most_placeholders(0)).await.unwrap();
    let before = sidecar.memory("VmRSS");
    let mut held = Vec::new();
    for tag in 1..=40 {
        held.push(conn.prep(most_placeholders(tag)).await.unwrap());
    }
    let grown = sidecar.memory("VmRSS").saturating_sub(before);
    eprintln!(
        "40 statements of 65,535 placeholders: RSS +{} MiB",
        grown / MIB
    );
    // Before: +88 MiB (a long-data slot per placeholder, 2 MiB each).
    // Now each holds its text and parameter types, 256 KiB.
    assert!(grown < 32 * MIB, "RSS grew by {} MiB", grown / MIB);
    let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_stops_at_the_gateways_request_limit() {
    let stack = Stack::start().await;
    let sidecar = SidecarChild::start(None, stack.addr(), &stack.cert).await;
    let mut client = raw_client(&sidecar).await;
    let sql = ["LENGTH(?)"; 8].join(" + ");
    let id = client.prepare(&format!("SELECT {sql}")).await;
    let before = sidecar.memory("VmHWM");
    // 8 parameters × 60 MiB, in the 16 MiB chunks drivers send.
    let chunk = vec![b'x'; 15 << 20];
    for param in 0..8 {
        for _ in 0..4 {
            client.send_long_data(id, param, &chunk).await;
        }
    }
    let answer = client.execute_long_data(id, 8).await;
    let peak = sidecar.memory("VmHWM").saturating_sub(before);
    eprintln!(
        "8 × 60 MiB of long data: peak RSS +{} MiB; {answer:?}",
        peak / MIB
    );
    let Answer::Err(code, message) = answer else {
        panic!("refused: {answer:?}");
    };
    // Refused by whichever is smaller: the gateway's request limit (the
    // backend's max_allowed_packet + 1 MiB) or the connection's budget
    // (here: the test's MariaDB takes 64 MiB packets).
    assert_eq!(code, 1153, "{message}");
    assert!(
        message.contains("max_request_bytes") || message.contains("memory_per_connection"),
        "{message}"
    );
    // Before: 480 MiB held, 1 GB at the peak. Now one request's worth.
    assert!(peak < 160 * MIB, "peak RSS grew by {} MiB", peak / MIB);
    // The connection goes on, and the statement too.
    assert_eq!(
        client.query("SELECT 1").await,
        Answer::Rows { rows: 1, status: 2 }
    );
    for param in 0..8 {
        client.send_long_data(id, param, b"0123456789").await;
    }
    assert_eq!(
        client.execute_long_data(id, 8).await,
        Answer::Rows { rows: 1, status: 2 }
    );
}

/// 100 rows of 1 MiB: more than a cursor may read ahead.
const HUNDRED_MIB: &str = "WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 100) SELECT n, REPEAT('x', 1048576) FROM s";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_cursors_read_ahead_within_the_connections_budget() {
    let stack = Stack::start().await;
    let sidecar = SidecarChild::start(None, stack.addr(), &stack.cert).await;
    let mut client = raw_client(&sidecar).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        ids.push(client.prepare(HUNDRED_MIB).await);
    }
    let before = sidecar.memory("VmRSS");
    // Each execute needs the session, so the cursors opened before it
    // read ahead; the query after the last one reads that one ahead.
    for id in &ids {
        let Answer::Rows { rows: 0, status } = client.execute(*id, true).await else {
            panic!("a cursor opened");
        };
        assert_ne!(status & SERVER_STATUS_CURSOR_EXISTS, 0);
    }
    assert_eq!(
        client.query("SELECT 1").await,
        Answer::Rows { rows: 1, status: 2 }
    );
    let grown = sidecar.memory("VmRSS").saturating_sub(before);
    eprintln!("6 cursors of 100 MiB read ahead: RSS +{} MiB", grown / MIB);
    // Before: 64 MiB per cursor (+318 MiB for six). Now 64 MiB in all.
    assert!(grown < 160 * MIB, "RSS grew by {} MiB", grown / MIB);
    // Another client is not affected.
    let mut other = sidecar.connect().await;
    let one: i64 = other.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
    // A cursor that could not read on says so at its fetch, with the
    // limit named; its rows are then given back.
    for id in &ids[1..] {
        match client.fetch(*id, 1000).await {
            Answer::Err(1153, message) => {
                assert!(message.contains("memory_per_connection"), "{message}")
            }
            other => panic!("1153 for cursor {id}: {other:?}"),
        }
    }
    let _ = client.fetch(ids[0], 1000).await;
    // With the budget free again, a cursor reads to its end.
    let small = client.prepare("SELECT 1 UNION ALL SELECT 2").await;
    assert!(matches!(
        client.execute(small, true).await,
        Answer::Rows { rows: 0, .. }
    ));
    assert!(matches!(
        client.fetch(small, 10).await,
        Answer::Rows { rows: 2, .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_refusals_name_their_limit_and_leave_connections_usable() {
    // Each statement of 65,535 placeholders is charged 257 KiB: three fit
    // in a connection's 1 MiB, five in the process's 1.5 MiB.
    let chain = start(|c| {
        c.memory_per_connection = 1 << 20;
        c.memory_total = 3 << 19;
    })
    .await;
    let mut a = chain.client_as(APP).await;
    let mut held = Vec::new();
    for tag in 0..3 {
        held.push(a.prep(most_placeholders(tag)).await.unwrap());
    }
    let e = a.prep(most_placeholders(3)).await.expect_err("over budget");
    let (code, state, message) = server_error(&e);
    assert_eq!((code, state.as_str()), (1461, "42000"), "{message}");
    assert!(message.contains("memory_per_connection"), "{message}");
    let one: i64 = a.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1, "the connection goes on");
    // Another client has its own budget, within what is left in all.
    let mut b = chain.client_as(OTHER).await;
    let first = b.prep(most_placeholders(10)).await.unwrap();
    b.prep(most_placeholders(11)).await.unwrap();
    let e = b
        .prep(most_placeholders(12))
        .await
        .expect_err("process full");
    let (code, state, message) = server_error(&e);
    assert_eq!((code, state.as_str()), (1041, "HY000"), "{message}");
    assert!(message.contains("memory_total"), "{message}");
    // Closing a statement gives its memory back.
    b.close(first).await.unwrap();
    b.prep(most_placeholders(12)).await.unwrap();
    a.close(held.pop().unwrap()).await.unwrap();
    a.prep(most_placeholders(3)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packet_beyond_the_process_budget_gets_1041() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s");
    let chain = start(|c| {
        c.socket = Some(socket.clone());
        c.memory_per_connection = 1 << 20;
        c.memory_total = 2 << 20;
    })
    .await;
    let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
    let mut client = RawClient::login(stream, APP.0, APP.1, "app").await;
    // 3 MiB: within max_allowed_packet, beyond what the process may hold.
    let mut query = b"\x03SELECT LENGTH('".to_vec();
    query.resize(3 << 20, b'x');
    query.extend_from_slice(b"')");
    match client.command_refused_early(&query).await {
        Answer::Err(1041, message) => assert!(message.contains("memory_total"), "{message}"),
        other => panic!("1041: {other:?}"),
    }
    client.closed().await;
    // Given back with the connection: 1.5 MiB fits again, for anyone.
    let mut other = chain.client_as(OTHER).await;
    let length: usize = other
        .query_first(format!("SELECT LENGTH('{}')", "y".repeat(3 << 19)))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(length, 3 << 19);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_beyond_the_process_budget_gets_1041() {
    let chain = start(|c| {
        c.memory_per_connection = 1 << 20;
        c.memory_total = 2 << 20;
    })
    .await;
    let mut conn = chain.client_as(APP).await;
    let e = conn
        .query_drop("SELECT REPEAT('x', 3145728)")
        .await
        .expect_err("refused");
    let (code, state, message) = server_error(&e);
    assert_eq!((code, state.as_str()), (1041, "HY000"), "{message}");
    assert!(message.contains("memory_total"), "{message}");
    let length: usize = conn
        .query_first("SELECT LENGTH(REPEAT('x', 1048576))")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(length, 1 << 20, "the connection goes on");
    let row: String = conn
        .query_first("SELECT REPEAT('y', 1048576)")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.len(), 1 << 20, "a row within the budget is written");
}
