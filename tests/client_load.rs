//! The sidecar's psdb client under load, through real parts: a private
//! MariaDB and the gateway in the test process, many concurrent calls on
//! the one shared connection, and the CPU taken by busy threads, as on a
//! small machine running everything at once.
//!
//! - `busy_http2_connection_is_never_torn_down`: 64 concurrent sessions
//!   each run short `StreamExecute`s back to back over HTTP/2 while four
//!   threads spin. Every call succeeds and the client never reconnects: a
//!   connection that is busy, not dead, is kept, and no statement is lost.
//! - `streams_that_end_late_or_are_cancelled_keep_the_http2_connection`:
//!   the same load against a stub psdb server on our HTTP/2 server, whose
//!   streams end (END_STREAM) a moment after the Connect end-of-stream
//!   message, then against one that keeps sending after the client
//!   cancels. This is what a busy gateway looks like to a client that
//!   processes frames late; h2 used to count every frame for a stream it
//!   had already forgotten as a protocol error of its own and, after 1024
//!   of them in the connection's life, tear the connection down
//!   (GOAWAY `too_many_internal_resets`), losing every call on it.

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use myquic::api::connect::{end_stream, envelope};
use myquic::api::pb;
use myquic::client::{CallError, Client, ClientConfig, RawSession, TransportPreference};
use myquic::transport::tls::{self, Identity};
use myquic::transport::{Body, Chunks, Handler, HttpVersion, Request, Response, h2_server};
use prost::Message;
use tokio_util::sync::CancellationToken;

fn client(addr: SocketAddr, cert: &Path, transport: TransportPreference) -> Client {
    tls::install_crypto_provider();
    let roots = tls::roots_from_pem(cert).unwrap();
    let tls = tls::client_config(roots, &[]).unwrap();
    let mut config = ClientConfig::new(addr.to_string(), "localhost", tls, USER, PASSWORD);
    config.transport = transport;
    Client::new(config).unwrap()
}

/// Threads that spin until dropped: CPU contention for everything else.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start(threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Self { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// `SELECT 1` as `StreamExecute` in `session`, read to its end, as the
/// sidecar runs every statement; the session it leaves.
async fn select_one(
    client: &Client,
    session: Option<&RawSession>,
) -> Result<Option<RawSession>, CallError> {
    let mut stream = client
        .stream_execute(session, "SELECT 1", Default::default())
        .await?;
    let mut last = None;
    while let Some(reply) = stream.next().await? {
        assert!(reply.message.error.is_none(), "{:?}", reply.message.error);
        if reply.session.is_some() {
            last = reply.session;
        }
    }
    Ok(last)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn busy_http2_connection_is_never_torn_down() {
    const CLIENTS: usize = 64;
    const CALLS: usize = 250;
    let stack = Stack::start().await;
    let client = client(stack.addr(), &stack.cert, TransportPreference::Http2);
    assert_eq!(client.ready().await.unwrap(), HttpVersion::Http2);

    let busy = Busy::start(4);
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut session = None;
                let mut failures = Vec::new();
                for _ in 0..CALLS {
                    match select_one(&client, session.as_ref()).await {
                        Ok(next) => session = next.or(session),
                        Err(e) => failures.push(e.to_string()),
                    }
                }
                failures
            })
        })
        .collect();
    let mut failures = Vec::new();
    for task in tasks {
        failures.extend(task.await.unwrap());
    }
    drop(busy);

    let stats = client.stats();
    eprintln!(
        "{} calls on HTTP/2 under CPU contention: {} failed, {} reconnects",
        CLIENTS * CALLS,
        failures.len(),
        stats.reconnects
    );
    assert!(
        failures.is_empty(),
        "{} of {} calls failed, first: {:?}",
        failures.len(),
        CLIENTS * CALLS,
        failures.first()
    );
    assert_eq!(stats.reconnects, 0, "the busy connection was replaced");
    assert_eq!(client.transport(), Some(HttpVersion::Http2));
}

/// How the stub ends each `StreamExecute`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// One result message and the end-of-stream message, then the end of
    /// the HTTP stream 20 ms later, as a busy server's may come. A client
    /// that read the end-of-stream message has the whole answer, and must
    /// wait for the HTTP end rather than cancel the stream.
    LateEndStream,
    /// 64 KiB result messages as fast as flow control allows, 2 MiB in
    /// all: the client cancels after the first, with much already on its
    /// way (as when a client hangs up during a large result).
    Floods,
}

/// A psdb server that answers every request with a canned stream, and
/// counts the streams the client cancelled.
struct Stub {
    ending: Ending,
    cancelled: Arc<AtomicUsize>,
}

