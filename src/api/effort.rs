//! How hard to compress a response, chosen from what the link it leaves on
//! has shown (issue 15: "when the link, not the CPU, is the bottleneck,
//! spend more CPU on compression").
//!
//! A pure function of measured figures, so it can be tested without a
//! network: [`effort_for`] takes the link's drain rate (measured by the
//! response stream from how long the transport took to take each message)
//! and its round-trip time, and picks the zstd level (or none) that moves a
//! byte of rows across soonest: compression time per byte plus the time its
//! output takes on the link.
//!
//! Compressing and writing run one after the other on the response's task
//! (`Chunks::with_producer`), so the two times add. On a link faster than
//! ~45 MB/s (this loaded VM; ~150 MB/s idle) no level pays for itself: every
//! compressed byte costs more CPU than the bytes it saves take to send.

use std::time::Duration;

/// What is known of the link a response leaves on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkEstimate {
    /// Bytes per second the transport took while the response waited on it
    /// (the link, or the reader behind it, was the bottleneck). `None`
    /// until a response on this connection has had to wait.
    pub drain_rate: Option<f64>,
    /// The connection's smoothed round-trip time, if the transport says.
    pub rtt: Option<Duration>,
}

/// How to encode one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effort {
    /// Send it as it is: compressing would cost more time than it saves.
    None,
    /// Compress; with zstd at this level (other encodings have one level).
    Zstd(i32),
}

/// The level used when nothing has been measured yet on a link that is
/// not known to be near: what both roles used before the level was chosen
/// per link (see `compression.rs`), safe on a slow WAN.
pub const DEFAULT_LEVEL: i32 = super::compression::ZSTD_LEVEL;

/// A connection with a round trip below this is taken as near (the same
/// host, rack or zone: links of gigabits per second) until a response
/// measures otherwise: its first messages go uncompressed. The default of
/// `gateway.limits.near_rtt`.
pub const NEAR_RTT: Duration = Duration::from_millis(3);

/// One zstd level on the gateway's streamed rows: the benchmark table's
/// large SELECT encoded as psdb messages of 256 KiB, compressed one by one
/// (`cargo bench --bench codec -- --levels`, README "Codec").
struct LevelCost {
    level: i32,
    /// Input bytes per output byte.
    ratio: f64,
    /// Compression time per input byte.
    ns_per_byte: f64,
}

/// Levels worth choosing on these rows (the rest are slower for output no
/// smaller: level 3 is larger than level 1 on 256 KiB messages, -7 to -1
/// barely faster than -3), from `cargo bench --bench codec -- --levels`,
/// 2026-11-24, on the 2-core VM at a load average of 14 (three builds
/// beside it): the times are about 3.5× those of an idle run, but that is
/// the machine a gateway shares, and the ratios between levels hold.
const LEVELS: [LevelCost; 4] = [
    LevelCost {
        level: -3,
        ratio: 1.977,
        ns_per_byte: 10.87,
    },
    LevelCost {
        level: 1,
        ratio: 2.725,
        ns_per_byte: 15.42,
    },
    LevelCost {
        level: 6,
        ratio: 2.835,
        ns_per_byte: 72.66,
    },
    LevelCost {
        level: 19,
        ratio: 3.075,
        ns_per_byte: 2296.56,
    },
];

/// The effort for `link`: the one that gets a byte of rows across soonest
/// at the measured drain rate, but never less than the round trip's floor.
///
/// The floor is there because a drain rate measured at the writer also
/// counts what the transport buffers: the first megabytes of a response
/// (up to the peer's flow-control window, 8 MiB at our sidecar) are taken
/// as fast as memory, whatever the link. So a far link (round trip of
/// `NEAR_RTT` or more, or unknown) is compressed at least at
/// [`DEFAULT_LEVEL`], and measurements can only raise that; a near one
/// starts uncompressed, and measurements decide.
pub fn effort_for(link: LinkEstimate) -> Effort {
    effort_within(link, NEAR_RTT)
}

/// [`effort_for`], with links of a round trip under `near_rtt` taken as
/// near.
pub fn effort_within(link: LinkEstimate, near_rtt: Duration) -> Effort {
    let floor = match link.rtt {
        Some(rtt) if rtt < near_rtt => Effort::None,
        _ => Effort::Zstd(DEFAULT_LEVEL),
    };
    let Some(rate) = link.drain_rate.filter(|r| r.is_finite() && *r > 0.0) else {
        return floor;
    };
    let measured = fastest_at(rate);
    if rank(measured) >= rank(floor) {
        measured
    } else {
        floor
    }
}

