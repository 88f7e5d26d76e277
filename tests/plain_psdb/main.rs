//! Our sidecar against a psdb server that is not our gateway
//! ([`server::PlainPsdb`]: PlanetScale's documented stream shape, none of
//! our extensions), with a real MySQL client (mysql_async) and a real
//! MariaDB behind it. Differential: every answer is compared with the same
//! statement run directly against the same MariaDB.
//!
//! - `single_results_are_exact`: statements of one result each, text and
//!   binary protocol (Prepare, then StreamExecute with bind variables),
//!   errors with their numbers, warnings, a transaction, a result that
//!   spans many messages.
//! - `what_cannot_be_carried_fails_clearly`: multi-statements and a
//!   procedure's several result sets, which a stream without
//!   end-of-result markers cannot delimit, end with an error that says so
//!   (never with results cut or merged); the connection goes on.

#[path = "../common/mod.rs"]
mod common;
mod server;

use std::time::Duration;

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Value};

use common::MariaDb;
use common::results::{binary_results, text_results};
use common::sidecar::local_user;
use common::{LOCAL_PASSWORD, LOCAL_USER, secret};
use myquic::config::TransportPreference;
use myquic::sidecar::{Sidecar, SidecarConfig};
use server::PlainPsdb;

struct Setup {
    db: MariaDb,
    psdb: PlainPsdb,
    sidecar: Sidecar,
}

impl Setup {
    async fn start() -> Self {
        let db = MariaDb::start().await;
        let psdb = PlainPsdb::start(&db.socket).await;
        let mut config = SidecarConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..Default::default()
        };
        config.auth.users = vec![local_user(LOCAL_USER, LOCAL_PASSWORD)];
        config.upstream.url = format!("https://localhost:{}", psdb.addr.port());
        config.upstream.ca = Some(psdb.cert.clone());
        config.upstream.username = server::USER.into();
        config.upstream.password = secret(server::PASSWORD);
        config.upstream.transport = TransportPreference::Http2;
        let sidecar = Sidecar::start(config).await.expect("sidecar starts");
        // The start-up probe learns the backend's version from the server.
        for _ in 0..500 {
            if sidecar.server_version().contains("MariaDB") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            sidecar.server_version().contains("MariaDB"),
            "version learned from a plain psdb server"
        );
        Self { db, psdb, sidecar }
    }

    /// A mysql_async client through the sidecar (multi-statements on, as
    /// mysql_async negotiates by default).
    async fn client(&self) -> Conn {
        let opts = OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(self.sidecar.addr().port())
            .prefer_socket(false)
            .user(Some(LOCAL_USER))
            .pass(Some(LOCAL_PASSWORD))
            .db_name(Some("app"));
        tokio::time::timeout(Duration::from_secs(10), Conn::new(opts))
            .await
            .expect("login answered")
            .expect("logs in through the sidecar")
    }
}

const TABLE: &str = "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(20) UNIQUE, \
                     n INT, d DECIMAL(10,2), b BLOB, at DATETIME(3), j JSON)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_results_are_exact() {
    let setup = Setup::start().await;
    let mut direct = setup.db.direct().await;
    let mut via = setup.client().await;
    let script = [
        "INSERT INTO t (v, n, d, b, at, j) VALUES ('a', 1, 1.5, X'00ff', '2024-02-29 23:59:59.123', '{\"k\": 1}'), \
         ('b', 2, -2.25, NULL, NULL, '[]'), ('c', NULL, 0, '', '1970-01-01', 'null')",
        "SELECT * FROM t ORDER BY id",
        "SELECT * FROM t WHERE id < 0",
        "SELECT 1, 'two', 3.5, NULL, X'41', NOW() = NOW()",
        "UPDATE t SET n = n + 1",
        "UPDATE t SET n = n WHERE v = 'b'",
        // Not ROW_COUNT(): the server's session counts matched rows
        // (PlanetScale's default, which only a myquic gateway can be
        // asked to change); the OK packet's count is the client's.
        "SELECT LAST_INSERT_ID(), FOUND_ROWS()",
        "INSERT INTO t (v) VALUES ('a')",
        "SELEC 1",
        "SELECT * FROM missing",
        "SELECT CAST('x' AS SIGNED)",
        "SHOW WARNINGS",
        "BEGIN",
        "INSERT INTO t (v, n) VALUES ('tx', 7)",
        "SELECT @@in_transaction, COUNT(*) FROM t",
        "ROLLBACK",
        "SELECT seq, REPEAT(CHAR(65 + seq % 26), seq % 50) FROM seq_1_to_1000",
        "DELETE FROM t WHERE v = 'c'",
        "SELECT v, n FROM t ORDER BY id",
    ];
    let mut outputs = Vec::new();
    for conn in [&mut via, &mut direct] {
        conn.query_drop("DROP TABLE IF EXISTS t").await.unwrap();
        conn.query_drop(TABLE).await.unwrap();
        let mut out = Vec::new();
        for sql in script {
            out.push(format!("{sql}\n{}", text_results(conn, sql).await));
        }
        let prepared: [(&str, Vec<Value>); 4] = [
            (
                "SELECT * FROM t WHERE id > ? ORDER BY id",
                vec![Value::Int(0)],
            ),
            // Parameters where they do not name a column: a selected `?`
            // is named by its literal (as through our gateway).
            (
                "SELECT v, n, d FROM t WHERE v = ? OR n = ? OR d = ?",
                vec![Value::from("a"), Value::Int(9), Value::Double(-2.25)],
            ),
            (
                "INSERT INTO t (v, n) VALUES (?, ?)",
                vec![Value::from("p"), Value::Int(9)],
            ),
            ("SELECT * FROM missing WHERE id = ?", vec![Value::Int(1)]),
        ];
        for (sql, params) in prepared {
            out.push(format!(
                "{sql}\n{}",
                binary_results(conn, sql, params).await
            ));
        }
        outputs.push(out);
    }
    for (got, expected) in outputs[0].iter().zip(&outputs[1]) {
        assert_eq!(got, expected);
    }
    assert!(outputs[0][7].contains("1062"), "{}", outputs[0][7]);
    // Parameter definitions are our gateway's extension: from this server
    // each parameter is described unbound, as `?` (README, Known limits),
    // where MariaDB names a selected one by its alias.
    let mut names = Vec::new();
    for conn in [&mut via, &mut direct] {
        let stmt = conn.prep("SELECT ? AS a").await.unwrap();
        names.push(stmt.params()[0].name_str().into_owned());
        conn.close(stmt).await.unwrap();
    }
    assert_eq!(names, ["?", "a"]);
    let calls = setup.psdb.calls.lock().unwrap().clone();
    assert!(
        calls.iter().any(|c| c == "StreamExecute") && calls.iter().any(|c| c == "Prepare"),
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_cannot_be_carried_fails_clearly() {
    let setup = Setup::start().await;
    let mut direct = setup.db.direct().await;
    direct
        .query_drop("CREATE PROCEDURE two() BEGIN SELECT 1 AS a; SELECT 2 AS b; END")
        .await
        .unwrap();
    let mut via = setup.client().await;
    for sql in ["SELECT 1; SELECT 2", "CALL two()"] {
        let text = text_results(&mut via, sql).await;
        assert!(
            text.contains("error:") && text.contains("psdb server"),
            "{sql}: {text}"
        );
        // The connection goes on.
        let one: Option<i64> = via.query_first("SELECT 1").await.unwrap();
        assert_eq!(one, Some(1));
    }
}
