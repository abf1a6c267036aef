//! The orchestrator side: its inputs (the pool phase's and the requests'), carried to the
//! pool gate and the real [`Session`] as the orchestrator's run loop carries them, and what
//! the session asks, executed and checked.

use super::{Ev, Link, Membership, NodeIn, OrchIn, Planted, World};
use crate::events::Event;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent};
use crate::model::tokenizer::{Kind, Tokenizer};
use crate::orchestrator::requests::{Request, RequestBook};
use crate::orchestrator::session::{
    GateAsk, PlantedSessionBug, Session, SessionCommand, SessionConfig, SessionOutput,
};
use crate::wire::NodeId;
use crate::wire::batch::BatchTable;
use crate::wire::reason::{ControlFault, FaultReason, OperatorStop};

/// The simulated vocabulary's tokenizer (`t0` .. `t299`): the session's book detokenizes
/// what it streams.
fn tokenizer() -> &'static Tokenizer {
    static TOKENIZER: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
    TOKENIZER.get_or_init(|| {
        let tokens: Vec<String> = (0..super::VOCAB).map(|t| format!("t{t} ")).collect();
        let n = tokens.len();
        let kind = Kind::Spm { add_space_prefix: false };
        Tokenizer::new(kind, tokens, vec![1; n], vec![0.0; n], &[], None, None, false)
            .unwrap_or_else(|e| panic!("the simulated vocabulary is a tokenizer: {e}"))
    })
}

impl World {
    /// Carries the pool gate's verdicts: the session starts at `PoolReady`; once it has,
    /// every verdict is the session's (a required node lost, nodes offered while it
    /// re-forms, the pool grown).
    pub(super) fn pump_gate(&mut self) {
        while let Some(ev) = self.gate.poll_event() {
            self.trace(format!("gate {ev:?}"));
            let now = self.instant();
            match (self.session.as_mut(), ev) {
                (Some(session), ev) => session.gate_event(now, ev),
                (None, GateEvent::PoolReady { .. }) if !self.early.3 => self.start_session(),
                (None, _) => {}
            }
        }
    }

    /// The pool is ready: the session starts, and what its clients sent meanwhile goes in.
    pub(super) fn start_session(&mut self) {
        let now = self.instant();
        self.runs += 1;
        let (limits, timeouts, planted) = self.session_cfg;
        let config = SessionConfig {
            limits,
            timeouts,
            resume: self.policy,
            desired_stages: self.route.len() as u32,
            forget_given: false,
            // Half of the speculating seeds draft from outside (`drafter.rs`).
            draft_step_cost: self.drafts_outside.then_some(0.0),
        };
        let ids = (0..self.reqs.len()).map(|k| k.to_string()).collect();
        let book = RequestBook::expecting(tokenizer(), ids);
        let mut session = Session::start(now, self.base, self.plan.clone(), config, book);
        let bug = match planted {
            Some(Planted::EarlySlotRelease) => Some(PlantedSessionBug::EarlySlotRelease),
            Some(Planted::SkipReset) => Some(PlantedSessionBug::SkipReset),
            Some(Planted::ForgetKept) => Some(PlantedSessionBug::ForgetKept),
            Some(Planted::ReplaySkipsToken) => Some(PlantedSessionBug::ReplaySkipsToken),
            Some(Planted::PrefixOverclaim) => Some(PlantedSessionBug::PrefixOverclaim),
            Some(Planted::StoreSkipSave) => Some(PlantedSessionBug::StoreSkipSave),
            Some(Planted::ResumeOverkeep) => Some(PlantedSessionBug::ResumeOverkeep),
            Some(Planted::NoLateAnswerFilter) | None => None,
        };
        if let Some(bug) = bug {
            session.plant(bug);
        }
        self.session = Some(session);
        self.gate.provisioning_started();
        let (submits, cancels, closed, _) = std::mem::take(&mut self.early);
        for k in submits {
            self.orch(OrchIn::Submit(k));
        }
        for k in cancels {
            self.orch(OrchIn::Cancel(k));
        }
        if closed || self.input_closed {
            self.orch(OrchIn::CloseInput);
        }
    }

    /// Request `k` as the session takes it.
    fn request(&self, k: usize) -> Request {
        let r = &self.reqs[k];
        Request {
            id: k.to_string(),
            prompt: r.prompt.clone(),
            max_tokens: r.max_tokens,
            sampling: r.sampling(),
            stop: Vec::new(),
            logprobs: None,
            speculative: true,
            cache_prompt: true,
            constraint: None,
        }
    }

