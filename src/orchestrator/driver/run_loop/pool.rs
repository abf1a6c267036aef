//! The run loop's pool side: what the pool phase reports during a run (stage reports,
//! lost sessions and members, the gate's losses and growth) carried to the run FSM.

use std::time::Instant;

use super::RunLoop;
use crate::control::ControlMessage;
use crate::events::{Event, EventLine};
use crate::membership::pool_gate::GateEvent;
use crate::orchestrator::driver::{RunSink, now_us};
use crate::orchestrator::pool_phase::PoolNotice;
use crate::wire::NodeId;
use crate::wire::reason::{Component, ControlFault, MembershipLoss};

impl RunLoop<'_> {
    pub(super) fn pool_notice(&mut self, notice: PoolNotice, sink: &mut dyn RunSink) {
        let now = Instant::now();
        match notice {
            PoolNotice::Message(node, ControlMessage::SessionEnding { reason, .. }) => {
                // The node said why its session ends (it stops, or was taken over): that,
                // not the lost connection that follows, is what its stages' loss is.
                self.fsm.node_lost(now, node, reason, Component::ControlChannel);
            }
            PoolNotice::Message(node, msg) => self.stage_message(node, msg, sink),
            PoolNotice::SessionClosed(node) => {
                // No stage report will come from a node without a session: its stages are
                // lost (the run FSM ignores nodes outside the plan).
                let reason = ControlFault::ConnectionLost.into();
                self.fsm.node_lost(now, node, reason, Component::ControlChannel);
            }
            PoolNotice::Gate(GateEvent::RequiredNodeLost { node, reason })
                if self.in_plan(node) =>
            {
                if reason == MembershipLoss::NodeDown {
                    self.fsm.node_lost(now, node, reason.into(), Component::Membership);
                } else {
                    let component = Component::Membership;
                    self.fsm.fault(now, reason.into(), component, Some(node), None, None);
                }
            }
            // A member of the plan declared down after the gate stopped reporting losses
            // (a second node lost while the session re-forms): its stages are lost now,
            // not at the teardown deadline.
            PoolNotice::MemberDown(node) if self.in_plan(node) && self.fsm.outcome().is_some() => {
                let reason = MembershipLoss::NodeDown.into();
                self.fsm.node_lost(now, node, reason, Component::Membership);
            }
            PoolNotice::Gate(GateEvent::CapacityGrew { nodes }) => self.grow(nodes, sink),
            // Re-forming: what the gate offers while the faulted run still tears down.
            PoolNotice::Gate(GateEvent::PoolReady { nodes }) if self.reforming.is_some() => {
                self.offered = Some(nodes);
            }
            PoolNotice::Gate(GateEvent::ReadinessLost { .. }) => self.offered = None,
            _ => {}
        }
    }

    /// More nodes are ready than the run uses: a session re-formed onto fewer stages than
    /// it asks for re-forms onto them, at once (its sequences resume on the larger plan;
    /// the re-formation does not count against their resume cap).
    fn grow(&mut self, nodes: Vec<NodeId>, sink: &mut dyn RunSink) {
        let stages = self.plan.stages.len() as u32;
        let ask = crate::orchestrator::reform::GrowthAsk {
            stages,
            desired: self.desired_stages,
            ready: nodes.len() as u32,
            serving: self.fsm.outcome().is_none() && self.reforming.is_none(),
            idle: self.input_closed && self.load == (0, 0) && self.waiting.is_empty(),
        };
        let Some(target) = crate::orchestrator::reform::grown_stages(&self.resume, ask) else {
            return;
        };
        sink.progress(&format!(
            "nodes {nodes:?} are ready: re-forming the session from {stages} stages to {target}"
        ));
        self.grown = Some(nodes);
        let reason = crate::wire::reason::PoolChange::CapacityGrew.into();
        self.fsm.fault(Instant::now(), reason, Component::PoolGate, None, None, None);
    }

    fn in_plan(&self, node: NodeId) -> bool {
        self.node_of.values().any(|n| *n == node)
    }

    fn stage_message(&mut self, node: NodeId, msg: ControlMessage, sink: &mut dyn RunSink) {
        let now = Instant::now();
        match msg {
            ControlMessage::StageReady { run_id, stage_index } => {
                if let Err(e) = self.fsm.stage_ready(now, run_id, stage_index, node) {
                    eprintln!("swactor: stage_ready from node {node} refused: {e}");
                }
            }
            ControlMessage::StageFault { run_id, stage_index, reason, component } => {
                if run_id == self.plan.run_id && self.node_of.get(&stage_index) == Some(&node) {
                    self.fsm.fault(now, reason, component, Some(node), Some(stage_index), None);
                } else {
                    eprintln!(
                        "swactor: node {node}: {reason} for run {run_id} stage {stage_index} ({component})"
                    );
                }
            }
            ControlMessage::StageStopped { run_id, stage_index } => {
                if let Err(e) = self.fsm.stage_stopped(run_id, stage_index, node) {
                    eprintln!("swactor: stage_stopped from node {node} refused: {e}");
                }
            }
            ControlMessage::Event { line } if !self.torn_down => {
                if let Event::WeightsLoaded { .. } = line.event {
                    self.loaded_weights += 1;
                    let of = self.plan.stages.len();
                    sink.progress(&format!(
                        "weights loaded on {} of {of} stages",
                        self.loaded_weights
                    ));
                }
                // A node's event keeps the moment it happened on its host.
                sink.event(&EventLine { ts_us: now_us(self.t0), ..line });
            }
            ControlMessage::Event { .. } => {}
            other => eprintln!("swactor: unexpected message from node {node}: {other:?}"),
        }
    }
}
