//! The orchestrator's session (sans-IO, explicit time): every decision the orchestrator
//! makes between the first plan and the last result, as [`StageNode`] is a node's.
//!
//! A [`Session`] owns the current run's [`RunFsm`] (its scheduler and teardown), the
//! [`RequestBook`] (every request's text and result across runs), and re-formation: the
//! requests kept when a node is lost, the requests that wait while it re-forms, the idle
//! rule (nothing to resume and nothing more to come: the session simply ends), the next
//! plan's stage count, the nodes that must stop the faulted run before the next one, growth
//! onto a pool that grew, and the typed end of re-forming ([`ReformEnd`]). Its driver (the
//! orchestrator's run loop) carries inputs in and executes what [`Session::poll`] yields —
//! control messages, token-in objects, edge provisioning, gate asks, events and the
//! requests' text — and decides nothing. The simulation drives the same machine.
//!
//! [`StageNode`]: crate::node::stage_node::StageNode

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::reform::{Reformation, ResumePolicy};
use super::requests::{RequestBook, RequestResult};
use super::run::{RunCommand, RunFsm, RunTimeouts, SessionLimits};
use super::scheduler::{PrefixCounters, SeqId, SpecCounters};
use crate::events::{CompletionCause, Event, PlannedStage, RunOutcome};
use crate::wire::logprobs::TokenLogprobs;
use crate::wire::plan::ProvisionStage;
use crate::wire::reason::{Component, ControlFault, FaultReason, Timeout};
use crate::wire::{EdgeId, NodeId, ObjectId, RunId, RunPlan, Sequence, StageIndex};

mod inputs;
mod reform;
mod requests;
#[cfg(test)]
mod tests;

pub use super::requests::SessionEnd;
pub use reform::{PlantedSessionBug, ReformEnd};

/// How a session runs, beyond its plan.
#[derive(Debug, Clone, Copy)]
pub struct SessionConfig {
    /// How its scheduler is sized beyond the plan (`queue_capacity` also bounds the
    /// requests that wait while it re-forms).
    pub limits: SessionLimits,
    /// Each run's timeouts.
    pub timeouts: RunTimeouts,
    /// What it does when a stage node is lost.
    pub resume: ResumePolicy,
    /// The stage count it asks for (`--stages`, or one per pool node): a session re-formed
    /// onto fewer grows back to it when nodes come back.
    pub desired_stages: u32,
    /// A server's session: a request is forgotten once its result is given (a long-lived
    /// book holds only what is live).
    pub forget_given: bool,
    /// Drafts come from outside (a draft model the driver runs), each drafted token
    /// costing this share of a trip until measured: every run emits draft jobs
    /// ([`Session::poll_draft_job`]) and takes answers back ([`Session::drafts_ready`]).
    /// `None`: the n-gram lookup, in the core.
    pub draft_step_cost: Option<f64>,
}

/// What a session asks of its driver, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionOutput {
    /// Write this event to the run's stream (stamped by the driver).
    Event(Event),
    /// A progress line for the operator.
    Progress(String),
    /// Carry out a command of the current run.
    Command(SessionCommand),
    /// Ask the pool gate to offer nodes for the next run.
    Gate(GateAsk),
    /// Request `index` holds a slot: its first token is on its way.
    Started(usize),
    /// A generated token of request `index` and the text it releases.
    Token {
        /// The request.
        index: usize,
        /// The token id.
        token: u32,
        /// The text it releases (possibly empty).
        piece: String,
        /// Its log probabilities, where the request asked for them.
        logprobs: Option<TokenLogprobs>,
    },
    /// The text request `index` had held back when it ended.
    Text {
        /// The request.
        index: usize,
        /// The text.
        text: String,
    },
    /// What became of request `index` (once per request).
    Result {
        /// The request.
        index: usize,
        /// Its result or error.
        result: RequestResult,
    },
    /// Sequences holding a slot and requests waiting for one changed.
    Load {
        /// Sequences in slots.
        running: usize,
        /// Requests queued.
        queued: usize,
        /// Speculation's counters over the session so far.
        spec: SpecCounters,
        /// The prefix cache's counters over the session so far.
        prefix: PrefixCounters,
    },
}

