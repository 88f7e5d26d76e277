//! The benchmark's WAN emulator (`benches/wan/`) measured from the outside:
//! real sockets in its two namespaces, real kernel TCP and UDP across it.
//! Checks that the delay, the seeded loss, the rate, the queue and the
//! counters do what the parameters say, and that nothing is left behind.
//!
//! Timing bounds are one-sided where physics allows (a packet cannot
//! arrive before its delay; a transfer cannot beat the rate), and
//! generous where it does not, since these machines are small and shared.
//! The measured figures are printed (`--nocapture`).
//!
//! Needs root and `/dev/net/tun`; skipped with a message otherwise.

#[path = "../benches/wan/mod.rs"]
mod wan;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use wan::{LinkParams, Wan};

const PREFIX: &str = "mqwantest";

fn usable() -> bool {
    // SAFETY: plain syscall.
    let root = unsafe { libc::geteuid() } == 0;
    let tun = std::path::Path::new("/dev/net/tun").exists();
    if !(root && tun) {
        eprintln!(
            "SKIPPED: the WAN emulator needs root and /dev/net/tun (root: {root}, tun: {tun})"
        );
    }
    root && tun
}

fn params(delay_ms: u64, loss: f64, rate: u64, queue: usize, seed: u64) -> LinkParams {
    LinkParams {
        one_way_delay: Duration::from_millis(delay_ms),
        loss,
        rate_bits_per_sec: rate,
        queue_bytes: queue,
        seed,
        path_mtu: 0,
    }
}

fn start(p: LinkParams) -> Wan {
    Wan::start(PREFIX, p, Duration::from_secs(120)).expect("starting the WAN")
}

fn namespaces() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Drops the WAN and checks that both of its namespaces are gone.
fn finish(w: Wan) {
    let names = [w.client_ns().to_string(), w.server_ns().to_string()];
    drop(w);
    let left = namespaces();
    for n in names {
        assert!(!left.contains(&n), "{n} survived the drop: {left:?}");
    }
}

fn udp_in(ns: &str, addr: SocketAddr) -> UdpSocket {
    wan::run_in(ns, move || {
        let s = UdpSocket::bind(addr).unwrap();
        // A receive buffer that holds a whole burst: a datagram dropped by
        // the socket would look like one lost on the link.
        let size: libc::c_int = 16 << 20;
        // SAFETY: a valid socket and option value.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&size as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        s
    })
    .unwrap()
}

#[test]
fn round_trip_is_twice_the_delay_and_counters_match() {
    if !usable() {
        return;
    }
    let w = start(params(25, 0.0, 50_000_000, 512 << 10, 1));
    let server = udp_in(w.server_ns(), SocketAddr::new(w.server_ip().into(), 0));
    let server_addr = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        while let Ok((n, from)) = server.recv_from(&mut buf) {
            if &buf[..n] == b"quit" {
                break;
            }
            server.send_to(&buf[..n], from).unwrap();
        }
    });
    let client = udp_in(w.client_ns(), SocketAddr::new(w.client_ip().into(), 0));
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    const PINGS: usize = 20;
    const PAYLOAD: usize = 64;
    let mut rtts = Vec::new();
    let mut buf = [0u8; 2048];
    for i in 0..PINGS {
        let msg = [i as u8; PAYLOAD];
        let t = Instant::now();
        client.send_to(&msg, server_addr).unwrap();
        let (n, _) = client
            .recv_from(&mut buf)
            .expect("echo lost on a lossless link");
        rtts.push(t.elapsed());
        assert_eq!(&buf[..n], &msg);
    }
    let counters = w.counters();
    client.send_to(b"quit", server_addr).unwrap();
    echo.join().unwrap();
    rtts.sort();
    let (min, p50, max) = (rtts[0], rtts[PINGS / 2], rtts[PINGS - 1]);
    eprintln!(
        "RTT at 25 ms one way: min {min:.1?}, p50 {p50:.1?}, max {max:.1?} (ratio p50/50 ms = {:.3})",
        p50.as_secs_f64() / 0.050
    );
    assert!(
        min >= Duration::from_millis(50),
        "faster than the delay: {min:?}"
    );
    assert!(
        p50 < Duration::from_millis(90),
        "p50 RTT {p50:?}, want ≈ 50 ms"
    );
    // Exactly the pings and their echoes, IP + UDP headers included.
    let bytes = (PINGS * (PAYLOAD + 28)) as u64;
    assert_eq!(counters.to_server_packets, PINGS as u64, "{counters:?}");
    assert_eq!(counters.to_client_packets, PINGS as u64, "{counters:?}");
    assert_eq!(counters.to_server_bytes, bytes, "{counters:?}");
    assert_eq!(counters.to_client_bytes, bytes, "{counters:?}");
    assert_eq!((counters.lost, counters.queue_drops), (0, 0));
    w.reset_counters();
    assert_eq!(w.counters(), wan::LinkCounters::default());
    finish(w);
}

