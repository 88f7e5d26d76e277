//! The whole table: for each network, bring up MariaDB + gateway on the
//! server side and the sidecars (+ extra clients) on the client side, then
//! measure every shape with every client, one cell at a time.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use super::cell::{Cell, Measure};
use super::certs;
use super::driver::Shape;
use super::mariadb::MariaDb;
use super::net::Net;
use super::procs;
use super::stack::{Client, Gateway};

pub struct Settings {
    pub smoke: bool,
    pub wan: bool,
    pub budget: Duration,
    pub min_ops: usize,
    pub extras: Vec<(String, String)>,
    /// Only these shapes (all when empty).
    pub shapes: Vec<Shape>,
    /// Pool sizes of the connection sweep (loopback), besides the table's 32.
    pub sweep: Vec<usize>,
    /// Measure the sidecars' memory with 1,000 idle clients (loopback).
    pub idle: bool,
}

/// The pool size of the table's own parallel cell.
pub const PARALLEL: usize = 32;

#[derive(Debug, Default, Serialize)]
pub struct Idle {
    pub client: String,
    pub connections: usize,
    pub rss_before: u64,
    pub rss_after: u64,
    pub error: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct NetResult {
    pub id: String,
    pub label: String,
    pub link: String,
    pub rtt_ms: f64,
    pub cells: Vec<Cell>,
    /// Parallel SELECT 1 at the sweep's other pool sizes (loopback).
    pub scaling: Vec<Cell>,
    pub idle: Vec<Idle>,
    /// What each sidecar said its transport was at the end.
    pub transports: Vec<(String, String)>,
    pub tcp_cc_client: String,
    pub tcp_cc_server: String,
    pub clients: Vec<String>,
}

pub const IDLE_CONNECTIONS: usize = 1000;

pub fn run_network(
    rt: &tokio::runtime::Runtime,
    net: &Net,
    settings: &Settings,
    scratch: &std::path::Path,
) -> anyhow::Result<NetResult> {
    let dir = scratch.join(&net.id);
    std::fs::create_dir_all(&dir)?;
    let certs = certs::generate(&dir, &[net.server_ip()])?;
    eprintln!("[{}] starting MariaDB, loading data", net.id);
    let bind = net.server_ip();
    let db = rt
        .block_on(MariaDb::start(Some(net.server_ns()), &bind, &dir, &certs))
        .context("MariaDB")?;
    let gateway = Gateway::start(net, &db, &certs, &dir).context("gateway")?;
    let mut clients = vec![Client::direct(net, &certs)];
    clients
        .push(Client::sidecar(net, &gateway, &certs, "http2", 3307, &dir).context("sidecar h2")?);
    clients
        .push(Client::sidecar(net, &gateway, &certs, "http3", 3308, &dir).context("sidecar h3")?);
    for (i, (name, cmd)) in settings.extras.iter().enumerate() {
        match Client::extra(net, &gateway, &certs, name, cmd, 3320 + i as u16, &dir) {
            Ok(c) => clients.push(c),
            Err(e) => eprintln!("[{}] extra client {name} skipped: {e:#}", net.id),
        }
    }
    let mut result = NetResult {
        id: net.id.clone(),
        label: net.label.clone(),
        link: net.link_description(),
        rtt_ms: net.rtt.as_secs_f64() * 1000.0,
        tcp_cc_client: Net::default_tcp_cc(net.client_ns()),
        tcp_cc_server: Net::default_tcp_cc(net.server_ns()),
        clients: clients.iter().map(|c| c.name.clone()).collect(),
        ..Default::default()
    };
    let measure = Measure {
        net,
        gateway_pid: gateway.proc.pid(),
        mariadb_pid: db.pid(),
        budget: settings.budget,
        min_ops: settings.min_ops,
    };
    let shapes = Shape::ALL
        .into_iter()
        .filter(|s| settings.shapes.is_empty() || settings.shapes.contains(s));
    for shape in shapes {
        eprintln!("[{}] {}", net.id, shape.label());
        for client in &clients {
            if matches!(shape, Shape::MediumInsert | Shape::LargeInsert) {
                rt.block_on(db.truncate_inserts())?;
            }
            let conc = if shape == Shape::ParallelSelect1 {
                PARALLEL
            } else {
                1
            };
            result.cells.push(measure.run(client, shape, conc));
        }
    }
    if !net.is_wan() {
        // Short cells: the sweep is about CPU per query, which settles
        // within a second or two of load, not about tail latency.
        let short = Measure {
            budget: (settings.budget / 4).max(Duration::from_secs(1)),
            ..measure
        };
        for &conc in settings.sweep.iter().filter(|&&c| c != PARALLEL) {
            eprintln!("[{}] parallel SELECT 1 at {conc} connections", net.id);
            for client in &clients {
                result
                    .scaling
                    .push(short.run(client, Shape::ParallelSelect1, conc));
            }
        }
        for client in clients.iter().filter(|c| c.is_sidecar() && settings.idle) {
            eprintln!(
                "[{}] {IDLE_CONNECTIONS} idle connections to {}",
                net.id, client.name
            );
            result.idle.push(rt.block_on(idle(client)));
        }
    }
    for client in clients.iter().filter(|c| c.is_sidecar()) {
        let status = client.status().unwrap_or_default();
        result.transports.push((client.name.clone(), status));
    }
    drop(clients);
    drop(gateway);
    drop(db);
    Ok(result)
}

/// Opens 1,000 connections to the sidecar (on its unix socket, which no
/// namespace hides), each logged in and having run one query, and reads
/// its RSS before and once they sit idle.
async fn idle(client: &Client) -> Idle {
    let pid = client.proc.as_ref().unwrap().pid();
    let opts = client.opts_on_socket().unwrap();
    let mut idle = Idle {
        client: client.name.clone(),
        rss_before: procs::rss(pid),
        ..Default::default()
    };
    let mut conns = Vec::new();
    use futures_util::StreamExt;
    use mysql_async::prelude::Queryable;
    let opened: Vec<_> = futures_util::stream::iter(0..IDLE_CONNECTIONS)
        .map(|_| {
            let opts = opts.clone();
            async move {
                let mut c = mysql_async::Conn::new(opts).await?;
                c.query_drop("SELECT 1").await?;
                Ok::<_, mysql_async::Error>(c)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for c in opened {
        match c {
            Ok(c) => conns.push(c),
            Err(e) => idle.error = Some(e.to_string()),
        }
    }
    idle.connections = conns.len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    idle.rss_after = procs::rss(pid);
    for c in conns {
        let _ = c.disconnect().await;
    }
    idle
}

pub fn results_dir(out: Option<PathBuf>, date: &str, host: &str) -> PathBuf {
    out.unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("benches/results")
            .join(format!("{date}-{host}"))
    })
}
