//! The prefix cache's second level, sans-IO: the directory of every stage's block store.
//!
//! Every stage keeps the same `blocks` blocks of `B` positions of its own layers' KV in
//! host memory; the orchestrator alone decides what they hold. A block is named by the
//! chain of token ids from position 0 to its end (as vLLM's and SGLang's block hashes), so
//! a shared system prompt, or a branch of a conversation, finds the blocks another
//! sequence saved. The directory keeps each block's own tokens and its parent block (with
//! that block's generation), so a hit is exact, never a hash collision.
//!
//! When a request's first entry is formed, its slot's old tokens are saved (the full
//! blocks the store does not hold yet, into free or least-recently-used blocks), then the
//! store's blocks that extend the prefix the slot shares are loaded into the slot. Both
//! ride in that micro-batch's cache-operation section, which every stage runs in order
//! before the rows, so a block saved by one micro-batch and loaded by a later one always
//! holds what the directory says. A fault forgets the directory.

use std::collections::BTreeMap;

use crate::wire::batch::{CacheOp, CacheOpKind, MAX_CACHE_OPS};

/// The store's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct StoreCounters {
    /// Blocks the store holds now.
    pub blocks: u64,
    /// Blocks saved so far.
    pub saved: u64,
    /// Blocks loaded into slots so far.
    pub loaded: u64,
    /// Blocks overwritten while they held a prefix (least recently used first).
    pub evicted: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Block {
    hash: u64,
    /// The block before it (store index and generation); `None` for a first block.
    parent: Option<(u32, u64)>,
    tokens: Vec<u32>,
    used: u64,
}

/// What a request's first entry carries from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Planned {
    /// Saves of the slot's old blocks, then loads of the prompt's blocks.
    pub ops: Vec<CacheOp>,
    /// Prompt tokens the slot holds once they ran (at least what it shared before).
    pub cached: u32,
}

/// The directory of every stage's block store.
#[derive(Debug, Clone)]
pub(super) struct BlockStore {
    block: u32,
    slots: Vec<Option<Block>>,
    /// A block's generation: bumped whenever it is overwritten.
    gens: Vec<u64>,
    index: BTreeMap<u64, u32>,
    tick: u64,
    counters: StoreCounters,
    /// Test-only: saves are recorded but never sent.
    planted_skip_save: bool,
}

/// With a sequence's first entry: its slot's old blocks are saved and the store's blocks
/// of its prompt loaded (the sequence then starts past them). `false` when they might not
/// fit the table's operations left: the sequence waits for the next micro-batch.
pub(super) fn first_entry(
    store: &mut BlockStore,
    warm: &mut super::prefix::WarmSlots,
    seq: &mut super::Seq,
    max_seq_len: u32,
    ops: &mut Vec<CacheOp>,
) -> bool {
    if !seq.fresh || !store.enabled() {
        return true;
    }
    if ops.len() + store.most_ops(max_seq_len) > usize::from(MAX_CACHE_OPS) {
        return false;
    }
    let old = std::mem::take(&mut seq.old);
    let before = seq.cached;
    let planned = store.plan(seq.slot, &old, before, &seq.prompt, seq.cache_prompt);
    ops.extend(planned.ops);
    if planned.cached > before {
        warm.count_loaded(before, planned.cached);
        seq.cached = planned.cached;
        seq.prefilled = planned.cached as usize;
        seq.kv_valid = planned.cached as usize;
        seq.kv_high = seq.kv_high.max(planned.cached);
    }
    true
}

