//! What the gateway learns about a session after a statement, and what
//! that costs the client: the transaction state comes from the status
//! flags of the backend's OK packet, and the gateway asks the backend
//! (`SELECT @@in_transaction, …`) only after statements that may change
//! the session's variables. Its own queries are visible to the client
//! (the row number of the next warning, `Com_select`), so each case here
//! runs directly against MariaDB and through sidecar → gateway, and the
//! answers must be the same.

mod common;

use mysql_async::Conn;
use mysql_async::prelude::*;

use common::sidecar::Chain;

/// `SHOW WARNINGS` as (level, code, message) rows.
async fn warnings(conn: &mut Conn) -> Vec<(String, u32, String)> {
    conn.query("SHOW WARNINGS").await.unwrap()
}

/// MariaDB numbers a warning raised outside a row loop (a routine
/// argument's conversion) with the row counter the previous statement
/// left: after a `CALL`, the same number directly and through the sidecar
/// (MariaDB test `sp-vars`; the gateway's own SELECT after the first
/// `CALL` changed it).
#[tokio::test]
async fn warnings_after_a_call_number_rows_as_directly() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct
        .query_drop(
            "CREATE PROCEDURE session_state_p(x VARCHAR(10), y CHAR(3)) \
             READS SQL DATA BEGIN SELECT x, y FROM seq_1_to_3; END",
        )
        .await
        .unwrap();
    let mut via = chain.client().await;
    let mut seen = Vec::new();
    for conn in [&mut via, &mut direct] {
        // Not strict: the truncation is a warning, as in `sp-vars`.
        conn.query_drop("SET sql_mode = ''").await.unwrap();
        let _: Vec<(String, String)> = conn
            .query("CALL session_state_p('alpha', 'abc')")
            .await
            .unwrap();
        let _: Vec<(String, String)> = conn
            .query("CALL session_state_p('alpha', 'abcdef')")
            .await
            .unwrap();
        seen.push(warnings(conn).await);
    }
    assert!(
        seen[1].len() == 1 && seen[1][0].1 == 1265,
        "directly: one truncation warning, {:?}",
        seen[1]
    );
    assert_eq!(seen[0], seen[1], "through the sidecar");
}

/// Transaction control statements run no query of the gateway's (it
/// would count in `Com_select`), yet the session's transaction state
/// follows them; and with autocommit off a SELECT from a table opens
/// a transaction, as the OK packet's status tells.
#[tokio::test]
async fn transaction_state_follows_without_queries_of_the_gateways() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE TABLE session_state_t (a INT)")
        .await
        .unwrap();
    let mut via = chain.client().await;
    let mut answers = Vec::new();
    const READ: &str = "SELECT COUNT(*) FROM session_state_t";
    for conn in [&mut via, &mut direct] {
        let before = com_select(conn).await;
        let mut steps = Vec::new();
        for sql in [
            "BEGIN",
            "SELECT 1",
            "COMMIT",
            "START TRANSACTION",
            "ROLLBACK",
        ] {
            conn.query_drop(sql).await.unwrap();
            steps.push((sql, in_transaction(conn).await));
        }
        let selects = com_select(conn).await - before;
        // SET may change what the gateway must ask about: not counted.
        conn.query_drop("SET autocommit = 0").await.unwrap();
        for sql in [READ, "ROLLBACK", READ, "COMMIT"] {
            conn.query_drop(sql).await.unwrap();
            steps.push((sql, in_transaction(conn).await));
        }
        conn.query_drop("SET autocommit = 1").await.unwrap();
        answers.push((steps, selects));
    }
    assert_eq!(answers[1].0[0], ("BEGIN", Some(1)), "directly");
    assert_eq!(answers[1].0[5], (READ, Some(1)), "directly");
    assert_eq!(answers[0], answers[1], "through the sidecar");
}

async fn in_transaction(conn: &mut Conn) -> Option<i64> {
    conn.query_first("SELECT @@in_transaction").await.unwrap()
}

async fn com_select(conn: &mut Conn) -> u64 {
    let row: Option<(String, u64)> = conn
        .query_first("SHOW SESSION STATUS LIKE 'Com_select'")
        .await
        .unwrap();
    row.unwrap().1
}

