//! What an anonymous or stalled client can make the gateway hold, through
//! real sockets: a private MariaDB, the gateway in-process (or as a child
//! process where exit codes and the admin endpoint matter), raw TCP, TLS
//! and HTTP/2 clients.
//!
//! - `credentials_are_checked_before_the_body`: an unauthenticated request
//!   announcing a 16 MiB body and sending a few bytes gets its 401 at once
//!   (HTTP/2 and HTTP/1.1), without the gateway waiting for the body.
//! - `a_stalled_body_is_deadline_exceeded`: an authenticated request whose
//!   body stops arriving gets 504 `deadline_exceeded` after
//!   `timeouts.request_body`.
//! - `silent_connections_are_closed`: a TCP connection that never starts
//!   TLS is closed after `timeouts.tls_handshake`; a TLS connection that
//!   never sends the HTTP/2 preface after `timeouts.request_headers`.
//! - `one_address_holds_few_unauthenticated_connections`: past
//!   `limits.max_pending_connections_per_peer` a new connection is closed
//!   as it arrives.
//! - `drain_does_not_wait_for_idle_connections`: SIGTERM with a never-TLS
//!   connection and a used, idle HTTP/2 connection open exits at once, 0.
//! - `quitquitquit_needs_a_token_off_loopback`: on 0.0.0.0 without a token
//!   `/quitquitquit` is 403 (probes stay open); with one, 401 unless the
//!   bearer token matches, and then the gateway drains and exits 0.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{MariaDb, PASSWORD, Stack, USER, basic};
use myquic::admin::wait::get;
use myquic::transport::client::Connection;
use myquic::transport::tls;

/// How long a prompt answer may take on a loaded 2-core machine.
const PROMPTLY: Duration = Duration::from_secs(3);

type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

async fn tls_connect(addr: SocketAddr, cert: &Path, alpn: &[u8]) -> TlsStream {
    tls::install_crypto_provider();
    let config = tls::client_config(tls::roots_from_pem(cert).unwrap(), &[alpn]).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("TLS handshake")
}

type StalledBody =
    StreamBody<futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// A body that sends `first` and then nothing, never ending.
fn stalled_body(first: &'static [u8]) -> StalledBody {
    let frames = futures_util::stream::once(async move { Ok(Frame::data(Bytes::from(first))) })
        .chain(futures_util::stream::pending());
    StreamBody::new(Box::pin(frames) as _)
}

use futures_util::StreamExt;

