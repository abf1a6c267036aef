//! The scheduler's part of speculative decoding: a decoding sequence's entry with its
//! draft, and what a verifying entry's return gives the sequence.

use std::collections::BTreeMap;

use super::asks::Asks;
use super::{FinishReason, ReturnError, Scheduler, Seq, SeqId, SeqOutput};
use crate::speculate::verify::accept_greedy;
use crate::speculate::{AskId, DraftAnswer, DraftJob};
use crate::wire::RunId;
use crate::wire::batch::EntryFlags;
use crate::wire::logprobs::TokenLogprobs;

/// Speculation's counters over a session (named as llama.cpp's and vLLM's in reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecCounters {
    /// Trips that carried a draft.
    pub drafts: u64,
    /// Tokens drafted.
    pub draft_tokens: u64,
    /// Drafted tokens accepted.
    pub accepted_tokens: u64,
}

impl std::ops::Add for SpecCounters {
    type Output = SpecCounters;
    fn add(self, o: SpecCounters) -> SpecCounters {
        SpecCounters {
            drafts: self.drafts + o.drafts,
            draft_tokens: self.draft_tokens + o.draft_tokens,
            accepted_tokens: self.accepted_tokens + o.accepted_tokens,
        }
    }
}

/// A decoding sequence's entry: its first position, rows (its last token, then `draft`,
/// which it keeps until the return) and flags (`ROLLBACK` where the stages hold a
/// rejected draft's rows, `VERIFY` with a draft). `None` before its first token.
pub(super) fn decode_entry(
    seq: &mut Seq,
    draft: Option<Vec<u32>>,
) -> Option<(usize, Vec<u32>, EntryFlags)> {
    let last = seq.generated.len().checked_sub(1)?;
    let first = seq.prompt.len() + last;
    let mut rows = vec![seq.generated[last]];
    let mut flags = EntryFlags::SAMPLE;
    if std::mem::take(&mut seq.rollback) {
        flags = flags | EntryFlags::ROLLBACK;
    }
    seq.draft = draft.unwrap_or_default();
    if !seq.draft.is_empty() {
        flags = flags | EntryFlags::VERIFY;
        rows.extend_from_slice(&seq.draft);
    }
    Some((first, rows, flags))
}

/// The tokens a returned sampling entry gives `seq`: its token alone, or for a draft the
/// longest prefix agreeing with the tokens sampled after each row (`target`, then
/// `token` after the last), then the target's own next token. The counters and the
/// sequence's draft length learn from it; a rejected tail is rolled back by its next
/// entry.
pub(super) fn verdict(
    seq: &mut Seq,
    counters: &mut SpecCounters,
    target: &[u32],
    token: u32,
) -> Result<Vec<u32>, ReturnError> {
    let draft = std::mem::take(&mut seq.draft);
    if draft.is_empty() {
        return Ok(vec![token]);
    }
    let mut target = target.to_vec();
    target.push(token);
    let verdict = accept_greedy(&draft, &target).ok_or(ReturnError::Malformed)?;
    counters.drafts += 1;
    counters.draft_tokens += draft.len() as u64;
    counters.accepted_tokens += verdict.accepted as u64;
    if let Some(length) = seq.spec.as_mut() {
        length.observe(draft.len(), verdict.accepted);
    }
    seq.rollback = verdict.accepted < draft.len();
    Ok(verdict.tokens)
}

impl Scheduler {
    /// The drafts of `group`'s decoding sequences for their next trip; `None` while the
    /// group waits for a drafter outside the core to answer. Each sequence's length
    /// follows its acceptance and what a row costs (`row_cost`, plus a drafted token's
    /// measured share of a trip), within the context, the tokens it still wants and the
    /// micro-batch's rows (`budget`, one of them its last token). The n-gram lookup
    /// drafts here at once; a drafter outside is asked once for all of them (a draft
    /// model runs them as one batch) and the group forms when the answer comes.
    pub(super) fn drafts(
        &mut self,
        group: u16,
        row_cost: f64,
        mut budget: usize,
    ) -> Option<BTreeMap<SeqId, Vec<u32>>> {
        if let Some(asks) = self.asks.as_mut() {
            let live = &self.live;
            if asks.waiting(group, |id| live.get(&id).is_some_and(Seq::has_work)) {
                return None;
            }
            // Drafts follow the history they were asked for (no trip of the group flew
            // meanwhile, so it is the sequence's own unless it ended).
            if let Some(answered) = asks.take_answered(group) {
                let fits = |id: &SeqId, len: usize| {
                    live.get(id).is_some_and(|s| s.has_work() && s.history_len() == len)
                };
                let drafts = answered.into_iter().filter(|(id, (len, _))| fits(id, *len));
                return Some(drafts.map(|(id, (_, d))| (id, d)).collect());
            }
        }
        let trip = self.row_cost.trip_seconds();
        let row_cost = row_cost + self.asks.as_ref().map_or(0.0, |a| a.cost(trip));
        let max_seq_len = self.cfg.max_seq_len as usize;
        let mut wanted = Vec::new();
        for (&id, seq) in self.live.iter_mut() {
            let decoding = seq.prefilled >= seq.prompt.len() && !seq.generated.is_empty();
            if seq.group != group || !seq.has_work() || !decoding || budget == 0 {
                continue;
            }
            budget -= 1;
            let Some(length) = seq.spec.as_mut() else { continue };
            let (first, made) = (seq.prompt.len() + seq.generated.len() - 1, seq.generated.len());
            let room = (max_seq_len.saturating_sub(first + 1))
                .min((seq.max_tokens as usize).saturating_sub(made))
                .min(budget);
            let k = length.next(row_cost).min(room);
            if k > 0 {
                budget -= k;
                let mut history = seq.prompt.clone();
                history.extend_from_slice(&seq.generated);
                wanted.push((id, seq.slot, history, k));
            }
        }
        if wanted.is_empty() {
            return Some(BTreeMap::new());
        }
        if let Some(asks) = self.asks.as_mut() {
            asks.ask(group, wanted);
            return None;
        }
        let ngram = &self.ngram;
        Some(wanted.into_iter().map(|(id, _, history, k)| (id, ngram.draft(&history, k))).collect())
    }

