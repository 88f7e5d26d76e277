//! TLS from the gateway to its backend (`[gateway.backend] tls`), against
//! a private MariaDB serving its own certificate over TCP:
//!
//! - `required_tls_serves_a_require_ssl_account`: an account created
//!   `REQUIRE SSL` is served with `tls = "required"`; the backend session
//!   reports a TLS `Ssl_version`/`Ssl_cipher`, the same a direct TLS
//!   connection gets, and the same through the sidecar; with TLS disabled
//!   the backend refuses that account (so the test can fail).
//! - `client_certificate_for_require_x509`: the client certificate is
//!   presented (`REQUIRE X509`).
//! - `a_wrong_ca_keeps_the_gateway_unready`: a CA that did not sign the
//!   server's certificate: the gateway starts, stays unready, `/ready`
//!   says the certificate was not verified, and no statement runs
//!   (`preferred` too: never a fallback to plaintext).
//! - `preferred_follows_the_server`: TLS with a server that offers it,
//!   plaintext with one that does not; `required` refuses the latter.
//! - `preferred_refuses_a_downgrade_after_tls_was_seen`: a relay on the
//!   path starts hiding the server's TLS offer (as an attacker would):
//!   new backend connections fail, none is made in plaintext.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use common::mariadb::{MariaDb, Options, TlsFiles};
use common::sidecar::Chain;
use common::*;
use myquic::api::Codec;
use myquic::config::BackendTlsMode;
use myquic::gateway::GatewayConfig;
use mysql_async::prelude::Queryable;
use mysql_async::{OptsBuilder, SslOpts};

/// MariaDB over TCP with its own certificate (or none), with accounts
/// that require TLS: `secure` (`REQUIRE SSL`) and `x509` (`REQUIRE X509`).
async fn database(tls: Option<&TlsFiles>) -> MariaDb {
    let db = MariaDb::start_with(Options {
        tcp: true,
        tls: tls.cloned(),
        ..Default::default()
    })
    .await;
    let mut root = mysql_async::Conn::new(db.root_opts()).await.unwrap();
    root.query_drop(
        "CREATE USER secure@localhost IDENTIFIED BY 'secure-pw' REQUIRE SSL; \
         GRANT ALL ON app.* TO secure@localhost; \
         CREATE USER x509@localhost IDENTIFIED BY 'x509-pw' REQUIRE X509; \
         GRANT ALL ON app.* TO x509@localhost",
    )
    .await
    .unwrap();
    root.disconnect().await.unwrap();
    db
}

/// The gateway's backend: `db` over TCP as `user`, with `tls`.
fn over_tcp(
    db: &MariaDb,
    (user, password): (&str, &str),
    tls: Option<BackendTlsMode>,
    ca: Option<&std::path::Path>,
) -> impl FnOnce(&mut GatewayConfig) + use<> {
    let address = format!("127.0.0.1:{}", db.port.expect("TCP port"));
    let (user, password, ca) = (user.to_string(), password.to_string(), ca.map(Into::into));
    move |c| {
        c.backend.socket = None;
        c.backend.address = Some(address);
        c.backend.tls = tls;
        c.backend.tls_ca = ca;
        c.credentials.truncate(1);
        c.credentials[0].backend_user = Some(user);
        c.credentials[0].backend_password = Some(secret(&password));
        c.drain.backend_check_interval = Duration::from_millis(200);
    }
}

