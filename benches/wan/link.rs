//! One direction of the emulated link, without any I/O: given a packet's
//! length and its arrival time, decide whether it is dropped at the queue,
//! lost on the wire, or delivered, and when.
//!
//! The model is a single bottleneck: packets wait in a drop-tail FIFO for
//! the link, take `len / rate` to serialise, then fly for the fixed one-way
//! delay. The queue's occupancy is never stored; it follows from when the
//! link will next be free (`(link_free - now) × rate`), so the model needs
//! no timer of its own.

use std::time::{Duration, Instant};

/// What happens to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Hand it to the other side at this instant.
    Deliver(Instant),
    /// Serialised, then lost on the wire (it used link time all the same).
    Lost,
    /// The queue had no room for it; it never reached the link.
    QueueFull,
}

pub struct Direction {
    delay: Duration,
    /// Probability of loss scaled to `u64::MAX`, so a draw is one compare.
    loss_threshold: u64,
    rate_bits_per_sec: u64,
    queue_bytes: usize,
    rng: XorShift,
    /// When the last admitted packet finishes serialising.
    link_free: Instant,
}

impl Direction {
    pub fn new(
        delay: Duration,
        loss: f64,
        rate_bits_per_sec: u64,
        queue_bytes: usize,
        seed: u64,
    ) -> Self {
        Self {
            delay,
            loss_threshold: (loss.clamp(0.0, 1.0) * u64::MAX as f64) as u64,
            rate_bits_per_sec,
            queue_bytes,
            rng: XorShift::new(seed),
            link_free: Instant::now(),
        }
    }

    pub fn admit(&mut self, now: Instant, len: usize) -> Verdict {
        let start = self.link_free.max(now);
        if self.rate_bits_per_sec > 0 {
            if self.queue_bytes > 0 {
                let waiting = start - now;
                let queued =
                    waiting.as_nanos() * u128::from(self.rate_bits_per_sec) / 8 / 1_000_000_000;
                if queued + len as u128 > self.queue_bytes as u128 {
                    return Verdict::QueueFull;
                }
            }
            let nanos = len as u128 * 8 * 1_000_000_000 / u128::from(self.rate_bits_per_sec);
            self.link_free = start + Duration::from_nanos(nanos as u64);
        }
        // Draw for every admitted packet, lost or not, so the loss pattern
        // depends only on the seed and the packet sequence.
        if self.loss_threshold > 0 && self.rng.next() < self.loss_threshold {
            return Verdict::Lost;
        }
        Verdict::Deliver(self.link_free.max(now) + self.delay)
    }
}

/// xorshift64*: tiny, fast and good enough for Bernoulli draws; the seed is
/// scrambled with splitmix64 first so nearby seeds give unrelated streams
/// (and 0 is a valid seed).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
