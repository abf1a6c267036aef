//! The simulation's stand-in for a model: a tiny deterministic "network" with the shape of
//! the real one — per-slot state that grows with every position (a KV cache), rows that
//! depend only on their own sequence (batch invariance by construction), a last stage that
//! samples — so that a micro-batch through the real stage controllers and the real
//! scheduler must give exactly the tokens of the one-sequence reference.

use crate::wire::batch::{BatchError, BatchLimits, BatchTable, CacheOpKind, EntryFlags, NO_TOKEN};
use crate::wire::cache_ops::{resume_hold, resume_skip};

/// splitmix64's finaliser: a cheap, well-mixed hash step.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Layers of the stand-in model (the simulated plan's blocks).
pub const LAYERS: usize = 6;

/// One slot of one stage: its "KV cache" (positions, and a running state per layer it
/// holds), the state before each position it holds (so it can go back to any of them: a
/// rejected draft's rows, or a prefix a new sequence shares) and its sampler's seed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotState {
    /// Positions cached.
    pub positions: u32,
    /// The running state of each layer (every row of the sequence so far).
    pub state: [u64; LAYERS],
    /// `before[p]`: the state before position `p`.
    pub before: Vec<[u64; LAYERS]>,
    /// The sampler's seed (set at the slot's reset).
    pub seed: u64,
    /// The output row of each position from 0 (a stage that sends rows on logs them, so
    /// that a resumed sequence's kept positions are sent again without computing them).
    pub log: Vec<u32>,
}

impl SlotState {
    /// Drops the positions from `to` on (a rejected draft's rows, or the part of the
    /// slot a new sequence does not share); `false` when it holds fewer than `to`.
    pub fn roll_back(&mut self, to: u32) -> bool {
        if to > self.positions {
            return false;
        }
        if to < self.positions {
            self.state = self.before[to as usize];
            self.before.truncate(to as usize);
            self.positions = to;
        }
        self.log.truncate(to as usize);
        true
    }
}

/// One block of a stage's prompt-cache store: a slot's states before each of its
/// positions, and the state after its last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredBlock {
    before: Vec<[u64; LAYERS]>,
    after: [u64; LAYERS],
    /// The block's logged output rows, where the slot had logged them.
    log: Option<Vec<u32>>,
}

/// A stage's prompt-cache store (`block` positions per block), as the real worker's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Store {
    /// Positions per block.
    pub block: u32,
    /// The blocks (`None`: never written).
    pub blocks: Vec<Option<StoredBlock>>,
}

/// Runs a table's cache operations on a stage's slots and store, as the real worker does:
/// a save needs the slot to hold the whole block, a load needs it to hold the positions
/// before the block (and leaves it holding the block's end).
fn run_ops(
    table: &BatchTable,
    last: bool,
    slots: &mut [SlotState],
    store: &mut Store,
) -> Result<(), ComputeError> {
    let b = store.block as usize;
    for op in table.ops() {
        let slot = &mut slots[op.slot as usize];
        let start = op.slot_block as usize * b;
        let bad =
            |holds: u32| ComputeError::Position { slot: op.slot, holds, starts: start as u32 };
        if op.kind == CacheOpKind::Keep {
            // As the real worker: keep what the slot holds (and logged) of the prefix.
            let logged = (!last).then_some(slot.log.len() as u32);
            let hold = resume_hold(slot.positions, logged, op.slot_block);
            slot.roll_back(hold);
            continue;
        }
        let at = store.blocks.get_mut(op.store_block as usize).ok_or(bad(slot.positions))?;
        match op.kind {
            CacheOpKind::Keep => {}
            CacheOpKind::Save => {
                if (slot.positions as usize) < start + b {
                    return Err(bad(slot.positions));
                }
                let after = slot.before.get(start + b).copied().unwrap_or(slot.state);
                let log = slot.log.get(start..start + b).map(<[u32]>::to_vec);
                let before = slot.before[start..start + b].to_vec();
                *at = Some(StoredBlock { before, after, log });
            }
            CacheOpKind::Load => {
                let Some(block) = at.as_ref() else { return Err(bad(slot.positions)) };
                if !slot.roll_back(start as u32) {
                    return Err(bad(slot.positions));
                }
                slot.before.extend_from_slice(&block.before);
                slot.state = block.after;
                slot.positions = (start + b) as u32;
                if let Some(log) = &block.log
                    && slot.log.len() == start
                {
                    slot.log.extend_from_slice(log);
                }
            }
        }
    }
    Ok(())
}

