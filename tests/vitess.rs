//! The gateway in front of Vitess: `vtgate` (vttestserver, keyspace `app`
//! in two shards over MariaDB; `tests/common/vitess.rs`) as the backend,
//! the sidecar in front, and `mysql_async` as the client — compared with
//! the same client straight to vtgate. Skipped, loudly, only when Vitess
//! cannot be built here (no Go, no module proxy): `tests/run` builds it
//! first, so CI always runs this.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row, Value};

use common::sidecar::{local_user, sidecar_config_for};
use common::vitess::{KEYSPACE, Vitess, vtroot};
use common::{LOCAL_PASSWORD, LOCAL_USER, PASSWORD, USER, secret};
use myquic::gateway::{Credential, Gateway, GatewayConfig};
use myquic::sidecar::Sidecar;

/// Vitess, the gateway in front of it, and a sidecar in front of that.
struct Chain {
    vitess: Vitess,
    _gateway: Gateway,
    sidecar: Sidecar,
    _dir: tempfile::TempDir,
}

impl Chain {
    async fn start(vitess: Vitess) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("gateway.pem");
        let mut config = GatewayConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        };
        config.tls.self_signed_cert_out = Some(cert.clone());
        config.backend.address = Some(format!("127.0.0.1:{}", vitess.port));
        config.backend.warm_connections = 2;
        config.credentials = vec![Credential {
            username: USER.into(),
            password: secret(PASSWORD),
            // vttestserver's vtgate takes any user and password.
            backend_user: Some("root".into()),
            backend_password: Some(secret("unused")),
            database: Some(KEYSPACE.into()),
        }];
        let gateway = Gateway::start(config).await.expect("gateway starts");
        let users = vec![local_user(LOCAL_USER, LOCAL_PASSWORD)];
        let sidecar = Sidecar::start(sidecar_config_for(gateway.addr.port(), &cert, users))
            .await
            .expect("sidecar starts");
        // The sidecar learns the backend's version from its first request.
        for _ in 0..500 {
            if sidecar.server_version().contains("Vitess") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            sidecar.server_version().contains("Vitess"),
            "the sidecar reports vtgate's version, got {}",
            sidecar.server_version()
        );
        Self {
            vitess,
            _gateway: gateway,
            sidecar,
            _dir: dir,
        }
    }

    /// A client through the sidecar, in the keyspace.
    async fn client(&self) -> Conn {
        let opts = mysql_async::OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.sidecar.addr().port())
            .prefer_socket(false)
            .user(Some(LOCAL_USER))
            .pass(Some(LOCAL_PASSWORD))
            .db_name(Some(KEYSPACE));
        Conn::new(opts).await.expect("logs in through the sidecar")
    }

    /// A client straight to vtgate.
    async fn direct(&self) -> Conn {
        Conn::new(self.vitess.opts())
            .await
            .expect("connects to vtgate")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gateway_in_front_of_vtgate() {
    let root = match vtroot() {
        Ok(root) => root.to_path_buf(),
        Err(why) => {
            eprintln!(
                "\n\n*** SKIPPED tests/vitess.rs: Vitess could not be built here: {why} ***\n\
                 *** (tests/vitess/setup needs Go and the Go module proxy)             ***\n\n"
            );
            return;
        }
    };
    let started = Instant::now();
    let vitess = Vitess::start(&root);
    eprintln!("vttestserver started in {:?}", started.elapsed());
    let chain = Chain::start(vitess).await;

    autocommit_writes_reach_both_shards(&chain).await;
    a_transaction_across_shards_commits_or_rolls_back(&chain).await;
    errors_are_vtgates_own(&chain).await;
    status_flags_follow_the_session(&chain).await;
    prepared_statements_answer_as_directly(&chain).await;
    a_large_result_streams_as_directly(&chain).await;
    kill_query_stops_an_autocommit_statement(&chain).await;
    kill_query_inside_a_transaction_rolls_it_back(&chain).await;
}

/// The ids (1–100) of `t` in a shard, read straight from vtgate with a
/// shard-targeted `USE`.
async fn ids_in_shard(chain: &Chain, shard: &str) -> Vec<i64> {
    let mut direct = chain.direct().await;
    direct
        .query_drop(format!("USE `{KEYSPACE}:{shard}`"))
        .await
        .unwrap();
    direct
        .query("SELECT id FROM t WHERE id BETWEEN 1 AND 100 ORDER BY id")
        .await
        .unwrap()
}

async fn autocommit_writes_reach_both_shards(chain: &Chain) {
    let mut client = chain.client().await;
    for id in 1..=20_i64 {
        let r = client
            .exec_drop(
                "INSERT INTO t (id, v) VALUES (?, ?)",
                (id, format!("v{id}")),
            )
            .await;
        r.unwrap_or_else(|e| panic!("insert {id} through the sidecar: {e}"));
        assert_eq!(client.affected_rows(), 1);
    }
    client
        .query_drop("UPDATE t SET v = CONCAT(v, '!') WHERE id BETWEEN 1 AND 20")
        .await
        .unwrap();
    assert_eq!(
        client.affected_rows(),
        20,
        "a scatter update counts every shard"
    );
    let low = ids_in_shard(chain, "-80").await;
    let high = ids_in_shard(chain, "80-").await;
    assert!(
        !low.is_empty() && !high.is_empty(),
        "rows on both shards: -80 {low:?}, 80- {high:?}"
    );
    assert_eq!(low.len() + high.len(), 20);
    // The scatter read through the sidecar equals the direct one.
    let sql = "SELECT id, v FROM t WHERE id BETWEEN 1 AND 20 ORDER BY id";
    let through: Vec<(i64, String)> = client.query(sql).await.unwrap();
    let direct: Vec<(i64, String)> = chain.direct().await.query(sql).await.unwrap();
    assert_eq!(through.len(), 20);
    assert_eq!(through, direct);
    assert_eq!(through[0], (1, "v1!".to_string()));
}

/// Two ids on different shards: found in `t`, and so of `bank` too (both
/// are sharded by the same hash of `id`).
async fn ids_on_two_shards(chain: &Chain) -> (i64, i64) {
    let low = ids_in_shard(chain, "-80").await;
    let high = ids_in_shard(chain, "80-").await;
    (low[0], high[0])
}

async fn a_transaction_across_shards_commits_or_rolls_back(chain: &Chain) {
    let (a, b) = ids_on_two_shards(chain).await;
    let mut client = chain.client().await;
    client
        .exec_drop(
            "INSERT INTO bank (id, balance) VALUES (?, 100), (?, 100)",
            (a, b),
        )
        .await
        .unwrap();
    let transfer = |amount: i64| {
        format!(
            "UPDATE bank SET balance = balance - {amount} WHERE id = {a}; \
             UPDATE bank SET balance = balance + {amount} WHERE id = {b}"
        )
    };
    // `a`'s and `b`'s balances as the rows of `balances` (ordered by id).
    let expect = |of_a: i64, of_b: i64| {
        let mut rows = vec![(a, of_a), (b, of_b)];
        rows.sort();
        rows
    };
    let balances = async |conn: &mut Conn| -> Vec<(i64, i64)> {
        conn.exec(
            "SELECT id, balance FROM bank WHERE id IN (?, ?) ORDER BY id",
            (a, b),
        )
        .await
        .unwrap()
    };

    client.query_drop("BEGIN").await.unwrap();
    for statement in transfer(30).split("; ") {
        client.query_drop(statement).await.unwrap();
    }
    let in_tx: i64 = client
        .query_first("SELECT @@in_transaction")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(in_tx, 1);
    // Not visible to others before COMMIT ...
    let mut direct = chain.direct().await;
    assert_eq!(balances(&mut direct).await, expect(100, 100));
    client.query_drop("COMMIT").await.unwrap();
    // ... and on both shards after it.
    assert_eq!(balances(&mut direct).await, expect(70, 130));

    client.query_drop("START TRANSACTION").await.unwrap();
    for statement in transfer(50).split("; ") {
        client.query_drop(statement).await.unwrap();
    }
    assert_eq!(balances(&mut client).await, expect(20, 180));
    client.query_drop("ROLLBACK").await.unwrap();
    assert_eq!(balances(&mut direct).await, expect(70, 130));
    assert_eq!(balances(&mut client).await, expect(70, 130));
}

/// The error a statement gets, as (errno, SQLSTATE, message).
async fn error_of(conn: &mut Conn, sql: &str) -> (u16, String, String) {
    match conn.query_drop(sql).await {
        Err(mysql_async::Error::Server(e)) => (e.code, e.state, e.message),
        other => panic!("{sql}: expected a server error, got {other:?}"),
    }
}

async fn errors_are_vtgates_own(chain: &Chain) {
    let mut client = chain.client().await;
    let mut direct = chain.direct().await;
    let statements = [
        // A duplicate key on one shard (vttablet's error inside vtgate's).
        "INSERT INTO t (id, v) VALUES (1, 'again')",
        // vtgate's own parser.
        "SELEC 1",
        "SELECT * FROM no_such_table",
        // Settings vtgate refuses.
        "SET sql_mode = 'ANSI_QUOTES'",
        // Not a sidecar connection id: passed on, and vtgate refuses KILL.
        "KILL QUERY 4000000000",
        // A table vtgate cannot place.
        "INSERT INTO t (v) VALUES ('no id')",
        "SELECT 1 FROM t WHERE no_such_column = 1",
    ];
    let mut seen = Vec::new();
    for sql in statements {
        let through = error_of(&mut client, sql).await;
        let straight = error_of(&mut direct, sql).await;
        assert_eq!(through, straight, "{sql}");
        seen.push((through.0, through.1));
    }
    // vtgate's numbers, not MariaDB's (which answers 1064 and 1146).
    assert_eq!(seen[0], (1062, "23000".into()));
    assert_eq!(seen[1], (1105, "HY000".into()));
    assert_eq!(seen[3].0, 1235);
    assert_eq!(seen[4].0, 1095);
    // The session goes on after each.
    let one: i64 = client.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

/// `SERVER_STATUS_IN_TRANS` and `SERVER_STATUS_AUTOCOMMIT` of the last OK.
fn status(conn: &Conn) -> (bool, bool) {
    use mysql_common::constants::StatusFlags;
    let flags = conn.last_ok_packet().expect("an OK packet").status_flags();
    (
        flags.contains(StatusFlags::SERVER_STATUS_IN_TRANS),
        flags.contains(StatusFlags::SERVER_STATUS_AUTOCOMMIT),
    )
}

async fn status_flags_follow_the_session(chain: &Chain) {
    let mut client = chain.client().await;
    let mut direct = chain.direct().await;
    let steps = [
        "SELECT 1",
        "BEGIN",
        "INSERT INTO t (id, v) VALUES (50, 'tx')",
        "COMMIT",
        "SET autocommit = 0",
        "INSERT INTO t (id, v) VALUES (51, 'implicit tx')",
        "ROLLBACK",
        "SET autocommit = 1",
        "DELETE FROM t WHERE id IN (50, 51)",
    ];
    for sql in steps {
        client.query_drop(sql).await.unwrap();
        direct
            .query_drop(sql.replace("50", "60").replace("51", "61"))
            .await
            .unwrap();
        assert_eq!(status(&client), status(&direct), "after {sql}");
    }
    // The row written with autocommit off was rolled back.
    let count: i64 = direct
        .query_first("SELECT COUNT(*) FROM t WHERE id IN (50, 51, 60, 61)")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count, 0);
    // The session's variables as vtgate answers them.
    let sql = "SELECT @@autocommit, @@in_transaction, DATABASE()";
    let through: Row = client.query_first(sql).await.unwrap().unwrap();
    let straight: Row = direct.query_first(sql).await.unwrap().unwrap();
    assert_eq!(through.unwrap(), straight.unwrap());
}

async fn prepared_statements_answer_as_directly(chain: &Chain) {
    let mut client = chain.client().await;
    let mut direct = chain.direct().await;
    let sql = "SELECT id, v, id * 2, ? FROM t WHERE id BETWEEN ? AND ? ORDER BY id";
    let params = ("tag", 3_i64, 12_i64);
    let through: Vec<Row> = client.exec(sql, params).await.unwrap();
    let straight: Vec<Row> = direct.exec(sql, params).await.unwrap();
    assert_eq!(through.len(), 10);
    let values = |rows: Vec<Row>| rows.into_iter().map(Row::unwrap).collect::<Vec<_>>();
    assert_eq!(values(through), values(straight));
    // A statement prepared once, run several times, and a NULL parameter.
    let stmt = client
        .prep("UPDATE t SET v = ? WHERE id = ?")
        .await
        .unwrap();
    for id in [3_i64, 4, 5] {
        client.exec_drop(&stmt, (Value::NULL, id)).await.unwrap();
        assert_eq!(client.affected_rows(), 1);
    }
    client.close(stmt).await.unwrap();
    let nulls: i64 = direct
        .query_first("SELECT COUNT(*) FROM t WHERE id IN (3, 4, 5) AND v IS NULL")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(nulls, 3);
}

async fn a_large_result_streams_as_directly(chain: &Chain) {
    let mut client = chain.client().await;
    const ROWS: i64 = 20_000;
    let value = "x".repeat(200);
    for batch in 0..(ROWS / 1000) {
        let values: Vec<String> = (0..1000)
            .map(|i| format!("({}, '{value}{i}')", 1000 + batch * 1000 + i))
            .collect();
        client
            .query_drop(format!("INSERT INTO t (id, v) VALUES {}", values.join(",")))
            .await
            .unwrap();
    }
    // A tablet refuses a result of over 10 000 rows (1317 "Row count
    // exceeded 10000") unless the session streams: vtgate's OLAP workload.
    let mut direct = chain.direct().await;
    for conn in [&mut client, &mut direct] {
        conn.query_drop("SET workload = 'olap'").await.unwrap();
    }
    let sql = "SELECT id, v FROM t WHERE id >= 1000 ORDER BY id";
    let started = Instant::now();
    let through: Vec<(i64, Vec<u8>)> = client.query(sql).await.unwrap();
    let elapsed = started.elapsed();
    let straight: Vec<(i64, Vec<u8>)> = direct.query(sql).await.unwrap();
    assert_eq!(through.len(), ROWS as usize);
    assert!(
        through == straight,
        "the rows through the sidecar equal vtgate's"
    );
    let bytes: usize = through.iter().map(|(_, v)| v.len() + 8).sum();
    eprintln!(
        "{ROWS} rows ({} KiB) through the sidecar from vtgate in {elapsed:?}",
        bytes / 1024
    );
}

/// Waits until MariaDB, under the tablets, runs `want` statements that
/// name `marker` (polled, as its processlist is the only place to see it).
async fn running_at_mariadb(chain: &Chain, marker: &str, want: u64) {
    let mut mariadb = chain.vitess.mariadb().await;
    let start = Instant::now();
    loop {
        let running: u64 = mariadb
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                 WHERE COMMAND = 'Query' AND INFO LIKE CONCAT('%', ?, '%') \
                 AND INFO NOT LIKE '%PROCESSLIST%'",
                (marker,),
            )
            .await
            .unwrap()
            .unwrap();
        if running == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{running} statements naming {marker} at MariaDB, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The time a client's `SELECT SLEEP(seconds) AS marker` takes to end
/// after another client of the sidecar kills it, and how it ended.
async fn killed(
    chain: &Chain,
    victim: &mut Conn,
    seconds: u32,
    marker: &str,
) -> (Duration, mysql_async::Error) {
    let id = victim.id();
    let sql = format!("SELECT SLEEP({seconds}) AS {marker} FROM t WHERE id = 1");
    let running = victim.query_drop(&sql);
    tokio::pin!(running);
    tokio::select! {
        ended = &mut running => panic!("{sql} ended before it was killed: {ended:?}"),
        () = running_at_mariadb(chain, marker, 1) => {}
    }
    let mut killer = chain.client().await;
    let asked = Instant::now();
    killer
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .expect("the sidecar kills its own connection's statement");
    let ended = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the killed statement ends within 10 s");
    (
        asked.elapsed(),
        ended.expect_err("a killed statement fails"),
    )
}

async fn kill_query_stops_an_autocommit_statement(chain: &Chain) {
    let mut victim = chain.client().await;
    let (took, error) = killed(chain, &mut victim, 20, "autocommit_victim").await;
    let mysql_async::Error::Server(e) = error else {
        panic!("a server error, got {error:?}");
    };
    assert_eq!((e.code, e.state.as_str()), (1317, "70100"), "{}", e.message);
    eprintln!("KILL QUERY of an autocommit statement at vtgate: answered in {took:?}");
    // vtgate cannot stop it: it runs on at MariaDB (and ends by itself).
    assert!(
        took < Duration::from_secs(5),
        "answered without waiting for SLEEP(20)"
    );
    // The connection goes on, on a new backend connection.
    let one: i64 = victim.query_first("SELECT 1").await.unwrap().unwrap();
    assert_eq!(one, 1);
}

async fn kill_query_inside_a_transaction_rolls_it_back(chain: &Chain) {
    let mut victim = chain.client().await;
    victim.query_drop("BEGIN").await.unwrap();
    victim
        .query_drop("INSERT INTO t (id, v) VALUES (90, 'never committed')")
        .await
        .unwrap();
    let (took, error) = killed(chain, &mut victim, 3, "transaction_victim").await;
    eprintln!("KILL QUERY inside a transaction at vtgate: answered in {took:?}");
    // The statement's own answer is the sidecar's, as from MariaDB ...
    let mysql_async::Error::Server(e) = error else {
        panic!("a server error, got {error:?}");
    };
    assert_eq!(e.code, 1317, "{}", e.message);
    // ... but vtgate could not kill it, so the gateway gave its backend
    // connection up, and the transaction is gone: the next statement gets
    // 1927 and the sidecar closes the connection, so the client cannot go
    // on (and COMMIT) as if its insert were pending.
    match victim
        .query_drop("INSERT INTO t (id, v) VALUES (91, 'after')")
        .await
    {
        Err(mysql_async::Error::Server(e)) => {
            assert_eq!((e.code, e.state.as_str()), (1927, "70100"), "{}", e.message)
        }
        other => panic!("errno 1927, got {other:?}"),
    }
    assert!(
        victim.query_drop("COMMIT").await.is_err(),
        "the connection is closed after its transaction was lost"
    );
    // The insert was rolled back: the same id can be inserted (waiting on
    // its row lock until vtgate has rolled back, when the killed statement
    // ends at the backend), and never appears committed.
    let mut direct = chain.direct().await;
    direct
        .query_drop("INSERT INTO t (id, v) VALUES (90, 'after the rollback')")
        .await
        .expect("the killed transaction's row lock is released by a rollback");
    let v: String = direct
        .query_first("SELECT v FROM t WHERE id = 90")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v, "after the rollback");
    let after: Option<i64> = direct
        .query_first("SELECT id FROM t WHERE id = 91")
        .await
        .unwrap();
    assert_eq!(after, None, "nothing ran after the transaction was lost");
}
