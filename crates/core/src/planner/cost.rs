//! The cost model: how long a stage's step and a hop take, from what each node measured of
//! itself at boot ([`NodeSpeed`]) and the round trips the orchestrator measured, and what
//! that makes of a plan's decode rate and time to first token (`specs/cost-model.md`).
//!
//! A step of `rows` rows over a stage's weights costs, for each weight format `f` of the
//! model (bytes `B_f`, weights `W_f`, in the stage's share): `B_f / bandwidth` to read
//! them or `rows x W_f / rate_f` to compute (the one-row rate for a decode step, the
//! many-row rate for more), whichever is slower: the kernels prefetch, so reading and
//! computing overlap, and the bandwidth is the kernels' own streaming rate where that beats
//! a plain read loop. A hop costs half the link's round
//! trip, the hop's own cost ([`HOP_US`]), and its bytes at [`ASSUMED_LINK_MBS`].

use crate::model::ModelFacts;
use crate::wire::{LayerRange, NodeSpeed};

/// The round trip assumed for a link nobody measured (a LAN's), microseconds.
pub const ASSUMED_RTT_US: u64 = 500;

/// A hop's own cost beyond the link, microseconds: the object's write, QUIC, the ring and
/// the consumer's wake-up (`bench edge` measures 65-75 us for a decode-sized hop on
/// loopback).
pub const HOP_US: f64 = 80.0;

/// A stage step's own cost beyond its products, microseconds: the worker's wake-up, norms,
/// attention over a short context, the batch's bookkeeping.
pub const STEP_US: f64 = 150.0;

/// The link bandwidth assumed for a hop's bytes where the link's was not measured (or
/// was too fast for the probe to tell), MB/s: 1 Gbit/s.
pub const ASSUMED_LINK_MBS: f64 = 125.0;

/// QUIC's initial congestion window, bytes (ten datagrams of 1200 bytes): an edge's first
/// object larger than this takes more round trips while the window grows.
pub const INITIAL_WINDOW: u64 = 12_000;

/// Prompt rows per micro-batch (the scheduler's default token budget): a longer prompt
/// is prefilled a chunk per round trip.
pub const PREFILL_CHUNK: u32 = 512;

/// One node's costs for one model, seconds per byte of weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeCost {
    /// Reading one byte from memory.
    read: f64,
    /// Computing one byte's weights for one row, with the one-row kernels.
    decode: f64,
    /// Computing one byte's weights for one row, with the many-row kernels.
    prefill: f64,
}

impl NodeCost {
    /// The costs of `speed` for `model`'s weight formats; `None` without a bandwidth or
    /// with no format measured. A format the node did not measure costs as its slowest.
    pub fn of(speed: &NodeSpeed, model: &ModelFacts) -> Option<NodeCost> {
        let positive = |r: u64| (r > 0).then_some(r as f64 * 1e6);
        let read = 1.0 / positive(speed.read_mbs)?;
        let slowest = |pick: fn(&crate::wire::FormatRate) -> u64| {
            speed.formats.iter().filter_map(|f| positive(pick(f))).reduce(f64::min)
        };
        let (slow_decode, slow_prefill) =
            (slowest(|f| f.decode_mmacs)?, slowest(|f| f.prefill_mmacs)?);
        let total: u64 = model.bytes.formats.values().map(|f| f.bytes).sum();
        if total == 0 {
            // No format tally (a plan from facts without one): weights of about a byte.
            return Some(NodeCost { read, decode: 1.0 / slow_decode, prefill: 1.0 / slow_prefill });
        }
        let (mut decode, mut prefill) = (0.0, 0.0);
        for (name, f) in &model.bytes.formats {
            let rate = speed.format(name);
            let d = rate.and_then(|r| positive(r.decode_mmacs)).unwrap_or(slow_decode);
            let p = rate.and_then(|r| positive(r.prefill_mmacs)).unwrap_or(slow_prefill);
            // Seconds per byte of this format, weighted by its share of the bytes.
            decode += f.weights as f64 / d / total as f64;
            prefill += f.weights as f64 / p / total as f64;
        }
        Some(NodeCost { read, decode, prefill })
    }

