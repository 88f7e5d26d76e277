//! BBR whose window follows the delivery rate it measures.
//!
//! quinn 0.11's BBR computes a pacing rate but quinn never uses it: the
//! pacer sends at 1.25 × window / smoothed RTT. BBR's window is meant to be
//! a cap (2 × the bandwidth-delay product), yet quinn's grows without such
//! a bound — in STARTUP it only stops growing when three rounds show no
//! bandwidth growth, which random loss and app-limited rounds keep from
//! happening, and later it adds the largest ACK aggregation seen. On the
//! benchmark's WAN (50 Mbit/s, 50 ms: 312 KB in flight fill the pipe) we
//! measured windows of 2–2.5 MB: the pacer then runs at several times the
//! link rate, a 512 KiB router queue overflows, and a 10 MB transfer put
//! 1.5–2× its size on the wire (benches/quic_link.rs,
//! benches/results/profiles/wan.md).
//!
//! [`BoundedBbr`] keeps quinn's BBR for everything it does well (it does
//! not back off on random loss) and caps its window at
//! `gain × max delivery rate × min RTT`, the bandwidth-delay product the
//! acknowledgements themselves show. With a gain of 2 at most one BDP
//! waits in the bottleneck's queue, and the window can still double per
//! round trip while the measured rate grows, as in slow start.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quinn::congestion::{BbrConfig, Controller, ControllerFactory, ControllerMetrics};
use quinn_proto::RttEstimator;

/// How many bandwidth-delay products may be in flight: one fills the pipe,
/// the second covers ACK aggregation and delayed ACKs (BBR's own cwnd
/// gain), and at most that much queues at the bottleneck.
const WINDOW_GAIN: f64 = 2.0;
/// Delivery-rate samples kept by the max filter: each spans at least one
/// round trip, so this remembers about ten round trips of sending.
const SAMPLES: usize = 10;
/// The shortest round trip the estimator works with: a rate sample spans
/// at least this long, and the window is at least this long's worth of the
/// measured rate (times [`WINDOW_GAIN`]). On loopback quinn's minimum RTT
/// reads 0–50 µs, which made the bandwidth-delay product zero and pinned
/// the window at the initial 240 kB, below BBR's own 370–480 kB: the sender
/// went ACK by ACK, in part-filled GSO batches, and each ACK woke both
/// ends. A receiver's ACK waits for its connection task, and on a busy host
/// that takes a scheduling slice, not 50 µs. Paths over 1 ms (any WAN) are
/// unchanged; on a sub-millisecond LAN this is at most 2 ms of the measured
/// rate in flight (`benches/results/profiles/sidecar.md`, issue 15).
const MIN_RTT_FLOOR: Duration = Duration::from_millis(1);

/// Builds [`BoundedBbr`] controllers.
#[derive(Debug, Default)]
pub struct BoundedBbrConfig {
    bbr: Arc<BbrConfig>,
}

impl ControllerFactory for BoundedBbrConfig {
    fn build(self: Arc<Self>, now: Instant, current_mtu: u16) -> Box<dyn Controller> {
        Box::new(BoundedBbr::new(&self.bbr, now, current_mtu))
    }
}

/// quinn's BBR with its window capped by the measured bandwidth-delay
/// product (see the module documentation).
pub struct BoundedBbr {
    inner: Box<dyn Controller>,
    rate: DeliveryRate,
    min_rtt: Option<Duration>,
    current_mtu: u16,
}

impl BoundedBbr {
    fn new(bbr: &Arc<BbrConfig>, now: Instant, current_mtu: u16) -> Self {
        Self {
            inner: Arc::clone(bbr).build(now, current_mtu),
            rate: DeliveryRate::default(),
            min_rtt: None,
            current_mtu,
        }
    }

    /// The cap, once a round trip of sending has been measured.
    fn cap(&self) -> Option<u64> {
        let bytes_per_sec = self.rate.max()?;
        let min_rtt = self.min_rtt?;
        let bdp = bytes_per_sec * min_rtt.max(MIN_RTT_FLOOR).as_secs_f64();
        // Never below the initial window: a cap from a slow first sample
        // must not hold the connection below where it started.
        Some(((WINDOW_GAIN * bdp) as u64).max(self.inner.initial_window()))
    }
}