    /// One input of the orchestrator: the pool phase's go to the gate; the rest to the
    /// session (or, before it formed, wait for it).
    pub(super) fn orch(&mut self, m: OrchIn) {
        let now = self.instant();
        // The pool phase needs no session.
        let m = match m {
            OrchIn::Available(i) => {
                let identity = DataPlaneIdentity {
                    endpoint_id: format!("{:064x}", i + 1),
                    addrs: vec![format!("127.0.0.1:{}", 1001 + i)],
                };
                self.gate.node_available(now, NodeId(i as u64 + 1), identity);
                return self.pump_gate();
            }
            OrchIn::BootFaulted(i, reason) => {
                self.gate.node_faulted(now, NodeId(i as u64 + 1), reason);
                return self.pump_gate();
            }
            OrchIn::Member(i, state) => {
                let node = NodeId(i as u64 + 1);
                match state {
                    Membership::Up => self.gate.member_up(now, node),
                    Membership::Suspect => self.gate.member_suspect(now, node),
                    Membership::Down => self.gate.member_down(now, node),
                }
                self.pump_gate();
                if let (Membership::Down, Some(session)) = (state, self.session.as_mut()) {
                    session.member_down(now, node);
                }
                return;
            }
            // Re-planning sees the deadline once the faulted run is down (`pump_orch`).
            OrchIn::ResumeTimeout => return,
            OrchIn::PoolTimeout => {
                if self.session.is_none() {
                    self.trace("the pool did not become ready: no session".into());
                    self.early.3 = true;
                }
                return;
            }
            m => m,
        };
        if self.session.is_none() {
            // Before the session, its clients' inputs wait for it.
            match m {
                OrchIn::Submit(k) => self.early.0.push(k),
                OrchIn::Cancel(k) => self.early.1.push(k),
                OrchIn::CloseInput => {
                    self.input_closed = true;
                    self.early.2 = true;
                }
                OrchIn::Stop => {
                    self.faulty = true;
                    self.early.3 = true;
                }
                // A session lost before the run: the node is no longer available.
                OrchIn::NodeLost(i, _) => {
                    self.gate.node_unavailable(now, NodeId(i as u64 + 1));
                    self.pump_gate();
                }
                _ => {}
            }
            return;
        };
        self.session_input(m);
    }

    /// An input for the formed session.
    fn session_input(&mut self, m: OrchIn) {
        let now = self.instant();
        let run = self.run;
        let Some(session) = self.session.as_mut() else { return };
        match m {
            OrchIn::StageReady(r, stage, i) => {
                let _ = session.stage_ready(now, r, stage, NodeId(i as u64 + 1));
            }
            OrchIn::StageFault(r, stage, i, reason, component) => {
                let node = NodeId(i as u64 + 1);
                session.stage_fault(now, r, stage, node, (reason, component));
            }
            OrchIn::StageStopped(r, stage, i) => {
                let _ = session.stage_stopped(r, stage, NodeId(i as u64 + 1));
            }
            OrchIn::TokenOut(r, object, sequence, payload) if r == run => {
                self.inflight.pop_front();
                session.token_received(now, object, sequence, &payload);
            }
            OrchIn::EndpointsReady => {
                // Both ends, at once.
                session.token_endpoint_ready(now);
                session.token_endpoint_ready(now);
            }
            OrchIn::EndpointsStopped => session.token_endpoints_stopped(),
            OrchIn::NodeLost(i, reason) => {
                let node = NodeId(i as u64 + 1);
                if reason == FaultReason::Control(ControlFault::ConnectionLost) {
                    session.session_closed(now, node);
                } else {
                    session.session_ending(now, node, reason);
                }
                self.gate.node_unavailable(now, node);
                self.pump_gate();
            }
            OrchIn::Submit(k) => {
                let request = self.request(k);
                self.reqs[k].admitted = true;
                self.trace(format!("submit request {k}"));
                if let Some(session) = self.session.as_mut() {
                    session.arrived(now, k, request);
                }
            }
            OrchIn::Cancel(k) => session.cancel(now, k),
            OrchIn::CloseInput => {
                self.input_closed = true;
                session.close_input(now);
            }
            OrchIn::Stop => {
                self.faulty = true;
                if session.outcome().is_none() {
                    session.operator_stop(now, OperatorStop::Interrupt);
                } else if session.reformation().is_some() {
                    // Read once the faulted run is down (the driver's re-planning).
                    self.stop_pending = true;
                }
            }
            _ => {}
        }
    }

