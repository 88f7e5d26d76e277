//! Prepared statements keep their types, byte for byte (issue 12 item 5):
//! every packet of COM_STMT_PREPARE and COM_STMT_EXECUTE answers, from
//! MariaDB directly and through sidecar → gateway → the same MariaDB,
//! with parameters typed as drivers type them — OUT and INOUT parameters
//! of a prepared `CALL` (their result set flagged
//! `SERVER_PS_OUT_PARAMS`), FLOAT columns and parameters in the binary
//! protocol, temporal parameters of every kind, a prepare's parameter
//! definitions (named by their aliases, in the connection's character
//! set) — and the same with mysql_async, a real driver.

mod common;

use mysql_async::Value;
use mysql_async::prelude::*;

use common::raw_packets::{self, DEPRECATE_EOF, PS_OUT_PARAMS, Param, RawClient};
use common::results::binary_results;
use common::sidecar::Chain;
use common::wire::shown;

/// MARIADB_CLIENT_EXTENDED_METADATA, among MariaDB's capabilities.
const MARIADB_EXTENDED_METADATA: u32 = 0x8;

/// Raw clients straight to MariaDB and through the sidecar.
async fn clients(chain: &Chain, extra_caps: u32) -> (RawClient, RawClient) {
    chain.raw_clients(extra_caps).await
}

/// Prepares `sql`, executes it with each parameter list, and returns
/// every packet of every answer, readable.
async fn run(client: &mut RawClient, sql: &str, executions: &[Vec<Param>]) -> Vec<String> {
    let (id, _, prepare) = client.prepare(sql).await;
    let mut seen = vec![format!("PREPARE {sql}")];
    seen.extend(prepare.iter().map(|p| shown(p)));
    for params in executions {
        seen.push("EXECUTE".into());
        seen.extend(client.execute(id, params).await.iter().map(|p| shown(p)));
    }
    client.close(id).await;
    seen
}

/// Runs the same statements both ways, under both EOF styles, and
/// compares every packet.
async fn same_packets(
    chain: &Chain,
    reset: &[&str],
    statements: &[(&str, Vec<Vec<Param>>)],
) -> Vec<String> {
    same_packets_in(chain, &[], reset, statements).await
}