/// One row through `layers` at position `pos` of a slot: each layer's state takes the
/// row, the row's output depends on it. The result depends on the layers alone, never on
/// how they are split into stages.
pub fn row(layers: std::ops::Range<u32>, slot: &mut SlotState, x: u32, pos: u32) -> u32 {
    slot.before.truncate(pos as usize);
    slot.log.truncate(pos as usize);
    slot.before.push(slot.state);
    let mut x = x;
    for l in layers {
        let st = &mut slot.state[l as usize % LAYERS];
        *st = mix(*st ^ u64::from(l), u64::from(x) << 32 | u64::from(pos));
        x = (mix(*st, u64::from(l)) >> 16) as u32;
    }
    slot.positions += 1;
    if slot.log.len() == pos as usize {
        slot.log.push(x);
    }
    x
}

/// The token a sampling entry's last row `y` gives for position `pos`: greedy is the
/// row's value; a temperature above 0 draws from the seed and the position alone (as the
/// real sampler does), so a replayed sequence continues exactly.
pub fn sample(seed: u64, y: u32, pos: u32, temperature: f32, vocab: u32) -> u32 {
    if temperature > 0.0 {
        ((u64::from(y) ^ mix(seed, u64::from(pos))) % u64::from(vocab)) as u32
    } else {
        y % vocab
    }
}

/// What a stage's step failed on (the real worker fails the step: `compute_failed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputeError {
    /// The table or rows are malformed.
    Batch(BatchError),
    /// An entry does not continue its slot.
    Position {
        /// The slot.
        slot: u32,
        /// Positions it holds.
        holds: u32,
        /// Where the entry starts.
        starts: u32,
    },
}

/// One micro-batch through a stage of `layers` (`last`: it samples) whose rows are
/// `row_bytes` wide (the value in the first four bytes): the same table, then the output
/// rows or one token per table entry.
#[allow(clippy::too_many_arguments)]
pub fn step(
    layers: std::ops::Range<u32>,
    last: bool,
    slots: &mut [SlotState],
    store: &mut Store,
    limits: BatchLimits,
    row_bytes: u64,
    out_row_bytes: u64,
    vocab: u32,
    input: &[u8],
    kept_rows: &mut u64,
) -> Result<Vec<u8>, ComputeError> {
    let (table, rows) =
        BatchTable::split_rows(input, limits, row_bytes).map_err(ComputeError::Batch)?;
    run_ops(&table, last, slots, store)?;
    let mut out = table.encode();
    let mut tokens = vec![NO_TOKEN; usize::from(limits.capacity)];
    let mut verified = vec![Vec::new(); table.entries().len()];
    let mut at = 0usize;
    for (i, e) in table.entries().iter().enumerate() {
        let slot = &mut slots[e.slot as usize];
        if e.flags.contains(EntryFlags::RESET) {
            // A new sequence keeps the slot's first `first_position` positions.
            if e.first_position == 0 {
                *slot = SlotState::default();
            } else if !slot.roll_back(e.first_position) {
                return Err(ComputeError::Position {
                    slot: e.slot,
                    holds: slot.positions,
                    starts: e.first_position,
                });
            }
            slot.seed = e.sampling.seed;
        }
        if e.flags.contains(EntryFlags::ROLLBACK)
            && e.first_position < slot.positions
            && !slot.roll_back(e.first_position)
        {
            return Err(ComputeError::Position {
                slot: e.slot,
                holds: slot.positions,
                starts: e.first_position,
            });
        }
        let position = |slot: &SlotState| ComputeError::Position {
            slot: e.slot,
            holds: slot.positions,
            starts: e.first_position,
        };
        // A resumed sequence's rows the slot holds are sent from the log, not computed.
        let mut skip = 0;
        if e.flags.contains(EntryFlags::RESUME) {
            slot.seed = e.sampling.seed;
            let samples = e.flags.contains(EntryFlags::SAMPLE);
            skip = resume_skip(slot.positions, e.first_position, e.tokens, samples)
                .ok_or_else(|| position(slot))?;
            if !slot.roll_back(e.first_position + skip) {
                return Err(position(slot));
            }
            *kept_rows += u64::from(skip);
        }
        if slot.positions != e.first_position + skip {
            return Err(position(slot));
        }
        let mut y = 0;
        let verify = last && e.flags.contains(EntryFlags::VERIFY);
        for k in 0..e.tokens {
            let x = u32::from_le_bytes(rows[at..at + 4].try_into().unwrap_or([0; 4]));
            at += row_bytes as usize;
            if k < skip {
                if !last {
                    let logged = slot.log.get((e.first_position + k) as usize).copied();
                    let logged = logged.ok_or_else(|| position(slot))?;
                    out.extend_from_slice(&logged.to_le_bytes());
                    out.resize(out.len() + out_row_bytes as usize - 4, 0);
                }
                continue;
            }
            y = row(layers.clone(), slot, x, e.first_position + k);
            if !last {
                out.extend_from_slice(&y.to_le_bytes());
                out.resize(out.len() + out_row_bytes as usize - 4, 0);
            } else if verify && k + 1 < e.tokens {
                // A verifying entry: the token after every row but the last too.
                let pos = e.first_position + k + 1;
                verified[i].push(sample(slot.seed, y, pos, e.sampling.temperature, vocab));
            }
        }
        if last && e.flags.contains(EntryFlags::SAMPLE) {
            let pos = e.first_position + e.tokens;
            tokens[i] = sample(slot.seed, y, pos, e.sampling.temperature, vocab);
        }
    }
    if last {
        out.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
        crate::wire::batch::encode_verify_section(&table, &verified, &mut out);
    }
    Ok(out)
}

