//! Re-forming a session: whether a fault starts it (a node loss the policy survives, unless
//! the session is idle), growing onto a pool that grew, the next plan's stage count, the
//! nodes that stop the faulted run first, every kept request resumed on the next run (or
//! ended), and giving re-forming up.

use std::time::Instant;

use super::{Session, SessionCommand, SessionOutput, start_fsm};
use crate::events::Event;
use crate::orchestrator::reform::{
    GrowthAsk, KeptEnd, REPLAY_TOO_LONG, Reformation, ResumePolicy, grown_stages, kept_stages,
    resubmission,
};
use crate::orchestrator::scheduler::FinishReason;
use crate::wire::reason::{Component, FaultReason, PoolChange};
use crate::wire::{NodeId, RunId, RunPlan};

/// Why re-forming was given up (`session_reform_failed`'s `why`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReformEnd {
    /// The operator stopped the session while it re-formed (`operator_stop`).
    OperatorStop,
    /// No nodes that hold the model were offered in time (`resume_timeout`).
    ResumeTimeout,
    /// The next run's local resources could not be set up (`setup`).
    Setup,
}

impl ReformEnd {
    /// Its stable code.
    pub fn as_str(self) -> &'static str {
        match self {
            ReformEnd::OperatorStop => "operator_stop",
            ReformEnd::ResumeTimeout => "resume_timeout",
            ReformEnd::Setup => "setup",
        }
    }
}

/// A bug planted in re-formation on purpose, to show the simulation's checks find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedSessionBug {
    /// The last kept request is neither resumed nor ended: it is forgotten.
    ForgetKept,
    /// A replay leaves out the last token its request generated.
    ReplaySkipsToken,
    /// Every run's scheduler frees a cancelled sequence's slot while its micro-batch is
    /// still in flight.
    EarlySlotRelease,
    /// Every run's scheduler does not reset a reused slot for its next sequence.
    SkipReset,
    /// Every run's scheduler claims one more cached prompt token than a warm slot shares.
    PrefixOverclaim,
    /// Every run's block store records saves it never sends.
    StoreSkipSave,
    /// Every run's scheduler keeps all a carried slot held for the sequence taking it.
    ResumeOverkeep,
}

