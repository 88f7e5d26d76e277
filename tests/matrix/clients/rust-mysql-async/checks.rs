//! The Rust client of the matrix: `mysql_async`, run inside the harness
//! (tests/matrix.rs) rather than as a program of its own, so CI compiles
//! nothing extra: the crate is already a dependency. Same contract as the
//! other clients: the `MQ_*` environment in, one JSON line per check out.

use std::collections::HashMap;

use mysql_async::prelude::*;
use mysql_async::{
    Column, Conn, Error, OptsBuilder, Params, Pool, PoolConstraints, PoolOpts, Row, SslOpts,
    TxOpts, Value,
};
use serde_json::{Value as Json, json};
use sha2::{Digest, Sha256};

const P: &str = "rust_mysql_async";

type Env = HashMap<String, String>;

/// Every check, each as one contract line.
pub async fn run(env: &Env) -> Vec<String> {
    let mut lines = Vec::new();
    let mut report = |check: &str, outcome: Result<Json, String>| {
        let line = match outcome {
            Ok(answer) => json!({"check": check, "answer": answer}),
            Err(e) if e.starts_with("skip: ") => json!({"check": check, "skip": &e[6..]}),
            Err(e) => json!({"check": check, "error": e}),
        };
        lines.push(line.to_string());
    };
    // `connect` first: on a fresh sidecar it is the caching_sha2_password
    // full authentication (RSA key exchange over plain TCP).
    report("connect", connect(env).await);
    report("tls", tls(env).await);
    report("types_text", types(env, false).await);
    report("types_prepared", types(env, true).await);
    report("transactions", transactions(env).await);
    report("errors", errors(env).await);
    report("procedure", procedure(env).await);
    report("multi_statement", multi_statement(env).await);
    report("large_result", large_result(env).await);
    report("last_insert_id", last_insert_id(env).await);
    report("switch_database", switch_database(env).await);
    report("pool_reset_ping", pool_reset_ping(env).await);
    report(
        "cursor",
        Err("skip: mysql_async never opens server-side cursors".into()),
    );
    lines
}

fn opts(env: &Env) -> OptsBuilder {
    OptsBuilder::default()
        .ip_or_hostname(env["MQ_HOST"].clone())
        .tcp_port(env["MQ_PORT"].parse().expect("MQ_PORT"))
        // Otherwise mysql_async moves to the server's unix socket.
        .prefer_socket(false)
        .user(Some(env["MQ_USER"].clone()))
        .pass(Some(env["MQ_PASSWORD"].clone()))
        .db_name(Some(env["MQ_DATABASE"].clone()))
}

async fn conn(env: &Env) -> Result<Conn, String> {
    Conn::new(opts(env)).await.map_err(|e| e.to_string())
}

fn err(e: Error) -> String {
    e.to_string()
}