/// A statement that fails leaves no status flags: the gateway takes the
/// transaction from a `COM_PING`'s OK packet, not from a query of its own,
/// so the row number of the next error is MariaDB's own (`sp-vars`: a
/// second failed `CALL` said "at row 1" through the sidecar).
#[tokio::test]
async fn errors_after_a_failed_call_number_rows_as_directly() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE PROCEDURE session_state_f(x CHAR(3)) BEGIN SELECT x; END")
        .await
        .unwrap();
    let mut via = chain.client().await;
    let mut seen = Vec::new();
    for conn in [&mut via, &mut direct] {
        conn.query_drop("SET sql_mode = 'STRICT_ALL_TABLES'")
            .await
            .unwrap();
        let mut errors = Vec::new();
        for _ in 0..2 {
            match conn.query_drop("CALL session_state_f('abcdef')").await {
                Err(mysql_async::Error::Server(e)) => errors.push((e.code, e.message)),
                other => panic!("CALL with a too long argument: {other:?}"),
            }
        }
        seen.push(errors);
    }
    assert_eq!(seen[1][1].0, 1406, "directly: data too long, {:?}", seen[1]);
    assert_eq!(seen[0], seen[1], "through the sidecar");
}

/// What the gateway relies on after an error: `COM_PING` answers the
/// session's status flags and leaves the diagnostics area (`SHOW
/// WARNINGS`) and `Com_select` as they were.
#[tokio::test]
async fn a_ping_leaves_warnings_and_counters_alone() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct.query_drop("BEGIN").await.unwrap();
    let selects = com_select(&mut direct).await;
    let _: Vec<i64> = direct.query("SELECT CAST('1x' AS SIGNED)").await.unwrap();
    direct.ping().await.unwrap();
    let status = direct.last_ok_packet().map(|ok| ok.status_flags());
    assert!(
        status.is_some_and(
            |s| s.contains(mysql_common::constants::StatusFlags::SERVER_STATUS_IN_TRANS)
        ),
        "the ping's OK packet tells the open transaction: {status:?}"
    );
    let after = warnings(&mut direct).await;
    assert_eq!(after.len(), 1, "the SELECT's truncation warning: {after:?}");
    assert_eq!(after[0].1, 1292);
    assert_eq!(
        com_select(&mut direct).await - selects,
        1,
        "the client's SELECT only"
    );
}

/// Statements that cannot change the session's database, character set,
/// `sql_mode` or `wait_timeout` are followed by no query of the
/// gateway's: `Com_select` counts the same as directly, and the optimizer
/// trace shows the client's statement (`range_notembedded`,
/// `reset_connection`). `SET NAMES` is read from its text.
#[tokio::test]
async fn statements_that_keep_the_session_run_no_query_of_the_gateways() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE TABLE session_state_k (a INT PRIMARY KEY)")
        .await
        .unwrap();
    let mut via = chain.client().await;
    let mut answers = Vec::new();
    for (n, conn) in [&mut via, &mut direct].into_iter().enumerate() {
        let before = com_select(conn).await;
        for sql in [
            "SET optimizer_trace = 1, @@session.optimizer_use_condition_selectivity = 4",
            &format!("CREATE PROCEDURE session_state_k{n}() BEGIN SELECT 1; SELECT 2; END"),
            &format!("DROP PROCEDURE session_state_k{n}"),
            "SET NAMES 'latin1' COLLATE 'latin1_swedish_ci'",
            "PREPARE s FROM 'SELECT a FROM session_state_k WHERE a > 1'",
            "ANALYZE TABLE session_state_k",
        ] {
            conn.query_drop(sql).await.unwrap();
        }
        conn.query_drop("EXECUTE s").await.unwrap();
        let selects = com_select(conn).await - before;
        let trace: Option<String> = conn
            .query_first("SELECT QUERY FROM information_schema.OPTIMIZER_TRACE")
            .await
            .unwrap();
        let charset: Option<(String, String)> = conn
            .query_first("SELECT @@character_set_client, @@collation_connection")
            .await
            .unwrap();
        answers.push((selects, trace, charset));
    }
    assert_eq!(answers[1].0, 1, "directly: the prepared SELECT");
    assert_eq!(answers[0], answers[1], "through the sidecar");
}

