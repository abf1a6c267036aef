//! The orchestrator side: its inputs (the pool phase's and the session's), the run FSM's
//! commands, events and outputs, the pool gate's verdicts, and the session's start.

use super::{Ev, Link, Membership, NodeIn, OrchIn, Planted, RUN, World};
use crate::events::Event;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent};
use crate::orchestrator::run::{RunCommand, RunFsm};
use crate::orchestrator::scheduler::{FinishReason, SeqOutput, SeqRequest};
use crate::wire::batch::BatchTable;
use crate::wire::reason::{Component, MembershipLoss, OperatorStop};
use crate::wire::{NodeId, SamplingPolicy, StageIndex};

impl World {
    /// Carries the pool gate's verdicts: the session starts at `PoolReady`; a required node
    /// lost after provisioning began goes to the session.
    pub(super) fn pump_gate(&mut self) {
        while let Some(ev) = self.gate.poll_event() {
            self.trace(format!("gate {ev:?}"));
            let now = self.instant();
            match ev {
                GateEvent::PoolReady { .. } if self.fsm.is_none() && !self.early.3 => {
                    self.start_session();
                }
                GateEvent::RequiredNodeLost { node, reason } => {
                    if let Some(fsm) = self.fsm.as_mut() {
                        if reason == MembershipLoss::NodeDown {
                            fsm.node_lost(now, node, reason.into(), Component::Membership);
                        } else {
                            fsm.fault(
                                now,
                                reason.into(),
                                Component::Membership,
                                Some(node),
                                None,
                                None,
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The pool is ready: the session starts, and what its clients sent meanwhile goes in.
    fn start_session(&mut self) {
        let now = self.instant();
        let (limits, timeouts, planted) = self.session;
        let mut fsm = RunFsm::start(now, &self.plan, limits, timeouts);
        match planted {
            Some(Planted::EarlySlotRelease) => fsm.plant_early_slot_release(),
            Some(Planted::SkipReset) => fsm.plant_skip_reset(),
            Some(Planted::NoLateAnswerFilter) | None => {}
        }
        self.fsm = Some(fsm);
        self.gate.provisioning_started();
        let (submits, cancels, closed, _) = std::mem::take(&mut self.early);
        for k in submits {
            self.orch(OrchIn::Submit(k));
        }
        for k in cancels {
            self.orch(OrchIn::Cancel(k));
        }
        if closed {
            self.orch(OrchIn::CloseInput);
        }
    }

    pub(super) fn orch(&mut self, m: OrchIn) {
        let now = self.instant();
        let run = RUN;
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
                return self.pump_gate();
            }
            OrchIn::PoolTimeout => {
                if self.fsm.is_none() {
                    self.trace("the pool did not become ready: no session".into());
                    self.early.3 = true;
                }
                return;
            }
            m => m,
        };
        // Before the session, its clients' inputs wait for it.
        let Some(mut fsm) = self.fsm.take() else {
            match m {
                OrchIn::Submit(k) => self.early.0.push(k),
                OrchIn::Cancel(k) => self.early.1.push(k),
                OrchIn::CloseInput => self.early.2 = true,
                OrchIn::Stop => {
                    self.faulty = true;
                    self.early.3 = true;
                }
                // A session lost before the run: the node is no longer available.
                OrchIn::NodeLost(i, _, _) => {
                    self.gate.node_unavailable(now, NodeId(i as u64 + 1));
                    self.pump_gate();
                }
                _ => {}
            }
            return;
        };
        match m {
            OrchIn::StageReady(i) => {
                let _ = fsm.stage_ready(now, run, StageIndex(i as u32), NodeId(i as u64 + 1));
            }
            OrchIn::StageFault(i, reason, component) => {
                let (node, stage) = (NodeId(i as u64 + 1), StageIndex(i as u32));
                fsm.fault(now, reason, component, Some(node), Some(stage), None);
            }
            OrchIn::StageStopped(i) => {
                let _ = fsm.stage_stopped(run, StageIndex(i as u32), NodeId(i as u64 + 1));
            }
            OrchIn::TokenOut(object, sequence, payload) => {
                self.inflight.pop_front();
                fsm.token_received(now, object, sequence, &payload);
            }
            OrchIn::EndpointsReady => fsm.token_endpoints_ready(now),
            OrchIn::EndpointsStopped => fsm.token_endpoints_stopped(),
            OrchIn::NodeLost(i, reason, component) => {
                fsm.node_lost(now, NodeId(i as u64 + 1), reason, component);
            }
            OrchIn::Submit(k) => {
                let r = &self.reqs[k];
                let req = SeqRequest {
                    prompt: r.prompt.clone(),
                    max_tokens: r.max_tokens,
                    sampling: if r.temperature > 0.0 {
                        SamplingPolicy::Sample {
                            temperature: r.temperature,
                            top_k: None,
                            top_p: None,
                            seed: r.seed,
                        }
                    } else {
                        SamplingPolicy::Greedy
                    },
                    logprobs: None,
                };
                let got = fsm.submit(now, req);
                self.trace(format!("submit request {k}: {got:?}"));
                self.reqs[k].id = got.ok();
            }
            OrchIn::Cancel(k) => {
                if let Some(id) = self.reqs[k].id {
                    self.trace(format!("cancel sequence {id}"));
                    fsm.cancel(now, id, FinishReason::Cancelled);
                }
            }
            OrchIn::CloseInput => fsm.close_input(now),
            OrchIn::Stop => {
                self.faulty = true;
                fsm.operator_stop(now, OperatorStop::Interrupt);
            }
            _ => {}
        }
        self.fsm = Some(fsm);
    }

    /// Executes what the run FSM asks and checks what it reports.
    pub(super) fn pump_orch(&mut self) {
        while let Some(cmd) = self.fsm.as_mut().and_then(RunFsm::poll_command) {
            match cmd {
                RunCommand::Provision(s) => self.send(
                    Link::Control(s.0 as usize),
                    500,
                    5000,
                    Ev::Node(s.0 as usize, NodeIn::Provision),
                ),
                RunCommand::StartTokenEndpoints => {
                    self.send(Link::Orch, 100, 2000, Ev::Orch(OrchIn::EndpointsReady));
                }
                RunCommand::Inject { object_id, sequence, payload, .. } => {
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
                    self.send(
                        Link::Edge(0),
                        50,
                        1000,
                        Ev::Node(0, NodeIn::Object(object_id, sequence, payload)),
                    );
                }
                RunCommand::StopRun(s) => self.send(
                    Link::Control(s.0 as usize),
                    500,
                    5000,
                    Ev::Node(s.0 as usize, NodeIn::StopRun),
                ),
                RunCommand::StopTokenEndpoints => {
                    self.send(Link::Orch, 100, 3000, Ev::Orch(OrchIn::EndpointsStopped));
                }
            }
        }
        while let Some(ev) = self.fsm.as_mut().and_then(RunFsm::poll_event) {
            if self.torn_down {
                self.violation(format!("{} after run_torn_down", ev.kind()));
            }
            match &ev {
                Event::RunTornDown { .. } => self.torn_down = true,
                Event::RunFaulted { reason, .. } => self.report.reason = Some(reason.to_string()),
                _ => {}
            }
            self.trace(format!("event {}", ev.kind()));
            self.events.push(ev);
        }
        while let Some(out) = self.fsm.as_mut().and_then(RunFsm::poll_output) {
            match out {
                SeqOutput::Token { id, token } => self.tokens.entry(id).or_default().push(token),
                SeqOutput::Logprobs { .. } => {}
                SeqOutput::Finished { id, reason, generated, .. } => {
                    self.trace(format!("sequence {id} finished: {reason:?}"));
                    if self.finished.insert(id, reason).is_some() {
                        self.violation(format!("sequence {id} finished twice"));
                    }
                    if generated != *self.tokens.get(&id).unwrap_or(&Vec::new()) {
                        self.violation(format!(
                            "sequence {id}'s token log differs from its tokens"
                        ));
                    }
                }
            }
        }
    }
}
