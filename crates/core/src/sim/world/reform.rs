//! The session across runs: each request followed by its index through every run, a run
//! that lost a node kept as the driver keeps it (the real resume policy and replay), the
//! pool gate's re-formation over the nodes left, and the next run resuming every kept
//! request — or, past the resume timeout or at an operator stop, every kept request
//! ending with the fault.

use super::setup::the_plan;
use super::{Ev, OrchIn, Req, World};
use crate::orchestrator::reform::{KeptEnd, Reformation, resubmission};
use crate::orchestrator::requests::{Replay, Request};
use crate::orchestrator::scheduler::{FinishReason, SeqId, SeqRequest};
use crate::wire::reason::FaultReason;
use crate::wire::{RunId, SamplingPolicy};

impl Req {
    /// How its tokens are picked.
    pub(super) fn sampling(&self) -> SamplingPolicy {
        if self.temperature > 0.0 {
            let (temperature, seed) = (self.temperature, self.seed);
            SamplingPolicy::Sample { temperature, top_k: None, top_p: None, seed }
        } else {
            SamplingPolicy::Greedy
        }
    }
}

impl World {
    /// Request `k` is sequence `seq` of the current run (its tokens so far are replayed).
    pub(super) fn admitted(&mut self, k: usize, seq: SeqId) {
        self.seqs.insert(seq, k);
        let r = &mut self.reqs[k];
        (r.id, r.base, r.kept) = (Some(seq), r.tokens.len(), false);
    }

    /// Sequence `id` of the current run ended: its token log must be what it emitted (its
    /// replayed tokens counted as prompt); a fault while the session re-forms keeps it.
    pub(super) fn sequence_ended(
        &mut self,
        id: SeqId,
        reason: FinishReason,
        prompt: &[u32],
        generated: &[u32],
    ) {
        let Some(k) = self.seqs.remove(&id) else {
            return self.violation(format!("unknown sequence {id} finished"));
        };
        let r = &self.reqs[k];
        let mut logged = r.prompt.clone();
        logged.extend_from_slice(&r.tokens[..r.base]);
        if prompt != logged || generated != &r.tokens[r.base..] {
            self.violation(format!("request {k}'s token log differs from its tokens"));
        }
        let r = &mut self.reqs[k];
        r.id = None;
        if reason == FinishReason::Fault && self.reforming.is_some() {
            r.kept = true;
            return;
        }
        if r.finished.replace(reason).is_some() {
            self.violation(format!("request {k} finished twice"));
        }
    }

    /// The run faulted with `cause`: a node loss the policy survives starts a re-formation,
    /// unless nothing is left to resume and nothing more will come.
    pub(super) fn faulted(&mut self, cause: FaultReason) {
        let live = self.reqs.iter().any(|r| r.id.is_some()) || !self.early.0.is_empty();
        let idle = self.input_closed && !live;
        if self.reforming.is_some() || idle || !self.policy.survives(cause) {
            return;
        }
        self.trace(format!("session_reforming after {cause}"));
        self.reforming = Some(Reformation::start(self.instant(), cause, &self.policy));
    }

    /// The current run tore down: the session ends, or re-forms once the pool gate offers
    /// the nodes left.
    pub(super) fn run_torn_down(&mut self) {
        let Some(r) = self.reforming else {
            self.torn_down = true;
            return;
        };
        let fsm = self.fsm.take();
        self.report.draft_tokens += fsm.as_ref().map_or(0, |f| f.spec_counters().draft_tokens);
        self.last_outcome = fsm.and_then(|f| f.outcome());
        self.inflight.clear();
        self.gate.reform(self.instant());
        let at = r.deadline.saturating_duration_since(self.base);
        self.at(at, Ev::Orch(OrchIn::ResumeTimeout(self.run)));
    }

    /// The gate offers `nodes`: the next run is planned over them (one stage each) and the
    /// session resumes.
    pub(super) fn reform_over(&mut self, nodes: &[crate::wire::NodeId]) {
        let route: Vec<usize> = nodes.iter().map(|n| n.0 as usize - 1).collect();
        self.run = RunId(self.run.0 + 1);
        self.plan = the_plan(&route, self.slots, self.run);
        self.route = self.plan.stages.iter().map(|s| s.node_id.0 as usize - 1).collect();
        self.reforming = None;
        self.report.reformed += 1;
        self.trace(format!("session re-formed over nodes {:?} (run {})", self.route, self.run));
        self.start_session();
    }

    /// Every kept request resumes on the new run (in request order, before any new one):
    /// its prompt and tokens replayed, what is left of its budget.
    pub(super) fn resume_kept(&mut self) {
        let now = self.instant();
        for k in 0..self.reqs.len() {
            if !self.reqs[k].kept {
                continue;
            }
            let r = &self.reqs[k];
            let request = Request {
                id: k.to_string(),
                prompt: r.prompt.clone(),
                max_tokens: r.max_tokens,
                sampling: r.sampling(),
                stop: Vec::new(),
                logprobs: None,
                speculative: true,
            };
            let mut tokens = r.prompt.clone();
            tokens.extend_from_slice(&r.tokens);
            let replay = Replay { tokens, generated: r.tokens.len() as u32, resumed: r.resumed };
            let resubmitted: Result<SeqRequest, KeptEnd> =
                resubmission(&self.policy, &request, &replay, super::MAX_SEQ);
            let got = match resubmitted {
                Ok(req) => self.fsm.as_mut().map(|f| f.submit(now, req).map_err(|e| e.code())),
                Err(end) => {
                    let r = &mut self.reqs[k];
                    r.kept = false;
                    r.capped = end == KeptEnd::CapReached;
                    r.finished = Some(match end {
                        KeptEnd::Finished(reason) => reason,
                        KeptEnd::CapReached | KeptEnd::TooLong => FinishReason::Fault,
                    });
                    continue;
                }
            };
            self.trace(format!("resume request {k}: {got:?}"));
            match got {
                Some(Ok(seq)) => {
                    self.reqs[k].resumed += 1;
                    self.admitted(k, seq);
                }
                _ => self.violation(format!("kept request {k} could not resume: {got:?}")),
            }
        }
    }

    /// Re-forming is given up (`why`): every kept request ends with the fault, and the
    /// session is over.
    pub(super) fn abandon(&mut self, why: &'static str) {
        self.trace(format!("session_reform_failed: {why}"));
        self.reforming = None;
        self.abandoned = Some(why);
        // No session forms after it.
        self.early.3 = true;
        for r in self.reqs.iter_mut().filter(|r| r.kept) {
            r.kept = false;
            r.finished = Some(FinishReason::Fault);
        }
        self.torn_down = true;
    }
}
