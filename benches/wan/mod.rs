//! A userspace WAN between two network namespaces, for benchmarks on a
//! kernel without `netem`.
//!
//! ```text
//!  client ns                                        server ns
//!  198.18.0.1 wan0 ──► reader ─ loss/rate/queue ─► writer ──► wan0 198.18.0.2
//!                 ◄── writer ◄─ loss/rate/queue ─ reader ◄──
//! ```
//!
//! Each side's `wan0` is a TUN device whose file stays in this process:
//! what the client's kernel sends out of `wan0` is read here, delayed,
//! rate-limited and perhaps dropped ([`link`]), and written into the
//! server's `wan0`, where its kernel receives it — and the same the other
//! way. TCP and UDP go through the same model, at the packet level.
//!
//! The devices are created in the caller's namespace and then moved, since
//! a TUN file stays attached to its device wherever the device goes. The
//! addresses come from 198.18.0.0/15 (RFC 2544, reserved for benchmarks)
//! and exist only inside the two namespaces.
//!
//! Everything is bounded in time: after `time_limit` the link threads stop
//! and the namespaces are deleted by this process; and should the process
//! die without unwinding (SIGKILL), a detached watchdog deletes them a few
//! seconds later, and the next [`Wan::start`] with the same prefix sweeps
//! any that are still there.
//!
//! Usage (as root): `ip netns exec <server_ns> mariadbd …`,
//! `ip netns exec <client_ns> myquic sidecar --upstream https://198.18.0.2:…`.

// Shared by the benchmark and by `tests/wan.rs`, each of which uses only
// part of it.
#![allow(dead_code)]

mod link;
mod ns;
pub mod quic;
mod tun;

use std::fs::File;
use std::io::{self, Read, Write};
use std::net::Ipv4Addr;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use ns::run_in;

use link::{Direction, Verdict};

/// The link's shape, the same in both directions.
#[derive(Clone, Debug)]
pub struct LinkParams {
    /// Propagation delay each way: the RTT is twice this (plus queueing).
    pub one_way_delay: Duration,
    /// Probability that a packet is lost, per direction (0.01 = 1 %),
    /// independently for each packet.
    pub loss: f64,
    /// Bottleneck rate each way; 0 = unlimited.
    pub rate_bits_per_sec: u64,
    /// Drop-tail limit on the bytes waiting for the link, each way; 0 = no
    /// limit. Unused when the rate is unlimited (nothing ever waits).
    pub queue_bytes: usize,
    /// Seeds the loss draws: the same seed and packet sequence lose the
    /// same packets.
    pub seed: u64,
    /// 0: both ends' devices have the usual MTU, 1,500, so a sender's
    /// kernel refuses a larger datagram itself (`EMSGSIZE`). Else both
    /// devices take jumbo frames ([`JUMBO_MTU`]) and the link silently
    /// drops IP packets over this size: a router with a smaller MTU that
    /// sends no ICMP, the case path-MTU discovery must survive.
    pub path_mtu: usize,
}

/// The devices' MTU when [`LinkParams::path_mtu`] is set (AWS's VPC MTU).
pub const JUMBO_MTU: usize = 9001;

/// Totals since the start or the last [`Wan::reset_counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// IP bytes (headers included) delivered client → server.
    pub to_server_bytes: u64,
    /// IP bytes delivered server → client.
    pub to_client_bytes: u64,
    pub to_server_packets: u64,
    pub to_client_packets: u64,
    /// Packets lost on the wire, both directions.
    pub lost: u64,
    /// Packets refused by a full queue, both directions.
    pub queue_drops: u64,
    /// IP bytes the client side put on the link, delivered or not: what a
    /// sender pays for, retransmissions and dropped packets included.
    pub to_server_offered_bytes: u64,
    /// The same from the server side.
    pub to_client_offered_bytes: u64,
    /// Packets over [`LinkParams::path_mtu`] the link dropped, both
    /// directions (counted in the offered bytes too).
    pub mtu_drops: u64,
}

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const SERVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The interface's name inside each namespace.
const IFACE: &str = "wan0";
/// Slack after the time limit before the out-of-process watchdog acts: the
/// in-process cleanup normally gets there first.
const WATCHDOG_GRACE: Duration = Duration::from_secs(5);

