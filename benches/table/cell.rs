//! One cell of the table: one client × one shape on one network. The
//! driver subprocess generates the load on the client side; around its
//! timed phase the harness reads the wire counters, the CPU time of the
//! sidecar and gateway, and (for the large SELECT) their peak RSS.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use super::driver::{Job, Outcome, Shape};
use super::net::Net;
use super::perf;
use super::procs::{self, RssPeak};
use super::stack::Client;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Cell {
    pub net: String,
    pub client: String,
    pub shape: String,
    pub concurrency: usize,
    pub ops: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub ops_per_sec: f64,
    pub payload_bytes: u64,
    pub to_server_bytes: u64,
    pub to_client_bytes: u64,
    pub lost_packets: u64,
    pub queue_dropped_packets: u64,
    /// CPU time per operation, microseconds.
    pub sidecar_cpu_us: Option<f64>,
    pub gateway_cpu_us: Option<f64>,
    /// MariaDB's CPU time per operation (whoever its client was).
    pub mariadb_cpu_us: Option<f64>,
    /// Each watched process's use per operation: where the time goes.
    pub usage: Vec<RoleUsage>,
    /// Peak RSS growth during the timed phase, bytes.
    pub sidecar_rss_growth: Option<u64>,
    pub gateway_rss_growth: Option<u64>,
    pub tls: Option<String>,
    pub error: Option<String>,
}

/// One process's resources per operation of a cell.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RoleUsage {
    /// "sidecar", "gateway" or "mariadb".
    pub role: String,
    pub user_us: f64,
    pub system_us: f64,
    pub context_switches: f64,
}

impl RoleUsage {
    pub fn cpu_us(&self) -> f64 {
        self.user_us + self.system_us
    }
}

impl Cell {
    pub fn usage_of(&self, role: &str) -> Option<&RoleUsage> {
        self.usage.iter().find(|u| u.role == role)
    }

    pub fn ok(&self) -> bool {
        self.error.is_none() && self.ops > 0
    }
    pub fn mb_per_sec(&self) -> f64 {
        self.payload_bytes as f64 * self.ops_per_sec / 1e6
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

pub struct Measure<'a> {
    pub net: &'a Net,
    pub gateway_pid: u32,
    pub mariadb_pid: u32,
    pub budget: Duration,
    pub min_ops: usize,
}

impl Measure<'_> {
    pub fn run(&self, client: &Client, shape: Shape, concurrency: usize) -> Cell {
        let mut cell = Cell {
            net: self.net.id.clone(),
            client: client.name.clone(),
            shape: shape.label().into(),
            concurrency,
            ..Default::default()
        };
        let job = Job {
            target: client.target.clone(),
            shape,
            concurrency,
            budget_ms: self.budget.as_millis() as u64,
            min_ops: self.min_ops,
        };
        eprintln!("  {:<22} {:<12} ×{concurrency}", shape.label(), client.name);
        match self.drive(client, &job, &mut cell) {
            Ok(out) => {
                let mut lat = out.latencies_us;
                lat.sort_unstable();
                cell.ops = lat.len();
                cell.min_ms = percentile(&lat, 0.0);
                cell.p50_ms = percentile(&lat, 0.5);
                cell.p99_ms = percentile(&lat, 0.99);
                cell.max_ms = percentile(&lat, 1.0);
                cell.ops_per_sec = lat.len() as f64 / (out.wall_us.max(1) as f64 / 1e6);
                cell.payload_bytes = out.payload_bytes;
                cell.tls = out.tls;
                cell.error = out.error;
            }
            Err(e) => cell.error = Some(format!("{e:#}")),
        }
        if let Some(e) = &cell.error {
            eprintln!("    error: {e}");
        } else {
            eprintln!(
                "    p50 {:.2} ms  p99 {:.2} ms  {:.1} ops/s  ({} ops)",
                cell.p50_ms, cell.p99_ms, cell.ops_per_sec, cell.ops
            );
        }
        cell
    }

    fn drive(&self, client: &Client, job: &Job, cell: &mut Cell) -> anyhow::Result<Outcome> {
        let exe = std::env::current_exe()?;
        let mut child = procs::command(Some(self.net.client_ns()), exe.to_str().unwrap())
            .arg("driver")
            .arg(serde_json::to_string(job)?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        // A watchdog: no cell may hang the run.
        let pid = child.id();
        let limit = self.budget * 4 + Duration::from_secs(120);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if done_rx.recv_timeout(limit).is_err() {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        });
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        if line.trim() != "ready" {
            anyhow::bail!("driver did not get ready: {line:?}");
        }
        // The gateway, MariaDB, then the sidecar (an extra client's process
        // is a shell whose children /proc/PID does not count, so not it).
        let sidecar_pid = client
            .proc
            .as_ref()
            .filter(|_| client.is_sidecar())
            .map(|p| p.pid());
        let mut watched = vec![("mariadb", self.mariadb_pid)];
        if client.proc.is_some() {
            watched.push(("gateway", self.gateway_pid));
        }
        if let Some(pid) = sidecar_pid {
            watched.push(("sidecar", pid));
        }
        let pids: Vec<u32> = watched.iter().map(|w| w.1).collect();
        let wire0 = self.net.wire();
        let use0: Vec<procs::Usage> = pids.iter().map(|&p| procs::usage(p)).collect();
        let rss0: Vec<u64> = pids.iter().map(|&p| procs::rss(p)).collect();
        let peak = RssPeak::start(&pids);
        let cell_name = format!(
            "{}-{}-x{}-{}",
            self.net.id,
            job.shape.label(),
            job.concurrency,
            client.name
        );
        let perf: Vec<_> = watched
            .iter()
            .filter(|(role, _)| *role != "mariadb")
            .filter_map(|&(role, pid)| perf::watch(pid, &cell_name, role))
            .collect();
        writeln!(stdin, "go")?;
        line.clear();
        stdout.read_line(&mut line)?;
        let peaks = peak.finish();
        let use1: Vec<procs::Usage> = pids.iter().map(|&p| procs::usage(p)).collect();
        let wire = self.net.wire() - wire0;
        let _ = done_tx.send(());
        let _ = child.wait();
        let _ = watchdog.join();
        let out: Outcome = serde_json::from_str(line.trim())
            .map_err(|e| anyhow::anyhow!("driver output {line:?}: {e}"))?;
        for watch in perf {
            watch.finish(out.latencies_us.len());
        }
        let ops = out.latencies_us.len().max(1) as f64;
        cell.to_server_bytes = wire.to_server;
        cell.to_client_bytes = wire.to_client;
        cell.lost_packets = wire.lost;
        cell.queue_dropped_packets = wire.queue_drops;
        for (i, (role, _)) in watched.iter().enumerate() {
            let used = use1[i] - use0[i];
            let usage = RoleUsage {
                role: role.to_string(),
                user_us: used.user.as_micros() as f64 / ops,
                system_us: used.system.as_micros() as f64 / ops,
                context_switches: used.switches as f64 / ops,
            };
            let growth = Some(peaks[i].saturating_sub(rss0[i]));
            match *role {
                "sidecar" => {
                    cell.sidecar_cpu_us = Some(usage.cpu_us());
                    cell.sidecar_rss_growth = growth;
                }
                "gateway" => {
                    cell.gateway_cpu_us = Some(usage.cpu_us());
                    cell.gateway_rss_growth = growth;
                }
                _ => cell.mariadb_cpu_us = Some(usage.cpu_us()),
            }
            cell.usage.push(usage);
        }
        Ok(out)
    }
}
