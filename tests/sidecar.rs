//! The sidecar through real parts: a private MariaDB, the gateway and the
//! sidecar in-process, and real MySQL clients (the `mariadb` command-line
//! client and `mysql_async`). Most checks are differential: the same
//! statements run directly against MariaDB and through the sidecar, and the
//! answers (values, column metadata, affected rows, insert ids, warnings,
//! errors) must be identical.

mod common;

use tokio::process::Command;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Value};

use common::results::{binary_results, text_results};
use common::sidecar::Chain;
use common::wire::{read_packet, write_packet};
use common::{LOCAL_PASSWORD, LOCAL_USER, Stack};

const TYPES_TABLE: &str = "CREATE TABLE types (
    id INT AUTO_INCREMENT PRIMARY KEY,
    ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED,
    mi MEDIUMINT, mu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
    bi BIGINT, bu BIGINT UNSIGNED,
    de DECIMAL(65,30), f FLOAT, d DOUBLE,
    dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
    c CHAR(10), vc VARCHAR(100), tx TEXT,
    bn BINARY(4), vb VARBINARY(300), bl BLOB,
    js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(10),
    nul INT
) DEFAULT CHARSET utf8mb4";

const TYPES_ROWS: &str = "INSERT INTO types VALUES
 (NULL, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
  -9223372036854775808, 18446744073709551615,
  '-12345678901234567890123456789012345.123456789012345678901234567890', 1.5, -2.2250738585072014e-308,
  '2024-02-29', '2024-02-29 23:59:59.999999', '2038-01-19 03:14:07.000001', '-838:59:59.000000', 2155,
  'chär', 'emoji 🐬 ok', REPEAT('t', 1000),
  X'00FF10AB', X'000102030405060708090A0B0C0D0E0F', NULL,
  '{\"k\": [1, 2.5, \"v\"]}', 'b', 'x,z', b'1010101010', NULL),
 (NULL, 127, 0, 32767, 0, 8388607, 0, 2147483647, 0,
  9223372036854775807, 0,
  '0.000000000000000000000000000001', -0.25, 1.7976931348623157e308,
  '0000-00-00', '0000-00-00 00:00:00', NULL, '00:00:00', 1901,
  '', '', '',
  X'00000000', X'', X'',
  'null', 'a', '', b'0', 7)";

