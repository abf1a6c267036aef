//! The session scheduler (SERVING.md), sans-IO: which sequences run, in which slot, in
//! which micro-batch. No clock, no IO: the session feeds it requests, returned token-out
//! micro-batches and cancellations, and takes micro-batches to inject and per-sequence
//! outputs.
//!
//! Rules:
//! - **Admission**: a request takes a free slot, or waits in a bounded queue; a full queue
//!   is [`Refusal::Busy`]. An empty prompt, or one that does not fit the context, is
//!   refused before it takes a slot or a queue place.
//! - **Groups**: each admitted sequence joins the group with the fewest sequences; a group
//!   has at most one micro-batch in flight, so a sequence never has two. With more groups
//!   than stages every stage has work.
//! - **Continuous batching with chunked prefill**: a group's micro-batch takes the next
//!   token of each of its decoding sequences, then chunks of its prefilling prompts within
//!   the token budget, oldest first. While any sequence decodes, the prompt rows of a
//!   micro-batch also follow a time budget ([`pacer::PrefillPacer`], learned from round
//!   trips the session measures; one prompt at a time until it has learned), so a prompt
//!   arriving into a busy session neither stalls the decoding sequences nor waits behind
//!   them. Prompts with nobody decoding go at full size (throughput first). The first chunk of a sequence resets its slot (in order,
//!   through every stage); the chunk that ends the prompt samples.
//! - **Warm slots** ([`prefix`]): a finished sequence's slot keeps its caches and the
//!   scheduler its token ids; a new request takes the free slot sharing its longest
//!   prefix and prefills only the rest.
//! - **Stops**: EOS, `max_tokens`, a full context, a cancellation (a stop string is one the
//!   session found in the text). A sequence cancelled while in flight ends when its
//!   micro-batch returns. A finished sequence frees its slot and the queue moves up.
//! - Returned micro-batches come back in injection order and must carry the table that was
//!   sent; anything else is a typed [`ReturnError`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::speculate::adapt::{DraftLength, RowCost};
use crate::speculate::ngram::NgramDrafter;
use crate::wire::SamplingPolicy;
use crate::wire::batch::{
    BatchEntry, BatchTable, EntryFlags, EntrySampling, MAX_CACHE_OPS, MAX_VERIFY_ROWS,
};

use crate::wire::logprobs::TokenLogprobs;
pub use prefix::{PrefixCounters, WindowRing};
pub use resume::CarriedSlots;
use seq::{InFlight, Seq};
pub use spec::SpecCounters;
pub use view::SlotView;

/// A sequence's id within one session (assigned at submission, increasing from 0).
pub type SeqId = u64;

/// How the scheduler is sized (fixed by the plan for the whole session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerConfig {
    /// Slots: sequences in the pipeline at once (`max_sequences`).
    pub max_sequences: u16,
    /// Groups (micro-batches in flight at most).
    pub groups: u16,
    /// Requests waiting for a slot at most.
    pub queue_capacity: usize,
    /// Rows per micro-batch at most (raised to `max_sequences` if below).
    pub batch_tokens: u32,
    /// Positions per slot.
    pub max_seq_len: u32,
    /// A micro-batch carrying prompt rows while other sequences decode should come back
    /// within this (`None`: prompt chunks follow `batch_tokens` alone).
    pub prefill_budget: Option<Duration>,
    /// The end-of-sequence token.
    pub eos: Option<u32>,
    /// The end-of-turn token, where the model has one: it ends a sequence as eos does.
    pub eot: Option<u32>,
    /// Vocabulary size (a returned token at or above it is refused).
    pub vocab: u32,
    /// The most log-probability alternatives an entry may ask for (`None`: no entry asks;
    /// a sequence's request is cut to this).
    pub max_top_logprobs: Option<u32>,
    /// Speculative decoding: the most tokens drafted per trip for one sequence (0: off;
    /// at most 15), by the n-gram lookup unless [`Scheduler::draft_externally`].
    pub draft_max: u8,
    /// Tokens drafted per trip at least, whatever acceptance and row cost say (0: the
    /// length adapts alone; cut to `draft_max`).
    pub draft_min: u8,
    /// The sliding-window blocks' cache ring, where the model has one smaller than the
    /// context (which prefixes a warm slot can still continue).
    pub window: Option<WindowRing>,
    /// Every stage's prompt-cache store: positions per block and blocks (0: none).
    pub store: (u32, u32),
    /// Bytes of every table's token-mask section (0: constrained requests are refused).
    pub mask_bytes: u32,
}

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct SeqRequest {
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Tokens to generate at most (0 counts as 1).
    pub max_tokens: u32,
    /// How its tokens are picked.
    pub sampling: SamplingPolicy,
    /// Log-probabilities of each token and this many alternatives (`None`: none).
    pub logprobs: Option<u32>,
    /// Whether its tokens may be drafted and verified several at a time (where the
    /// session speculates; never with log-probabilities).
    pub speculative: bool,
    /// Whether it may start from a prefix a warm slot holds (`cache_prompt`).
    pub cache_prompt: bool,
    /// The grammar its tokens must follow; it does not draft.
    pub constraint: Option<crate::model::constraint::SharedConstraint>,
}

