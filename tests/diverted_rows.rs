//! The rows of a text result cross from the backend's packets straight
//! into the gateway's messages (the relay diverts them from the gateway's
//! driver: README, "Extended column metadata"). Every result set through
//! the sidecar is compared with MariaDB's own, cell by cell and in order:
//! a row lost, duplicated or moved, a NULL taken for an empty string, a
//! multi-result's rows in the wrong set or a row over 16 MiB cut would
//! differ; and the connection goes on as before after each, after an
//! error mid-result included.

mod common;

use mysql_async::prelude::*;
use mysql_async::{Conn, Row, Value};

use common::sidecar::Chain;

type Sets = Vec<Vec<Vec<Option<Vec<u8>>>>>;
type Answer = Result<Vec<Vec<u8>>, String>;

const SETUP: &[&str] = &[
    "DROP TABLE IF EXISTS dr",
    "CREATE TABLE dr (id INT PRIMARY KEY, a VARCHAR(50) NULL, b TEXT NULL, c INT NULL)",
    // NULLs, empty strings and values of many lengths, in a pattern that
    // makes every row different from its neighbours.
    "INSERT INTO dr SELECT seq, \
       CASE WHEN seq % 7 = 0 THEN NULL WHEN seq % 5 = 0 THEN '' ELSE CONCAT('v', seq) END, \
       CASE WHEN seq % 11 = 0 THEN NULL ELSE REPEAT(CHAR(65 + seq % 26), seq % 300) END, \
       CASE WHEN seq % 3 = 0 THEN NULL ELSE seq * 7 END \
     FROM seq_1_to_6000",
    "DROP PROCEDURE IF EXISTS dr_two",
    "CREATE PROCEDURE dr_two() BEGIN \
       SELECT id, a FROM dr WHERE id <= 300 ORDER BY id; \
       SELECT b, c FROM dr WHERE id BETWEEN 290 AND 310 ORDER BY id; END",
];

const QUERIES: &[&str] = &[
    "SELECT * FROM dr ORDER BY id",
    "SELECT * FROM dr ORDER BY id DESC LIMIT 10; SELECT NULL, '', 'x'; DO 1; \
     SELECT a, c FROM dr WHERE id < 100 ORDER BY id; SELECT id FROM dr WHERE id < 0",
    "CALL dr_two()",
    "CALL dr_two(); SELECT b FROM dr WHERE id = 299",
    // An error after a set with rows, in the same statement.
    "SELECT id, b FROM dr WHERE id < 50 ORDER BY id; SELECT nope FROM dr; SELECT 1",
    // A row over 16 MiB (two packets), between short cells.
    "SELECT 'head' AS h, REPEAT('x', 17000000) AS big, NULL AS n, '' AS e, 'tail' AS t \
     UNION ALL SELECT 'next', 'y', NULL, '', NULL",
    "SELECT CAST('1x' AS INT) AS w, a FROM dr WHERE id < 4 ORDER BY id",
];

