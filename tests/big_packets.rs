//! Packets at and above 16 MiB (several MySQL packets), both ways, through
//! real parts: a private MariaDB (max_allowed_packet 64M), the gateway and
//! the sidecar in-process, and `mysql_async` as the client. Each check runs
//! the same statements directly and through the sidecar and compares the
//! bytes.

mod common;

use common::sidecar::{local_user, sidecar_config};

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};

use myquic::client::TransportPreference;
use myquic::sidecar::{Sidecar, SidecarConfig};

use common::{MariaDb, Stack};

/// The largest payload of one MySQL packet.
const CHUNK: usize = 0xff_ff_ff;

const LOCAL_USER: &str = "app";
const LOCAL_PASSWORD: &str = "local-secret";
const MIB: usize = 1 << 20;

/// MariaDB + gateway + sidecar.
struct Chain {
    stack: Stack,
    sidecar: Sidecar,
}

impl Chain {
    async fn start_on(stack: Stack, tweak: impl FnOnce(&mut SidecarConfig)) -> Self {
        let mut config = sidecar_config(&stack, vec![local_user(LOCAL_USER, LOCAL_PASSWORD)]);
        config.auth.plugin = "mysql_native_password".into();
        tweak(&mut config);
        let sidecar = Sidecar::start(config).await.expect("sidecar starts");
        Self { stack, sidecar }
    }

    async fn start() -> Self {
        Self::start_on(Stack::start().await, |_| {}).await
    }

    /// Through the sidecar; `max_packet` as the client's own limit (None:
    /// read from the server, as drivers do).
    async fn via(&self, max_packet: Option<usize>) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.sidecar.addr().port())
            .prefer_socket(false)
            .user(Some(LOCAL_USER))
            .pass(Some(LOCAL_PASSWORD))
            .db_name(Some("app"))
            .max_allowed_packet(max_packet);
        Conn::new(opts).await.expect("connects through the sidecar")
    }

    /// Straight to MariaDB as the gateway's backend account.
    async fn direct(&self, max_packet: Option<usize>) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("localhost")
            .socket(Some(self.stack.db.socket.to_string_lossy().into_owned()))
            .prefer_socket(true)
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"))
            .max_allowed_packet(max_packet);
        Conn::new(opts).await.expect("connects to MariaDB")
    }
}

/// `len` bytes holding every byte value, quotes, backslashes and NULs
/// included, in a pattern that does not repeat at the packet boundaries.
fn value(len: usize, seed: u8) -> Vec<u8> {
    let mut x = 0x9E37_79B9_u32 ^ u32::from(seed);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 8) as u8
        })
        .collect()
}

/// A string literal of `bytes` as a driver's client-side escaping writes
/// it (PyMySQL, go-sql-driver's interpolateParams): `_binary'…'` with
/// `\\`, `\'` and `\0`.
fn escaped_literal(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 64 + 16);
    out.extend_from_slice(b"_binary'");
    for &b in bytes {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' => out.extend_from_slice(b"\\'"),
            0 => out.extend_from_slice(b"\\0"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
    out
}

/// `SELECT LENGTH('aaa…')` whose COM_QUERY payload (command byte and
/// text) is exactly `payload` bytes.
fn select_of_payload_size(payload: usize) -> Vec<u8> {
    let (head, tail) = (&b"SELECT LENGTH('"[..], &b"')"[..]);
    let mut sql = head.to_vec();
    sql.resize(payload - 1 - tail.len(), b'a');
    sql.extend_from_slice(tail);
    sql
}

async fn fetch(conn: &mut Conn, id: u32, prepared: bool) -> Option<Vec<u8>> {
    if prepared {
        conn.exec_first("SELECT v FROM big WHERE id = ?", (id,))
            .await
            .unwrap()
    } else {
        conn.query_first(format!("SELECT v FROM big WHERE id = {id}"))
            .await
            .unwrap()
    }
}

fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb >> 10)
}