    /// Executes what the session asks and checks what it reports; once the faulted run is
    /// down, re-forms or gives re-forming up as the driver's re-planning does.
    pub(super) fn pump_orch(&mut self) {
        loop {
            let now = self.instant();
            while let Some(out) = self.session.as_mut().and_then(|s| s.poll(now)) {
                self.output(out);
            }
            self.answer_drafts();
            if !self.after_teardown() {
                break;
            }
        }
    }

    fn output(&mut self, out: SessionOutput) {
        let now = self.instant();
        match out {
            SessionOutput::Command(cmd) => self.command(cmd),
            SessionOutput::Gate(GateAsk::Reform) => self.gate.reform(now),
            SessionOutput::Gate(GateAsk::ReformOnto(nodes)) => self.gate.reform_onto(&nodes),
            SessionOutput::Event(ev) => self.session_event(ev),
            SessionOutput::Progress(line) => self.trace(line),
            SessionOutput::Token { index, token, .. } => match self.reqs.get_mut(index) {
                Some(r) if r.result.is_none() => r.tokens.push(token),
                _ => self.violation(format!("a token of request {index}, which has ended")),
            },
            SessionOutput::Result { index, result } => {
                self.trace(format!(
                    "request {index} ended: {:?} {:?}",
                    result.finish_reason, result.error
                ));
                if self.reqs[index].result.replace(result).is_some() {
                    self.violation(format!("request {index} ended twice"));
                }
            }
            SessionOutput::Started(_) | SessionOutput::Text { .. } | SessionOutput::Load { .. } => {
            }
        }
    }

    fn session_event(&mut self, ev: Event) {
        if self.torn_down {
            self.violation(format!("{} after run_torn_down", ev.kind()));
        }
        self.trace(format!("event {}", ev.kind()));
        if let Event::RunFaulted { reason, .. } = &ev {
            self.report.reason = Some(reason.to_string());
        }
        if let Event::SessionReforming { .. } = &ev {
            // Re-forming is given up at its deadline (once the faulted run is down).
            if let Some(r) = self.session.as_ref().and_then(Session::reformation) {
                let at = r.deadline.saturating_duration_since(self.base);
                self.at(at, Ev::Orch(OrchIn::ResumeTimeout));
            }
        }
        self.events.push(ev);
    }

    fn command(&mut self, cmd: SessionCommand) {
        match cmd {
            SessionCommand::Provision { node, provision } => {
                let i = node.0 as usize - 1;
                self.send(Link::Control(i), 500, 5000, Ev::Node(i, NodeIn::Provision(provision)));
            }
            SessionCommand::StartTokenEndpoints => {
                self.send(Link::Orch, 100, 2000, Ev::Orch(OrchIn::EndpointsReady));
            }
            SessionCommand::Inject { object_id, sequence, payload, .. } => {
                let limits = self.limits();
                match BatchTable::split_rows(&payload, limits, 4) {
                    Ok((table, _)) => {
                        let slots: Vec<u32> = table.entries().iter().map(|e| e.slot).collect();
                        let busy: Vec<u32> = slots
                            .iter()
                            .copied()
                            .filter(|s| self.inflight.iter().any(|f| f.contains(s)))
                            .collect();
                        if !busy.is_empty() {
                            self.violation(format!(
                                "micro-batch {} touches slots {busy:?} already in flight",
                                sequence.0
                            ));
                        }
                        self.inflight.push_back(slots);
                    }
                    Err(e) => self.violation(format!("injected a bad micro-batch: {e}")),
                }
                let (first, run) = (self.route[0], self.run);
                self.send(
                    Link::Edge(first),
                    50,
                    1000,
                    Ev::Node(first, NodeIn::Object(run, object_id, sequence, payload)),
                );
            }
            SessionCommand::StopRun { node, run_id, faulted, park } => {
                let i = node.0 as usize - 1;
                let ev = Ev::Node(i, NodeIn::StopRun(run_id, faulted, park));
                self.send(Link::Control(i), 500, 5000, ev);
            }
            SessionCommand::StopTokenEndpoints { .. } => {
                self.send(Link::Orch, 100, 3000, Ev::Orch(OrchIn::EndpointsStopped));
            }
        }
    }
}