/// Every result set of `sql` (an error ends the list, as its text), and
/// what `SELECT 2` on the same connection gives after it (twice: the
/// driver may still hold a later statement's error for the first).
async fn results(conn: &mut Conn, sql: &str) -> (Sets, Option<String>, Vec<Answer>) {
    let mut sets = Sets::new();
    let mut error = None;
    match conn.query_iter(sql).await {
        Ok(mut result) => {
            while !result.is_empty() {
                match result.collect::<Row>().await {
                    Ok(rows) => sets.push(rows.into_iter().map(cells).collect()),
                    Err(e) => {
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        Err(e) => error = Some(e.to_string()),
    }
    let mut after = Vec::new();
    for _ in 0..2 {
        after.push(conn.query("SELECT 2").await.map_err(|e| e.to_string()));
    }
    (sets, error, after)
}

fn cells(row: Row) -> Vec<Option<Vec<u8>>> {
    row.unwrap()
        .into_iter()
        .map(|value| match value {
            Value::NULL => None,
            Value::Bytes(bytes) => Some(bytes),
            other => panic!("a text row's cell is bytes or NULL: {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diverted_rows_are_the_servers_in_order() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    for sql in SETUP {
        direct.query_drop(*sql).await.unwrap();
    }
    let mut via = chain.client().await;
    for sql in QUERIES {
        let want = results(&mut direct, sql).await;
        let got = results(&mut via, sql).await;
        let shape = |(sets, error, _): &(Sets, Option<String>, _)| {
            (sets.iter().map(Vec::len).collect::<Vec<_>>(), error.clone())
        };
        assert_eq!(shape(&got), shape(&want), "{sql}");
        assert!(got == want, "{sql}: the rows differ");
    }
    // The first query's every row, and the big one, were really there.
    let (sets, _, _) = results(&mut via, QUERIES[0]).await;
    assert_eq!(sets[0].len(), 6000);
    let (sets, _, _) = results(&mut via, QUERIES[5]).await;
    assert_eq!(sets[0][0][1].as_ref().map(Vec::len), Some(17_000_000));
}

/// Rows that come slowly: the statement is still running, its rows
/// diverted, when it is stopped.
const SLOW: &str =
    "SELECT seq, REPEAT('x', 2000), SLEEP(0.002) AS slow_diverted FROM seq_1_to_20000";

fn request(sql: &str) -> myquic::api::pb::ExecuteRequest {
    myquic::api::pb::ExecuteRequest {
        query: bytes::Bytes::copy_from_slice(sql.as_bytes()),
        ..Default::default()
    }
}

/// The error a stream ended with, in its last message or its end.
fn stream_error(
    ended: Result<Vec<myquic::api::pb::ExecuteResponse>, myquic::api::ApiError>,
) -> String {
    match ended {
        Err(e) => e.message,
        Ok(messages) => messages
            .iter()
            .find_map(|m| m.error.as_ref())
            .map(|e| String::from_utf8_lossy(&e.message).into_owned())
            .unwrap_or_default(),
    }
}

/// The gateway's query_timeout stops a statement mid-rows, with 1317 as
/// before, and the session's next statement runs on the same connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_mid_rows_is_1317_and_the_session_goes_on() {
    use common::{Stack, Version, error_message, scalar};
    use myquic::api::Codec;
    let stack = Stack::start_with(|c| {
        c.limits.query_timeout = std::time::Duration::from_millis(500);
    })
    .await;
    let client = stack.client(Version::H2, Codec::Proto).await;
    let resp = client.execute(None, SLOW).await;
    let msg = error_message(&resp);
    assert!(
        msg.contains("query_timeout") && msg.contains("(errno 1317)"),
        "{msg}"
    );
    let after = client.execute(resp.session.as_ref(), "SELECT 1").await;
    assert_eq!(scalar(&after).as_deref(), Some("1"));
    let ended = client.stream(&request(SLOW), |_, _| true).await;
    let msg = stream_error(ended);
    assert!(
        msg.contains("query_timeout") && msg.contains("(errno 1317)"),
        "{msg}"
    );
}

/// The backend connection killed mid-rows: the stream ends with an
/// error, rather than waiting for rows that will not come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_connection_killed_mid_rows_ends_the_stream() {
    use common::{Stack, Version};
    use myquic::api::Codec;
    let stack = Stack::start().await;
    let mut root = mysql_async::Conn::new(stack.db.root_opts()).await.unwrap();
    let client = stack.client(Version::H2, Codec::Proto).await;
    let (rows_came, came) = tokio::sync::oneshot::channel();
    let mut rows_came = Some(rows_came);
    let slow = request(SLOW);
    let stream = client.stream(&slow, |_, message| {
        if message.result.as_ref().is_some_and(|r| !r.rows.is_empty()) {
            rows_came.take().map(|tx| tx.send(()));
        }
        message.error.is_some()
    });
    let kill = async {
        came.await.unwrap();
        let id: u64 = root
            .query_first(
                "SELECT ID FROM information_schema.PROCESSLIST \
                 WHERE INFO LIKE '%slow_diverted%' AND ID <> CONNECTION_ID()",
            )
            .await
            .unwrap()
            .expect("the statement runs");
        root.query_drop(format!("KILL CONNECTION {id}"))
            .await
            .unwrap();
    };
    let (ended, ()) = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        tokio::join!(stream, kill)
    })
    .await
    .expect("the stream ends once its backend connection is killed");
    let msg = stream_error(ended);
    assert!(!msg.is_empty(), "the stream ended with an error");
    eprintln!("killed mid-rows: {msg}");
}