/// Why a request was refused (nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Every slot is taken and the queue is full.
    #[error("busy: every slot is taken and {0} requests already wait")]
    Busy(usize),
    /// The prompt does not fit the context.
    #[error("a prompt of {prompt} tokens does not fit max_seq_len {max}")]
    TooLong {
        /// Prompt tokens.
        prompt: usize,
        /// The context.
        max: u32,
    },
    /// The prompt has no tokens.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The sampling parameters are out of range.
    #[error("invalid sampling parameters")]
    BadSampling,
    /// A constrained request in a session whose tables carry no token masks.
    #[error("this session has no room for token masks: constrained output is off")]
    Unconstrained,
}

impl Refusal {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::Busy(_) => "busy",
            Refusal::TooLong { .. } => "prompt_too_long",
            Refusal::EmptyPrompt => "empty_prompt",
            Refusal::BadSampling => "invalid_sampling",
            Refusal::Unconstrained => "unconstrained",
        }
    }
}

/// Why a sequence ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model produced EOS.
    Eos,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The context is full.
    ContextFull,
    /// A stop string appeared in the text.
    Stop,
    /// The client cancelled it.
    Cancelled,
    /// The session faulted or was stopped while it was live.
    Fault,
}

/// What the scheduler tells the session about a sequence.
#[derive(Debug, Clone, PartialEq)]
pub enum SeqOutput {
    /// The log-probabilities of the sequence's next [`SeqOutput::Token`] (when it asked;
    /// they come just before it).
    Logprobs {
        /// The sequence.
        id: SeqId,
        /// The token's log-probability and the most likely alternatives.
        logprobs: TokenLogprobs,
    },
    /// A generated token (EOS is never one).
    Token {
        /// The sequence.
        id: SeqId,
        /// The token.
        token: u32,
    },
    /// The sequence ended; its slot is free.
    Finished {
        /// The sequence.
        id: SeqId,
        /// Why.
        reason: FinishReason,
        /// Its token log: the prompt.
        prompt: Vec<u32>,
        /// Its token log: the tokens generated (EOS excluded).
        generated: Vec<u32>,
        /// Prompt tokens it found cached in its slot (not computed again).
        cached: u32,
    },
}

/// One planned micro-batch for the token-in edge.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedBatch {
    /// Its group.
    pub group: u16,
    /// The entry table.
    pub table: BatchTable,
    /// The token ids of its rows, in table order.
    pub tokens: Vec<u32>,
}

/// Why a returned micro-batch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReturnError {
    /// Nothing is in flight.
    #[error("a micro-batch came back that was never sent")]
    Unexpected,
    /// Its table is not the one sent.
    #[error("the returned table is not the one sent")]
    TableMismatch,
    /// A token outside the vocabulary.
    #[error("token {0} is outside the vocabulary")]
    OutOfVocab(u32),
    /// A sampling entry without a token, or the other way round.
    #[error("the tokens do not match the sampling entries")]
    Malformed,
}

