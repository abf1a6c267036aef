//! The orchestrator's run state machine (DESIGN.md 4.4), sans-IO with explicit time.
//!
//! `Provisioning -> (barrier) -> Running -> Completed | Faulted | OperatorStopped ->
//! TearingDown -> Done`.
//!
//! - Started only with a committed plan (after `PoolReady`): one `ProvisionStage` per
//!   stage, all at once, and the local token endpoints.
//! - The readiness barrier passes when every stage reported `StageReady` (duplicates count
//!   once; a report for another run or an unknown stage is refused) and both token
//!   endpoints are ready. Nothing is injected before it.
//! - A run is a **session**: its token loop is the [`Scheduler`]'s. Requests are submitted
//!   at any time (admitted into slots or queued, or refused with a typed [`Refusal`]);
//!   after the barrier every micro-batch the scheduler forms is injected as the next
//!   token-in object, and every token-out object (in order; its sequence is the next
//!   expected) is handed back to it. A session whose input is closed completes when its
//!   last sequence finished (`run_completed`: with one sequence, its reason; else
//!   `requests_done`). A token-out object out of order, malformed, with another table
//!   than the one sent, or with a token outside the vocabulary faults the session.
//! - Every sequence live when the session faults or is stopped ends with `fault`, its
//!   token log (prompt and generated ids) in its [`SeqOutput::Finished`].
//! - Faults from any source: the first cause is kept. A consequence (a broken edge stream,
//!   a lost control session) that arrives first decides the outcome at once but is held
//!   for [`SETTLE`]: a cause arriving meanwhile is reported instead; without one the
//!   consequence is reported when the window ends. A reported fault is never replaced.
//!   Exactly one terminal outcome per run.
//! - Teardown after every outcome: `StopRun` to every provisioned stage, token endpoints
//!   stopped, then `run_torn_down` once every stage reported stopped (or was lost: its node
//!   gone, reported as `stage_lost`, never as stopped) and the token endpoints stopped with
//!   their leases released — or once the teardown deadline passed, naming what did not
//!   confirm. Exactly once, and last.
//!
//! The teardown bookkeeping lives in the child module `teardown` (`run/teardown.rs`).

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::scheduler::{
    FinishReason, Refusal, Scheduler, SchedulerConfig, SeqId, SeqOutput, SeqRequest, WindowRing,
};
use crate::events::{CompletionCause, Event, RunOutcome};
use crate::wire::batch::{BatchLimits, BatchTable, EntryFlags};
use crate::wire::reason::{
    Component, ControlFault, FaultReason, OperatorStop, StreamFault, Timeout, TokenFault,
};
use crate::wire::{EdgeId, NodeId, ObjectId, RunId, RunPlan, Sequence, StageIndex};
pub use limits::{DEFAULT_BATCH_TOKENS, SessionLimits};

/// What the run asks of its driver.
#[derive(Debug, Clone, PartialEq)]
pub enum RunCommand {
    /// Send `ProvisionStage` for this stage.
    Provision(StageIndex),
    /// Create the token-in producer and token-out consumer.
    StartTokenEndpoints,
    /// Write a token-in object.
    Inject {
        /// Its object id.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Its payload: a micro-batch (table, then token ids).
        payload: Vec<u8>,
        /// Whether it carries a prompt chunk.
        prefill: bool,
    },
    /// Send `StopRun` to a stage.
    StopRun(StageIndex),
    /// Stop the token endpoints.
    StopTokenEndpoints,
}

/// Why an input was refused (nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RunInputError {
    /// The report names another run.
    #[error("report for another run")]
    ForeignRun,
    /// The report names a stage the plan does not have, or from another node.
    #[error("report from an unknown stage")]
    UnknownStage,
}