/// Sends `count` numbered datagrams client → server and returns the
/// numbers that arrived, with the WAN's counters.
fn blast(w: &Wan, count: u32, size: usize, pace: bool) -> (BTreeSet<u32>, wan::LinkCounters) {
    let server = udp_in(w.server_ns(), SocketAddr::new(w.server_ip().into(), 0));
    let to = server.local_addr().unwrap();
    let client = udp_in(w.client_ns(), SocketAddr::new(w.client_ip().into(), 0));
    let sink = std::thread::spawn(move || {
        server
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut got = BTreeSet::new();
        let mut buf = [0u8; 2048];
        while let Ok(n) = server.recv(&mut buf) {
            got.insert(u32::from_be_bytes(buf[..4].try_into().unwrap()));
            assert_eq!(n, size);
        }
        got
    });
    let mut msg = vec![0u8; size];
    for i in 0..count {
        msg[..4].copy_from_slice(&i.to_be_bytes());
        client.send_to(&msg, to).unwrap();
        if pace && i % 200 == 199 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let got = sink.join().unwrap();
    (got, w.counters())
}

#[test]
fn loss_follows_the_rate_and_the_seed() {
    if !usable() {
        return;
    }
    const N: u32 = 4000;
    let run = |seed| {
        let w = start(params(1, 0.05, 0, 0, seed));
        let (got, c) = blast(&w, N, 100, true);
        finish(w);
        // Every datagram is either delivered or counted lost, and every
        // delivered one reached the socket.
        assert_eq!(c.to_server_packets + c.lost, N as u64, "{c:?}");
        assert_eq!(got.len() as u64, c.to_server_packets, "{c:?}");
        assert_eq!(c.to_server_bytes, c.to_server_packets * 128);
        assert_eq!((c.queue_drops, c.to_client_packets), (0, 0), "{c:?}");
        got
    };
    let a = run(7);
    let again = run(7);
    let other = run(8);
    let lost = |s: &BTreeSet<u32>| N as usize - s.len();
    eprintln!(
        "loss at 5 % over {N} datagrams: seed 7 lost {} ({:.2} %), again {}, seed 8 lost {} ({:.2} %)",
        lost(&a),
        lost(&a) as f64 * 100.0 / N as f64,
        lost(&again),
        lost(&other),
        lost(&other) as f64 * 100.0 / N as f64,
    );
    // 200 expected, σ ≈ 14.
    for s in [&a, &other] {
        assert!((150..=250).contains(&lost(s)), "lost {} of {N}", lost(s));
    }
    assert_eq!(a, again, "same seed, different packets lost");
    assert_ne!(a, other, "different seeds lost the same packets");
}

#[test]
fn full_queue_drops_the_tail() {
    if !usable() {
        return;
    }
    // 1 Mbit/s: a 1028-byte packet takes 8.2 ms to serialise, so a burst of
    // 100 finds room for only ≈ 10 KB worth in the queue.
    let w = start(params(0, 0.0, 1_000_000, 10_000, 1));
    let (got, c) = blast(&w, 100, 1000, false);
    eprintln!(
        "burst of 100 × 1028 B into a 10 KB queue at 1 Mbit/s: {} delivered, {} dropped",
        c.to_server_packets, c.queue_drops
    );
    assert_eq!(c.to_server_packets + c.queue_drops, 100, "{c:?}");
    assert_eq!(got.len() as u64, c.to_server_packets);
    assert!(c.queue_drops >= 50, "{c:?}");
    assert!(c.to_server_packets >= 9, "{c:?}");
    // Drop-tail: the head of the burst gets through.
    assert!((0..9).all(|i| got.contains(&i)), "{got:?}");
    finish(w);
}

/// Pushes `bytes` over TCP client → server; returns the time from connect
/// to the server's acknowledgement of the last byte.
fn tcp_transfer(w: &Wan, bytes: usize) -> Duration {
    let addr = SocketAddr::new(w.server_ip().into(), 0);
    let listener = wan::run_in(w.server_ns(), move || TcpListener::bind(addr).unwrap()).unwrap();
    let to = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0;
        while total < bytes {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "EOF after {total} bytes");
            total += n;
        }
        s.write_all(b"k").unwrap();
    });
    let t = Instant::now();
    let mut s = wan::run_in(w.client_ns(), move || TcpStream::connect(to).unwrap()).unwrap();
    let chunk = vec![0x5au8; 1 << 16];
    let mut sent = 0;
    while sent < bytes {
        let n = chunk.len().min(bytes - sent);
        s.write_all(&chunk[..n]).unwrap();
        sent += n;
    }
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).unwrap();
    let elapsed = t.elapsed();
    server.join().unwrap();
    elapsed
}

