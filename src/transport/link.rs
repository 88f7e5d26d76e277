//! What a response can learn about the connection it leaves on: the
//! round-trip time the transport measures, and the drain rate earlier
//! responses on the connection measured (see `api::effort`).

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use crate::api::effort::LinkEstimate;

/// A connection's link, shared by its requests. The default knows nothing
/// (HTTP/1.1, tests): responses use the default effort.
#[derive(Clone, Default)]
pub struct Link(Option<Arc<State>>);

struct State {
    rtt: Rtt,
    /// Bytes per second of the last drain measured, as `f64` bits; 0 for
    /// none yet.
    drain_rate: AtomicU64,
}

enum Rtt {
    Fixed(Duration),
    Quic(quinn::Connection),
    /// The TCP socket, read with `TCP_INFO`. `open` is cleared before the
    /// descriptor is closed, under its write lock; a read holds the read
    /// lock while it uses the descriptor, so a number the kernel has given
    /// to another socket is never read.
    Tcp {
        fd: RawFd,
        open: RwLock<bool>,
    },
}

impl Link {
    /// A link with a known, fixed round trip (tests; transports without
    /// their own measurement), whose drain is measured.
    pub fn with_rtt(rtt: Duration) -> Self {
        Self::new(Rtt::Fixed(rtt))
    }

    pub fn quic(connection: quinn::Connection) -> Self {
        Self::new(Rtt::Quic(connection))
    }

    /// A TCP connection's link, and the guard that must be dropped before
    /// its socket is closed.
    pub fn tcp(fd: RawFd) -> (Self, TcpLinkGuard) {
        let link = Self::new(Rtt::Tcp {
            fd,
            open: RwLock::new(true),
        });
        let guard = TcpLinkGuard(link.clone());
        (link, guard)
    }

    fn new(rtt: Rtt) -> Self {
        Self(Some(Arc::new(State {
            rtt,
            drain_rate: AtomicU64::new(0),
        })))
    }

    /// What is known now. Costs a system call on TCP (`TCP_INFO`): asked
    /// only for a message large enough to compress.
    pub fn estimate(&self) -> LinkEstimate {
        let Some(state) = &self.0 else {
            return LinkEstimate::default();
        };
        let rate = f64::from_bits(state.drain_rate.load(Ordering::Relaxed));
        LinkEstimate {
            drain_rate: (rate > 0.0).then_some(rate),
            rtt: match &state.rtt {
                Rtt::Fixed(rtt) => Some(*rtt),
                Rtt::Quic(connection) => Some(connection.rtt()),
                Rtt::Tcp { fd, open } => {
                    let open = open.read().unwrap_or_else(PoisonError::into_inner);
                    open.then(|| tcp_rtt(*fd)).flatten()
                }
            },
        }
    }

    /// Records that the transport took `took` to take `bytes` from a
    /// response that was waiting on it, for that response's later messages
    /// and the connection's later responses. Smoothed (a quarter weight to
    /// each sample, in time per byte), so one stall does not swing it.
    pub fn record_drain(&self, bytes: usize, took: Duration) {
        let Some(state) = &self.0 else { return };
        if bytes == 0 {
            return;
        }
        // A take faster than the clock can tell is as fast as 1 µs.
        let took = took.max(Duration::from_micros(1)).as_secs_f64();
        let sample = took / bytes as f64;
        let old = f64::from_bits(state.drain_rate.load(Ordering::Relaxed));
        let per_byte = if old > 0.0 {
            0.75 / old + 0.25 * sample
        } else {
            sample
        };
        state
            .drain_rate
            .store((1.0 / per_byte).to_bits(), Ordering::Relaxed);
    }
}

/// Marks a TCP link's socket closed when dropped.
pub struct TcpLinkGuard(Link);

impl Drop for TcpLinkGuard {
    fn drop(&mut self) {
        if let Some(state) = &self.0.0
            && let Rtt::Tcp { open, .. } = &state.rtt
        {
            *open.write().unwrap_or_else(PoisonError::into_inner) = false;
        }
    }
}

/// The kernel's smoothed round-trip time of a TCP socket.
fn tcp_rtt(fd: RawFd) -> Option<Duration> {
    // SAFETY: `tcp_info` is plain data, and getsockopt writes at most
    // `len` bytes into it; `fd` is the connection's open socket (see
    // `Rtt::Tcp`), and a failure only means no estimate.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    (rc == 0 && info.tcpi_rtt > 0).then(|| Duration::from_micros(info.tcpi_rtt.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_tcp_link_reads_its_round_trip_until_closed() {
        use std::os::fd::AsRawFd;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (link, guard) = Link::tcp(server.as_raw_fd());
        let rtt = link.estimate().rtt.expect("TCP_INFO on a connected socket");
        assert!(rtt < Duration::from_secs(1), "{rtt:?}");
        assert_eq!(link.estimate().drain_rate, None);
        link.record_drain(5_000_000, Duration::from_secs(1));
        link.record_drain(0, Duration::from_secs(1));
        assert_eq!(link.estimate().drain_rate, Some(5e6));
        drop(guard);
        assert_eq!(link.estimate().rtt, None);
        drop((client, server));
    }

    #[test]
    fn an_unknown_link_knows_nothing() {
        let link = Link::default();
        link.record_drain(1_000_000, Duration::from_secs(1));
        assert_eq!(link.estimate(), LinkEstimate::default());
    }

    #[test]
    fn drain_samples_are_smoothed_in_time_per_byte() {
        let link = Link::with_rtt(Duration::from_millis(1));
        link.record_drain(1_000_000, Duration::from_secs(1));
        // One stall at a tenth of the rate moves the estimate a quarter of
        // the way in time per byte: 1 µs/B → 0.75 + 2.5 = 3.25 µs/B.
        link.record_drain(100_000, Duration::from_secs(1));
        let rate = link.estimate().drain_rate.unwrap();
        assert!((rate - 1e6 / 3.25).abs() < 1.0, "{rate}");
        // An instant take counts as 1 µs, never as an infinite rate.
        link.record_drain(1, Duration::ZERO);
        assert!(link.estimate().drain_rate.unwrap().is_finite());
    }
}
