//! The run phase's executor: the core's [`Session`] fed by the pool phase (stage reports,
//! lost sessions, lost members, the gate's verdicts), the token endpoints' edge plane and
//! its pumps, the requests' channels, the operator and the clock. Every decision is the
//! session's or the plane's; this loop only carries inputs to them and executes what they
//! ask.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use tokio::sync::mpsc;

use super::drafting::{self, Drafter, Drafting};
use super::endpoints::{Parts, TokenUser, Wake};
use super::served::{Reply, Routes, next_routed};
use super::{Arriving, OrchestrateConfig, OrchestrateError, RunReport, RunSink, emit};
use crate::control::ControlMessage;
use crate::edge::establisher::{EdgeEnd, EdgeProvision};
use crate::edge::executor::PlaneExecutor;
use crate::edge::plane::{EdgePlane, PlaneEvent};
use crate::events::{Direction, Event};
use crate::model::tokenizer::Tokenizer;
use crate::net::edge::{EdgeRouter, Refusal};
use crate::orchestrator::pool_phase::PoolPhase;
use crate::orchestrator::requests::{Request, RequestBook};
use crate::orchestrator::session::{
    GateAsk, ReformEnd, Session, SessionCommand, SessionConfig, SessionOutput,
};
use crate::orchestrator::tokens::TokenOutEvent;
use crate::ring::Wake as RingWake;
use crate::wire::reason::{OperatorStop, RingFault};
use crate::wire::{EdgeId, NodeId, RunPlan};

mod pool;
mod requests;

/// One session's runs. See the module docs.
pub(super) struct RunLoop<'t> {
    t0: Instant,
    me: NodeId,
    session: Session<'t>,
    plane: EdgePlane,
    executor: PlaneExecutor,
    user: TokenUser,
    wakes: mpsc::UnboundedReceiver<Wake>,
    refusals: mpsc::UnboundedReceiver<Refusal>,
    /// A batch job's requests still arriving (closed: none will come).
    arriving: Option<mpsc::UnboundedReceiver<(usize, Request)>>,
    /// A server's requests and their reply routes.
    served: Option<Routes>,
    /// The token endpoints' router, shared by every run of the session.
    router: EdgeRouter,
    /// The run's side of the session's draft model, if it has one.
    drafting: Option<Drafting>,
}