/// Values of 2^24−2 … 2^24+1 and ~20 MiB bytes (every byte value, quotes,
/// backslashes and NULs among them), inserted through the sidecar with the
/// text protocol (an escaped literal, as drivers interpolate) and the
/// binary protocol (a bound parameter), and read back with the other
/// protocol: the bytes a direct connection reads, and the bytes sent.
/// Then packets that sit exactly on the 16 MiB boundaries: statements
/// (client → sidecar) and rows (sidecar → client), text and binary, each
/// answered as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_at_and_above_16_mib_cross_both_ways_as_directly() {
    let chain = Chain::start().await;
    let mut direct = chain.direct(None).await;
    let mut via = chain.via(None).await;
    direct
        .query_drop("CREATE TABLE big (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    let sizes = [
        (1 << 24) - 2,
        (1 << 24) - 1,
        1 << 24,
        (1 << 24) + 1,
        20 * MIB + 12345,
    ];
    for (k, &size) in sizes.iter().enumerate() {
        let want = value(size, k as u8);
        let (text_id, bin_id) = (2 * k as u32 + 1, 2 * k as u32 + 2);
        let mut sql = format!("INSERT INTO big (id, v) VALUES ({text_id}, ").into_bytes();
        sql.extend_from_slice(&escaped_literal(&want));
        sql.push(b')');
        via.query_drop(sql.as_slice())
            .await
            .unwrap_or_else(|e| panic!("text insert of {size} bytes: {e}"));
        drop(sql);
        via.exec_drop(
            "INSERT INTO big (id, v) VALUES (?, ?)",
            (bin_id, want.as_slice()),
        )
        .await
        .unwrap_or_else(|e| panic!("prepared insert of {size} bytes: {e}"));
        for (id, prepared) in [(text_id, true), (bin_id, false)] {
            let got_direct = fetch(&mut direct, id, prepared).await;
            assert!(
                got_direct.as_deref() == Some(&want[..]),
                "{size} bytes stored as sent"
            );
            let got_via = fetch(&mut via, id, prepared).await;
            assert!(
                got_via == got_direct,
                "{size} bytes read back through the sidecar (prepared {prepared}): {:?} bytes",
                got_via.as_ref().map(Vec::len)
            );
        }
        direct.query_drop("DELETE FROM big").await.unwrap();
    }
    // Statements whose COM_QUERY packet ends just before, on and after a
    // packet boundary (the one on it is followed by an empty packet).
    for payload in [CHUNK - 1, CHUNK, CHUNK + 1] {
        let sql = select_of_payload_size(payload);
        let want: Option<i64> = direct.query_first(sql.as_slice()).await.unwrap();
        let got: Option<i64> = via
            .query_first(sql.as_slice())
            .await
            .unwrap_or_else(|e| panic!("statement packet of {payload} bytes: {e}"));
        assert_eq!(got, want, "statement packet of {payload} bytes");
    }
    // Rows whose packet is one byte short of, exactly, and one byte past a
    // full packet: a text row is a 4-byte length and the value, a binary
    // row a header byte, the NULL bitmap and the same.
    for (prepared, overhead) in [(false, 4), (true, 6)] {
        for payload in [CHUNK - 1, CHUNK, CHUNK + 1] {
            let n = payload - overhead;
            let mut answers = Vec::new();
            for conn in [&mut direct, &mut via] {
                let answer: Option<Vec<u8>> = if prepared {
                    conn.exec_first("SELECT REPEAT('x', ?)", (n,)).await
                } else {
                    conn.query_first(format!("SELECT REPEAT('x', {n})")).await
                }
                .unwrap_or_else(|e| panic!("row packet of {payload} bytes: {e}"));
                answers.push(answer.unwrap());
            }
            let (want, got) = (&answers[0], &answers[1]);
            assert_eq!(want.len(), n);
            assert!(
                got == want,
                "row packet of {payload} bytes (prepared {prepared})"
            );
        }
    }
    eprintln!(
        "peak RSS of the test process (client, sidecar, gateway): {} MiB",
        peak_rss_mib()
    );
}