/// A result of many streamed messages (about 2 MB: NULLs, empty
/// strings, every byte value, latin1 text, cells around the 127/128
/// length boundary, a 160 kB cell every 1,000 rows) reaches the client as
/// it left MariaDB, to the byte, in the text and the binary protocol: the
/// gateway writes the rows into its messages itself (`api::row_batch`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_result_is_the_backends_to_the_byte() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    let query = "SET STATEMENT max_recursive_iterations = 100000 FOR \
        WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 6000) \
        SELECT n, \
          IF(n % 7 = 0, NULL, REPEAT(CHAR(n % 256 USING binary), n % 300)) AS b, \
          IF(n % 5 = 0, '', CONVERT(REPEAT(_utf8mb4'é', n % 50) USING latin1)) AS l, \
          IF(n % 1000 = 0, REPEAT(UNHEX(SHA2(n, 256)), 5000), UNHEX(SHA2(n, 256))) AS h, \
          NULL AS z, '' AS e \
        FROM s";
    let text = async |conn: &mut Conn| {
        let rows: Vec<mysql_async::Row> = conn.query(query).await.unwrap();
        rows.into_iter()
            .map(mysql_async::Row::unwrap)
            .collect::<Vec<_>>()
    };
    let expected = text(&mut direct).await;
    let bytes: usize = expected
        .iter()
        .flatten()
        .map(|v| match v {
            Value::Bytes(b) => b.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(expected.len(), 6000);
    assert!(bytes > 1_500_000, "{bytes} bytes");
    assert!(
        text(&mut via).await == expected,
        "text protocol: the rows differ"
    );
    let binary = async |conn: &mut Conn| {
        let rows: Vec<mysql_async::Row> = conn.exec(query, ()).await.unwrap();
        rows.into_iter()
            .map(mysql_async::Row::unwrap)
            .collect::<Vec<_>>()
    };
    let expected = binary(&mut direct).await;
    assert_eq!(expected.len(), 6000);
    assert!(
        binary(&mut via).await == expected,
        "binary protocol: the rows differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_column_type_is_identical_in_text_and_binary_protocol() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct.query_drop(TYPES_TABLE).await.unwrap();
    direct.query_drop(TYPES_ROWS).await.unwrap();
    // All 256 byte values, bound as a parameter through the sidecar.
    let mut via = chain.client().await;
    let all_bytes: Vec<u8> = (0..=255).collect();
    via.exec_drop(
        "UPDATE types SET bl = ? WHERE id = 1",
        (Value::Bytes(all_bytes.clone()),),
    )
    .await
    .unwrap();
    let stored: Vec<u8> = direct
        .query_first("SELECT bl FROM types WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored, all_bytes, "BLOB parameter stored exactly");

    let query = "SELECT * FROM types ORDER BY id";
    let expected = text_results(&mut direct, query).await;
    assert!(
        expected.contains("rows=[[") && !expected.contains("error"),
        "{expected}"
    );
    assert_eq!(
        text_results(&mut via, query).await,
        expected,
        "text protocol"
    );
    let expected = binary_results(&mut direct, query, vec![]).await;
    assert_eq!(
        binary_results(&mut via, query, vec![]).await,
        expected,
        "binary protocol"
    );
    // Parameters of every type, written through the sidecar and read back.
    let insert = "INSERT INTO types (ti, tu, bi, bu, de, f, d, dt, dtm, tm, vc, vb, js, nul)
                  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    let params = vec![
        Value::Int(-5),
        Value::UInt(200),
        Value::Int(i64::MIN),
        Value::UInt(u64::MAX),
        Value::Bytes(b"3.141592653589793238462643383279".to_vec()),
        Value::Float(0.5),
        Value::Double(1e300),
        Value::Date(2001, 2, 3, 0, 0, 0, 0),
        Value::Date(2001, 2, 3, 4, 5, 6, 789012),
        Value::Time(true, 1, 2, 3, 4, 5),
        Value::Bytes("naïve ☃ 🐬".as_bytes().to_vec()),
        Value::Bytes(vec![0, 255, 39, 92, 34]),
        Value::Bytes(br#"{"a": "b'c"}"#.to_vec()),
        Value::NULL,
    ];
    let insert_result = binary_results(&mut via, insert, params.clone()).await;
    assert!(insert_result.contains("affected=1"), "{insert_result}");
    let direct_insert = binary_results(&mut direct, insert, params).await;
    assert!(direct_insert.contains("affected=1"), "{direct_insert}");
    let pick = "SELECT ti, tu, bi, bu, de, f, d, dt, dtm, tm, vc, vb, js, nul FROM types WHERE id > ? ORDER BY id";
    let expected = binary_results(&mut direct, pick, vec![Value::Int(2)]).await;
    let got = binary_results(&mut via, pick, vec![Value::Int(2)]).await;
    assert_eq!(got, expected, "parameters round-trip like a direct server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_results_and_errors_match_mariadb() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    direct
        .query_drop(
            "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20) UNIQUE, n INT)",
        )
        .await
        .unwrap();
    direct
        .query_drop(
            "CREATE PROCEDURE two(x INT) BEGIN SELECT x AS a; SELECT x + 1 AS b, 'z' AS c; END",
        )
        .await
        .unwrap();
    let script = [
        "INSERT INTO t (v, n) VALUES ('a', 1), ('b', 2)",
        "UPDATE t SET n = n + 1",
        "UPDATE t SET n = n WHERE v = 'a'",
        "SELECT LAST_INSERT_ID(), ROW_COUNT()",
        "INSERT INTO t (v, n) VALUES ('a', 2) ON DUPLICATE KEY UPDATE n = 2",
        "INSERT INTO t (v) VALUES ('a')",
        "SELEC 1",
        "SELECT * FROM missing",
        "SELECT 1; SELECT 'two', 2.5; INSERT INTO t (v) VALUES ('c')",
        "CALL two(41)",
        "SELECT 1; SELECT * FROM missing; SELECT 3",
        "SELECT CAST('x' AS SIGNED)",
        "SHOW WARNINGS",
        "INSERT INTO t (v, n) VALUES ('w', 'notanumber')",
        "DO 1",
        "SELECT * FROM t ORDER BY id",
    ];
    // Run the script twice against fresh tables, once each way, and
    // compare everything.
    let mut outputs = Vec::new();
    for conn in [&mut via, &mut direct] {
        conn.query_drop("DROP TABLE t").await.unwrap();
        conn.query_drop(
            "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20) UNIQUE, n INT)",
        )
        .await
        .unwrap();
        let mut out = Vec::new();
        for sql in script {
            out.push(format!("{sql}\n{}", text_results(conn, sql).await));
        }
        outputs.push(out);
    }
    for (got, expected) in outputs[0].iter().zip(&outputs[1]) {
        assert_eq!(got, expected);
    }
    let dup = &outputs[0][5];
    assert!(dup.contains("1062") && dup.contains("23000"), "{dup}");
    assert!(
        outputs[0][9].contains("..b (org"),
        "procedure result sets: {}",
        outputs[0][9]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_and_roll_back() {
    let chain = Chain::start().await;
    let mut via = chain.client().await;
    let mut other = chain.client().await;
    via.query_drop("CREATE TABLE acct (id INT PRIMARY KEY, bal INT)")
        .await
        .unwrap();
    via.query_drop("INSERT INTO acct VALUES (1, 100)")
        .await
        .unwrap();
    via.query_drop("BEGIN").await.unwrap();
    via.exec_drop("UPDATE acct SET bal = bal - ? WHERE id = 1", (30,))
        .await
        .unwrap();
    let seen: i64 = other
        .query_first("SELECT bal FROM acct WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen, 100, "uncommitted change invisible to others");
    via.query_drop("ROLLBACK").await.unwrap();
    via.query_drop("START TRANSACTION").await.unwrap();
    via.query_drop("UPDATE acct SET bal = 50 WHERE id = 1")
        .await
        .unwrap();
    via.query_drop("COMMIT").await.unwrap();
    let seen: i64 = other
        .query_first("SELECT bal FROM acct WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen, 50);
    // autocommit off: statements open a transaction that ROLLBACK undoes.
    via.query_drop("SET autocommit = 0").await.unwrap();
    via.query_drop("UPDATE acct SET bal = 0").await.unwrap();
    via.query_drop("ROLLBACK").await.unwrap();
    let seen: i64 = other
        .query_first("SELECT bal FROM acct WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(seen, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_commands_behave_like_a_server() {
    let chain = Chain::start().await;
    let mut via = chain.client().await;
    via.query_drop("SET @x = 42").await.unwrap();
    via.ping().await.unwrap();
    let x: Option<i64> = via.query_first("SELECT @x").await.unwrap().unwrap();
    assert_eq!(x, Some(42));
    // COM_RESET_CONNECTION really resets (a new session upstream).
    assert!(
        via.reset().await.unwrap(),
        "COM_RESET_CONNECTION is supported"
    );
    let x: Option<i64> = via.query_first("SELECT @x").await.unwrap().unwrap();
    assert_eq!(x, None, "session variables gone after reset");
    // COM_INIT_DB.
    via.query_drop("CREATE DATABASE IF NOT EXISTS app")
        .await
        .unwrap();
    via.query_drop("USE app").await.unwrap();
    let db: String = via.query_first("SELECT DATABASE()").await.unwrap().unwrap();
    assert_eq!(db, "app");
    // An unknown default database fails the first command, not silently.
    let bad = chain
        .opts(LOCAL_USER, LOCAL_PASSWORD)
        .db_name(Some("no_such_db"));
    match Conn::new(bad).await {
        Err(e) => assert!(
            e.to_string().contains("1049") || e.to_string().contains("no_such_db"),
            "{e}"
        ),
        Ok(mut c) => {
            let e = c.query_drop("SELECT 1").await.unwrap_err();
            assert!(e.to_string().contains("no_such_db"), "{e}");
        }
    }
    // Wrong local password.
    let wrong = chain.opts(LOCAL_USER, "nope");
    let e = Conn::new(wrong).await.unwrap_err().to_string();
    assert!(e.contains("1045"), "{e}");
    // A session id from KILL QUERY on an idle connection is harmless.
    let id = via.id();
    let mut killer = chain.client().await;
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let one: i64 = via.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

/// `COM_RESET_CONNECTION` (which pools send for every connection they
/// take back) gives a fresh session but keeps the default database and
/// restores the login's character set, as MariaDB does; a first command
/// that moves away from the login database is no refusal of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connection_keeps_the_database_as_mariadb_does() {
    let chain = Chain::start().await;
    let mut root = Conn::new(chain.stack.db.root_opts()).await.unwrap();
    root.query_drop("CREATE DATABASE other; GRANT ALL ON other.* TO app@localhost")
        .await
        .unwrap();
    let state = "SELECT DATABASE(), @@character_set_client, @@collation_connection, @x";
    let mut answers = Vec::new();
    for mut conn in [chain.direct().await, chain.client().await] {
        let mut seen = Vec::new();
        // Reset before any statement: still in the login database.
        assert!(conn.reset().await.unwrap());
        seen.push(text_results(&mut conn, state).await);
        conn.query_drop("USE other").await.unwrap();
        conn.query_drop("SET NAMES latin1").await.unwrap();
        conn.query_drop("SET @x = 1").await.unwrap();
        assert!(conn.reset().await.unwrap());
        seen.push(text_results(&mut conn, state).await);
        conn.query_drop("USE app").await.unwrap();
        assert!(conn.reset().await.unwrap());
        seen.push(text_results(&mut conn, state).await);
        answers.push(seen);
    }
    assert_eq!(answers[0], answers[1], "direct, then through the sidecar");
    assert!(answers[1][1].contains("other"), "{:?}", answers[1]);

    // A first command that leaves the login database keeps the connection.
    let mut via = chain.client().await;
    via.query_drop("USE other").await.unwrap();
    let db: String = via.query_first("SELECT DATABASE()").await.unwrap().unwrap();
    assert_eq!(db, "other");
}

/// A client that connects the moment the sidecar starts is greeted with
/// the backend's version, not the fallback: the greeting waits (briefly)
/// for the sidecar to learn it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_at_start_is_greeted_with_the_backend_version() {
    let chain = Chain::launch(|_| {}).await;
    let mut conn = chain.client().await;
    let direct = chain.direct().await;
    assert_eq!(conn.server_version(), direct.server_version());
    let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);

    // A gateway that never answers delays the greeting by the bound only;
    // a configured version is final, so nothing waits for it. (A MariaDB
    // version: its mysql_native_password needs no RSA key, whose
    // generation would be timed too.)
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (conn, waited) = greeting_with_gateway_down(nowhere, None).await;
    assert!(
        waited >= std::time::Duration::from_millis(1900)
            && waited < std::time::Duration::from_secs(4),
        "{waited:?}"
    );
    assert_eq!(conn.server_version(), (8, 0, 40), "the fallback version");
    let (conn, waited) = greeting_with_gateway_down(nowhere, Some("10.11.0-MariaDB-pinned")).await;
    assert!(waited < std::time::Duration::from_secs(1), "{waited:?}");
    assert_eq!(conn.server_version(), (10, 11, 0));
}

/// A fresh sidecar pointed at `gateway`, where nothing answers: a client's
/// connection, and how long its login took.
async fn greeting_with_gateway_down(
    gateway: std::net::SocketAddr,
    server_version: Option<&str>,
) -> (Conn, std::time::Duration) {
    let chain = Chain::launch(|c| {
        c.upstream.url = format!("https://localhost:{}", gateway.port());
        // Only the greeting is timed: no RSA key (made at start, slow in
        // a debug build on a loaded machine) on the login's path.
        c.auth.plugin = "mysql_native_password".into();
        if let Some(v) = server_version {
            c.server_version = v.into();
        }
    })
    .await;
    // No settings query after login: only the greeting is timed.
    let quiet = chain
        .opts(LOCAL_USER, LOCAL_PASSWORD)
        .max_allowed_packet(Some(16 << 20))
        .wait_timeout(Some(28_800));
    let start = std::time::Instant::now();
    let conn = Conn::new(quiet).await.expect("the login is local");
    (conn, start.elapsed())
}

/// `upstream.compression` decides the codecs both ways: by default (and
/// with S2 alone, as against PlanetScale's endpoint) a large result comes
/// back compressed and a large statement goes out compressed; with `[]`
/// (a sidecar next to its gateway) neither is. A gateway left to choose by
/// the link (`compression_by_link`, its default) answers this loopback
/// sidecar uncompressed, whatever it offers: there, compressing costs more
/// time than it saves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_compression_can_be_turned_off() {
    let big = format!(
        "SELECT REPEAT('abc', 10000) AS a, '{}' AS b",
        "x".repeat(4000)
    );
    for (codecs, by_link, compressed_responses, compressed_requests) in [
        (None, false, true, true),
        (Some(vec!["s2".to_string()]), false, true, true),
        (Some(Vec::new()), false, false, false),
        (None, true, false, true),
    ] {
        let gateway = Stack::start_with(|c| {
            c.limits.compression_by_link = by_link;
            // Loopback is near whatever the load: the kernel's round-trip
            // estimate includes the peer's delay in acknowledging, which
            // two busy cores can stretch past the default 3 ms.
            c.limits.near_rtt = std::time::Duration::from_secs(1);
        })
        .await;
        let chain = Chain::launch_on(gateway, |c| {
            if let Some(codecs) = codecs {
                c.upstream.compression = codecs;
            }
            if by_link {
                // The gateway takes a link as near from its round trip:
                // over HTTP/2 the kernel's (TCP_INFO, microseconds on
                // loopback whatever the load); quinn's estimate includes
                // the peers' processing, which a loaded debug build can
                // stretch past `NEAR_RTT`.
                c.upstream.transport = myquic::config::TransportPreference::Http2;
            }
        })
        .await;
        let mut conn = chain.client().await;
        let (a, _b): (String, String) = conn.query_first(big.as_str()).await.unwrap().unwrap();
        assert_eq!(a, "abc".repeat(10_000));
        let stats = chain.sidecar.client().stats();
        assert_eq!(
            stats.compressed_responses > 0,
            compressed_responses,
            "{stats:?}"
        );
        assert_eq!(
            stats.compressed_requests > 0,
            compressed_requests,
            "{stats:?}"
        );
    }
}

/// Connect + `SELECT 1` costs one upstream request: the login is local,
/// and the default database travels with the first statement (the
/// session's target) instead of in a `USE` of its own. An unknown
/// database still fails that first command, with MySQL's 1049, and ends
/// the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_select_1_is_one_upstream_request() {
    let chain = Chain::start().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !chain.sidecar.upstream_targets() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sidecar never learned that the gateway takes session targets"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // mysql_async asks the server for these two settings on connect
    // unless its options carry them: one more request each connection.
    let quiet = |db: Option<&str>| {
        chain
            .opts(LOCAL_USER, LOCAL_PASSWORD)
            .db_name(db)
            .max_allowed_packet(Some(16 << 20))
            .wait_timeout(Some(28_800))
    };
    let requests = || chain.sidecar.client().stats().requests;
    // The gateway's account defaults to `app`: a target must show as a
    // different database, and the backend account may always select
    // information_schema.
    let target = Some("information_schema");
    // The first login naming a database checks it (one request, so that
    // a database that does not exist is refused at connect); later ones
    // take it as known.
    let open = requests();
    let first = Conn::new(quiet(target)).await.expect("connects");
    assert_eq!(requests() - open, 1, "a new login database is checked once");
    first.disconnect().await.unwrap();
    while requests() < open + 2 {
        assert!(std::time::Instant::now() < deadline, "session never closed");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    for (db, default_opts) in [(target, false), (None, false), (target, true)] {
        let opts = if default_opts {
            chain.opts(LOCAL_USER, LOCAL_PASSWORD).db_name(db)
        } else {
            quiet(db)
        };
        let before = requests();
        let mut conn = Conn::new(opts).await.expect("connects");
        let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
        assert_eq!(one, 1);
        let spent = requests() - before;
        let want = if default_opts { 2 } else { 1 };
        assert_eq!(
            spent, want,
            "upstream requests for connect + SELECT 1 (db {db:?}, default options {default_opts})"
        );
        let current: Option<String> = conn
            .query_first("SELECT DATABASE()")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(current.as_deref(), Some(db.unwrap_or("app")));
        // The session is closed upstream in the background after the
        // client quits: one more request, counted before the next round.
        let open = requests();
        conn.disconnect().await.unwrap();
        while requests() < open + 1 {
            assert!(std::time::Instant::now() < deadline, "session never closed");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    let before = requests();
    let code = |e: mysql_async::Error| match e {
        mysql_async::Error::Server(e) => (e.code, e.message),
        e => panic!("not a server error: {e}"),
    };
    // Refused at connect, with what MariaDB itself says there (1044 for
    // an account without global grants, 1049 otherwise).
    let (via, message) = code(Conn::new(quiet(Some("no_such_db"))).await.unwrap_err());
    assert!(message.contains("no_such_db"), "{message}");
    let direct = OptsBuilder::default()
        .socket(Some(chain.stack.db.socket.to_string_lossy().into_owned()))
        .user(Some("app"))
        .pass(Some("app-backend-pw"))
        .db_name(Some("no_such_db"));
    let (direct, direct_message) = code(Conn::new(direct).await.unwrap_err());
    assert_eq!((via, &message), (direct, &direct_message));
    // The check's request, then (in the background) the CloseSession of
    // the session the gateway made for it.
    while requests() < before + 2 {
        assert!(std::time::Instant::now() < deadline, "session never closed");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(requests() - before, 2);
}

/// The `mariadb` client in batch mode prints exactly what it prints when
/// connected to MariaDB itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_cli_batch_mode_matches_a_direct_connection() {
    let chain = Chain::start().await;
    let script = "
        CREATE TABLE cli (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40), price DECIMAL(8,2), seen DATETIME(3), raw VARBINARY(8));
        INSERT INTO cli (name, price, seen, raw) VALUES ('tea 🍵', 3.50, '2024-01-02 03:04:05.678', X'00FF'), ('coffee', NULL, NULL, NULL);
        SELECT * FROM cli ORDER BY id;
        SELECT COUNT(*), SUM(price), MAX(seen) FROM cli;
        UPDATE cli SET price = price * 2 WHERE price IS NOT NULL;
        SELECT ROW_COUNT(), LAST_INSERT_ID();
        SELECT CAST('12abc' AS INT);
        SHOW WARNINGS;
        SELECT * FROM missing_table;
        SELECT 'after an error, with --force';
        DROP TABLE cli;
    ";
    let run = |args: Vec<String>| async move {
        let mut output = Command::new("mariadb")
            .args(["--no-defaults", "--batch", "--force", "--column-type-info"])
            .arg("--default-character-set=utf8mb4")
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the mariadb client runs");
        use tokio::io::AsyncWriteExt;
        let mut stdin = output.stdin.take().unwrap();
        stdin.write_all(script.as_bytes()).await.unwrap();
        drop(stdin);
        let output = output.wait_with_output().await.unwrap();
        (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let via = run(vec![
        format!("--socket={}", chain.socket.display()),
        format!("--user={LOCAL_USER}"),
        format!("--password={LOCAL_PASSWORD}"),
        "app".into(),
    ])
    .await;
    let direct = run(vec![
        format!("--socket={}", chain.stack.db.socket.display()),
        "--user=app".into(),
        "--password=app-backend-pw".into(),
        "app".into(),
    ])
    .await;
    assert!(via.0.contains("tea 🍵"), "{via:?}");
    assert!(via.1.contains("ERROR 1146 (42S02)"), "{via:?}");
    assert_eq!(via, direct);
}

/// Logs in by hand (open mode, mysql_native_password, empty password) so
/// that raw, broken packets can follow.
async fn raw_login(addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let greeting = read_packet(&mut s).await.1;
    assert_eq!(greeting[0], 10, "protocol 10 greeting");
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000; // PROTOCOL_41 | SECURE_CONNECTION | PLUGIN_AUTH
    let mut body = Vec::new();
    body.extend_from_slice(&caps.to_le_bytes());
    body.extend_from_slice(&(16u32 << 20).to_le_bytes());
    body.push(45);
    body.extend_from_slice(&[0; 23]);
    body.extend_from_slice(b"anyone\0");
    body.push(0); // empty auth response
    body.extend_from_slice(b"mysql_native_password\0");
    write_packet(&mut s, 1, &body).await.unwrap();
    let ok = read_packet(&mut s).await.1;
    assert_eq!(ok[0], 0, "login OK: {ok:?}");
    s
}

async fn closed(s: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut b = [0u8; 1];
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(5), s.read(&mut b)).await,
        Ok(Ok(0) | Err(_))
    )
}

fn err_code(payload: &[u8]) -> u16 {
    assert_eq!(payload[0], 0xff, "an ERR packet: {payload:?}");
    u16::from_le_bytes([payload[1], payload[2]])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_packets_get_an_error_and_a_close_and_others_go_on() {
    let chain = Chain::start_with(|c| {
        c.auth.users.clear();
        c.auth.plugin = "mysql_native_password".into();
        c.max_allowed_packet = 1 << 20;
    })
    .await;
    let addr = chain.sidecar.addr();
    // Unknown command: ERR 1047, and the connection stays usable.
    let mut s = raw_login(addr).await;
    write_packet(&mut s, 0, &[0x1d]).await.unwrap(); // COM_BINLOG_DUMP_GTID
    assert_eq!(err_code(&read_packet(&mut s).await.1), 1047);
    write_packet(&mut s, 0, &[0x0e]).await.unwrap(); // COM_PING
    assert_eq!(
        read_packet(&mut s).await.1[0],
        0,
        "still serving after 1047"
    );
    // Malformed command: ERR 1835, then the connection closes.
    write_packet(&mut s, 0, &[0x17, 1]).await.unwrap(); // truncated COM_STMT_EXECUTE
    assert_eq!(err_code(&read_packet(&mut s).await.1), 1835);
    assert!(closed(&mut s).await, "closed after a malformed packet");
    // Oversized packet: ERR 1153 as soon as the header says so, then a close.
    let mut s = raw_login(addr).await;
    use tokio::io::AsyncWriteExt;
    s.write_all(&[0xff, 0xff, 0x3f, 0, 3]).await.unwrap();
    assert_eq!(err_code(&read_packet(&mut s).await.1), 1153);
    assert!(closed(&mut s).await, "closed after an oversized packet");
    // Everyone else is unaffected.
    let mut conn = Conn::new(chain.opts("anyone", "whatever")).await.unwrap();
    let one: i64 = conn.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

/// A client that goes away inside a transaction, however it goes, must
/// not leave its row locks held until the gateway's idle timeout: its
/// session is closed at once and the backend rolls back. `BEGIN` with a
/// non-ASCII comment once panicked the connection, which then closed
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_inside_a_transaction_releases_its_locks_at_once() {
    let chain = Chain::start_with(|c| {
        c.auth.users.clear();
        c.auth.plugin = "mysql_native_password".into();
    })
    .await;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE TABLE locked (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO locked VALUES (1, 0)")
        .await
        .unwrap();
    let query = |sql: &str| [&[0x03][..], sql.as_bytes()].concat();
    let mut s = raw_login(chain.sidecar.addr()).await;
    write_packet(&mut s, 0, &query("USE app")).await.unwrap();
    assert_eq!(read_packet(&mut s).await.1[0], 0, "USE");
    for sql in [
        "BEGIN /* Привет мир */",
        "UPDATE locked SET v = 1 WHERE id = 1 -- 開始トランザクション",
    ] {
        write_packet(&mut s, 0, &query(sql)).await.unwrap();
        let reply = read_packet(&mut s).await.1;
        assert_eq!(reply[0], 0, "{sql}: {reply:?}");
    }
    drop(s); // hang up, mid-transaction
    let started = std::time::Instant::now();
    direct
        .query_drop("SET SESSION innodb_lock_wait_timeout = 10")
        .await
        .unwrap();
    direct
        .query_drop("UPDATE locked SET v = 2 WHERE id = 1")
        .await
        .expect("the row lock is released");
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(2),
        "lock held {waited:?} after the client left"
    );
    let v: i64 = direct
        .query_first("SELECT v FROM locked WHERE id = 1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v, 2, "the departed client's update was rolled back");
}

/// `LOAD DATA LOCAL INFILE` with `sidecar.local_infile` off (the
/// default): refused before it runs as by a server with `local_infile`
/// off (4166), and the client's connection and session go on
/// (`tests/local_infile.rs` compares it with such a server, and carries
/// the file when it is on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_local_is_refused_and_the_connection_goes_on() {
    let chain = Chain::start().await;
    let mut via = chain.client().await;
    via.query_drop("CREATE TABLE loaded (id INT)")
        .await
        .unwrap();
    via.query_drop("SET @kept = 7").await.unwrap();
    for sql in [
        "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE loaded",
        "/*!LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE loaded */",
    ] {
        match via.query_drop(sql).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.state.as_str()), (4166, "HY000"), "{sql}: {e:?}")
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    let kept: i64 = via.query_first("SELECT @kept").await.unwrap().unwrap();
    assert_eq!(kept, 7, "same session after the refusal");
    let rows: i64 = via
        .query_first("SELECT COUNT(*) FROM loaded")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows, 0);
}

/// `SET SESSION wait_timeout = 2`, then silence: the server closes an
/// idle connection after it (drivers' stale-connection checks expect the
/// socket to close), and so does the sidecar, closing its session too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_client_is_closed_after_the_sessions_wait_timeout() {
    let chain = Chain::start_with(|c| {
        c.auth.users.clear();
        c.auth.plugin = "mysql_native_password".into();
    })
    .await;
    let query = |sql: &str| [&[0x03][..], sql.as_bytes()].concat();
    let mut s = raw_login(chain.sidecar.addr()).await;
    write_packet(&mut s, 0, &query("SET SESSION wait_timeout = 2"))
        .await
        .unwrap();
    assert_eq!(read_packet(&mut s).await.1[0], 0, "SET");
    let idle_since = std::time::Instant::now();
    assert!(closed(&mut s).await, "closed after wait_timeout");
    let waited = idle_since.elapsed();
    assert!(
        waited >= std::time::Duration::from_millis(1900),
        "closed early: {waited:?}"
    );
}

/// What a greeting offers: the server version, whether TLS can be asked
/// for (`CLIENT_SSL`), and the authentication plugin it names.
async fn greeting(addr: std::net::SocketAddr) -> (String, bool, String) {
    const CLIENT_SSL: u16 = 0x0800;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let g = read_packet(&mut s).await.1;
    assert_eq!(g[0], 10, "protocol 10 greeting");
    let nul_after = |at: usize| at + g[at..].iter().position(|&b| b == 0).expect("NUL");
    let version_end = nul_after(1);
    // NUL, connection id, first 8 bytes of the nonce, filler.
    let caps_at = version_end + 1 + 4 + 8 + 1;
    let caps_low = u16::from_le_bytes([g[caps_at], g[caps_at + 1]]);
    // Low capabilities, charset, status, high capabilities, nonce length,
    // reserved, the nonce's other 12 bytes and their NUL.
    let plugin_at = caps_at + 2 + 1 + 2 + 2 + 1 + 10 + 13;
    let text = |from: usize, to: usize| String::from_utf8_lossy(&g[from..to]).into_owned();
    (
        text(1, version_end),
        caps_low & CLIENT_SSL != 0,
        text(plugin_at, nul_after(plugin_at)),
    )
}

/// A login over plain TCP, then `COM_CHANGE_USER` to the same account
/// (a wrong password is refused and ends the connection).
async fn log_in_and_change_user(chain: &Chain) {
    let mut conn = chain.client().await;
    let before: String = conn
        .query_first("SELECT CURRENT_USER()")
        .await
        .unwrap()
        .unwrap();
    let to = |password: &str| {
        mysql_async::ChangeUserOpts::new()
            .with_user(Some(LOCAL_USER.into()))
            .with_pass(Some(password.into()))
            .with_db_name(Some("app".into()))
    };
    conn.change_user(to(LOCAL_PASSWORD)).await.unwrap();
    let after: String = conn
        .query_first("SELECT CURRENT_USER()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, after);
    assert!(conn.change_user(to("wrong")).await.is_err());
}

/// Issue 12: a sidecar left at its defaults greets as the backend it
/// fronts would — MariaDB's `mysql_native_password`, a MySQL 8's
/// `caching_sha2_password` — and offers TLS with a certificate it made
/// itself; a plugin named in the configuration wins, and `auto_generate =
/// false` offers no TLS. `COM_CHANGE_USER` works under either plugin, and
/// caching_sha2_password's RSA key exchange (mysql_async over plain TCP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_sidecar_greets_with_its_backends_plugin_and_offers_tls() {
    let mariadb = Chain::start().await;
    let (version, tls, plugin) = greeting(mariadb.sidecar.addr()).await;
    assert!(version.contains("MariaDB"), "{version}");
    assert_eq!((tls, plugin.as_str()), (true, "mysql_native_password"));
    log_in_and_change_user(&mariadb).await;
    drop(mariadb);

    let mysql8 = Chain::launch(|c| c.server_version = "8.0.40-test".into()).await;
    let (version, tls, plugin) = greeting(mysql8.sidecar.addr()).await;
    assert_eq!(
        (version.as_str(), tls, plugin.as_str()),
        ("8.0.40-test", true, "caching_sha2_password")
    );
    log_in_and_change_user(&mysql8).await;
    drop(mysql8);

    let explicit = Chain::start_with(|c| {
        c.auth.plugin = "caching_sha2_password".into();
        c.tls.auto_generate = false;
    })
    .await;
    let (_, tls, plugin) = greeting(explicit.sidecar.addr()).await;
    assert_eq!((tls, plugin.as_str()), (false, "caching_sha2_password"));
    log_in_and_change_user(&explicit).await;
}

/// A statement larger than the gateway takes gets ER_NET_PACKET_TOO_LARGE
/// naming the limit (not "Too many connections"), is not run, and the
/// connection goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_over_the_gateways_limit_is_1153_and_the_connection_goes_on() {
    // Sent as it is, and compressed (the limit bounds the decompressed
    // body too).
    for compressed in [false, true] {
        let stack = Stack::start_with(|c| c.limits.max_request_bytes = 64 << 10).await;
        let chain = Chain::launch_on(stack, |c| {
            if !compressed {
                c.upstream.compression = Vec::new();
            }
        })
        .await;
        let mut via = chain.client().await;
        via.query_drop("CREATE TABLE big (v LONGTEXT)")
            .await
            .unwrap();
        let large = format!("INSERT INTO big VALUES ('{}')", "x".repeat(100 << 10));
        match via.query_drop(large).await {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!((e.code, e.state.as_str()), (1153, "08S01"), "{e:?}");
                assert!(e.message.contains("max_request_bytes"), "{}", e.message);
            }
            other => panic!("compressed {compressed}: {other:?}"),
        }
        let rows: i64 = via
            .query_first("SELECT COUNT(*) FROM big")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(rows, 0, "not run, and the connection goes on");
    }
}

/// A DOUBLE bound to `LIMIT ?` (as drivers send JavaScript numbers, for
/// one) limits as a server-side prepared statement does; it once became
/// `LIMIT 2e0`, a syntax error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_double_limit_parameter_limits_as_directly() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    direct
        .query_drop("CREATE TABLE lim (id INT PRIMARY KEY)")
        .await
        .unwrap();
    direct
        .query_drop("INSERT INTO lim VALUES (1), (2), (3), (4)")
        .await
        .unwrap();
    let sql = "SELECT id FROM lim ORDER BY id LIMIT ? OFFSET ?";
    let params = || (Value::Double(2.0), Value::Double(1.0));
    let want: Vec<i64> = direct.exec(sql, params()).await.unwrap();
    let got: Vec<i64> = via.exec(sql, params()).await.unwrap();
    assert_eq!(want, vec![2, 3]);
    assert_eq!(got, want);
}

/// Warnings raised inside a stored procedure, read back with SHOW
/// WARNINGS, are the backend's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_from_a_procedure_are_the_backends() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    direct
        .query_drop("CREATE PROCEDURE warn() BEGIN DECLARE y TINYINT; SET y = 'abc'; SELECT y; END")
        .await
        .unwrap();
    let mut outputs = Vec::new();
    for conn in [&mut via, &mut direct] {
        let mut out = String::new();
        for sql in [
            "CALL warn()",
            "SHOW WARNINGS",
            "SELECT CAST('1x' AS SIGNED)",
            "SHOW WARNINGS",
        ] {
            out.push_str(&format!("{sql}\n{}", text_results(conn, sql).await));
        }
        outputs.push(out);
    }
    assert_eq!(outputs[0], outputs[1]);
}

/// A warning whose message is not UTF-8 (here latin1, as
/// `character_set_results` asks; MariaDB's test `ctype_recoding` drops a
/// cp1251-named table): the gateway read `SHOW WARNINGS` into `String`s
/// and panicked, so the client lost its connection. Now it gets the
/// backend's answer, byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warning_message_that_is_not_utf8_is_the_backends() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    let mut outputs = Vec::new();
    for conn in [&mut via, &mut direct] {
        let mut out = String::new();
        for sql in [
            "SET character_set_results = latin1",
            "DROP TABLE IF EXISTS `é`",
            "SHOW WARNINGS",
        ] {
            out.push_str(&format!("{sql}\n{}", text_results(conn, sql).await));
        }
        // The message's bytes (the Debug form of a value shortens it).
        let messages: Vec<(Vec<u8>, u32, Vec<u8>)> = conn.query("SHOW WARNINGS").await.unwrap();
        out.push_str(&format!("{messages:?}"));
        outputs.push(out);
    }
    assert!(
        outputs[1].contains("warnings=1") && outputs[1].contains(", 233, 39]"),
        "directly: a note quoting the latin1 byte 0xE9 (233):\n{}",
        outputs[1]
    );
    assert_eq!(outputs[0], outputs[1]);
}

/// A column name in a character set other than UTF-8 (a latin1 alias, as
/// `SET NAMES latin1` sends it back) reaches the client as its bytes, in
/// both protocols, as directly: the psdb `Field`'s names are bytes.
#[tokio::test]
async fn column_names_that_are_not_utf8_are_the_backends() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    let mut names = Vec::new();
    for conn in [&mut via, &mut direct] {
        conn.query_drop("SET NAMES latin1").await.unwrap();
        // Latin1 text: 0xE9 is é, 0xE4 ä (and neither is UTF-8 alone).
        let sql: &[u8] = b"SELECT 1 AS `caf\xe9`, 'x' AS \"\xe4\"";
        let text = conn.query_iter(sql).await.unwrap();
        let mut seen: Vec<Vec<u8>> = text
            .columns_ref()
            .iter()
            .map(|c| c.name_ref().to_vec())
            .collect();
        drop(text);
        let statement = conn.prep(sql).await.unwrap();
        let binary = conn.exec_iter(&statement, ()).await.unwrap();
        seen.extend(binary.columns_ref().iter().map(|c| c.name_ref().to_vec()));
        drop(binary);
        names.push(seen);
    }
    assert_eq!(names[1][0], b"caf\xe9", "directly: the latin1 bytes");
    assert_eq!(names[0], names[1]);
}

/// Temporal parameters of a prepared statement are typed as the server
/// types them: `SELECT ?` with a DATETIME, a TIME and a date-only value
/// answers DATETIME and TIME columns with the same values, directly and
/// through the sidecar (they were strings: VARCHAR columns).
#[tokio::test]
async fn temporal_parameters_keep_their_types() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    let mut via = chain.client().await;
    let mut answers = Vec::new();
    for conn in [&mut via, &mut direct] {
        let statement = conn.prep("SELECT ?, ?, ?, ? < NOW()").await.unwrap();
        let params = (
            Value::Date(2024, 2, 29, 13, 14, 15, 123_456),
            Value::Time(true, 1, 2, 3, 4, 5),
            Value::Date(2024, 2, 29, 0, 0, 0, 0),
            Value::Date(2001, 1, 1, 0, 0, 0, 0),
        );
        let mut result = conn.exec_iter(&statement, params).await.unwrap();
        let types: Vec<_> = result
            .columns_ref()
            .iter()
            .map(|c| c.column_type())
            .collect();
        let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
        let values: Vec<Value> = rows[0].clone().unwrap();
        answers.push((types, values));
    }
    use mysql_async::consts::ColumnType::*;
    assert_eq!(
        answers[1].0[..3],
        [MYSQL_TYPE_DATETIME, MYSQL_TYPE_TIME, MYSQL_TYPE_DATETIME],
        "directly"
    );
    assert_eq!(answers[0], answers[1]);
}

