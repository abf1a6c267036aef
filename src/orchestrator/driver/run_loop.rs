//! The run phase: the [`RunFsm`] from provisioning to teardown, fed by the pool phase
//! (stage reports, lost sessions, lost members), the token endpoints' edge plane and its
//! pumps, the operator and the clock. Every decision is the run FSM's or the plane's; this
//! loop only carries inputs to them and executes what they ask.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use tokio::sync::mpsc;

use super::drafting::{self, Drafter, Drafting};
use super::endpoints::{Parts, TokenUser};
use super::served::{Reply, Routes, next_routed};
use super::{Arriving, OrchestrateConfig, OrchestrateError, RunFault, RunReport, RunSink, emit};
use crate::control::ControlMessage;
use crate::edge::establisher::{EdgeEnd, EdgeProvision};
use crate::edge::executor::{PlaneExecutor, PumpNotice};
use crate::edge::plane::{EdgePlane, PlaneEvent};
use crate::events::{Direction, Event, PlannedStage, RunOutcome};
use crate::model::tokenizer::Tokenizer;
use crate::net::edge::{EdgeRouter, Refusal};
use crate::orchestrator::pool_phase::PoolPhase;
use crate::orchestrator::reform::{Reformation, ResumePolicy};
use crate::orchestrator::requests::{Request, RequestBook};
use crate::orchestrator::run::{RunCommand, RunFsm};
use crate::orchestrator::scheduler::FinishReason;
use crate::orchestrator::tokens::TokenOutEvent;
use crate::ring::Wake as RingWake;
use crate::wire::reason::{Component, ControlFault, OperatorStop, RingFault, Timeout};
use crate::wire::{EdgeId, NodeId, RunPlan, StageIndex};

mod pool;
mod requests;

/// What the token endpoints' pumps tell the loop.
#[derive(Debug)]
pub(super) enum Wake {
    /// A pump's notice, for the plane.
    Pump(EdgeId, PumpNotice),
    /// The send pump freed token-in ring space.
    TokenInWritable,
    /// The receive pump committed token-out bytes.
    TokenOutReadable,
}

/// A run of `plan` in the session `config` describes, drafting with `drafter` if given.
fn start_fsm(
    now: Instant,
    plan: &RunPlan,
    config: &OrchestrateConfig,
    drafter: Option<&Drafter>,
) -> (RunFsm, Option<Drafting>) {
    let mut fsm = RunFsm::start(now, plan, config.session, config.timeouts);
    let drafting = drafter.map(|d| Drafting::start(d, &mut fsm));
    (fsm, drafting)
}

/// One run. See the module docs.
pub(super) struct RunLoop<'t> {
    t0: Instant,
    plan: RunPlan,
    me: NodeId,
    fsm: RunFsm,
    /// Speculation's counters of the sessions before a re-formation.
    spec_before: crate::orchestrator::scheduler::SpecCounters,
    plane: EdgePlane,
    executor: PlaneExecutor,
    user: TokenUser,
    wakes: mpsc::UnboundedReceiver<Wake>,
    refusals: mpsc::UnboundedReceiver<Refusal>,
    node_of: HashMap<StageIndex, NodeId>,
    /// Every request's text and result.
    book: RequestBook<'t>,
    /// Refusals not yet given to the sink.
    unsent: Vec<usize>,
    /// A batch job's requests still arriving (closed: none will come).
    arriving: Option<mpsc::UnboundedReceiver<(usize, Request)>>,
    /// A server's requests and their reply routes.
    served: Option<Routes>,
    /// The first request's tokens and detokenizer tail (a run of one prompt).
    tokens: Vec<u32>,
    tail: String,
    first_token_at: Option<Instant>,
    last_token_at: Instant,
    fault: Option<RunFault>,
    torn_down: bool,
    endpoints_ready: usize,
    loaded_weights: usize,
    /// Sequences in slots and requests queued, as last told to the sink.
    load: (usize, usize),
    /// The token endpoints' router, shared by every run of the session.
    router: EdgeRouter,
    /// What the session does when a stage node is lost.
    resume: ResumePolicy,
    /// The run's side of the session's draft model, if it has one.
    drafting: Option<Drafting>,
    /// The re-formation under way (the run faulted with a node loss).
    reforming: Option<Reformation>,
    /// The current run re-formed the session (`session_reformed` at its barrier), with
    /// this many kept requests resumed.
    reformed: Option<usize>,
    /// Requests that arrived while the session re-formed, for the next run.
    waiting: Vec<usize>,
    /// Requests that may wait for a slot (`--queue`): also how many may wait for a
    /// re-formation.
    queue_capacity: usize,
    /// No more requests will come.
    input_closed: bool,
    /// The nodes the gate offered for the re-formation while the faulted run tore down.
    offered: Option<Vec<NodeId>>,
    /// The operator stopped the session while it re-formed.
    stopped: bool,
    /// The stage count the session asks for (`--stages`, or one per pool node): a
    /// session re-formed onto fewer grows back to it when nodes come back.
    desired_stages: u32,
    /// The nodes the gate reported ready when the pool grew, while the run ends to
    /// re-form onto them.
    grown: Option<Vec<NodeId>>,
}