/// An HTTP/2 `Execute` announcing a 16 MiB − 1 body and sending 3 bytes
/// of it; the answer's status and body, which must come within `within`.
async fn stalled_execute(stack: &Stack, authorization: &str, within: Duration) -> (u16, String) {
    let tls = tls_connect(stack.addr(), &stack.cert, tls::ALPN_H2).await;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = http::Request::post("https://localhost/psdb.v1alpha1.Database/Execute")
        .header("content-type", "application/json")
        .header("content-length", "16777215")
        .header("authorization", authorization)
        .body(stalled_body(b"{\"q"))
        .unwrap();
    let response = tokio::time::timeout(within, sender.send_request(request))
        .await
        .expect("an answer without the body")
        .unwrap();
    let status = response.status().as_u16();
    let body = tokio::time::timeout(within, response.into_body().collect())
        .await
        .expect("the whole answer")
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn credentials_are_checked_before_the_body() {
    let stack = Stack::start().await;
    let wrong = basic(USER, "not-the-password");
    let (status, body) = stalled_execute(&stack, &wrong, PROMPTLY).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"code\":\"unauthenticated\""), "{body}");

    // HTTP/1.1: the status line arrives while the body is still owed.
    let mut tls = tls_connect(stack.addr(), &stack.cert, tls::ALPN_HTTP1).await;
    let head = format!(
        "POST /psdb.v1alpha1.Database/Execute HTTP/1.1\r\nHost: localhost\r\n\
         Content-Type: application/json\r\nAuthorization: {wrong}\r\n\
         Content-Length: 16777215\r\n\r\n{{\"q"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let read_answer = async {
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = tls.read(&mut buf).await.unwrap();
            assert!(n > 0, "closed before answering");
            answer.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(PROMPTLY, read_answer)
        .await
        .expect("a 401 without the body");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_body_is_deadline_exceeded() {
    let stack = Stack::start_with(|c| c.timeouts.request_body = Duration::from_millis(300)).await;
    let started = Instant::now();
    let (status, body) = stalled_execute(&stack, &basic(USER, PASSWORD), PROMPTLY).await;
    assert_eq!(status, 504, "{body}");
    assert!(body.contains("\"code\":\"deadline_exceeded\""), "{body}");
    assert!(body.contains("request_body"), "names the setting: {body}");
    assert!(started.elapsed() >= Duration::from_millis(300));
}

/// Reads until the peer closes (end of stream or an error), or panics
/// after `within`; returns how long that took.
async fn closed_within<S: tokio::io::AsyncRead + Unpin>(
    stream: &mut S,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .expect("the gateway closes the connection");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_connections_are_closed() {
    let stack = Stack::start_with(|c| {
        c.timeouts.tls_handshake = Duration::from_millis(300);
        c.timeouts.request_headers = Duration::from_millis(300);
    })
    .await;
    let mut never_tls = TcpStream::connect(stack.addr()).await.unwrap();
    let took = closed_within(&mut never_tls, PROMPTLY).await;
    assert!(
        took >= Duration::from_millis(250),
        "closed by the timeout: {took:?}"
    );

    let mut no_preface = tls_connect(stack.addr(), &stack.cert, tls::ALPN_H2).await;
    closed_within(&mut no_preface, PROMPTLY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_holds_few_unauthenticated_connections() {
    let stack = Stack::start_with(|c| c.limits.max_pending_connections_per_peer = 2).await;
    let _first = TcpStream::connect(stack.addr()).await.unwrap();
    let _second = TcpStream::connect(stack.addr()).await.unwrap();
    let mut third = TcpStream::connect(stack.addr()).await.unwrap();
    // Well before the 10 s handshake timeout.
    closed_within(&mut third, PROMPTLY).await;
    drop(_first);
    // Its slot is given back once the gateway sees it close: a client
    // gets in again, and one authenticated request frees its own slot.
    tls::install_crypto_provider();
    let config = tls::client_config(tls::roots_from_pem(&stack.cert).unwrap(), &[]).unwrap();
    let start = Instant::now();
    let conn = loop {
        match Connection::connect_h2(stack.addr(), "localhost", config.clone()).await {
            Ok(conn) => break conn,
            Err(e) => assert!(start.elapsed() < PROMPTLY, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let client = common::Client {
        conn,
        codec: myquic::api::Codec::Json,
        auth: Some(basic(USER, PASSWORD)),
        encoding: myquic::api::Encoding::Identity,
        accept: None,
    };
    assert!(client.try_execute(None, "SELECT 1").await.is_ok());
    // Two unauthenticated connections fit again beside the second.
    let _fourth = TcpStream::connect(stack.addr()).await.unwrap();
    let mut fifth = TcpStream::connect(stack.addr()).await.unwrap();
    closed_within(&mut fifth, PROMPTLY).await;
}

/// A TCP and UDP port nobody uses right now.
fn free_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// `myquic gateway` as a child process; killed on drop, its log printed
/// if the test failed.
struct GatewayChild {
    child: std::process::Child,
    addr: SocketAddr,
    /// Where to reach the admin endpoint (loopback, whatever it binds).
    admin: SocketAddr,
    cert: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl GatewayChild {
    /// `admin_listen_ip` is the admin endpoint's bind address; `admin_toml`
    /// more `[gateway.admin]` keys; `env` extra environment.
    async fn ready(
        db: &MariaDb,
        admin_listen_ip: &str,
        admin_toml: &str,
        env: &[(&str, &str)],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let admin_port = free_port();
        let cert = dir.path().join("gateway.pem");
        let config = dir.path().join("myquic.toml");
        std::fs::write(
            &config,
            format!(
                "[gateway]\nlisten = \"127.0.0.1:{port}\"\n\
                 [gateway.tls]\nself_signed_cert_out = \"{cert}\"\n\
                 [gateway.backend]\nsocket = \"{socket}\"\nwarm_connections = 1\n\
                 [[gateway.credentials]]\nusername = \"{USER}\"\npassword = {{ value = \"{PASSWORD}\" }}\n\
                 backend_password = {{ value = \"app-backend-pw\" }}\ndatabase = \"app\"\n\
                 [gateway.drain]\nbackend_check_interval = \"200ms\"\n\
                 [gateway.admin]\nlisten = \"{admin_listen_ip}:{admin_port}\"\n{admin_toml}\n",
                cert = cert.display(),
                socket = db.socket.display(),
            ),
        )
        .unwrap();
        let log = dir.path().join("gateway.log");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_myquic"))
            .args(["--config", config.to_str().unwrap(), "gateway"])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let gateway = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            admin: SocketAddr::from(([127, 0, 0, 1], admin_port)),
            cert,
            log,
            _dir: dir,
        };
        let start = Instant::now();
        while !matches!(get(gateway.admin, "/ready").await, Ok((200, _))) {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "gateway not ready"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        gateway
    }

    /// The exit code, waiting up to `within`.
    async fn exit_code(&mut self, within: Duration) -> Option<i32> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < within,
                "the gateway did not exit within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `POST /quitquitquit` with an optional `Authorization`: the status.
    async fn quit(&self, authorization: Option<&str>) -> u16 {
        let mut tcp = TcpStream::connect(self.admin).await.unwrap();
        let auth = authorization.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
        tcp.write_all(
            format!("POST /quitquitquit HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        answer
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no status: {answer:?}"))
    }
}

impl Drop for GatewayChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- gateway log\n{log}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drain_does_not_wait_for_idle_connections() {
    let db = MariaDb::start().await;
    let mut gateway = GatewayChild::ready(&db, "127.0.0.1", "", &[]).await;
    let _never_tls = TcpStream::connect(gateway.addr).await.unwrap();
    // A connection that carried a request and is idle now.
    let tls = tls_connect(gateway.addr, &gateway.cert, tls::ALPN_H2).await;
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let request = http::Request::post("https://localhost/psdb.v1alpha1.Database/CreateSession")
        .header("content-type", "application/json")
        .header("authorization", basic(USER, PASSWORD))
        .body(http_body_util::Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.into_body().collect().await.unwrap();

    let pid = gateway.child.id().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    // The drain timeout is 20 s: nothing is in flight, so no waiting.
    assert_eq!(gateway.exit_code(PROMPTLY).await, Some(0), "a clean drain");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quitquitquit_needs_a_token_off_loopback() {
    let db = MariaDb::start().await;
    let mut open = GatewayChild::ready(&db, "0.0.0.0", "", &[]).await;
    assert_eq!(open.quit(None).await, 403);
    assert_eq!(
        get(open.admin, "/ready").await.unwrap().0,
        200,
        "probes stay open"
    );
    assert_eq!(get(open.admin, "/metrics").await.unwrap().0, 200);
    assert!(open.child.try_wait().unwrap().is_none(), "still running");
    drop(open);

    let env = [("MYQUIC_GATEWAY_ADMIN_QUIT_TOKEN", "s3cret-token")];
    let mut guarded = GatewayChild::ready(&db, "0.0.0.0", "", &env).await;
    assert_eq!(guarded.quit(None).await, 401);
    assert_eq!(guarded.quit(Some("Bearer wrong")).await, 401);
    assert_eq!(guarded.quit(Some("Bearer s3cret-token")).await, 200);
    assert_eq!(guarded.exit_code(PROMPTLY).await, Some(0));
}
