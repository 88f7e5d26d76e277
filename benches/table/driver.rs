//! The load generator. It runs as its own process (`table driver JOB`),
//! started with `ip netns exec <client namespace>` so its sockets live on
//! the client side of the emulated link. Protocol on stdin/stdout: it
//! connects and warms up, prints `ready`, waits for a line on stdin (the
//! harness snapshots its counters in between), runs the timed phase and
//! prints one line of JSON, the [`Outcome`].

use std::io::BufRead;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, SslOpts, Value};
use serde::{Deserialize, Serialize};

use super::data;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shape {
    ConnectSelect1,
    ParallelSelect1,
    MediumSelect,
    MediumInsert,
    LargeSelect,
    LargeInsert,
}

impl Shape {
    pub const ALL: [Shape; 6] = [
        Shape::ConnectSelect1,
        Shape::ParallelSelect1,
        Shape::MediumSelect,
        Shape::MediumInsert,
        Shape::LargeSelect,
        Shape::LargeInsert,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Shape::ConnectSelect1 => "Connect + SELECT 1",
            Shape::ParallelSelect1 => "Parallel SELECT 1",
            Shape::MediumSelect => "Medium SELECT",
            Shape::MediumInsert => "Medium INSERT",
            Shape::LargeSelect => "Large SELECT",
            Shape::LargeInsert => "Large INSERT",
        }
    }

    /// The name `--shape` takes.
    pub fn id(self) -> &'static str {
        match self {
            Shape::ConnectSelect1 => "connect",
            Shape::ParallelSelect1 => "parallel",
            Shape::MediumSelect => "medium-select",
            Shape::MediumInsert => "medium-insert",
            Shape::LargeSelect => "large-select",
            Shape::LargeInsert => "large-insert",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Shape::ConnectSelect1 => "connect",
            Shape::ParallelSelect1 => "parallel",
            Shape::MediumSelect => "med SELECT",
            Shape::MediumInsert => "med INSERT",
            Shape::LargeSelect => "large SELECT",
            Shape::LargeInsert => "large INSERT",
        }
    }
}

/// Where the client connects.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    /// Verify the server with this CA over TLS; `None`: plain TCP.
    pub tls_ca: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub target: Target,
    pub shape: Shape,
    pub concurrency: usize,
    /// Timed phase: stop starting operations after this long …
    pub budget_ms: u64,
    /// … but not before this many have completed.
    pub min_ops: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// Per-operation latency, microseconds, in completion order.
    pub latencies_us: Vec<u64>,
    pub wall_us: u64,
    /// Payload per operation: result values read or statement bytes sent.
    pub payload_bytes: u64,
    /// The server's view of the session's TLS (`Ssl_version`, `Ssl_cipher`).
    pub tls: Option<String>,
    pub error: Option<String>,
}

fn opts(target: &Target) -> Opts {
    let mut b = OptsBuilder::default()
        .ip_or_hostname(target.host.clone())
        .tcp_port(target.port)
        .user(Some(target.user.clone()))
        .pass(Some(target.password.clone()))
        .db_name(Some("app"))
        // No reconnect to a unix socket, and no settings query after the
        // login: what a tuned application does, and the same for every
        // client, so connect time is the protocol's own round trips.
        .prefer_socket(false)
        .max_allowed_packet(Some(64 << 20))
        .wait_timeout(Some(28_800))
        .stmt_cache_size(0);
    if let Some(ca) = &target.tls_ca {
        b = b.ssl_opts(
            SslOpts::default().with_root_certs(vec![std::path::PathBuf::from(ca).into()]),
        );
    }
    b.into()
}

/// One operation of `shape` on `conn`; returns the payload bytes.
async fn operation(
    conn: &mut Conn,
    shape: Shape,
    inserts: &[String],
    n: usize,
) -> mysql_async::Result<u64> {
    match shape {
        Shape::ConnectSelect1 | Shape::ParallelSelect1 => {
            conn.query_drop("SELECT 1").await?;
            Ok(1)
        }
        Shape::MediumSelect | Shape::LargeSelect => {
            let table = if shape == Shape::MediumSelect {
                "medium"
            } else {
                "large"
            };
            let result = conn.query_iter(format!("SELECT * FROM {table}")).await?;
            let mut bytes = 0u64;
            result
                .for_each_and_drop(|row| {
                    for v in row.unwrap() {
                        bytes += match v {
                            Value::Bytes(b) => b.len() as u64,
                            Value::NULL => 0,
                            _ => 8,
                        };
                    }
                })
                .await?;
            Ok(bytes)
        }
        Shape::MediumInsert | Shape::LargeInsert => {
            let sql = &inserts[n % inserts.len()];
            conn.query_drop(sql.as_str()).await?;
            Ok(sql.len() as u64)
        }
    }
}

