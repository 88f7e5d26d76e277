//! Text the backend sends that is not UTF-8 — error and warning messages
//! quoting a latin1 or gbk statement, a message MariaDB cut inside a
//! character, a login name in latin1 — reaches a client through the
//! sidecar byte for byte as directly (issue 12). Differential: the stock
//! `mariadb` client (which prints a server's messages as their bytes) runs
//! the same script directly against MariaDB and through sidecar → gateway
//! → the same MariaDB, and stdout and stderr must be the same bytes. At
//! the API, such bytes go only to a client that asks for them.

mod common;

use std::process::Stdio;

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use myquic::api::pb;
use myquic::api::{Codec, Method, RAW_TEXT_HEADER};

use common::sidecar::Chain;
use common::{LOCAL_PASSWORD, LOCAL_USER, Stack, Version};

/// Where the `mariadb` client connects, and as whom.
enum Target<'a> {
    Direct(&'a Chain),
    Sidecar(&'a Chain),
}

/// What the client printed: stdout and stderr, as bytes.
type Printed = (Vec<u8>, Vec<u8>);

/// Who logs in, into which database (as bytes: either may be latin1).
#[derive(Clone, Copy)]
struct Login<'a> {
    /// The target's own account if `None`.
    user: Option<&'a [u8]>,
    database: &'a [u8],
}

const APP: Login<'static> = Login {
    user: None,
    database: b"app",
};

/// Runs `script` with the `mariadb` client in `charset` (`--force`: on
/// past errors).
async fn mariadb(target: Target<'_>, charset: &str, login: Login<'_>, script: &[u8]) -> Printed {
    use std::ffi::{OsStr, OsString};
    use std::os::unix::ffi::OsStrExt;
    let (socket, default_user, password) = match target {
        Target::Direct(chain) => (&chain.stack.db.socket, "app", "app-backend-pw"),
        Target::Sidecar(chain) => (&chain.socket, LOCAL_USER, LOCAL_PASSWORD),
    };
    let mut user_arg = OsString::from("--user=");
    user_arg.push(
        login
            .user
            .map_or(OsStr::new(default_user), OsStr::from_bytes),
    );
    let mut child = Command::new("mariadb")
        .args(["--no-defaults", "--batch", "--force"])
        .arg(format!("--default-character-set={charset}"))
        .arg(format!("--socket={}", socket.display()))
        .arg(user_arg)
        .arg(format!("--password={password}"))
        .arg(OsStr::from_bytes(login.database))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the mariadb client runs");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(script).await.expect("script written");
    drop(stdin);
    let out = child.wait_with_output().await.expect("client ends");
    (out.stdout, out.stderr)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Both targets, the sidecar first (so that a statement that changes the
/// database runs there before it runs directly).
async fn both(chain: &Chain, charset: &str, login: Login<'_>, script: &[u8]) -> [Printed; 2] {
    let via = mariadb(Target::Sidecar(chain), charset, login, script).await;
    let direct = mariadb(Target::Direct(chain), charset, login, script).await;
    [via, direct]
}

fn shown(printed: &Printed) -> String {
    format!(
        "stdout: {}\nstderr: {}",
        printed.0.escape_ascii(),
        printed.1.escape_ascii()
    )
}

/// latin1: MariaDB's "near '…'" quoting a statement's bytes, cut by its
/// lexer inside a UTF-8 character (`é` is C3 A9 and the quote starts at
/// A9: MariaDB's suite case `signal` does this); a missing table's latin1
/// name; a SIGNAL's MESSAGE_TEXT; a warning quoting a latin1 value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latin1_error_and_warning_messages_are_the_backends_bytes() {
    let chain = Chain::start().await;
    let script: &[u8] = b"SELECT 1 c\xc3\xa9\xc3\xa8 foo bar;\n\
        SELECT * FROM caf\xe9;\n\
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'caf\xe9 cr\xe8me';\n\
        SELECT CAST('\xe9t\xe9' AS SIGNED);\n\
        SHOW WARNINGS;\n";
    let [via, direct] = both(&chain, "latin1", APP, script).await;
    for (bytes, what) in [
        (
            &b"near '\xa9\xc3\xa8 foo bar' at line 1"[..],
            "a quote cut inside a character",
        ),
        (b"Table 'app.caf\xe9' doesn't exist", "a latin1 table name"),
        (
            b"ERROR 1644 (45000) at line 3: caf\xe9 cr\xe8me\n",
            "a SIGNAL's text",
        ),
    ] {
        assert!(
            contains(&direct.1, bytes),
            "directly, {what}:\n{}",
            shown(&direct)
        );
    }
    assert!(
        contains(&direct.0, b"Truncated incorrect INTEGER value: '\xe9t\xe9'"),
        "directly, a warning:\n{}",
        shown(&direct)
    );
    assert_eq!(
        via,
        direct,
        "through the sidecar:\n{}\ndirectly:\n{}",
        shown(&via),
        shown(&direct)
    );
}

/// gbk: a syntax error quoting gbk text (never valid UTF-8: D6 D0 is 中),
/// a SIGNAL raised inside a procedure with a gbk MESSAGE_TEXT, and a
/// truncated-value warning in a gbk session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gbk_error_and_warning_messages_are_the_backends_bytes() {
    let chain = Chain::start().await;
    let script: &[u8] = b"SELECT 1 FROM WHERE '\xd6\xd0\xce\xc4';\n\
        CREATE OR REPLACE PROCEDURE fail_gbk() SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '\xd6\xd0\xce\xc4';\n\
        CALL fail_gbk();\n\
        SELECT CAST('\xd6\xd0x' AS SIGNED);\n\
        SHOW WARNINGS;\n";
    let [via, direct] = both(&chain, "gbk", APP, script).await;
    assert!(
        contains(&direct.1, b"near 'WHERE '\xd6\xd0\xce\xc4'' at line 1")
            && contains(
                &direct.1,
                b"ERROR 1644 (45000) at line 3: \xd6\xd0\xce\xc4\n"
            ),
        "directly:\n{}",
        shown(&direct)
    );
    assert!(
        contains(&direct.0, b"value: '\xd6\xd0x'"),
        "directly:\n{}",
        shown(&direct)
    );
    assert_eq!(
        via,
        direct,
        "through the sidecar:\n{}\ndirectly:\n{}",
        shown(&via),
        shown(&direct)
    );
}

