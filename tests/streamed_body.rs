//! Large request bodies compressed as they are sent (sidecar) and decoded
//! as they arrive (gateway), through real parts: a private MariaDB, the
//! gateway and sidecars in-process over HTTP/3 and HTTP/2, `mysql_async`
//! as the client. What is checked: a streamed large INSERT stores exactly
//! the client's bytes (as the same statement sent directly does); a
//! statement over the gateway's limit never runs, whether the sidecar
//! refuses it unsent or the gateway finds it too large while decoding;
//! and a body cut off midway (its sender gone) never runs.

mod common;

use std::time::Duration;

use bytes::Bytes;
use http::header;
use mysql_async::Conn;
use mysql_async::prelude::*;
use prost::Message;

use myquic::api::connect::{end_stream_error, envelope_header, take_envelope};
use myquic::api::stream_coding::StreamCompressor;
use myquic::api::{Code, Method, pb};
use myquic::client::TransportPreference;
use myquic::sidecar::Sidecar;
use myquic::transport::client::{Connection, Outgoing};

use common::sidecar::{Chain, local_user, sidecar_config};
use common::{LOCAL_PASSWORD, LOCAL_USER, PASSWORD, Stack, USER, Version, basic};

const MIB: usize = 1 << 20;

/// How long a condition may take to come true (debug builds, a loaded
/// 2-core machine); checked every few milliseconds.
const WITHIN: Duration = Duration::from_secs(60);

async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WITHIN;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `len` bytes with every byte value: random stretches and runs of one
/// byte, so a body is neither all compressible nor all random.
fn value(len: usize, seed: u64) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15 ^ seed;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let run = (x % 4096) as usize;
        if x.is_multiple_of(3) {
            out.extend(std::iter::repeat_n((x >> 24) as u8, run));
        } else {
            let mut y = x;
            out.extend((0..run).map(|_| {
                y ^= y << 13;
                y ^= y >> 7;
                y ^= y << 17;
                (y >> 32) as u8
            }));
        }
    }
    out.truncate(len);
    out
}

/// `INSERT INTO {table} VALUES ({id}, _binary'…')` with `bytes` escaped
/// as drivers escape client-side (`\\`, `\'`, `\0`).
fn insert_of(table: &str, id: u32, bytes: &[u8]) -> Vec<u8> {
    let mut sql = format!("INSERT INTO {table} VALUES ({id}, _binary'").into_bytes();
    for &b in bytes {
        match b {
            b'\\' => sql.extend_from_slice(b"\\\\"),
            b'\'' => sql.extend_from_slice(b"\\'"),
            0 => sql.extend_from_slice(b"\\0"),
            _ => sql.push(b),
        }
    }
    sql.extend_from_slice(b"')");
    sql
}

async fn stored(direct: &mut Conn, table: &str, id: u32) -> Option<Vec<u8>> {
    direct
        .query_first(format!("SELECT v FROM {table} WHERE id = {id}"))
        .await
        .unwrap()
}

async fn count(direct: &mut Conn, table: &str) -> u64 {
    direct
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .unwrap()
        .unwrap()
}

async fn sidecar_over(stack: &Stack, transport: TransportPreference) -> Sidecar {
    let mut config = sidecar_config(stack, vec![local_user(LOCAL_USER, LOCAL_PASSWORD)]);
    config.auth.plugin = "mysql_native_password".into();
    config.upstream.transport = transport;
    Sidecar::start(config).await.expect("sidecar starts")
}

async fn client_of(sidecar: &Sidecar) -> Conn {
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(sidecar.addr().port())
        .prefer_socket(false)
        .user(Some(LOCAL_USER))
        .pass(Some(LOCAL_PASSWORD))
        .db_name(Some("app"));
    let mut conn = Conn::new(opts).await.expect("logs in through the sidecar");
    // One answer teaches the sidecar what the gateway takes.
    conn.query_drop("DO 1").await.unwrap();
    conn
}