/// `COM_STATISTICS` (`mariadb-admin status`, `mysqli::stat`, the
/// `mysql_stat()` line monitoring checks parse) answers the server's
/// line, made of the backend's own status: the same fields in the same
/// order, the same uptime. It answered the sidecar's own `Threads: N
/// Transport: Http3` before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_is_the_servers_line() {
    let chain = Chain::start().await;
    let status = |args: Vec<String>| async move {
        let output = Command::new("mariadb-admin")
            .args(["--no-defaults", "status"])
            .args(&args)
            .output()
            .await
            .expect("mariadb-admin runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout).unwrap().trim().to_string()
    };
    let direct = status(vec![
        format!("--socket={}", chain.stack.db.socket.display()),
        "--user=app".into(),
        "--password=app-backend-pw".into(),
    ])
    .await;
    let via = status(vec![
        format!("--socket={}", chain.socket.display()),
        format!("--user={LOCAL_USER}"),
        format!("--password={LOCAL_PASSWORD}"),
    ])
    .await;
    // `Name: value` pairs, two spaces apart.
    let fields = |line: &str| -> Vec<(String, f64)> {
        line.split("  ")
            .map(|field| {
                let (name, value) = field.split_once(": ").unwrap_or_else(|| panic!("{line}"));
                (
                    name.to_string(),
                    value.parse().unwrap_or_else(|_| panic!("{line}")),
                )
            })
            .collect()
    };
    let (want, got) = (fields(&direct), fields(&via));
    let names = |f: &[(String, f64)]| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(&want), "{via}\n{direct}");
    assert_eq!(want[0].0, "Uptime");
    assert!(
        (got[0].1 - want[0].1).abs() <= 5.0,
        "the same server's uptime: {via}\n{direct}"
    );
    assert!(got[1].1 >= 1.0, "{via}");
}
