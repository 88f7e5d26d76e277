//! A private network namespace per test, joined to the test process by a
//! veth pair, so a test can cut UDP between a child process (the sidecar)
//! and a server in the test process (the gateway) while TCP keeps working,
//! the way a firewall that drops QUIC does.
//!
//! Everything happens through `ip` (iproute2) and `nft` (nftables), both as
//! root: `ip netns exec` runs children inside, and the blocking rules live
//! *inside* the namespace, so parallel tests never touch each other's rules
//! nor the machine's own firewall. Unix socket paths are shared with the
//! namespace (`ip netns exec` only remounts `/sys`), so a test can also talk
//! to a child through a socket under the system temp dir.
//!
//! Each namespace gets its own `/30` from 10.213.0.0/16: host side `.1`,
//! namespace side `.2`. Both ends are local addresses on one link, so no
//! forwarding is involved and reverse-path filtering (strict or loose)
//! passes: each source is on the receiving interface's connected route.
//! The host side of the veth is named after the subnet (`mqh<index>`), so
//! creating it is what claims the subnet: two test processes that pick the
//! same one cannot both succeed.
//!
//! ```text
//! let ns = NetNs::create();
//! config.listen = SocketAddr::new(ns.host_addr().into(), 0); // gateway, in-process
//! let sidecar = ns.spawn(ns.command(env!("CARGO_BIN_EXE_myquic")).arg("sidecar") /* ... */);
//! ns.block_udp(Block::Drop);   // QUIC goes dark; HTTP/2 over TCP still works
//! ns.unblock_udp();
//! ```

use std::ffi::OsStr;
use std::io::Write;
use std::net::Ipv4Addr;
use std::ops::{Deref, DerefMut};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Every namespace this harness creates is named `myquic-<pid>-<counter>`.
const PREFIX: &str = "myquic-";
/// The nftables table holding the blocking rules, in whichever family the
/// mode needs (`netdev` or `inet`).
const TABLE: &str = "myquic_block";
/// 10.213.0.0/16 cut into /30s.
const BASE: u32 = u32::from_be_bytes([10, 213, 0, 0]);
const SUBNETS: u32 = 1 << 14;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// How [`NetNs::block_udp`] stops UDP between the namespace and the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// A black hole: datagrams vanish on the wire in both directions and
    /// the sender is told nothing (`sendmsg` succeeds). This is what a
    /// middlebox that silently drops QUIC looks like, and the hard case
    /// for a fallback, which can only notice by timing out.
    ///
    /// The rules sit on the namespace's veth (`netdev` family, `egress`
    /// and `ingress` hooks) rather than on the `inet` output hook, because
    /// a drop on the output hook fails the sender's `sendmsg` with `EPERM`
    /// at once — a local error no real network would give.
    Drop,
    /// Active refusal: datagrams to the host are answered with ICMP port
    /// unreachable (generated inside the namespace, `inet` output hook),
    /// datagrams from the host are dropped. Being a local rule, the
    /// sender's `sendmsg` also fails with `EPERM`; a connected UDP socket
    /// then sees `ECONNREFUSED`. (quinn ignores both and times out, as
    /// with [`Block::Drop`].)
    Reject,
}

/// A network namespace with a veth pair to the test process's namespace.
/// Dropping it kills every process inside and deletes the namespace and
/// the veth pair, on panic too.
pub struct NetNs {
    name: String,
    /// Empty until the veth pair exists.
    host_if: String,
    ns_if: String,
    host: Ipv4Addr,
    ns: Ipv4Addr,
    ip: PathBuf,
    nft: PathBuf,
}