/// [`same_packets`] in a session that `session` (text statements, such
/// as `SET NAMES`) sets up on each client first.
async fn same_packets_in(
    chain: &Chain,
    session: &[&str],
    reset: &[&str],
    statements: &[(&str, Vec<Vec<Param>>)],
) -> Vec<String> {
    let mut directly = Vec::new();
    let mut differences = Vec::new();
    for caps in [0, DEPRECATE_EOF] {
        // All of one, then all of the other: statements that write
        // start by clearing what they write, so each side starts alike.
        let (mut direct, mut via) = clients(chain, caps).await;
        for sql in session {
            for client in [&mut direct, &mut via] {
                let answer = client.query(sql).await;
                assert_eq!(answer[0][0], 0, "`{sql}`: {answer:?}");
            }
        }
        let mut wanted = Vec::new();
        setup(chain, reset).await;
        for (sql, executions) in statements {
            wanted.push(run(&mut direct, sql, executions).await);
        }
        setup(chain, reset).await;
        for ((sql, executions), want) in statements.iter().zip(wanted) {
            let got = run(&mut via, sql, executions).await;
            if got != want {
                differences.push(format!(
                    "`{sql}` ({session:?}, caps {caps:#x}) through the sidecar:\n{got:#?}\ndirectly:\n{want:#?}"
                ));
            }
            directly.extend(want);
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    directly
}

async fn setup(chain: &Chain, statements: &[&str]) {
    let mut direct = chain.direct().await;
    for sql in statements {
        direct.query_drop(*sql).await.unwrap();
    }
}

const PROCEDURES: &[&str] = &[
    "CREATE PROCEDURE p_out(IN a INT, INOUT b VARCHAR(20), OUT c DECIMAL(10,2), OUT d DATETIME(6), OUT f FLOAT)
     BEGIN
       SELECT a AS a_in, b AS b_in;
       SET b = CONCAT(b, '!'); SET c = a / 4; SET d = '2024-02-29 13:14:15.5'; SET f = 1.2345678;
     END",
    "CREATE PROCEDURE p_only_out(OUT n BIGINT UNSIGNED) SET n = 18446744073709551615",
    "CREATE PROCEDURE p_in(IN a INT) SELECT a * 2 AS doubled",
    "CREATE TABLE p_same (x INT PRIMARY KEY)",
    "INSERT INTO p_same VALUES (5), (6)",
    // Its own results look like OUT parameters (a table named as itself,
    // a column named as its parameter): one row, then the real ones.
    "CREATE PROCEDURE p_same(OUT x INT)
     BEGIN
       SELECT p_same.x FROM p_same WHERE p_same.x = 5;
       SELECT p_same.x FROM p_same WHERE p_same.x >= 5 ORDER BY p_same.x;
       SET x = 6;
     END",
];

/// OUT and INOUT parameters of a prepared CALL: through the sidecar it
/// failed with 1414 ("OUT or INOUT argument 2 for routine app.p_out is
/// not a variable"); now every packet is MariaDB's, the last result set
/// flagged SERVER_PS_OUT_PARAMS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_and_inout_parameters_of_a_prepared_call_are_the_servers() {
    let chain = Chain::start().await;
    setup(&chain, PROCEDURES).await;
    let calls = [
        (
            "CALL p_out(?, ?, ?, ?, ?)",
            vec![
                vec![
                    Param::long(7),
                    Param::string(b"hi"),
                    Param::null(),
                    Param::null(),
                    Param::null(),
                ],
                vec![
                    Param::long(-1),
                    Param::null(),
                    Param::null(),
                    Param::null(),
                    Param::float(0.5),
                ],
            ],
        ),
        ("call app.p_only_out(?)", vec![vec![Param::null()]]),
        ("CALL p_in(?)", vec![vec![Param::long(21)]]),
        ("CALL `p_same`(?)", vec![vec![Param::null()]]),
    ];
    let directly = same_packets(&chain, &[], &calls).await;
    // The server did flag the OUT parameters' set, so the test can fail.
    let flagged = directly
        .iter()
        .filter(|p| p.starts_with("[fe"))
        .filter(|p| {
            let bytes = hex_bytes(p);
            let status = if bytes.len() == 5 {
                u16::from_le_bytes([bytes[3], bytes[4]])
            } else {
                raw_packets::ok_status(&bytes)
            };
            status & PS_OUT_PARAMS != 0
        })
        .count();
    assert!(flagged >= 6, "MariaDB flags OUT parameters: {directly:#?}");
}

/// COM_STMT_PREPARE's whole answer, parameter definitions included:
/// MariaDB names a parameter that is a select item by its alias, in the
/// connection's character set, and describes the others as `?`. Through
/// the sidecar every parameter was described as an unbound `?` (the API
/// carried only their count), so `SELECT ? AS a` differed in the name.
/// Both EOF styles, with and without MariaDB's extended metadata, in
/// utf8mb4, latin1 and gbk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameter_definitions_of_a_prepare_are_the_servers() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &[
            "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))",
            "CREATE PROCEDURE p(IN a INT, OUT b VARCHAR(20)) SET b = CONCAT('n', a)",
        ],
    )
    .await;
    let in_utf8mb4: &[&[u8]] = &[
        b"SELECT ?",
        b"SELECT ? AS a, ? + 1 AS b",
        b"INSERT INTO t VALUES (?, ?)",
        b"SELECT * FROM t WHERE id = ? AND name LIKE ?",
        b"CALL p(?, ?)",
        b"SELECT id FROM t ORDER BY id LIMIT ?",
        b"SELECT ? AS x, id FROM t ORDER BY id LIMIT ?, ?",
        b"SELECT (SELECT ? AS inner_alias) AS outer_alias, ? AS `quoted alias`",
        "SELECT ? AS é, ? AS `日本`".as_bytes(),
        b"SELECT 1",
    ];
    let by_charset: &[(&str, &[&[u8]])] = &[
        ("SET NAMES utf8mb4", in_utf8mb4),
        ("SET NAMES latin1", &[b"SELECT ? AS \xe9, ? AS caf\xe9"]),
        // 中 and 文 in gbk.
        (
            "SET NAMES gbk",
            &[b"SELECT ? AS \xd6\xd0, ? + 1 AS \xce\xc4"],
        ),
    ];
    let mut differences = Vec::new();
    let mut named = 0;
    for (caps, mariadb) in [
        (0, 0),
        (DEPRECATE_EOF, 0),
        (0, MARIADB_EXTENDED_METADATA),
        (DEPRECATE_EOF, MARIADB_EXTENDED_METADATA),
    ] {
        let (mut direct, mut via) = chain.raw_clients_mariadb(caps, mariadb).await;
        for (set_names, statements) in by_charset {
            direct.query(set_names).await;
            via.query(set_names).await;
            for sql in *statements {
                let mut answers = Vec::new();
                for client in [&mut direct, &mut via] {
                    let (id, params, packets) = client.prepare(sql).await;
                    client.close(id).await;
                    answers.push((params, packets));
                }
                let (params, want) = &answers[0];
                named += want[1..=usize::from(*params)]
                    .iter()
                    .filter(|p| definition_name(p) != b"?")
                    .count();
                let (want, got): (Vec<_>, Vec<_>) = (
                    want.iter().map(|p| shown(p)).collect(),
                    answers[1].1.iter().map(|p| shown(p)).collect(),
                );
                if got != want {
                    differences.push(format!(
                        "`{}` ({set_names}, caps {caps:#x}, MariaDB caps {mariadb:#x}) through the sidecar:\n{got:#?}\ndirectly:\n{want:#?}",
                        String::from_utf8_lossy(sql)
                    ));
                }
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
    assert!(named > 0, "MariaDB names parameters by their aliases");
}

/// The name in a column definition: its fifth length-encoded string
/// (after catalog, schema, table and org_table; all short here).
fn definition_name(definition: &[u8]) -> &[u8] {
    let mut at = 0;
    for _ in 0..4 {
        at += 1 + usize::from(definition[at]);
    }
    &definition[at + 1..at + 1 + usize::from(definition[at])]
}

/// The bytes of a [`shown`] packet.
fn hex_bytes(shown: &str) -> Vec<u8> {
    let list = &shown[1..shown.find(']').unwrap()];
    list.split(", ")
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect()
}

/// A `CALL` in the text protocol: the status flags of a procedure's
/// results (MORE_RESULTS in every EOF while it runs) are MariaDB's too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_the_text_protocol_is_the_servers() {
    let chain = Chain::start().await;
    setup(&chain, PROCEDURES).await;
    for caps in [0, DEPRECATE_EOF] {
        let (mut direct, mut via) = clients(&chain, caps).await;
        for sql in [
            "CALL p_in(21)",
            "CALL p_out(7, @b, @c, @d, @f)",
            "SELECT @b, @c, @d, @f",
        ] {
            let want: Vec<String> = direct.query(sql).await.iter().map(|p| shown(p)).collect();
            let got: Vec<String> = via.query(sql).await.iter().map(|p| shown(p)).collect();
            assert_eq!(got, want, "`{sql}` (caps {caps:#x})");
        }
    }
}

/// The same calls with mysql_async, which reads the OUT parameters as one
/// more result set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_gets_out_parameters_as_directly() {
    let chain = Chain::start().await;
    setup(&chain, PROCEDURES).await;
    let mut answers = Vec::new();
    for mut conn in [chain.client().await, chain.direct().await] {
        let mut out = Vec::new();
        let stmt = conn.prep("CALL p_out(?, ?, ?, ?, ?)").await.unwrap();
        let mut result = conn
            .exec_iter(&stmt, (7, "hi", Value::NULL, Value::NULL, Value::NULL))
            .await
            .unwrap();
        while !result.is_empty() {
            let columns: Vec<String> = result
                .columns_ref()
                .iter()
                .map(|c| format!("{}:{:?}", c.name_str(), c.column_type()))
                .collect();
            let rows: Vec<mysql_async::Row> = result.collect().await.unwrap();
            let rows: Vec<Vec<Value>> = rows.into_iter().map(|r| r.unwrap()).collect();
            out.push(format!("{columns:?} {rows:?}"));
        }
        drop(result);
        answers.push(out);
    }
    assert_eq!(
        answers[1].len(),
        2,
        "the SELECT, then the OUT parameters: {:?}",
        answers[1]
    );
    assert!(
        answers[1][1].contains("Float(1.2345678)"),
        "{:?}",
        answers[1]
    );
    assert_eq!(answers[0], answers[1]);
}