/// The one-sequence reference: `prompt` through every layer, then up to `max_tokens`
/// tokens fed back one at a time (stopping at `eos`, and before the context overflows,
/// as the scheduler does). Returns the generated tokens (EOS excluded).
pub fn reference(
    prompt: &[u32],
    max_tokens: u32,
    temperature: f32,
    seed: u64,
    vocab: u32,
    eos: Option<u32>,
    max_seq_len: u32,
) -> Vec<u32> {
    let mut slot = SlotState { seed, ..SlotState::default() };
    let mut out = Vec::new();
    let mut input = prompt.to_vec();
    let mut pos = 0u32;
    loop {
        let mut y = 0;
        for (k, &x) in input.iter().enumerate() {
            y = row(0..LAYERS as u32, &mut slot, x, pos + k as u32);
        }
        pos += input.len() as u32;
        let token = sample(seed, y, pos, temperature, vocab);
        if Some(token) == eos {
            return out;
        }
        out.push(token);
        if out.len() >= max_tokens.max(1) as usize
            || prompt.len() + out.len() > max_seq_len as usize
        {
            return out;
        }
        input = vec![token];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_depend_on_the_layers_alone_never_on_their_split_into_stages() {
        let mut whole = SlotState::default();
        let mut parts = [SlotState::default(), SlotState::default()];
        for (pos, x) in [5u32, 9, 200, 3].into_iter().enumerate() {
            let y = row(0..6, &mut whole, x, pos as u32);
            let mid = row(0..2, &mut parts[0], x, pos as u32);
            assert_eq!(row(2..6, &mut parts[1], mid, pos as u32), y);
        }
    }

    #[test]
    fn a_rolled_back_slot_continues_as_if_the_dropped_rows_never_ran() {
        let mut a = SlotState::default();
        let mut b = SlotState::default();
        for (pos, x) in [5u32, 9, 200].into_iter().enumerate() {
            row(0..6, &mut a, x, pos as u32);
            row(0..6, &mut b, x, pos as u32);
        }
        // `a` runs three draft rows, then drops two of them.
        for (k, x) in [7u32, 8, 9].into_iter().enumerate() {
            row(0..6, &mut a, x, 3 + k as u32);
        }
        assert!(a.roll_back(4));
        row(0..6, &mut b, 7, 3);
        assert_eq!((a.positions, a.state), (b.positions, b.state));
        assert_eq!(row(0..6, &mut a, 1, 4), row(0..6, &mut b, 1, 4));
        // Back to the start, as a new sequence sharing nothing but the slot would go.
        assert!(a.roll_back(0) && a.positions == 0 && a.state == SlotState::default().state);
        assert!(!a.roll_back(1), "a slot cannot go forward to positions it never held");
    }
}
