//! The networks a table is measured on, each with a client side (load
//! generator + sidecar) and a server side (MariaDB + gateway), and a
//! count of the bytes that crossed between them in each direction.
//!
//! - Loopback: one private namespace (so ports are fixed and nobody
//!   else's traffic is counted). Both sides share its `lo`; nftables
//!   counts, at the output hook, packets to and from the server ports
//!   (MariaDB 3306/tcp, gateway 8443/tcp+udp) — IP bytes, as the
//!   emulator counts them. Client ↔ sidecar traffic uses other ports and
//!   is not counted, as it would not cross a real network either.
//! - WAN: the link emulator's two namespaces and its own counters.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use super::mariadb;
use super::wan;

pub const GATEWAY_PORT: u16 = 8443;

#[derive(Clone, Copy, Debug, Default)]
pub struct Wire {
    pub to_server: u64,
    pub to_client: u64,
    /// Packets the emulator dropped at random (the loss rate) …
    pub lost: u64,
    /// … and because its drop-tail queue was full (sent above the rate).
    pub queue_drops: u64,
}

impl std::ops::Sub for Wire {
    type Output = Wire;
    fn sub(self, o: Wire) -> Wire {
        Wire {
            to_server: self.to_server.saturating_sub(o.to_server),
            to_client: self.to_client.saturating_sub(o.to_client),
            lost: self.lost.saturating_sub(o.lost),
            queue_drops: self.queue_drops.saturating_sub(o.queue_drops),
        }
    }
}

struct LoopbackNs {
    name: String,
}

impl Drop for LoopbackNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

pub struct Net {
    /// Short id used in file names: `loopback`, `wan-1pct`, `wan-0pct`.
    pub id: String,
    /// What the report calls it.
    pub label: String,
    /// One-way delay on the path, for round-trip targets.
    pub rtt: Duration,
    lo: Option<LoopbackNs>,
    wan: Option<wan::Wan>,
}

fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Net {
    pub fn loopback() -> anyhow::Result<Net> {
        let name = format!("myqb-lo-{}", std::process::id());
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let lo = LoopbackNs { name };
        run(Command::new("ip").args(["-n", &lo.name, "link", "set", "lo", "up"]))?;
        let p = GATEWAY_PORT;
        let m = mariadb::PORT;
        let rules = format!(
            "table inet bench {{
  counter up {{}}
  counter down {{}}
  chain out {{
    type filter hook output priority 0; policy accept;
    tcp dport {{ {m}, {p} }} counter name \"up\"
    udp dport {p} counter name \"up\"
    tcp sport {{ {m}, {p} }} counter name \"down\"
    udp sport {p} counter name \"down\"
  }}
}}
"
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", &lo.name, "nft", "-f", "-"])
            .stdin(Stdio::piped())
            .spawn()
            .context("nft (apt-get install nftables)")?;
        child.stdin.take().unwrap().write_all(rules.as_bytes())?;
        if !child.wait()?.success() {
            bail!("nft rules for the loopback namespace failed");
        }
        Ok(Net {
            id: "loopback".into(),
            label: "Loopback".into(),
            rtt: Duration::ZERO,
            lo: Some(lo),
            wan: None,
        })
    }

    pub fn wan(loss: f64, path_mtu: usize, time_limit: Duration) -> anyhow::Result<Net> {
        let params = wan::LinkParams {
            one_way_delay: Duration::from_millis(25),
            loss,
            rate_bits_per_sec: 50_000_000,
            // About one bandwidth-delay product (50 Mbit/s × 50 ms ≈ 312 KB)
            // plus headroom: a router-like buffer, not a bufferbloat one.
            queue_bytes: 512 * 1024,
            seed: 4,
            path_mtu,
        };
        let w = wan::Wan::start("myqb", params, time_limit)?;
        let pct = (loss * 100.0).round() as u32;
        Ok(Net {
            id: format!("wan-{pct}pct"),
            label: format!("WAN 25 ms one-way, {pct} % loss, 50 Mbit/s"),
            rtt: Duration::from_millis(50),
            lo: None,
            wan: Some(w),
        })
    }

    pub fn is_wan(&self) -> bool {
        self.wan.is_some()
    }

    /// Packets the WAN dropped for being over its path MTU, since it started.
    pub fn mtu_drops(&self) -> u64 {
        self.wan.as_ref().map_or(0, |w| w.counters().mtu_drops)
    }

    pub fn link_description(&self) -> String {
        match &self.wan {
            Some(w) => {
                let p = w.params();
                format!(
                    "userspace TUN link emulator (benches/wan): {} ms one-way delay, {:.1} % loss per direction, {} Mbit/s, {} KiB drop-tail queue per direction, seed {}",
                    p.one_way_delay.as_millis(),
                    p.loss * 100.0,
                    p.rate_bits_per_sec / 1_000_000,
                    p.queue_bytes / 1024,
                    p.seed
                ) + &if p.path_mtu > 0 {
                    format!(
                        ", {}-byte devices and IP packets over {} bytes dropped silently (a path-MTU black hole)",
                        wan::JUMBO_MTU,
                        p.path_mtu
                    )
                } else {
                    String::new()
                }
            }
            None => "one private network namespace, everything over its `lo` (MTU 65536)".into(),
        }
    }

    pub fn client_ns(&self) -> &str {
        match (&self.lo, &self.wan) {
            (Some(lo), _) => &lo.name,
            (_, Some(w)) => w.client_ns(),
            _ => unreachable!(),
        }
    }

    pub fn server_ns(&self) -> &str {
        match (&self.lo, &self.wan) {
            (Some(lo), _) => &lo.name,
            (_, Some(w)) => w.server_ns(),
            _ => unreachable!(),
        }
    }

    /// Where the client side reaches the server side.
    pub fn server_ip(&self) -> String {
        match &self.wan {
            Some(w) => w.server_ip().to_string(),
            None => "127.0.0.1".into(),
        }
    }

    pub fn wire(&self) -> Wire {
        match (&self.lo, &self.wan) {
            (_, Some(w)) => {
                let c = w.counters();
                Wire {
                    to_server: c.to_server_bytes,
                    to_client: c.to_client_bytes,
                    lost: c.lost,
                    queue_drops: c.queue_drops,
                }
            }
            (Some(lo), _) => nft_counters(&lo.name).unwrap_or_default(),
            _ => Wire::default(),
        }
    }

    /// TCP congestion controller a socket gets by default in `ns`.
    pub fn default_tcp_cc(ns: &str) -> String {
        run(Command::new("ip").args([
            "netns",
            "exec",
            ns,
            "cat",
            "/proc/sys/net/ipv4/tcp_congestion_control",
        ]))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|e| format!("unknown ({e})"))
    }
}

fn nft_counters(ns: &str) -> anyhow::Result<Wire> {
    let out = run(Command::new("ip").args([
        "netns", "exec", ns, "nft", "-j", "list", "counters", "table", "inet", "bench",
    ]))?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let mut wire = Wire::default();
    for item in v["nftables"].as_array().into_iter().flatten() {
        let c = &item["counter"];
        let bytes = c["bytes"].as_u64().unwrap_or(0);
        match c["name"].as_str() {
            Some("up") => wire.to_server = bytes,
            Some("down") => wire.to_client = bytes,
            _ => {}
        }
    }
    Ok(wire)
}