/// A value as mysql_async returns it: its variant and content.
fn value(v: &Value) -> Json {
    match v {
        Value::NULL => json!(null),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => json!({"Bytes": s}),
            Err(_) => json!({"Bytes(hex)": hex(b)}),
        },
        Value::Int(i) => json!({"Int": i}),
        Value::UInt(u) => json!({"UInt": u}),
        Value::Float(f) => json!({"Float": f}),
        Value::Double(d) => json!({"Double": d}),
        other => json!({"Temporal": format!("{other:?}")}),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Every attribute of the column metadata mysql_async exposes.
fn columns(cols: &[Column]) -> Json {
    cols.iter()
        .map(|c| {
            json!({
                "schema": c.schema_str(), "table": c.table_str(), "org_table": c.org_table_str(),
                "name": c.name_str(), "org_name": c.org_name_str(),
                "type": format!("{:?}", c.column_type()), "flags": format!("{:?}", c.flags()),
                "charset": c.character_set(), "length": c.column_length(), "decimals": c.decimals(),
            })
        })
        .collect()
}

fn rows(rows: Vec<Row>) -> Json {
    rows.into_iter()
        .map(|r| r.unwrap().iter().map(value).collect::<Json>())
        .collect()
}

/// Every result of a text query: metadata, rows, counts.
async fn text_results(conn: &mut Conn, sql: &str) -> Result<Json, Error> {
    let mut out = Vec::new();
    let mut result = conn.query_iter(sql).await?;
    loop {
        let cols = result.columns().map(|c| columns(&c)).unwrap_or(json!([]));
        let got: Vec<Row> = result.collect().await?;
        out.push(json!({
            "columns": cols, "rows": rows(got), "affected_rows": result.affected_rows(),
            "last_insert_id": result.last_insert_id(), "warnings": result.warnings(),
        }));
        if result.is_empty() {
            break;
        }
    }
    Ok(json!(out))
}

async fn binary_results(conn: &mut Conn, sql: &str, params: Params) -> Result<Json, Error> {
    let stmt = conn.prep(sql).await?;
    let mut result = conn.exec_iter(&stmt, params).await?;
    let cols = result.columns().map(|c| columns(&c)).unwrap_or(json!([]));
    let got: Vec<Row> = result.collect().await?;
    let answer = json!({
        "columns": cols, "rows": rows(got), "affected_rows": result.affected_rows(),
        "last_insert_id": result.last_insert_id(), "warnings": result.warnings(),
    });
    drop(result);
    conn.close(stmt).await?;
    Ok(answer)
}

fn server_error(e: &Error) -> Json {
    match e {
        Error::Server(s) => json!({"errno": s.code, "sqlstate": s.state, "message": s.message}),
        other => json!({"other": other.to_string()}),
    }
}

async fn connect(env: &Env) -> Result<Json, String> {
    let mut c = conn(env).await?;
    let answer = text_results(&mut c, "SELECT 1").await.map_err(err)?;
    c.disconnect().await.map_err(err)?;
    Ok(answer)
}

async fn tls(env: &Env) -> Result<Json, String> {
    if env["MQ_TLS"] != "1" {
        return Err("skip: MQ_TLS=0".into());
    }
    let ssl = SslOpts::default()
        .with_root_certs(vec![std::path::PathBuf::from(&env["MQ_TLS_CA"]).into()]);
    // With ssl_opts set, mysql_async refuses a server that does not
    // switch to TLS, and verifies its certificate and name.
    let mut c = Conn::new(opts(env).ssl_opts(ssl)).await.map_err(err)?;
    let answer = text_results(&mut c, "SELECT 'over tls' AS t")
        .await
        .map_err(err)?;
    c.disconnect().await.map_err(err)?;
    Ok(json!({"encrypted": true, "result": answer}))
}

fn types_ddl() -> String {
    format!(
        "CREATE TABLE {P}_types (
          id INT PRIMARY KEY,
          ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
          mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
          bi BIGINT, biu BIGINT UNSIGNED,
          de DECIMAL(65,30), f FLOAT, d DOUBLE,
          dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
          c CHAR(10), vc VARCHAR(100), tx TEXT,
          bn BINARY(16), vb VARBINARY(256), bl BLOB,
          js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(64)
        ) DEFAULT CHARSET utf8mb4"
    )
}

fn all_bytes() -> Vec<u8> {
    (0..=255).collect()
}

