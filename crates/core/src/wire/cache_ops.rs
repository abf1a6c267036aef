//! The micro-batch table's cache-operation section: copies between a slot's KV cache and
//! a stage's block store (the prefix cache's second level, `specs/prefix-cache.md`).
//!
//! Every table has room for [`MAX_CACHE_OPS`] operations after its entries; the header's
//! count field (once reserved) says how many are used. Each stage runs them in order,
//! before the entries' rows, on its own layers; every stage copies the section unchanged
//! to its output, as it does the entries. So an operation reaches every stage in order
//! with the micro-batches, like `RESET`: a save written before a load of the same block
//! is always run first.
//!
//! ```text
//! op, 16 bytes:  kind u16 (1 save, 2 load, 3 keep) | reserved u16 = 0 | slot u32
//!                | slot block u32 | store block u32
//! ```
//!
//! A slot block `b` is the slot's positions `b * B .. (b + 1) * B` for the plan's block
//! size `B`. A save copies them into the store block (the slot must hold them); a load
//! copies the store block into them (the slot must hold at least `b * B` positions) and
//! leaves the slot holding `(b + 1) * B` positions. Unused operations are all zero.
//!
//! A keep (a sequence resumes after a re-formation, `specs/reformation.md`) names no
//! store block (it is 0) and carries a position count `k` in the slot-block field: a
//! stage that kept the slot's cache from the run before keeps its first
//! [`resume_hold`]`(holds, logged, k)` positions and drops the rest; a stage that did not
//! (a new one) holds none. Either way the slot's sampler starts over. The sequence's
//! entries then carry `RESUME`.

pub use super::spec::{CACHE_OP_BYTES, MAX_CACHE_OPS};

/// Why a cache-operation section was refused (the table's `BatchError` says it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CacheOpError {
    /// An unknown kind.
    BadKind(u32),
    /// A reserved field, or an unused operation, is not zero.
    Reserved,
    /// More operations than the section holds.
    TooMany(usize),
    /// A slot or store block out of range.
    OutOfRange { slot: u32, block: u32 },
}

/// Decodes a section of `count` operations (`MAX_CACHE_OPS` records, the rest zero).
pub(super) fn decode_section(section: &[u8], count: u16) -> Result<Vec<CacheOp>, CacheOpError> {
    if count > MAX_CACHE_OPS {
        return Err(CacheOpError::TooMany(usize::from(count)));
    }
    let mut ops = Vec::with_capacity(usize::from(count));
    for (i, raw) in section.chunks_exact(CACHE_OP_BYTES as usize).enumerate() {
        if i < usize::from(count) {
            ops.push(CacheOp::decode(raw)?);
        } else if raw.iter().any(|&b| b != 0) {
            return Err(CacheOpError::Reserved);
        }
    }
    Ok(ops)
}

/// Checks operations against a table's capacity, the stores' blocks and the context.
pub(super) fn check(
    ops: &[CacheOp],
    capacity: u16,
    blocks: u32,
    max_seq_len: u32,
) -> Result<(), CacheOpError> {
    if ops.len() > usize::from(MAX_CACHE_OPS) {
        return Err(CacheOpError::TooMany(ops.len()));
    }
    let bad = |op: &&CacheOp| {
        op.slot >= u32::from(capacity)
            || match op.kind {
                CacheOpKind::Keep => op.store_block != 0 || op.slot_block > max_seq_len,
                CacheOpKind::Save | CacheOpKind::Load => op.store_block >= blocks,
            }
    };
    match ops.iter().find(bad) {
        Some(op) => Err(CacheOpError::OutOfRange { slot: op.slot, block: op.store_block }),
        None => Ok(()),
    }
}

/// What a cache operation copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CacheOpKind {
    /// Slot block into store block.
    Save,
    /// Store block into slot block.
    Load,
    /// The slot keeps at most `slot_block` positions from the run before (a resume).
    Keep,
}

/// One copy between a slot's cache and the stage's block store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheOp {
    /// Save or load.
    pub kind: CacheOpKind,
    /// The slot.
    pub slot: u32,
    /// The slot's block (positions `slot_block * B ..`).
    pub slot_block: u32,
    /// The store's block.
    pub store_block: u32,
}

impl CacheOp {
    /// A keep: `slot` keeps at most its first `positions` positions from the run before.
    pub fn keep(slot: u32, positions: u32) -> CacheOp {
        CacheOp { kind: CacheOpKind::Keep, slot, slot_block: positions, store_block: 0 }
    }

    pub(super) fn encode_into(&self, out: &mut Vec<u8>) {
        let kind: u16 = match self.kind {
            CacheOpKind::Save => 1,
            CacheOpKind::Load => 2,
            CacheOpKind::Keep => 3,
        };
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.slot.to_le_bytes());
        out.extend_from_slice(&self.slot_block.to_le_bytes());
        out.extend_from_slice(&self.store_block.to_le_bytes());
    }

    /// Decodes one operation's 16 bytes (kind and reserved field only; the table checks
    /// the rest against its limits).
    fn decode(raw: &[u8]) -> Result<CacheOp, CacheOpError> {
        let word = |at: usize| u32::from_le_bytes([raw[at], raw[at + 1], raw[at + 2], raw[at + 3]]);
        let kind = match u16::from_le_bytes([raw[0], raw[1]]) {
            1 => CacheOpKind::Save,
            2 => CacheOpKind::Load,
            3 => CacheOpKind::Keep,
            k => return Err(CacheOpError::BadKind(u32::from(k))),
        };
        if raw[2] != 0 || raw[3] != 0 {
            return Err(CacheOpError::Reserved);
        }
        Ok(CacheOp { kind, slot: word(4), slot_block: word(8), store_block: word(12) })
    }
}

/// The positions a stage keeps of a slot on a keep of `keep` positions: what its cache
/// `holds` and, on a stage that sends activations on, what it `logged` of its output rows
/// (a kept position's row is sent from the log, never computed again), at most `keep`.
/// A stage that did not keep the slot's cache holds 0, so keeps nothing.
pub fn resume_hold(holds: u32, logged: Option<u32>, keep: u32) -> u32 {
    holds.min(logged.unwrap_or(u32::MAX)).min(keep)
}

/// How many of a `RESUME` entry's rows a stage sends from what it holds (the rest it
/// computes): the rows below its slot's `holds` positions, but never a sampling entry's
/// last row (its logits are needed). `None`: the entry starts past what the slot holds
/// (a gap), which is refused.
pub fn resume_skip(holds: u32, first: u32, tokens: u32, samples: bool) -> Option<u32> {
    if first > holds {
        return None;
    }
    let skip = (holds - first).min(tokens);
    Some(if samples { skip.min(tokens.saturating_sub(1)) } else { skip })
}