/// With the backend's max_allowed_packet at 18 MiB: a bound value that
/// fits it goes through (not doubled as hex on the way), a statement over
/// it is ER_NET_PACKET_TOO_LARGE naming the backend's limit, a request
/// over the gateway's (which follows the backend's) is the same error
/// naming that one, sent by the sidecar without uploading it; nothing of
/// them runs, and the connection goes on. Directly, MariaDB answers the
/// same statement with 1153 and closes the connection.
/// Over HTTP/3, and over HTTP/2 (the fallback), whose body limits are
/// the transport's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_large_is_1153_naming_the_limit_and_the_connection_goes_on() {
    for transport in [TransportPreference::Http3, TransportPreference::Http2] {
        too_large_over(transport).await;
    }
}

async fn too_large_over(transport: TransportPreference) {
    const BACKEND_MAX: usize = 18 * MIB;
    let db = MariaDb::start().await;
    let mut root = Conn::new(db.root_opts()).await.unwrap();
    root.query_drop(format!("SET GLOBAL max_allowed_packet = {BACKEND_MAX}"))
        .await
        .unwrap();
    root.disconnect().await.unwrap();
    let chain = Chain::start_on(Stack::start_on(db, |_| {}).await, |c| {
        c.upstream.transport = transport;
    })
    .await;
    // Clients that do not check sizes themselves (as PyMySQL does not).
    let mut direct = chain.direct(Some(64 * MIB)).await;
    let mut via = chain.via(Some(64 * MIB)).await;
    direct
        .query_drop("CREATE TABLE big (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();

    // 17 MiB bound: 34 MiB as hex, ~17.2 MiB as an escaped literal.
    let fits = value(17 * MIB, 7);
    via.exec_drop("INSERT INTO big VALUES (1, ?)", (fits.as_slice(),))
        .await
        .expect("a value under the backend's limit goes through");
    let stored: Option<Vec<u8>> = direct
        .query_first("SELECT v FROM big WHERE id = 1")
        .await
        .unwrap();
    assert!(stored.as_deref() == Some(&fits[..]), "stored as sent");

    let expect_1153 = |what: &str, r: Result<(), mysql_async::Error>, limit: &str| match r {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.state.as_str()), (1153, "08S01"), "{what}: {e:?}");
            assert!(e.message.contains(limit), "{what}: {}", e.message);
        }
        other => panic!("{what}: {other:?}"),
    };
    // A statement between the backend's limit and the gateway's.
    let mut over_backend = b"INSERT INTO big VALUES (2, '".to_vec();
    over_backend.resize(BACKEND_MAX + 100_000, b'z');
    over_backend.extend_from_slice(b"')");
    let r = via.query_drop(over_backend.as_slice()).await;
    expect_1153(
        "over the backend's limit",
        r,
        &format!("the backend's max_allowed_packet ({BACKEND_MAX} bytes)"),
    );
    // A bound value over the gateway's request limit.
    let over_gateway = value(20 * MIB, 8);
    let r = via
        .exec_drop("INSERT INTO big VALUES (3, ?)", (over_gateway.as_slice(),))
        .await;
    expect_1153(
        "over the gateway's limit",
        r,
        // Refused by the sidecar, which learned the limit from the
        // gateway's answers: the 20 MiB never went upstream.
        &format!(
            "larger than the gateway's max_request_bytes ({} bytes); not sent",
            BACKEND_MAX + myquic::gateway::packet_limit::REQUEST_HEADROOM
        ),
    );
    // Nothing ran, and the connection goes on.
    let ids: Vec<i64> = via.query("SELECT id FROM big ORDER BY id").await.unwrap();
    assert_eq!(ids, vec![1]);

    // Directly: the server's own 1153, then its connection is gone.
    match direct.query_drop(over_backend.as_slice()).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1153, "{e:?}"),
        Err(e) => eprintln!("directly, the write failed first: {e}"),
        Ok(()) => panic!("the backend took a statement over its max_allowed_packet"),
    }
    assert!(direct.query_drop("SELECT 1").await.is_err());
    assert_eq!(
        chain.sidecar.client().transport().map(|t| t.as_str()),
        Some(match transport {
            TransportPreference::Http2 => "h2",
            _ => "h3",
        })
    );
}