/// The scheduler of one session.
#[derive(Debug)]
pub struct Scheduler {
    cfg: SchedulerConfig,
    pacer: pacer::PrefillPacer,
    queue: VecDeque<(SeqId, SeqRequest)>,
    live: BTreeMap<SeqId, Seq>,
    free_slots: BTreeSet<u16>,
    group_busy: Vec<bool>,
    group_size: Vec<usize>,
    in_flight: VecDeque<InFlight>,
    next_id: SeqId,
    cursor: u16,
    outputs: VecDeque<SeqOutput>,
    /// Sequences that took a slot, oldest first (see [`Scheduler::poll_started`]).
    started: VecDeque<SeqId>,
    planted_early_release: bool,
    planted_skip_reset: bool,
    /// Slots that held a sequence before (for the planted skipped reset).
    used_slots: BTreeSet<u16>,
    /// The in-core drafter (where no drafter outside is asked).
    ngram: NgramDrafter,
    /// A drafter outside the core, asked by jobs (see [`Scheduler::draft_externally`]).
    asks: Option<asks::Asks>,
    spec: SpecCounters,
    /// A verifying row's cost relative to a trip, measured.
    row_cost: RowCost,
    /// What the free slots' caches hold.
    warm: prefix::WarmSlots,
    /// What every stage's block store holds.
    store: store::BlockStore,
    /// What the slots held for certain when the sequences were failed (to carry).
    carry: Option<resume::CarriedSlots>,
    /// Slots whose tokens were carried from the faulted run and not taken since.
    carried: BTreeSet<u16>,
    planted_overkeep: bool,
}

impl Scheduler {
    /// An idle scheduler.
    pub fn new(cfg: SchedulerConfig) -> Scheduler {
        let cfg = SchedulerConfig {
            max_sequences: cfg.max_sequences.max(1),
            groups: cfg.groups.clamp(1, cfg.max_sequences.max(1)),
            batch_tokens: cfg.batch_tokens.max(u32::from(cfg.max_sequences.max(1))),
            ..cfg
        };
        Scheduler {
            pacer: pacer::PrefillPacer::new(cfg.prefill_budget),
            queue: VecDeque::new(),
            live: BTreeMap::new(),
            free_slots: (0..cfg.max_sequences).collect(),
            group_busy: vec![false; usize::from(cfg.groups)],
            group_size: vec![0; usize::from(cfg.groups)],
            in_flight: VecDeque::new(),
            next_id: 0,
            cursor: 0,
            outputs: VecDeque::new(),
            started: VecDeque::new(),
            planted_early_release: false,
            planted_skip_reset: false,
            used_slots: BTreeSet::new(),
            ngram: NgramDrafter::default(),
            asks: None,
            spec: SpecCounters::default(),
            row_cost: RowCost::default(),
            warm: prefix::WarmSlots::new(cfg.max_sequences),
            store: store::BlockStore::new(cfg.store.0, cfg.store.1, cfg.max_seq_len),
            carry: None,
            carried: BTreeSet::new(),
            planted_overkeep: false,
            cfg,
        }
    }

    /// Test-only: plants a bug: a sequence cancelled while in flight frees its slot at once
    /// (the slot can then be given to a new sequence while the old micro-batch still
    /// flies). Never set outside the simulation's self-check.
    pub fn plant_early_slot_release(&mut self) {
        self.planted_early_release = true;
    }

    /// Test-only: plants a bug: a slot that held a sequence before is not reset for its
    /// next one. Never set outside the simulation's self-check.
    pub fn plant_skip_reset(&mut self) {
        self.planted_skip_reset = true;
    }

    /// Test-only: plants a bug: a warm slot claims one more prompt token than it shares
    /// with a request. Never set outside the simulation's self-check.
    pub fn plant_prefix_overclaim(&mut self) {
        self.warm.plant_overclaim();
    }

    /// Test-only: plants a bug: the block store's directory records saved blocks whose
    /// save operation is never sent. Never set outside the simulation's self-check.
    pub fn plant_store_skip_save(&mut self) {
        self.store.plant_skip_save();
    }

    /// The prefix cache's counters so far (warm slots and block store).
    pub fn prefix_counters(&self) -> PrefixCounters {
        let store = self.store.counters();
        PrefixCounters {
            store_blocks: store.blocks,
            store_saved: store.saved,
            store_loaded: store.loaded,
            store_evicted: store.evicted,
            ..self.warm.counters()
        }
    }

