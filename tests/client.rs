//! The sidecar's psdb client through real parts: a private MariaDB, the
//! gateway in-process, and — where the network has to misbehave — a relay
//! in between that forwards TCP and UDP on one port and can black-hole
//! UDP or cut every connection.

mod common;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use myquic::api::pb::{self, BindVariable, Type};
use myquic::api::{Code, Encoding};
use myquic::client::{CallError, Client, ClientConfig, RawSession, TransportPreference};
use myquic::transport::HttpVersion;
use myquic::transport::tls;
use prost::Message;
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::task::JoinHandle;

use TransportPreference::{Auto, Http2, Http3};

fn client_config(addr: SocketAddr, cert: &Path, transport: TransportPreference) -> ClientConfig {
    tls::install_crypto_provider();
    let roots = tls::roots_from_pem(cert).unwrap();
    let tls = tls::client_config(roots, &[]).unwrap();
    let mut config = ClientConfig::new(addr.to_string(), "localhost", tls, USER, PASSWORD);
    config.transport = transport;
    config.probe_interval = Duration::from_millis(400);
    config
}

fn client(addr: SocketAddr, cert: &Path, transport: TransportPreference) -> Client {
    Client::new(client_config(addr, cert, transport)).unwrap()
}

fn no_binds() -> HashMap<String, BindVariable> {
    HashMap::new()
}

async fn execute(
    client: &Client,
    session: Option<&RawSession>,
    sql: &str,
) -> myquic::client::Reply<pb::ExecuteResponse> {
    let reply = client
        .execute(session, sql.to_owned(), no_binds())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert!(
        reply.message.error.is_none(),
        "{sql}: {:?}",
        reply.message.error
    );
    reply
}

