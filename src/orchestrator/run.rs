//! The orchestrator's run state machine (DESIGN.md 4.4), sans-IO with explicit time.
//!
//! `Provisioning -> (barrier) -> Running -> Completed | Faulted | OperatorStopped ->
//! TearingDown -> Done`.
//!
//! - Started only with a committed plan (after `PoolReady`): one `ProvisionStage` per
//!   stage, all at once, and the local token endpoints.
//! - The readiness barrier passes when every stage reported `StageReady` (duplicates count
//!   once; a report for another run or an unknown stage is refused) and both token
//!   endpoints are ready. The prompt (sequence 0) is the only start.
//! - Sequence k + 1 is injected only after token k was consumed; EOS, `max_tokens` or a
//!   full context (feeding the token back would pass `max_seq_len`) ends the run. A token out of order or outside the vocabulary faults it.
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

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::events::{CompletionCause, Event, RunOutcome, TeardownPart};
use crate::wire::reason::{
    Component, ControlFault, FaultReason, OperatorStop, StreamFault, Timeout, TokenFault,
};
use crate::wire::{EdgeId, NodeId, ObjectId, RunId, RunPlan, Sequence, StageIndex};

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
        /// The token ids.
        tokens: Vec<u32>,
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
        awaiting: Sequence,
        deadline: Instant,
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

/// One run, from provisioning to teardown.
#[derive(Debug)]
pub struct RunFsm {
    run_id: RunId,
    stages: Vec<(StageIndex, NodeId)>,
    token_in: EdgeId,
    token_out: EdgeId,
    eos: Option<u32>,
    vocab: u32,
    max_tokens: u32,
    max_seq_len: u32,
    prompt_len: u64,
    timeouts: RunTimeouts,
    prompt: Vec<u32>,
    generated: u64,
    state: State,
    /// Stages whose node was lost (settled for teardown, never reported stopped for them).
    lost: BTreeSet<StageIndex>,
    outcome: Option<RunOutcome>,
    cause: Option<CompletionCause>,
    commands: VecDeque<RunCommand>,
    events: VecDeque<Event>,
}