impl Session<'_> {
    /// The run faulted with `cause` at `now`: a node loss the policy survives starts a
    /// re-formation (its sequences are kept as they end), unless the session is idle
    /// (nothing to resume and nothing more to come: it simply ends). Returns whether it did.
    pub(super) fn faulted(&mut self, now: Instant, cause: FaultReason) -> bool {
        if self.reforming.is_some() || self.idle() || !self.config.resume.survives(cause) {
            return false;
        }
        self.reforming = Some(Reformation::start(now, cause, &self.config.resume));
        let sequences = (self.load.0 + self.load.1) as u32;
        let run_id = self.plan.run_id;
        self.out.push_back(SessionOutput::Event(Event::SessionReforming {
            run_id,
            cause,
            sequences,
        }));
        true
    }

    /// Whether the session holds nothing and no more requests will come.
    fn idle(&self) -> bool {
        self.input_closed && self.load == (0, 0) && self.waiting.is_empty()
    }

    /// More nodes are ready than the run uses (`nodes`): a session re-formed onto fewer
    /// stages than it asks for re-forms onto them, at once (its sequences resume on the
    /// larger plan; the re-formation does not count against their resume cap).
    pub(super) fn grow(&mut self, now: Instant, nodes: Vec<NodeId>) {
        let stages = self.plan.stages.len() as u32;
        let ask = GrowthAsk {
            stages,
            desired: self.config.desired_stages,
            ready: nodes.len() as u32,
            serving: self.fsm.outcome().is_none() && self.reforming.is_none(),
            idle: self.idle(),
        };
        let Some(target) = grown_stages(&self.config.resume, ask) else { return };
        self.out.push_back(SessionOutput::Progress(format!(
            "nodes {nodes:?} are ready: re-forming the session from {stages} stages to {target}"
        )));
        self.grown = Some(nodes);
        let reason = PoolChange::CapacityGrew.into();
        self.fsm.fault(now, reason, Component::PoolGate, None, None, None);
    }

    /// What the gate offered while the faulted run tore down (taken once).
    pub fn take_offered(&mut self) -> Option<Vec<NodeId>> {
        self.offered.take()
    }

    /// The stage count of the next run over `offered` nodes: as many as the session asks
    /// for, as far as the nodes go (a spare or the lost node back restores the shape).
    pub fn next_stages(&self, offered: usize) -> u32 {
        self.config.desired_stages.min(offered as u32).max(1)
    }

    /// The id of the next run.
    pub fn next_run_id(&self) -> RunId {
        RunId(self.plan.run_id.0 + 1)
    }

    /// Re-forms the session on `plan` (a new run over the nodes offered) at `now`: a node
    /// of the faulted run that is in the new plan stops that run first (it may never have
    /// heard it end: its loss was the orchestrator's view, not its own); every kept request
    /// resumes (its prompt and generated tokens replayed) and every request that arrived
    /// meanwhile is submitted.
    pub fn reform(&mut self, now: Instant, plan: RunPlan) {
        let old = self.plan.run_id;
        // The stages that stay where they were keep their caches, and the slots' certain
        // contents go with them to the next run's scheduler.
        let mut kept = kept_stages(&self.plan, &plan);
        if !self.config.resume.keep_caches {
            kept.iter_mut().for_each(|k| *k = false);
        }
        let carried = self.fsm.take_carried();
        for s in &self.plan.stages {
            if plan.stages.iter().any(|n| n.node_id == s.node_id) {
                let park = self.config.resume.keep_caches;
                let (node, run_id) = (s.node_id, old);
                let stop = SessionCommand::StopRun { node, run_id, faulted: true, park };
                self.out.push_back(SessionOutput::Command(stop));
            }
        }
        self.spec_before = self.spec_before + self.fsm.spec_counters();
        self.prefix_before = self.prefix_before + self.fsm.prefix_counters();
        self.fsm = start_fsm(now, &plan, &self.config, self.planted);
        if let Some(carried) = carried.filter(|_| kept.contains(&true)) {
            self.fsm.resume_onto(carried);
        }
        self.kept = Some((old, kept));
        self.node_of = plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect();
        self.plan = plan;
        (self.fault, self.torn_down, self.endpoints_ready, self.loaded_weights) =
            (None, false, 0, 0);
        let cause = self.reforming.take().map(|r| r.cause);
        let mut kept = self.book.kept();
        if self.planted == Some(PlantedSessionBug::ForgetKept) {
            kept.pop();
        }
        for &index in &kept {
            self.resume_kept(now, index, cause);
        }
        self.reformed = Some(kept.iter().filter(|i| self.book.seq_of(**i).is_some()).count());
        for index in std::mem::take(&mut self.waiting) {
            self.submit(now, index);
        }
        if self.input_closed {
            self.fsm.close_input(now);
        }
    }

    /// Kept request `index` resumes on the re-formed run, or ends (`cause`: the fault
    /// that started the re-formation).
    fn resume_kept(&mut self, now: Instant, index: usize, cause: Option<FaultReason>) {
        let (Some(request), Some(mut replay)) = (self.book.request(index), self.book.replay(index))
        else {
            return;
        };
        if self.planted == Some(PlantedSessionBug::ReplaySkipsToken) && replay.generated > 0 {
            replay.tokens.pop();
        }
        let fault = cause.map(|c| c.to_string()).unwrap_or_default();
        let max = self.plan.runtime.max_seq_len;
        // A pool that grew is no failure: it does not use up the sequence's resumes.
        let counted = cause.is_none_or(|c| c.counts_as_resume());
        let policy = if counted {
            self.config.resume
        } else {
            ResumePolicy { max_resumes: u32::MAX, ..self.config.resume }
        };
        let (reason, error) = match resubmission(&policy, request, &replay, max) {
            Ok(req) => match self.fsm.submit(now, req) {
                Ok(seq) => {
                    self.book.resumed(index, seq, counted);
                    let (run_id, replayed_tokens) = (self.plan.run_id, replay.tokens.len() as u32);
                    let kept_tokens = self.fsm.kept_positions(seq);
                    let ev =
                        Event::SequenceResumed { run_id, id: seq, replayed_tokens, kept_tokens };
                    self.out.push_back(SessionOutput::Event(ev));
                    return;
                }
                Err(refusal) => (FinishReason::Fault, refusal.code().to_string()),
            },
            Err(KeptEnd::Finished(reason)) => (reason, String::new()),
            Err(KeptEnd::CapReached) => (FinishReason::Fault, fault),
            Err(KeptEnd::TooLong) => (FinishReason::Fault, REPLAY_TOO_LONG.to_string()),
        };
        self.end_kept(index, reason, &error);
    }

    /// Re-forming is given up (`why`): every kept request, and every one that arrived
    /// meanwhile, ends with the fault that started it (or as stopped, for an operator
    /// stop); the session is over.
    pub fn abandon(&mut self, why: ReformEnd) {
        let Some(r) = self.reforming.take() else { return };
        let (run_id, cause) = (self.plan.run_id, r.cause);
        let why_code = why.as_str().into();
        let ev = Event::SessionReformFailed { run_id, cause, why: why_code };
        self.out.push_back(SessionOutput::Event(ev));
        self.stopped = why == ReformEnd::OperatorStop;
        let fault = self.end_reason().to_string();
        for index in self.book.kept() {
            self.end_kept(index, FinishReason::Fault, &fault);
        }
        for index in std::mem::take(&mut self.waiting) {
            self.book.refused(index, &fault);
            self.give_result(index);
        }
        self.resolve_rest();
    }
}
