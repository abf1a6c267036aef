//! The stage controller's commands (translated into worker commands and edge
//! provisioning) and events, and the edge plane's events.

use super::{EdgeRecord, EdgeState, NodeAction, STAGE_ROLE, StageNode};
use crate::control::ControlMessage;
use crate::edge::establisher::{EdgeEnd, EdgeProvision};
use crate::edge::plane::PlaneEvent;
use crate::events::{Direction, Event};
use crate::stage::controller::{StageCommand, StageEvent};
use crate::wire::reason::{Component, StageFault, StepFailure, WorkerFatal};
use crate::wire::{EdgeId, Peer, PortId, ProvisionStage};
use crate::worker::protocol::{Command, InputBinding, OutputBinding, PostedOutput};

impl StageNode {
    pub(super) fn stage_command(&mut self, cmd: StageCommand) {
        let Some(p) = self.provisioning().cloned() else { return };
        match cmd {
            StageCommand::ConfigureRole(p) => {
                self.actions.push_back(NodeAction::FetchWeights(p));
            }
            StageCommand::LoadRole(config) => {
                let command = Command::ConfigureRole { role_id: STAGE_ROLE, config };
                let lost = WorkerFatal::Exited.into();
                self.actions.push_back(NodeAction::WorkerSend { command, lost });
            }
            StageCommand::ProvisionRx(edge_id) => {
                let producer = p.inbound.producer.clone();
                let end = EdgeEnd::Recv { producer: producer.clone() };
                let (object, ring) = (p.inbound.object, p.inbound.ring);
                let prov = EdgeProvision { run_id: p.run_id, edge_id, end, object, ring };
                self.provision_edge(&p, prov, producer);
            }
            StageCommand::ProvisionTx(edge_id) => {
                let consumer = p.outbound.consumer.clone();
                let end = EdgeEnd::Send { consumer: consumer.clone() };
                let prov = EdgeProvision {
                    run_id: p.run_id,
                    edge_id,
                    end,
                    object: p.outbound.object,
                    ring: p.outbound.ring,
                };
                self.provision_edge(&p, prov, consumer);
            }
            StageCommand::ExecuteStep { .. } => self.execute_step(cmd, &p),
            StageCommand::PostStep { .. } => self.post_step(cmd, &p),
            StageCommand::WithdrawStep(step_id) => {
                self.actions.push_back(NodeAction::WorkerNotify(Command::WithdrawStep { step_id }));
            }
            StageCommand::StopEdge(edge) => {
                if let Some(r) = self.records.get_mut(&edge)
                    && r.state != EdgeState::Failed
                {
                    r.state = EdgeState::Stopping;
                }
                self.plane.stop_edge(edge);
                // An edge already torn down (after a fault) reports stopped at once.
                if self.plane.is_settled(edge)
                    && let Some(ctl) = self.controller.as_mut()
                {
                    ctl.edge_stopped(edge);
                }
            }
            StageCommand::ResetRole { park } => {
                let release = Command::ReleaseRole { role_id: STAGE_ROLE, park };
                self.actions.push_back(NodeAction::WorkerNotify(release));
            }
            StageCommand::ReleaseObject(handle) => {
                let release = Command::ReleaseDeviceObject { handle };
                self.actions.push_back(NodeAction::WorkerNotify(release));
            }
        }
    }

    /// A step on a loaded input, executed now.
    fn execute_step(&mut self, cmd: StageCommand, p: &ProvisionStage) {
        let StageCommand::ExecuteStep {
            step_id,
            input,
            input_object,
            sequence,
            output_extent,
            output_object,
            output_sequence,
            output_flags,
        } = cmd
        else {
            return;
        };
        let Some(&out_ring) = self.rings.get(&p.outbound.edge_id) else {
            self.stage_fault(StageFault::NotProvisioned.into(), Component::StageController);
            return;
        };
        let command = Command::ExecuteStep {
            role_id: STAGE_ROLE,
            step_id,
            inputs: vec![InputBinding {
                port: PortId(0),
                object_id: input_object,
                sequence,
                handle: input,
            }],
            outputs: vec![OutputBinding {
                port: PortId(0),
                ring_id: out_ring,
                object_id: output_object,
                sequence: output_sequence,
                extent: output_extent,
                flags: output_flags,
            }],
            release_inputs_after: true,
        };
        self.emit(Event::ExecuteStepStarted {
            run_id: p.run_id,
            node_id: self.node_id,
            stage_index: p.stage_index,
            step_id,
            sequence,
            worker_generation: input.generation,
        });
        self.steps.insert(step_id, sequence);
        let lost = StepFailure::StaleHandle.into();
        self.actions.push_back(NodeAction::WorkerSend { command, lost });
    }

