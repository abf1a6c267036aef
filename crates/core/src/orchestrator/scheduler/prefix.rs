//! Slots that keep their KV cache after their sequence ends (the prefix cache's first
//! level, SERVING.md), sans-IO.
//!
//! The scheduler knows, for every slot no sequence holds, the token ids its caches hold on
//! every stage (they all took the same rows, in order). A new request takes the free slot
//! whose tokens share its longest prefix, and prefills only the rest: its first entry
//! carries `RESET` at the shared length, so every stage keeps that many positions and
//! drops the others, in order with the micro-batches. Exactness holds because a row's
//! values depend only on its sequence's earlier rows (batch invariance), and the sampler
//! is keyed by position.
//!
//! Rules:
//! - A prefix never covers a whole prompt: its last token is always computed again (the
//!   token after it is sampled from that row's logits).
//! - On a model with sliding-window blocks, whose caches are rings, a slot can continue at
//!   position `p` only while its ring still holds the window before `p`: every position
//!   the slot wrote since it was last emptied (its high-water mark) is within the ring's
//!   spare positions of `p`, or the ring never wrapped. Otherwise the prefix counts as not
//!   cached.
//! - Among free slots: the longest usable prefix wins; ties go to an empty slot, then to
//!   the slot used least recently, so the other warm prefixes live longest. While an
//!   empty slot is free, a warm slot that would reuse less than half of what it holds is
//!   not taken (as llama-server's slot similarity): its conversation's next turn is
//!   worth more than the few tokens. A request that opts out (`cache_prompt: false`)
//!   shares nothing.
//! - A warm slot given to a request that shares none of its tokens loses them: an
//!   eviction. A fault forgets every slot's tokens (the stages may hold anything).

use std::collections::BTreeSet;

/// A sliding-window block's cache ring, as the plan sizes it (only where it holds fewer
/// positions than the context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowRing {
    /// Positions the ring holds.
    pub positions: u32,
    /// The window a query attends over (at most `positions`).
    pub window: u32,
}

impl WindowRing {
    /// The ring of a model whose sliding blocks attend over `window` positions, for
    /// sequences of at most `max_seq_len` (`None`: no window, or a ring that holds the
    /// whole context). The engine sizes its rings the same way
    /// ([`crate::model::arch::ArchFacts::window_positions`]).
    pub fn of(window: Option<u32>, max_seq_len: u32) -> Option<WindowRing> {
        let window = window?;
        let positions =
            max_seq_len.min(window.saturating_add(crate::model::arch::SLIDING_WINDOW_SLACK));
        (positions < max_seq_len).then_some(WindowRing { positions, window })
    }

    /// Whether a slot that wrote positions below `high` since it was last emptied still
    /// holds what a continuation at `at` attends to.
    pub fn continues(&self, high: u32, at: u32) -> bool {
        high <= self.positions || high.saturating_sub(at) <= self.positions - self.window
    }
}

/// The prefix cache's counters over a scheduler's life (tokens, as vLLM counts them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PrefixCounters {
    /// Prompt tokens of the requests that could use a cached prefix.
    pub queried_tokens: u64,
    /// Prompt tokens they found cached (not computed again).
    pub cached_tokens: u64,
    /// Requests that found a cached prefix.
    pub hits: u64,
    /// Warm prefixes dropped whole (their slot went to a request sharing none of them).
    pub evictions: u64,
    /// Tokens the free slots hold now.
    pub warm_tokens: u64,
    /// Blocks every stage's prompt-cache store holds now.
    pub store_blocks: u64,
    /// Blocks saved into the stores.
    pub store_saved: u64,
    /// Blocks loaded from the stores into slots.
    pub store_loaded: u64,
    /// Stored blocks overwritten while they held a prefix.
    pub store_evicted: u64,
}

impl std::ops::Add for PrefixCounters {
    type Output = PrefixCounters;
    fn add(self, o: PrefixCounters) -> PrefixCounters {
        PrefixCounters {
            queried_tokens: self.queried_tokens + o.queried_tokens,
            cached_tokens: self.cached_tokens + o.cached_tokens,
            hits: self.hits + o.hits,
            evictions: self.evictions + o.evictions,
            warm_tokens: o.warm_tokens,
            store_blocks: o.store_blocks,
            store_saved: self.store_saved + o.store_saved,
            store_loaded: self.store_loaded + o.store_loaded,
            store_evicted: self.store_evicted + o.store_evicted,
        }
    }
}

/// What one slot's caches hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Warm {
    /// The token ids of its valid positions, in order (empty: nothing reusable).
    tokens: Vec<u32>,
    /// Positions written since the slot was last emptied (a ring's high-water mark).
    high: u32,
    /// When it was last released (a tick of this table).
    used: u64,
}

/// A slot chosen for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Chosen {
    /// The slot.
    pub slot: u16,
    /// Prompt tokens its caches already hold.
    pub reuse: u32,
    /// The slot's high-water mark the sequence inherits (0 when nothing is reused: its
    /// first entry empties the slot).
    pub high: u32,
    /// The tokens the slot held before (what the block store may save from it).
    pub old: Vec<u32>,
}