/// Timeouts of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunTimeouts {
    /// Provisioning until the readiness barrier.
    pub readiness: Duration,
    /// Waiting for each token.
    pub token: Duration,
    /// Teardown.
    pub teardown: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Provisioning {
        ready: BTreeSet<StageIndex>,
        endpoints: bool,
        deadline: Instant,
    },
    Running {
        /// Set while micro-batches are in flight: the next token-out object is due.
        deadline: Option<Instant>,
    },
    /// Faulted by a consequence: waiting until `deadline` for its cause.
    Settling {
        held: HeldFault,
        deadline: Instant,
    },
    TearingDown {
        stopped: BTreeSet<StageIndex>,
        endpoints: bool,
        deadline: Instant,
    },
    Done,
}

/// How long a fault that is the consequence of another waits for its cause (see
/// `specs/orchestrator-run.md`, "Causes before consequences").
pub const SETTLE: Duration = Duration::from_millis(500);

/// Whether `reason` is what a fault elsewhere produces downstream, rather than a fault of
/// its own: an edge stream that broke (its peer stopped or vanished) or a control session
/// that was lost. Such a fault is reported only if no cause arrives within [`SETTLE`].
pub fn is_consequence(reason: FaultReason) -> bool {
    matches!(
        reason,
        FaultReason::Stream(
            StreamFault::ReadFailed
                | StreamFault::WriteFailed
                | StreamFault::PeerClosed
                | StreamFault::ConnectFailed
        ) | FaultReason::Control(ControlFault::ConnectionLost)
    )
}

/// A fault not reported yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeldFault {
    reason: FaultReason,
    component: Component,
    node_id: Option<NodeId>,
    stage_index: Option<StageIndex>,
    edge_id: Option<EdgeId>,
}

/// One run (a session), from provisioning to teardown.
#[derive(Debug)]
pub struct RunFsm {
    run_id: RunId,
    stages: Vec<(StageIndex, NodeId)>,
    token_in: EdgeId,
    token_out: EdgeId,
    timeouts: RunTimeouts,
    sched: Scheduler,
    limits: BatchLimits,
    /// More requests may come (a served session); closed: complete when idle.
    input_open: bool,
    next_in: Sequence,
    next_out: Sequence,
    /// When each micro-batch in flight was sent, oldest first, and whether it has flown
    /// alone so far (the pacer's round trips).
    sent_at: VecDeque<(Instant, bool)>,
    /// Sequences that finished, and the last one's reason.
    served: u64,
    last_reason: Option<FinishReason>,
    generated: u64,
    state: State,
    /// Stages whose node was lost (settled for teardown, never reported stopped for them).
    lost: BTreeSet<StageIndex>,
    outcome: Option<RunOutcome>,
    cause: Option<CompletionCause>,
    commands: VecDeque<RunCommand>,
    events: VecDeque<Event>,
    outputs: VecDeque<SeqOutput>,
    /// Jobs for a drafter outside the core (see `run/drafting.rs`).
    draft_jobs: VecDeque<crate::speculate::DraftJob>,
    /// The draft requests whose answer a group waits for, and until when.
    ask_deadlines: VecDeque<(crate::speculate::AskId, Instant)>,
}