    /// Microseconds of one step of `rows` rows over `bytes` of weights: the first row reads
    /// the weights or computes them, whichever is slower (the kernels prefetch, so one hides
    /// the other), and every further row adds its compute at the many-row rate. Measured
    /// with `bench engine` on this 2-core Xeon (one thread, 1.1B Q8_0): steps of 1, 2, 4 and 8
    /// rows took 91, 95, 112 and 149 ms; with that host's calibration this gives about 92,
    /// 102, 122 and 162, where reading and computing hiding each other at every row count
    /// (the roofline) gives 92 for all four. A 36-row prefill took 366 ms, this gives about
    /// 420 (the roofline 380): long prompts are over-predicted by up to a sixth.
    pub fn step_us(&self, bytes: u64, rows: u32) -> f64 {
        let extra = f64::from(rows.max(1) - 1);
        let first = self.read.max(self.decode.max(self.prefill));
        STEP_US + bytes as f64 * (first + extra * self.prefill) * 1e6
    }
}

/// The bytes a stage over `range` reads per step: its blocks' active weights and, on the
/// last stage, the head (the embedding's one row is left out).
pub fn stage_step_bytes(model: &ModelFacts, range: LayerRange, last: bool) -> u64 {
    let blocks: u64 =
        (range.start..range.end).map(|b| model.bytes.active_of_block(b as usize)).sum();
    blocks + if last { model.bytes.head } else { 0 }
}

/// Microseconds of a stage's prefill of `prompt` rows (in chunks of [`PREFILL_CHUNK`]):
/// every chunk reads the blocks and computes its rows; the head computes one row.
pub fn stage_prefill_us(
    cost: &NodeCost,
    model: &ModelFacts,
    range: LayerRange,
    last: bool,
    prompt: u32,
) -> f64 {
    let blocks = stage_step_bytes(model, range, false);
    let (mut left, mut us) = (prompt.max(1), 0.0);
    while left > 0 {
        let rows = left.min(PREFILL_CHUNK);
        us += cost.step_us(blocks, rows);
        left -= rows;
    }
    us + if last { cost.step_us(model.bytes.head, 1) - STEP_US } else { 0.0 }
}

/// Microseconds of a one-way hop of `bytes` over a link of round trip `rtt_us`.
pub fn hop_us(rtt_us: u64, bytes: u64, link_mbs: f64) -> f64 {
    rtt_us as f64 / 2.0 + HOP_US + bytes as f64 / link_mbs
}

/// Microseconds `bytes` take over a link of round trip `rtt_us` and bandwidth `link_mbs` on a
/// connection that has carried nothing yet, beyond the hop's own latency: the slow start's
/// round trips ([`slow_start_us`]) or the bytes at the link's rate, whichever is longer (the
/// window grows until the link is full, then the rate bounds it).
pub fn transfer_us(rtt_us: u64, bytes: u64, link_mbs: f64) -> f64 {
    slow_start_us(rtt_us, bytes).max(bytes as f64 / link_mbs)
}

/// A link's bandwidth fitted from one timed transfer of `bytes` on a fresh stream (from the
/// request to the last byte, `elapsed_us`) over a round trip of `rtt_us`, by
/// [`transfer_us`]'s terms: the request's round trip, then the bytes at the link's rate, in
/// bytes per second. `None` when that is not clearly longer than the slow start alone (by
/// half: real slow starts run a little longer than modelled): the link is too fast for the
/// probe to tell, and the plan assumes [`ASSUMED_LINK_MBS`].
pub fn fitted_bytes_per_s(bytes: u64, elapsed_us: u64, rtt_us: u64) -> Option<u64> {
    let carried = elapsed_us as f64 - rtt_us as f64;
    let rate_bound = carried > 1.5 * slow_start_us(rtt_us, bytes) && carried > 0.0;
    rate_bound.then(|| (bytes as f64 * 1e6 / carried) as u64)
}

/// Microseconds a fresh connection's slow start adds to the first `bytes` over a link of
/// round trip `rtt_us`: none within [`INITIAL_WINDOW`], else a round trip per doubling of
/// the window (`log2(bytes / window + 1)`; fitted on the WAN suite: an 83 KB prompt hop
/// took 3.7 round trips where this gives 3.5).
pub fn slow_start_us(rtt_us: u64, bytes: u64) -> f64 {
    if bytes <= INITIAL_WINDOW {
        return 0.0;
    }
    rtt_us as f64 * (bytes as f64 / INITIAL_WINDOW as f64 + 1.0).log2()
}

/// The round trip of the link between two nodes, estimated from each one's round trip to
/// the orchestrator: their mean (the orchestrator does not see the link itself).
pub fn link_rtt_us(a: u64, b: u64) -> u64 {
    a.midpoint(b)
}