/// A login name that is not UTF-8 is never turned into another name: no
/// local account can have it (the configuration is UTF-8), and the
/// refusal quotes it as the server's does. A database name that is not
/// UTF-8 is read by the server in the client's character set, as directly
/// (here: one the account may not use, 1044).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_names_that_are_not_utf8_are_refused_as_the_server_refuses_them() {
    let chain = Chain::start().await;
    let unknown_database = Login {
        user: None,
        database: b"caf\xe9",
    };
    let [via, direct] = both(&chain, "latin1", unknown_database, b"SELECT 1;\n").await;
    assert!(
        direct.1.starts_with(
            b"ERROR 1044 (42000): Access denied for user 'app'@'localhost' to database 'caf\xe9'"
        ),
        "directly:\n{}",
        shown(&direct)
    );
    assert_eq!(
        via,
        direct,
        "through the sidecar:\n{}\ndirectly:\n{}",
        shown(&via),
        shown(&direct)
    );
    let unknown_user = Login {
        user: Some(b"caf\xe9"),
        database: b"app",
    };
    let [via, direct] = both(&chain, "latin1", unknown_user, b"SELECT 1;\n").await;
    assert!(
        direct
            .1
            .starts_with(b"ERROR 1045 (28000): Access denied for user 'caf\xe9'@'localhost'"),
        "directly:\n{}",
        shown(&direct)
    );
    assert_eq!(
        via,
        direct,
        "through the sidecar:\n{}\ndirectly:\n{}",
        shown(&via),
        shown(&direct)
    );
}

/// Our proto's messages are bytes; PlanetScale's are strings, which a
/// strict client (Go's protobuf) refuses unless they are UTF-8. The
/// gateway sends the backend's bytes to a client that says it takes them
/// (the sidecar's `myquic-raw-text` header) and U+FFFD to every other,
/// protobuf or JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_bytes_go_only_to_clients_that_take_them() {
    let stack = Stack::start().await;
    // latin1 results; the statements themselves are ASCII.
    let script = [
        "SET NAMES latin1",
        "SELECT CAST(_latin1 X'E97465' AS SIGNED)",
        "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = _latin1 X'636166E9'",
    ];
    let run = |codec: Codec, raw_text: bool| {
        let stack = &stack;
        async move {
            let client = stack.client(Version::H2, codec).await;
            let mut session = None;
            let mut answers = Vec::new();
            for sql in script {
                let request = pb::ExecuteRequest {
                    session,
                    query: Bytes::from_static(sql.as_bytes()),
                    ..Default::default()
                };
                let answer: pb::ExecuteResponse = execute(&client, &request, raw_text).await;
                session = answer.session.clone();
                answers.push(answer);
            }
            let warning = answers[1]
                .session
                .as_ref()
                .and_then(|s| s.vitess_session.as_ref())
                .and_then(|v| v.warnings.first())
                .map(|w| w.message.clone())
                .expect("the CAST's warning");
            let error = answers[2]
                .error
                .clone()
                .expect("the SIGNAL's error")
                .message;
            (warning, error)
        }
    };
    let (warning, error) = run(Codec::Proto, true).await;
    assert_eq!(&warning[..], b"Truncated incorrect INTEGER value: '\xe9te'");
    assert_eq!(&error[..], b"caf\xe9 (errno 1644) (sqlstate 45000)");
    for codec in [Codec::Proto, Codec::Json] {
        let (warning, error) = run(codec, false).await;
        assert_eq!(
            &warning[..],
            "Truncated incorrect INTEGER value: '\u{fffd}te'".as_bytes(),
            "{codec:?}"
        );
        assert_eq!(
            &error[..],
            "caf\u{fffd} (errno 1644) (sqlstate 45000)".as_bytes(),
            "{codec:?}"
        );
    }
}

/// `Execute`, with the raw-text header if `raw_text`.
async fn execute(
    client: &common::Client,
    request: &pb::ExecuteRequest,
    raw_text: bool,
) -> pb::ExecuteResponse {
    let mut http = http::Request::builder()
        .method("POST")
        .uri(format!("https://localhost{}", Method::Execute.path()))
        .header(
            http::header::CONTENT_TYPE,
            client.codec.content_type(myquic::api::Framing::Unary),
        )
        .header(
            http::header::AUTHORIZATION,
            client.auth.clone().expect("auth"),
        );
    if raw_text {
        http = http.header(RAW_TEXT_HEADER, "1");
    }
    let response = client
        .conn
        .send(http.body(client.codec.encode(request)).expect("request"))
        .await
        .expect("sent");
    let (head, body) = response.collect(1 << 20).await.expect("answered");
    assert_eq!(head.status.as_u16(), 200);
    client.codec.decode(&body).expect("a response")
}