/// Waits (bounded) for the gateway's readiness to be `Ok` or, with
/// `Some(text)`, an error containing `text`; returns the last answer.
async fn readiness(stack: &Stack, want_error: Option<&str>) -> Result<(), String> {
    let health = stack.gateway.health();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let now = health.ready();
        let reached = match (&now, want_error) {
            (Ok(()), None) => true,
            (Err(why), Some(text)) => why.contains(text),
            _ => false,
        };
        if reached || Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `Ssl_version` and `Ssl_cipher` of the session behind `client`.
async fn ssl_status_via_gateway(client: &Client) -> (String, String) {
    let resp = client
        .execute(
            None,
            "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
             WHERE VARIABLE_NAME IN ('SSL_VERSION', 'SSL_CIPHER') ORDER BY VARIABLE_NAME DESC",
        )
        .await;
    assert!(resp.error.is_none(), "{:?}", resp.error);
    let rows = rows(resp.result.as_ref().unwrap());
    let cell = |i: usize| String::from_utf8(rows[i][0].clone().unwrap_or_default()).unwrap();
    (cell(0), cell(1))
}

async fn ssl_status(conn: &mut mysql_async::Conn) -> (String, String) {
    conn.query_first(
        "SELECT (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                 WHERE VARIABLE_NAME = 'SSL_VERSION'), \
                (SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                 WHERE VARIABLE_NAME = 'SSL_CIPHER')",
    )
    .await
    .unwrap()
    .unwrap()
}

/// A direct connection over TLS, verified against `ca`, as `user`.
async fn direct_tls(db: &MariaDb, ca: &std::path::Path, user: &str, pw: &str) -> mysql_async::Conn {
    let ssl = SslOpts::default()
        .with_root_certs(vec![ca.to_path_buf().into()])
        .with_disable_built_in_roots(true);
    let opts = OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(db.port.unwrap())
        .prefer_socket(false)
        .user(Some(user))
        .pass(Some(pw))
        .db_name(Some("app"))
        .ssl_opts(ssl);
    mysql_async::Conn::new(opts)
        .await
        .expect("direct TLS connection")
}

#[tokio::test]
async fn required_tls_serves_a_require_ssl_account() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let db = database(Some(&tls)).await;
    let mut direct = direct_tls(&db, &tls.ca, "secure", "secure-pw").await;
    let (direct_version, direct_cipher) = ssl_status(&mut direct).await;
    assert!(direct_version.starts_with("TLSv1."), "{direct_version}");

    let config = over_tcp(
        &db,
        ("secure", "secure-pw"),
        Some(BackendTlsMode::Required),
        Some(tls.ca.as_path()),
    );
    let stack = Stack::start_on(db, config).await;
    readiness(&stack, None).await.expect("ready over TLS");
    let client = stack.client(Version::H2, Codec::Proto).await;
    let (version, cipher) = ssl_status_via_gateway(&client).await;
    assert_eq!(
        (&version, &cipher),
        (&direct_version, &direct_cipher),
        "the backend session is TLS, as a direct one"
    );
    let user = client.execute(None, "SELECT CURRENT_USER()").await;
    assert_eq!(scalar(&user).as_deref(), Some("secure@localhost"));

    // A MySQL client through the sidecar that reads a value without its
    // name sees the backend session's TLS (README, Known limits; SHOW
    // STATUS says the client's own connection: tests/tls_status.rs).
    let chain = Chain::launch_on(stack, |_| {}).await;
    let mut through = chain.client().await;
    assert_eq!(
        ssl_status(&mut through).await,
        (direct_version, direct_cipher)
    );
    let (a, b): (String, i64) = through
        .query_first("SELECT CURRENT_USER(), 6 * 7")
        .await
        .unwrap()
        .unwrap();
    assert_eq!((a.as_str(), b), ("secure@localhost", 42));
    through.disconnect().await.unwrap();
    direct.disconnect().await.unwrap();

    // The account really requires TLS: plaintext is refused by MariaDB.
    let db = chain.stack.db;
    let plain = over_tcp(
        &db,
        ("secure", "secure-pw"),
        Some(BackendTlsMode::Disabled),
        None,
    );
    let stack = Stack::start_on(db, plain).await;
    let why = readiness(&stack, Some("1045")).await.unwrap_err();
    assert!(why.contains("Access denied"), "{why}");
}

#[tokio::test]
async fn client_certificate_for_require_x509() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let db = database(Some(&tls)).await;
    let base = over_tcp(
        &db,
        ("x509", "x509-pw"),
        Some(BackendTlsMode::Required),
        Some(tls.ca.as_path()),
    );
    let (cert, key) = (tls.client_cert.clone(), tls.client_key.clone());
    let stack = Stack::start_on(db, |c| {
        base(c);
        c.backend.tls_client_cert = Some(cert);
        c.backend.tls_client_key = Some(key);
    })
    .await;
    readiness(&stack, None)
        .await
        .expect("ready with a client certificate");
    let client = stack.client(Version::H3, Codec::Json).await;
    let user = client.execute(None, "SELECT CURRENT_USER()").await;
    assert_eq!(scalar(&user).as_deref(), Some("x509@localhost"));

    // Without the certificate the same account is refused.
    let db = stack.db;
    let no_cert = over_tcp(
        &db,
        ("x509", "x509-pw"),
        Some(BackendTlsMode::Required),
        Some(tls.ca.as_path()),
    );
    let stack = Stack::start_on(db, no_cert).await;
    readiness(&stack, Some("1045")).await.unwrap_err();
}

#[tokio::test]
async fn a_wrong_ca_keeps_the_gateway_unready() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let other = tempfile::tempdir().unwrap();
    let wrong = TlsFiles::generate(other.path());
    let mut db = database(Some(&tls)).await;
    for mode in [Some(BackendTlsMode::Required), None] {
        let config = over_tcp(
            &db,
            ("app", "app-backend-pw"),
            mode,
            Some(wrong.ca.as_path()),
        );
        let stack = Stack::start_on(db, config).await;
        let why = readiness(&stack, Some("certificate")).await.unwrap_err();
        assert!(
            why.contains("TLS to the backend failed")
                && why.contains("invalid peer certificate")
                && why.contains(&wrong.ca.display().to_string()),
            "{mode:?}: {why}"
        );
        assert!(stack.gateway.health().started().is_err(), "{mode:?}");
        // Nothing runs, in clear or otherwise.
        let client = stack.client(Version::H2, Codec::Proto).await;
        let resp = client.execute(None, "SELECT 1").await;
        let err = common::error_message(&resp);
        assert!(err.contains("certificate"), "{mode:?}: {err}");
        db = stack.db;
    }
}