/// A FLOAT column read in the binary protocol is the server's 4-byte
/// value (it was MariaDB's 6-digit text, re-parsed: 1.2345678 became
/// 1.23457), and FLOAT and DOUBLE parameters are what the client sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_float_columns_and_parameters_are_exact() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &[
            "CREATE TABLE floats (id INT PRIMARY KEY, f FLOAT, f2 FLOAT(7,4), d DOUBLE, fu FLOAT UNSIGNED)",
            "INSERT INTO floats VALUES (1, 1.2345678, 123.45678, 0.1, 3.4028234e38),
              (2, -1.17549435e-38, -0.0001, -1.7976931348623157e308, 0),
              (3, 16777217, NULL, 5e-324, 1e-45)",
        ],
    )
    .await;
    let statements = [
        (
            "SELECT f, f2, d, fu, f * 2 AS f2x FROM floats WHERE id > ? ORDER BY id",
            vec![vec![Param::long(0)]],
        ),
        (
            "SELECT ? AS pf, ? AS pd, ? + 0 AS sum",
            vec![vec![
                Param::float(0.1),
                Param::double(1.0 / 3.0),
                Param::float(-3.4028235e38),
            ]],
        ),
        (
            "INSERT INTO floats VALUES (?, ?, ?, ?, ?)",
            vec![vec![
                Param::long(4),
                Param::float(9.876_543),
                Param::double(12.34567),
                Param::double(f64::MIN_POSITIVE),
                Param::float(1e-10),
            ]],
        ),
        (
            "SELECT * FROM floats WHERE id = ?",
            vec![vec![Param::long(4)]],
        ),
    ];
    same_packets(&chain, &["DELETE FROM floats WHERE id > 3"], &statements).await;
    // And with a driver.
    let mut values = Vec::new();
    for mut conn in [chain.client().await, chain.direct().await] {
        values.push(
            binary_results(
                &mut conn,
                "SELECT f FROM floats WHERE id = ?",
                vec![Value::Int(1)],
            )
            .await,
        );
    }
    assert!(values[1].contains("Float(1.2345678)"), "{}", values[1]);
    assert_eq!(values[0], values[1]);
}