/// Large bound values become escaped string literals, not hex, where the
/// server's lexer allows: in every connection character set and quoting
/// mode the bytes stored are the bytes a server-side prepared statement
/// stores (every byte value, quotes, backslashes and NULs; valid text with
/// quotes and backslashes; gbk, where values stay hex).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bound_values_are_stored_as_directly_in_every_charset_and_mode() {
    let chain = Chain::start().await;
    let mut direct = chain.direct(None).await;
    let mut via = chain.via(None).await;
    direct
        .query_drop(
            "CREATE TABLE lit (id INT PRIMARY KEY, b LONGBLOB, t LONGTEXT CHARACTER SET utf8mb4)",
        )
        .await
        .unwrap();
    let any_bytes = value(300 << 10, 3);
    // Well-formed gbk with trail bytes 0x5C (`\`) next to quotes and
    // backslashes, which stays a literal (a gbk string that is not
    // well-formed is a parameter of a statement prepared at the backend,
    // whatever its size: tests/prepared_types.rs).
    let gbk = b"\xe5\x5c'\\\x81\x40".repeat(60 << 10);
    let text = "é'\\ü\"x".repeat(40 << 10);
    let setups = [
        "SET NAMES utf8mb4, sql_mode = DEFAULT",
        "SET NAMES utf8mb4, sql_mode = 'NO_BACKSLASH_ESCAPES'",
        "SET NAMES latin1, sql_mode = DEFAULT",
        "SET NAMES latin1, sql_mode = 'NO_BACKSLASH_ESCAPES,ANSI_QUOTES'",
        "SET NAMES binary, sql_mode = DEFAULT",
        "SET NAMES gbk, sql_mode = DEFAULT",
        "SET NAMES gbk, sql_mode = 'NO_BACKSLASH_ESCAPES'",
    ];
    for (k, setup) in setups.iter().enumerate() {
        let mut answers = Vec::new();
        for (offset, conn) in [(0, &mut direct), (100, &mut via)] {
            conn.query_drop(*setup).await.unwrap();
            let id = offset + k as u32;
            // Text only where the client's character set can hold it.
            let in_gbk = setup.contains("gbk");
            let t = (!in_gbk).then_some(text.as_bytes());
            let bytes = if in_gbk { &gbk } else { &any_bytes };
            let r = conn
                .exec_drop(
                    "INSERT INTO lit (id, b, t) VALUES (?, ?, ?)",
                    (id, bytes.as_slice(), t),
                )
                .await;
            let stored: Option<(Vec<u8>, Option<Vec<u8>>)> = conn
                .exec_first("SELECT b, CAST(t AS BINARY) FROM lit WHERE id = ?", (id,))
                .await
                .unwrap();
            answers.push((r.map_err(|e| e.to_string()), stored));
            conn.query_drop("SET NAMES utf8mb4, sql_mode = DEFAULT")
                .await
                .unwrap();
        }
        assert!(
            answers[0] == answers[1],
            "{setup}: differs from directly: {:?} / {:?}, {:?}",
            answers[0].0,
            answers[1].0,
            answers
                .iter()
                .map(|a| a
                    .1
                    .as_ref()
                    .map(|(b, t)| (b.len(), t.as_ref().map(Vec::len))))
                .collect::<Vec<_>>()
        );
        let stored = answers[0].1.as_ref().expect("stored directly");
        let sent = if setup.contains("gbk") {
            &gbk
        } else {
            &any_bytes
        };
        assert!(&stored.0 == sent, "{setup}: the bytes as sent");
    }
}

