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