impl NetNs {
    /// Creates the namespace, the veth pair with a free /30, and brings the
    /// links (and the namespace's loopback) up. Panics with the reason if
    /// not root or if `ip`/`nft` are missing.
    pub fn create() -> Self {
        let ip = tool("ip", "iproute2");
        let nft = tool("nft", "nftables");
        assert!(
            is_root(),
            "network namespace tests need root (CAP_NET_ADMIN, CAP_SYS_ADMIN): run them as root, as CI does"
        );
        sweep_stale(&ip);
        let pid = std::process::id();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{pid}-{n}");
        run(Command::new(&ip).args(["netns", "add", &name]));
        // From here on, Drop cleans up whatever exists if a step panics.
        let mut ns = Self {
            name,
            host_if: String::new(),
            ns_if: String::new(),
            host: Ipv4Addr::UNSPECIFIED,
            ns: Ipv4Addr::UNSPECIFIED,
            ip,
            nft,
        };
        let taken = host_prefixes(&ns.ip);
        let start = pid.wrapping_mul(61).wrapping_add(n) % SUBNETS;
        for k in 0..SUBNETS {
            let index = (start + k) % SUBNETS;
            let net = BASE + index * 4;
            if taken.iter().any(|&(a, len)| overlaps(net, 30, a, len)) {
                continue;
            }
            let (host_if, ns_if) = (format!("mqh{index}"), format!("mqn{index}"));
            // The peer is created directly inside the namespace, so its
            // name only has to be unique there.
            let out = Command::new(&ns.ip)
                .args(["link", "add", &host_if, "type", "veth", "peer", "name"])
                .args([&ns_if, "netns", &ns.name])
                .output()
                .expect("running ip");
            if out.status.success() {
                ns.host_if = host_if;
                ns.ns_if = ns_if;
                ns.host = Ipv4Addr::from(net + 1);
                ns.ns = Ipv4Addr::from(net + 2);
                break;
            }
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("File exists"),
                "ip link add {host_if} type veth: {err}"
            );
        }
        assert!(!ns.host_if.is_empty(), "no free /30 in 10.213.0.0/16");
        let (host, peer) = (format!("{}/30", ns.host), format!("{}/30", ns.ns));
        run(Command::new(&ns.ip).args(["addr", "add", &host, "dev", &ns.host_if]));
        run(Command::new(&ns.ip).args(["link", "set", &ns.host_if, "up"]));
        let inside = ["-n", ns.name.as_str()];
        run(Command::new(&ns.ip)
            .args(inside)
            .args(["addr", "add", &peer, "dev", &ns.ns_if]));
        run(Command::new(&ns.ip)
            .args(inside)
            .args(["link", "set", &ns.ns_if, "up"]));
        run(Command::new(&ns.ip)
            .args(inside)
            .args(["link", "set", "lo", "up"]));
        // The host side has carrier only once both ends are up; packets
        // sent before that would be lost.
        let operstate = format!("/sys/class/net/{}/operstate", ns.host_if);
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&operstate)
            .unwrap_or_default()
            .trim()
            != "up"
        {
            assert!(Instant::now() < deadline, "{} did not come up", ns.host_if);
            std::thread::sleep(Duration::from_millis(5));
        }
        ns
    }

    /// The namespace's name, for `ip netns exec` and `ip -n`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The test process's side of the veth: where a server in the test
    /// process (the gateway) listens to be reachable from the namespace.
    pub fn host_addr(&self) -> Ipv4Addr {
        self.host
    }

    /// The namespace's side of the veth.
    pub fn ns_addr(&self) -> Ipv4Addr {
        self.ns
    }

    /// The veth's interface name in the test process's namespace.
    pub fn host_if(&self) -> &str {
        &self.host_if
    }

    /// A command that runs `program` inside the namespace (through `ip
    /// netns exec`, which execs it: the child's pid is the program's).
    /// Add arguments, environment and stdio as usual; run it with
    /// [`NetNs::spawn`] to have it killed on drop, or with `output()` /
    /// `status()` for short commands.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(&self.ip);
        cmd.args(["netns", "exec", &self.name]).arg(program);
        cmd
    }

    /// Spawns a command made by [`NetNs::command`]; the child is killed
    /// when the returned guard is dropped (and at the latest when the
    /// namespace is).
    pub fn spawn(&self, cmd: &mut Command) -> NsChild {
        let args: Vec<&OsStr> = cmd.get_args().take(3).collect();
        assert!(
            cmd.get_program() == self.ip.as_os_str()
                && args
                    == [
                        OsStr::new("netns"),
                        OsStr::new("exec"),
                        OsStr::new(&self.name)
                    ],
            "NetNs::spawn takes a command made by NetNs::command"
        );
        let mut child = cmd.spawn().expect("spawning a process in the namespace");
        // `ip netns exec` joins the namespace only after the fork. Until
        // it has, the child is invisible to `ip netns pids`, and a NetNs
        // dropped in that window would let it escape into an orphaned
        // namespace; so return only once it is inside (or already gone).
        let want = format!(
            "net:[{}]",
            std::fs::metadata(format!("/run/netns/{}", self.name))
                .expect("the namespace's file")
                .ino()
        );
        let link = format!("/proc/{}/ns/net", child.id());
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_link(&link).is_ok_and(|l| l.as_os_str() != want.as_str())
            && child.try_wait().unwrap().is_none()
        {
            assert!(
                Instant::now() < deadline,
                "{cmd:?} did not enter the namespace"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        NsChild(child)
    }

    /// Stops UDP between the namespace and [`NetNs::host_addr`], both
    /// ways; TCP and the namespace's loopback are untouched. Replaces any
    /// earlier block, atomically (one nftables transaction), and cuts
    /// established flows at once (no connection tracking involved).
    pub fn block_udp(&self, mode: Block) {
        let (host, dev) = (self.host, &self.ns_if);
        let rules = match mode {
            Block::Drop => format!(
                "table netdev {TABLE} {{
                    chain egress {{
                        type filter hook egress device \"{dev}\" priority 0; policy accept;
                        ip daddr {host} meta l4proto udp drop
                    }}
                    chain ingress {{
                        type filter hook ingress device \"{dev}\" priority 0; policy accept;
                        ip saddr {host} meta l4proto udp drop
                    }}
                }}"
            ),
            Block::Reject => format!(
                "table inet {TABLE} {{
                    chain output {{
                        type filter hook output priority 0; policy accept;
                        ip daddr {host} meta l4proto udp reject with icmp type port-unreachable
                    }}
                    chain input {{
                        type filter hook input priority 0; policy accept;
                        ip saddr {host} meta l4proto udp drop
                    }}
                }}"
            ),
        };
        self.nft(&format!("{}{rules}\n", clear_rules()));
    }

    /// Lets UDP through again (deletes the table; a no-op if not blocked).
    pub fn unblock_udp(&self) {
        self.nft(&clear_rules());
    }

    /// Applies an nftables script inside the namespace, as one transaction.
    fn nft(&self, script: &str) {
        let mut child = self
            .command(&self.nft)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("running nft");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "nft failed in {}: {}\n{script}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Whether a namespace of that name exists (`ip netns list`).
pub fn exists(name: &str) -> bool {
    let out = run(Command::new(tool("ip", "iproute2")).args(["netns", "list"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name))
}

/// `add` then `delete` of each table: deletes it whether or not it exists
/// (nftables before 1.0.8, Debian 12's, has no `destroy`).
fn clear_rules() -> String {
    ["netdev", "inet"]
        .iter()
        .map(|f| format!("add table {f} {TABLE}\ndelete table {f} {TABLE}\n"))
        .collect()
}

impl Drop for NetNs {
    /// Best effort and never panics (it runs during unwinding): kills what
    /// runs inside, deletes the veth pair (synchronously, rather than
    /// whenever the kernel gets round to destroying the namespace) and the
    /// namespace.
    fn drop(&mut self) {
        kill_inside(&self.ip, &self.name);
        if !self.host_if.is_empty() {
            quiet(Command::new(&self.ip).args(["link", "delete", &self.host_if]));
        }
        quiet(Command::new(&self.ip).args(["netns", "delete", &self.name]));
    }
}

/// A child process inside a namespace, killed (and reaped) on drop.
/// Dereferences to [`Child`] for its pipes, `wait`, `try_wait`.
pub struct NsChild(Child);

impl Deref for NsChild {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for NsChild {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for NsChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// SIGKILLs every process in the namespace, grandchildren included,
/// round after round until none is left (bounded): one that forks while
/// being killed is caught by the next round. A killed process leaves the
/// list as soon as it exits, reaped or not.
fn kill_inside(ip: &Path, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let Ok(out) = Command::new(ip).args(["netns", "pids", name]).output() else {
            return;
        };
        let pids: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect();
        if !out.status.success() || pids.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            eprintln!("netns cleanup: processes {pids:?} in {name} survive SIGKILL");
            return;
        }
        // bash's builtin: bash is always there, /bin/kill (procps) may not
        // be. A process may exit between listing and killing: not an error.
        let _ = Command::new("bash")
            .args(["-c", "kill -KILL \"$@\" 2>/dev/null", "kill"])
            .args(pids)
            .status();
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Deletes namespaces left by test processes that no longer exist (killed
/// with SIGKILL, so their Drop never ran), which also frees their subnets.
fn sweep_stale(ip: &Path) {
    let Ok(out) = Command::new(ip).args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            kill_inside(ip, name);
            quiet(Command::new(ip).args(["netns", "delete", name]));
        }
    }
}

/// The IPv4 prefixes (address, length) configured in the test process's
/// namespace: a /30 overlapping one of them would confuse routing.
fn host_prefixes(ip: &Path) -> Vec<(u32, u32)> {
    let out = run(Command::new(ip).args(["-4", "-o", "addr", "show"]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "inet")?;
            let (addr, len) = words.next()?.split_once('/')?;
            Some((u32::from(addr.parse::<Ipv4Addr>().ok()?), len.parse().ok()?))
        })
        .collect()
}

fn overlaps(a: u32, a_len: u32, b: u32, b_len: u32) -> bool {
    let len = a_len.min(b_len);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    a & mask == b & mask
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// For cleanup: failures are reported, never panicked on.
fn quiet(cmd: &mut Command) {
    match cmd.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "netns cleanup: {cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => eprintln!("netns cleanup: {cmd:?}: {e}"),
    }
}

fn tool(binary: &str, package: &str) -> PathBuf {
    ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(binary))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "{binary} not found: install {package} (apt-get install {package}), as .ci/run does"
            )
        })
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