fn statements(shape: Shape) -> Vec<String> {
    match shape {
        Shape::MediumInsert => vec![data::medium_insert("medium_ins")],
        Shape::LargeInsert => data::large_inserts("large_ins", data::LARGE_INSERT_ROWS),
        _ => Vec::new(),
    }
}

/// Waits for the harness's go-ahead on stdin.
fn handshake() {
    println!("ready");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
}

async fn tls_of(conn: &mut Conn) -> Option<String> {
    let rows: Vec<(String, String)> = conn
        .query("SHOW SESSION STATUS WHERE Variable_name IN ('Ssl_version', 'Ssl_cipher')")
        .await
        .ok()?;
    let get = |k: &str| rows.iter().find(|r| r.0 == k).map(|r| r.1.clone());
    match (get("Ssl_version"), get("Ssl_cipher")) {
        (Some(v), Some(c)) if !v.is_empty() => Some(format!("{v} {c}")),
        _ => None,
    }
}

pub async fn run(job: Job) -> Outcome {
    let opts = opts(&job.target);
    let inserts = statements(job.shape);
    let mut out = Outcome::default();
    // Warm up: one connection (its TLS as the server saw it) and one op.
    let mut first = match Conn::new(opts.clone()).await {
        Ok(c) => c,
        Err(e) => {
            out.error = Some(format!("connect: {e}"));
            handshake();
            return out;
        }
    };
    if job.target.tls_ca.is_some() {
        out.tls = tls_of(&mut first).await;
    }
    match operation(&mut first, job.shape, &inserts, 0).await {
        Ok(b) => out.payload_bytes = b,
        Err(e) => out.error = Some(format!("warm-up: {e}")),
    }
    let mut pool = vec![first];
    if job.shape == Shape::ParallelSelect1 {
        for _ in 1..job.concurrency {
            match Conn::new(opts.clone()).await {
                Ok(mut c) => {
                    let _ = c.query_drop("SELECT 1").await;
                    pool.push(c);
                }
                Err(e) => out.error = Some(format!("pool: {e}")),
            }
        }
    }
    if job.shape == Shape::ConnectSelect1 {
        let _ = pool.pop().unwrap().disconnect().await;
    }
    handshake();
    if out.error.is_some() {
        return out;
    }

    let budget = Duration::from_millis(job.budget_ms);
    let start = Instant::now();
    let deadline = start + budget;
    let min_each = job.min_ops.div_ceil(pool.len().max(1));
    let inserts = std::sync::Arc::new(inserts);
    let mut workers = Vec::new();
    if job.shape == Shape::ConnectSelect1 {
        let opts = opts.clone();
        workers.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            while lat.len() < min_each || Instant::now() < deadline {
                let t = Instant::now();
                let mut c = Conn::new(opts.clone()).await.map_err(|e| e.to_string())?;
                c.query_drop("SELECT 1").await.map_err(|e| e.to_string())?;
                lat.push(t.elapsed().as_micros() as u64);
                // The goodbye is not part of the measured operation.
                let _ = c.disconnect().await;
            }
            Ok::<_, String>(lat)
        }));
    } else {
        for (w, mut conn) in pool.into_iter().enumerate() {
            let inserts = inserts.clone();
            let shape = job.shape;
            workers.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                while lat.len() < min_each || Instant::now() < deadline {
                    let t = Instant::now();
                    operation(&mut conn, shape, &inserts, w + lat.len() + 1)
                        .await
                        .map_err(|e| e.to_string())?;
                    lat.push(t.elapsed().as_micros() as u64);
                }
                let _ = conn.disconnect().await;
                Ok::<_, String>(lat)
            }));
        }
    }
    for w in workers {
        match w.await {
            Ok(Ok(lat)) => out.latencies_us.extend(lat),
            Ok(Err(e)) => out.error = Some(e),
            Err(e) => out.error = Some(format!("worker: {e}")),
        }
    }
    out.wall_us = start.elapsed().as_micros() as u64;
    out
}

/// Entry point of `table driver JOB-JSON`.
pub fn main(job_json: &str) {
    let job: Job = serde_json::from_str(job_json).expect("driver: bad job JSON");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let out = rt.block_on(run(job));
    println!("{}", serde_json::to_string(&out).unwrap());
}