#[test]
fn tcp_throughput_follows_the_rate() {
    if !usable() {
        return;
    }
    const BYTES: usize = 5_000_000;
    const RATE: u64 = 50_000_000;
    let theory = BYTES as f64 * 8.0 / RATE as f64;

    let unlimited = start(params(5, 0.0, 0, 0, 1));
    let fast = tcp_transfer(&unlimited, BYTES);
    finish(unlimited);

    let w = start(params(5, 0.0, RATE, 512 << 10, 1));
    let took = tcp_transfer(&w, BYTES);
    let c = w.counters();
    finish(w);
    let ratio = took.as_secs_f64() / theory;
    eprintln!(
        "TCP 5 MB at 50 Mbit/s, 10 ms RTT: {took:.3?} = {ratio:.2}× the {theory:.2} s payload floor \
         ({:.1} Mbit/s of goodput); unlimited link: {fast:.3?}; on the wire {} B / {} pkts up, \
         {} B / {} pkts down, {} queue drops",
        BYTES as f64 * 8.0 / took.as_secs_f64() / 1e6,
        c.to_server_bytes,
        c.to_server_packets,
        c.to_client_bytes,
        c.to_client_packets,
        c.queue_drops,
    );
    assert!(
        ratio >= 0.7,
        "faster than the rate allows: {ratio:.2}× the floor"
    );
    assert!(
        ratio <= 10.0,
        "far slower than the rate: {ratio:.2}× the floor"
    );
    // Every payload byte crossed the link once (more if retransmitted),
    // plus headers.
    assert!(c.to_server_bytes >= BYTES as u64, "{c:?}");
    assert!(c.to_server_bytes <= BYTES as u64 * 13 / 10, "{c:?}");
}

#[test]
fn time_limit_and_stale_namespaces_leave_nothing() {
    if !usable() {
        return;
    }
    // A namespace left by a process that no longer exists: a pid above
    // pid_max can't be alive.
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let prefix = "mqwanstale";
    let stale = format!("{prefix}-{}-0-c", pid_max + 1);
    assert!(
        Command::new("ip")
            .args(["netns", "add", &stale])
            .status()
            .unwrap()
            .success()
    );
    let w = Wan::start(prefix, params(0, 0.0, 0, 0, 1), Duration::from_secs(1)).unwrap();
    let names = [w.client_ns().to_string(), w.server_ns().to_string()];
    assert!(
        !namespaces().contains(&stale),
        "the stale namespace was not swept"
    );
    assert!(names.iter().all(|n| namespaces().contains(n)));
    // The time limit alone removes both namespaces, before any drop.
    let deadline = Instant::now() + Duration::from_secs(10);
    while names.iter().any(|n| namespaces().contains(n)) {
        assert!(Instant::now() < deadline, "time limit did not clean up");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(w);
    assert!(names.iter().all(|n| !namespaces().contains(n)));
}

/// QUIC with the sidecar's and gateway's settings (`congestion = "bbr"`)
/// across the table's WAN (50 Mbit/s, 25 ms each way, 1 % loss, 512 KiB
/// queue) puts little more than its payload on the wire: packet headers,
/// and the retransmissions of what the link lost at random. quinn's own
/// BBR, unbounded, overflowed the queue: 1.15× for 2 MB up and 1.5–2×
/// for 10 MB down. A count, not a time: the bound holds on a busy machine.
#[test]
fn quic_pacing_does_not_overflow_the_bottleneck_queue() {
    if !usable() {
        return;
    }
    let w = start(params(25, 0.01, 50_000_000, 512 * 1024, 4));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pair = wan::quic::QuicPair::connect(&w, myquic::transport::quic::Congestion::Bbr)
            .await
            .expect("a QUIC connection across the link");
        // The first transfer of each direction starts the controller from
        // nothing; the ones after it are the steady state that matters.
        for (up, size) in [(true, 2_000_000), (false, 6_000_000)] {
            let mut ratios = Vec::new();
            for _ in 0..3 {
                let t = pair.transfer(&w, up, size).await.expect("a transfer");
                eprintln!("QUIC {}: {t:?}", if up { "up" } else { "down" });
                ratios.push(t.offered_ratio());
            }
            let steady = (ratios[1] + ratios[2]) / 2.0;
            assert!(
                steady < 1.10,
                "{} MB {}: {steady:.3}× the payload on the wire ({ratios:?})",
                size / 1_000_000,
                if up { "up" } else { "down" }
            );
        }
        pair.close();
    });
    finish(w);
}