/// A command of the current run, resolved to nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionCommand {
    /// Send `ProvisionStage` to `node` (a send that fails is reported back with
    /// [`Session::provision_failed`]).
    Provision {
        /// The stage's node.
        node: NodeId,
        /// What it provisions.
        provision: Box<ProvisionStage>,
    },
    /// Create the token-in producer and token-out consumer of the current plan; report
    /// each ready end with [`Session::token_endpoint_ready`].
    StartTokenEndpoints,
    /// Write a token-in object.
    Inject {
        /// Its object id.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Its payload: a micro-batch.
        payload: Vec<u8>,
        /// Whether it carries a prompt chunk.
        prefill: bool,
    },
    /// Send `StopRun { run_id, faulted, park }` to `node`.
    StopRun {
        /// The node.
        node: NodeId,
        /// The run it stops.
        run_id: RunId,
        /// Whether that run faulted.
        faulted: bool,
        /// The session re-forms and keeps caches: the node parks its role.
        park: bool,
    },
    /// Stop the token endpoints (`abort_pumps`: a faulted run's pumps need not wait for
    /// a stage to acknowledge).
    StopTokenEndpoints {
        /// Abort the pumps.
        abort_pumps: bool,
    },
}

/// What the session asks of the pool gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateAsk {
    /// Re-form: offer the nodes left once they are stable.
    Reform,
    /// Offer these ready nodes at once (the pool grew).
    ReformOnto(Vec<NodeId>),
}

/// The first fault of a faulted run: why, who detected it, and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunFault {
    /// Why.
    pub reason: FaultReason,
    /// The component that detected it.
    pub component: Component,
    /// The node it is about, if any.
    pub node_id: Option<NodeId>,
    /// The stage it is about, if any.
    pub stage_index: Option<StageIndex>,
    /// The edge it is about, if any.
    pub edge_id: Option<EdgeId>,
}

/// `membership.node_down on node 3 (stage 2), detected by membership`.
impl std::fmt::Display for RunFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.reason)?;
        let mut place = Vec::new();
        if let Some(stage) = self.stage_index {
            place.push(format!("stage {stage}"));
        }
        if let Some(edge) = self.edge_id {
            place.push(format!("edge {edge}"));
        }
        match (self.node_id, place.is_empty()) {
            (Some(node), true) => write!(f, " on node {node}")?,
            (Some(node), false) => write!(f, " on node {node} ({})", place.join(", "))?,
            (None, false) => write!(f, " at {}", place.join(", "))?,
            (None, true) => {}
        }
        write!(f, ", detected by {}", self.component)
    }
}

/// How a session ended.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The one terminal outcome.
    pub outcome: RunOutcome,
    /// Why a completed run completed.
    pub stop: Option<CompletionCause>,
    /// The first fault, for a faulted run.
    pub fault: Option<RunFault>,
    /// Generated token ids of the first request (EOS excluded).
    pub tokens: Vec<u32>,
    /// Text left in the first request's detokenizer at the end.
    pub tail: String,
    /// Every request's result or error, in request order.
    pub results: Vec<RequestResult>,
    /// The plan that ran.
    pub plan: RunPlan,
    /// From start to the pool being ready.
    pub pool_ready_after: Duration,
    /// From start to the first token.
    pub first_token_after: Option<Duration>,
    /// From the first token to the last.
    pub decode_time: Duration,
    /// Speculation's counters over the run (zeros without `--speculate`).
    pub spec: SpecCounters,
}

/// The orchestrator's session. See the module docs.
pub struct Session<'t> {
    config: SessionConfig,
    /// When the session started (times in the report count from here).
    t0: Instant,
    plan: RunPlan,
    node_of: BTreeMap<StageIndex, NodeId>,
    fsm: RunFsm,
    /// Speculation's counters of the runs before a re-formation.
    spec_before: SpecCounters,
    /// The prefix cache's counters of the runs before a re-formation.
    prefix_before: PrefixCounters,
    book: RequestBook<'t>,
    fault: Option<RunFault>,
    torn_down: bool,
    endpoints_ready: usize,
    loaded_weights: usize,
    /// Sequences in slots and requests queued, as last told.
    load: (usize, usize),
    /// The prefix cache's counters, as last told.
    prefix_told: PrefixCounters,
    /// The re-formation under way (the run faulted with a node loss).
    reforming: Option<Reformation>,
    /// The current run re-formed the session (`session_reformed` at its barrier), with
    /// this many kept requests resumed.
    reformed: Option<usize>,
    /// The current run re-forms this faulted run: which of its stages stay where they
    /// were (their nodes keep their caches).
    kept: Option<(RunId, Vec<bool>)>,
    /// Requests that arrived while the session re-formed, for the next run.
    waiting: Vec<usize>,
    /// No more requests will come.
    input_closed: bool,
    /// The nodes the gate offered for the re-formation while the faulted run tore down.
    offered: Option<Vec<NodeId>>,
    /// The operator stopped the session while it re-formed.
    stopped: bool,
    /// The nodes the gate reported ready when the pool grew, while the run ends to re-form
    /// onto them.
    grown: Option<Vec<NodeId>>,
    /// Refusals not given yet.
    unsent: Vec<usize>,
    /// Log probabilities of a sequence's next token.
    held: HashMap<SeqId, TokenLogprobs>,
    /// The first request's tokens and detokenizer tail (a run of one prompt).
    tokens: Vec<u32>,
    tail: String,
    first_token_at: Option<Instant>,
    last_token_at: Instant,
    planted: Option<PlantedSessionBug>,
    out: VecDeque<SessionOutput>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("run_id", &self.plan.run_id)
            .field("fault", &self.fault)
            .field("torn_down", &self.torn_down)
            .field("reforming", &self.reforming)
            .field("waiting", &self.waiting)
            .finish_non_exhaustive()
    }
}