static INSTANCE: AtomicU32 = AtomicU32::new(0);

pub struct Wan {
    client_ns: String,
    server_ns: String,
    params: LinkParams,
    counters: Arc<Counters>,
    /// Dropped by Drop to wake the supervisor before the time limit.
    stop_tx: Option<mpsc::Sender<()>>,
    supervisor: Option<JoinHandle<()>>,
    watchdog: Option<Child>,
}

impl Wan {
    /// Creates two fresh network namespaces (`<prefix>-<pid>-<n>-c` and
    /// `-s`) joined by the emulated link, with loopback up in both. Needs
    /// root, `/dev/net/tun` and iproute2.
    pub fn start(prefix: &str, params: LinkParams, time_limit: Duration) -> io::Result<Wan> {
        if prefix.is_empty() || prefix.contains(['/', ' ']) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("bad namespace prefix {prefix:?}"),
            ));
        }
        ns::sweep_stale(prefix);
        let pid = std::process::id();
        let n = INSTANCE.fetch_add(1, Ordering::Relaxed);
        let client_ns = format!("{prefix}-{pid}-{n}-c");
        let server_ns = format!("{prefix}-{pid}-{n}-s");
        let mut setup = Setup {
            names: Vec::new(),
            done: false,
        };
        let mut files = Vec::new();
        for (name, side, local, peer) in [
            (&client_ns, 'c', CLIENT_IP, SERVER_IP),
            (&server_ns, 's', SERVER_IP, CLIENT_IP),
        ] {
            // Our pid and counter make the name unique among live
            // processes; one that exists anyway was left by a crashed
            // process that had our pid.
            if ns::list().contains(name) {
                ns::remove(name);
            }
            ns::ip(&["netns", "add", name])?;
            setup.names.push(name.clone());
            files.push(attach_tun(
                name,
                &format!("mqw{pid}-{}{side}", n % 1000),
                local,
                peer,
                params.path_mtu > 0,
            )?);
        }
        let server_tun = Arc::new(files.pop().expect("two devices"));
        let client_tun = Arc::new(files.pop().expect("two devices"));

        let watchdog = spawn_watchdog(&[&client_ns, &server_ns], time_limit + WATCHDOG_GRACE)?;
        setup.done = true;

        let counters = Arc::new(Counters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + time_limit;
        let mut threads = Vec::new();
        for (from, to, to_server, salt) in [
            (&client_tun, &server_tun, true, 0),
            (&server_tun, &client_tun, false, 0x5EED_0F5E_7FE7),
        ] {
            let direction = Direction::new(
                params.one_way_delay,
                params.loss,
                params.rate_bits_per_sec,
                params.queue_bytes,
                params.seed ^ salt,
            );
            threads.extend(spawn_direction(
                Arc::clone(from),
                Arc::clone(to),
                direction,
                params.path_mtu,
                to_server,
                Arc::clone(&counters),
                Arc::clone(&stop),
            ));
        }
        drop((client_tun, server_tun));

        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let names = [client_ns.clone(), server_ns.clone()];
        let supervisor = std::thread::Builder::new()
            .name("wan-supervisor".into())
            .spawn(move || {
                // Returns on the time limit, or at once when Drop drops the
                // sender.
                let _ = stop_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
                stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                for name in &names {
                    ns::remove(name);
                }
            })?;

        Ok(Wan {
            client_ns,
            server_ns,
            params,
            counters,
            stop_tx: Some(stop_tx),
            supervisor: Some(supervisor),
            watchdog: Some(watchdog),
        })
    }

    /// Where the app and the sidecar run: `ip netns exec <client_ns> …`.
    pub fn client_ns(&self) -> &str {
        &self.client_ns
    }

    /// Where MariaDB and the gateway run.
    pub fn server_ns(&self) -> &str {
        &self.server_ns
    }

    pub fn client_ip(&self) -> Ipv4Addr {
        CLIENT_IP
    }

    /// The address the client side uses to reach servers.
    pub fn server_ip(&self) -> Ipv4Addr {
        SERVER_IP
    }

    pub fn counters(&self) -> LinkCounters {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LinkCounters {
            to_server_bytes: get(&c.to_server_bytes),
            to_client_bytes: get(&c.to_client_bytes),
            to_server_packets: get(&c.to_server_packets),
            to_client_packets: get(&c.to_client_packets),
            lost: get(&c.lost),
            queue_drops: get(&c.queue_drops),
            to_server_offered_bytes: get(&c.to_server_offered_bytes),
            to_client_offered_bytes: get(&c.to_client_offered_bytes),
            mtu_drops: get(&c.mtu_drops),
        }
    }

    pub fn reset_counters(&self) {
        let c = &self.counters;
        for a in [
            &c.to_server_bytes,
            &c.to_client_bytes,
            &c.to_server_packets,
            &c.to_client_packets,
            &c.lost,
            &c.queue_drops,
            &c.to_server_offered_bytes,
            &c.to_client_offered_bytes,
            &c.mtu_drops,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    pub fn params(&self) -> &LinkParams {
        &self.params
    }
}

impl Drop for Wan {
    /// Stops the link threads, kills what still runs in the namespaces,
    /// deletes them, and retires the watchdog.
    fn drop(&mut self) {
        drop(self.stop_tx.take());
        if let Some(s) = self.supervisor.take() {
            let _ = s.join();
        }
        if let Some(mut w) = self.watchdog.take() {
            // Its own process group (see spawn_watchdog): this ends the
            // shell and its sleep, and nothing else.
            // SAFETY: plain syscall on a process group we created.
            unsafe { libc::kill(-(w.id() as libc::pid_t), libc::SIGKILL) };
            let _ = w.wait();
        }
    }
}

#[derive(Default)]
struct Counters {
    to_server_bytes: AtomicU64,
    to_client_bytes: AtomicU64,
    to_server_packets: AtomicU64,
    to_client_packets: AtomicU64,
    lost: AtomicU64,
    queue_drops: AtomicU64,
    to_server_offered_bytes: AtomicU64,
    to_client_offered_bytes: AtomicU64,
    mtu_drops: AtomicU64,
}

/// Deletes the namespaces created so far if [`Wan::start`] fails midway.
struct Setup {
    names: Vec<String>,
    done: bool,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if !self.done {
            for name in &self.names {
                ns::remove(name);
            }
        }
    }
}

