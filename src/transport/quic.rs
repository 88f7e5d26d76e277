//! quinn settings shared by both ends. The defaults suit a browser, not a
//! proxy multiplexing thousands of MySQL clients and 30 MB results over
//! one connection (rust-stack.md §3).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};

use super::congestion::BoundedBbrConfig;

/// Concurrent requests on one connection (quinn default: 100); a server
/// sets its own cap ([`server_transport_config`]).
const MAX_STREAMS: u32 = 4096;
/// Per-stream receive window: 16 MiB keeps one bulk stream from being
/// window-limited at WAN round-trip times (default 1.25 MB).
const STREAM_WINDOW: u32 = 16 << 20;
/// The sidecar's per-stream receive window: what a gateway may send of one
/// result ahead of the MySQL client reading it, so what streaming a large
/// result adds to the sidecar's memory. 8 MiB (as HTTP/2's stream window)
/// still carries 1.3 Gbit/s per stream at a 50 ms round trip.
const CLIENT_STREAM_WINDOW: u32 = 8 << 20;
/// Connection-wide receive and send windows.
const CONNECTION_WINDOW: u32 = 64 << 20;
/// The largest UDP payload MTU discovery may try (quinn's default ceiling:
/// 1,452). A path with a larger MTU (loopback: 65,536; jumbo frames) then
/// carries a 50 KB result in 8 datagrams instead of 36, each of which
/// costs an encryption, a decryption and a share of an ACK's wake-up on
/// both ends. Not higher: quinn sends up to [`GSO_BATCH`] datagrams in one
/// `sendmsg`, the kernel refuses a batch over 65,507 bytes (IPv4's largest
/// UDP payload) with `EMSGSIZE`, and quinn-udp drops that batch without a
/// word — at 65,527 every full batch of a bulk transfer was lost and sent
/// again, 40 % slower on a jumbo path (`benches/results/profiles/sidecar.md`).
/// A probe above a path's real MTU is only a lost probe: quinn does not
/// count it as congestion, and stops at the largest that passed.
const MAX_UDP_PAYLOAD: u16 = 6_550;
/// Datagrams quinn 0.11 puts in one GSO send (`MAX_TRANSMIT_SEGMENTS`,
/// private to quinn): a quinn that raises it must lower the ceiling.
const GSO_BATCH: u32 = 10;
const _: () = assert!(MAX_UDP_PAYLOAD as u32 * GSO_BATCH <= 65_507);
/// Socket buffers; the kernel's 208 KiB default drops packets under load.
const UDP_BUFFER: usize = 4 << 20;

/// Which congestion controller QUIC uses. Cubic and NewReno collapse under
/// random loss (Mathis limit); BBR does not. `bbr` is quinn's BBR with its
/// window bounded by the measured bandwidth-delay product
/// ([`super::congestion`]): unbounded, it overflows router queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Congestion {
    #[default]
    Bbr,
    Cubic,
    NewReno,
}

impl Congestion {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bbr => "bbr",
            Self::Cubic => "cubic",
            Self::NewReno => "newreno",
        }
    }
}

impl std::str::FromStr for Congestion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "bbr" => Ok(Self::Bbr),
            "cubic" => Ok(Self::Cubic),
            "newreno" => Ok(Self::NewReno),
            other => Err(format!("{other:?} is not bbr, cubic or newreno")),
        }
    }
}

impl std::fmt::Display for Congestion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The server's settings (and those of short-lived tools): a 60 s idle
/// timeout, keep-alive only if asked for.
pub fn transport_config(
    congestion: Congestion,
    keep_alive: Option<Duration>,
) -> Arc<TransportConfig> {
    let mut t = base(congestion);
    t.max_idle_timeout(Some(idle_timeout(Duration::from_secs(60))))
        .keep_alive_interval(keep_alive);
    Arc::new(t)
}

/// A server's settings: those of [`transport_config`], with at most
/// `max_streams` requests at once per connection.
pub fn server_transport_config(congestion: Congestion, max_streams: u32) -> Arc<TransportConfig> {
    let mut t = base(congestion);
    t.max_idle_timeout(Some(idle_timeout(Duration::from_secs(60))))
        .max_concurrent_bidi_streams(VarInt::from_u32(max_streams));
    Arc::new(t)
}