impl RunFsm {
    /// Starts a session of a committed plan (no request yet; see [`RunFsm::submit`] and
    /// [`RunFsm::close_input`]).
    pub fn start(
        now: Instant,
        plan: &RunPlan,
        limits: SessionLimits,
        timeouts: RunTimeouts,
    ) -> RunFsm {
        let stages: Vec<(StageIndex, NodeId)> =
            plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect();
        let capacity = plan.runtime.table_capacity();
        let groups = if limits.groups == 0 { stages.len() as u16 } else { limits.groups };
        let sched = Scheduler::new(SchedulerConfig {
            max_sequences: capacity,
            groups,
            queue_capacity: limits.queue_capacity,
            batch_tokens: limits.batch_tokens.min(plan.runtime.max_seq_len),
            max_seq_len: plan.runtime.max_seq_len,
            prefill_budget: limits.prefill_budget,
            eos: plan.model.eos_token_id,
            eot: plan.model.eot_token_id,
            vocab: plan.model.vocab_size,
            max_top_logprobs: plan.runtime.max_top_logprobs,
            mask_bytes: plan.runtime.mask_bytes,
            draft_max: limits.draft_max,
            draft_min: limits.draft_min,
            window: WindowRing::of(plan.model.sliding_window, plan.runtime.max_seq_len),
            store: (plan.prompt_cache.block_tokens, plan.prompt_cache.blocks),
        });
        let mut fsm = RunFsm {
            run_id: plan.run_id,
            token_in: plan.edges.first().map(|e| e.edge_id).unwrap_or_default(),
            token_out: plan.edges.last().map(|e| e.edge_id).unwrap_or_default(),
            timeouts,
            sched,
            limits: BatchLimits::of(plan),
            input_open: true,
            next_in: Sequence(0),
            next_out: Sequence(0),
            sent_at: VecDeque::new(),
            served: 0,
            last_reason: None,
            generated: 0,
            state: State::Provisioning {
                ready: BTreeSet::new(),
                endpoints: false,
                deadline: now + timeouts.readiness,
            },
            lost: BTreeSet::new(),
            outcome: None,
            cause: None,
            commands: VecDeque::new(),
            events: VecDeque::new(),
            outputs: VecDeque::new(),
            draft_jobs: VecDeque::new(),
            ask_deadlines: VecDeque::new(),
            stages,
        };
        fsm.events.push_back(Event::RunPlanned {
            run_id: fsm.run_id,
            stages: fsm.stages.len() as u32,
            edges: plan.edges.len() as u32,
            context: plan.context,
        });
        for &(stage_index, node_id) in &fsm.stages {
            fsm.commands.push_back(RunCommand::Provision(stage_index));
            fsm.events.push_back(Event::StageProvisionStarted {
                run_id: fsm.run_id,
                node_id,
                stage_index,
                by: crate::events::Reporter::Orchestrator,
            });
        }
        fsm.commands.push_back(RunCommand::StartTokenEndpoints);
        fsm
    }

    /// A run of one prompt with the plan's `max_tokens` and sampling: a session with one
    /// request whose input is closed.
    pub fn start_one(
        now: Instant,
        plan: &RunPlan,
        prompt: Vec<u32>,
        timeouts: RunTimeouts,
    ) -> RunFsm {
        let mut fsm = RunFsm::start(now, plan, SessionLimits::default(), timeouts);
        // A refused prompt (checked by the planner already) leaves an empty session.
        let _ = fsm.submit(
            now,
            SeqRequest {
                prompt,
                max_tokens: plan.runtime.max_tokens,
                sampling: plan.runtime.sampling,
                logprobs: None,
                speculative: true,
                cache_prompt: true,
                constraint: None,
            },
        );
        fsm.close_input(now);
        fsm
    }

    /// Submits a request: admitted, queued, or refused (nothing changes). Refused once
    /// the session has an outcome.
    pub fn submit(&mut self, now: Instant, req: SeqRequest) -> Result<SeqId, Refusal> {
        if self.outcome.is_some() || !self.input_open {
            return Err(Refusal::Busy(self.sched.queued()));
        }
        let id = self.sched.submit(req)?;
        self.pump(now);
        Ok(id)
    }

    /// Speculation's counters over the session so far.
    pub fn spec_counters(&self) -> super::scheduler::SpecCounters {
        self.sched.spec_counters()
    }

    /// The next sequence that took a slot (its wait in the queue ended).
    pub fn poll_started(&mut self) -> Option<SeqId> {
        self.sched.poll_started()
    }

    /// Sequences holding a slot, and requests waiting for one.
    pub fn load(&self) -> (usize, usize) {
        (self.sched.live(), self.sched.queued())
    }

    /// The prefix cache's counters of the session's scheduler.
    pub fn prefix_counters(&self) -> super::scheduler::PrefixCounters {
        self.sched.prefix_counters()
    }

    /// Every slot of the session's scheduler, and the requests waiting for one.
    pub fn slots(&self) -> (Vec<crate::orchestrator::scheduler::SlotView>, usize) {
        (self.sched.slots(), self.sched.queued())
    }