/// Temporal parameters of every kind and form — DATE, DATETIME and
/// TIMESTAMP with and without fractions, zero and invalid dates, TIME
/// negative, past 24 hours, out of range — echoed (`SELECT ?`), compared
/// and stored, every packet as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn temporal_parameters_of_every_kind_are_the_servers() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &["CREATE TABLE temporal (id INT PRIMARY KEY, d DATE, dt DATETIME(6), ts TIMESTAMP(6) NULL, t TIME(6))"],
    )
    .await;
    let (date, datetime, timestamp) = (10, 12, 7);
    let kinds: Vec<(&str, Param)> = vec![
        ("date", Param::date(date, (2024, 2, 29, 0, 0, 0, 0), 4)),
        ("zero date", Param::date(date, (0, 0, 0, 0, 0, 0, 0), 0)),
        (
            "invalid date",
            Param::date(date, (2023, 2, 30, 0, 0, 0, 0), 4),
        ),
        (
            "datetime",
            Param::date(datetime, (2024, 2, 29, 13, 14, 15, 0), 7),
        ),
        (
            "datetime.us",
            Param::date(datetime, (1000, 1, 1, 0, 0, 0, 1), 11),
        ),
        (
            "datetime date only",
            Param::date(datetime, (9999, 12, 31, 0, 0, 0, 0), 4),
        ),
        (
            "zero datetime",
            Param::date(datetime, (0, 0, 0, 0, 0, 0, 0), 0),
        ),
        (
            "invalid datetime",
            Param::date(datetime, (2024, 4, 31, 23, 59, 59, 999_999), 11),
        ),
        (
            "timestamp",
            Param::date(timestamp, (2038, 1, 19, 3, 14, 7, 500_000), 11),
        ),
        ("time", Param::time(false, 0, 13, 14, 15, 0, 8)),
        ("negative time", Param::time(true, 0, 0, 0, 1, 0, 8)),
        (
            "time over 24h",
            Param::time(false, 1, 10, 0, 0, 123_456, 12),
        ),
        ("time -838:59:59", Param::time(true, 34, 22, 59, 59, 0, 8)),
        ("time out of range", Param::time(false, 40, 0, 0, 0, 7, 12)),
        ("zero time", Param::time(false, 0, 0, 0, 0, 0, 0)),
    ];
    let mut statements = Vec::new();
    for (i, (_, param)) in kinds.into_iter().enumerate() {
        let same = |p: &Param| Param {
            ty: p.ty,
            unsigned: p.unsigned,
            value: p.value.clone(),
        };
        // A DATE parameter is a literal (but for a zero DATE): stored as
        // directly, but `SELECT ?` answers NOT NULL.
        if param.ty != date {
            statements.push((
                "SELECT ? AS v, ? = '2024-02-29' AS eq, ? + 0 AS n",
                vec![vec![same(&param), same(&param), same(&param)]],
            ));
        }
        statements.push((
            "INSERT INTO temporal VALUES (?, ?, ?, ?, ?)",
            vec![vec![
                Param::long(i as i32),
                same(&param),
                same(&param),
                same(&param),
                param,
            ]],
        ));
    }
    statements.push(("SHOW WARNINGS", vec![vec![]]));
    statements.push((
        "SELECT * FROM temporal WHERE id >= ? ORDER BY id",
        vec![vec![Param::long(0)]],
    ));
    same_packets(&chain, &["DELETE FROM temporal"], &statements).await;
}

/// A string parameter that is not a valid string of the connection's
/// character set (a lone gbk lead byte, `0x81 0x20`, `0xFF`) is stored as
/// sent, as MariaDB stores any binary-protocol string parameter: bytes as
/// they are in a VARBINARY column; in a column of the character set, 1366
/// under a strict `sql_mode`, else `?` and a warning; echoed as its bytes.
/// Through the sidecar it was an introducer literal (`_gbk X'8120'`),
/// refused with 1300 "Invalid gbk character string". Valid strings, which
/// stay literals, are stored alongside; in gbk, big5, sjis (with its
/// single-byte katakana), euckr and utf8mb4, strict or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_strings_of_the_connection_charset_are_stored_as_sent() {
    let chain = Chain::start().await;
    let charsets = ["gbk", "big5", "sjis", "euckr", "utf8mb4"];
    let mut tables = Vec::new();
    for cs in charsets {
        tables.push(format!(
            "CREATE TABLE s_{cs} (id INT PRIMARY KEY, v VARCHAR(10) CHARACTER SET {cs}, b VARBINARY(10))"
        ));
    }
    setup(
        &chain,
        &tables.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await;
    // Invalid in every character set here; then strings valid in some
    // (中 in gbk, a big5 pair, sjis katakana, a euckr pair, é in UTF-8)
    // and invalid in others: each is stored as directly either way.
    let invalid: &[&[u8]] = &[b"\x81\x20", b"\x81", b"a\xff", b"\x80"];
    let others: &[&[u8]] = &[
        b"\xd6\xd0",
        b"\xa4\x40",
        b"\xb1",
        b"\xb0\xa1",
        b"\xc3\xa9",
        b"\xc3",
        b"plain",
    ];
    for cs in charsets {
        for mode in ["STRICT_TRANS_TABLES", ""] {
            let set_names = format!("SET NAMES {cs}");
            let set_mode = format!("SET sql_mode = '{mode}'");
            let insert = format!("INSERT INTO s_{cs} VALUES (?, ?, ?)");
            let read = format!("SELECT id, HEX(v), HEX(b) FROM s_{cs} WHERE id >= ? ORDER BY id");
            let rows = |values: &[&[u8]], first: i32| {
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        vec![
                            Param::long(first + i as i32),
                            Param::string(v),
                            Param::string(v),
                        ]
                    })
                    .collect::<Vec<_>>()
            };
            let echo = invalid
                .iter()
                .map(|v| vec![Param::string(v), Param::string(v)])
                .collect();
            let statements = [
                (insert.as_str(), rows(invalid, 0)),
                ("SHOW WARNINGS", vec![vec![]]),
                (insert.as_str(), rows(others, 10)),
                (read.as_str(), vec![vec![Param::long(0)]]),
                ("SELECT HEX(?) AS h, ? = 'x' AS eq", echo),
            ];
            let reset = format!("DELETE FROM s_{cs}");
            same_packets_in(&chain, &[&set_names, &set_mode], &[&reset], &statements).await;
        }
    }
}