/// The long-lived client connection's settings. A client must notice a
/// black-holed path (UDP dropped by a firewall mid-connection) in seconds,
/// not after the 30–60 s a browser would wait, so that it can fall back to
/// HTTP/2: PINGs every `keep_alive` keep acknowledgements flowing, and the
/// connection is declared dead after `idle` without hearing from the peer
/// (the effective value is the smaller of both ends' and never below three
/// probe timeouts, so a slow path is not mistaken for a dead one).
///
/// The initial RTT estimate is 100 ms instead of quinn's 333 ms, so a lost
/// first Initial packet is retransmitted after ~300 ms rather than ~1 s and
/// does not by itself exceed a one-second handshake budget.
pub fn client_transport_config(
    congestion: Congestion,
    keep_alive: Duration,
    idle: Duration,
) -> Arc<TransportConfig> {
    let mut t = base(congestion);
    t.max_idle_timeout(Some(idle_timeout(idle)))
        .keep_alive_interval(Some(keep_alive))
        .initial_rtt(Duration::from_millis(100))
        .stream_receive_window(VarInt::from_u32(CLIENT_STREAM_WINDOW));
    Arc::new(t)
}

/// Counters of a connection that tell a live path from a silent one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathActivity {
    /// Datagrams received from the peer.
    pub datagrams_received: u64,
    /// Frames sent that the peer must acknowledge (all but ACK and
    /// CONNECTION_CLOSE): while any of them waits, a live peer answers
    /// within a round trip plus its acknowledgement delay.
    pub ack_eliciting_sent: u64,
    /// The smoothed round-trip time.
    pub rtt: Duration,
}

impl PathActivity {
    pub fn of(conn: &quinn::Connection) -> Self {
        let stats = conn.stats();
        let f = &stats.frame_tx;
        let ack_eliciting_sent = [
            f.ack_frequency,
            f.crypto,
            f.data_blocked,
            f.datagram,
            u64::from(f.handshake_done),
            f.immediate_ack,
            f.max_data,
            f.max_stream_data,
            f.max_streams_bidi,
            f.max_streams_uni,
            f.new_connection_id,
            f.new_token,
            f.path_challenge,
            f.path_response,
            f.ping,
            f.reset_stream,
            f.retire_connection_id,
            f.stream_data_blocked,
            f.streams_blocked_bidi,
            f.streams_blocked_uni,
            f.stop_sending,
            f.stream,
        ]
        .iter()
        .sum();
        Self {
            datagrams_received: stats.udp_rx.datagrams,
            ack_eliciting_sent,
            rtt: stats.path.rtt,
        }
    }
}

fn idle_timeout(d: Duration) -> IdleTimeout {
    // Only durations beyond 2^62 ms fail; they mean "forever" anyway.
    IdleTimeout::try_from(d).unwrap_or_else(|_| VarInt::MAX.into())
}

fn base(congestion: Congestion) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(MAX_STREAMS))
        .max_concurrent_uni_streams(VarInt::from_u32(100))
        .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
        .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
        .send_window(u64::from(CONNECTION_WINDOW));
    let mut mtu = quinn::MtuDiscoveryConfig::default();
    mtu.upper_bound(MAX_UDP_PAYLOAD);
    t.mtu_discovery_config(Some(mtu));
    match congestion {
        Congestion::Bbr => {
            t.congestion_controller_factory(Arc::new(BoundedBbrConfig::default()));
        }
        Congestion::Cubic => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
        }
        Congestion::NewReno => {
            t.congestion_controller_factory(Arc::new(quinn::congestion::NewRenoConfig::default()));
        }
    }
    t
}

/// Endpoint settings of both ends: datagrams up to [`MAX_UDP_PAYLOAD`]
/// are accepted (quinn's default, 1,480, would cap MTU discovery there).
/// The value is also announced to the peer, which bounds what it sends,
/// and sizes the endpoint's receive buffer (× 64 GRO segments × 32 slots:
/// 13 MB of address space, of which only what arrives is touched).
pub fn endpoint_config() -> quinn::EndpointConfig {
    let mut config = quinn::EndpointConfig::default();
    // Only values above 65,527 are refused.
    let _ = config.max_udp_payload_size(MAX_UDP_PAYLOAD);
    config
}

/// A UDP socket with large buffers, bound to `addr`.
pub fn udp_socket(addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    // Best effort: the kernel caps these at net.core.{r,w}mem_max.
    let _ = socket.set_recv_buffer_size(UDP_BUFFER);
    let _ = socket.set_send_buffer_size(UDP_BUFFER);
    if addr.is_ipv6() {
        socket.set_only_v6(false).ok();
    }
    socket.bind(&addr.into())?;
    Ok(socket.into())
}