/// A measurement, not run by default (`cargo test --test big_packets --
/// --ignored`): the largest values the test backend (max_allowed_packet
/// 64M) takes, through the sidecar with both protocols, and the test
/// process's peak RSS (client, sidecar and gateway together).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn largest_values_under_the_backends_limit() {
    let chain = Chain::start().await;
    let mut direct = chain.direct(None).await;
    let mut via = chain.via(None).await;
    direct
        .query_drop("CREATE TABLE big (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    let before = peak_rss_mib();
    // Random bytes escape to ~1.2 % more; the statement must fit 64 MiB.
    let want = value(62 * MIB, 9);
    let started = std::time::Instant::now();
    let mut sql = b"INSERT INTO big VALUES (1, ".to_vec();
    sql.extend_from_slice(&escaped_literal(&want));
    sql.push(b')');
    via.query_drop(sql.as_slice()).await.expect("text protocol");
    drop(sql);
    let text = started.elapsed();
    let started = std::time::Instant::now();
    via.exec_drop("INSERT INTO big VALUES (2, ?)", (want.as_slice(),))
        .await
        .expect("binary protocol");
    let binary = started.elapsed();
    let started = std::time::Instant::now();
    for id in [1, 2] {
        let got: Option<Vec<u8>> = via
            .query_first(format!("SELECT v FROM big WHERE id = {id}"))
            .await
            .unwrap();
        assert!(got.as_deref() == Some(&want[..]), "row {id}");
    }
    let read = started.elapsed() / 2;
    eprintln!(
        "62 MiB through the sidecar: text insert {text:?}, prepared insert {binary:?}, read {read:?}; peak RSS {before} -> {} MiB",
        peak_rss_mib()
    );
}

/// After a burst of large statements and rows, once the backend
/// connections that carried them have closed, the gateway gives the memory
/// back: it kept +163 to +263 MiB for good, in glibc's heaps and in the
/// backend driver's buffer pool (`gateway::retained_memory`), and keeps
/// ~26 MiB now. Measured on the gateway as a process of its own
/// (`RssAnon`), after clients each sent a 6 MiB statement and read a 6 MiB
/// row at once, and closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_packets_leave_little_behind_in_the_gateway() {
    use common::gateway_child::GatewayChild;
    use common::process::{mib, status_bytes};
    use common::sidecar_child::SidecarChild;
    const CLIENTS: usize = 12;
    const SIZE: usize = 6 * MIB;
    let db = MariaDb::start().await;
    let gateway = GatewayChild::ready(&db, "").await;
    let sidecar = SidecarChild::start(None, gateway.addr, &gateway.cert).await;
    let pid = gateway.pid().expect("the gateway runs");
    let mut setup = sidecar.connect().await;
    setup
        .query_drop("CREATE TABLE large_packets (b LONGBLOB)")
        .await
        .unwrap();
    setup.disconnect().await.unwrap();
    let before = status_bytes(pid, "RssAnon");
    let burst = (0..CLIENTS).map(|i| {
        let sidecar = &sidecar;
        async move {
            let mut conn = sidecar.connect().await;
            let filler = char::from(b'a' + i as u8).to_string().repeat(SIZE);
            conn.query_drop(format!("INSERT INTO large_packets VALUES ('{filler}')"))
                .await
                .unwrap();
            let row: Option<Vec<u8>> = conn
                .query_first(format!("SELECT REPEAT('{}', {SIZE})", i % 10))
                .await
                .unwrap();
            assert_eq!(row.map(|r| r.len()), Some(SIZE));
            conn.disconnect().await.unwrap();
        }
    });
    futures_util::future::join_all(burst).await;
    let idle_after_burst = status_bytes(pid, "RssAnon");
    common::gateway_child::wait_backend_connections_at_most(gateway.admin, 4.0).await;
    println!(
        "idle connections open: +{:.1} MiB",
        mib(idle_after_burst) - mib(before)
    );
    let after = status_bytes(pid, "RssAnon");
    let kept = mib(after) - mib(before);
    println!(
        "gateway RssAnon {:.1} MiB before, {:.1} MiB after {CLIENTS} clients each sent and read {} MiB ({kept:+.1} MiB)",
        mib(before),
        mib(after),
        SIZE / MIB
    );
    // Up to four backend connections stay open (two warm per pool, with and
    // without CLIENT_FOUND_ROWS), each holding what its largest packets grew
    // (~12 MiB): 64 MiB bounds that, and fails the +163 MiB kept before.
    assert!(kept < 64.0, "the gateway kept {kept:.1} MiB once done");
}