    /// A step posted ahead of its input: the worker runs it when the object of exactly
    /// this ring, edge and sequence is loaded.
    fn post_step(&mut self, cmd: StageCommand, p: &ProvisionStage) {
        let StageCommand::PostStep {
            step_id,
            sequence,
            output_extent,
            output_object,
            output_sequence,
            output_flags,
        } = cmd
        else {
            return;
        };
        let in_edge = p.inbound.edge_id;
        let (Some(&in_ring), Some(&out_ring)) =
            (self.rings.get(&in_edge), self.rings.get(&p.outbound.edge_id))
        else {
            self.stage_fault(StageFault::NotProvisioned.into(), Component::StageController);
            return;
        };
        let post = Command::PostStep {
            role_id: STAGE_ROLE,
            step_id,
            ring_id: in_ring,
            edge_id: in_edge,
            port: PortId(0),
            sequence,
            output: PostedOutput {
                port: PortId(0),
                ring_id: out_ring,
                object_id: output_object,
                sequence: output_sequence,
                extent: output_extent,
                flags: output_flags,
            },
        };
        self.steps.insert(step_id, sequence);
        self.actions.push_back(NodeAction::WorkerNotify(post));
    }

    fn provision_edge(&mut self, p: &ProvisionStage, prov: EdgeProvision, peer: Peer) {
        let direction = match prov.end {
            EdgeEnd::Send { .. } => Direction::Send,
            EdgeEnd::Recv { .. } => Direction::Recv,
        };
        let edge_id = prov.edge_id;
        self.records.insert(
            edge_id,
            EdgeRecord {
                run_id: p.run_id,
                edge_id,
                direction,
                peer: peer.node_id,
                peer_endpoint: peer.endpoint_id,
                state: EdgeState::Provisioning,
                ring_id: None,
                bytes: 0,
                objects: 0,
                stalls: 0,
                pump_bytes: 0,
                last_fault: None,
            },
        );
        let node_id = self.node_id;
        self.emit(Event::EdgeProvisionStarted { run_id: p.run_id, node_id, edge_id, direction });
        if self.plane.provision(prov).is_err() {
            self.stage_fault(StageFault::AlreadyProvisioned.into(), Component::EdgeEstablisher);
        }
    }

    pub(super) fn stage_event(&mut self, ev: StageEvent) {
        let node_id = self.node_id;
        match ev {
            StageEvent::ProvisionStarted { run_id, stage_index } => {
                let by = crate::events::Reporter::Node;
                self.emit(Event::StageProvisionStarted { run_id, node_id, stage_index, by });
            }
            StageEvent::WeightsLoaded { run_id, stage_index, layers, bytes, kept_caches } => {
                let ev = Event::WeightsLoaded {
                    run_id,
                    node_id,
                    stage_index,
                    layers,
                    bytes,
                    kept_caches,
                };
                self.emit(ev);
            }
            StageEvent::StageReady { run_id, stage_index } => {
                self.send(ControlMessage::StageReady { run_id, stage_index });
            }
            StageEvent::StageFault { run_id, stage_index, reason } => {
                let component = self.fault_component.unwrap_or(Component::StageController);
                self.log(format!(
                    "stage {stage_index} of run {run_id} faulted: {reason} ({component})"
                ));
                self.send(ControlMessage::StageFault { run_id, stage_index, reason, component });
            }
            StageEvent::StageStopped { run_id, stage_index } => {
                // Every edge of the plan, provisioned here or not: a stream that reached
                // this node for one of them is this run's and ends with it.
                let mut edges: Vec<EdgeId> = self.records.keys().copied().collect();
                if let Some(p) = self.provisioning() {
                    for e in [p.inbound.edge_id, p.outbound.edge_id] {
                        if !edges.contains(&e) {
                            edges.push(e);
                        }
                    }
                }
                self.actions.push_back(NodeAction::ForgetEdges(edges));
                for r in self.records.values_mut() {
                    if r.state != EdgeState::Failed {
                        r.state = EdgeState::Stopped;
                    }
                }
                self.rings.clear();
                self.send(ControlMessage::StageStopped { run_id, stage_index });
            }
        }
    }

    /// An edge end became ready, failed or stopped.
    pub(super) fn plane_event(&mut self, ev: PlaneEvent) {
        let node_id = self.node_id;
        match ev {
            PlaneEvent::EdgeReady { edge_id, ring_id, direction } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.state = EdgeState::Ready;
                    r.ring_id = Some(ring_id);
                }
                self.rings.insert(edge_id, ring_id);
                if let Some((run_id, _)) = self.ids() {
                    self.emit(Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction });
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.edge_ready(edge_id);
                }
            }
            PlaneEvent::EdgeFailed { edge_id, reason, component } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.state = EdgeState::Failed;
                    r.last_fault.get_or_insert(reason);
                }
                self.rings.remove(&edge_id);
                self.stage_fault(reason, component);
            }
            PlaneEvent::EdgeStopped { edge_id } => {
                if let Some(r) = self.records.get_mut(&edge_id)
                    && r.state != EdgeState::Failed
                {
                    r.state = EdgeState::Stopped;
                }
                self.rings.remove(&edge_id);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.edge_stopped(edge_id);
                }
            }
        }
    }
}