/// Parameters of a statement prepared at the backend keep the client's
/// types (not an INT24, which MariaDB reads as no value at all, so that
/// every later parameter takes the bytes of the one before): `SELECT ?`
/// of a TINY, SHORT or LONG (in a statement prepared
/// there for its FLOAT) is a column of that type, not mysql_async's
/// LONGLONG; a DATE argument of a `CALL` is a DATE, not a DATETIME
/// (`'2024-01-02'` in a VARCHAR parameter, not `'2024-01-02 00:00:00'`);
/// a BLOB one is bytes, not a string in the connection's character set
/// (converted from latin1); a TIMESTAMP is a TIMESTAMP. Through the
/// sidecar each was mysql_async's type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_prepared_at_the_backend_keep_the_clients_types() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &["CREATE PROCEDURE p_text(IN v VARCHAR(40) CHARACTER SET utf8mb4, IN w VARCHAR(40) CHARACTER SET utf8mb4) SELECT v, HEX(v) AS hv, w, HEX(w) AS hw"],
    )
    .await;
    let typed = |ty: u8, unsigned: bool, value: &[u8]| Param {
        ty,
        unsigned,
        value: Some(value.to_vec()),
    };
    let blob = |bytes: &[u8]| Param {
        ty: 252,
        ..Param::string(bytes)
    };
    let date = || Param::date(10, (2024, 1, 2, 0, 0, 0, 0), 4);
    let integers = vec![
        vec![
            typed(1, false, &[0xff]),
            typed(1, true, &[0xff]),
            typed(2, false, &(-2i16).to_le_bytes()),
            typed(2, true, &u16::MAX.to_le_bytes()),
            Param::long(i32::MIN),
            typed(3, true, &u32::MAX.to_le_bytes()),
            Param::float(0.5),
        ],
        vec![
            typed(1, false, &[0x7f]),
            typed(1, true, &[0]),
            typed(2, false, &i16::MAX.to_le_bytes()),
            typed(2, true, &[1, 0]),
            Param::long(i32::MAX),
            typed(3, true, &[0; 4]),
            Param::float(-0.5),
        ],
    ];
    let statements = [
        (
            "SELECT ? AS t, ? AS tu, ? AS s, ? AS su, ? AS l, ? AS lu, ? AS f",
            integers,
        ),
        (
            "SELECT ? AS ts, ? AS d",
            vec![vec![
                Param::date(7, (2024, 1, 2, 3, 4, 5, 0), 7),
                Param::date(10, (0, 0, 0, 0, 0, 0, 0), 0),
            ]],
        ),
        (
            "CALL p_text(?, ?)",
            vec![
                vec![date(), Param::date(10, (0, 0, 0, 0, 0, 0, 0), 0)],
                vec![Param::long(7), typed(1, false, &[0x80])],
                vec![blob(b"\xc3\xa9"), blob(b"plain")],
            ],
        ),
    ];
    same_packets_in(&chain, &["SET NAMES latin1"], &[], &statements).await;
    same_packets(&chain, &[], &statements).await;
}

/// What the gateway takes for surely valid strings (literals) the server
/// takes too, else a literal would be refused with 1300: every string of
/// one and two bytes that `Strings` calls valid, in each character set
/// whose rules it knows, one literal of them all (separated by spaces,
/// which no character set reads as part of a character).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strings_taken_for_valid_are_valid_to_the_server() {
    use myquic::translate::well_formed::Strings;
    let db = common::MariaDb::start().await;
    let mut conn = db.direct().await;
    for cs in [
        "gbk", "big5", "sjis", "cp932", "utf8mb4", "utf8mb3", "latin1", "cp1251",
    ] {
        let strings = Strings::from_name(cs);
        let mut all = Vec::new();
        let mut taken = 0;
        for len in [1, 2] {
            for n in 0..(1usize << (8 * len)) {
                let bytes = &n.to_be_bytes()[8 - len..];
                if bytes.is_ascii() || !strings.surely_valid(bytes) {
                    continue;
                }
                taken += 1;
                all.extend_from_slice(bytes);
                all.push(b' ');
            }
        }
        assert!(taken > 100, "{cs}: {taken}");
        let hex: String = all.iter().map(|b| format!("{b:02X}")).collect();
        let sql = format!("SELECT LENGTH(_{cs} X'{hex}')");
        let length: Option<u64> = conn
            .query_first(sql)
            .await
            .unwrap_or_else(|e| panic!("{cs}: {e}"));
        assert_eq!(length, Some(all.len() as u64), "{cs}");
    }
}