impl Handler for Stub {
    fn handle(&self, _request: Request) -> Pin<Box<dyn Future<Output = Response> + Send>> {
        let ending = self.ending;
        let cancelled = self.cancelled.clone();
        Box::pin(async move {
            let (tx, rx) = tokio::sync::mpsc::channel(4);
            tokio::spawn(async move {
                // One row of one value of `len` bytes.
                let message = |len: usize| {
                    let row = pb::Row {
                        lengths: vec![len as i64],
                        values: vec![b'x'; len].into(),
                    };
                    let result = pb::QueryResult {
                        rows: vec![row],
                        ..Default::default()
                    };
                    pb::ExecuteResponse {
                        result: Some(result),
                        ..Default::default()
                    }
                    .encode_to_vec()
                };
                match ending {
                    Ending::LateEndStream => {
                        let _ = tx.send(envelope(0, &message(1))).await;
                        let _ = tx.send(end_stream(None)).await;
                        // The transport drops the body (and with it the
                        // receiver) when the client resets the stream.
                        tokio::select! {
                            () = tx.closed() => { cancelled.fetch_add(1, Ordering::Relaxed); }
                            () = tokio::time::sleep(Duration::from_millis(20)) => {}
                        }
                    }
                    Ending::Floods => {
                        let big = envelope(0, &message(64 << 10));
                        for _ in 0..32 {
                            if tx.send(big.clone()).await.is_err() {
                                cancelled.fetch_add(1, Ordering::Relaxed);
                                return;
                            }
                        }
                        let _ = tx.send(end_stream(None)).await;
                    }
                }
            });
            let mut headers = HeaderMap::new();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/connect+proto"),
            );
            Response {
                status: StatusCode::OK,
                headers,
                body: Body::Stream(Chunks::new(rx)),
            }
        })
    }
}

/// The stub on our own HTTP/2 server, on a free loopback port; the path of
/// the certificate to trust. Stops when the token is dropped.
async fn stub_server(
    ending: Ending,
    cancelled: Arc<AtomicUsize>,
    dir: &Path,
) -> (SocketAddr, PathBuf, CancellationToken) {
    tls::install_crypto_provider();
    let cert = dir.join("stub.pem");
    let identity = Identity::self_signed(&["localhost".into()], &cert).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let serving = stop.clone();
    tokio::spawn(async move {
        let options = h2_server::Options {
            max_request_bytes: 1 << 20,
            alt_svc: None,
            limits: myquic::transport::ConnectionLimits {
                tls_handshake: Duration::from_secs(10),
                request_headers: Duration::from_secs(10),
                max_streams: 4096,
                max_pending_per_peer: 1024,
            },
        };
        h2_server::serve(
            listener,
            &identity,
            Arc::new(Stub { ending, cancelled }),
            options,
            serving,
        )
        .await
    });
    (addr, cert, stop)
}

/// `CLIENTS` tasks each running `CALLS` streams against `client`: read to
/// the end, or (`cancel`) dropped after the first message. The failures.
async fn hammer(client: &Client, cancel: bool) -> Vec<String> {
    const CLIENTS: usize = 64;
    const CALLS: usize = 40;
    let tasks: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut failures = Vec::new();
                for _ in 0..CALLS {
                    let outcome = async {
                        let mut stream = client
                            .stream_execute(None, "SELECT 1", Default::default())
                            .await?;
                        while stream.next().await?.is_some() {
                            if cancel {
                                break;
                            }
                        }
                        Ok::<_, CallError>(())
                    };
                    if let Err(e) = outcome.await {
                        failures.push(e.to_string());
                    }
                }
                failures
            })
        })
        .collect();
    let mut failures = Vec::new();
    for task in tasks {
        failures.extend(task.await.unwrap());
    }
    failures
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_that_end_late_or_are_cancelled_keep_the_http2_connection() {
    let dir = tempfile::tempdir().unwrap();
    for (ending, what) in [
        (Ending::LateEndStream, "read to the end, HTTP end late"),
        (Ending::Floods, "cancelled while the server sends"),
    ] {
        let cancelled = Arc::new(AtomicUsize::new(0));
        let (addr, cert, _stop) = stub_server(ending, cancelled.clone(), dir.path()).await;
        let client = client(addr, &cert, TransportPreference::Http2);
        assert_eq!(client.ready().await.unwrap(), HttpVersion::Http2);
        let failures = hammer(&client, ending == Ending::Floods).await;
        let stats = client.stats();
        let cancelled = cancelled.load(Ordering::Relaxed);
        eprintln!(
            "{what}: {} calls, {} failed, {} reconnects, {cancelled} cancelled",
            stats.requests,
            failures.len(),
            stats.reconnects
        );
        assert!(
            failures.is_empty(),
            "{what}: {} calls failed, first: {:?}",
            failures.len(),
            failures.first()
        );
        assert_eq!(stats.reconnects, 0, "{what}: the connection was replaced");
        if ending == Ending::LateEndStream {
            assert_eq!(cancelled, 0, "{what}: complete answers were cancelled");
        }
    }
}