/// The token ids every slot holds.
#[derive(Debug, Clone)]
pub(super) struct WarmSlots {
    slots: Vec<Warm>,
    tick: u64,
    counters: PrefixCounters,
    /// Test-only: a planted bug claims one more cached token than the slot shares.
    planted_overclaim: bool,
}

impl WarmSlots {
    pub fn new(slots: u16) -> WarmSlots {
        WarmSlots {
            slots: vec![Warm::default(); usize::from(slots)],
            tick: 0,
            counters: PrefixCounters::default(),
            planted_overclaim: false,
        }
    }

    /// Plants the over-claiming bug (the simulation's self-check only).
    pub fn plant_overclaim(&mut self) {
        self.planted_overclaim = true;
    }

    /// The free slot for `prompt` (at least one slot must be free), and how much of it the
    /// slot holds (`cache`: whether the request may use a cached prefix).
    pub fn choose(
        &mut self,
        free: &BTreeSet<u16>,
        prompt: &[u32],
        cache: bool,
        ring: Option<WindowRing>,
    ) -> Option<Chosen> {
        let empty = free.iter().any(|&s| self.held(s) == 0);
        let best = free
            .iter()
            .map(|&slot| {
                let w = &self.slots[usize::from(slot)];
                let mut reuse = if cache { self.usable(w, prompt, ring) } else { 0 };
                if empty && (reuse as usize) * 2 < w.tokens.len() {
                    reuse = 0;
                }
                // Longest prefix, then an empty slot, then the least recently used.
                let key = (std::cmp::Reverse(reuse), !w.tokens.is_empty(), w.used, slot);
                (key, slot, reuse)
            })
            .min_by_key(|(key, _, _)| *key)?;
        let (_, slot, reuse) = best;
        let w = &mut self.slots[usize::from(slot)];
        if cache {
            self.counters.queried_tokens += prompt.len() as u64;
            self.counters.cached_tokens += u64::from(reuse);
            self.counters.hits += u64::from(reuse > 0);
        }
        if reuse == 0 && !w.tokens.is_empty() {
            self.counters.evictions += 1;
        }
        let high = if reuse > 0 { w.high } else { 0 };
        let old = std::mem::take(&mut w.tokens);
        *w = Warm { tokens: Vec::new(), high: 0, used: w.used };
        Some(Chosen { slot, reuse, high, old })
    }

    /// The prefix of `prompt` that slot `w` holds and can continue (never the whole
    /// prompt).
    fn usable(&self, w: &Warm, prompt: &[u32], ring: Option<WindowRing>) -> u32 {
        let most = prompt.len().saturating_sub(1);
        let mut shared =
            w.tokens.iter().zip(prompt).take(most).take_while(|(a, b)| a == b).count() as u32;
        if self.planted_overclaim && shared > 0 && (shared as usize) < most {
            shared += 1;
        }
        match ring {
            Some(r) if !r.continues(w.high, shared) => 0,
            _ => shared,
        }
    }

    /// Slot `slot`'s sequence ended: its caches hold `tokens` (positions written below
    /// `high` since it was last emptied).
    pub fn release(&mut self, slot: u16, tokens: Vec<u32>, high: u32) {
        self.tick += 1;
        if let Some(w) = self.slots.get_mut(usize::from(slot)) {
            *w = Warm { tokens, high, used: self.tick };
        }
    }

    /// A request that shared `before` tokens with its slot found `after` once the block
    /// store's blocks were loaded.
    pub fn count_loaded(&mut self, before: u32, after: u32) {
        self.counters.cached_tokens += u64::from(after.saturating_sub(before));
        self.counters.hits += u64::from(before == 0 && after > 0);
    }

    /// Forgets every slot's tokens (after a fault the stages may hold anything).
    pub fn forget(&mut self) {
        for w in &mut self.slots {
            w.tokens.clear();
            w.high = 0;
        }
    }

    /// What the slots hold, without the counters (carried to the run that re-forms this
    /// one, which counts its own).
    pub fn carried(&self) -> WarmSlots {
        WarmSlots { slots: self.slots.clone(), ..WarmSlots::new(0) }
    }

    /// Takes over `carried`'s slots (as many as this table has; the rest stay empty).
    pub fn take_over(&mut self, carried: WarmSlots) {
        for (w, c) in self.slots.iter_mut().zip(carried.slots) {
            *w = c;
        }
        self.tick = self.slots.iter().map(|w| w.used).max().unwrap_or(0);
    }

    /// Slots in the table.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Slots that hold tokens.
    pub fn warm_slots(&self) -> impl Iterator<Item = u16> + '_ {
        (0..self.slots.len()).filter(|&i| !self.slots[i].tokens.is_empty()).map(|i| i as u16)
    }

    /// Tokens slot `slot` holds while free.
    pub fn held(&self, slot: u16) -> u32 {
        self.slots.get(usize::from(slot)).map_or(0, |w| w.tokens.len() as u32)
    }

    /// The counters, with the tokens the free slots hold now.
    pub fn counters(&self) -> PrefixCounters {
        PrefixCounters {
            warm_tokens: self.slots.iter().map(|w| w.tokens.len() as u64).sum(),
            ..self.counters
        }
    }
}

#[cfg(test)]
mod tests;
