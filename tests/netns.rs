//! The network-namespace harness itself: UDP between a namespace and the
//! test process can be cut and restored while TCP keeps flowing, and
//! nothing is left behind. Needs root, `ip` and `nft`.
//!
//! "Not received" is proven without waiting: after unblocking, the next
//! datagram to arrive must be the one sent after the unblock, not the one
//! sent while blocked (a veth delivers in order, so the blocked one would
//! have been queued first).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::process::{ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::netns::{self, Block, NetNs};

const PATIENCE: Duration = Duration::from_secs(5);

/// Sends one datagram from inside the namespace with bash's `/dev/udp`
/// (bash is on every Debian machine); the exit status is the `write`'s.
fn send_from_ns(ns: &NetNs, to: SocketAddr, text: &str) -> ExitStatus {
    ns.command("bash")
        .args(["-c", "echo \"$2\" > /dev/udp/$0/$1"])
        .args([to.ip().to_string(), to.port().to_string(), text.into()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
}

fn recv(sock: &UdpSocket) -> (String, SocketAddr) {
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0; 64];
    let (n, from) = sock.recv_from(&mut buf).expect("a datagram");
    (String::from_utf8_lossy(&buf[..n]).into_owned(), from)
}

fn tcp_connects(ns: &NetNs, listener: &TcpListener) {
    let to = listener.local_addr().unwrap();
    // Bounded: a dropped SYN-ACK would otherwise hang for minutes.
    let status = ns
        .command("timeout")
        .args(["5", "bash", "-c", "echo tcp > /dev/tcp/$0/$1"])
        .args([to.ip().to_string(), to.port().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "TCP connect from the namespace");
    // bash connected and wrote, so the connection is already queued.
    let mut text = String::new();
    listener
        .accept()
        .unwrap()
        .0
        .read_to_string(&mut text)
        .unwrap();
    assert_eq!(text, "tcp\n");
}

#[test]
fn drop_blocks_udp_both_ways_and_tcp_still_connects() {
    let ns = NetNs::create();
    let host = ns.host_addr();
    let udp = UdpSocket::bind((host, 0)).unwrap();
    let to = udp.local_addr().unwrap();
    let tcp = TcpListener::bind((host, 0)).unwrap();

    // A long-lived UDP peer inside the namespace: it says hello, then
    // prints every datagram it receives (cat reads whole datagrams).
    let mut peer = ns.spawn(
        ns.command("bash")
            .args(["-c", "exec 3<>/dev/udp/$0/$1; echo hello >&3; exec cat <&3"])
            .args([host.to_string(), to.port().to_string()])
            .stdout(Stdio::piped()),
    );
    let (tx, lines) = mpsc::channel();
    let stdout = BufReader::new(peer.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let (hello, peer_addr) = recv(&udp);
    assert_eq!(hello, "hello\n");
    assert_eq!(peer_addr.ip(), ns.ns_addr());
    udp.send_to(b"one\n", peer_addr).unwrap();
    assert_eq!(lines.recv_timeout(PATIENCE).unwrap(), "one");

    ns.block_udp(Block::Drop);
    assert!(
        send_from_ns(&ns, to, "dropped").success(),
        "a black hole does not tell the sender"
    );
    udp.send_to(b"two\n", peer_addr).unwrap();
    tcp_connects(&ns, &tcp);

    ns.unblock_udp();
    assert!(send_from_ns(&ns, to, "after").success());
    assert_eq!(
        recv(&udp).0,
        "after\n",
        "the blocked datagram never arrived"
    );
    udp.send_to(b"three\n", peer_addr).unwrap();
    assert_eq!(
        lines.recv_timeout(PATIENCE).unwrap(),
        "three",
        "the blocked datagram never arrived"
    );
}

#[test]
fn reject_fails_the_send_and_can_be_lifted() {
    let ns = NetNs::create();
    let udp = UdpSocket::bind((ns.host_addr(), 0)).unwrap();
    let to = udp.local_addr().unwrap();

    ns.block_udp(Block::Reject);
    // Blocking twice replaces the rules rather than failing.
    ns.block_udp(Block::Reject);
    assert!(!send_from_ns(&ns, to, "rejected").success());

    ns.unblock_udp();
    ns.unblock_udp();
    assert!(send_from_ns(&ns, to, "after").success());
    assert_eq!(recv(&udp).0, "after\n");
}

#[test]
fn drop_kills_children_and_removes_everything_even_on_panic() {
    let ns = NetNs::create();
    let (name, host_if) = (ns.name().to_string(), ns.host_if().to_string());
    // By ifindex: a parallel test may claim the freed name at once.
    let ifindex = format!("/sys/class/net/{host_if}/ifindex");
    let veth = std::fs::read_to_string(&ifindex).unwrap();
    assert!(netns::exists(&name));
    let mut child = ns.spawn(ns.command("sleep").arg("600"));
    drop(ns);
    assert!(!netns::exists(&name), "{name} is gone");
    assert_ne!(
        std::fs::read_to_string(&ifindex).ok(),
        Some(veth),
        "the veth is gone"
    );
    let deadline = Instant::now() + PATIENCE;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the child was killed");
        std::thread::sleep(Duration::from_millis(10));
    }

    let (tx, rx) = mpsc::channel();
    let unwound = std::panic::catch_unwind(move || {
        let ns = NetNs::create();
        tx.send(ns.name().to_string()).unwrap();
        panic!("deliberate panic with a namespace alive");
    });
    assert!(unwound.is_err());
    assert!(!netns::exists(&rx.recv().unwrap()));
}
