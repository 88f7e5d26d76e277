//! QUIC bulk transfers over the emulated WAN (benches/wan), with exactly
//! the transport settings the sidecar (client) and gateway (server) use:
//! what does one transfer cost on the wire, and how long does it take?
//!
//! This isolates the congestion controller from everything else in the
//! table (MariaDB, compression, the HTTP layers): the same link, the same
//! quinn settings, a plain stream of `--mb` megabytes, `--repeat` times on
//! one long-lived connection with a pause between transfers (as the
//! table's cells have between statements).
//!
//! ```text
//! cargo bench --bench quic_link -- --congestion bbr --loss 0.01 --mb 2 --dir up
//! cargo bench --bench quic_link -- --congestion bbr --loss 0.01 --mb 10 --dir down
//! cargo bench --bench quic_link -- --loss 0    --mb 4 --dir down --path-mtu 9001   # jumbo path: datagram ceiling vs GSO
//! cargo bench --bench quic_link -- --loss 0.01 --mb 4 --dir down --path-mtu 1500   # path-MTU black hole
//! ```
//! `up` is the sidecar sending (a large INSERT's body), `down` the gateway
//! (a large SELECT's rows). Per transfer it prints the time, the bytes the
//! sender put on the link (delivered or dropped, retransmissions included)
//! over the payload, the emulator's drops, and the sender's quinn counters
//! (lost packets, MTU probes, black holes, the datagram size reached).
//! Needs root (network namespaces, TUN).

#[allow(unused_imports)]
#[path = "wan/mod.rs"]
mod wan;

use std::time::Duration;

use anyhow::bail;
use clap::Parser;
use myquic::transport::quic::Congestion;

use wan::quic::QuicPair;

#[derive(Parser, Debug)]
struct Args {
    /// bbr, cubic or newreno (as `congestion` in the config).
    #[arg(long, default_value = "bbr")]
    congestion: Congestion,
    /// Random loss per direction (0.01 = 1 %).
    #[arg(long, default_value_t = 0.01)]
    loss: f64,
    /// Megabytes per transfer.
    #[arg(long, default_value_t = 2.0)]
    mb: f64,
    /// up: client → server; down: server → client.
    #[arg(long, default_value = "up")]
    dir: String,
    /// Transfers on the same connection.
    #[arg(long, default_value_t = 6)]
    repeat: usize,
    /// Pause between transfers, milliseconds.
    #[arg(long, default_value_t = 200)]
    pause_ms: u64,
    /// Drop IP packets over this size on the link, with jumbo-frame
    /// devices at both ends (a path-MTU black hole); 0: plain 1,500-byte
    /// devices.
    #[arg(long, default_value_t = 0)]
    path_mtu: usize,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let up = match args.dir.as_str() {
        "up" => true,
        "down" => false,
        other => bail!("--dir {other:?}: up or down"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let params = wan::LinkParams {
        one_way_delay: Duration::from_millis(25),
        loss: args.loss,
        rate_bits_per_sec: 50_000_000,
        queue_bytes: 512 * 1024,
        seed: 4,
        path_mtu: args.path_mtu,
    };
    let link = wan::Wan::start("myqql", params, Duration::from_secs(600))?;
    rt.block_on(run(&args, up, &link))
}

async fn run(args: &Args, up: bool, link: &wan::Wan) -> anyhow::Result<()> {
    let pair = QuicPair::connect(link, args.congestion).await?;
    let size = (args.mb * 1e6) as usize;
    println!(
        "congestion {}, loss {:.1} %, {:.1} MB {}, 50 Mbit/s, 25 ms one-way, 512 KiB queue",
        args.congestion,
        args.loss * 100.0,
        args.mb,
        if up {
            "up (client sends)"
        } else {
            "down (server sends)"
        }
    );
    println!(
        "| # | ms | offered / payload | delivered / payload | queue drops | random losses | sender lost pkts | cwnd after | MTU drops | probes sent / lost | black holes | MTU after |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let mut later = Vec::new();
    for i in 0..args.repeat {
        tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
        let t = pair.transfer(link, up, size).await?;
        println!(
            "| {i} | {:.0} | {:.3} | {:.3} | {} | {} | {} | {} kB | {} | {} / {} | {} | {} |",
            t.elapsed.as_secs_f64() * 1e3,
            t.offered_ratio(),
            t.delivered as f64 / size as f64,
            t.queue_drops,
            t.random_losses,
            t.sender_lost_packets,
            t.sender_cwnd / 1000,
            t.mtu_drops,
            t.sender_probes,
            t.sender_probes_lost,
            t.sender_black_holes,
            t.sender_mtu,
        );
        if i > 0 {
            later.push(t);
        }
    }
    let n = later.len().max(1) as f64;
    println!(
        "\nmean of transfers 1..: {:.0} ms, offered / payload {:.3}, {:.0} queue drops",
        later
            .iter()
            .map(|t| t.elapsed.as_secs_f64() * 1e3)
            .sum::<f64>()
            / n,
        later.iter().map(|t| t.offered_ratio()).sum::<f64>() / n,
        later.iter().map(|t| t.queue_drops as f64).sum::<f64>() / n,
    );
    pair.close();
    Ok(())
}
