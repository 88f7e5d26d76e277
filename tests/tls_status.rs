//! The status variables that describe a client's own connection
//! (`Ssl_cipher`, `Ssl_version`, …) describe the client's connection to
//! the sidecar, as directly they describe its connection to the server:
//! before, through the sidecar they described the gateway's backend
//! connection (a unix socket: no TLS), so a client over TLS that checked
//! its cipher — go-sql-driver's own `TestTLS` does — was told it had none.
//!
//! The sidecar is given the certificate MariaDB serves, so even the
//! certificate's dates must match; differential, one client (mysql_async)
//! directly and through the sidecar, plaintext and TLS, text and binary
//! protocol, `SHOW STATUS` and `information_schema.SESSION_STATUS`.

mod common;

use std::collections::BTreeMap;

use common::mariadb::{MariaDb, Options, TlsFiles};
use common::sidecar::Chain;
use common::{LOCAL_PASSWORD, LOCAL_USER, Stack};
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, SslOpts};

/// The variables a server answers from the asking connection.
const PER_CONNECTION: [&str; 9] = [
    "Ssl_cipher",
    "Ssl_cipher_list",
    "Ssl_default_timeout",
    "Ssl_server_not_after",
    "Ssl_server_not_before",
    "Ssl_sessions_reused",
    "Ssl_verify_depth",
    "Ssl_verify_mode",
    "Ssl_version",
];

/// The connection's own variables as `sql` lists them (names in any
/// case), read in the text or the binary protocol.
async fn own_variables(conn: &mut Conn, sql: &str, binary: bool) -> BTreeMap<String, String> {
    let rows: Vec<(String, Option<String>)> = if binary {
        conn.exec(sql, ()).await.unwrap()
    } else {
        conn.query(sql).await.unwrap()
    };
    rows.into_iter()
        .filter_map(|(name, value)| {
            let name = PER_CONNECTION
                .iter()
                .find(|own| own.eq_ignore_ascii_case(&name))?;
            Some((name.to_string(), value.unwrap_or_default()))
        })
        .collect()
}

async fn all_ways(conn: &mut Conn) -> Vec<BTreeMap<String, String>> {
    let mut seen = Vec::new();
    for binary in [false, true] {
        for sql in [
            "SHOW SESSION STATUS LIKE 'Ssl%'",
            "SHOW GLOBAL STATUS LIKE 'Ssl%'",
            "SELECT * FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME LIKE 'SSL%'",
        ] {
            let variables = own_variables(conn, sql, binary).await;
            assert_eq!(
                variables.len(),
                PER_CONNECTION.len(),
                "{sql}: {variables:?}"
            );
            seen.push(variables);
        }
    }
    seen
}

fn skip_verify() -> SslOpts {
    SslOpts::default().with_danger_accept_invalid_certs(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_tls_status_is_the_clients_own() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TlsFiles::generate(dir.path());
    let db = MariaDb::start_with(Options {
        tcp: true,
        tls: Some(tls.clone()),
        ..Default::default()
    })
    .await;
    let port = db.port.unwrap();
    let stack = Stack::start_on(db, |_| {}).await;
    let chain = Chain::launch_on(stack, |c| {
        c.tls.cert = Some(tls.cert.clone());
        c.tls.key = Some(tls.key.clone());
    })
    .await;
    let direct_opts = || {
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(port)
            .prefer_socket(false)
            .user(Some("app"))
            .pass(Some("app-backend-pw"))
            .db_name(Some("app"))
    };
    let via_opts = || chain.opts(LOCAL_USER, LOCAL_PASSWORD).db_name(Some("app"));

    // Plaintext: every one of them as directly (empty, zero).
    let mut direct = Conn::new(direct_opts()).await.unwrap();
    let mut via = Conn::new(via_opts()).await.unwrap();
    let want = all_ways(&mut direct).await;
    assert_eq!(want[0]["Ssl_cipher"], "");
    assert_eq!(all_ways(&mut via).await, want, "plaintext");

    // TLS: the session's own cipher, version and certificate dates.
    let mut direct = Conn::new(direct_opts().ssl_opts(skip_verify()))
        .await
        .unwrap();
    let mut via = Conn::new(via_opts().ssl_opts(skip_verify())).await.unwrap();
    let want = all_ways(&mut direct).await;
    let got = all_ways(&mut via).await;
    for (want, got) in want.iter().zip(&got) {
        assert!(want["Ssl_version"].starts_with("TLSv1."), "{want:?}");
        for same in [
            "Ssl_cipher",
            "Ssl_version",
            "Ssl_server_not_after",
            "Ssl_server_not_before",
            "Ssl_sessions_reused",
            "Ssl_verify_depth",
        ] {
            assert_eq!(got[same], want[same], "{same}: {got:?}");
        }
        // The sidecar's own settings, in the server's terms: it asks
        // clients for no certificate (MariaDB always does), accepts the
        // suites rustls offers, and keeps sessions for rustls's day.
        assert_eq!(got["Ssl_verify_mode"], "0");
        assert!(
            got["Ssl_cipher_list"]
                .split(':')
                .any(|c| c == got["Ssl_cipher"]),
            "{got:?}"
        );
        assert_eq!(got["Ssl_default_timeout"], "86400");
    }

    // Every other row is the server's: a server-wide counter of TLS
    // accepts counts the gateway's backend connections, not the client.
    let counters: Vec<(String, String)> = via
        .query("SHOW GLOBAL STATUS LIKE 'Ssl_accepts'")
        .await
        .unwrap();
    assert_eq!(counters.len(), 1);
}