/// Rows at the types' limits, then all NULLs: as literal SQL.
fn types_literal_insert() -> String {
    let bytes = hex(&all_bytes());
    format!(
        "INSERT INTO {P}_types VALUES
        (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
         '-99999999999999999999999999999999999.999999999999999999999999999999', -3.40282e38, -1.7976931348623157e308,
         '1000-01-01', '1000-01-01 00:00:00.000000', '2001-02-03 04:05:06.000007', '-838:59:59.000000', 1901,
         'chär', 'emoji 🐬 ok', 'text ✓ 🐬', X'000102030405060708090a0b0c0d0e0f', X'{bytes}', X'{bytes}',
         '{{\"k\": [1, 2.5, \"v\", null]}}', 'a', 'x,z', b'0'),
        (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807, 18446744073709551615,
         '99999999999999999999999999999999999.999999999999999999999999999999', 3.40282e38, 1.7976931348623157e308,
         '9999-12-31', '9999-12-31 23:59:59.999999', '2024-02-29 23:59:59.999999', '838:59:59.000000', 2155,
         '', '🐬', '', X'ffffffffffffffffffffffffffffffff', X'', X'',
         '[]', 'c', 'x,y,z', b'1111111111111111111111111111111111111111111111111111111111111111'),
        (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
    )
}

/// The same rows as bound parameters of mysql_async's own types.
fn types_params() -> Vec<Vec<Value>> {
    use Value::*;
    let b = all_bytes();
    let s = |v: &str| Bytes(v.as_bytes().to_vec());
    vec![
        vec![
            Int(1),
            Int(-128),
            UInt(0),
            Int(-32768),
            UInt(0),
            Int(-8388608),
            UInt(0),
            Int(-2147483648),
            UInt(0),
            Int(i64::MIN),
            UInt(0),
            s("-99999999999999999999999999999999999.999999999999999999999999999999"),
            Float(-3.40282e38),
            Double(-1.7976931348623157e308),
            Date(1000, 1, 1, 0, 0, 0, 0),
            Date(1000, 1, 1, 0, 0, 0, 0),
            Date(2001, 2, 3, 4, 5, 6, 7),
            Time(true, 34, 22, 59, 59, 0),
            Int(1901),
            s("chär"),
            s("emoji 🐬 ok"),
            s("text ✓ 🐬"),
            Bytes((0..16).collect()),
            Bytes(b.clone()),
            Bytes(b),
            s(r#"{"k": [1, 2.5, "v", null]}"#),
            s("a"),
            s("x,z"),
            Bytes(vec![0; 8]),
        ],
        vec![
            Int(2),
            Int(127),
            UInt(255),
            Int(32767),
            UInt(65535),
            Int(8388607),
            UInt(16777215),
            Int(2147483647),
            UInt(4294967295),
            Int(i64::MAX),
            UInt(u64::MAX),
            s("99999999999999999999999999999999999.999999999999999999999999999999"),
            Float(3.40282e38),
            Double(1.7976931348623157e308),
            Date(9999, 12, 31, 0, 0, 0, 0),
            Date(9999, 12, 31, 23, 59, 59, 999999),
            Date(2024, 2, 29, 23, 59, 59, 999999),
            Time(false, 34, 22, 59, 59, 0),
            UInt(2155),
            s(""),
            s("🐬"),
            s(""),
            Bytes(vec![255; 16]),
            Bytes(vec![]),
            Bytes(vec![]),
            s("[]"),
            s("c"),
            s("x,y,z"),
            Bytes(vec![255; 8]),
        ],
        std::iter::once(Int(3))
            .chain(std::iter::repeat_n(NULL, 28))
            .collect(),
    ]
}

async fn types(env: &Env, prepared: bool) -> Result<Json, String> {
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {P}_types"))
        .await
        .map_err(err)?;
    c.query_drop(types_ddl()).await.map_err(err)?;
    let select = format!("SELECT * FROM {P}_types WHERE id >= ? ORDER BY id");
    let answer = if prepared {
        let marks = vec!["?"; 29].join(", ");
        let insert = format!("INSERT INTO {P}_types VALUES ({marks})");
        let mut written = Vec::new();
        for row in types_params() {
            let r = binary_results(&mut c, &insert, Params::Positional(row))
                .await
                .map_err(err)?;
            written.push(r);
        }
        let read = binary_results(&mut c, &select, Params::Positional(vec![Value::Int(1)]))
            .await
            .map_err(err)?;
        json!({"written": written, "read": read})
    } else {
        let written = text_results(&mut c, &types_literal_insert())
            .await
            .map_err(err)?;
        let read = text_results(&mut c, &select.replace('?', "1"))
            .await
            .map_err(err)?;
        json!({"written": written, "read": read})
    };
    c.disconnect().await.map_err(err)?;
    Ok(answer)
}

async fn count(c: &mut Conn, table: &str) -> Result<i64, String> {
    let n: Option<i64> = c
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .map_err(err)?;
    Ok(n.unwrap_or(-1))
}

async fn transactions(env: &Env) -> Result<Json, String> {
    let t = format!("{P}_tx");
    let mut c = conn(env).await?;
    let mut other = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .map_err(err)?;
    c.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)"))
        .await
        .map_err(err)?;
    let mut tx = c.start_transaction(TxOpts::default()).await.map_err(err)?;
    tx.exec_drop(format!("INSERT INTO {t} VALUES (?)"), (1,))
        .await
        .map_err(err)?;
    let unseen = count(&mut other, &t).await?;
    tx.commit().await.map_err(err)?;
    let committed = count(&mut other, &t).await?;
    let mut tx = c.start_transaction(TxOpts::default()).await.map_err(err)?;
    tx.query_drop(format!("INSERT INTO {t} VALUES (2)"))
        .await
        .map_err(err)?;
    tx.rollback().await.map_err(err)?;
    let rolled_back = count(&mut other, &t).await?;
    c.query_drop("SET autocommit = 0").await.map_err(err)?;
    c.query_drop(format!("INSERT INTO {t} VALUES (3)"))
        .await
        .map_err(err)?;
    let before_commit = count(&mut other, &t).await?;
    c.query_drop("COMMIT").await.map_err(err)?;
    let after_commit = count(&mut other, &t).await?;
    Ok(json!({
        "uncommitted_seen_by_other": unseen, "after_commit": committed,
        "after_rollback": rolled_back, "autocommit_off_before_commit": before_commit,
        "autocommit_off_after_commit": after_commit,
    }))
}

async fn errors(env: &Env) -> Result<Json, String> {
    let t = format!("{P}_err");
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .map_err(err)?;
    c.query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)"))
        .await
        .map_err(err)?;
    c.query_drop(format!("INSERT INTO {t} VALUES (1)"))
        .await
        .map_err(err)?;
    let mut answers = Vec::new();
    for sql in [
        format!("INSERT INTO {t} VALUES (1)"),
        "SELEC 1".to_string(),
        format!("SELECT * FROM {P}_no_such_table"),
    ] {
        let e = c.query_drop(&sql).await.err();
        answers.push(e.as_ref().map(server_error));
    }
    // And through a prepared statement: the duplicate at execute time.
    let e = c
        .exec_drop(format!("INSERT INTO {t} VALUES (?)"), (1,))
        .await
        .err();
    answers.push(e.as_ref().map(server_error));
    let after: Option<i64> = c.query_first("SELECT 2").await.map_err(err)?;
    Ok(json!({"errors": answers, "still_works": after}))
}