    /// Cancels a sequence (`Cancelled`, or `Stop` when the session's client found a stop
    /// string); see [`Scheduler::cancel`].
    pub fn cancel(&mut self, now: Instant, id: SeqId, reason: FinishReason) {
        if self.outcome.is_none() {
            self.sched.cancel(id, reason);
            self.pump(now);
        }
    }

    /// Test-only: plants a known bug in the scheduler (see
    /// [`Scheduler::plant_early_slot_release`]) so the simulation can show it finds it.
    pub fn plant_early_slot_release(&mut self) {
        self.sched.plant_early_slot_release();
    }

    /// Test-only: plants a known bug in the scheduler (see [`Scheduler::plant_skip_reset`]).
    pub fn plant_skip_reset(&mut self) {
        self.sched.plant_skip_reset();
    }

    /// Test-only: plants a known bug in the scheduler (see
    /// [`Scheduler::plant_prefix_overclaim`]).
    pub fn plant_prefix_overclaim(&mut self) {
        self.sched.plant_prefix_overclaim();
    }

    /// Test-only: plants a bug in the scheduler's block store (see
    /// [`Scheduler::plant_store_skip_save`]).
    pub fn plant_store_skip_save(&mut self) {
        self.sched.plant_store_skip_save();
    }

    /// No more requests: the session completes once its sequences finished.
    pub fn close_input(&mut self, now: Instant) {
        self.input_open = false;
        self.pump(now);
    }

    /// Injects what the scheduler forms, moves its outputs out, and completes a closed,
    /// idle session.
    fn pump(&mut self, now: Instant) {
        if let State::Running { deadline } = self.state {
            let mut deadline = deadline;
            while let Some(batch) = self.sched.next_batch() {
                let alone = self.sent_at.is_empty();
                self.sent_at.iter_mut().for_each(|(_, a)| *a = false);
                self.sent_at.push_back((now, alone));
                self.inject(batch.table, &batch.tokens);
                deadline.get_or_insert(now + self.timeouts.token);
            }
            self.state = State::Running { deadline };
            self.take_draft_jobs(now);
        }
        while let Some(o) = self.sched.poll_output() {
            if let SeqOutput::Finished { reason, .. } = &o {
                self.served += 1;
                self.last_reason = Some(*reason);
            }
            if let SeqOutput::Token { .. } = &o {
                self.generated += 1;
            }
            self.outputs.push_back(o);
        }
        if matches!(self.state, State::Running { .. }) && !self.input_open && self.sched.is_idle() {
            let cause = match (self.served, self.last_reason) {
                (1, Some(FinishReason::Eos)) => CompletionCause::Eos,
                (1, Some(FinishReason::MaxTokens)) => CompletionCause::MaxTokens,
                (1, Some(FinishReason::ContextFull)) => CompletionCause::ContextFull,
                (1, Some(FinishReason::Stop)) => CompletionCause::Stop,
                (1, Some(FinishReason::Cancelled)) => CompletionCause::Cancelled,
                _ => CompletionCause::RequestsDone,
            };
            self.finish(now, RunOutcome::Completed, Some(cause), None);
        }
    }

    fn node_of(&self, stage: StageIndex) -> Option<NodeId> {
        self.stages.iter().find(|(s, _)| *s == stage).map(|(_, n)| *n)
    }

    /// Refuses a stage report for another run, or from a stage or node the plan lacks.
    fn check_report(
        &self,
        run: RunId,
        stage: StageIndex,
        from: NodeId,
    ) -> Result<(), RunInputError> {
        if run != self.run_id {
            return Err(RunInputError::ForeignRun);
        }
        if self.node_of(stage) != Some(from) {
            return Err(RunInputError::UnknownStage);
        }
        Ok(())
    }