/// Creates a TUN device under a temporary name that is unique in the
/// caller's namespace, moves it into `ns`, and configures it there as the
/// point-to-point `wan0`.
fn attach_tun(
    ns: &str,
    temp_name: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    jumbo: bool,
) -> io::Result<File> {
    let file = tun::create(temp_name)?;
    ns::ip(&["link", "set", "dev", temp_name, "netns", ns])?;
    ns::ip(&["-n", ns, "link", "set", "dev", temp_name, "name", IFACE])?;
    // Without IPv6 the kernel sends nothing on its own (no router or
    // neighbour solicitations), so the counters show only the traffic the
    // benchmark makes.
    ns::run_in(ns, || {
        std::fs::write(format!("/proc/sys/net/ipv6/conf/{IFACE}/disable_ipv6"), "1")
    })??;
    let (local, peer) = (local.to_string(), format!("{peer}/32"));
    ns::ip(&["-n", ns, "addr", "add", &local, "peer", &peer, "dev", IFACE])?;
    // A long device queue: the emulator's queue, not the kernel's, should
    // be the one that drops.
    ns::ip(&[
        "-n",
        ns,
        "link",
        "set",
        "dev",
        IFACE,
        "txqueuelen",
        "10000",
        "up",
    ])?;
    if jumbo {
        let mtu = JUMBO_MTU.to_string();
        ns::ip(&["-n", ns, "link", "set", "dev", IFACE, "mtu", &mtu])?;
    }
    ns::ip(&["-n", ns, "link", "set", "dev", "lo", "up"])?;
    Ok(file)
}