async fn procedure(env: &Env) -> Result<Json, String> {
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP PROCEDURE IF EXISTS {P}_two"))
        .await
        .map_err(err)?;
    c.query_drop(format!(
        "CREATE PROCEDURE {P}_two(IN x INT) BEGIN SELECT x AS a; SELECT x + 1 AS b, 'z' AS c; END"
    ))
    .await
    .map_err(err)?;
    let text = text_results(&mut c, &format!("CALL {P}_two(41)"))
        .await
        .map_err(err)?;
    let stmt = c.prep(format!("CALL {P}_two(?)")).await.map_err(err)?;
    let mut sets = Vec::new();
    let mut result = c.exec_iter(&stmt, (7,)).await.map_err(err)?;
    loop {
        let cols = result.columns().map(|c| columns(&c)).unwrap_or(json!([]));
        let got: Vec<Row> = result.collect().await.map_err(err)?;
        sets.push(
            json!({"columns": cols, "rows": rows(got), "affected_rows": result.affected_rows()}),
        );
        if result.is_empty() {
            break;
        }
    }
    Ok(json!({"text": text, "prepared": sets}))
}

async fn multi_statement(env: &Env) -> Result<Json, String> {
    let t = format!("{P}_multi");
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .map_err(err)?;
    c.query_drop(format!(
        "CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v TEXT)"
    ))
    .await
    .map_err(err)?;
    let ok = text_results(
        &mut c,
        &format!("SELECT 1 AS one; INSERT INTO {t} (v) VALUES ('x'), ('y'); SELECT * FROM {t} ORDER BY id"),
    )
    .await
    .map_err(err)?;
    // An error in the middle ends the batch.
    let failing = match text_results(
        &mut c,
        &format!("SELECT 1; SELECT * FROM {P}_missing; SELECT 3"),
    )
    .await
    {
        Ok(v) => v,
        Err(e) => server_error(&e),
    };
    Ok(json!({"results": ok, "error_midway": failing}))
}