async fn wait_for_transport(client: &Client, want: HttpVersion, within: Duration) -> Duration {
    let start = Instant::now();
    while client.transport() != Some(want) {
        assert!(
            start.elapsed() < within,
            "still on {:?} after {within:?}, wanted {want:?}",
            client.transport()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_method_over_each_transport() {
    // Small stream messages, so that a modest result spans several.
    let stack = Stack::start_with(|c| c.limits.stream_message_bytes = 1024).await;
    for (preference, version) in [
        (Http3, HttpVersion::Http3),
        (Http2, HttpVersion::Http2),
        (Auto, HttpVersion::Http3),
    ] {
        let client = client(stack.addr(), &stack.cert, preference);
        assert_eq!(client.ready().await.unwrap(), version, "{preference:?}");

        let created = client.create_session().await.unwrap();
        assert_eq!(created.transport, version);
        assert_eq!(created.message.user.unwrap().username, USER);
        let session = created.session.expect("CreateSession returns a session");
        assert!(session.autocommit() && !session.in_transaction());

        let binds = HashMap::from([(
            "v1".to_string(),
            BindVariable {
                r#type: Type::Int64 as i32,
                value: Bytes::from_static(b"41"),
                values: vec![],
            },
        )]);
        let reply = client
            .execute(Some(&session), "SELECT ? + 1 AS answer", binds)
            .await
            .unwrap();
        assert_eq!(reply.transport, version);
        assert_eq!(scalar(&reply.message).as_deref(), Some("42"));
        let session = reply.session.unwrap();
        assert_eq!(
            session.view().vitess_session.as_ref().unwrap().session_uuid,
            created
                .message
                .session
                .unwrap()
                .vitess_session
                .unwrap()
                .session_uuid,
            "the same session"
        );

        // A SQL error is a successful call carrying the error.
        let reply = client
            .execute(Some(&session), "SELECT * FROM nope", no_binds())
            .await
            .unwrap();
        assert!(
            String::from_utf8_lossy(&reply.message.error.unwrap().message).contains("errno 1146"),
            "{preference:?}"
        );

        let mut stream = client
            .stream_execute(
                Some(&session),
                "SELECT seq, REPEAT('r', 100) FROM seq_1_to_100",
                no_binds(),
            )
            .await
            .unwrap();
        assert_eq!(stream.transport(), version);
        let (mut messages, mut rows, mut last_session) = (0, 0, None);
        while let Some(reply) = stream.next().await.unwrap() {
            messages += 1;
            if let Some(result) = &reply.message.result {
                rows += result.rows.len();
            }
            last_session = reply.session.or(last_session);
        }
        assert_eq!(rows, 100);
        assert!(messages > 5, "several messages ({messages})");
        assert!(last_session.is_some(), "the stream ends with the session");
        assert!(stream.next().await.unwrap().is_none(), "fused");

        let prepared = client
            .prepare(
                Some(&session),
                "SELECT seq, ? FROM seq_1_to_3 WHERE seq > ?",
            )
            .await
            .unwrap();
        assert_eq!(prepared.message.params_count, 2);
        assert_eq!(prepared.message.fields[0].name, "seq");
        assert!(prepared.session.is_some());

        let closed = client.close_session(&session).await.unwrap();
        assert!(closed.message.error.is_none());
    }

    let client = client(stack.addr(), &stack.cert, Auto);
    // Connect errors from the gateway, unary and streamed.
    let forged = RawSession::from_bytes(
        pb::Session {
            signature: Bytes::from_static(&[0; 32]),
            vitess_session: Some(pb::VitessSession {
                session_uuid: "forged".into(),
                ..Default::default()
            }),
        }
        .encode_to_vec()
        .into(),
    )
    .unwrap();
    match client.execute(Some(&forged), "SELECT 1", no_binds()).await {
        Err(CallError::Api(e)) => assert_eq!(e.code, Code::PermissionDenied),
        other => panic!("{other:?}"),
    }
    let mut stream = client
        .stream_execute(Some(&forged), "SELECT 1", no_binds())
        .await
        .unwrap();
    match stream.next().await {
        Err(CallError::Api(e)) => assert_eq!(e.code, Code::PermissionDenied),
        other => panic!("{:?}", other.map(|r| r.map(|r| r.message))),
    }
    let mut config = client_config(stack.addr(), &stack.cert, Auto);
    config.password = "wrong".into();
    let intruder = Client::new(config).unwrap();
    match intruder.execute(None, "SELECT 1", no_binds()).await {
        Err(CallError::Api(e)) => assert_eq!(e.code, Code::Unauthenticated),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn compression_both_ways() {
    // Compressed answers on loopback too (`compression_by_link`).
    let stack = Stack::start_with(|c| c.limits.compression_by_link = false).await;
    for (encodings, transport) in [
        (vec![Encoding::Zstd, Encoding::Snappy], Http3),
        (vec![Encoding::Snappy], Http2),
        (vec![Encoding::S2, Encoding::Gzip], Http2),
    ] {
        let mut config = client_config(stack.addr(), &stack.cert, transport);
        config.accept_encodings = encodings.clone();
        let client = Client::new(config).unwrap();
        // The first answer tells the client what the gateway accepts; until
        // then requests go uncompressed.
        execute(&client, None, "SELECT 1").await;
        assert_eq!(client.stats().compressed_requests, 0);

        let big = "x".repeat(100_000);
        let reply = execute(&client, None, &format!("SELECT '{big}' AS big")).await;
        assert_eq!(scalar(&reply.message).unwrap(), big, "{encodings:?}");
        let stats = client.stats();
        assert_eq!(stats.compressed_requests, 1, "{encodings:?}");
        assert_eq!(stats.compressed_responses, 1, "{encodings:?}");

        // Streaming: the request envelope and the messages.
        let mut stream = client
            .stream_execute(
                None,
                format!("SELECT '{big}' AS big, seq FROM seq_1_to_3"),
                no_binds(),
            )
            .await
            .unwrap();
        let mut count = 0;
        while let Some(reply) = stream.next().await.unwrap() {
            for row in reply
                .message
                .result
                .as_ref()
                .map(streamed_rows)
                .unwrap_or_default()
            {
                assert_eq!(row[0].as_deref(), Some(big.as_bytes()));
                count += 1;
            }
        }
        assert_eq!(count, 3);
        let stats = client.stats();
        assert_eq!(stats.compressed_requests, 2, "{encodings:?}");
        assert!(stats.compressed_responses >= 2, "{encodings:?}");
    }
}

/// Forwards TCP and UDP arriving on one port to the gateway, like the
/// network between a sidecar and its gateway. UDP and TCP can be
/// black-holed (dropped silently in both directions, as a firewall does,
/// connections left open) and every connection cut (a gateway that died:
/// TCP closes, UDP goes silent).
struct Relay {
    addr: SocketAddr,
    udp_open: Arc<AtomicBool>,
    tcp_open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// `udp: false` binds no UDP socket at all: datagrams to the port get
    /// ICMP port unreachable.
    async fn start(target: SocketAddr, udp: bool) -> Self {
        let (tcp, udp_socket) = loop {
            let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let addr = probe.local_addr().unwrap();
            if let Ok(tcp) = TcpListener::bind(addr).await {
                probe.set_nonblocking(true).unwrap();
                break (tcp, UdpSocket::from_std(probe).unwrap());
            }
        };
        let addr = tcp.local_addr().unwrap();
        let udp_open = Arc::new(AtomicBool::new(true));
        let tcp_open = Arc::new(AtomicBool::new(true));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = vec![tokio::spawn(forward_tcp(
            tcp,
            target,
            tcp_open.clone(),
            connections.clone(),
        ))];
        if udp {
            tasks.push(tokio::spawn(forward_udp(
                Arc::new(udp_socket),
                target,
                udp_open.clone(),
                connections.clone(),
            )));
        }
        Self {
            addr,
            udp_open,
            tcp_open,
            connections,
            tasks,
        }
    }

    fn set_udp(&self, open: bool) {
        self.udp_open.store(open, Ordering::SeqCst);
    }

    /// From now on TCP bytes go nowhere, both ways; the connections stay
    /// open (a peer that froze, or a path that dropped them).
    fn silence_tcp(&self) {
        self.tcp_open.store(false, Ordering::SeqCst);
    }

    /// Cuts every TCP connection and silences UDP.
    fn cut(&self) {
        self.set_udp(false);
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
        for task in &self.tasks {
            task.abort();
        }
    }
}

async fn forward_tcp(
    listener: TcpListener,
    target: SocketAddr,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    while let Ok((inbound, _)) = listener.accept().await {
        let open = open.clone();
        let task = tokio::spawn(async move {
            if let Ok(outbound) = TcpStream::connect(target).await {
                let (from_client, to_client) = inbound.into_split();
                let (from_gateway, to_gateway) = outbound.into_split();
                tokio::join!(
                    forward_bytes(from_client, to_gateway, &open),
                    forward_bytes(from_gateway, to_client, &open),
                );
            }
        });
        connections.lock().unwrap().push(task);
    }
}

/// Copies one direction of a TCP connection while `open`; after, what
/// arrives is read and dropped.
async fn forward_bytes(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    open: &AtomicBool,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 65536];
    while let Ok(n @ 1..) = from.read(&mut buf).await {
        if open.load(Ordering::SeqCst) && to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
    let _ = to.shutdown().await;
}

async fn forward_udp(
    socket: Arc<UdpSocket>,
    target: SocketAddr,
    open: Arc<AtomicBool>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
) {
    let mut peers: HashMap<SocketAddr, Arc<UdpSocket>> = HashMap::new();
    let mut buf = vec![0u8; 65536];
    while let Ok((n, from)) = socket.recv_from(&mut buf).await {
        if !open.load(Ordering::SeqCst) {
            continue;
        }
        let upstream = match peers.entry(from) {
            Entry::Occupied(e) => e.get().clone(),
            Entry::Vacant(e) => {
                let upstream = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
                upstream.connect(target).await.unwrap();
                let (back, reader, open) = (socket.clone(), upstream.clone(), open.clone());
                let task = tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    while let Ok(n) = reader.recv(&mut buf).await {
                        if open.load(Ordering::SeqCst) {
                            let _ = back.send_to(&buf[..n], from).await;
                        }
                    }
                });
                connections.lock().unwrap().push(task);
                e.insert(upstream).clone()
            }
        };
        let _ = upstream.send(&buf[..n]).await;
    }
}

/// UDP that goes nowhere while TCP reaches the gateway: calls succeed over
/// HTTP/2 within 3 s of start, and move to HTTP/3 once UDP gets through.
#[tokio::test(flavor = "multi_thread")]
async fn falls_back_to_http2_and_returns_to_http3() {
    let stack = Stack::start().await;

    // Silently dropped UDP (a filtering firewall).
    let relay = Relay::start(stack.addr(), true).await;
    relay.set_udp(false);
    let start = Instant::now();
    let client = client(relay.addr, &stack.cert, Auto);
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "new() does not wait"
    );
    let reply = execute(&client, None, "SELECT 1").await;
    assert_eq!(reply.transport, HttpVersion::Http2);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "first reply after {took:?}");
    assert_eq!(client.stats().fallbacks, 1);

    // In-flight HTTP/2 calls finish there while new ones move to HTTP/3.
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { execute(&client, None, "SELECT SLEEP(1.5)").await.transport })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    relay.set_udp(true);
    wait_for_transport(&client, HttpVersion::Http3, Duration::from_secs(3)).await;
    assert_eq!(
        execute(&client, None, "SELECT 1").await.transport,
        HttpVersion::Http3
    );
    assert_eq!(slow.await.unwrap(), HttpVersion::Http2);
    let stats = client.stats();
    assert_eq!((stats.fallbacks, stats.returns), (1, 1));

    // No UDP listener at all (ICMP port unreachable).
    let relay = Relay::start(stack.addr(), false).await;
    let start = Instant::now();
    let client = self::client(relay.addr, &stack.cert, Auto);
    assert_eq!(
        execute(&client, None, "SELECT 1").await.transport,
        HttpVersion::Http2
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

/// UDP black-holed under a working HTTP/3 connection. The client notices
/// the silence (nothing heard back for `h3_silence_timeout`, 1 s), stops
/// writing new calls to QUIC and races HTTP/2, long before QUIC's idle
/// timeout (3 s) would end the connection: new calls are answered over
/// HTTP/2 within 3 s of the block, calls made after the client stopped
/// offering HTTP/3 all succeed, and the only failures are calls already
/// written into the hole, reported as lost and never sent again.
#[tokio::test(flavor = "multi_thread")]
async fn black_holed_http3_path_moves_unwritten_calls_to_http2() {
    let stack = Stack::start().await;
    let admin = client(stack.addr(), &stack.cert, Http2);
    execute(&admin, None, "CREATE TABLE hole (k INT)").await;
    let relay = Relay::start(stack.addr(), true).await;
    let client = client(relay.addr, &stack.cert, Auto);
    assert_eq!(client.ready().await.unwrap(), HttpVersion::Http3);
    execute(&client, None, "SELECT 1").await;

    relay.set_udp(false);
    let blocked = Instant::now();
    // Written at once into the black hole: as far as the client can tell
    // it may have run.
    let in_doubt = {
        let client = client.clone();
        tokio::spawn(async move {
            let sql = "INSERT INTO hole VALUES (1)";
            client
                .execute(None, sql, no_binds())
                .await
                .map(|r| r.transport)
        })
    };
    // A new call every 100 ms for 3 s, each noting the transport the
    // client offered when it started.
    let mut calls = Vec::new();
    while blocked.elapsed() < Duration::from_secs(3) {
        let (client, offered, started) = (client.clone(), client.transport(), blocked.elapsed());
        let call = tokio::spawn(async move {
            let reply = client.execute(None, "SELECT 1", no_binds()).await;
            (reply.map(|r| r.transport), blocked.elapsed())
        });
        calls.push((started, offered, call));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut first_http2 = None;
    let mut lost = 0;
    for (started, offered, call) in calls {
        let (reply, answered) = call.await.unwrap();
        match reply {
            Ok(HttpVersion::Http2) => {
                first_http2 = first_http2.min(Some(answered)).or(Some(answered));
            }
            Ok(other) => assert_eq!(other, HttpVersion::Http3, "started at {started:?}"),
            Err(e @ CallError::Lost(_)) => {
                lost += 1;
                // Only calls handed the QUIC connection before the client
                // stopped offering it can have been written to it.
                assert_eq!(
                    offered,
                    Some(HttpVersion::Http3),
                    "a call started at {started:?} with {offered:?} on offer was lost: {e}"
                );
            }
            Err(e) => panic!("a call started at {started:?} failed: {e}"),
        }
    }
    let first_http2 =
        first_http2.unwrap_or_else(|| panic!("no call was answered over HTTP/2 ({lost} lost)"));
    eprintln!(
        "UDP black-holed: first call answered over HTTP/2 after {first_http2:.1?}; {lost} calls lost"
    );
    assert!(
        first_http2 < Duration::from_secs(3),
        "first answer over HTTP/2 after {first_http2:?}"
    );
    // The call written into the hole is lost, not re-sent over HTTP/2.
    match in_doubt.await.unwrap() {
        Err(e @ CallError::Lost(_)) => assert!(e.may_have_executed()),
        other => panic!("the call written into the black hole: {other:?}"),
    }
    let count = execute(&client, None, "SELECT COUNT(*) FROM hole").await;
    assert_eq!(scalar(&count.message).as_deref(), Some("0"));
    assert_eq!(client.stats().fallbacks, 1);
}

/// A transaction carried across requests while the transport changes
/// under it: HTTP/3's path goes silent (UDP black-holed), the client falls
/// back to HTTP/2, then returns to HTTP/3; the session goes along
/// unchanged.
#[tokio::test(flavor = "multi_thread")]
async fn session_survives_transport_switches() {
    let stack = Stack::start().await;
    let relay = Relay::start(stack.addr(), true).await;
    let client = client(relay.addr, &stack.cert, Auto);
    execute(&client, None, "CREATE TABLE t (id INT PRIMARY KEY)").await;

    let begin = execute(&client, None, "BEGIN").await;
    assert_eq!(begin.transport, HttpVersion::Http3);
    let session = begin.session.unwrap();
    assert!(session.in_transaction());
    let session = execute(&client, Some(&session), "INSERT INTO t VALUES (1)")
        .await
        .session
        .unwrap();

    relay.set_udp(false);
    let lost = wait_for_transport(&client, HttpVersion::Http2, Duration::from_secs(6)).await;
    // Idle: the silence shows with the next keep-alive (≤ 1 s) left
    // unanswered for `h3_silence_timeout` (1 s), then HTTP/2 connects.
    // Never sooner: a path is not given up without evidence.
    assert!(lost > Duration::from_millis(900), "{lost:?}");
    let reply = execute(&client, Some(&session), "INSERT INTO t VALUES (2)").await;
    assert_eq!(reply.transport, HttpVersion::Http2);
    let session = reply.session.unwrap();
    assert!(session.in_transaction());

    relay.set_udp(true);
    wait_for_transport(&client, HttpVersion::Http3, Duration::from_secs(3)).await;
    let commit = execute(&client, Some(&session), "COMMIT").await;
    assert_eq!(commit.transport, HttpVersion::Http3);
    assert!(!commit.session.unwrap().in_transaction());

    let count = execute(&client, None, "SELECT COUNT(*) FROM t").await;
    assert_eq!(scalar(&count.message).as_deref(), Some("2"));
    let stats = client.stats();
    assert_eq!((stats.fallbacks, stats.returns), (1, 1));
    // HTTP/2 took over before the silent HTTP/3 connection died.
    assert_eq!(stats.reconnects, 0);
}

/// Dropping a stream part-way cancels it at the gateway: the session it
/// held is free again at once, although the result was far larger than
/// every buffer and window in between.
#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_stream_cancels_it() {
    let stack = Stack::start().await;
    for transport in [Http3, Http2] {
        // Uncompressed: these rows would shrink to almost nothing and fit
        // in the flow-control windows, cancelled or not.
        let mut config = client_config(stack.addr(), &stack.cert, transport);
        config.accept_encodings = vec![];
        let client = Client::new(config).unwrap();
        let session = client.create_session().await.unwrap().session.unwrap();
        // About 100 MB of rows, far more than the windows and buffers.
        let mut stream = client
            .stream_execute(
                Some(&session),
                "SELECT seq, REPEAT('x', 1000) FROM seq_1_to_100000",
                no_binds(),
            )
            .await
            .unwrap();
        let first = stream.next().await.unwrap().unwrap();
        assert!(!first.message.result.unwrap().head.fields.is_empty());
        // Busy while the stream is open.
        match client.execute(Some(&session), "SELECT 1", no_binds()).await {
            Err(CallError::Api(e)) => assert_eq!(e.code, Code::Aborted),
            other => panic!("{other:?}"),
        }
        drop(stream);
        let start = Instant::now();
        loop {
            match client.execute(Some(&session), "SELECT 1", no_binds()).await {
                Ok(reply) => {
                    assert_eq!(scalar(&reply.message).as_deref(), Some("1"));
                    break;
                }
                Err(CallError::Api(e)) if e.code == Code::Aborted => {
                    assert!(
                        start.elapsed() < Duration::from_secs(10),
                        "{transport:?}: the gateway still holds the session"
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{e}"),
            }
        }
    }
}

/// Nothing listens: calls fail with `Unavailable` once `connect_timeout`
/// has passed, never hang, and creating the client does not wait.
#[tokio::test(flavor = "multi_thread")]
async fn unreachable_gateway_is_unavailable() {
    let nowhere = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("ca.pem");
    myquic::transport::tls::Identity::self_signed(&[], &cert).unwrap();
    for transport in [Auto, Http3, Http2] {
        let mut config = client_config(nowhere, &cert, transport);
        config.connect_timeout = Duration::from_secs(1);
        let start = Instant::now();
        let client = Client::new(config).unwrap();
        assert!(start.elapsed() < Duration::from_millis(100));
        let result = tokio::time::timeout(
            Duration::from_secs(5),
            client.execute(None, "SELECT 1", no_binds()),
        )
        .await
        .expect("no hang");
        match result {
            Err(e @ CallError::Unavailable { .. }) => {
                assert!(!e.may_have_executed());
                assert!(e.to_string().contains("gateway unavailable"), "{e}");
            }
            other => panic!("{transport:?}: {other:?}"),
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_millis(1500),
            "{transport:?}: {took:?}"
        );
        assert!(matches!(
            client.stream_execute(None, "SELECT 1", no_binds()).await,
            Err(CallError::Unavailable { .. })
        ));
        assert_eq!(client.transport(), None);
    }
}

/// A call in flight when the gateway goes away is `Lost`, and is not sent
/// again when the client reconnects: the row is inserted once.
#[tokio::test(flavor = "multi_thread")]
async fn in_flight_call_is_lost_not_retried() {
    let stack = Stack::start().await;
    let admin = client(stack.addr(), &stack.cert, Http2);
    execute(&admin, None, "CREATE TABLE t (k VARCHAR(8), s INT)").await;
    for (transport, key) in [(Http2, "h2"), (Http3, "h3")] {
        let relay = Relay::start(stack.addr(), true).await;
        let client = client(relay.addr, &stack.cert, transport);
        client.ready().await.unwrap();
        let call = {
            let client = client.clone();
            let sql = format!("INSERT INTO t VALUES ('{key}', SLEEP(1))");
            tokio::spawn(async move { client.execute(None, sql, no_binds()).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let cut = Instant::now();
        relay.cut();
        match call.await.unwrap() {
            Err(e @ CallError::Lost(_)) => assert!(e.may_have_executed()),
            other => panic!("{transport:?}: {other:?}"),
        }
        // HTTP/2 sees the TCP close at once; HTTP/3 hears nothing and gives
        // up after the idle timeout.
        assert!(
            cut.elapsed() < Duration::from_secs(5),
            "{:?}",
            cut.elapsed()
        );
        relay.set_udp(true);
        // The failed call can return before the client's supervisor has
        // seen the connection close, so `ready()` alone may still find the
        // old one: wait for the replacement itself.
        let waited = Instant::now();
        while client.stats().reconnects == 0 {
            assert!(
                waited.elapsed() < Duration::from_secs(10),
                "{transport:?}: no reconnect"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        client.ready().await.unwrap();
        assert_eq!(client.stats().reconnects, 1, "{transport:?}");
        // The statement finished at the gateway; it ran exactly once.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let count = execute(
            &client,
            None,
            &format!("SELECT COUNT(*) FROM t WHERE k = '{key}'"),
        )
        .await;
        assert_eq!(
            scalar(&count.message).as_deref(),
            Some("1"),
            "{transport:?}"
        );
    }
}

/// An HTTP/2 path that goes silent (nothing closes, nothing answers) is
/// given up once a keep-alive PING goes unanswered for `idle_timeout`:
/// the call in flight fails as `Lost` instead of waiting for an answer
/// that cannot come, and the client connects again.
#[tokio::test(flavor = "multi_thread")]
async fn silent_http2_path_is_given_up_after_an_unanswered_ping() {
    let stack = Stack::start().await;
    let direct = client(stack.addr(), &stack.cert, Http2);
    let relay = Relay::start(stack.addr(), false).await;
    let mut config = client_config(relay.addr, &stack.cert, Http2);
    config.keep_alive = Duration::from_millis(200);
    config.idle_timeout = Duration::from_millis(600);
    let client = Client::new(config).unwrap();
    client.ready().await.unwrap();
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.execute(None, "SELECT SLEEP(20)", no_binds()).await })
    };
    // The statement is running at the backend: the request went through.
    let running = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                   WHERE INFO = 'SELECT SLEEP(20)'";
    while scalar(&execute(&direct, None, running).await.message).as_deref() != Some("1") {
        tokio::task::yield_now().await;
    }
    relay.silence_tcp();
    let outcome = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("the call ends before its statement would (20 s)")
        .unwrap();
    match outcome {
        Err(e @ CallError::Lost(_)) => assert!(e.may_have_executed()),
        other => panic!("{other:?}"),
    }
}

/// `tcp_congestion` on both ends reaches both sockets of an HTTP/2
/// connection: the client's (set before connecting) and the gateway's
/// accepted one (inherited from its listener). `ss` reports each
/// socket's controller; reno is never this host's default (bbr), so a
/// setting that went nowhere shows.
#[tokio::test(flavor = "multi_thread")]
async fn http2_runs_the_configured_tcp_congestion_controller() {
    let reno: myquic::transport::tcp::TcpCongestion = "reno".parse().unwrap();
    if let Err(e) = reno.check() {
        eprintln!("SKIPPED: {e}");
        return;
    }
    let stack = Stack::start_with(|c| c.tcp_congestion = Some(reno)).await;
    let mut config = client_config(stack.addr(), &stack.cert, Http2);
    config.tcp_congestion = Some(reno);
    let client = Client::new(config).unwrap();
    execute(&client, None, "SELECT 1").await;
    let port = stack.addr().port();
    let out = tokio::process::Command::new("ss")
        .args(["-tinH", "state", "established"])
        .arg(format!("( sport = :{port} or dport = :{port} )"))
        .output()
        .await
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    // Each socket is a line of addresses, then an indented line of TCP
    // info that starts with the controller's name.
    let controllers: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(controllers, ["reno", "reno"], "{text}");
}

/// Every HTTP/3 request stream the client writes is exactly a HEADERS and
/// a DATA frame. h3 sends a "grease" frame (a reserved type, RFC 9114
/// §7.2.8) from each `SendRequest` that has not sent one; the client
/// clones its `SendRequest` for every request, so every request carried
/// one: a further frame to write into quinn and bytes on the wire per
/// request. A raw QUIC server (no h3 in it) reads the streams' bytes.
#[tokio::test(flavor = "multi_thread")]
async fn http3_requests_are_headers_and_data_only() {
    use myquic::transport::client::Connection;
    use myquic::transport::quic::Congestion;
    use myquic::transport::tls::Identity;

    tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("cert.pem");
    let identity = Identity::self_signed(&["localhost".into()], &cert).unwrap();
    let endpoint = myquic::transport::h3_server::bind(
        "127.0.0.1:0".parse().unwrap(),
        &identity,
        Congestion::Bbr,
        16,
    )
    .unwrap();
    let addr = endpoint.local_addr().unwrap();
    const REQUESTS: usize = 3;
    let server = tokio::spawn(async move {
        let conn = endpoint.accept().await.unwrap().await.unwrap();
        let mut streams = Vec::new();
        // The send halves stay open until all are read: one finished
        // without response headers makes the client's h3 close the whole
        // connection (H3_INTERNAL_ERROR, "Stream finished without
        // receiving response headers"), and the next accept fails — it
        // did in CI, under load.
        let mut unanswered = Vec::new();
        for _ in 0..REQUESTS {
            let (send, mut recv) = conn.accept_bi().await.unwrap();
            unanswered.push(send);
            streams.push(recv.read_to_end(1 << 16).await.unwrap());
        }
        conn.close(0u32.into(), b"");
        streams
    });
    let roots = tls::roots_from_pem(&cert).unwrap();
    let tls = tls::client_config(roots, &[]).unwrap();
    let client = Connection::connect_h3(
        addr,
        "localhost",
        tls,
        Congestion::Bbr,
        Duration::from_secs(5),
    )
    .await
    .unwrap();
    for _ in 0..REQUESTS {
        let client = client.clone();
        // No answer comes: the requests are only written.
        tokio::spawn(async move {
            let request = http::Request::post(format!("https://localhost:{}/x", addr.port()))
                .body(Bytes::from_static(b"body"))
                .unwrap();
            let _ = client.send(request).await;
        });
    }
    let streams = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("three request streams")
        .unwrap();
    for stream in streams {
        let mut frames = Vec::new();
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let kind = quic_varint(&mut rest);
            let len = quic_varint(&mut rest) as usize;
            rest = &rest[len..];
            frames.push(kind);
        }
        // HEADERS (0x01), then DATA (0x00).
        assert_eq!(frames, [1, 0], "frame types of a request stream");
    }
}

/// A QUIC variable-length integer (RFC 9000 §16) from the front of `buf`.
fn quic_varint(buf: &mut &[u8]) -> u64 {
    let len = 1 << (buf[0] >> 6);
    let mut value = u64::from(buf[0] & 0x3f);
    for byte in &buf[1..len] {
        value = value << 8 | u64::from(*byte);
    }
    *buf = &buf[len..];
    value
}