/// What running a COM_STMT_EXECUTE as a prepared statement at the backend
/// costs (`cargo test --test prepared_types backend_prepare_cost --
/// --ignored --nocapture`): the same point SELECT through the sidecar,
/// with its key a bound INT (prepared at the backend once, then run from
/// the gateway's statement cache, binary rows) and a literal in the
/// statement's text (no parameter: substituted, text protocol at the
/// backend, as every execute ran before), interleaved in rounds so that
/// load on the machine hits both alike; then the same for a SELECT of
/// 500 rows of ~110 bytes. With table columns only, the bound execute
/// runs as text too (only the cached statement's columns are looked at);
/// with a column that is an expression (`CONCAT(v)`) it runs the cached
/// statement, binary rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check"]
async fn backend_prepare_cost() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &[
            "CREATE TABLE m (id INT PRIMARY KEY, v VARCHAR(20), w VARCHAR(120))",
            "INSERT INTO m SELECT seq, CONCAT('v', seq), REPEAT('w', 100) FROM seq_1_to_1000",
        ],
    )
    .await;
    let mut conn = chain.client().await;
    let point = |key: &str| format!("SELECT id, v FROM m WHERE id = {key}");
    let many = |key: &str| format!("SELECT id, v, w FROM m WHERE id > {key}");
    // An expression column: the execute runs the cached statement, rows
    // in the binary protocol.
    let point_expr = |key: &str| format!("SELECT id, CONCAT(v) FROM m WHERE id = {key}");
    let many_expr = |key: &str| format!("SELECT id, CONCAT(v), w FROM m WHERE id > {key}");
    for (what, sql, rounds, per_round, rows) in [
        (
            "point SELECT",
            &point as &dyn Fn(&str) -> String,
            20,
            100,
            1,
        ),
        ("point SELECT, a column CONCAT(v)", &point_expr, 20, 100, 1),
        ("SELECT of 500 rows", &many, 10, 20, 500),
        (
            "SELECT of 500 rows, a column CONCAT(v)",
            &many_expr,
            10,
            20,
            500,
        ),
    ] {
        let bound = conn.prep(sql("?")).await.unwrap();
        let literal = conn.prep(sql("500")).await.unwrap();
        let (mut text, mut binary) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            for (stmt, params, times) in [
                (&literal, mysql_async::Params::Empty, &mut text),
                (&bound, (Value::Int(500),).into(), &mut binary),
            ] {
                for _ in 0..per_round {
                    let started = std::time::Instant::now();
                    let got: Vec<(i64, String)> = conn
                        .exec_map(stmt, params.clone(), |row: mysql_async::Row| {
                            (row.get(0).unwrap(), row.get(1).unwrap())
                        })
                        .await
                        .unwrap();
                    assert_eq!(got.len(), if rows == 1 { 1 } else { 500 });
                    if round > 0 {
                        times.push(started.elapsed().as_secs_f64() * 1e6);
                    }
                }
            }
        }
        for (name, times) in [
            ("literal (text at the backend)", &mut text),
            ("parameter", &mut binary),
        ] {
            times.sort_by(f64::total_cmp);
            let mean = times.iter().sum::<f64>() / times.len() as f64;
            println!(
                "{what}, {name}: {} executes, median {:.0} µs, p90 {:.0} µs, mean {:.0} µs",
                times.len(),
                times[times.len() / 2],
                times[times.len() * 9 / 10],
                mean
            );
        }
    }
}