    /// Drafts come from a drafter outside the core from now on: the scheduler emits
    /// [`DraftJob`]s named in `run` ([`Scheduler::poll_draft_job`]) and takes their
    /// answers ([`Scheduler::drafts_ready`]); a drafted token is costed at `step_cost` of
    /// a target's step until the answers measure it. Until then, and without it, the
    /// n-gram lookup drafts in the core.
    pub fn draft_externally(&mut self, run: RunId, step_cost: f64) {
        self.asks = Some(Asks::new(run, step_cost));
    }

    /// The next job for the drafter outside the core: a prompt to read while it flies
    /// (speculating sequences whose whole prompt was just sent), or drafts to answer.
    pub fn poll_draft_job(&mut self) -> Option<DraftJob> {
        self.asks.as_mut()?.poll_job()
    }

    /// A drafter's answer: the group that asked forms its micro-batch with the drafts
    /// (each for the sequence it was asked for, if it still holds that history). An
    /// answer for another run or an ask no group waits for changes nothing but the
    /// drafter's measured cost (its run's own). Whether a group took it.
    pub fn drafts_ready(&mut self, answer: DraftAnswer) -> bool {
        match self.asks.as_mut() {
            Some(asks) if asks.run() == answer.id.run => {
                asks.answered(answer.id.number, answer.drafts, answer.seconds_per_token)
            }
            _ => false,
        }
    }

    /// The wait for ask `id` is given up: its group forms without drafts, and its answer
    /// is ignored when it comes. Another run's id, or an answered one, changes nothing.
    pub fn give_up_ask(&mut self, id: AskId) {
        if let Some(asks) = self.asks.as_mut().filter(|a| a.run() == id.run) {
            asks.give_up(id.number);
        }
    }

    /// How long a group should wait for its drafts at most: one trip, as measured
    /// (`None`: not measured yet). Waiting longer would cost more than drafting saves.
    pub fn draft_wait(&self) -> Option<std::time::Duration> {
        self.row_cost.trip_seconds().map(std::time::Duration::from_secs_f64)
    }

    /// Sequence `id` takes `taken` in order (its log-probabilities `lp` before the first),
    /// finishing at the first that ends it.
    pub(super) fn take_tokens(&mut self, id: SeqId, taken: &[u32], mut lp: Option<TokenLogprobs>) {
        for &token in taken {
            let Some(seq) = self.live.get_mut(&id) else { return };
            if Some(token) == self.cfg.eos || Some(token) == self.cfg.eot {
                self.finish(id, FinishReason::Eos);
                return;
            }
            seq.generated.push(token);
            if let Some(c) = &seq.constraint {
                c.commit(token);
            }
            if let Some(lp) = lp.take() {
                self.outputs.push_back(SeqOutput::Logprobs { id, logprobs: lp });
            }
            self.outputs.push_back(SeqOutput::Token { id, token });
            let generated = seq.generated.len();
            // Feeding the token back would pass the context: full, decided before the step.
            let full = seq.prompt.len() + generated > self.cfg.max_seq_len as usize;
            if generated >= seq.max_tokens as usize {
                self.finish(id, FinishReason::MaxTokens);
                return;
            } else if full {
                self.finish(id, FinishReason::ContextFull);
                return;
            }
        }
    }

    /// Speculation's counters so far.
    pub fn spec_counters(&self) -> SpecCounters {
        self.spec
    }
}
