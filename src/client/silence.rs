//! Noticing that the QUIC path has gone silent long before QUIC's idle
//! timeout declares the connection dead.
//!
//! A firewall that starts dropping UDP looks, from the client, like a
//! connection that simply stops hearing back: packets leave, nothing
//! arrives, and only the idle timeout (3 s) ends it. Waiting for that
//! costs every request made meanwhile — each would be written into the
//! black hole and come back as lost. Instead the supervisor samples the
//! connection's counters and measures how long packets that the peer must
//! acknowledge (anything but ACKs) have gone unanswered:
//!
//! - past [`hold_after`] (a few round trips, at least 300 ms) it stops
//!   handing the connection out: new requests wait rather than be written
//!   into what may be a black hole, and go on as soon as the peer is heard
//!   again — a slow path costs them that wait, never a failure;
//! - past `h3_silence_timeout` (1 s) it races HTTP/2.
//!
//! An idle connection cannot look silent: nothing awaits an answer until
//! the next keep-alive PING, which a live peer acknowledges within a
//! round trip.

use std::time::Duration;

use tokio::time::{Instant, MissedTickBehavior};

use crate::transport::client::Connection;
use crate::transport::quic::PathActivity;

/// How often the counters are read: cheap (a lock and a copy), and fine
/// enough against a one-second threshold.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(50);

/// What a live peer's answer may take: its maximum ACK delay (QUIC's
/// default, 25 ms) on top of the round trip.
const ACK_DELAY: Duration = Duration::from_millis(25);
/// A floor under the hold threshold, so that a loopback round trip of
/// microseconds does not turn a scheduling hiccup into held requests.
const MIN_HOLD_AFTER: Duration = Duration::from_millis(300);

/// How long a path may stay silent before new requests are held back:
/// four answers' worth of time (a lost packet and its retransmission fit
/// in it), at least [`MIN_HOLD_AFTER`], at most `race_after`.
pub(super) fn hold_after(rtt: Duration, race_after: Duration) -> Duration {
    (4 * (rtt + ACK_DELAY)).max(MIN_HOLD_AFTER).min(race_after)
}

/// Measures, from successive samples of a connection's counters, how long
/// ack-eliciting packets have waited without a single datagram from the
/// peer.
#[derive(Debug)]
pub(super) struct SilenceClock {
    last: PathActivity,
    /// When packets that need an answer were first seen going out
    /// unanswered; `None` while the peer has answered everything seen.
    waiting_since: Option<Instant>,
}

impl SilenceClock {
    pub(super) fn new(initial: PathActivity) -> Self {
        Self {
            last: initial,
            waiting_since: None,
        }
    }

    /// Takes one sample; how long the path has been silent (zero while
    /// nothing waits for the peer, or the peer was heard since).
    ///
    /// A sample in which the peer was heard clears the wait even if
    /// something was also sent after it: within one sampling interval the
    /// order is unknown, and assuming the kinder one only delays noticing
    /// by one retransmission, which is itself a send seen in a later
    /// sample.
    pub(super) fn observe(&mut self, now: Instant, sample: PathActivity) -> Duration {
        if sample.datagrams_received != self.last.datagrams_received {
            self.waiting_since = None;
        } else if sample.ack_eliciting_sent != self.last.ack_eliciting_sent
            && self.waiting_since.is_none()
        {
            self.waiting_since = Some(now);
        }
        self.last = sample;
        self.waiting_since
            .map_or(Duration::ZERO, |since| now.saturating_duration_since(since))
    }

    /// Whether the peer has been heard since the last sample.
    pub(super) fn heard(&self, sample: PathActivity) -> bool {
        sample.datagrams_received != self.last.datagrams_received
    }
}

/// Resolves once `conn`'s QUIC path has left packets unanswered for
/// [`hold_after`] its round trip, with how long it has been silent.
pub(super) async fn path_silent(conn: &Connection, race_after: Duration) -> Duration {
    let Some(first) = conn.path_activity() else {
        return std::future::pending().await;
    };
    let mut clock = SilenceClock::new(first);
    let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(sample) = conn.path_activity() else {
            return std::future::pending().await;
        };
        let silent = clock.observe(Instant::now(), sample);
        if silent >= hold_after(sample.rtt, race_after) {
            return silent;
        }
    }
}

/// Resolves when `conn` hears from its peer again.
pub(super) async fn path_heard(conn: &Connection) {
    let Some(first) = conn.path_activity() else {
        return std::future::pending().await;
    };
    let clock = SilenceClock::new(first);
    let mut ticks = tokio::time::interval(SAMPLE_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match conn.path_activity() {
            Some(sample) if clock.heard(sample) => return,
            Some(_) => {}
            None => return std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity(received: u64, sent: u64) -> PathActivity {
        PathActivity {
            datagrams_received: received,
            ack_eliciting_sent: sent,
            rtt: Duration::from_millis(1),
        }
    }

    #[test]
    fn requests_are_held_after_a_few_round_trips_of_silence() {
        let second = Duration::from_secs(1);
        assert_eq!(
            hold_after(Duration::from_micros(200), second),
            MIN_HOLD_AFTER
        );
        assert_eq!(
            hold_after(Duration::from_millis(100), second),
            Duration::from_millis(500)
        );
        assert_eq!(hold_after(Duration::from_millis(400), second), second);
    }

    #[test]
    fn silence_counts_only_while_something_waits_for_an_answer() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut clock = SilenceClock::new(activity(10, 10));
        // Idle: nothing sent, nothing heard — not silence.
        assert_eq!(clock.observe(at(500), activity(10, 10)), Duration::ZERO);
        // A keep-alive answered within the same sample.
        assert_eq!(clock.observe(at(1000), activity(11, 11)), Duration::ZERO);
        // Sent, unanswered: the clock runs from the sample that saw it.
        assert_eq!(clock.observe(at(1050), activity(11, 12)), Duration::ZERO);
        assert_eq!(
            clock.observe(at(1400), activity(11, 12)),
            Duration::from_millis(350)
        );
        // Retransmissions do not restart it.
        assert_eq!(
            clock.observe(at(1600), activity(11, 14)),
            Duration::from_millis(550)
        );
        // Anything heard stops it.
        assert!(clock.heard(activity(12, 14)));
        assert_eq!(clock.observe(at(1650), activity(12, 14)), Duration::ZERO);
        assert_eq!(clock.observe(at(3000), activity(12, 14)), Duration::ZERO);
    }
}
