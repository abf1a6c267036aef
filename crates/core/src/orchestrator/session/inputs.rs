//! What the session hears from its driver: the pool's verdicts (a node lost, its session
//! closed, the gate's offers and growth), each stage's reports, the token endpoints and
//! the operator. Each goes to the current run, or to re-formation.

use std::time::Instant;

use super::Session;
use crate::membership::pool_gate::GateEvent;
use crate::orchestrator::run::RunInputError;
use crate::wire::reason::{Component, ControlFault, FaultReason, MembershipLoss, OperatorStop};
use crate::wire::{EdgeId, NodeId, ObjectId, RunId, Sequence, StageIndex};

impl Session<'_> {
    /// `node` said its control session ends (`reason`: it stops, or was taken over): that,
    /// not the lost connection that follows, is what its stages' loss is.
    pub fn session_ending(&mut self, now: Instant, node: NodeId, reason: FaultReason) {
        self.fsm.node_lost(now, node, reason, Component::ControlChannel);
    }

    /// `node`'s control session closed: no stage report will come from it (its stages are
    /// lost; a node outside the plan changes nothing).
    pub fn session_closed(&mut self, now: Instant, node: NodeId) {
        let reason = ControlFault::ConnectionLost.into();
        self.fsm.node_lost(now, node, reason, Component::ControlChannel);
    }

    /// SWIM declared `node` down. A member of the plan declared down after the gate stopped
    /// reporting losses (a second node lost while the session re-forms): its stages are
    /// lost now, not at the teardown deadline.
    pub fn member_down(&mut self, now: Instant, node: NodeId) {
        if self.in_plan(node) && self.fsm.outcome().is_some() {
            let reason = MembershipLoss::NodeDown.into();
            self.fsm.node_lost(now, node, reason, Component::Membership);
        }
    }

    /// A verdict of the pool gate: a required node lost, the pool grown, nodes offered
    /// while re-forming, readiness lost.
    pub fn gate_event(&mut self, now: Instant, event: GateEvent) {
        match event {
            GateEvent::RequiredNodeLost { node, reason } if self.in_plan(node) => {
                if reason == MembershipLoss::NodeDown {
                    self.fsm.node_lost(now, node, reason.into(), Component::Membership);
                } else {
                    let component = Component::Membership;
                    self.fsm.fault(now, reason.into(), component, Some(node), None, None);
                }
            }
            GateEvent::CapacityGrew { nodes } => self.grow(now, nodes),
            // Re-forming: what the gate offers while the faulted run still tears down.
            GateEvent::PoolReady { nodes } if self.reforming.is_some() => {
                self.offered = Some(nodes);
            }
            GateEvent::ReadinessLost { .. } => self.offered = None,
            _ => {}
        }
    }

    fn in_plan(&self, node: NodeId) -> bool {
        self.node_of.values().any(|n| *n == node)
    }

    /// `node` reported its stage of run `run` ready.
    pub fn stage_ready(
        &mut self,
        now: Instant,
        run: RunId,
        stage: StageIndex,
        node: NodeId,
    ) -> Result<(), RunInputError> {
        self.fsm.stage_ready(now, run, stage, node)
    }

    /// `node` reported a fault of its stage of run `run`. Returns whether it is the
    /// current run's (else it is only worth a log line).
    pub fn stage_fault(
        &mut self,
        now: Instant,
        run: RunId,
        stage: StageIndex,
        node: NodeId,
        (reason, component): (FaultReason, Component),
    ) -> bool {
        if run != self.plan.run_id || self.node_of.get(&stage) != Some(&node) {
            return false;
        }
        self.fsm.fault(now, reason, component, Some(node), Some(stage), None);
        true
    }

    /// `node` reported its stage of run `run` stopped.
    pub fn stage_stopped(
        &mut self,
        run: RunId,
        stage: StageIndex,
        node: NodeId,
    ) -> Result<(), RunInputError> {
        self.fsm.stage_stopped(run, stage, node)
    }

    /// A stage's node loaded its weights: the progress line that says how many have.
    pub fn weights_loaded(&mut self) -> String {
        self.loaded_weights += 1;
        let of = self.plan.stages.len();
        format!("weights loaded on {} of {of} stages", self.loaded_weights)
    }

    /// One of the two token endpoints is ready; with both, the run may pass its barrier.
    pub fn token_endpoint_ready(&mut self, now: Instant) {
        self.endpoints_ready += 1;
        if self.endpoints_ready == 2 {
            self.fsm.token_endpoints_ready(now);
        }
    }

    /// A token-out object arrived.
    pub fn token_received(
        &mut self,
        now: Instant,
        object: ObjectId,
        sequence: Sequence,
        payload: &[u8],
    ) {
        self.fsm.token_received(now, object, sequence, payload);
    }

    /// A fault seen by the driver (a token endpoint's ring or edge, `edge`).
    pub fn endpoint_fault(&mut self, now: Instant, reason: FaultReason, edge: Option<EdgeId>) {
        self.fsm.fault(now, reason, Component::TokenEndpoint, None, None, edge);
    }

    /// A token endpoint's edge failed (`component` detected it).
    pub fn edge_failed(
        &mut self,
        now: Instant,
        edge: EdgeId,
        reason: FaultReason,
        component: Component,
    ) {
        self.fsm.fault(now, reason, component, None, None, Some(edge));
    }

    /// The operator stopped the session (`how`), while a run is up.
    pub fn operator_stop(&mut self, now: Instant, how: OperatorStop) {
        self.fsm.operator_stop(now, how);
    }
}
