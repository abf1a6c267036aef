//! The orchestrator side: its inputs (the pool phase's and the session's), the run FSM's
//! commands, events and outputs, the pool gate's verdicts, and the session's start.

use super::{Ev, Link, Membership, NodeIn, OrchIn, Planted, World};
use crate::events::Event;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent};
use crate::orchestrator::run::{RunCommand, RunFsm};
use crate::orchestrator::scheduler::{FinishReason, SeqOutput, SeqRequest};
use crate::wire::NodeId;
use crate::wire::batch::BatchTable;
use crate::wire::reason::{Component, MembershipLoss, OperatorStop};

impl World {
    /// Carries the pool gate's verdicts: the session starts at `PoolReady`; a required node
    /// lost after provisioning began goes to the session.
    pub(super) fn pump_gate(&mut self) {
        while let Some(ev) = self.gate.poll_event() {
            self.trace(format!("gate {ev:?}"));
            let now = self.instant();
            match ev {
                GateEvent::PoolReady { nodes }
                    if self.fsm.is_none() && self.reforming.is_some() =>
                {
                    self.reform_over(&nodes);
                }
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

    /// The pool is ready: the session starts (or its next run, once re-formed), and what
    /// its clients sent meanwhile goes in.
    pub(super) fn start_session(&mut self) {
        let now = self.instant();
        self.runs += 1;
        let (limits, timeouts, planted) = self.session;
        let mut fsm = RunFsm::start(now, &self.plan, limits, timeouts);
        match planted {
            Some(Planted::EarlySlotRelease) => fsm.plant_early_slot_release(),
            Some(Planted::SkipReset) => fsm.plant_skip_reset(),
            Some(Planted::NoLateAnswerFilter) | None => {}
        }
        if self.drafts_outside {
            fsm.draft_externally(0.0);
        }
        self.fsm = Some(fsm);
        self.gate.provisioning_started();
        self.resume_kept();
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

    pub(super) fn orch(&mut self, m: OrchIn) {
        let now = self.instant();
        let run = self.run;
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
            OrchIn::ResumeTimeout(run) => {
                if self.fsm.is_none() && self.reforming.is_some() && run == self.run {
                    self.abandon("resume_timeout");
                }
                return;
            }
            OrchIn::PoolTimeout => {
                if self.fsm.is_none() && self.runs == 0 {
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
                OrchIn::CloseInput => {
                    self.input_closed = true;
                    self.early.2 = true;
                }
                OrchIn::Stop if self.reforming.is_some() => {
                    self.faulty = true;
                    self.abandon("operator_stop");
                }
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
            OrchIn::StageReady(r, stage, i) => {
                let _ = fsm.stage_ready(now, r, stage, NodeId(i as u64 + 1));
            }
            OrchIn::StageFault(r, stage, i, reason, component) if r == run => {
                let node = NodeId(i as u64 + 1);
                fsm.fault(now, reason, component, Some(node), Some(stage), None);
            }
            OrchIn::StageStopped(r, stage, i) => {
                let _ = fsm.stage_stopped(r, stage, NodeId(i as u64 + 1));
            }
            OrchIn::TokenOut(r, object, sequence, payload) if r == run => {
                self.inflight.pop_front();
                fsm.token_received(now, object, sequence, &payload);
            }
            OrchIn::EndpointsReady => fsm.token_endpoints_ready(now),
            OrchIn::EndpointsStopped => fsm.token_endpoints_stopped(),
            OrchIn::NodeLost(i, reason, component) => {
                fsm.node_lost(now, NodeId(i as u64 + 1), reason, component);
                self.gate.node_unavailable(now, NodeId(i as u64 + 1));
            }
            OrchIn::Submit(k) => {
                let req = SeqRequest {
                    prompt: self.reqs[k].prompt.clone(),
                    max_tokens: self.reqs[k].max_tokens,
                    sampling: self.reqs[k].sampling(),
                    logprobs: None,
                    speculative: true,
                };
                let got = fsm.submit(now, req);
                self.trace(format!("submit request {k}: {got:?}"));
                if let Ok(seq) = got {
                    self.admitted(k, seq);
                }
            }
            OrchIn::Cancel(k) => {
                if let Some(id) = self.reqs[k].id {
                    self.trace(format!("cancel sequence {id}"));
                    fsm.cancel(now, id, FinishReason::Cancelled);
                }
            }
            OrchIn::CloseInput => {
                self.input_closed = true;
                fsm.close_input(now);
            }
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
                RunCommand::Provision(s) => {
                    let i = self.route[s.0 as usize];
                    self.send(Link::Control(i), 500, 5000, Ev::Node(i, NodeIn::Provision));
                }
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
                    let (first, run) = (self.route[0], self.run);
                    self.send(
                        Link::Edge(first),
                        50,
                        1000,
                        Ev::Node(first, NodeIn::Object(run, object_id, sequence, payload)),
                    );
                }
                RunCommand::StopRun(s) => {
                    let i = self.route[s.0 as usize];
                    self.send(Link::Control(i), 500, 5000, Ev::Node(i, NodeIn::StopRun));
                }
                RunCommand::StopTokenEndpoints => {
                    self.send(Link::Orch, 100, 3000, Ev::Orch(OrchIn::EndpointsStopped));
                }
            }
        }
        self.answer_drafts();
        while let Some(ev) = self.fsm.as_mut().and_then(RunFsm::poll_event) {
            if self.torn_down {
                self.violation(format!("{} after run_torn_down", ev.kind()));
            }
            self.trace(format!("event {}", ev.kind()));
            let torn = matches!(ev, Event::RunTornDown { .. });
            if let Event::RunFaulted { reason, .. } = &ev {
                self.report.reason = Some(reason.to_string());
                self.faulted(*reason);
            }
            self.events.push(ev);
            if torn {
                self.run_torn_down();
            }
        }
        while let Some(out) = self.fsm.as_mut().and_then(RunFsm::poll_output) {
            match out {
                SeqOutput::Token { id, token } => match self.seqs.get(&id) {
                    Some(&k) => self.reqs[k].tokens.push(token),
                    None => self.violation(format!("a token of unknown sequence {id}")),
                },
                SeqOutput::Logprobs { .. } => {}
                SeqOutput::Finished { id, reason, prompt, generated } => {
                    self.trace(format!("sequence {id} finished: {reason:?}"));
                    self.sequence_ended(id, reason, &prompt, &generated);
                }
            }
        }
    }
}