    /// A stage reports ready.
    pub fn stage_ready(
        &mut self,
        now: Instant,
        run: RunId,
        stage: StageIndex,
        from: NodeId,
    ) -> Result<(), RunInputError> {
        self.check_report(run, stage, from)?;
        if let State::Provisioning { ready, .. } = &mut self.state
            && ready.insert(stage)
        {
            self.events.push_back(Event::StageReady {
                run_id: self.run_id,
                node_id: from,
                stage_index: stage,
            });
        }
        self.check_barrier(now);
        Ok(())
    }

    /// Both token endpoints are ready.
    pub fn token_endpoints_ready(&mut self, now: Instant) {
        if let State::Provisioning { endpoints, .. } = &mut self.state {
            *endpoints = true;
        }
        self.check_barrier(now);
    }

    fn check_barrier(&mut self, now: Instant) {
        let all = match &self.state {
            State::Provisioning { ready, endpoints, .. } => {
                *endpoints && ready.len() == self.stages.len()
            }
            _ => false,
        };
        if all {
            self.events.push_back(Event::ReadinessBarrierPassed { run_id: self.run_id });
            self.state = State::Running { deadline: None };
            self.pump(now);
        }
    }

    fn inject(&mut self, table: BatchTable, tokens: &[u32]) {
        let sequence = self.next_in;
        self.next_in = sequence.next();
        let object_id = ObjectId(sequence.0 + 1);
        let prefill = table.entries().iter().any(|e| {
            e.tokens > 1
                || e.flags.contains(EntryFlags::RESET)
                || !e.flags.contains(EntryFlags::SAMPLE)
        });
        self.events.push_back(Event::PromptInjected {
            run_id: self.run_id,
            edge_id: self.token_in,
            object_id,
            sequence,
            tokens: tokens.len() as u32,
        });
        let mut payload = table.encode();
        payload.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
        self.commands.push_back(RunCommand::Inject { object_id, sequence, payload, prefill });
    }

    /// The token-out endpoint consumed an object: the next micro-batch in flight came
    /// back with its tokens.
    pub fn token_received(
        &mut self,
        now: Instant,
        object_id: ObjectId,
        sequence: Sequence,
        payload: &[u8],
    ) {
        let State::Running { .. } = self.state else { return };
        let edge = Some(self.token_out);
        if sequence != self.next_out {
            self.fault(
                now,
                TokenFault::OutOfOrder.into(),
                Component::TokenEndpoint,
                None,
                None,
                edge,
            );
            return;
        }
        if let Some((sent, alone)) = self.sent_at.pop_front() {
            self.sched.round_trip(now.saturating_duration_since(sent), alone);
        }
        let vocab = self.sched.config().vocab;
        let returned = crate::wire::logprobs::split_token_out(payload, self.limits, vocab)
            .map_err(|_| TokenFault::Malformed)
            .and_then(|(table, tokens, logprobs, verified)| {
                let sched = &mut self.sched;
                sched.batch_returned_all(&table, &tokens, &logprobs, &verified).map_err(|e| match e
                {
                    super::scheduler::ReturnError::OutOfVocab(_) => TokenFault::OutOfVocab,
                    _ => TokenFault::Malformed,
                })
            });
        if let Err(reason) = returned {
            self.fault(now, reason.into(), Component::TokenEndpoint, None, None, edge);
            return;
        }
        self.next_out = sequence.next();
        self.events.push_back(Event::TokenReceived {
            run_id: self.run_id,
            edge_id: self.token_out,
            object_id,
            sequence,
        });
        let deadline = (self.sched.in_flight() > 0).then(|| now + self.timeouts.token);
        self.state = State::Running { deadline };
        self.pump(now);
    }

    /// The next output of a sequence (its tokens, its end).
    pub fn poll_output(&mut self) -> Option<SeqOutput> {
        self.outputs.pop_front()
    }