/// The level (or none) that moves a byte across soonest at `rate` bytes
/// per second: compression and writing run one after the other, so their
/// times add.
fn fastest_at(rate: f64) -> Effort {
    let link_ns_per_byte = 1e9 / rate;
    let mut best = (link_ns_per_byte, Effort::None);
    for cost in &LEVELS {
        let total = cost.ns_per_byte + link_ns_per_byte / cost.ratio;
        if total < best.0 {
            best = (total, Effort::Zstd(cost.level));
        }
    }
    best.1
}

/// Orders efforts from none to the strongest level.
fn rank(effort: Effort) -> i32 {
    match effort {
        Effort::None => i32::MIN,
        Effort::Zstd(level) => level,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a near link, where measurements decide alone.
    fn at(bytes_per_second: f64) -> Effort {
        effort_for(LinkEstimate {
            drain_rate: Some(bytes_per_second),
            rtt: Some(Duration::from_micros(80)),
        })
    }

    const MB: f64 = 1e6;

    #[test]
    fn a_fast_link_gets_the_bytes_as_they_are() {
        // Loopback, a sidecar beside its gateway: gigabytes per second.
        assert_eq!(at(2_000.0 * MB), Effort::None);
        assert_eq!(at(400.0 * MB), Effort::None);
    }

    #[test]
    fn slower_links_get_more_compression() {
        // 1 Gbit/s: still faster as it is.
        assert_eq!(at(125.0 * MB), Effort::None);
        // 320 Mbit/s: the cheapest level.
        assert_eq!(at(40.0 * MB), Effort::Zstd(-3));
        // The table's WAN, 50 Mbit/s.
        assert_eq!(at(6.25 * MB), Effort::Zstd(1));
        // A 1 Mbit/s uplink: level 6 saves more time than it costs.
        assert_eq!(at(0.125 * MB), Effort::Zstd(6));
        // Slower still: the strongest level.
        assert_eq!(at(0.01 * MB), Effort::Zstd(19));
    }

    #[test]
    fn effort_never_falls_as_the_link_slows() {
        let mut last = rank(at(10_000.0 * MB));
        let mut rate = 10_000.0 * MB;
        while rate > 1_000.0 {
            rate *= 0.9;
            let now = rank(at(rate));
            assert!(now >= last, "at {rate} B/s: {now} after {last}");
            last = now;
        }
    }

    #[test]
    fn before_any_measurement_the_round_trip_decides() {
        let near = LinkEstimate {
            drain_rate: None,
            rtt: Some(Duration::from_micros(80)),
        };
        assert_eq!(effort_for(near), Effort::None);
        let far = LinkEstimate {
            drain_rate: None,
            rtt: Some(Duration::from_millis(50)),
        };
        assert_eq!(effort_for(far), Effort::Zstd(DEFAULT_LEVEL));
        assert_eq!(
            effort_for(LinkEstimate::default()),
            Effort::Zstd(DEFAULT_LEVEL)
        );
        // A measurement outweighs the round trip either way.
        let slow_near = LinkEstimate {
            drain_rate: Some(6.25 * MB),
            rtt: Some(Duration::from_micros(80)),
        };
        assert_eq!(effort_for(slow_near), Effort::Zstd(1));
        // Where near ends is configured.
        assert_eq!(effort_within(far, Duration::from_millis(60)), Effort::None);
        assert_eq!(
            effort_within(near, Duration::from_micros(50)),
            Effort::Zstd(DEFAULT_LEVEL)
        );
    }

    #[test]
    fn a_far_link_is_never_compressed_less_than_the_default() {
        // What a 50 ms link's transport buffers is taken at memory speed.
        let far = |rate: f64| LinkEstimate {
            drain_rate: Some(rate),
            rtt: Some(Duration::from_millis(50)),
        };
        assert_eq!(effort_for(far(2_000.0 * MB)), Effort::Zstd(DEFAULT_LEVEL));
        assert_eq!(effort_for(far(125.0 * MB)), Effort::Zstd(DEFAULT_LEVEL));
        // Slow enough, and it is compressed harder.
        assert_eq!(effort_for(far(0.125 * MB)), Effort::Zstd(6));
    }

    #[test]
    fn nonsense_measurements_fall_back_to_the_prior() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let link = LinkEstimate {
                drain_rate: Some(rate),
                rtt: None,
            };
            assert_eq!(effort_for(link), Effort::Zstd(DEFAULT_LEVEL), "{rate}");
        }
    }
}