/// The chain hash of a block whose parent's chain hash is `parent` (FNV-1a, 64 bits).
fn chain_hash(parent: u64, tokens: &[u32]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ parent;
    for t in tokens {
        for b in t.to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

impl BlockStore {
    /// A store of `blocks` blocks of `block` positions for slots of `max_seq_len`
    /// positions (`blocks` 0, or blocks so short that one slot's saves and loads would not
    /// fit a table's operations: nothing is kept).
    pub fn new(block: u32, blocks: u32, max_seq_len: u32) -> BlockStore {
        let block = block.max(1);
        let fits = 2 * u64::from(max_seq_len.div_ceil(block)) <= u64::from(MAX_CACHE_OPS);
        let blocks = if fits { blocks } else { 0 };
        BlockStore {
            block,
            slots: vec![None; blocks as usize],
            gens: vec![0; blocks as usize],
            index: BTreeMap::new(),
            tick: 0,
            counters: StoreCounters::default(),
            planted_skip_save: false,
        }
    }

    /// Plants the skipped-save bug (the simulation's self-check only).
    pub fn plant_skip_save(&mut self) {
        self.planted_skip_save = true;
    }

    /// Whether it keeps anything.
    pub fn enabled(&self) -> bool {
        !self.slots.is_empty()
    }

    /// The most operations [`BlockStore::plan`] returns for a slot of `max_seq_len`
    /// positions.
    pub fn most_ops(&self, max_seq_len: u32) -> usize {
        2 * max_seq_len.div_ceil(self.block) as usize
    }

    /// The store index of `tokens`' block `b` when the directory holds it after `parent`.
    fn find(&self, hash: u64, parent: Option<(u32, u64)>, tokens: &[u32]) -> Option<u32> {
        let at = *self.index.get(&hash)?;
        let b = self.slots[at as usize].as_ref()?;
        (b.parent == parent && b.tokens == tokens).then_some(at)
    }

    /// The store indices of `tokens`' leading full blocks the directory holds, in order,
    /// with each one's chain hash.
    fn chain(&self, tokens: &[u32]) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        let (mut hash, mut parent) = (0u64, None);
        for run in tokens.chunks_exact(self.block as usize) {
            hash = chain_hash(hash, run);
            let Some(at) = self.find(hash, parent, run) else { break };
            out.push((at, hash));
            parent = Some((at, self.gens[at as usize]));
        }
        out
    }

    fn touch(&mut self, at: u32) {
        self.tick += 1;
        if let Some(b) = self.slots[at as usize].as_mut() {
            b.used = self.tick;
        }
    }

    /// A block to overwrite: an empty one, else the least recently used one outside
    /// `pinned`.
    fn victim(&self, pinned: &[u32]) -> Option<u32> {
        if let Some(at) = self.slots.iter().position(Option::is_none) {
            return Some(at as u32);
        }
        (0..self.slots.len() as u32)
            .filter(|at| !pinned.contains(at))
            .min_by_key(|&at| self.slots[at as usize].as_ref().map_or(0, |b| b.used))
    }

    /// The operations of a request's first entry in `slot`: save the full blocks of
    /// `old` (the tokens the slot held) the store lacks, then load the store's blocks of
    /// `prompt` past the `reuse` tokens the slot shares with it (`cache`: whether the
    /// request may use cached tokens). A prefix never covers the whole prompt.
    pub fn plan(
        &mut self,
        slot: u16,
        old: &[u32],
        reuse: u32,
        prompt: &[u32],
        cache: bool,
    ) -> Planned {
        let mut ops = Vec::new();
        let chain = if cache { self.chain(prompt) } else { Vec::new() };
        let mut pinned: Vec<u32> = chain.iter().map(|&(at, _)| at).collect();
        for &at in &pinned {
            self.touch(at);
        }
        // Saves first: they read what the slot holds before any load overwrites it.
        let (mut hash, mut parent) = (0u64, None);
        for (b, run) in old.chunks_exact(self.block as usize).enumerate() {
            hash = chain_hash(hash, run);
            let at = match self.find(hash, parent, run) {
                Some(at) => at,
                None => {
                    let Some(at) = self.victim(&pinned) else { break };
                    if let Some(gone) = self.slots[at as usize].take() {
                        self.counters.evicted += 1;
                        if self.index.get(&gone.hash) == Some(&at) {
                            self.index.remove(&gone.hash);
                        }
                    }
                    self.gens[at as usize] += 1;
                    let tokens = run.to_vec();
                    self.slots[at as usize] = Some(Block { hash, parent, tokens, used: 0 });
                    self.index.insert(hash, at);
                    self.counters.saved += 1;
                    let op = CacheOp {
                        kind: CacheOpKind::Save,
                        slot: u32::from(slot),
                        slot_block: b as u32,
                        store_block: at,
                    };
                    if !self.planted_skip_save {
                        ops.push(op);
                    }
                    at
                }
            };
            self.touch(at);
            pinned.push(at);
            parent = Some((at, self.gens[at as usize]));
        }
        // Loads: the store's blocks past what the slot shares, up to the prompt's last
        // token (always computed).
        let most = prompt.len().saturating_sub(1) as u32;
        let stored = (chain.len() as u32 * self.block).min(most);
        if stored <= reuse {
            return Planned { ops, cached: reuse };
        }
        for b in reuse / self.block..stored.div_ceil(self.block) {
            self.counters.loaded += 1;
            ops.push(CacheOp {
                kind: CacheOpKind::Load,
                slot: u32::from(slot),
                slot_block: b,
                store_block: chain[b as usize].0,
            });
        }
        Planned { ops, cached: stored }
    }

    /// Forgets every block (after a fault the stages may hold anything).
    pub fn forget(&mut self) {
        self.slots.iter_mut().for_each(|b| *b = None);
        self.index.clear();
    }

    /// The counters, with the blocks held now.
    pub fn counters(&self) -> StoreCounters {
        StoreCounters {
            blocks: self.slots.iter().filter(|b| b.is_some()).count() as u64,
            ..self.counters
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(p: &Planned, kind: CacheOpKind) -> Vec<(u32, u32)> {
        p.ops.iter().filter(|o| o.kind == kind).map(|o| (o.slot_block, o.store_block)).collect()
    }

    #[test]
    fn a_reclaimed_slots_full_blocks_are_saved_and_a_later_prompt_loads_them() {
        let mut s = BlockStore::new(4, 8, 64);
        let old: Vec<u32> = (0..10).collect();
        let first = s.plan(0, &old, 0, &[99, 98], true);
        assert_eq!(ops(&first, CacheOpKind::Save), vec![(0, 0), (1, 1)]);
        assert_eq!(first.cached, 0);
        // Another slot, a prompt sharing 9 tokens: two blocks load, 8 tokens cached.
        let prompt: Vec<u32> = (0..9).chain([50, 51]).collect();
        let second = s.plan(1, &[], 0, &prompt, true);
        assert_eq!(ops(&second, CacheOpKind::Load), vec![(0, 0), (1, 1)]);
        assert_eq!(second.cached, 8);
        assert!(second.ops.iter().all(|o| o.slot == 1));
    }

    #[test]
    fn loads_start_past_what_the_slot_shares_and_never_cover_the_whole_prompt() {
        let mut s = BlockStore::new(4, 8, 64);
        s.plan(0, &(0..12).collect::<Vec<u32>>(), 0, &[7], true);
        let prompt: Vec<u32> = (0..12).collect();
        let p = s.plan(1, &[], 5, &prompt, true);
        assert_eq!(ops(&p, CacheOpKind::Load), vec![(1, 1), (2, 2)]);
        assert_eq!(p.cached, 11);
        let none = s.plan(2, &[], 0, &prompt, false);
        assert_eq!((none.ops.len(), none.cached), (0, 0));
    }

    #[test]
    fn a_block_whose_parent_was_overwritten_is_not_found() {
        let mut s = BlockStore::new(2, 3, 64);
        s.plan(0, &[1, 2, 3, 4], 0, &[0], true);
        // A third block fits; a fourth overwrites the least recently used (the first).
        s.plan(0, &[9, 9], 0, &[0], true);
        s.plan(0, &[8, 8], 0, &[0], true);
        assert_eq!(s.counters().evicted, 1);
        let p = s.plan(1, &[], 0, &[1, 2, 3, 4, 5], true);
        assert_eq!((p.ops.len(), p.cached), (0, 0), "block [3,4] hangs from an evicted parent");
        // And a prompt of the new blocks finds them.
        assert_eq!(s.plan(1, &[], 0, &[8, 8, 0], true).cached, 2);
    }

    #[test]
    fn a_save_never_overwrites_a_block_the_same_request_loads() {
        let mut s = BlockStore::new(2, 2, 64);
        s.plan(0, &[1, 2, 3, 4], 0, &[0], true);
        // The slot held other tokens; its request loads both stored blocks: nothing is
        // free, and both are pinned, so the old tokens are not saved.
        let p = s.plan(1, &[5, 6], 0, &[1, 2, 3, 4, 9], true);
        assert_eq!(ops(&p, CacheOpKind::Save), vec![]);
        assert_eq!(ops(&p, CacheOpKind::Load), vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn blocks_too_short_for_one_tables_operations_keep_nothing() {
        let mut s = BlockStore::new(1, 8, 64);
        assert!(!s.enabled());
        assert_eq!(s.plan(0, &[1, 2, 3], 0, &[1, 2, 3, 4], true).ops, vec![]);
    }

    #[test]
    fn a_forgotten_store_finds_nothing() {
        let mut s = BlockStore::new(2, 4, 64);
        s.plan(0, &[1, 2, 3, 4], 0, &[0], true);
        s.forget();
        assert_eq!(s.plan(1, &[], 0, &[1, 2, 3, 4, 5], true).cached, 0);
        assert_eq!(s.counters().blocks, 0);
    }
}