/// A new session reads the global values of the moment it connects, as a
/// fresh backend connection does, though it gets a pooled one opened
/// before a `SET GLOBAL` (`cast`, `func_json`: `max_allowed_packet`).
#[tokio::test]
async fn a_new_session_reads_the_globals_set_before_it() {
    // Granted before the gateway opens its connections: a connection
    // keeps the global privileges it logged in with.
    let db = common::MariaDb::start().await;
    let mut root = Conn::new(db.root_opts()).await.unwrap();
    root.query_drop("GRANT SUPER ON *.* TO app@localhost")
        .await
        .unwrap();
    let chain = Chain::launch_on(common::Stack::start_on(db, |_| {}).await, |_| {}).await;
    let mut via = chain.client().await;
    let old: u64 = via
        .query_first("SELECT @@max_allowed_packet")
        .await
        .unwrap()
        .unwrap();
    let new = old + 1024;
    via.query_drop(format!(
        "SET GLOBAL max_allowed_packet = {new}, @@global.net_buffer_length = 4096"
    ))
    .await
    .unwrap();
    const READ: &str = "SELECT @@max_allowed_packet, @@net_buffer_length";
    // The session that set them keeps its own values, as directly.
    let mine: Option<(u64, u64)> = via.query_first(READ).await.unwrap();
    let mut answers = Vec::new();
    // More sessions than the pool warmed connections (two).
    for _ in 0..3 {
        let mut conn = chain.client().await;
        answers.push(conn.query_first::<(u64, u64), _>(READ).await.unwrap());
    }
    let mut direct = chain.direct().await;
    let fresh: Option<(u64, u64)> = direct.query_first(READ).await.unwrap();
    assert_eq!(fresh, Some((new, 4096)), "directly");
    assert_eq!(answers, vec![fresh; 3], "new sessions through the sidecar");
    assert_ne!(mine, fresh, "the session that set them keeps its values");
}

/// A client that connects without a database finds none, as on a fresh
/// backend connection, even when the pooled connection it gets was left
/// in one by the last session (`COM_RESET_CONNECTION` keeps it:
/// `connect-no-db`).
#[tokio::test]
async fn a_session_without_a_database_finds_none() {
    use common::secret;
    use myquic::gateway::Credential;
    let stack = common::Stack::start_with(|config| {
        // One backend connection: every session gets the same one.
        config.backend.max_connections = 1;
        config.backend.warm_connections = 1;
        config.credentials.push(Credential {
            username: "nodb".into(),
            password: secret("nodb-api-secret"),
            backend_user: Some("app".into()),
            backend_password: Some(secret("app-backend-pw")),
            database: None,
        });
    })
    .await;
    let chain = Chain::launch_on(stack, |config| {
        config.upstream.username = "nodb".into();
        config.upstream.password = secret("nodb-api-secret");
    })
    .await;
    let opts = || chain.opts(common::LOCAL_USER, common::LOCAL_PASSWORD);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let mut moved = Conn::new(opts()).await.unwrap();
        moved.query_drop("USE app").await.unwrap();
        moved.disconnect().await.unwrap();
        let mut fresh = Conn::new(opts()).await.unwrap();
        let database: Option<Option<String>> =
            fresh.query_first("SELECT DATABASE()").await.unwrap();
        seen.push(database.flatten());
        fresh.disconnect().await.unwrap();
    }
    assert_eq!(seen, vec![None; 3]);
}

/// A new session has the memory of a fresh backend connection, though it
/// gets a pooled one: MariaDB grows a connection's network buffer to the
/// largest packet it has read and keeps it, and counts it in the
/// session's `memory_used`. A session that once sent a 450 KB statement
/// left its pooled connection with that much less room under
/// `max_session_mem_used`, and the next session on it got 1290 for a
/// prepared statement that a fresh connection runs (MariaDB's
/// `main.func_sformat` in `--ps-protocol`, which failed through the
/// sidecar in 2 of 3 whole runs: after earlier cases' big statements,
/// depending on which pooled connection the case's session got).
#[tokio::test]
async fn a_new_session_has_the_memory_of_a_fresh_connection() {
    let stack = common::Stack::start_with(|config| {
        // One backend connection: every session gets the same one.
        config.backend.max_connections = 1;
        config.backend.warm_connections = 1;
    })
    .await;
    let chain = Chain::launch_on(stack, |_| {}).await;
    let big = format!("SELECT LENGTH('{}')", "x".repeat(450_000));
    const LIMITED: &str = "SET max_session_mem_used = 512 * 1024";
    const SFORMAT: &str = "SELECT LENGTH(SFORMAT('{:524288}', 1))";
    let mut seen = Vec::new();
    for _ in 0..2 {
        let mut grown = chain.client().await;
        grown.query_drop(&big).await.unwrap();
        grown.disconnect().await.unwrap();
        let mut next = chain.client().await;
        next.query_drop(LIMITED).await.unwrap();
        // Prepared, as MariaDB's suite runs it in --ps-protocol: the
        // prepare is what needs the room.
        let length: Result<Option<u64>, _> = next.exec_first(SFORMAT, ()).await;
        seen.push(length.map_err(|e| e.to_string()));
        next.disconnect().await.unwrap();
    }
    let mut direct = chain.direct().await;
    direct.query_drop(LIMITED).await.unwrap();
    let fresh: Option<u64> = direct.exec_first(SFORMAT, ()).await.unwrap();
    assert_eq!(fresh, Some(524288), "directly");
    assert_eq!(seen, vec![Ok(fresh); 2], "new sessions through the sidecar");
}