/// A QUIC pair across the link; runs `body` with it and closes it.
fn with_quic_pair(w: &Wan, body: impl AsyncFnOnce(&wan::quic::QuicPair)) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pair = wan::quic::QuicPair::connect(w, myquic::transport::quic::Congestion::Bbr)
            .await
            .expect("a QUIC connection across the link");
        body(&pair).await;
        pair.close();
    });
}

/// Where the path carries jumbo frames (9,001-byte devices, no loss,
/// 200 Mbit/s with a queue no paced sender fills: a datacentre network, at
/// a rate a loaded test machine's receiver keeps up with, so that any loss
/// is the sender's own), MTU discovery raises the datagram
/// size past 1,500 and a bulk transfer loses nothing. quinn sends up to 10
/// datagrams in one GSO `sendmsg`, and the kernel refuses a batch over
/// 64 KB with `EMSGSIZE`, which quinn-udp drops without a word: with a
/// ceiling above ~6.5 KB every full batch of a bulk transfer was lost
/// and sent again (and quinn, taking it for a black hole, fell back to
/// 1,200-byte datagrams).
#[test]
fn quic_datagrams_grow_on_a_jumbo_path_without_loss() {
    if !usable() {
        return;
    }
    let mut p = params(1, 0.0, 200_000_000, 4 << 20, 4);
    p.path_mtu = wan::JUMBO_MTU;
    let w = start(p);
    with_quic_pair(&w, async |pair| {
        for up in [false, true] {
            // The first transfer's probes run while it sends; the second
            // is the steady state.
            for _ in 0..2 {
                let t = pair.transfer(&w, up, 6_000_000).await.expect("a transfer");
                eprintln!("QUIC {}: {t:?}", if up { "up" } else { "down" });
                assert_eq!(
                    (t.sender_lost_packets, t.sender_black_holes),
                    (0, 0),
                    "packets lost on a lossless link: {t:?}"
                );
            }
            let t = pair.transfer(&w, up, 1_000_000).await.expect("a transfer");
            assert!(
                t.sender_mtu > 1500,
                "datagrams stayed at {} bytes on a 9,001-byte path",
                t.sender_mtu
            );
        }
    });
    finish(w);
}

/// A path that silently drops IP packets over 1,500 bytes between two
/// hosts with jumbo frames (a path-MTU black hole: no ICMP): the probes
/// above it are lost, which costs a few probes' bytes and never data,
/// and the connection settles under 1,500 with the 1 %-loss WAN's wire
/// cost unchanged.
#[test]
fn quic_mtu_discovery_survives_a_path_mtu_black_hole() {
    if !usable() {
        return;
    }
    let mut p = params(25, 0.01, 50_000_000, 512 * 1024, 4);
    p.path_mtu = 1500;
    let w = start(p);
    with_quic_pair(&w, async |pair| {
        let mut ratios = Vec::new();
        for _ in 0..3 {
            let t = pair
                .transfer(&w, false, 4_000_000)
                .await
                .expect("a transfer");
            eprintln!("QUIC down over a 1,500-byte black hole: {t:?}");
            assert!(
                t.sender_mtu <= 1500 - 28,
                "MTU {} over the path",
                t.sender_mtu
            );
            ratios.push(t.offered_ratio());
        }
        let steady = (ratios[1] + ratios[2]) / 2.0;
        assert!(
            steady < 1.10,
            "{steady:.3}× the payload offered ({ratios:?})"
        );
    });
    let c = w.counters();
    eprintln!("link: {c:?}");
    // Each size over the path MTU is probed three times before the search
    // gives up on it (quinn's MAX_PROBES), by each end: a few dozen
    // packets, never a stream of them.
    assert!(
        c.mtu_drops <= 60,
        "{} packets over the path MTU",
        c.mtu_drops
    );
    finish(w);
}