impl<'t> Session<'t> {
    /// A session of `plan` started at `now` (`t0`: when the orchestrator started, which
    /// the report's times count from), with `book`'s requests known (none submitted yet:
    /// see [`Session::arrived`]).
    pub fn start(
        now: Instant,
        t0: Instant,
        plan: RunPlan,
        config: SessionConfig,
        book: RequestBook<'t>,
    ) -> Session<'t> {
        let fsm = start_fsm(now, &plan, &config, None);
        Session {
            t0,
            node_of: plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect(),
            plan,
            fsm,
            spec_before: SpecCounters::default(),
            prefix_before: PrefixCounters::default(),
            book,
            fault: None,
            torn_down: false,
            endpoints_ready: 0,
            loaded_weights: 0,
            load: (0, 0),
            prefix_told: PrefixCounters::default(),
            reforming: None,
            reformed: None,
            kept: None,
            waiting: Vec::new(),
            input_closed: false,
            offered: None,
            stopped: false,
            grown: None,
            unsent: Vec::new(),
            held: HashMap::new(),
            tokens: Vec::new(),
            tail: String::new(),
            first_token_at: None,
            last_token_at: t0,
            planted: None,
            out: VecDeque::new(),
            config,
        }
    }

    /// Plants `bug` (the simulation shows its checks find it).
    pub fn plant(&mut self, bug: PlantedSessionBug) {
        self.planted = Some(bug);
        plant_in_run(&mut self.fsm, Some(bug));
    }

    /// The plan of the current (last) run.
    pub fn plan(&self) -> &RunPlan {
        &self.plan
    }

    /// The current run's first fault, if it faulted.
    pub fn fault(&self) -> Option<RunFault> {
        self.fault
    }

    /// The current run's outcome, once it has one.
    pub fn outcome(&self) -> Option<RunOutcome> {
        self.fsm.outcome()
    }

    /// Whether the current run is torn down.
    pub fn is_torn_down(&self) -> bool {
        self.torn_down
    }

    /// The re-formation under way, if the last run lost a node and the session re-forms.
    pub fn reformation(&self) -> Option<Reformation> {
        self.reforming
    }

    /// The next deadline of the current run.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.fsm.poll_timeout()
    }

    /// A deadline passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.fsm.handle_timeout(now);
    }

    /// Whether the current run waits for its token endpoints to stop (its driver reports
    /// [`Session::token_endpoints_stopped`] once they have no live edge).
    pub fn awaits_token_endpoints(&self) -> bool {
        self.fsm.awaits_token_endpoints()
    }

    /// The token endpoints stopped, their leases released.
    pub fn token_endpoints_stopped(&mut self) {
        self.fsm.token_endpoints_stopped();
    }

    /// The slots (what each holds) and the requests queued.
    pub fn slots(&self) -> (Vec<super::scheduler::SlotView>, usize) {
        self.fsm.slots()
    }

    /// The next job for the drafter outside (a warm, or a draft request), where the
    /// session drafts from outside ([`SessionConfig::draft_step_cost`]).
    pub fn poll_draft_job(&mut self) -> Option<crate::speculate::DraftJob> {
        self.fsm.poll_draft_job()
    }

    /// The drafter answered at `now` (an answer for another run, or one given up, is
    /// ignored).
    pub fn drafts_ready(&mut self, now: Instant, answer: crate::speculate::DraftAnswer) {
        self.fsm.drafts_ready(now, answer);
    }

    /// Speculation's counters over every run of the session.
    pub fn spec_counters(&self) -> SpecCounters {
        self.spec_before + self.fsm.spec_counters()
    }

    /// The prefix cache's counters over every run of the session (the tokens warm slots
    /// hold: the current run's).
    pub fn prefix_counters(&self) -> PrefixCounters {
        self.prefix_before + self.fsm.prefix_counters()
    }

    /// Times request `index` resumed on a re-formed run (re-formations onto a pool that
    /// grew not counted).
    pub fn resumes(&self, index: usize) -> u32 {
        self.book.resumes(index)
    }

    /// What the session asks next (`now`: the time its state machines see).
    pub fn poll(&mut self, now: Instant) -> Option<SessionOutput> {
        if self.out.is_empty() {
            self.pump(now);
        }
        self.out.pop_front()
    }

    /// Carries the run's events, commands, outputs and starts into the session's outputs,
    /// in that order.
    fn pump(&mut self, now: Instant) {
        while let Some(ev) = self.fsm.poll_event() {
            self.run_event(now, ev);
        }
        while let Some(cmd) = self.fsm.poll_command() {
            self.command(now, cmd);
        }
        while let Some(out) = self.fsm.poll_output() {
            self.output(now, out);
        }
        while let Some(seq) = self.fsm.poll_started() {
            if let Some(index) = self.book.index_of(seq) {
                self.out.push_back(SessionOutput::Started(index));
            }
        }
        let load = self.fsm.load();
        let prefix = self.prefix_counters();
        if load != self.load || prefix != self.prefix_told {
            (self.load, self.prefix_told) = (load, prefix);
            let spec = self.spec_counters();
            let (running, queued) = load;
            self.out.push_back(SessionOutput::Load { running, queued, spec, prefix });
        }
        for index in std::mem::take(&mut self.unsent) {
            self.give_result(index);
        }
    }

    /// One event of the run: a fault may start a re-formation; the barrier starts the
    /// requests' clocks (and announces a re-formed session).
    fn run_event(&mut self, now: Instant, ev: Event) {
        if let Event::RunFaulted { reason, component, node_id, stage_index, edge_id, .. } = &ev {
            let reason = *reason;
            self.fault = Some(RunFault {
                reason,
                component: *component,
                node_id: *node_id,
                stage_index: *stage_index,
                edge_id: *edge_id,
            });
            if self.faulted(now, reason) {
                let ask = match self.grown.take() {
                    // Ended to grow: the grown set is offered at once.
                    Some(nodes) if !reason.counts_as_resume() => {
                        self.offered = Some(nodes.clone());
                        GateAsk::ReformOnto(nodes)
                    }
                    // The gate's window runs while the faulted run tears down.
                    _ => GateAsk::Reform,
                };
                self.out.push_back(SessionOutput::Gate(ask));
            } else if self.reforming.is_none() {
                self.refuse_waiting();
            }
        }
        if let Event::RunTornDown { .. } = ev {
            self.torn_down = true;
        }
        let barrier = matches!(ev, Event::ReadinessBarrierPassed { .. });
        if barrier {
            self.book.serving(now);
        }
        if let Event::RunCompleted { .. } = ev {
            // The tokens (and results) that completed the run come before its end.
            while let Some(out) = self.fsm.poll_output() {
                self.output(now, out);
            }
        }
        self.out.push_back(SessionOutput::Event(ev));
        if barrier && let Some(resumed) = self.reformed.take() {
            let nodes: Vec<u64> = self.plan.stages.iter().map(|s| s.node_id.0).collect();
            self.out.push_back(SessionOutput::Progress(format!(
                "the session re-formed over nodes {nodes:?}: {resumed} requests resumed"
            )));
            let kept = |s: &crate::wire::StagePlan| self.kept_from(s.stage_index).is_some();
            let plan = self.plan.stages.iter().map(|s| planned_stage(s, kept(s))).collect();
            let run_id = self.plan.run_id;
            self.out.push_back(SessionOutput::Event(Event::SessionReformed { run_id, plan }));
        }
    }

    /// The faulted run whose caches stage `stage` keeps (it stays where it was).
    fn kept_from(&self, stage: StageIndex) -> Option<RunId> {
        let (run, kept) = self.kept.as_ref()?;
        kept.get(stage.0 as usize).copied().unwrap_or(false).then_some(*run)
    }

    /// One command of the run, resolved to its node.
    fn command(&mut self, now: Instant, cmd: RunCommand) {
        let command = match cmd {
            RunCommand::Provision(stage) => {
                let node = self.node_of.get(&stage).copied().unwrap_or_default();
                match self.plan.provision(stage) {
                    Some(mut p) => {
                        p.resume_from = self.kept_from(stage);
                        SessionCommand::Provision { node, provision: Box::new(p) }
                    }
                    None => return self.provision_failed(now, node, stage),
                }
            }
            RunCommand::StartTokenEndpoints => SessionCommand::StartTokenEndpoints,
            RunCommand::Inject { object_id, sequence, payload, prefill } => {
                SessionCommand::Inject { object_id, sequence, payload, prefill }
            }
            RunCommand::StopRun(stage) => {
                let Some(&node) = self.node_of.get(&stage) else { return };
                let (run_id, faulted) = (self.plan.run_id, self.fault.is_some());
                // Only a run the session re-forms parks its roles (a node would otherwise
                // hold a stage's memory for nothing).
                let park = faulted && self.reforming.is_some() && self.config.resume.keep_caches;
                SessionCommand::StopRun { node, run_id, faulted, park }
            }
            RunCommand::StopTokenEndpoints => {
                SessionCommand::StopTokenEndpoints { abort_pumps: self.fault.is_some() }
            }
        };
        self.out.push_back(SessionOutput::Command(command));
    }

    /// Provisioning `stage` on `node` could not be sent: its control session is gone.
    pub fn provision_failed(&mut self, now: Instant, node: NodeId, stage: StageIndex) {
        let reason = ControlFault::ConnectionLost.into();
        self.fsm.fault(now, reason, Component::ControlChannel, Some(node), Some(stage), None);
    }

    /// Why a request that did not finish ends now.
    pub fn end_reason(&self) -> SessionEnd {
        if self.stopped {
            return SessionEnd::OperatorStopped;
        }
        match (self.fault, self.fsm.outcome()) {
            (Some(f), _) => SessionEnd::Fault(f.reason),
            (None, Some(RunOutcome::OperatorStopped)) => SessionEnd::OperatorStopped,
            _ => SessionEnd::Ended,
        }
    }

    /// How the session ended (`pool_ready_after`: from the start to the pool being
    /// ready, the driver's measure).
    pub fn report(self, pool_ready_after: Duration) -> RunReport {
        let mut outcome = self.fsm.outcome().unwrap_or(RunOutcome::Faulted);
        let mut fault = self.fault;
        if self.stopped {
            (outcome, fault) = (RunOutcome::OperatorStopped, None);
        }
        let fault = match (outcome, fault) {
            (RunOutcome::Faulted, None) => Some(RunFault {
                reason: Timeout::Teardown.into(),
                component: Component::Orchestrator,
                node_id: None,
                stage_index: None,
                edge_id: None,
            }),
            (_, fault) => fault,
        };
        let spec = self.spec_counters();
        let first = self.first_token_at;
        RunReport {
            outcome,
            stop: self.fsm.cause(),
            fault,
            tokens: self.tokens,
            tail: self.tail,
            results: self.book.into_results(),
            plan: self.plan,
            pool_ready_after,
            first_token_after: first.map(|t| t.saturating_duration_since(self.t0)),
            decode_time: first.map(|t| self.last_token_at - t).unwrap_or_default(),
            spec,
        }
    }
}

