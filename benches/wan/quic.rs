//! A QUIC connection across the emulated link with exactly the settings the
//! sidecar (client side) and the gateway (server side) use, and bulk
//! transfers over it: what one transfer costs on the wire, with no HTTP,
//! compression or database in the way. Used by benches/quic_link.rs and
//! tests/wan.rs.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use myquic::transport::quic::{self, Congestion};
use myquic::transport::tls::{self, SelfSigned};

use super::{LinkCounters, Wan};

const PORT: u16 = 4433;

pub struct QuicPair {
    client: quinn::Connection,
    server: quinn::Connection,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
    // Kept alive for the connections' sake.
    _endpoints: [quinn::Endpoint; 2],
}

/// One transfer as the link and the sender saw it.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    pub payload: u64,
    pub elapsed: Duration,
    /// IP bytes the sender put on the link, dropped ones included.
    pub offered: u64,
    /// IP bytes that reached the receiver.
    pub delivered: u64,
    pub queue_drops: u64,
    pub random_losses: u64,
    /// Packets the sender declared lost, and its congestion window after.
    pub sender_lost_packets: u64,
    pub sender_cwnd: u64,
    /// Packets over the path's MTU the link dropped (both directions).
    pub mtu_drops: u64,
    /// The sender's MTU probes sent and lost during the transfer, its
    /// black holes detected, and the datagram size it used at the end.
    pub sender_probes: u64,
    pub sender_probes_lost: u64,
    pub sender_black_holes: u64,
    pub sender_mtu: u16,
}

impl Transfer {
    pub fn offered_ratio(&self) -> f64 {
        self.offered as f64 / self.payload as f64
    }
}

impl QuicPair {
    /// Must be called inside a tokio runtime.
    pub async fn connect(link: &Wan, congestion: Congestion) -> anyhow::Result<QuicPair> {
        tls::install_crypto_provider();
        let server_ip = link.server_ip();
        let cert = SelfSigned::generate(&[server_ip.to_string()])?;
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.identity.chain[0].clone())?;

        // The sockets are made inside each namespace; quinn adopts them.
        let server_addr = SocketAddr::from((server_ip, PORT));
        let server_socket =
            super::run_in(link.server_ns(), move || quic::udp_socket(server_addr))??;
        let client_socket = super::run_in(link.client_ns(), || {
            quic::udp_socket(SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)))
        })??;

        let server_tls = cert.identity.server_config(&[tls::ALPN_H3])?;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(server_tls)?;
        let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        server_config.transport_config(quic::server_transport_config(congestion, 4096));
        let runtime = Arc::new(quinn::TokioRuntime);
        let server = quinn::Endpoint::new(
            quic::endpoint_config(),
            Some(server_config),
            server_socket,
            runtime.clone(),
        )?;

        let client_tls = tls::client_config(roots, &[tls::ALPN_H3])?;
        let crypto = quinn::crypto::rustls::QuicClientConfig::try_from((*client_tls).clone())?;
        let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
        client_config.transport_config(quic::client_transport_config(
            congestion,
            Duration::from_secs(1),
            Duration::from_secs(3),
        ));
        let mut client =
            quinn::Endpoint::new(quic::endpoint_config(), None, client_socket, runtime)?;
        client.set_default_client_config(client_config);

        let accepting = server.clone();
        let accept = tokio::spawn(async move {
            let conn = accepting.accept().await.context("no connection")?.await?;
            anyhow::Ok(conn)
        });
        let client_conn = client.connect(server_addr, &server_ip.to_string())?.await?;
        let server_conn = accept.await??;
        let serving = tokio::spawn(serve(server_conn.clone()));
        Ok(QuicPair {
            client: client_conn,
            server: server_conn,
            serving,
            _endpoints: [client, server],
        })
    }

    /// Sends `size` bytes on a new stream, client → server if `up`, and
    /// waits until the receiver has them all.
    pub async fn transfer(&self, link: &Wan, up: bool, size: usize) -> anyhow::Result<Transfer> {
        let sender = if up { &self.client } else { &self.server };
        let c0 = link.counters();
        let s0 = sender.stats();
        let started = Instant::now();
        let (mut send, mut recv) = self.client.open_bi().await?;
        if up {
            send.write_all(b"U").await?;
            send.write_all(&vec![0x5a; size]).await?;
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
        let elapsed = started.elapsed();
        // Every byte the receiver got was counted when it entered the
        // link, so the counters are complete now; the sender's own counters
        // may still miss the last acknowledgements (they are for reading,
        // not for checks).
        let c1 = link.counters();
        let s1 = sender.stats();
        let d = |f: fn(&LinkCounters) -> u64| f(&c1) - f(&c0);
        Ok(Transfer {
            payload: size as u64,
            elapsed,
            offered: if up {
                d(|c| c.to_server_offered_bytes)
            } else {
                d(|c| c.to_client_offered_bytes)
            },
            delivered: if up {
                d(|c| c.to_server_bytes)
            } else {
                d(|c| c.to_client_bytes)
            },
            queue_drops: d(|c| c.queue_drops),
            random_losses: d(|c| c.lost),
            sender_lost_packets: s1.path.lost_packets - s0.path.lost_packets,
            sender_cwnd: s1.path.cwnd,
            mtu_drops: d(|c| c.mtu_drops),
            sender_probes: s1.path.sent_plpmtud_probes - s0.path.sent_plpmtud_probes,
            sender_probes_lost: s1.path.lost_plpmtud_probes - s0.path.lost_plpmtud_probes,
            sender_black_holes: s1.path.black_holes_detected - s0.path.black_holes_detected,
            sender_mtu: s1.path.current_mtu,
        })
    }

    pub fn close(self) {
        self.client.close(0u32.into(), b"done");
        self.serving.abort();
    }
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
