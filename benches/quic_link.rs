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
//! ```
//! `up` is the sidecar sending (a large INSERT's body), `down` the gateway
//! (a large SELECT's rows). Per transfer it prints the time, the bytes the
//! sender put on the link (delivered or dropped, retransmissions included)
//! over the payload, the emulator's drops, and the sender's quinn counters.
//! Needs root (network namespaces, TUN).

#[allow(dead_code, unused_imports)]
#[path = "wan/mod.rs"]
mod wan;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use myquic::transport::quic::{self, Congestion};
use myquic::transport::tls::{self, SelfSigned};

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
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

const PORT: u16 = 4433;

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let up = match args.dir.as_str() {
        "up" => true,
        "down" => false,
        other => bail!("--dir {other:?}: up or down"),
    };
    tls::install_crypto_provider();
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
    };
    let link = wan::Wan::start("myqql", params, Duration::from_secs(600))?;
    rt.block_on(run(&args, up, &link))
}

async fn run(args: &Args, up: bool, link: &wan::Wan) -> anyhow::Result<()> {
    let server_ip = link.server_ip();
    let cert = SelfSigned::generate(&[server_ip.to_string()])?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.identity.chain[0].clone())?;

    // The sockets are made inside each namespace; quinn adopts them here.
    let server_addr = SocketAddr::from((server_ip, PORT));
    let server_socket = wan::run_in(link.server_ns(), move || quic::udp_socket(server_addr))??;
    let client_socket = wan::run_in(link.client_ns(), || {
        quic::udp_socket(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
    })??;

    let server_tls = cert.identity.server_config(&[tls::ALPN_H3])?;
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server_tls)?;
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server_config.transport_config(quic::server_transport_config(args.congestion, 4096));
    let runtime = Arc::new(quinn::TokioRuntime);
    let server = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server_config),
        server_socket,
        runtime.clone(),
    )?;

    let client_tls = tls::client_config(roots, &[tls::ALPN_H3])?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from((*client_tls).clone())?;
    let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
    client_config.transport_config(quic::client_transport_config(
        args.congestion,
        Duration::from_secs(1),
        Duration::from_secs(3),
    ));
    let mut client = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        client_socket,
        runtime,
    )?;
    client.set_default_client_config(client_config);

    let accept = tokio::spawn(async move {
        let conn = server.accept().await.context("no connection")?.await?;
        anyhow::Ok((server, conn))
    });
    let client_conn = client.connect(server_addr, &server_ip.to_string())?.await?;
    let (_server, server_conn) = accept.await??;
    let serving = tokio::spawn(serve(server_conn.clone()));

    let size = (args.mb * 1e6) as usize;
    let payload = vec![0x5au8; size];
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
        "| # | ms | offered / payload | delivered / payload | queue drops | random losses | sender lost pkts | congestion events | cwnd after |"
    );
    println!("|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    let sender = if up { &client_conn } else { &server_conn };
    let mut totals = (0.0, 0u64, 0u64);
    for i in 0..args.repeat {
        tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
        let c0 = link.counters();
        let s0 = sender.stats();
        let started = Instant::now();
        let (mut send, mut recv) = client_conn.open_bi().await?;
        if up {
            send.write_all(b"U").await?;
            send.write_all(&payload).await?;
            send.finish()?;
            // The server answers once it has read everything.
            recv.read_to_end(16).await?;
        } else {
            send.write_all(b"D").await?;
            send.write_all(&(size as u64).to_be_bytes()).await?;
            send.finish()?;
            let got = recv.read_to_end(size + 1).await?;
            if got.len() != size {
                bail!("downloaded {} of {size} bytes", got.len());
            }
        }
        let ms = started.elapsed().as_secs_f64() * 1e3;
        // The last acknowledgements are still on their way: let them land
        // so the sender's counters are complete.
        tokio::time::sleep(Duration::from_millis(60)).await;
        let c1 = link.counters();
        let s1 = sender.stats();
        let (offered, delivered) = if up {
            (
                c1.to_server_offered_bytes - c0.to_server_offered_bytes,
                c1.to_server_bytes - c0.to_server_bytes,
            )
        } else {
            (
                c1.to_client_offered_bytes - c0.to_client_offered_bytes,
                c1.to_client_bytes - c0.to_client_bytes,
            )
        };
        let drops = c1.queue_drops - c0.queue_drops;
        println!(
            "| {i} | {ms:.0} | {:.3} | {:.3} | {drops} | {} | {} | {} | {} kB |",
            offered as f64 / size as f64,
            delivered as f64 / size as f64,
            c1.lost - c0.lost,
            s1.path.lost_packets - s0.path.lost_packets,
            s1.path.congestion_events - s0.path.congestion_events,
            s1.path.cwnd / 1000,
        );
        if i > 0 {
            totals.0 += ms;
            totals.1 += offered;
            totals.2 += drops;
        }
    }
    let n = (args.repeat.max(2) - 1) as f64;
    println!(
        "\nmean of transfers 1..: {:.0} ms, offered / payload {:.3}, {:.0} queue drops",
        totals.0 / n,
        totals.1 as f64 / n / size as f64,
        totals.2 as f64 / n
    );
    client_conn.close(0u32.into(), b"done");
    serving.abort();
    Ok(())
}

/// `U` + bytes: read them all, answer one byte. `D` + u64: send that many.
async fn serve(conn: quinn::Connection) -> anyhow::Result<()> {
    loop {
        let (mut send, mut recv) = conn.accept_bi().await?;
        tokio::spawn(async move {
            let mut kind = [0u8; 1];
            recv.read_exact(&mut kind).await?;
            if &kind == b"U" {
                recv.read_to_end(usize::MAX).await?;
                send.write_all(b"k").await?;
            } else {
                let mut len = [0u8; 8];
                recv.read_exact(&mut len).await?;
                let data = vec![0xa5u8; u64::from_be_bytes(len) as usize];
                send.write_all(&data).await?;
            }
            send.finish()?;
            anyhow::Ok(())
        });
    }
}