    /// A fault from any source. The first cause counts: a consequence (see
    /// [`is_consequence`]) that comes first decides the outcome (faulted) at once but waits
    /// [`SETTLE`] for its cause, which replaces it; without one it is reported when the
    /// window ends. Nothing replaces a reported fault.
    pub fn fault(
        &mut self,
        now: Instant,
        reason: FaultReason,
        component: Component,
        node_id: Option<NodeId>,
        stage_index: Option<StageIndex>,
        edge_id: Option<EdgeId>,
    ) {
        let fault = HeldFault { reason, component, node_id, stage_index, edge_id };
        match self.state {
            State::Settling { .. } if !is_consequence(reason) => self.report_fault(now, fault),
            _ if self.outcome.is_some() => {}
            _ if is_consequence(reason) => {
                self.outcome = Some(RunOutcome::Faulted);
                self.state = State::Settling { held: fault, deadline: now + SETTLE };
            }
            _ => {
                self.outcome = Some(RunOutcome::Faulted);
                self.report_fault(now, fault);
            }
        }
    }

    /// Ends every live sequence (the session has an outcome).
    fn end_sequences(&mut self) {
        self.sched.fail_all(FinishReason::Fault);
        while let Some(o) = self.sched.poll_output() {
            self.outputs.push_back(o);
        }
        self.draft_jobs.clear();
        self.ask_deadlines.clear();
    }

    fn report_fault(&mut self, now: Instant, f: HeldFault) {
        self.events.push_back(Event::RunFaulted {
            run_id: self.run_id,
            reason: f.reason,
            component: f.component,
            node_id: f.node_id,
            stage_index: f.stage_index,
            edge_id: f.edge_id,
        });
        self.teardown(now);
    }

    /// Ctrl-C or SIGTERM.
    pub fn operator_stop(&mut self, now: Instant, how: OperatorStop) {
        if self.outcome.is_none() {
            self.finish(now, RunOutcome::OperatorStopped, None, Some(how));
        }
    }

    fn finish(
        &mut self,
        now: Instant,
        outcome: RunOutcome,
        cause: Option<CompletionCause>,
        how: Option<OperatorStop>,
    ) {
        if self.outcome.is_some() {
            return;
        }
        self.outcome = Some(outcome);
        self.cause = cause;
        match (outcome, cause, how) {
            (RunOutcome::Completed, Some(cause), _) => self.events.push_back(Event::RunCompleted {
                run_id: self.run_id,
                tokens: self.generated,
                cause,
            }),
            (RunOutcome::OperatorStopped, _, Some(how)) => {
                self.events.push_back(Event::RunStopped { run_id: self.run_id, reason: how.into() })
            }
            _ => {}
        }
        self.teardown(now);
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Provisioning { deadline, .. }
            | State::Settling { deadline, .. }
            | State::TearingDown { deadline, .. } => Some(deadline),
            State::Running { deadline } => deadline.into_iter().chain(self.ask_deadline()).min(),
            State::Done => None,
        }
    }

    /// Handles an expired deadline; early or stale calls change nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.give_up_overdue_asks(now);
        match self.state {
            State::Provisioning { deadline, .. } if now >= deadline => {
                self.fault(
                    now,
                    Timeout::Readiness.into(),
                    Component::Orchestrator,
                    None,
                    None,
                    None,
                );
            }
            State::Running { deadline: Some(deadline) } if now >= deadline => {
                self.fault(
                    now,
                    Timeout::TokenWait.into(),
                    Component::Orchestrator,
                    None,
                    None,
                    Some(self.token_out),
                );
            }
            State::Settling { held, deadline } if now >= deadline => self.report_fault(now, held),
            State::TearingDown { deadline, .. } if now >= deadline => {
                let unconfirmed = self.unconfirmed();
                self.torn_down(unconfirmed);
            }
            _ => {}
        }
    }

    /// Why a completed run completed (EOS, `max_tokens`, full context).
    pub fn cause(&self) -> Option<CompletionCause> {
        self.cause
    }

    /// The run's outcome, once decided.
    pub fn outcome(&self) -> Option<RunOutcome> {
        self.outcome
    }

    /// Whether teardown finished.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The next command.
    pub fn poll_command(&mut self) -> Option<RunCommand> {
        self.commands.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

mod carry;
mod drafting;
mod limits;
mod teardown;

#[cfg(test)]
pub(crate) mod tests;