#[tokio::test]
async fn preferred_follows_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    // The default over TCP is `preferred`.
    let db = database(Some(&tls)).await;
    let config = over_tcp(&db, ("app", "app-backend-pw"), None, Some(tls.ca.as_path()));
    let stack = Stack::start_on(db, config).await;
    readiness(&stack, None).await.expect("ready");
    let client = stack.client(Version::H2, Codec::Proto).await;
    let (version, _) = ssl_status_via_gateway(&client).await;
    assert!(
        version.starts_with("TLSv1."),
        "offered, so used: {version:?}"
    );

    let plain_db = database(None).await;
    let config = over_tcp(&plain_db, ("app", "app-backend-pw"), None, None);
    let stack = Stack::start_on(plain_db, config).await;
    readiness(&stack, None).await.expect("ready in plaintext");
    let client = stack.client(Version::H2, Codec::Proto).await;
    assert_eq!(
        ssl_status_via_gateway(&client).await,
        (String::new(), String::new())
    );

    let plain_db = stack.db;
    let config = over_tcp(
        &plain_db,
        ("app", "app-backend-pw"),
        Some(BackendTlsMode::Required),
        None,
    );
    let stack = Stack::start_on(plain_db, config).await;
    let why = readiness(&stack, Some("offers no TLS")).await.unwrap_err();
    assert!(why.contains("\"required\""), "{why}");
}

/// A TCP relay to `target` that, while `strip` is set, clears `CLIENT_SSL`
/// in the server's greeting: what an attacker on the path does to keep a
/// client in plaintext.
async fn downgrading_relay(target: SocketAddr, strip: Arc<AtomicBool>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let strip = strip.load(Ordering::SeqCst);
            tokio::spawn(async move {
                let mut server = tokio::net::TcpStream::connect(target).await?;
                let mut header = [0u8; 4];
                server.read_exact(&mut header).await?;
                let len = usize::from(header[0])
                    | usize::from(header[1]) << 8
                    | usize::from(header[2]) << 16;
                let mut greeting = vec![0u8; len];
                server.read_exact(&mut greeting).await?;
                if strip {
                    // HandshakeV10: protocol, version NUL, thread id (4),
                    // scramble (8), filler (1), capabilities' low 16 bits.
                    let version_end = greeting.iter().skip(1).position(|&b| b == 0).unwrap() + 1;
                    let caps = version_end + 1 + 4 + 8 + 1;
                    greeting[caps + 1] &= !0x08; // CLIENT_SSL = 0x0800
                }
                client.write_all(&header).await?;
                client.write_all(&greeting).await?;
                tokio::io::copy_bidirectional(&mut client, &mut server).await?;
                Ok::<_, std::io::Error>(())
            });
        }
    });
    addr
}

#[tokio::test]
async fn preferred_refuses_a_downgrade_after_tls_was_seen() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let db = database(Some(&tls)).await;
    let strip = Arc::new(AtomicBool::new(false));
    let target = SocketAddr::from(([127, 0, 0, 1], db.port.unwrap()));
    let relay = downgrading_relay(target, strip.clone()).await;
    let base = over_tcp(&db, ("app", "app-backend-pw"), None, Some(tls.ca.as_path()));
    let stack = Stack::start_on(db, move |c| {
        base(c);
        c.backend.address = Some(relay.to_string());
    })
    .await;
    readiness(&stack, None).await.expect("ready over TLS");
    let client = stack.client(Version::H2, Codec::Proto).await;
    let (version, _) = ssl_status_via_gateway(&client).await;
    assert!(version.starts_with("TLSv1."), "{version:?}");

    // From now on the relay hides the offer; the gateway's backend
    // connections are cut, so it must open new ones.
    strip.store(true, Ordering::SeqCst);
    let mut root = mysql_async::Conn::new(stack.db.root_opts()).await.unwrap();
    let ids: Vec<u64> = root
        .query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'app'")
        .await
        .unwrap();
    for id in &ids {
        root.query_drop(format!("KILL {id}")).await.unwrap();
    }
    let why = readiness(&stack, Some("offers no TLS")).await.unwrap_err();
    assert!(why.contains("preferred"), "{why}");
    let resp = client.execute(None, "SELECT 1").await;
    let err = common::error_message(&resp);
    assert!(err.contains("SSL"), "refused, not run in plaintext: {err}");
    // No session of the account was opened since: none in plaintext. (A
    // killed thread stays in the list until it notices: only others count.)
    let killed: String = ids
        .iter()
        .map(u64::to_string)
        .chain(["0".into()])
        .collect::<Vec<_>>()
        .join(",");
    let sessions: Option<i64> = root
        .query_first(format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE USER = 'app' AND ID NOT IN ({killed})"
        ))
        .await
        .unwrap();
    assert_eq!(sessions, Some(0));
}