/// The column definitions and values of an executed statement whose
/// result columns are made of its parameters: MariaDB types `CAST(? AS
/// SIGNED)` and `? + 1` of an INT parameter as LONGLONG (8-byte values)
/// of length 11/12, nullable, `SELECT ?` of one as LONG of length 11, and
/// `CONCAT(?, 'x')` 48 long. Before, the sidecar's parameters were
/// literals there, typed by their text: LONG of the literal's own length,
/// NOT NULL, `CONCAT` 8 long. Every parameter type a driver sends (INT,
/// BIGINT signed and unsigned, DECIMAL, DOUBLE, strings and BLOBs in
/// utf8mb4, latin1 and gbk, DATE, DATETIME, TIME, NULL), each both bare
/// and in an expression, and an execute of the same statement with
/// other values (the backend's statement is prepared once, then run
/// again), under both EOF styles.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_columns_made_of_parameters_are_typed_as_directly() {
    let chain = Chain::start().await;
    let date = Param::date(10, (2024, 1, 2, 0, 0, 0, 0), 4);
    let datetime = Param::date(12, (2024, 1, 2, 3, 4, 5, 600_000), 11);
    let time = Param::time(true, 1, 2, 3, 4, 0, 8);
    let every = || {
        vec![
            vec![Param::long(5)],
            vec![Param::long(-2_000_000_000)],
            vec![Param::longlong(i64::MIN)],
            vec![Param::unsigned_longlong(u64::MAX)],
            vec![Param::decimal("-12.3450")],
            vec![Param::double(0.1)],
            vec![Param::string(b"abc")],
            vec![Param::blob(b"\0\xff")],
            vec![Param::null()],
            vec![Param::date(10, (2024, 1, 2, 0, 0, 0, 0), 4)],
            vec![Param::date(12, (2024, 1, 2, 3, 4, 5, 600_000), 11)],
            vec![Param::time(true, 1, 2, 3, 4, 0, 8)],
        ]
    };
    let statements = [
        (
            "SELECT ? AS a",
            vec![vec![Param::long(5)], vec![Param::long(-7)]],
        ),
        ("SELECT CAST(? AS SIGNED) AS c", vec![vec![Param::long(5)]]),
        ("SELECT ? + 1 AS s", vec![vec![Param::long(5)]]),
        ("SELECT CONCAT(?, 'x') AS t", vec![vec![Param::long(5)]]),
        ("SELECT ? AS v", vec![vec![Param::string(b"abc")]]),
        ("SELECT ? AS e", every()),
        ("SELECT ? + 1 AS p", every()),
        ("SELECT CONCAT(?, 'x') AS k", every()),
        (
            "SELECT COALESCE(?, 1) AS n, ? AS m",
            vec![vec![Param::null(), date]],
        ),
        (
            "SELECT IF(? > 0, ?, ?) AS i",
            vec![vec![Param::long(1), datetime, time]],
        ),
        // Columns of tables made of parameters.
        ("SELECT x FROM (SELECT ? AS x) d", every()),
        (
            "WITH c AS (SELECT ? AS x) SELECT x FROM c",
            vec![vec![Param::long(5)]],
        ),
        (
            "SELECT x FROM (SELECT ? AS x LIMIT 1) d",
            vec![vec![Param::long(5)], vec![Param::string(b"abc")]],
        ),
    ];
    same_packets(&chain, &[], &statements).await;
    // A table's own columns (run with literals, as text: no parameter
    // shows in them), beside parameters. (Not a UNION of them: its scan
    // of a temporary table sets SERVER_QUERY_NO_INDEX_USED on the EOF
    // after the definitions, a Known limit either way.)
    let table = [
        "DROP TABLE IF EXISTS tp",
        "CREATE TABLE tp (id INT PRIMARY KEY, v VARCHAR(10))",
        "INSERT INTO tp VALUES (1, 'a'), (2, 'b')",
    ];
    let statements = [
        (
            "SELECT id, v FROM tp WHERE id = ?",
            vec![vec![Param::long(1)], vec![Param::string(b"2")]],
        ),
        (
            "SELECT v, ? AS p FROM tp WHERE id = ?",
            vec![vec![Param::long(5), Param::long(2)]],
        ),
    ];
    same_packets(&chain, &table, &statements).await;
    // Strings in the connection's character set, valid or not.
    for charset in ["latin1", "gbk", "utf8mb4"] {
        let set_names = format!("SET NAMES {charset}");
        let statements = [
            (
                "SELECT ? AS s, CONCAT(?, 'x') AS t, LENGTH(?) AS l",
                vec![
                    vec![
                        Param::string(b"abc"),
                        Param::string("é".as_bytes()),
                        Param::string(b"\xd6\xd0"),
                    ],
                    vec![
                        Param::string(b"\x81\x20"),
                        Param::blob(b"\xe9"),
                        Param::string(b""),
                    ],
                ],
            ),
            ("SELECT ? AS a", vec![vec![Param::long(5)]]),
        ];
        same_packets_in(&chain, &[&set_names], &[], &statements).await;
    }
}