impl<'t> RunLoop<'t> {
    /// Sets up the first run's endpoints on the token edges' router (`routed`: the router
    /// accepting on `endpoint` since the pool phase, and its refusals), and starts the
    /// session.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn start(
        plan: RunPlan,
        config: &OrchestrateConfig,
        drafter: Option<&Drafter>,
        arriving: Option<Arriving>,
        endpoint: &Endpoint,
        routed: (EdgeRouter, mpsc::UnboundedReceiver<Refusal>),
        tokenizer: &'t Tokenizer,
        t0: Instant,
    ) -> Result<RunLoop<'t>, OrchestrateError> {
        let (router, refusals) = routed;
        let parts = Parts::new(&plan, endpoint, &router)?;
        let now = Instant::now();
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
        let session_config = SessionConfig {
            limits: config.session,
            timeouts: config.timeouts,
            resume: config.resume,
            desired_stages: config.stages.unwrap_or(config.pool.nodes.len() as u32).max(1),
            forget_given: served.is_some(),
            draft_step_cost: drafter.map(|d| d.step_cost),
        };
        let mut session = Session::start(now, t0, plan, session_config, book);
        for (index, r) in config.requests.iter().enumerate() {
            session.arrived(now, index, r.clone());
        }
        if input_closed {
            session.close_input(now);
        }
        Ok(RunLoop {
            t0,
            me: config.pool.orchestrator.node_id,
            session,
            plane: parts.plane,
            executor: parts.executor,
            user: parts.user,
            wakes: parts.wakes,
            refusals,
            arriving: rx,
            served,
            router,
            drafting: drafter.map(Drafting::start),
        })
    }

    /// The session's machine (what the driver and re-planning ask of it).
    pub(super) fn session(&mut self) -> &mut Session<'t> {
        &mut self.session
    }

    /// Re-forms the session on `plan`, a new run over the nodes left: fresh token
    /// endpoints, and the session's next run (see [`Session::reform`]).
    pub(super) fn reform(
        &mut self,
        plan: RunPlan,
        endpoint: &Endpoint,
    ) -> Result<(), OrchestrateError> {
        let parts = Parts::new(&plan, endpoint, &self.router)?;
        (self.plane, self.executor, self.user, self.wakes) =
            (parts.plane, parts.executor, parts.user, parts.wakes);
        // The next run's answers come on a channel of its own (the last run's are stale).
        self.drafting = self.drafting.as_ref().map(|d| Drafting::start(d.drafter()));
        self.session.reform(Instant::now(), plan);
        Ok(())
    }

    /// Re-forming was given up (`why`): see [`Session::abandon`].
    pub(super) fn abandon(
        &mut self,
        why: ReformEnd,
        phase: &mut PoolPhase,
        sink: &mut dyn RunSink,
    ) {
        self.session.abandon(why);
        self.close_input_channels();
        self.drain(phase, sink);
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
            drafting::send_jobs(&mut self.drafting, &mut self.session);
            let torn_down = self.session.is_torn_down();
            if torn_down && self.plane.live_edges() == 0 {
                return self.resolve_rest(phase, sink);
            }
            if torn_down && exit_deadline.is_none() {
                // Bounded wait for the token endpoints' pumps after the stages are down.
                exit_deadline = Some(Instant::now() + Duration::from_secs(2));
            }
            let deadline = self.session.poll_timeout().or(exit_deadline);
            tokio::select! {
                how = &mut *stop, if self.session.outcome().is_none() => {
                    self.session.operator_stop(Instant::now(), how);
                }
                () = async { match deadline { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => {
                    self.session.handle_timeout(Instant::now());
                    if self.session.is_torn_down() {
                        return self.resolve_rest(phase, sink);
                    }
                }
                Some(refusal) = self.refusals.recv() => {
                    eprintln!("swactor: refused an edge stream from {}: {}", refusal.peer, refusal.reason);
                }
                notices = phase.next() => {
                    for notice in notices {
                        // What a node says of itself is kept for the next plan (and written
                        // while the run is up: nothing follows its `run_torn_down`).
                        let notice = if self.session.is_torn_down() {
                            super::keep_report(notice, reports)
                        } else {
                            super::node_notice(notice, reports, sink, self.t0)
                        };
                        if let Some(notice) = notice {
                            self.pool_notice(notice, sink);
                        }
                    }
                }
                Some(wake) = self.wakes.recv() => self.wake(wake),
                arrived = super::next_arrival(&mut self.arriving) => self.arrive(arrived),
                routed = next_routed(&mut self.served) => self.routed(routed),
                answer = drafting::next_answer(&mut self.drafting) => {
                    self.session.drafts_ready(Instant::now(), answer);
                }
            }
        }
    }

    /// After teardown: the session resolves what is left (unless it re-forms), and no
    /// more input is awaited.
    fn resolve_rest(&mut self, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        if self.session.resolve_rest() {
            self.close_input_channels();
        }
        self.drain(phase, sink);
    }

    /// Requests still arriving are no longer awaited, a server's included.
    fn close_input_channels(&mut self) {
        self.arriving = None;
        if let Some(routes) = self.served.as_mut() {
            routes.close();
        }
    }

    /// Runs the session and the token endpoints' plane to a fixed point.
    async fn settle(&mut self, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        loop {
            let mut progressed = self.drain(phase, sink);
            progressed |= self.executor.drive(&mut self.plane, &mut self.user).await;
            while let Some(ev) = self.plane.poll_event() {
                progressed = true;
                self.plane_event(ev, sink);
            }
            if self.session.awaits_token_endpoints() && self.plane.live_edges() == 0 {
                self.session.token_endpoints_stopped();
                progressed = true;
            }
            if !progressed {
                return;
            }
        }
    }

    /// Executes everything the session asks now. Returns whether it asked anything.
    pub(super) fn drain(&mut self, phase: &mut PoolPhase, sink: &mut dyn RunSink) -> bool {
        let mut any = false;
        while let Some(out) = self.session.poll(Instant::now()) {
            any = true;
            self.execute(out, phase, sink);
        }
        any
    }

    fn execute(&mut self, out: SessionOutput, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        match out {
            SessionOutput::Event(ev) => emit(sink, self.t0, ev),
            SessionOutput::Progress(line) => sink.progress(&line),
            SessionOutput::Command(cmd) => self.command(cmd, phase, sink),
            SessionOutput::Gate(GateAsk::Reform) => phase.gate().reform(Instant::now()),
            SessionOutput::Gate(GateAsk::ReformOnto(nodes)) => phase.gate().reform_onto(&nodes),
            SessionOutput::Started(index) => self.reply(index, Reply::Started),
            SessionOutput::Token { index, token, piece, logprobs } => {
                sink.token(index, token, &piece);
                self.reply(index, Reply::Token { id: token, piece, logprobs });
            }
            SessionOutput::Text { index, text } => {
                sink.text(index, &text);
                self.reply(index, Reply::Text(text));
            }
            SessionOutput::Result { index, result } => {
                sink.result(index, &result);
                self.reply(index, Reply::Done(result));
            }
            SessionOutput::Load { running, queued, spec, prefix } => {
                sink.load(running, queued);
                sink.speculated(spec);
                sink.prefix(prefix);
            }
        }
    }

    /// Sends a server's request its reply.
    fn reply(&mut self, index: usize, reply: Reply) {
        if let Some(routes) = self.served.as_mut() {
            routes.send(index, reply);
        }
    }

    fn token_in_edge(&self) -> EdgeId {
        self.session.plan().edges[0].edge_id
    }

    fn token_out_edge(&self) -> EdgeId {
        let edges = &self.session.plan().edges;
        edges[edges.len() - 1].edge_id
    }

    fn command(&mut self, cmd: SessionCommand, phase: &mut PoolPhase, sink: &mut dyn RunSink) {
        match cmd {
            SessionCommand::Provision { node, provision } => {
                let stage = provision.stage_index;
                if !phase.send(node, ControlMessage::ProvisionStage { provision }) {
                    self.session.provision_failed(Instant::now(), node, stage);
                }
            }
            SessionCommand::StartTokenEndpoints => self.start_token_endpoints(sink),
            SessionCommand::Inject { object_id, sequence, payload, prefill } => {
                let Some((_, tin)) = self.user.token_in.as_mut() else { return };
                match tin.inject(object_id, sequence, &payload, prefill) {
                    Ok(RingWake::Send) => self.executor.wake(self.token_in_edge()),
                    Ok(_) => {}
                    Err(_) => {
                        let edge = Some(self.token_in_edge());
                        let reason = RingFault::CursorCorrupt.into();
                        self.session.endpoint_fault(Instant::now(), reason, edge);
                    }
                }
            }
            SessionCommand::StopRun { node, run_id, faulted, park } => {
                phase.send(node, ControlMessage::StopRun { run_id, faulted, park });
            }
            SessionCommand::StopTokenEndpoints { abort_pumps } => {
                if abort_pumps {
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
        let plan = self.session.plan();
        let peer =
            |i: Option<&crate::wire::StagePlan>| i.and_then(|s| plan.peer(s.node_id)).cloned();
        let (Some(first), Some(last)) = (peer(plan.stages.first()), peer(plan.stages.last()))
        else {
            return;
        };
        let ends = [
            (plan.edges[0], EdgeEnd::Send { consumer: first }),
            (plan.edges[plan.edges.len() - 1], EdgeEnd::Recv { producer: last }),
        ];
        let run_id = plan.run_id;
        for (edge, end) in ends {
            let direction =
                if matches!(end, EdgeEnd::Send { .. }) { Direction::Send } else { Direction::Recv };
            let (node_id, edge_id) = (self.me, edge.edge_id);
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
                let (run_id, node_id) = (self.session.plan().run_id, self.me);
                emit(
                    sink,
                    self.t0,
                    Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction },
                );
                self.session.token_endpoint_ready(Instant::now());
            }
            PlaneEvent::EdgeFailed { edge_id, reason, component } => {
                self.session.edge_failed(Instant::now(), edge_id, reason, component);
            }
            PlaneEvent::EdgeStopped { .. } => {}
        }
    }

    fn wake(&mut self, wake: Wake) {
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
            Wake::TokenOutReadable => self.tokens(),
        }
    }

    /// Reads every token-out object the ring holds into the session.
    fn tokens(&mut self) {
        let now = Instant::now();
        let events = match self.user.token_out.as_mut() {
            Some((_, tout)) => tout.poll(),
            None => Vec::new(),
        };
        for ev in events {
            match ev {
                TokenOutEvent::Object { object_id, sequence, payload } => {
                    self.session.token_received(now, object_id, sequence, &payload);
                }
                TokenOutEvent::Fault(reason) => {
                    let edge = Some(self.token_out_edge());
                    self.session.endpoint_fault(now, reason, edge);
                }
                TokenOutEvent::Writable => self.executor.wake(self.token_out_edge()),
            }
        }
    }

    /// How the session ended.
    pub(super) fn report(self, pool_ready_after: Duration) -> RunReport {
        self.session.report(pool_ready_after)
    }
}