/// A shell in its own process group that, if still alive after `after`,
/// deletes the namespaces (killing what runs in them). It outlives this
/// process if that dies without unwinding; Drop kills it otherwise.
fn spawn_watchdog(names: &[&str], after: Duration) -> io::Result<Child> {
    let script = "sleep \"$1\"; shift
        for ns in \"$@\"; do
            for p in $(ip netns pids \"$ns\" 2>/dev/null); do kill -KILL \"$p\" 2>/dev/null; done
            ip netns delete \"$ns\" 2>/dev/null
        done";
    Command::new("sh")
        .args(["-c", script, "wan-watchdog"])
        .arg(after.as_secs().max(1).to_string())
        .args(names)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
}

type Packet = (Instant, Vec<u8>);

/// The reader and writer threads of one direction. The reader judges each
/// packet as it leaves the sending kernel; the writer holds it until its
/// delivery time. Delivery times never decrease (one FIFO link, one fixed
/// delay), so the writer only ever waits for the packet at the head.
fn spawn_direction(
    from: Arc<File>,
    to: Arc<File>,
    mut direction: Direction,
    path_mtu: usize,
    to_server: bool,
    counters: Arc<Counters>,
    stop: Arc<AtomicBool>,
) -> [JoinHandle<()>; 2] {
    let (tx, rx) = mpsc::channel::<Packet>();
    let name = if to_server { "to-server" } else { "to-client" };
    let reader_stop = Arc::clone(&stop);
    let reader_counters = Arc::clone(&counters);
    let reader = std::thread::Builder::new()
        .name(format!("wan-{name}-in"))
        .spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !reader_stop.load(Ordering::Relaxed) {
                match tun::readable(&from, 50) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => break,
                }
                let n = match (&*from).read(&mut buf) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let offered = if to_server {
                    &reader_counters.to_server_offered_bytes
                } else {
                    &reader_counters.to_client_offered_bytes
                };
                offered.fetch_add(n as u64, Ordering::Relaxed);
                if path_mtu > 0 && n > path_mtu {
                    reader_counters.mtu_drops.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                match direction.admit(Instant::now(), n) {
                    Verdict::Deliver(at) => {
                        if tx.send((at, buf[..n].to_vec())).is_err() {
                            break;
                        }
                    }
                    Verdict::Lost => {
                        reader_counters.lost.fetch_add(1, Ordering::Relaxed);
                    }
                    Verdict::QueueFull => {
                        reader_counters.queue_drops.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
        .expect("spawning a link thread");
    let writer = std::thread::Builder::new()
        .name(format!("wan-{name}-out"))
        .spawn(move || {
            let (bytes, packets) = if to_server {
                (&counters.to_server_bytes, &counters.to_server_packets)
            } else {
                (&counters.to_client_bytes, &counters.to_client_packets)
            };
            let tick = Duration::from_millis(50);
            while !stop.load(Ordering::Relaxed) {
                let (at, packet) = match rx.recv_timeout(tick) {
                    Ok(p) => p,
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                // Sleep in short slices so a stop is noticed promptly even
                // behind a long delay.
                loop {
                    let now = Instant::now();
                    if now >= at || stop.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::sleep((at - now).min(tick));
                }
                // Counted before the write, so a reader woken by the
                // packet already sees it counted. A write fails only if the
                // receiving device is going away (or is down); the packet
                // is then lost like on a cut cable, and uncounted.
                let len = packet.len() as u64;
                bytes.fetch_add(len, Ordering::Relaxed);
                packets.fetch_add(1, Ordering::Relaxed);
                if (&*to).write(&packet).is_err() {
                    bytes.fetch_sub(len, Ordering::Relaxed);
                    packets.fetch_sub(1, Ordering::Relaxed);
                }
            }
        })
        .expect("spawning a link thread");
    [reader, writer]
}
