//! `myquic doctor` against a real gateway (in-process, in front of a
//! private MariaDB), run as the binary the operator runs: a healthy path,
//! then each thing that goes wrong in practice — a wrong password, a CA
//! that did not issue the gateway's certificate, a certificate that does
//! not carry the expected name, nothing listening, and UDP dropped by a
//! firewall (nftables in a network namespace) — each named in plain words
//! with the right exit code.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use common::netns::{Block, NetNs};
use common::{PASSWORD, Stack, USER};

struct Outcome {
    code: i32,
    stdout: String,
}

/// Writes a sidecar config for `url` and runs `myquic doctor` with it
/// (inside `ns` if given).
async fn doctor(
    ns: Option<&NetNs>,
    dir: &Path,
    url: &str,
    ca: &Path,
    password: &str,
    extra: &str,
) -> Outcome {
    let config = dir.join(format!("doctor-{}.toml", rand_suffix()));
    std::fs::write(
        &config,
        format!(
            "[sidecar.upstream]\nurl = \"{url}\"\nca = {ca:?}\nusername = \"{USER}\"\npassword = {{ value = \"{password}\" }}\n{extra}\n",
            ca = ca.display().to_string()
        ),
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_myquic");
    let mut cmd = match ns {
        Some(ns) => ns.command(bin),
        None => std::process::Command::new(bin),
    };
    cmd.arg("--config").arg(&config).arg("doctor");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::from(cmd).output(),
    )
    .await
    .expect("doctor finishes within a minute")
    .expect("doctor runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "--- doctor {url} ({extra}) exit {:?}\n{stdout}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout,
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn line<'a>(out: &'a Outcome, check: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| {
            l.get(5..)
                .is_some_and(|rest| rest.starts_with(&format!("{check} ")))
        })
        .unwrap_or_else(|| panic!("no {check} line in:\n{}", out.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn doctor_names_what_is_wrong() {
    let ns = NetNs::create();
    let host = ns.host_addr();
    let stack = Stack::start_with(|c| {
        c.listen = SocketAddr::new(host.into(), 0);
        c.tls.self_signed_names = vec![host.to_string()];
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("https://{}", stack.addr());

    // Healthy: every step passes, both transports authenticate.
    let ok = doctor(None, dir.path(), &url, &stack.cert, PASSWORD, "").await;
    assert_eq!(ok.code, 0, "a healthy path exits 0");
    for check in ["dns", "tcp", "tls", "http2", "http3", "auth+h3", "auth+h2"] {
        assert!(line(&ok, check).starts_with("ok "), "{check} passes");
    }
    assert!(line(&ok, "tls").contains("TLSv1_3"), "reports TLS 1.3");
    assert!(
        line(&ok, "tls").contains(&host.to_string()),
        "shows the certificate's names"
    );

    // A local account with a gateway credential of its own is checked
    // under it: one that works, one whose password the gateway refuses.
    let own = |password: &str| {
        format!(
            "[[sidecar.auth.users]]\nusername = \"report\"\npassword = {{ value = \"local\" }}\n\
             upstream_username = \"other\"\nupstream_password = {{ value = \"{password}\" }}\n"
        )
    };
    let right = doctor(
        None,
        dir.path(),
        &url,
        &stack.cert,
        PASSWORD,
        &own("other-secret"),
    )
    .await;
    assert_eq!(right.code, 0);
    assert!(line(&right, "accounts").starts_with("ok "));
    let wrong = doctor(None, dir.path(), &url, &stack.cert, PASSWORD, &own("nope")).await;
    assert_eq!(wrong.code, 1, "an account that cannot work fails the check");
    let accounts = line(&wrong, "accounts");
    assert!(
        accounts.starts_with("FAIL") && accounts.contains("\"report\" (as \"other\")"),
        "{accounts}"
    );
    assert!(
        line(&wrong, "auth+h3").starts_with("ok "),
        "the sidecar's own works"
    );

    // A wrong password: the handshakes work, authentication does not.
    let bad = doctor(None, dir.path(), &url, &stack.cert, "not-the-password", "").await;
    assert_eq!(bad.code, 1);
    assert!(line(&bad, "http3").starts_with("ok "));
    assert!(
        bad.stdout.contains("rejected the credentials of \"app\""),
        "names the credentials"
    );

    // A CA that did not issue the gateway's certificate.
    let other_ca = dir.path().join("other-ca.pem");
    myquic::transport::tls::Identity::self_signed(&[host.to_string()], &other_ca).unwrap();
    let untrusted = doctor(None, dir.path(), &url, &other_ca, PASSWORD, "").await;
    assert_eq!(untrusted.code, 1);
    assert!(line(&untrusted, "tls").starts_with("FAIL"));
    assert!(
        untrusted
            .stdout
            .contains("not signed by the CA in sidecar.upstream.ca"),
        "points at the CA setting"
    );

    // A certificate that does not carry the name the sidecar expects.
    let misnamed = doctor(
        None,
        dir.path(),
        &url,
        &stack.cert,
        PASSWORD,
        "server_name = \"db.example\"",
    )
    .await;
    assert_eq!(misnamed.code, 1);
    assert!(
        misnamed.stdout.contains("does not name \"db.example\""),
        "names the mismatch"
    );

    // Nothing listening there.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let down = doctor(
        None,
        dir.path(),
        &format!("https://{free}"),
        &stack.cert,
        PASSWORD,
        "",
    )
    .await;
    assert_eq!(down.code, 1);
    assert!(line(&down, "tcp").starts_with("FAIL"));
    assert!(
        down.stdout.contains("nothing accepts TCP connections"),
        "says the gateway is not there"
    );

    // UDP dropped on the way: HTTP/3 fails with a warning, HTTP/2 works.
    ns.block_udp(Block::Drop);
    let no_udp = doctor(Some(&ns), dir.path(), &url, &stack.cert, PASSWORD, "").await;
    assert_eq!(no_udp.code, 2, "works, with a warning");
    assert!(line(&no_udp, "http3").starts_with("WARN"));
    assert!(
        no_udp
            .stdout
            .contains(&format!("UDP port {} is blocked", stack.addr().port()))
    );
    assert!(line(&no_udp, "auth+h2").starts_with("ok "));
    ns.unblock_udp();
}