/// A run of `plan` under `config` (drafting from outside if it does, a planted bug too).
fn start_fsm(
    now: Instant,
    plan: &RunPlan,
    config: &SessionConfig,
    planted: Option<PlantedSessionBug>,
) -> RunFsm {
    let mut fsm = RunFsm::start(now, plan, config.limits, config.timeouts);
    if let Some(cost) = config.draft_step_cost {
        fsm.draft_externally(cost);
    }
    plant_in_run(&mut fsm, planted);
    fsm
}

/// Plants a bug of the run's scheduler, if `planted` is one.
fn plant_in_run(fsm: &mut RunFsm, planted: Option<PlantedSessionBug>) {
    match planted {
        Some(PlantedSessionBug::EarlySlotRelease) => fsm.plant_early_slot_release(),
        Some(PlantedSessionBug::SkipReset) => fsm.plant_skip_reset(),
        Some(PlantedSessionBug::PrefixOverclaim) => fsm.plant_prefix_overclaim(),
        Some(PlantedSessionBug::StoreSkipSave) => fsm.plant_store_skip_save(),
        Some(PlantedSessionBug::ResumeOverkeep) => fsm.plant_resume_overkeep(),
        _ => {}
    }
}

/// A stage as `session_reformed` names it.
fn planned_stage(s: &crate::wire::StagePlan, kept: bool) -> PlannedStage {
    let (layer_start, layer_end) = (s.layers.start, s.layers.end);
    PlannedStage { stage_index: s.stage_index, node_id: s.node_id, layer_start, layer_end, kept }
}