/// A several-MB INSERT, as text and with a bound value, through a sidecar
/// on each transport: streamed (the sidecar says so), stored byte for
/// byte as the same statements sent directly, with the same answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_large_insert_arrives_byte_for_byte() {
    let chain = Chain::start().await;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE TABLE big (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    for (n, transport) in [TransportPreference::Http3, TransportPreference::Http2]
        .into_iter()
        .enumerate()
    {
        let sidecar = sidecar_over(&chain.stack, transport).await;
        let mut via = client_of(&sidecar).await;
        let before = sidecar.client().stats().streamed_requests;
        let base = 10 * n as u32;

        let text = value(5 * MIB, base.into());
        via.query_drop(insert_of("big", base + 1, &text))
            .await
            .unwrap();
        let via_answer = (
            via.affected_rows(),
            via.last_insert_id(),
            via.get_warnings(),
        );
        direct
            .query_drop(insert_of("big", base + 2, &text))
            .await
            .unwrap();
        let direct_answer = (
            direct.affected_rows(),
            direct.last_insert_id(),
            direct.get_warnings(),
        );
        assert_eq!(via_answer, direct_answer, "{transport:?}: the same answer");

        let bound = value(3 * MIB, base as u64 + 7);
        via.exec_drop(
            "INSERT INTO big VALUES (?, ?)",
            (base + 3, bound.as_slice()),
        )
        .await
        .unwrap();
        direct
            .exec_drop(
                "INSERT INTO big VALUES (?, ?)",
                (base + 4, bound.as_slice()),
            )
            .await
            .unwrap();

        assert_eq!(
            sidecar.client().stats().streamed_requests - before,
            2,
            "{transport:?}: both statements compressed as they were sent"
        );
        for (id, expected) in [(1, &text), (2, &text), (3, &bound), (4, &bound)] {
            let got = stored(&mut direct, "big", base + id).await;
            assert!(
                got.as_deref() == Some(&expected[..]),
                "{transport:?}: row {} stored as sent",
                base + id
            );
        }
        drop(via);
        sidecar.shutdown().await;
    }
}

/// A statement over the gateway's request limit never runs: the sidecar
/// refuses it unsent (1153) — a streamed body's worst case is known before
/// it goes, so none turns out too large midway — while one under the
/// limit is streamed and runs. A body that a client other than our
/// sidecar does send, and that decodes past the limit, is refused while
/// it arrives, and does not run either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_over_the_limit_never_runs() {
    const LIMIT: usize = 2 * MIB;
    let stack = Stack::start_with(|c| c.limits.max_request_bytes = LIMIT).await;
    let mut direct = stack.db.direct().await;
    direct
        .query_drop("CREATE TABLE app.lim (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    direct.query_drop("USE app").await.unwrap();
    for transport in [TransportPreference::Http3, TransportPreference::Http2] {
        let sidecar = sidecar_over(&stack, transport).await;
        let mut via = client_of(&sidecar).await;
        let before = sidecar.client().stats().streamed_requests;
        let over = insert_of("lim", 1, &vec![b'x'; LIMIT + 1000]);
        match via.query_drop(over).await {
            Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1153, "{e:?}"),
            other => panic!("{transport:?}: {other:?}"),
        }
        let under = insert_of("lim", 2, &value(LIMIT * 3 / 4, 3));
        via.query_drop(under).await.unwrap();
        assert_eq!(sidecar.client().stats().streamed_requests - before, 1);
        assert_eq!(
            stored(&mut direct, "lim", 1).await,
            None,
            "{transport:?}: never ran"
        );
        direct.query_drop("DELETE FROM lim").await.unwrap();
        drop(via);
        sidecar.shutdown().await;
    }

    // 8 MiB of statement in a few kB of zstd, sent by a raw client.
    for version in [Version::H3, Version::H2] {
        let conn = stack.connect(version).await;
        let statement = insert_of("lim", 3, &vec![b'y'; 8 * MIB]);
        let message = pb::ExecuteRequest {
            query: statement.into(),
            ..Default::default()
        }
        .encode_to_vec();
        let head = Bytes::copy_from_slice(&envelope_header(0, message.len()));
        let pieces = StreamCompressor::zstd(vec![head, message.into()]);
        let request = request(Method::StreamExecute, Outgoing::Pieces(Box::new(pieces)));
        let error = stream_end_error(&conn, request).await;
        let error = error.expect("refused");
        assert_eq!(
            error.code,
            Code::ResourceExhausted,
            "{version:?}: {error:?}"
        );
        assert!(
            error.message.contains("max_request_bytes"),
            "{}",
            error.message
        );
        assert_eq!(count(&mut direct, "lim").await, 0, "{version:?}: never ran");
    }
}