impl<'t> RunLoop<'t> {
    /// Sets up the token endpoints' router and the first run's endpoints, and starts the
    /// run FSM.
    pub(super) fn start(
        plan: RunPlan,
        config: &OrchestrateConfig,
        drafter: Option<&Drafter>,
        arriving: Option<Arriving>,
        endpoint: &Endpoint,
        tokenizer: &'t Tokenizer,
        t0: Instant,
    ) -> Result<RunLoop<'t>, OrchestrateError> {
        let (router, refusals) = EdgeRouter::new();
        tokio::spawn(router.clone().accept_loop(endpoint.clone()));
        let parts = Parts::new(&plan, endpoint, &router)?;
        let now = Instant::now();
        let (fsm, drafting) = start_fsm(now, &plan, config, drafter);
        let (book, rx, served) = match arriving {
            Some(Arriving::Batch { ids: more, requests }) => {
                let mut ids: Vec<String> = config.requests.iter().map(|r| r.id.clone()).collect();
                ids.extend(more);
                (RequestBook::expecting(tokenizer, ids), Some(requests), None)
            }
            Some(Arriving::Served(s)) => {
                let book = RequestBook::new(tokenizer, config.requests.clone());
                (book, None, Some(Routes::new(s)))
            }
            None => (RequestBook::new(tokenizer, config.requests.clone()), None, None),
        };
        let input_closed = rx.is_none() && served.is_none();
        let mut run = RunLoop {
            t0,
            me: config.pool.orchestrator.node_id,
            fsm,
            spec_before: Default::default(),
            book,
            unsent: Vec::new(),
            arriving: rx,
            served,
            tail: String::new(),
            node_of: plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect(),
            plan,
            plane: parts.plane,
            executor: parts.executor,
            user: parts.user,
            wakes: parts.wakes,
            router,
            refusals,
            tokens: Vec::new(),
            first_token_at: None,
            last_token_at: t0,
            fault: None,
            torn_down: false,
            endpoints_ready: 0,
            loaded_weights: 0,
            load: (0, 0),
            resume: config.resume,
            drafting,
            reforming: None,
            reformed: None,
            waiting: Vec::new(),
            queue_capacity: config.session.queue_capacity,
            input_closed,
            offered: None,
            stopped: false,
            desired_stages: config.stages.unwrap_or(config.pool.nodes.len() as u32).max(1),
            grown: None,
        };
        for (index, r) in config.requests.iter().enumerate() {
            run.book.arrived(index, r.clone());
            run.submit(index);
        }
        if input_closed {
            run.fsm.close_input(now);
        }
        Ok(run)
    }

    /// The re-formation under way, if the last run lost a node and the session re-forms.
    pub(super) fn reformation(&self) -> Option<Reformation> {
        self.reforming
    }

    /// The fault of the current run, if it faulted (with the node it lost).
    pub(super) fn fault(&self) -> Option<RunFault> {
        self.fault
    }

    /// What the gate offered while the faulted run tore down (taken once).
    pub(super) fn take_offered(&mut self) -> Option<Vec<NodeId>> {
        self.offered.take()
    }

    /// The plan of the session's current (last) run.
    pub(super) fn plan(&self) -> &RunPlan {
        &self.plan
    }

    /// Re-forms the session on `plan`, a new run over the nodes left: fresh token
    /// endpoints and run FSM; every kept request resumes (its prompt and generated tokens
    /// replayed) and every request that arrived meanwhile is submitted.
    pub(super) fn reform(
        &mut self,
        plan: RunPlan,
        config: &OrchestrateConfig,
        endpoint: &Endpoint,
        sink: &mut dyn RunSink,
    ) -> Result<(), OrchestrateError> {
        let parts = Parts::new(&plan, endpoint, &self.router)?;
        (self.plane, self.executor, self.user, self.wakes) =
            (parts.plane, parts.executor, parts.user, parts.wakes);
        let now = Instant::now();
        self.spec_before = self.spec_before + self.fsm.spec_counters();
        let drafter = self.drafting.as_ref().map(Drafting::drafter);
        (self.fsm, self.drafting) = start_fsm(now, &plan, config, drafter);
        self.node_of = plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect();
        self.plan = plan;
        (self.fault, self.torn_down, self.endpoints_ready, self.loaded_weights) =
            (None, false, 0, 0);
        let cause = self.reforming.take().map(|r| r.cause);
        let kept = self.book.kept();
        for &index in &kept {
            self.resume_kept(index, cause, sink);
        }
        self.reformed = Some(kept.iter().filter(|i| self.book.seq_of(**i).is_some()).count());
        for index in std::mem::take(&mut self.waiting) {
            self.submit(index);
        }
        if self.input_closed {
            self.fsm.close_input(now);
        }
        Ok(())
    }

    /// Re-forming was given up (`why`): every kept request, and every one that arrived
    /// meanwhile, ends with the fault that started it.
    pub(super) fn abandon(&mut self, why: &str, sink: &mut dyn RunSink) {
        let Some(r) = self.reforming.take() else { return };
        let (run_id, cause) = (self.plan.run_id, r.cause);
        emit(sink, self.t0, Event::SessionReformFailed { run_id, cause, why: why.into() });
        // Stopped by the operator while re-forming: what was kept ends as stopped.
        self.stopped = why == "operator_stop";
        let fault = self.end_reason();
        for index in self.book.kept() {
            self.end_kept(index, FinishReason::Fault, &fault, sink);
        }
        for index in std::mem::take(&mut self.waiting) {
            self.book.refused(index, &fault);
            self.give_result(index, sink);
        }
        self.resolve_rest(sink);
    }

    /// Runs until the run is torn down (and the token endpoints with it, or a bounded
    /// wait for them has passed).
    pub(super) async fn run(
        &mut self,
        phase: &mut PoolPhase,
        reports: &mut HashMap<NodeId, super::NodeReport>,
        sink: &mut dyn RunSink,
        stop: &mut (impl std::future::Future<Output = OperatorStop> + Unpin),
    ) {
        let mut exit_deadline: Option<Instant> = None;
        loop {
            self.settle(phase, sink).await;
            drafting::send_jobs(&mut self.drafting, &mut self.fsm);
            if self.torn_down && self.plane.live_edges() == 0 {
                self.resolve_rest(sink);
                return;
            }
            if self.torn_down && exit_deadline.is_none() {
                // Bounded wait for the token endpoints' pumps after the stages are down.
                exit_deadline = Some(Instant::now() + Duration::from_secs(2));
            }
            let deadline = self.fsm.poll_timeout().or(exit_deadline);
            tokio::select! {
                how = &mut *stop, if self.fsm.outcome().is_none() => {
                    self.fsm.operator_stop(Instant::now(), how);
                }
                () = async { match deadline { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => {
                    self.fsm.handle_timeout(Instant::now());
                    if self.torn_down {
                        self.resolve_rest(sink);
                        return;
                    }
                }
                Some(refusal) = self.refusals.recv() => {
                    eprintln!("swactor: refused an edge stream from {}: {}", refusal.peer, refusal.reason);
                }
                notices = phase.next() => {
                    for notice in notices {
                        // What a node says of itself is kept for the next plan (and written
                        // while the run is up: nothing follows its `run_torn_down`).
                        let notice = if self.torn_down {
                            super::keep_report(notice, reports)
                        } else {
                            super::node_notice(notice, reports, sink, self.t0)
                        };
                        if let Some(notice) = notice {
                            self.pool_notice(notice, sink);
                        }
                    }
                }
                Some(wake) = self.wakes.recv() => self.wake(wake, sink),
                arrived = super::next_arrival(&mut self.arriving) => self.arrive(arrived),
                routed = next_routed(&mut self.served) => self.routed(routed, sink),
                answer = drafting::next_answer(&mut self.drafting) => {
                    self.fsm.drafts_ready(Instant::now(), answer);
                }
            }
        }
    }

    /// Runs the state machines to a fixed point.
    async fn settle(&mut self, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.fsm.poll_event() {
                progressed = true;
                if let Event::RunFaulted {
                    reason, component, node_id, stage_index, edge_id, ..
                } = &ev
                {
                    self.fault = Some(RunFault {
                        reason: *reason,
                        component: *component,
                        node_id: *node_id,
                        stage_index: *stage_index,
                        edge_id: *edge_id,
                    });
                    if self.faulted(*reason, sink) {
                        match self.grown.take() {
                            // Ended to grow: the grown set is offered at once.
                            Some(nodes) if !reason.counts_as_resume() => {
                                phase.gate().reform_onto(&nodes);
                                self.offered = Some(nodes);
                            }
                            // The gate's window runs while the faulted run tears down.
                            _ => phase.gate().reform(Instant::now()),
                        }
                    }
                }
                if let Event::RunTornDown { .. } = ev {
                    self.torn_down = true;
                }
                let barrier = matches!(ev, Event::ReadinessBarrierPassed { .. });
                if barrier {
                    self.book.serving(Instant::now());
                }
                if let Event::RunCompleted { .. } = ev {
                    // The tokens (and results) that completed the run come before its end.
                    while let Some(out) = self.fsm.poll_output() {
                        self.output(out, sink);
                    }
                }
                emit(sink, self.t0, ev);
                if barrier && let Some(resumed) = self.reformed.take() {
                    let nodes: Vec<u64> = self.plan.stages.iter().map(|s| s.node_id.0).collect();
                    sink.progress(&format!(
                        "the session re-formed over nodes {nodes:?}: {resumed} requests resumed"
                    ));
                    let plan = self.plan.stages.iter().map(planned_stage).collect();
                    emit(sink, self.t0, Event::SessionReformed { run_id: self.plan.run_id, plan });
                }
            }
            while let Some(cmd) = self.fsm.poll_command() {
                progressed = true;
                self.command(cmd, phase, sink);
            }
            while let Some(out) = self.fsm.poll_output() {
                progressed = true;
                self.output(out, sink);
            }
            while let Some(seq) = self.fsm.poll_started() {
                if let (Some(routes), Some(index)) = (self.served.as_mut(), self.book.index_of(seq))
                {
                    routes.send(index, Reply::Started);
                }
            }
            let load = self.fsm.load();
            if load != self.load {
                self.load = load;
                sink.load(load.0, load.1);
                sink.speculated(self.spec_before + self.fsm.spec_counters());
            }
            for index in std::mem::take(&mut self.unsent) {
                self.give_result(index, sink);
            }
            progressed |= self.executor.drive(&mut self.plane, &mut self.user).await;
            while let Some(ev) = self.plane.poll_event() {
                progressed = true;
                self.plane_event(ev, sink);
            }
            if self.fsm.awaits_token_endpoints() && self.plane.live_edges() == 0 {
                self.fsm.token_endpoints_stopped();
                progressed = true;
            }
            if !progressed {
                return;
            }
        }
    }

    fn token_in_edge(&self) -> EdgeId {
        self.plan.edges[0].edge_id
    }

    fn token_out_edge(&self) -> EdgeId {
        self.plan.edges[self.plan.edges.len() - 1].edge_id
    }

    fn command(&mut self, cmd: RunCommand, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        match cmd {
            RunCommand::Provision(stage) => {
                let node = self.node_of.get(&stage).copied().unwrap_or_default();
                let sent = self.plan.provision(stage).is_some_and(|p| {
                    phase.send(node, ControlMessage::ProvisionStage { provision: Box::new(p) })
                });
                if !sent {
                    let reason = ControlFault::ConnectionLost.into();
                    let component = Component::ControlChannel;
                    self.fsm.fault(
                        Instant::now(),
                        reason,
                        component,
                        Some(node),
                        Some(stage),
                        None,
                    );
                }
            }
            RunCommand::StartTokenEndpoints => self.start_token_endpoints(sink),
            RunCommand::Inject { object_id, sequence, payload, prefill } => {
                let Some((_, tin)) = self.user.token_in.as_mut() else { return };
                match tin.inject(object_id, sequence, &payload, prefill) {
                    Ok(RingWake::Send) => self.executor.wake(self.token_in_edge()),
                    Ok(_) => {}
                    Err(_) => {
                        let edge = Some(self.token_in_edge());
                        let reason = RingFault::CursorCorrupt.into();
                        self.fsm.fault(
                            Instant::now(),
                            reason,
                            Component::TokenEndpoint,
                            None,
                            None,
                            edge,
                        );
                    }
                }
            }
            RunCommand::StopRun(stage) => {
                if let Some(node) = self.node_of.get(&stage) {
                    let (run_id, faulted) = (self.plan.run_id, self.fault.is_some());
                    phase.send(*node, ControlMessage::StopRun { run_id, faulted });
                }
            }
            RunCommand::StopTokenEndpoints => {
                if self.fault.is_some() {
                    // A faulted run: the token-in pump need not wait for a stage to ack.
                    self.executor.abort_pumps();
                }
                for edge in [self.token_in_edge(), self.token_out_edge()] {
                    self.plane.stop_edge(edge);
                }
            }
        }
    }

    /// Provisions the token-in (send to the first stage) and token-out (receive from the
    /// last stage) edge ends.
    fn start_token_endpoints(&mut self, sink: &mut dyn RunSink) {
        let peer =
            |i: Option<&crate::wire::StagePlan>| i.and_then(|s| self.plan.peer(s.node_id)).cloned();
        let (Some(first), Some(last)) =
            (peer(self.plan.stages.first()), peer(self.plan.stages.last()))
        else {
            return;
        };
        let ends = [
            (self.plan.edges[0], EdgeEnd::Send { consumer: first }),
            (self.plan.edges[self.plan.edges.len() - 1], EdgeEnd::Recv { producer: last }),
        ];
        for (edge, end) in ends {
            let direction =
                if matches!(end, EdgeEnd::Send { .. }) { Direction::Send } else { Direction::Recv };
            let (run_id, node_id, edge_id) = (self.plan.run_id, self.me, edge.edge_id);
            emit(
                sink,
                self.t0,
                Event::EdgeProvisionStarted { run_id, node_id, edge_id, direction },
            );
            let _ = self.plane.provision(EdgeProvision {
                run_id,
                edge_id,
                end,
                object: edge.object,
                ring: edge.ring,
            });
        }
    }

    fn plane_event(&mut self, ev: PlaneEvent, sink: &mut dyn RunSink) {
        match ev {
            PlaneEvent::EdgeReady { edge_id, ring_id, direction } => {
                let (run_id, node_id) = (self.plan.run_id, self.me);
                emit(
                    sink,
                    self.t0,
                    Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction },
                );
                self.endpoints_ready += 1;
                if self.endpoints_ready == 2 {
                    self.fsm.token_endpoints_ready(Instant::now());
                }
            }
            PlaneEvent::EdgeFailed { edge_id, reason, component } => {
                self.fsm.fault(Instant::now(), reason, component, None, None, Some(edge_id));
            }
            PlaneEvent::EdgeStopped { .. } => {}
        }
    }

    fn wake(&mut self, wake: Wake, sink: &mut dyn RunSink) {
        match wake {
            Wake::Pump(edge, notice) => {
                self.executor.notice(&mut self.plane, edge, notice);
            }
            Wake::TokenInWritable => {
                if let Some((_, tin)) = self.user.token_in.as_mut()
                    && let Ok(RingWake::Send) = tin.on_writable()
                {
                    self.executor.wake(self.token_in_edge());
                }
            }
            Wake::TokenOutReadable => self.tokens(sink),
        }
    }

    /// Reads every token-out object the ring holds into the run FSM.
    fn tokens(&mut self, _sink: &mut dyn RunSink) {
        let now = Instant::now();
        let events = match self.user.token_out.as_mut() {
            Some((_, tout)) => tout.poll(),
            None => Vec::new(),
        };
        for ev in events {
            match ev {
                TokenOutEvent::Object { object_id, sequence, payload } => {
                    self.fsm.token_received(now, object_id, sequence, &payload);
                }
                TokenOutEvent::Fault(reason) => {
                    let edge = Some(self.token_out_edge());
                    self.fsm.fault(now, reason, Component::TokenEndpoint, None, None, edge);
                }
                TokenOutEvent::Writable => self.executor.wake(self.token_out_edge()),
            }
        }
    }

    /// How the run ended.
    pub(super) fn report(mut self, pool_ready_after: Duration) -> RunReport {
        let mut outcome = self.fsm.outcome().unwrap_or(RunOutcome::Faulted);
        if self.stopped {
            (outcome, self.fault) = (RunOutcome::OperatorStopped, None);
        }
        let fault = match (outcome, self.fault) {
            (RunOutcome::Faulted, None) => Some(RunFault {
                reason: Timeout::Teardown.into(),
                component: Component::Orchestrator,
                node_id: None,
                stage_index: None,
                edge_id: None,
            }),
            (_, fault) => fault,
        };
        let spec = self.spec_before + self.fsm.spec_counters();
        RunReport {
            outcome,
            stop: self.fsm.cause(),
            fault,
            tokens: self.tokens,
            tail: self.tail,
            results: self.book.into_results(),
            plan: self.plan,
            pool_ready_after,
            first_token_after: self.first_token_at.map(|t| t - self.t0),
            decode_time: self.first_token_at.map(|t| self.last_token_at - t).unwrap_or_default(),
            spec,
        }
    }
}

/// A stage as `session_reformed` names it.
fn planned_stage(s: &crate::wire::StagePlan) -> PlannedStage {
    let (layer_start, layer_end) = (s.layers.start, s.layers.end);
    PlannedStage { stage_index: s.stage_index, node_id: s.node_id, layer_start, layer_end }
}
