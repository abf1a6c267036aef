//! A wide-area link as the tests need one: a one-way path that delays each datagram by a
//! fixed latency plus jitter, drops a share of them, and may carry only so many bytes a
//! second (a drop-tail queue of [`QUEUE_US`] in front of it), with explicit time and a seeded
//! random source (this kernel has no `netem`; the `swactor` crate's `wan` driver carries
//! the datagrams between sockets).
//!
//! Datagrams leave in the order they arrived, as on one real path: a datagram whose
//! jittered due time falls before its predecessor's waits for it. Losses are independent
//! draws of the seeded source, so a given seed and arrival order give the same datagrams
//! dropped on every run.

use std::collections::VecDeque;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use thiserror::Error;

/// What a one-way link does to each datagram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    /// One-way latency, microseconds (half of the round trip of a symmetric pair).
    pub delay_us: u64,
    /// Each datagram's latency varies uniformly within `delay_us ± jitter_us` (never
    /// below zero).
    pub jitter_us: u64,
    /// The share of datagrams dropped, 0.0 to 1.0.
    pub loss: f64,
    /// Bytes per second the link carries (`None`: as fast as they come).
    pub rate_bytes_per_s: Option<u64>,
}

/// How long a rate-limited link's queue may hold (beyond that it drops what arrives, as a
/// router's buffer does), microseconds.
pub const QUEUE_US: u64 = 100_000;

/// Why a [`LinkSpec`] is refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum LinkSpecError {
    /// A rate of zero bytes a second.
    #[error("the rate must be above zero")]
    Rate,
    /// The loss share is not a number from 0 to 1.
    #[error("loss must be a share from 0 to 1, got {0}")]
    Loss(f64),
    /// The jitter is larger than the delay it varies.
    #[error("jitter {jitter_us} us exceeds the delay {delay_us} us")]
    Jitter {
        /// The delay given.
        delay_us: u64,
        /// The jitter given.
        jitter_us: u64,
    },
}

impl LinkSpec {
    /// A link of `rtt_us` round trip when used in both directions (half of it each way),
    /// `jitter_us` each way and `loss` each way.
    pub fn symmetric(rtt_us: u64, jitter_us: u64, loss: f64) -> Result<LinkSpec, LinkSpecError> {
        LinkSpec { delay_us: rtt_us / 2, jitter_us, loss, rate_bytes_per_s: None }.checked()
    }

    /// The same link carrying at most `bytes_per_s` each way (`None`: unlimited).
    pub fn with_rate(self, bytes_per_s: Option<u64>) -> Result<LinkSpec, LinkSpecError> {
        LinkSpec { rate_bytes_per_s: bytes_per_s, ..self }.checked()
    }

    /// The spec, if its values make a link.
    pub fn checked(self) -> Result<LinkSpec, LinkSpecError> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(LinkSpecError::Loss(self.loss));
        }
        if self.rate_bytes_per_s == Some(0) {
            return Err(LinkSpecError::Rate);
        }
        if self.jitter_us > self.delay_us {
            return Err(LinkSpecError::Jitter {
                delay_us: self.delay_us,
                jitter_us: self.jitter_us,
            });
        }
        Ok(self)
    }
}

/// What became of a datagram handed to [`Link::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Dropped (the loss draw, or a full queue).
    Dropped,
    /// Queued; it leaves at `due_us`.
    Queued {
        /// When [`Link::pop_due`] hands it out.
        due_us: u64,
    },
}

/// Datagrams through a link so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams handed to the link.
    pub arrived: u64,
    /// Of those, dropped.
    pub dropped: u64,
    /// Of those, handed out again.
    pub delivered: u64,
}

/// One direction of a wide-area path: datagrams `P` in, the same datagrams out later.
#[derive(Debug)]
pub struct Link<P> {
    spec: LinkSpec,
    rng: StdRng,
    queue: VecDeque<(u64, P)>,
    stats: LinkStats,
    /// When the link has sent every byte queued so far (a rate-limited link).
    sent_by_us: u64,
}

impl<P> Link<P> {
    /// An empty link behaving as `spec`, its draws from `seed`.
    pub fn new(spec: LinkSpec, seed: u64) -> Link<P> {
        Link {
            spec,
            rng: StdRng::seed_from_u64(seed),
            queue: VecDeque::new(),
            stats: LinkStats::default(),
            sent_by_us: 0,
        }
    }

    /// A datagram of `bytes` arriving at `now_us`: dropped, or queued to leave after the
    /// link has sent it (at its rate, after what came before), then its latency, and after
    /// every datagram queued before it.
    pub fn push(&mut self, now_us: u64, bytes: usize, datagram: P) -> Admit {
        self.stats.arrived += 1;
        let LinkSpec { delay_us, jitter_us, loss, rate_bytes_per_s } = self.spec;
        if loss > 0.0 && self.rng.random::<f64>() < loss {
            self.stats.dropped += 1;
            return Admit::Dropped;
        }
        let sent_us = match rate_bytes_per_s {
            Some(rate) => {
                let start = self.sent_by_us.max(now_us);
                if start - now_us > QUEUE_US {
                    self.stats.dropped += 1;
                    return Admit::Dropped;
                }
                self.sent_by_us = start + (bytes as u64 * 1_000_000).div_ceil(rate);
                self.sent_by_us
            }
            None => now_us,
        };
        let latency = if jitter_us == 0 {
            delay_us
        } else {
            delay_us - jitter_us + self.rng.random_range(0..=2 * jitter_us)
        };
        let after = self.queue.back().map_or(0, |&(due, _)| due);
        let due_us = (sent_us + latency).max(after);
        self.queue.push_back((due_us, datagram));
        Admit::Queued { due_us }
    }

    /// The next datagram whose time has come at `now_us`, if any.
    pub fn pop_due(&mut self, now_us: u64) -> Option<P> {
        if self.queue.front()?.0 > now_us {
            return None;
        }
        self.stats.delivered += 1;
        self.queue.pop_front().map(|(_, p)| p)
    }

    /// When the next queued datagram is due, if one is queued.
    pub fn next_due(&self) -> Option<u64> {
        self.queue.front().map(|&(due, _)| due)
    }

    /// The counts so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// What the link does to each datagram.
    pub fn spec(&self) -> LinkSpec {
        self.spec
    }
}

#[cfg(test)]
mod tests;
