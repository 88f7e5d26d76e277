//! The gateway through real parts: a private MariaDB, the gateway on
//! ephemeral ports, and a psdb client over HTTP/3 and HTTP/2 in both codecs.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use myquic::api::pb::{self, BindVariable, Type};
use myquic::api::{Code, Codec, Encoding, Method};

fn bind(ty: Type, value: &[u8]) -> BindVariable {
    BindVariable {
        r#type: ty as i32,
        value: Bytes::copy_from_slice(value),
        values: vec![],
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn queries_over_both_transports_and_codecs() {
    let stack = Stack::start().await;
    for version in [Version::H3, Version::H2] {
        for codec in [Codec::Proto, Codec::Json] {
            let client = stack.client(version, codec).await;
            let resp = client
                .execute(None, "SELECT 1 AS one, 'héllo 🐬' AS s, NULL AS n")
                .await;
            let result = resp.result.as_ref().unwrap();
            let names: Vec<_> = result.fields.iter().map(|f| &f.name[..]).collect();
            assert_eq!(names, [&b"one"[..], b"s", b"n"], "{version:?} {codec:?}");
            assert_eq!(result.fields[1].r#type, Type::Varchar as i32);
            assert_eq!(result.fields[2].r#type, Type::NullType as i32);
            assert_eq!(
                rows(result),
                vec![vec![
                    Some(b"1".to_vec()),
                    Some("héllo 🐬".as_bytes().to_vec()),
                    None
                ]]
            );
            let session = resp.session.as_ref().unwrap();
            assert_eq!(session.signature.len(), 32);
            assert!(resp.timing > 0.0);
        }
    }
    // HTTP/2 responses advertise HTTP/3 on the same port.
    let client = stack.client(Version::H2, Codec::Json).await;
    let answer = client
        .raw(
            Method::Execute,
            Bytes::from_static(br#"{"query":"select 1"}"#),
        )
        .await;
    assert_eq!(answer.status, 200);
    let alt_svc = answer
        .headers
        .get("alt-svc")
        .expect("Alt-Svc")
        .to_str()
        .unwrap();
    assert_eq!(
        alt_svc,
        format!("h3=\":{}\"; ma=86400", stack.addr().port())
    );
}

/// A LONGTEXT is JSON exactly while its table has MariaDB's JSON check:
/// the gateway's per-table answer is forgotten when DDL runs through it,
/// and expressions (no table) are never looked up. The lookup is what a
/// gateway does when its backend connections are not relayed (TLS, a
/// backend across a network): here, by turning the relay off.
#[tokio::test(flavor = "multi_thread")]
async fn json_columns_follow_ddl() {
    let stack = Stack::start_with(|c| c.backend.relay_extended_metadata = false).await;
    let client = stack.client(Version::H2, Codec::Proto).await;
    let types = |r: &pb::ExecuteResponse| -> Vec<Type> {
        assert!(r.error.is_none(), "{:?}", r.error);
        let fields = &r.result.as_ref().unwrap().fields;
        fields
            .iter()
            .map(|f| Type::try_from(f.r#type).unwrap())
            .collect()
    };
    let run = |sql: &'static str| client.execute(None, sql);
    assert!(
        run("CREATE TABLE jd (j JSON, t LONGTEXT)")
            .await
            .error
            .is_none()
    );
    let select = "SELECT j, t, CAST(j AS CHAR) AS e FROM jd";
    let text_or_blob = |t: Type| matches!(t, Type::Text | Type::Blob);
    let first = types(&run(select).await);
    assert_eq!(first[0], Type::Json);
    assert!(
        text_or_blob(first[1]) && text_or_blob(first[2]),
        "{first:?}"
    );
    assert!(
        run("ALTER TABLE jd MODIFY j LONGTEXT, MODIFY t JSON")
            .await
            .error
            .is_none()
    );
    let second = types(&run(select).await);
    assert!(text_or_blob(second[0]), "{second:?}");
    assert_eq!(second[1], Type::Json);
}

/// Every column type comes back exactly as MySQL's text protocol has it.
#[tokio::test(flavor = "multi_thread")]
async fn every_column_type_round_trips() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H3, Codec::Proto).await;
    let create = "CREATE TABLE types (
        id INT PRIMARY KEY,
        i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, u16 SMALLINT UNSIGNED,
        i24 MEDIUMINT, u24 MEDIUMINT UNSIGNED, i32 INT, u32 INT UNSIGNED,
        i64 BIGINT, u64 BIGINT UNSIGNED, dec1 DECIMAL(65,30), f FLOAT, d DOUBLE,
        dt DATE, dtm DATETIME(6), ts TIMESTAMP(6) NULL, tm TIME(6), y YEAR,
        c CHAR(10), vc VARCHAR(100), tx TEXT, bn BINARY(4), vb VARBINARY(300), bl BLOB,
        js JSON, en ENUM('a','b','c'), st SET('x','y','z'), bt BIT(12), nul INT
    ) DEFAULT CHARSET=utf8mb4";
    assert!(client.execute(None, create).await.error.is_none());
    let insert = "INSERT INTO types VALUES (1,
        -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,
        -9223372036854775808, 18446744073709551615,
        12345678901234567890123456789012345.123456789012345678901234567890, 1.5, 2.718281828459045,
        '1000-01-01', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.123456', '-838:59:59.000000', 2155,
        'chär', 'emoji 🐬 ok', 'long\ntext', x'00ff0102', x'00', x'00',
        '{\"a\": [1, 2.5, \"ü\"]}', 'b', 'x,z', b'101000000101', NULL)";
    let resp = client.execute(None, insert).await;
    assert!(resp.error.is_none(), "{:?}", resp.error);
    // All 256 byte values, through a bind variable, into VARBINARY and BLOB.
    let all_bytes: Vec<u8> = (0..=255).collect();
    let mut vars = HashMap::new();
    vars.insert("v1".to_string(), bind(Type::Varbinary, &all_bytes));
    vars.insert("v2".to_string(), bind(Type::Blob, &all_bytes));
    let req = pb::ExecuteRequest {
        query: "UPDATE types SET vb = ?, bl = ? WHERE id = 1".into(),
        bind_variables: vars,
        ..Default::default()
    };
    let resp: pb::ExecuteResponse = client.call(Method::Execute, &req).await.unwrap();
    assert!(resp.error.is_none(), "{:?}", resp.error);
    assert_eq!(resp.result.unwrap().rows_affected, 1);

    for codec in [Codec::Proto, Codec::Json] {
        let client = stack.client(Version::H2, codec).await;
        let resp = client.execute(None, "SELECT * FROM types").await;
        let result = resp.result.as_ref().unwrap();
        let row = &rows(result)[0];
        let text = |i: usize| String::from_utf8(row[i].clone().unwrap()).unwrap();
        let expect = [
            "1",
            "-128",
            "255",
            "-32768",
            "65535",
            "-8388608",
            "16777215",
            "-2147483648",
            "4294967295",
            "-9223372036854775808",
            "18446744073709551615",
            "12345678901234567890123456789012345.123456789012345678901234567890",
            "1.5",
            "2.718281828459045",
            "1000-01-01",
            "9999-12-31 23:59:59.999999",
            "2038-01-19 03:14:07.123456",
            "-838:59:59.000000",
            "2155",
            "chär",
            "emoji 🐬 ok",
            "long\ntext",
        ];
        for (i, want) in expect.iter().enumerate() {
            assert_eq!(
                text(i),
                *want,
                "column {} ({codec:?})",
                String::from_utf8_lossy(&result.fields[i].name)
            );
        }
        assert_eq!(row[22].as_deref(), Some(&[0x00, 0xff, 0x01, 0x02][..]));
        assert_eq!(row[23].as_deref(), Some(&all_bytes[..]));
        assert_eq!(row[24].as_deref(), Some(&all_bytes[..]));
        assert_eq!(text(25), "{\"a\": [1, 2.5, \"ü\"]}");
        assert_eq!(text(26), "b");
        assert_eq!(text(27), "x,z");
        assert_eq!(row[28].as_deref(), Some(&[0x0a, 0x05][..]));
        assert_eq!(row[29], None);

        let types: Vec<Type> = result
            .fields
            .iter()
            .map(|f| Type::try_from(f.r#type).unwrap())
            .collect();
        use Type::*;
        // MariaDB's JSON (a LONGTEXT with a json_valid check) is JSON, as
        // MariaDB's extended metadata would say; its other attributes are
        // the LONGTEXT's.
        assert_eq!(
            types,
            [
                Int32, Int8, Uint8, Int16, Uint16, Int24, Uint24, Int32, Uint32, Int64, Uint64,
                Decimal, Float32, Float64, Date, Datetime, Timestamp, Time, Year, Char, Varchar,
                Text, Binary, Varbinary, Blob, Json, Enum, Set, Bit, Int32
            ]
        );
        assert_eq!(result.fields[25].column_length, u32::MAX);
        assert_ne!(result.fields[25].charset, 63);
        let f = &result.fields[0];
        assert_eq!(
            (&f.table[..], &f.org_table[..], &f.database[..]),
            (&b"types"[..], &b"types"[..], &b"app"[..])
        );
        assert_eq!(f.org_name, "id");
        assert_ne!(f.flags & 2, 0, "PRI_KEY flag");
        assert_eq!(result.fields[11].decimals, 30);
        assert_eq!(result.fields[11].column_length, 67);
        assert_eq!(result.fields[23].charset, 63, "VARBINARY is binary");
        assert_ne!(result.fields[20].charset, 63, "VARCHAR is text");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn transactions_span_requests() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H3, Codec::Json).await;
    client
        .execute(None, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        .await;
    let count = |c: Client| async move {
        scalar(&c.execute(None, "SELECT COUNT(*) FROM t").await).unwrap()
    };

    let begin = client.execute(None, "BEGIN").await;
    assert!(in_transaction(&begin));
    let ins = client
        .execute(begin.session.as_ref(), "INSERT INTO t VALUES (1, 'a')")
        .await;
    assert!(in_transaction(&ins));
    assert_eq!(
        count(client.clone()).await,
        "0",
        "uncommitted row is invisible to other sessions"
    );
    let commit = client.execute(ins.session.as_ref(), "COMMIT").await;
    assert!(!in_transaction(&commit));
    assert_eq!(count(client.clone()).await, "1");

    let begin = client
        .execute(commit.session.as_ref(), "START TRANSACTION")
        .await;
    let ins = client
        .execute(begin.session.as_ref(), "INSERT INTO t VALUES (2, 'b')")
        .await;
    let rollback = client.execute(ins.session.as_ref(), "ROLLBACK").await;
    assert!(!in_transaction(&rollback));
    assert_eq!(count(client.clone()).await, "1");

    // Session fields tell the truth.
    let auto = client
        .execute(
            None,
            "CREATE TABLE a (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
        )
        .await;
    let ins = client
        .execute(
            auto.session.as_ref(),
            "INSERT INTO a (v) VALUES (1), (2), (3)",
        )
        .await;
    let result = ins.result.as_ref().unwrap();
    assert_eq!((result.rows_affected, result.insert_id), (3, 1));
    let vs = vitess(&ins);
    assert_eq!(
        (vs.last_insert_id, vs.row_count, vs.autocommit),
        (1, 3, true)
    );
    let sel = client
        .execute(ins.session.as_ref(), "SELECT * FROM a")
        .await;
    let vs = vitess(&sel);
    assert_eq!((vs.found_rows, vs.row_count), (3, -1));
    let off = client
        .execute(sel.session.as_ref(), "SET autocommit = 0")
        .await;
    let vs = vitess(&off);
    assert!(!vs.autocommit);
    let ins = client
        .execute(off.session.as_ref(), "INSERT INTO a (v) VALUES (4)")
        .await;
    assert!(in_transaction(&ins), "autocommit=0 opens a transaction");
    // Session state (user variables) persists across requests.
    let set = client.execute(None, "SET @x = 42").await;
    assert_eq!(
        scalar(&client.execute(set.session.as_ref(), "SELECT @x").await).unwrap(),
        "42"
    );
    // Warnings are reported in the session.
    let warn = client.execute(None, "SELECT CAST('abc' AS SIGNED)").await;
    let vs = vitess(&warn);
    assert_eq!(vs.warnings.len(), 1);
    assert_eq!(vs.warnings[0].code, 1292);
}

#[tokio::test(flavor = "multi_thread")]
async fn sql_errors_carry_errno_and_sqlstate() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H2, Codec::Proto).await;
    client
        .execute(None, "CREATE TABLE u (name VARCHAR(10) UNIQUE)")
        .await;
    client.execute(None, "INSERT INTO u VALUES ('a')").await;
    let cases = [
        (
            "INSERT INTO u VALUES ('a')",
            "(errno 1062) (sqlstate 23000)",
            pb::VtCode::AlreadyExists,
        ),
        (
            "SELEC 1",
            "(errno 1064) (sqlstate 42000)",
            pb::VtCode::InvalidArgument,
        ),
        (
            "SELECT * FROM nope",
            "(errno 1146) (sqlstate 42S02)",
            pb::VtCode::NotFound,
        ),
    ];
    for (sql, suffix, code) in cases {
        let resp = client.execute(None, sql).await;
        let err = resp.error.as_ref().expect("an error");
        let message = common::error_message(&resp);
        assert!(message.ends_with(suffix), "{sql}: {message}");
        assert_eq!(err.code, code as i32, "{sql}");
        assert!(
            resp.session.is_some(),
            "the session comes back with the error"
        );
        let parsed = myquic::translate::errors::from_rpc_message(&err.message);
        assert!(!parsed.message.is_empty());
    }
    // An error inside a transaction leaves it open.
    let begin = client.execute(None, "BEGIN").await;
    let ins = client
        .execute(begin.session.as_ref(), "INSERT INTO u VALUES ('b')")
        .await;
    let dup = client
        .execute(ins.session.as_ref(), "INSERT INTO u VALUES ('a')")
        .await;
    assert!(dup.error.is_some() && in_transaction(&dup));
    client.execute(dup.session.as_ref(), "COMMIT").await;
    assert_eq!(
        scalar(&client.execute(None, "SELECT COUNT(*) FROM u").await).unwrap(),
        "2"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn authentication_is_required() {
    let stack = Stack::start().await;
    let mut client = stack.client(Version::H3, Codec::Json).await;
    client.execute(None, "CREATE TABLE t (id INT)").await;
    for auth in [
        None,
        Some(basic(USER, "wrong")),
        Some(basic("nobody", PASSWORD)),
        Some("Bearer x".into()),
    ] {
        client.auth = auth.clone();
        let answer = client
            .raw(
                Method::Execute,
                Bytes::from_static(br#"{"query":"INSERT INTO t VALUES (1)"}"#),
            )
            .await;
        assert_eq!(answer.status, 401, "{auth:?}");
        let err = myquic::api::ApiError::from_json(&answer.body).unwrap();
        assert_eq!(err.code, Code::Unauthenticated);
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
        assert_eq!(
            json["error"]["code"], "unauthenticated",
            "database-js reads .error"
        );
    }
    client.auth = Some(basic(USER, PASSWORD));
    assert_eq!(
        scalar(&client.execute(None, "SELECT COUNT(*) FROM t").await).unwrap(),
        "0",
        "nothing executed"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sessions_cannot_be_forged_shared_or_used_twice_at_once() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H3, Codec::Proto).await;
    let first = client.execute(None, "SET @secret = 'mine'").await;
    let session = first.session.clone().unwrap();

    let mut forged = session.clone();
    forged
        .vitess_session
        .as_mut()
        .unwrap()
        .session_uuid
        .push('x');
    let err = client
        .try_execute(Some(&forged), "SELECT @secret")
        .await
        .unwrap_err();
    assert_eq!(err.code, Code::PermissionDenied);
    let mut resigned = session.clone();
    resigned.signature = vec![0u8; 32].into();
    assert_eq!(
        client
            .try_execute(Some(&resigned), "SELECT 1")
            .await
            .unwrap_err()
            .code,
        Code::PermissionDenied
    );

    let mut other = stack.client(Version::H3, Codec::Proto).await;
    other.auth = Some(basic("other", "other-secret"));
    let err = other
        .try_execute(Some(&session), "SELECT @secret")
        .await
        .unwrap_err();
    assert_eq!(
        err.code,
        Code::PermissionDenied,
        "another user cannot use the session"
    );

    // One request at a time: a second request waits for the first (a
    // cancelled statement may take a moment to end at the backend), up to
    // 2 s, and is refused after that — never run beside it.
    let brief = {
        let client = client.clone();
        let session = session.clone();
        tokio::spawn(async move { client.execute(Some(&session), "SELECT SLEEP(0.5)").await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waited = client.execute(Some(&session), "SELECT @secret").await;
    assert!(waited.error.is_none(), "{:?}", waited.error);
    assert!(brief.await.unwrap().error.is_none());
    let slow = {
        let client = client.clone();
        let session = session.clone();
        tokio::spawn(async move { client.execute(Some(&session), "SELECT SLEEP(3)").await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let err = client
        .try_execute(Some(&session), "SELECT @secret")
        .await
        .unwrap_err();
    assert_eq!(err.code, Code::Aborted);
    assert!(err.message.contains("in use"), "{}", err.message);
    let done = slow.await.unwrap();
    assert!(done.error.is_none());
    assert_eq!(
        scalar(
            &client
                .execute(done.session.as_ref(), "SELECT @secret")
                .await
        )
        .unwrap(),
        "mine"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_transaction_is_an_error_not_a_silent_new_session() {
    let stack = Stack::start_with(|c| c.sessions.idle_timeout = Duration::from_millis(400)).await;
    let client = stack.client(Version::H2, Codec::Json).await;
    client.execute(None, "CREATE TABLE t (id INT)").await;
    let begin = client.execute(None, "BEGIN").await;
    let ins = client
        .execute(begin.session.as_ref(), "INSERT INTO t VALUES (1)")
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let commit = client.execute(ins.session.as_ref(), "COMMIT").await;
    let err = commit
        .error
        .as_ref()
        .expect("the lost transaction is reported");
    let message = common::error_message(&commit);
    assert!(
        message.contains("(errno 1927) (sqlstate 70100)"),
        "{message}"
    );
    assert_eq!(err.code, pb::VtCode::Aborted as i32);
    assert!(!in_transaction(&commit));
    assert_eq!(
        scalar(&client.execute(None, "SELECT COUNT(*) FROM t").await).unwrap(),
        "0",
        "rolled back"
    );
    // The fresh session offered with the error works.
    let next = client.execute(commit.session.as_ref(), "SELECT 1").await;
    assert!(next.error.is_none());
    // Outside a transaction, an idle-expired session simply continues.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        client
            .execute(next.session.as_ref(), "SELECT 1")
            .await
            .error
            .is_none()
    );
}

/// A statement slower than the HTTP/3 heartbeat (500 ms) still ends with
/// its result: the heartbeat is an empty message, not an empty DATA frame,
/// which h3 reads as the end of the body (the stream then ended without an
/// end-of-stream envelope, failing every slow statement over HTTP/3).
#[tokio::test(flavor = "multi_thread")]
async fn stream_execute_outlasts_heartbeats_during_a_slow_statement() {
    let stack = Stack::start().await;
    for (version, codec) in [
        (Version::H3, Codec::Proto),
        (Version::H3, Codec::Json),
        (Version::H2, Codec::Proto),
    ] {
        let client = stack.client(version, codec).await;
        let req = pb::ExecuteRequest {
            query: "SELECT SLEEP(1.2) AS s, 7 AS n".into(),
            ..Default::default()
        };
        let kept = client
            .stream(&req, |_, m| m.result.is_some())
            .await
            .unwrap_or_else(|e| panic!("{version:?}/{codec:?}: {e:?}"));
        let got: Vec<_> = kept
            .iter()
            .filter_map(|m| m.result.as_ref())
            .flat_map(rows)
            .collect();
        assert_eq!(got, vec![vec![Some(b"0".to_vec()), Some(b"7".to_vec())]]);
    }
}

/// A statement whose first rows are slow (here: blocked on a lock the
/// test holds) gets its response head at once, while it still runs, and
/// then the same answer as directly: a client may need the head to go on
/// (the sidecar once heard `KILL QUERY` only after it), so the gateway
/// never holds the head for the first rows. The lock is released only
/// once the head has come: a gateway that waits for the first rows
/// without a bound hangs here.
#[tokio::test(flavor = "multi_thread")]
async fn a_slow_first_chunk_does_not_hold_the_response_head() {
    use mysql_async::prelude::Queryable;
    let stack = Stack::start().await;
    let mut root = mysql_async::Conn::new(stack.db.root_opts()).await.unwrap();
    for (version, lock) in [
        (Version::H2, "first_chunk_h2"),
        (Version::H3, "first_chunk_h3"),
    ] {
        let sql = format!("SELECT GET_LOCK('{lock}', 60) AS got, 7 AS n");
        // Directly, on a connection of its own that then goes (and its
        // lock with it).
        let mut once = mysql_async::Conn::new(stack.db.root_opts()).await.unwrap();
        let direct: Vec<(Vec<u8>, Vec<u8>)> = once.query(&sql).await.unwrap();
        // Released before the test takes it: a lock a disconnected
        // session held is freed when the server ends its thread, which
        // may come after the test's GET_LOCK(…, 0).
        once.query_drop(format!("DO RELEASE_LOCK('{lock}')"))
            .await
            .unwrap();
        once.disconnect().await.unwrap();
        let direct: Vec<Vec<Option<Vec<u8>>>> = direct
            .into_iter()
            .map(|(a, b)| vec![Some(a), Some(b)])
            .collect();
        let client = stack.client(version, Codec::Proto).await;
        let held: Option<u8> = root
            .query_first(format!("SELECT GET_LOCK('{lock}', 0)"))
            .await
            .unwrap();
        assert_eq!(held, Some(1), "the test holds {lock}");
        let req = pb::ExecuteRequest {
            query: sql.clone().into(),
            ..Default::default()
        };
        let head = tokio::time::timeout(Duration::from_secs(20), client.open_stream(&req))
            .await
            .unwrap_or_else(|_| panic!("{version:?}: no response head while the statement waits"));
        // The head came first: the statement runs (or is about to), and
        // waits for the lock until the test lets it go.
        let started = std::time::Instant::now();
        loop {
            let waiting: Option<u64> = root
                .exec_first(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = ?",
                    (&sql,),
                )
                .await
                .unwrap();
            if waiting == Some(1) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{version:?}: the statement not seen running at the backend"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let released: Option<u8> = root
            .query_first(format!("SELECT RELEASE_LOCK('{lock}')"))
            .await
            .unwrap();
        assert_eq!(released, Some(1));
        let answer = client
            .read_stream(head, |_, m| m.result.is_some())
            .await
            .unwrap_or_else(|e| panic!("{version:?}: {e:?}"));
        let got: Vec<_> = answer
            .iter()
            .filter_map(|m| m.result.as_ref())
            .flat_map(rows)
            .collect();
        assert_eq!(got, direct, "{version:?}: the answer, as directly");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stream_execute_streams_30_mb_in_bounded_messages() {
    let stack = Stack::start().await;
    for (version, codec) in [(Version::H3, Codec::Proto), (Version::H2, Codec::Json)] {
        let client = stack.client(version, codec).await;
        let query = "SET STATEMENT max_recursive_iterations = 1000000 FOR WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 32000) \
                     SELECT n, REPEAT('x', 1000) AS pad FROM s";
        let req = pb::ExecuteRequest {
            query: bytes::Bytes::copy_from_slice(query.as_bytes()),
            ..Default::default()
        };
        let (mut messages, mut rows_seen, mut bytes, mut largest, mut last_n) =
            (0, 0u64, 0usize, 0usize, 0u64);
        let kept = client
            .stream(&req, |size, msg| {
                messages += 1;
                largest = largest.max(size);
                if let Some(r) = &msg.result {
                    for row in &r.rows {
                        let cells = myquic::translate::rows::unpack_row(row).unwrap();
                        let n: u64 = std::str::from_utf8(cells[0].as_ref().unwrap())
                            .unwrap()
                            .parse()
                            .unwrap();
                        assert_eq!(n, last_n + 1, "rows arrive in order");
                        last_n = n;
                        bytes += cells[1].as_ref().unwrap().len();
                    }
                    rows_seen += r.rows.len() as u64;
                }
                // Keep only the first (fields) and last (session) messages.
                msg.session.is_some() || msg.result.as_ref().is_some_and(|r| !r.fields.is_empty())
            })
            .await
            .expect("stream completes");
        assert_eq!(rows_seen, 32000);
        assert!(bytes >= 32_000_000, "at least 30 MB streamed");
        assert!(messages > 100, "{messages} messages");
        // 256 KiB target plus one row of slack, plus encoding overhead.
        let bound = 256 * 1024 + 2_000;
        // JSON: base64 values plus per-row `lengths` text.
        let bound = if matches!(codec, Codec::Json) {
            bound * 4 / 3 + 16 * 1024
        } else {
            bound
        };
        assert!(largest <= bound, "largest message {largest} > {bound}");
        assert_eq!(
            kept.first().unwrap().result.as_ref().unwrap().fields.len(),
            2
        );
        assert!(
            kept.last().unwrap().session.is_some(),
            "the last message carries the session"
        );
    }
    // The same result through unary Execute is refused with a pointer to streaming.
    let stack2 = Stack::start_with(|c| c.limits.max_result_bytes = 1 << 20).await;
    let client = stack2.client(Version::H3, Codec::Proto).await;
    let resp = client
        .execute(None, "SET STATEMENT max_recursive_iterations = 1000000 FOR WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < 5000) SELECT REPEAT('x', 1000) FROM s")
        .await;
    assert!(error_message(&resp).contains("use StreamExecute"));
    assert!(
        client
            .execute(resp.session.as_ref(), "SELECT 1")
            .await
            .error
            .is_none(),
        "session still usable"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn prepare_and_bind_variables() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H3, Codec::Json).await;
    client
        .execute(
            None,
            "CREATE TABLE p (id INT PRIMARY KEY, s VARCHAR(20), d DATETIME)",
        )
        .await;
    let prep: pb::PrepareResponse = client
        .call(
            Method::Prepare,
            &pb::PrepareRequest {
                query: "SELECT id, s FROM p WHERE id = ? AND s <> ?".into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(prep.error.is_none(), "{:?}", prep.error);
    assert_eq!(prep.params_count, 2);
    assert_eq!(
        prep.fields.iter().map(|f| &f.name[..]).collect::<Vec<_>>(),
        [&b"id"[..], b"s"]
    );
    assert_eq!(prep.fields[0].r#type, Type::Int32 as i32);

    let exec = |query: &str, vars: Vec<(&str, BindVariable)>| {
        let req = pb::ExecuteRequest {
            query: bytes::Bytes::copy_from_slice(query.as_bytes()),
            bind_variables: vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            prepared: true,
            ..Default::default()
        };
        let client = client.clone();
        async move {
            client
                .call::<_, pb::ExecuteResponse>(Method::Execute, &req)
                .await
                .unwrap()
        }
    };
    for (id, s) in [(1, "it's"), (2, "back\\slash"), (3, "🐬")] {
        let resp = exec(
            "INSERT INTO p VALUES (?, ?, ?)",
            vec![
                ("v1", bind(Type::Int64, id.to_string().as_bytes())),
                ("v2", bind(Type::Varchar, s.as_bytes())),
                ("v3", bind(Type::Datetime, b"2024-02-29 12:34:56")),
            ],
        )
        .await;
        assert!(resp.error.is_none(), "{:?}", resp.error);
    }
    let resp = exec(
        "SELECT s FROM p WHERE id = ?",
        vec![("v1", bind(Type::Int64, b"1"))],
    )
    .await;
    assert_eq!(scalar(&resp).unwrap(), "it's");
    let resp = exec(
        "SELECT s FROM p WHERE id = :id",
        vec![("id", bind(Type::Int64, b"2"))],
    )
    .await;
    assert_eq!(scalar(&resp).unwrap(), "back\\slash");
    let resp = exec("SELECT ? IS NULL", vec![("v1", bind(Type::NullType, b""))]).await;
    assert_eq!(scalar(&resp).unwrap(), "1");
    let tuple = BindVariable {
        r#type: Type::Tuple as i32,
        value: Bytes::new(),
        values: vec![
            pb::Value {
                r#type: Type::Int64 as i32,
                value: Bytes::from_static(b"1"),
            },
            pb::Value {
                r#type: Type::Int64 as i32,
                value: Bytes::from_static(b"3"),
            },
        ],
    };
    let resp = exec(
        "SELECT GROUP_CONCAT(s ORDER BY id) FROM p WHERE id IN ::ids",
        vec![("ids", tuple)],
    )
    .await;
    assert_eq!(scalar(&resp).unwrap(), "it's,🐬");
    let resp = exec(
        "SELECT d FROM p WHERE id = ?",
        vec![("v1", bind(Type::Int64, b"3"))],
    )
    .await;
    assert_eq!(scalar(&resp).unwrap(), "2024-02-29 12:34:56");
    // A value that is not what its type says is refused, never spliced in.
    let resp = exec("SELECT ?", vec![("v1", bind(Type::Int64, b"1 OR 1=1"))]).await;
    assert!(error_message(&resp).contains("(errno 1210)"));
    let resp = exec("SELECT ?, ?", vec![("v1", bind(Type::Int64, b"1"))]).await;
    assert!(error_message(&resp).contains("missing bind variable"));
}

#[tokio::test(flavor = "multi_thread")]
async fn compression_is_negotiated() {
    // Every answer compressed, on loopback too (near links otherwise get
    // them as they are: `compression_by_link`).
    let stack = Stack::start_with(|c| {
        c.limits.compress_min_bytes = 0;
        c.limits.compression_by_link = false;
    })
    .await;
    for encoding in [
        Encoding::Snappy,
        Encoding::S2,
        Encoding::Zstd,
        Encoding::Gzip,
    ] {
        let mut client = stack.client(Version::H3, Codec::Proto).await;
        client.encoding = encoding;
        let answer = client
            .raw(
                Method::Execute,
                Codec::Proto.encode(&pb::ExecuteRequest {
                    query: "SELECT REPEAT('ab', 5000)".into(),
                    ..Default::default()
                }),
            )
            .await;
        assert_eq!(answer.status, 200);
        let got = answer
            .headers
            .get("content-encoding")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(
            got,
            encoding.as_str(),
            "the response uses the request's encoding"
        );
        let resp: pb::ExecuteResponse = Codec::Proto.decode(&answer.body).unwrap();
        assert_eq!(scalar(&resp).unwrap().len(), 10_000);
    }
    let mut client = stack.client(Version::H2, Codec::Json).await;
    client.accept = Some("br, zstd");
    let answer = client
        .raw(
            Method::Execute,
            Bytes::from_static(br#"{"query":"select 1"}"#),
        )
        .await;
    assert_eq!(answer.headers.get("content-encoding").unwrap(), "zstd");
    // PlanetScale's Go client asks for `s2, gzip`.
    client.accept = Some("s2, gzip");
    let answer = client
        .raw(
            Method::Execute,
            Bytes::from_static(br#"{"query":"select 1"}"#),
        )
        .await;
    assert_eq!(answer.headers.get("content-encoding").unwrap(), "s2");
    client.accept = None;
    client.encoding = Encoding::Gzip;
    let mut req = client.clone();
    req.encoding = Encoding::Identity;
    let answer = {
        let mut c = req;
        c.accept = None;
        c.raw(
            Method::Execute,
            Bytes::from_static(br#"{"query":"select 1"}"#),
        )
        .await
    };
    assert!(answer.headers.get("content-encoding").is_none());
    // Streaming negotiates through Connect-Accept-Encoding.
    let mut client = stack.client(Version::H3, Codec::Proto).await;
    client.accept = Some("snappy");
    let req = pb::ExecuteRequest {
        query: "SELECT REPEAT('x', 100000)".into(),
        ..Default::default()
    };
    let kept = client.stream(&req, |_, _| true).await.unwrap();
    assert_eq!(
        rows(kept[1].result.as_ref().unwrap())[0][0]
            .as_ref()
            .unwrap()
            .len(),
        100_000
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_are_enforced_with_clear_errors() {
    let stack = Stack::start_with(|c| {
        c.limits.max_request_bytes = 4096;
        c.limits.query_timeout = Duration::from_millis(500);
        c.sessions.max_sessions = 3;
    })
    .await;
    let client = stack.client(Version::H3, Codec::Json).await;
    let big = format!(r#"{{"query":"SELECT '{}'"}}"#, "x".repeat(5000));
    let answer = client.raw(Method::Execute, Bytes::from(big)).await;
    assert_eq!(answer.status, 429);
    let err = myquic::api::ApiError::from_json(&answer.body).unwrap();
    assert_eq!(err.code, Code::ResourceExhausted);
    assert!(err.message.contains("max_request_bytes"), "{}", err.message);
    // A decompression bomb is stopped at the same limit.
    for encoding in [Encoding::Zstd, Encoding::S2] {
        let mut zipped = client.clone();
        zipped.encoding = encoding;
        let bomb = format!(r#"{{"query":"SELECT '{}'"}}"#, "x".repeat(100_000));
        assert_eq!(
            zipped.raw(Method::Execute, Bytes::from(bomb)).await.status,
            429,
            "{encoding:?}"
        );
    }

    let resp = client
        .execute(None, "SELECT BENCHMARK(10000000000, MD5('x'))")
        .await;
    let msg = error_message(&resp);
    assert!(
        msg.contains("query_timeout") && msg.contains("(errno 1317)"),
        "{msg}"
    );
    assert!(
        client
            .execute(resp.session.as_ref(), "SELECT 1")
            .await
            .error
            .is_none()
    );

    // Sessions inside transactions hold their slots (and a backend
    // connection each): past max_sessions, 429. (An idle session outside
    // one is forgotten for a new one instead: tests/fair_shares.rs.)
    let mut sessions = Vec::new();
    let mut refused = None;
    for _ in 0..5 {
        match client.try_execute(None, "BEGIN").await {
            Ok(r) => sessions.push(r.session),
            Err(e) => refused = Some(e),
        }
    }
    let err = refused.expect("the session limit is reached");
    assert_eq!(err.code, Code::ResourceExhausted);
}

#[tokio::test(flavor = "multi_thread")]
async fn create_and_close_session() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H2, Codec::Json).await;
    let created: pb::CreateSessionResponse = client
        .call(Method::CreateSession, &pb::CreateSessionRequest {})
        .await
        .unwrap();
    assert_eq!(created.user.as_ref().unwrap().username, USER);
    let session = created.session.unwrap();
    let set = client.execute(Some(&session), "SET @v = 'kept'").await;
    assert_eq!(
        scalar(&client.execute(set.session.as_ref(), "SELECT @v").await).unwrap(),
        "kept"
    );
    let begin = client.execute(set.session.as_ref(), "BEGIN").await;
    let _: pb::CloseSessionResponse = client
        .call(
            Method::CloseSession,
            &pb::CloseSessionRequest {
                session: begin.session.clone(),
            },
        )
        .await
        .unwrap();
    // Closing released the connection (its variables are gone).
    let after = client.execute(None, "SELECT @v").await;
    assert_eq!(scalar(&after), None);
    // Unknown methods and wrong content types are refused.
    let answer = client.raw(Method::Execute, Bytes::from_static(b"{")).await;
    assert_eq!(answer.status, 400);
}

/// PlanetScale's own JavaScript driver, unmodified, against the gateway.
#[tokio::test(flavor = "multi_thread")]
async fn planetscale_database_js_works_unmodified() {
    let stack = Stack::start().await;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat");
    assert!(
        dir.join("node_modules/@planetscale/database").exists(),
        "run `npm ci --prefix tests/compat` first (tests/run does)"
    );
    let port = stack.addr().port();
    let out = tokio::process::Command::new("node")
        .arg("planetscale.mjs")
        .current_dir(&dir)
        .env(
            "MYQUIC_URL",
            format!("https://{USER}:{PASSWORD}@127.0.0.1:{port}"),
        )
        .env(
            "MYQUIC_BAD_URL",
            format!("https://{USER}:wrong@127.0.0.1:{port}"),
        )
        .env("NODE_EXTRA_CA_CERTS", &stack.cert)
        .output()
        .await
        .expect("running node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "database-js checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// PlanetScale's Go client library (`github.com/planetscale/psdb`, what
/// psdbproxy is built on), unmodified, against the gateway over HTTP/2:
/// S2 on every request and answer, compared with go-sql-driver directly
/// against the same MariaDB (tests/compat/psdb-go, built by tests/run).
#[tokio::test(flavor = "multi_thread")]
async fn planetscale_psdb_go_client_works_unmodified() {
    // S2 answers, as PlanetScale's endpoint sends them: on loopback our
    // gateway would otherwise answer uncompressed (`compression_by_link`),
    // which the client also reads, but then its S2 decoding goes untested.
    let stack = Stack::start_with(|c| c.limits.compression_by_link = false).await;
    let program =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/compat/psdb-go/bin/psdbgo");
    assert!(
        program.exists(),
        "run tests/compat/psdb-go/setup first (tests/run does)"
    );
    let out = tokio::process::Command::new(&program)
        .env("MYQUIC_ADDR", stack.addr().to_string())
        .env("MYQUIC_CA", &stack.cert)
        .env("MYQUIC_USER", USER)
        .env("MYQUIC_PASSWORD", PASSWORD)
        .env(
            "MYQUIC_DIRECT_DSN",
            format!("app:app-backend-pw@unix({})/app", stack.db.socket.display()),
        )
        .output()
        .await
        .expect("running the psdb Go client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "psdb Go client checks failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    println!("{stdout}");
}

/// Production TLS: certificate and key from PEM files; the Connect
/// protocol header is accepted (and not required, as every other test shows).
#[tokio::test(flavor = "multi_thread")]
async fn certificate_files_and_connect_protocol_version() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    let stack = Stack::start_with(|c| {
        c.tls.self_signed_cert_out = None;
        c.tls.cert = Some(cert.clone());
        c.tls.key = Some(key.clone());
    })
    .await;
    std::fs::copy(&cert, &stack.cert).unwrap();
    for version in [Version::H3, Version::H2] {
        let client = stack.client(version, Codec::Json).await;
        let req = http::Request::builder()
            .method("POST")
            .uri(format!("https://localhost{}", Method::Execute.path()))
            .header("content-type", "application/json")
            .header("connect-protocol-version", "1")
            .header("authorization", basic(USER, PASSWORD))
            .body(Bytes::from_static(br#"{"query":"SELECT 'tls ok'"}"#))
            .unwrap();
        let (head, body) = client
            .conn
            .send(req)
            .await
            .unwrap()
            .collect(1 << 20)
            .await
            .unwrap();
        assert_eq!(head.status, 200);
        let resp: pb::ExecuteResponse = Codec::Json.decode(&body).unwrap();
        assert_eq!(scalar(&resp).unwrap(), "tls ok");
    }
}

/// Shape of one streamed message: `F` fields, `R` rows, `E` an end or OK
/// result (neither), `S` the closing session.
fn shape(msg: &pb::ExecuteResponse) -> String {
    match &msg.result {
        Some(r) if !r.fields.is_empty() => format!("F{}", r.fields.len()),
        Some(r) if !r.rows.is_empty() => format!("R{}", r.rows.len()),
        Some(r) => format!("E{}", r.rows_affected),
        None if msg.session.is_some() => "S".into(),
        None => "?".into(),
    }
}

#[tokio::test]
async fn stream_execute_marks_where_each_result_ends() {
    let stack = Stack::start().await;
    let client = stack.client(Version::H3, Codec::Proto).await;
    let run = |query: &'static str| {
        let client = &client;
        async move {
            let req = pb::ExecuteRequest {
                query: bytes::Bytes::copy_from_slice(query.as_bytes()),
                ..Default::default()
            };
            client
                .stream(&req, |_, _| true)
                .await
                .map(|msgs| msgs.iter().map(shape).collect::<Vec<_>>().join(" "))
        }
    };
    assert_eq!(run("SELECT 1").await.unwrap(), "F1 R1 E0 S");
    assert_eq!(
        run("CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")
            .await
            .unwrap(),
        "E0 S"
    );
    assert_eq!(
        run(
            "INSERT INTO t (v) VALUES (1), (2); SELECT v FROM t ORDER BY v; UPDATE t SET v = v + 1"
        )
        .await
        .unwrap(),
        "E2 F1 R2 E0 E2 S"
    );
    run("CREATE PROCEDURE two() BEGIN SELECT 1 AS a; SELECT 2 AS b, 3 AS c; END")
        .await
        .unwrap();
    // A procedure's result sets, then its own OK.
    assert_eq!(run("CALL two()").await.unwrap(), "F1 R1 E0 F2 R1 E0 E0 S");
    // The first statement's result is complete (its end is marked) before
    // the second one's error.
    let msgs = client
        .stream(
            &pb::ExecuteRequest {
                query: "SELECT 1; SELECT * FROM missing".into(),
                ..Default::default()
            },
            |_, _| true,
        )
        .await
        .unwrap();
    let shapes: Vec<String> = msgs.iter().map(shape).collect();
    assert_eq!(shapes.join(" "), "F1 R1 E0 S");
    let last = msgs.last().unwrap();
    assert!(error_message(last).contains("1146"), "{last:?}");
}

/// A request without a session may name the database to create one in
/// (`target_string`, in JSON too): the statement runs there, later
/// requests stay there, and the cookie reports it. A database the
/// account cannot select fails that request, without running it, and
/// the session goes on in the account's default database.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_session_starts_in_its_target_database() {
    let stack = Stack::start().await;
    let target = |db: &str| pb::Session {
        vitess_session: Some(pb::VitessSession {
            target_string: db.into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let target_of = |r: &pb::ExecuteResponse| {
        r.session
            .as_ref()
            .unwrap()
            .vitess_session
            .as_ref()
            .unwrap()
            .target_string
            .clone()
    };
    for codec in [Codec::Proto, Codec::Json] {
        let client = stack.client(Version::H3, codec).await;
        let first = client
            .execute(Some(&target("information_schema")), "SELECT DATABASE()")
            .await;
        assert_eq!(scalar(&first).as_deref(), Some("information_schema"));
        assert_eq!(target_of(&first), "information_schema");
        let next = client
            .execute(first.session.as_ref(), "SELECT DATABASE()")
            .await;
        assert_eq!(scalar(&next).as_deref(), Some("information_schema"));
        // `USE` moves the target, as in Vitess.
        let moved = client.execute(next.session.as_ref(), "USE app").await;
        assert_eq!(target_of(&moved), "app");

        let refused = client
            .execute(Some(&target("no_such_db")), "CREATE TABLE t_target (i INT)")
            .await;
        assert!(
            error_message(&refused).contains("no_such_db"),
            "{refused:?}"
        );
        assert_eq!(target_of(&refused), "");
        let after = client
            .execute(refused.session.as_ref(), "SELECT DATABASE()")
            .await;
        assert_eq!(scalar(&after).as_deref(), Some("app"));
        let exists = client
            .execute(
                None,
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 't_target'",
            )
            .await;
        assert_eq!(scalar(&exists).as_deref(), Some("0"), "the statement ran");
    }
}

/// A 401 decided from the headers comes back over HTTP/3 even while the
/// client is still sending a large body: the gateway stops reading it,
/// and the client reads the response anyway (RFC 9114 §4.1), rather than
/// taking the stopped stream for a broken request.
#[tokio::test(flavor = "multi_thread")]
async fn a_refusal_from_the_headers_reaches_an_http3_client_still_sending() {
    let stack = Stack::start().await;
    let mut client = stack.client(Version::H3, Codec::Json).await;
    client.auth = Some(basic(USER, "wrong"));
    let filler = "x".repeat(4 << 20);
    let body = format!(r#"{{"query":"SELECT '{filler}'"}}"#);
    for _ in 0..3 {
        let answer = client.raw(Method::Execute, Bytes::from(body.clone())).await;
        assert_eq!(answer.status, 401);
    }
}

/// A refused request with a small body gets its 401 whole, even from a
/// strict client: curl reports a stream reset under a complete response
/// as a failure (exit 92), which it did before the gateway read such a
/// body before answering.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_small_request_reaches_curl_whole() {
    let stack = Stack::start().await;
    for http in ["--http2", "--http1.1"] {
        let out = tokio::process::Command::new("curl")
            .args(["-sS", http, "--cacert"])
            .arg(&stack.cert)
            .args(["-u", "app:wrong", "-H", "Content-Type: application/json"])
            .args([
                "--data",
                r#"{"query":"SELECT 1"}"#,
                "-w",
                "%{http_code}",
                "-o",
                "/dev/null",
            ])
            .arg(format!(
                "https://localhost:{}/psdb.v1alpha1.Database/Execute",
                stack.addr().port()
            ))
            .output()
            .await
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{http}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "401", "{http}");
    }
}