/// The gateway prepares a client's statement at the backend to execute
/// it, and closes it there as soon as it ran: a statement left prepared
/// on a pooled connection counts against the session's
/// `max_session_mem_used` and the server's `max_prepared_stmt_count`,
/// shared with every other client. Kept in a cache of 64, it made
/// MariaDB's own `main.func_sformat` fail in `--ps-protocol` through the
/// sidecar only (1290 for a statement that needs just under the
/// session's 512 KiB), and the server counted 64 statements that no
/// client held. A client prepares, executes and closes 140 statements
/// (columns made of a parameter: prepared at the backend; columns of a
/// table: text), the server then holds none, and the next statement runs
/// within the session's memory limit as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_a_client_closed_hold_nothing_at_the_backend() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &[
            "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO k VALUES (1, 'a')",
        ],
    )
    .await;
    let mut status = chain.direct().await;
    let (mut direct, mut via) = clients(&chain, DEPRECATE_EOF).await;
    let mut answers = Vec::new();
    for client in [&mut direct, &mut via] {
        let mut seen = Vec::new();
        for i in 0..70 {
            for sql in [
                format!("SELECT ? + {i}"),
                format!("SELECT v FROM k WHERE id = ? - {i}"),
            ] {
                seen.extend(run(client, &sql, &[vec![Param::long(1 + i)]]).await);
            }
        }
        let held: String = status
            .query_first(
                "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
                 WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'",
            )
            .await
            .unwrap()
            .unwrap();
        seen.push(format!("statements prepared at the server: {held}"));
        let answer = client.query("SET max_session_mem_used = 524288").await;
        assert_eq!(answer[0][0], 0, "{answer:?}");
        let sformat = "SELECT LENGTH(SFORMAT('{:524288}', ?))";
        seen.extend(run(client, sformat, &[vec![Param::long(1)]]).await);
        answers.push(seen);
    }
    let (directly, through) = (&answers[0], &answers[1]);
    assert!(
        directly.contains(&"statements prepared at the server: 0".to_string()),
        "{directly:?}"
    );
    // The first difference only: the lists are long.
    let first = through.iter().zip(directly).position(|(a, b)| a != b);
    assert!(
        first.is_none() && through.len() == directly.len(),
        "through the sidecar {:?}, directly {:?}",
        first.map(|i| &through[i.saturating_sub(3)..(i + 4).min(through.len())]),
        first.map(|i| &directly[i.saturating_sub(3)..(i + 4).min(directly.len())]),
    );
}

/// What a backend prepare said of a text is remembered, not the
/// statement: a client's statement whose result columns are all a
/// table's own and whose parameters literals keep exactly (a string) is
/// prepared at the backend once (the client's prepare, which the gateway
/// answers from the backend's), and its executes run as text; one with a
/// column made of a parameter, or with an integer parameter, is prepared
/// again for each execute (and closed after it). Counted in the server's
/// general log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_executes_that_need_a_backend_statement_prepare_one() {
    let chain = Chain::start().await;
    setup(
        &chain,
        &[
            "CREATE TABLE kp (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO kp VALUES (1, 'a'), (2, 'b')",
        ],
    )
    .await;
    // The server's general log (its global status counts other threads'
    // commands only when they end).
    let mut status = mysql_async::Conn::new(chain.stack.db.root_opts())
        .await
        .unwrap();
    status
        .query_drop("SET GLOBAL log_output = 'TABLE', general_log = 1")
        .await
        .unwrap();
    let mut prepares = async || -> u64 {
        status
            .query_first("SELECT COUNT(*) FROM mysql.general_log WHERE command_type = 'Prepare'")
            .await
            .unwrap()
            .unwrap()
    };
    let (_, mut via) = clients(&chain, DEPRECATE_EOF).await;
    let mut counted = Vec::new();
    for sql in [
        "SELECT id, v FROM kp WHERE v = ?",
        "SELECT id, CONCAT(v) FROM kp WHERE v = ?",
        "SELECT id, v FROM kp WHERE id = ?",
    ] {
        let before = prepares().await;
        let (id, _, _) = via.prepare(sql).await;
        for key in [1, 2, 1, 2, 1] {
            let param = match sql.ends_with("v = ?") {
                true => Param::string(if key == 1 { b"a" } else { b"b" }),
                false => Param::long(key),
            };
            let answer = via.execute(id, &[param]).await;
            assert_ne!(answer[0][0], 0xff, "{sql}: {answer:?}");
        }
        via.close(id).await;
        counted.push((sql, prepares().await - before));
    }
    assert_eq!(
        counted,
        [
            ("SELECT id, v FROM kp WHERE v = ?", 1),
            ("SELECT id, CONCAT(v) FROM kp WHERE v = ?", 6),
            // An integer stays a parameter (`ORDER BY ?` is no column
            // number), so the statement is prepared for each execute.
            ("SELECT id, v FROM kp WHERE id = ?", 6),
        ]
    );
}

/// An integer parameter in `GROUP BY ?` or `ORDER BY ?` is an expression
/// (a constant), where a bare integer literal would be a column number
/// (`GROUP BY 1` of `SELECT COUNT(*)` is refused with 1056, `ORDER BY 2`
/// sorts): a guard for whatever binds an integer as a literal (it passed
/// before this design too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_integer_parameter_is_no_column_number() {
    let chain = Chain::start().await;
    let reset = [
        "DROP TABLE IF EXISTS g",
        "CREATE TABLE g (a INT, b INT)",
        "INSERT INTO g VALUES (1, 3), (2, 2), (3, 1)",
    ];
    same_packets(
        &chain,
        &reset,
        &[
            (
                "SELECT COUNT(*) FROM g GROUP BY ?",
                vec![vec![Param::long(1)]],
            ),
            (
                "SELECT a FROM g ORDER BY ?, a DESC",
                vec![vec![Param::long(2)]],
            ),
        ],
    )
    .await;
}