    /// The configuration in force (after its clamps).
    pub fn config(&self) -> &SchedulerConfig {
        &self.cfg
    }

    /// The next sequence that left the queue for a slot (its wait ended).
    pub fn poll_started(&mut self) -> Option<SeqId> {
        self.started.pop_front()
    }

    /// Submits a request: it is admitted into a free slot or queued, or refused.
    pub fn submit(&mut self, req: SeqRequest) -> Result<SeqId, Refusal> {
        if req.prompt.is_empty() {
            return Err(Refusal::EmptyPrompt);
        }
        if req.prompt.len() > self.cfg.max_seq_len as usize {
            return Err(Refusal::TooLong { prompt: req.prompt.len(), max: self.cfg.max_seq_len });
        }
        if req.sampling.validate().is_err() {
            return Err(Refusal::BadSampling);
        }
        if req.constraint.is_some() && self.cfg.mask_bytes == 0 {
            return Err(Refusal::Unconstrained);
        }
        if self.free_slots.is_empty() && self.queue.len() >= self.cfg.queue_capacity {
            return Err(Refusal::Busy(self.queue.len()));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queue.push_back((id, req));
        self.admit();
        Ok(id)
    }

    fn admit(&mut self) {
        while !self.queue.is_empty() && !self.free_slots.is_empty() {
            let Some((id, req)) = self.queue.pop_front() else { return };
            let ring = self.cfg.window;
            let free = &self.free_slots;
            let Some(mut chosen) = self.warm.choose(free, &req.prompt, req.cache_prompt, ring)
            else {
                return;
            };
            let resume = self.resumes(&mut chosen);
            let slot = chosen.slot;
            self.free_slots.remove(&slot);
            let group = (0..self.cfg.groups)
                .min_by_key(|&g| (self.group_size[usize::from(g)], g))
                .unwrap_or(0);
            self.group_size[usize::from(group)] += 1;
            self.started.push_back(id);
            self.live.insert(
                id,
                Seq {
                    slot,
                    group,
                    prompt: req.prompt,
                    // A resumed sequence sends every row (a new stage computes them).
                    prefilled: if resume.is_some() { 0 } else { chosen.reuse as usize },
                    generated: Vec::new(),
                    max_tokens: req.max_tokens.max(1),
                    sampling: EntrySampling {
                        top_logprobs: req
                            .logprobs
                            .zip(self.cfg.max_top_logprobs)
                            .map_or(0, |(k, m)| k.min(m)),
                        ..EntrySampling::from_policy(req.sampling)
                    },
                    logprobs: req.logprobs.is_some() && self.cfg.max_top_logprobs.is_some(),
                    in_flight: false,
                    cancelled: None,
                    draft: Vec::new(),
                    spec: (self.cfg.draft_max > 0 && req.speculative && req.logprobs.is_none())
                        .then(|| {
                            let most =
                                usize::from(self.cfg.draft_max).min(MAX_VERIFY_ROWS as usize - 1);
                            DraftLength::new(most).with_min(usize::from(self.cfg.draft_min))
                        }),
                    rollback: false,
                    cached: if resume.is_some() { 0 } else { chosen.reuse },
                    fresh: true,
                    kv_valid: resume.unwrap_or(chosen.reuse) as usize,
                    kv_high: chosen.high,
                    old: chosen.old,
                    cache_prompt: req.cache_prompt,
                    resume_below: resume.unwrap_or(0),
                    shared: resume.unwrap_or(chosen.reuse),
                    returned: false,
                    constraint: req.constraint,
                },
            );
        }
    }

    /// Ends a sequence on the client's word (`Cancelled`, or `Stop` for a stop string):
    /// at once when nothing of it is in flight, else when its micro-batch returns (its
    /// token is dropped). An unknown or finished id changes nothing.
    pub fn cancel(&mut self, id: SeqId, reason: FinishReason) {
        if let Some(at) = self.queue.iter().position(|(q, _)| *q == id) {
            if let Some((_, req)) = self.queue.remove(at) {
                self.outputs.push_back(SeqOutput::Finished {
                    id,
                    reason,
                    prompt: req.prompt,
                    generated: Vec::new(),
                    cached: 0,
                });
            }
            return;
        }
        let Some(seq) = self.live.get_mut(&id) else { return };
        if seq.in_flight && !self.planted_early_release {
            seq.cancelled.get_or_insert(reason);
        } else {
            self.finish(id, reason);
        }
    }

    /// Ends every sequence, queued or live, with `reason` (the session faulted or is
    /// stopping); nothing will return.
    pub fn fail_all(&mut self, reason: FinishReason) {
        self.in_flight.clear();
        self.settle_for_carry();
        for (id, req) in std::mem::take(&mut self.queue) {
            self.outputs.push_back(SeqOutput::Finished {
                id,
                reason,
                prompt: req.prompt,
                generated: Vec::new(),
                cached: 0,
            });
        }
        let ids: Vec<SeqId> = self.live.keys().copied().collect();
        for id in ids {
            self.finish(id, reason);
        }
        self.group_busy.iter_mut().for_each(|b| *b = false);
        self.carry_slots();
        self.warm.forget();
        self.store.forget();
        if let Some(asks) = self.asks.as_mut() {
            asks.clear();
        }
    }

    fn finish(&mut self, id: SeqId, reason: FinishReason) {
        let Some(seq) = self.live.remove(&id) else { return };
        self.free_slots.insert(seq.slot);
        self.group_size[usize::from(seq.group)] -= 1;
        // The slot keeps what its caches hold: the history's valid positions.
        let valid = seq.kv_valid.min(seq.history_len());
        let mut held = seq.prompt.clone();
        held.extend_from_slice(&seq.generated);
        held.truncate(valid);
        self.warm.release(seq.slot, held, seq.kv_high);
        self.outputs.push_back(SeqOutput::Finished {
            id,
            reason,
            prompt: seq.prompt,
            generated: seq.generated,
            cached: seq.cached,
        });
        self.admit();
    }

    /// The next micro-batch to inject, if a group without one in flight has work.
    pub fn next_batch(&mut self) -> Option<PlannedBatch> {
        for k in 0..self.cfg.groups {
            let group = (self.cursor + k) % self.cfg.groups;
            if self.group_busy[usize::from(group)] {
                continue;
            }
            if let Some(batch) = self.form(group) {
                self.cursor = (group + 1) % self.cfg.groups;
                return Some(batch);
            }
        }
        None
    }

    fn form(&mut self, group: u16) -> Option<PlannedBatch> {
        let mut entries = Vec::new();
        let mut tokens = Vec::new();
        let mut ids = Vec::new();
        let mut budget = self.cfg.batch_tokens as usize;
        // While a sequence decodes, prompt rows follow the time budget (one prompt at a
        // time until the pacer has learned the cost); prompts alone go at full size.
        let shared = self.pacer.paces()
            && self.live.values().any(|s| s.prefilled >= s.prompt.len() && s.cancelled.is_none());
        let mut prompt_budget =
            if shared { self.pacer.chunk_rows(self.cfg.batch_tokens) as usize } else { usize::MAX };
        let mut prompts_left = if shared && !self.pacer.learned() { 1 } else { usize::MAX };
        let mut prompt_rows = 0u32;
        let mut ops = Vec::new();
        let (mut masks, mut mask_used) = (Vec::new(), crate::wire::mask::section_bytes(&[]));
        // One more verifying row costs a fraction of a trip while decode reads the weights
        // once for every row (measured); with requests waiting or a crowded group it costs
        // a step: drafts yield.
        let crowd = self.live.values().filter(|s| s.group == group).count();
        let row_cost =
            if self.queue.is_empty() && crowd < 4 { self.row_cost.relative() } else { 1.0 };
        // A group whose drafts are asked of a drafter outside waits for the answer.
        let mut drafts = self.drafts(group, row_cost, budget)?;
        // Decoding sequences first (their last token and any draft), then prompt chunks
        // within the budgets.
        for decoding in [true, false] {
            for (&id, seq) in self.live.iter_mut() {
                if seq.group != group || !seq.has_work() || budget == 0 {
                    continue;
                }
                let prefilling = seq.prefilled < seq.prompt.len();
                if prefilling == decoding
                    || (prefilling && (prompt_budget == 0 || prompts_left == 0))
                {
                    continue;
                }
                // A constrained entry that samples carries its mask, where the section has room.
                let samples =
                    decoding || seq.prompt.len() - seq.prefilled <= budget.min(prompt_budget);
                let mut draft = if decoding { drafts.remove(&id) } else { None };
                let room = self.cfg.mask_bytes;
                let Some(sets) = seq.next_masks(samples, &mut draft, &mut mask_used, room) else {
                    drafts.extend(draft.map(|d| (id, d)));
                    continue;
                };
                let limit = self.cfg.max_seq_len;
                let keeps = seq.fresh && seq.resume_below > 0;
                if keeps && ops.len() >= usize::from(MAX_CACHE_OPS) {
                    continue;
                }
                if !keeps
                    && !store::first_entry(&mut self.store, &mut self.warm, seq, limit, &mut ops)
                {
                    continue;
                }
                let (first, rows, mut flags): (usize, Vec<u32>, EntryFlags) = if decoding {
                    let Some(entry) = spec::decode_entry(seq, draft) else {
                        continue;
                    };
                    entry
                } else {
                    let n = (seq.prompt.len() - seq.prefilled).min(budget).min(prompt_budget);
                    let chunk = seq.prompt[seq.prefilled..seq.prefilled + n].to_vec();
                    let flags = if seq.prefilled + n == seq.prompt.len() {
                        EntryFlags::SAMPLE
                    } else {
                        EntryFlags::NONE
                    };
                    (seq.prefilled, chunk, flags)
                };
                // The planted bug alone needs to know which slots were used before.
                let skip = self.planted_skip_reset && !self.used_slots.insert(seq.slot);
                flags = flags | seq.start_flags(skip, first, &mut ops);
                let (flags, sampling) = seq.entry_sampling(flags);
                masks.extend(seq::row_masks(entries.len(), rows.len(), sets));
                budget -= rows.len();
                tokens.extend_from_slice(&rows);
                entries.push(BatchEntry {
                    slot: u32::from(seq.slot),
                    first_position: first as u32,
                    tokens: rows.len() as u32,
                    flags,
                    sampling,
                });
                if !decoding {
                    seq.prefilled += rows.len();
                    if let Some(asks) = self.asks.as_mut()
                        && seq.prefilled == seq.prompt.len()
                        && seq.spec.is_some()
                    {
                        asks.warm(seq.slot, seq.prompt.clone());
                    }
                    prompt_budget -= rows.len();
                    prompts_left -= 1;
                    prompt_rows += rows.len() as u32;
                }
                seq.in_flight = true;
                ids.push(id);
            }
        }
        if entries.is_empty() {
            return None;
        }
        let table = BatchTable::new(self.cfg.max_sequences, entries)
            .with_ops(ops)
            .with_masks(masks, self.cfg.mask_bytes);
        self.group_busy[usize::from(group)] = true;
        let draft_rows = (table.entries().iter())
            .filter(|e| e.flags.contains(EntryFlags::VERIFY))
            .map(|e| e.tokens.saturating_sub(1) as usize)
            .sum();
        self.in_flight.push_back(InFlight {
            group,
            table: table.clone(),
            ids,
            prompt_rows,
            draft_rows,
        });
        Some(PlannedBatch { group, table, tokens })
    }

    /// The next output.
    pub fn poll_output(&mut self) -> Option<SeqOutput> {
        self.outputs.pop_front()
    }

    /// Micro-batches in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Sequences holding a slot.
    pub fn live(&self) -> usize {
        self.live.len()
    }

    /// Requests waiting for a slot.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Nothing queued, live or in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty() && self.live.is_empty() && self.in_flight.is_empty()
    }

    /// Free slots.
    pub fn free_slots(&self) -> usize {
        self.free_slots.len()
    }
}

mod asks;
pub mod pacer;
pub mod prefix;
mod resume;
mod returns;
mod seq;
mod spec;
mod store;
mod view;

#[cfg(test)]
pub(crate) mod tests;
