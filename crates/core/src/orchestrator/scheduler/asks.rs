//! The scheduler's asks of a drafter outside the core (drafting as data): the jobs it
//! emits, the ask each group waits for, and the drafts answered. A group whose decoding
//! sequences want drafts asks once and forms its micro-batch when the answer comes (or
//! without drafts once its wait is given up); other groups go on meanwhile.

use std::collections::{BTreeMap, VecDeque};

use super::SeqId;
use crate::speculate::{AskId, DraftAsk, DraftJob, DraftRequest};
use crate::wire::RunId;

/// One group's ask in flight: its number and, per sequence, the history length it was
/// asked for and the tokens wanted at most.
#[derive(Debug)]
struct Pending {
    number: u64,
    seqs: Vec<(SeqId, usize, usize)>,
}

/// A drafter outside the core, as the scheduler sees it.
#[derive(Debug)]
pub(super) struct Asks {
    run: RunId,
    step_cost: f64,
    next: u64,
    /// Per group: the ask it waits for.
    pending: BTreeMap<u16, Pending>,
    /// Per group: the drafts answered (or none, where its wait was given up), per
    /// sequence with the history length they follow.
    answered: BTreeMap<u16, BTreeMap<SeqId, (usize, Vec<u32>)>>,
    seconds_per_token: Option<f64>,
    jobs: VecDeque<DraftJob>,
}

impl Asks {
    /// Asks named in `run`, of a drafter whose step costs `step_cost` of the target's.
    pub(super) fn new(run: RunId, step_cost: f64) -> Asks {
        Asks {
            run,
            step_cost,
            next: 0,
            pending: BTreeMap::new(),
            answered: BTreeMap::new(),
            seconds_per_token: None,
            jobs: VecDeque::new(),
        }
    }

    /// One drafted token's cost relative to a trip of `trip_seconds`.
    pub(super) fn cost(&self, trip_seconds: Option<f64>) -> f64 {
        crate::speculate::draft_cost(self.step_cost, self.seconds_per_token, trip_seconds)
    }

    /// The sequence in `slot` holds `prompt`, now sent whole.
    pub(super) fn warm(&mut self, slot: u16, prompt: Vec<u32>) {
        self.jobs.push_back(DraftJob::Warm { slot, history: prompt });
    }

    /// Whether `group` waits for an answer: an ask in flight for a sequence `live` still
    /// holds. An ask whose sequences all ended is given up (the group forms without).
    pub(super) fn waiting(&mut self, group: u16, live: impl Fn(SeqId) -> bool) -> bool {
        let Some(p) = self.pending.get(&group) else { return false };
        if p.seqs.iter().any(|(id, _, _)| live(*id)) {
            return true;
        }
        let number = p.number;
        self.give_up(number);
        false
    }

    /// The drafts answered for `group`'s next micro-batch (empty where its wait was given
    /// up), by sequence with the history length they follow; `None`: nothing answered.
    pub(super) fn take_answered(
        &mut self,
        group: u16,
    ) -> Option<BTreeMap<SeqId, (usize, Vec<u32>)>> {
        self.answered.remove(&group)
    }

    /// `group` asks for `wanted`: `(sequence, slot, history, k)` each.
    pub(super) fn ask(&mut self, group: u16, wanted: Vec<(SeqId, u16, Vec<u32>, usize)>) {
        let number = self.next;
        self.next += 1;
        let seqs = wanted.iter().map(|(id, _, h, k)| (*id, h.len(), *k)).collect();
        self.pending.insert(group, Pending { number, seqs });
        let asks = (wanted.into_iter())
            .map(|(_, slot, history, k)| DraftAsk { slot, history, k })
            .collect();
        let id = AskId { run: self.run, number };
        self.jobs.push_back(DraftJob::Draft(DraftRequest { id, asks }));
    }

    /// The answer to ask `number` came: its group takes the drafts (one per ask, in
    /// order, each cut to its `k`: a draft never takes rows it was not given). An answer of this run teaches the drafter's cost even when its wait was
    /// given up; one for no waiting ask is otherwise ignored. Whether a group took it.
    pub(super) fn answered(
        &mut self,
        number: u64,
        drafts: Vec<Vec<u32>>,
        seconds_per_token: Option<f64>,
    ) -> bool {
        if number < self.next && seconds_per_token.is_some() {
            self.seconds_per_token = seconds_per_token;
        }
        let Some(group) = self.group_of(number) else { return false };
        let Some(p) = self.pending.remove(&group) else { return false };
        let got = (p.seqs.into_iter().zip(drafts))
            .map(|((id, len, k), mut d)| {
                d.truncate(k);
                (id, (len, d))
            })
            .collect();
        self.answered.insert(group, got);
        true
    }

    /// The wait for ask `number` is given up: its group forms without drafts (a late
    /// answer is ignored).
    pub(super) fn give_up(&mut self, number: u64) {
        if let Some(group) = self.group_of(number) {
            self.pending.remove(&group);
            self.answered.insert(group, BTreeMap::new());
        }
    }

    fn group_of(&self, number: u64) -> Option<u16> {
        self.pending.iter().find(|(_, p)| p.number == number).map(|(g, _)| *g)
    }

    /// Every ask and job dropped (the session ended its sequences).
    pub(super) fn clear(&mut self) {
        self.pending.clear();
        self.answered.clear();
        self.jobs.clear();
    }

    /// The next job for the drafter.
    pub(super) fn poll_job(&mut self) -> Option<DraftJob> {
        self.jobs.pop_front()
    }

    /// The run whose asks these are.
    pub(super) fn run(&self) -> RunId {
        self.run
    }
}