/// A body whose sender goes midway (the stream is reset) never runs,
/// compressed or not, on either transport: a cut body is never taken for
/// a whole one. And a MySQL client that hangs up midway through its
/// statement's packet leaves nothing run either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_cut_off_midway_never_runs() {
    let chain = Chain::start().await;
    let stack = &chain.stack;
    let mut direct = chain.direct().await;
    direct
        .query_drop("CREATE TABLE cut (id INT PRIMARY KEY, v LONGBLOB)")
        .await
        .unwrap();
    let statement = insert_of("cut", 1, &value(2 * MIB, 5));
    let message: Bytes = pb::ExecuteRequest {
        query: statement.into(),
        ..Default::default()
    }
    .encode_to_vec()
    .into();
    for version in [Version::H3, Version::H2] {
        for compressed in [true, false] {
            let conn = stack.connect(version).await;
            // Two pieces, then nothing more for as long as it takes.
            let first: Vec<Bytes> = if compressed {
                StreamCompressor::zstd(vec![message.clone()])
                    .take(2)
                    .collect()
            } else {
                vec![
                    message.slice(..64 << 10),
                    message.slice(64 << 10..128 << 10),
                ]
            };
            let pieces = first.into_iter().chain(std::iter::repeat(Bytes::new()));
            let mut request = request(Method::Execute, Outgoing::Pieces(Box::new(pieces)));
            if !compressed {
                request.headers_mut().remove(header::CONTENT_ENCODING);
            }
            let send = conn.send_body(request);
            let served = wait_until("the gateway serves the request", || {
                stack.gateway.requests_in_flight() == 1
            });
            tokio::select! {
                answer = send => panic!("{version:?}: answered a body never ended: {:?}", answer.map(|r| r.head)),
                () = served => {}
            }
            // The send future is gone: its stream is reset.
            wait_until("the gateway gives the request up", || {
                stack.gateway.requests_in_flight() == 0
            })
            .await;
            assert_eq!(count(&mut direct, "cut").await, 0, "{version:?}: never ran");
        }
    }

    // A MySQL client that hangs up with 1 MiB of a 3 MiB COM_QUERY sent.
    use tokio::io::AsyncWriteExt;
    let raw = chain.raw().await;
    let client = common::raw_mysql::RawClient::login(raw, LOCAL_USER, LOCAL_PASSWORD, "app").await;
    let statement = insert_of("cut", 2, &vec![b'z'; 3 * MIB]);
    let mut packet = Vec::new();
    let len = (statement.len() + 1) as u32;
    packet.extend_from_slice(&len.to_le_bytes()[..3]);
    packet.push(0);
    packet.push(0x03);
    packet.extend_from_slice(&statement[..MIB]);
    let mut stream = client.into_stream();
    stream.write_all(&packet).await.unwrap();
    drop(stream);
    wait_until("the sidecar ends the connection", || {
        chain.sidecar.connections() == 0
    })
    .await;
    wait_until("nothing in flight at the gateway", || {
        stack.gateway.requests_in_flight() == 0
    })
    .await;
    assert_eq!(count(&mut direct, "cut").await, 0, "never ran");
}

fn request(method: Method, body: Outgoing) -> http::Request<Outgoing> {
    let framing = if method.is_streaming() {
        myquic::api::Framing::Streaming
    } else {
        myquic::api::Framing::Unary
    };
    http::Request::builder()
        .method("POST")
        .uri(format!("https://localhost{}", method.path()))
        .header(
            header::CONTENT_TYPE,
            myquic::api::Codec::Proto.content_type(framing),
        )
        .header(header::AUTHORIZATION, basic(USER, PASSWORD))
        .header(header::CONTENT_ENCODING, "zstd")
        .body(body)
        .unwrap()
}

/// A streaming call's end-of-stream error, if any.
async fn stream_end_error(
    conn: &Connection,
    request: http::Request<Outgoing>,
) -> Option<myquic::api::ApiError> {
    let response = conn.send_body(request).await.expect("answered");
    assert_eq!(response.head.status, 200);
    let (_, body) = response.collect(64 * MIB).await.expect("body");
    let mut buf = bytes::BytesMut::from(&body[..]);
    while let Some(envelope) = take_envelope(&mut buf, 64 * MIB).unwrap() {
        if envelope.is_end_stream() {
            return end_stream_error(&envelope.payload);
        }
    }
    panic!("no end-of-stream message");
}