impl Controller for BoundedBbr {
    fn on_sent(&mut self, now: Instant, bytes: u64, last_packet_number: u64) {
        self.inner.on_sent(now, bytes, last_packet_number);
    }

    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        self.min_rtt = Some(rtt.min());
        self.rate.on_ack(now, sent, bytes, app_limited, rtt.min());
        self.inner.on_ack(now, sent, bytes, app_limited, rtt);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        in_flight: u64,
        app_limited: bool,
        largest_packet_num_acked: Option<u64>,
    ) {
        self.inner
            .on_end_acks(now, in_flight, app_limited, largest_packet_num_acked);
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent: Instant,
        is_persistent_congestion: bool,
        lost_bytes: u64,
    ) {
        self.inner
            .on_congestion_event(now, sent, is_persistent_congestion, lost_bytes);
    }

    fn on_mtu_update(&mut self, new_mtu: u16) {
        self.current_mtu = new_mtu;
        self.inner.on_mtu_update(new_mtu);
    }

    fn window(&self) -> u64 {
        let window = self.inner.window();
        match self.cap() {
            Some(cap) => window.min(cap),
            None => window,
        }
    }

    fn metrics(&self) -> ControllerMetrics {
        let mut m = self.inner.metrics();
        m.congestion_window = self.window();
        m
    }

    fn clone_box(&self) -> Box<dyn Controller> {
        Box::new(Self {
            inner: self.inner.clone_box(),
            rate: self.rate.clone(),
            min_rtt: self.min_rtt,
            current_mtu: self.current_mtu,
        })
    }

    fn initial_window(&self) -> u64 {
        self.inner.initial_window()
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The delivery rate: bytes acknowledged over intervals of at least one
/// minimum RTT, keeping the largest of the last [`SAMPLES`] intervals in
/// which the sender always had data waiting (an app-limited interval
/// measures the application, not the path, and is dropped).
///
/// As in BBR's delivery-rate samples, an interval lasts at least as long as
/// the acknowledged packets took to *send*: a receiver or a link that was
/// held up and then delivers a backlog at once (ACK compression, common on
/// a busy machine) makes acknowledgements arrive faster than the path ever
/// carried the data, but cannot make them older than they are.
#[derive(Clone, Debug, Default)]
struct DeliveryRate {
    interval: Option<Interval>,
    /// Bytes per second, oldest first.
    samples: std::collections::VecDeque<f64>,
}

#[derive(Clone, Copy, Debug)]
struct Interval {
    start: Instant,
    bytes: u64,
    app_limited: bool,
    /// When the earliest and the latest packet acknowledged in the
    /// interval were sent.
    sent: Option<(Instant, Instant)>,
}

impl DeliveryRate {
    fn on_ack(
        &mut self,
        now: Instant,
        sent: Instant,
        bytes: u64,
        app_limited: bool,
        min_rtt: Duration,
    ) {
        let Some(interval) = &mut self.interval else {
            // The first acknowledgement opens an interval; its own bytes
            // were delivered before it.
            self.interval = Some(Interval {
                start: now,
                bytes: 0,
                app_limited,
                sent: None,
            });
            return;
        };
        interval.bytes += bytes;
        interval.app_limited |= app_limited;
        interval.sent = Some(match interval.sent {
            None => (sent, sent),
            Some((first, last)) => (first.min(sent), last.max(sent)),
        });
        let acked_over = now.saturating_duration_since(interval.start);
        if acked_over < min_rtt.max(MIN_RTT_FLOOR) {
            return;
        }
        let sent_over = interval
            .sent
            .map_or(Duration::ZERO, |(first, last)| last - first);
        let elapsed = acked_over.max(sent_over);
        if !interval.app_limited {
            if self.samples.len() == SAMPLES {
                self.samples.pop_front();
            }
            self.samples
                .push_back(interval.bytes as f64 / elapsed.as_secs_f64());
        }
        self.interval = Some(Interval {
            start: now,
            bytes: 0,
            app_limited: false,
            sent: None,
        });
    }

    fn max(&self) -> Option<f64> {
        self.samples.iter().copied().reduce(f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RTT: Duration = Duration::from_millis(50);

    /// Acknowledgements of `rate` bytes per second, one per `step`, from
    /// `start` for `span`, each for a packet sent one RTT earlier.
    fn feed(r: &mut DeliveryRate, start: Instant, span: Duration, rate: f64, app_limited: bool) {
        let step = Duration::from_millis(1);
        let mut t = start;
        while t < start + span {
            t += step;
            let bytes = (rate * step.as_secs_f64()) as u64;
            r.on_ack(t, t - RTT, bytes, app_limited, RTT);
        }
    }

    #[test]
    fn a_burst_of_late_acknowledgements_is_not_a_faster_path() {
        // Packets sent at 6.25 MB/s for 200 ms; the receiver was held up
        // and acknowledges all of them within 50 ms.
        let mut r = DeliveryRate::default();
        let t0 = Instant::now();
        let packets = 1000u32;
        let sent_span = Duration::from_millis(200);
        let acked_span = RTT;
        for i in 0..=packets {
            let sent = t0 + sent_span * i / packets;
            let acked = t0 + sent_span + acked_span * i / packets;
            r.on_ack(acked, sent, 1250, false, RTT);
        }
        let max = r.max().unwrap();
        assert!(max < 6.25e6 * 1.05, "{max}");
    }

    #[test]
    fn the_rate_is_what_the_acknowledgements_show() {
        let mut r = DeliveryRate::default();
        assert_eq!(r.max(), None);
        feed(&mut r, Instant::now(), RTT * 4, 6.25e6, false);
        let max = r.max().unwrap();
        assert!((max - 6.25e6).abs() / 6.25e6 < 0.03, "{max}");
    }

    #[test]
    fn app_limited_intervals_are_not_samples() {
        let mut r = DeliveryRate::default();
        feed(&mut r, Instant::now(), RTT * 4, 1e5, true);
        assert_eq!(r.max(), None);
    }

    #[test]
    fn old_samples_age_out() {
        let mut r = DeliveryRate::default();
        let t0 = Instant::now();
        feed(&mut r, t0, RTT * 2, 10e6, false);
        assert!(r.max().unwrap() > 9e6);
        // Ten more round trips at a lower rate replace them.
        feed(&mut r, t0 + RTT * 2, RTT * 12, 2e6, false);
        let max = r.max().unwrap();
        assert!(max < 2.2e6, "{max}");
    }

    #[test]
    fn the_window_is_capped_at_twice_the_measured_bdp() {
        let now = Instant::now();
        let bounded = &mut BoundedBbr::new(&Arc::default(), now, 1200);
        assert_eq!(bounded.window(), bounded.initial_window());
        bounded.min_rtt = Some(RTT);
        // 6.25 MB/s (50 Mbit/s) × 50 ms = 312.5 kB; twice that.
        feed(&mut bounded.rate, now, RTT * 3, 6.25e6, false);
        let cap = bounded.cap().unwrap();
        assert!((cap as f64 - 625e3).abs() / 625e3 < 0.03, "{cap}");
        assert!(bounded.window() <= cap);
        // A trickle never caps the window below where it started.
        let mut slow = DeliveryRate::default();
        feed(&mut slow, now, RTT * 3, 1e3, false);
        bounded.rate = slow;
        assert_eq!(bounded.cap(), Some(bounded.initial_window()));
    }

    #[test]
    fn a_loopback_min_rtt_of_zero_still_leaves_a_millisecond_in_flight() {
        let now = Instant::now();
        let bounded = &mut BoundedBbr::new(&Arc::default(), now, 1200);
        // quinn's minimum RTT as read on loopback, and 400 MB/s delivered.
        bounded.min_rtt = Some(Duration::ZERO);
        feed(&mut bounded.rate, now, RTT * 3, 400e6, false);
        // 2 × 400 MB/s × 1 ms = 800 kB, not the initial 240 kB.
        let cap = bounded.cap().unwrap();
        assert!((cap as f64 - 800e3).abs() / 800e3 < 0.03, "{cap}");
    }
}