impl RunFsm {
    /// Starts a run of a committed plan with `prompt` (token ids, non-empty).
    pub fn start(now: Instant, plan: &RunPlan, prompt: Vec<u32>, timeouts: RunTimeouts) -> RunFsm {
        let stages: Vec<(StageIndex, NodeId)> =
            plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect();
        let mut fsm = RunFsm {
            run_id: plan.run_id,
            token_in: plan.edges.first().map(|e| e.edge_id).unwrap_or_default(),
            token_out: plan.edges.last().map(|e| e.edge_id).unwrap_or_default(),
            eos: plan.model.eos_token_id,
            vocab: plan.model.vocab_size,
            max_tokens: plan.runtime.max_tokens,
            max_seq_len: plan.runtime.max_seq_len,
            prompt_len: prompt.len() as u64,
            timeouts,
            prompt,
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
            stages,
        };
        fsm.events.push_back(Event::RunPlanned {
            run_id: fsm.run_id,
            stages: fsm.stages.len() as u32,
            edges: plan.edges.len() as u32,
        });
        for &(stage_index, node_id) in &fsm.stages {
            fsm.commands.push_back(RunCommand::Provision(stage_index));
            fsm.events.push_back(Event::StageProvisionStarted {
                run_id: fsm.run_id,
                node_id,
                stage_index,
            });
        }
        fsm.commands.push_back(RunCommand::StartTokenEndpoints);
        fsm
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
            let tokens = std::mem::take(&mut self.prompt);
            self.inject(Sequence(0), tokens);
            self.state =
                State::Running { awaiting: Sequence(0), deadline: now + self.timeouts.token };
        }
    }

    fn inject(&mut self, sequence: Sequence, tokens: Vec<u32>) {
        let object_id = ObjectId(sequence.0 + 1);
        self.events.push_back(Event::PromptInjected {
            run_id: self.run_id,
            edge_id: self.token_in,
            object_id,
            sequence,
            tokens: tokens.len() as u32,
        });
        self.commands.push_back(RunCommand::Inject { object_id, sequence, tokens });
    }

    /// The token-out endpoint consumed a token object.
    pub fn token_received(
        &mut self,
        now: Instant,
        object_id: ObjectId,
        sequence: Sequence,
        token: u32,
    ) {
        let State::Running { awaiting, .. } = self.state else { return };
        if sequence != awaiting {
            self.fault(
                now,
                TokenFault::OutOfOrder.into(),
                Component::TokenEndpoint,
                None,
                None,
                Some(self.token_out),
            );
            return;
        }
        if token >= self.vocab {
            self.fault(
                now,
                TokenFault::OutOfVocab.into(),
                Component::TokenEndpoint,
                None,
                None,
                Some(self.token_out),
            );
            return;
        }
        self.events.push_back(Event::TokenReceived {
            run_id: self.run_id,
            edge_id: self.token_out,
            object_id,
            sequence,
        });
        if Some(token) == self.eos {
            self.finish(now, RunOutcome::Completed, Some(CompletionCause::Eos), None);
            return;
        }
        self.generated += 1;
        if self.generated >= u64::from(self.max_tokens) {
            self.finish(now, RunOutcome::Completed, Some(CompletionCause::MaxTokens), None);
            return;
        }
        // Feeding this token back would put the KV caches past `max_seq_len`: the context
        // is full, a normal completion, decided before the step that would overflow.
        if self.prompt_len + self.generated > u64::from(self.max_seq_len) {
            self.finish(now, RunOutcome::Completed, Some(CompletionCause::ContextFull), None);
            return;
        }
        let next = sequence.next();
        self.inject(next, vec![token]);
        self.state = State::Running { awaiting: next, deadline: now + self.timeouts.token };
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

    /// `StopRun` to every stage, the token endpoints stopped: `TearingDown`.
    fn teardown(&mut self, now: Instant) {
        for &(stage_index, node_id) in &self.stages {
            self.commands.push_back(RunCommand::StopRun(stage_index));
            self.events.push_back(Event::StopRunSent { run_id: self.run_id, node_id, stage_index });
        }
        self.commands.push_back(RunCommand::StopTokenEndpoints);
        self.state = State::TearingDown {
            stopped: BTreeSet::new(),
            endpoints: false,
            deadline: now + self.timeouts.teardown,
        };
    }

    /// A stage reports it is torn down.
    pub fn stage_stopped(
        &mut self,
        run: RunId,
        stage: StageIndex,
        from: NodeId,
    ) -> Result<(), RunInputError> {
        self.check_report(run, stage, from)?;
        if let State::TearingDown { stopped, .. } = &mut self.state
            && stopped.insert(stage)
        {
            self.events.push_back(Event::StageStopped {
                run_id: self.run_id,
                node_id: from,
                stage_index: stage,
            });
            self.check_torn_down();
        }
        Ok(())
    }

    /// The orchestrator lost `node` (its control session closed, or SWIM declared it
    /// down): the run faults with `reason` (detected by `component`) and every stage of
    /// that node is lost — reported once as `stage_lost` and counted as settled for
    /// teardown, never as stopped. A node the plan does not use changes nothing.
    pub fn node_lost(
        &mut self,
        now: Instant,
        node: NodeId,
        reason: FaultReason,
        component: Component,
    ) {
        let stages: Vec<StageIndex> =
            self.stages.iter().filter(|(_, n)| *n == node).map(|(s, _)| *s).collect();
        if stages.is_empty() {
            return;
        }
        self.fault(now, reason, component, Some(node), None, None);
        for stage_index in stages {
            let stopped = matches!(&self.state, State::TearingDown { stopped, .. } if stopped.contains(&stage_index));
            if self.state != State::Done && !stopped && self.lost.insert(stage_index) {
                self.events.push_back(Event::StageLost {
                    run_id: self.run_id,
                    node_id: node,
                    stage_index,
                    reason,
                });
            }
        }
        self.check_torn_down();
    }

    /// Whether teardown waits for the token endpoints (see
    /// [`RunFsm::token_endpoints_stopped`]).
    pub fn awaits_token_endpoints(&self) -> bool {
        matches!(self.state, State::TearingDown { endpoints: false, .. })
    }

    /// The token endpoints are stopped and their leases released (after
    /// `StopTokenEndpoints`).
    pub fn token_endpoints_stopped(&mut self) {
        if let State::TearingDown { endpoints, .. } = &mut self.state {
            *endpoints = true;
        }
        self.check_torn_down();
    }

    /// `run_torn_down` once every stage stopped or was lost and the token endpoints
    /// stopped.
    fn check_torn_down(&mut self) {
        let State::TearingDown { stopped, endpoints, .. } = &self.state else { return };
        let settled = self.stages.iter().all(|(s, _)| stopped.contains(s) || self.lost.contains(s));
        if settled && *endpoints {
            self.torn_down(Vec::new());
        }
    }

    fn torn_down(&mut self, unconfirmed: Vec<TeardownPart>) {
        let outcome = self.outcome.unwrap_or(RunOutcome::Faulted);
        let stopped = match &self.state {
            State::TearingDown { stopped, .. } => stopped.clone(),
            _ => BTreeSet::new(),
        };
        let lost = self.lost.difference(&stopped).copied().collect();
        self.events.push_back(Event::RunTornDown {
            run_id: self.run_id,
            outcome,
            unconfirmed,
            lost,
        });
        self.state = State::Done;
    }

    /// What had not confirmed its teardown (stages neither stopped nor lost, the token
    /// endpoints if they had not stopped).
    fn unconfirmed(&self) -> Vec<TeardownPart> {
        let State::TearingDown { stopped, endpoints, .. } = &self.state else { return Vec::new() };
        let mut parts: Vec<TeardownPart> = self
            .stages
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| !stopped.contains(s) && !self.lost.contains(s))
            .map(|stage_index| TeardownPart::Stage { stage_index })
            .collect();
        if !endpoints {
            parts.push(TeardownPart::TokenEndpoints);
        }
        parts
    }

    /// The next deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Provisioning { deadline, .. }
            | State::Running { deadline, .. }
            | State::Settling { deadline, .. }
            | State::TearingDown { deadline, .. } => Some(deadline),
            State::Done => None,
        }
    }

    /// Handles an expired deadline; early or stale calls change nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
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
            State::Running { deadline, .. } if now >= deadline => {
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

#[cfg(test)]
mod tests;