async fn large_result(env: &Env) -> Result<Json, String> {
    let t = format!("{P}_big");
    let n: u64 = env["MQ_BIG_ROWS"].parse().map_err(|_| "MQ_BIG_ROWS")?;
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .map_err(err)?;
    c.query_drop(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(1024))"
    ))
    .await
    .map_err(err)?;
    c.query_drop(format!(
        "INSERT INTO {t} SELECT seq, REPEAT(CHAR(65 + seq % 26), 1000) FROM seq_1_to_{n}"
    ))
    .await
    .map_err(err)?;
    let mut rows = 0u64;
    let mut hash = Sha256::new();
    let mut result = c
        .query_iter(format!("SELECT id, v FROM {t} ORDER BY id"))
        .await
        .map_err(err)?;
    result
        .for_each(|row: Row| {
            let (id, v): (i64, String) = mysql_async::from_row(row);
            rows += 1;
            hash.update(id.to_string());
            hash.update(v);
        })
        .await
        .map_err(err)?;
    drop(result);
    c.query_drop(format!("DROP TABLE {t}")).await.map_err(err)?;
    Ok(json!({"rows": rows, "sha256": hex(&hash.finalize())}))
}

async fn last_insert_id(env: &Env) -> Result<Json, String> {
    let t = format!("{P}_ai");
    let mut c = conn(env).await?;
    c.query_drop(format!("DROP TABLE IF EXISTS {t}"))
        .await
        .map_err(err)?;
    c.query_drop(format!(
        "CREATE TABLE {t} (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT = 1000"
    ))
    .await
    .map_err(err)?;
    c.query_drop(format!("INSERT INTO {t} (v) VALUES (1), (2)"))
        .await
        .map_err(err)?;
    let text_id = c.last_insert_id();
    let sql_text: Option<u64> = c
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .map_err(err)?;
    c.exec_drop(format!("INSERT INTO {t} (v) VALUES (?)"), (3,))
        .await
        .map_err(err)?;
    let prepared_id = c.last_insert_id();
    let sql_prepared: Option<u64> = c
        .query_first("SELECT LAST_INSERT_ID()")
        .await
        .map_err(err)?;
    Ok(json!({
        "text_insert_id": text_id, "text_last_insert_id": sql_text,
        "prepared_insert_id": prepared_id, "prepared_last_insert_id": sql_prepared,
    }))
}

async fn switch_database(env: &Env) -> Result<Json, String> {
    let mut c = conn(env).await?;
    let other = &env["MQ_OTHER_DATABASE"];
    let start: Option<String> = c.query_first("SELECT DATABASE()").await.map_err(err)?;
    c.query_drop(format!("USE `{other}`")).await.map_err(err)?;
    let switched: Option<String> = c.query_first("SELECT DATABASE()").await.map_err(err)?;
    c.query_drop(format!("USE `{}`", env["MQ_DATABASE"]))
        .await
        .map_err(err)?;
    let back: Option<String> = c.query_first("SELECT DATABASE()").await.map_err(err)?;
    let missing = c.query_drop("USE no_such_database").await.err();
    Ok(json!({
        "start": start, "switched": switched, "back": back,
        "unknown": missing.as_ref().map(server_error),
    }))
}

async fn pool_reset_ping(env: &Env) -> Result<Json, String> {
    // One connection, reset (COM_RESET_CONNECTION) when it goes back.
    let pool_opts = PoolOpts::default()
        .with_constraints(PoolConstraints::new(1, 1).expect("1..1"))
        .with_reset_connection(true);
    let pool = Pool::new(opts(env).pool_opts(pool_opts));
    let mut first = pool.get_conn().await.map_err(err)?;
    let first_id = first.id();
    first.query_drop("SET @matrix = 42").await.map_err(err)?;
    let before: Option<Option<i64>> = first.query_first("SELECT @matrix").await.map_err(err)?;
    drop(first);
    let mut again = pool.get_conn().await.map_err(err)?;
    let same_connection = again.id() == first_id;
    let after: Option<Option<i64>> = again.query_first("SELECT @matrix").await.map_err(err)?;
    again.ping().await.map_err(err)?;
    again.query_drop("SET @matrix = 7").await.map_err(err)?;
    let reset_supported = again.reset().await.map_err(err)?;
    let after_reset: Option<Option<i64>> =
        again.query_first("SELECT @matrix").await.map_err(err)?;
    drop(again);
    pool.disconnect().await.map_err(err)?;
    Ok(json!({
        "before": before, "same_connection": same_connection, "after_return_to_pool": after,
        "ping": true, "reset_supported": reset_supported, "after_reset": after_reset,
    }))
}
