//! The stage controller's commands and events, and the edge plane's events.

use super::{EdgeRecord, STAGE_ROLE, StageHost};
use crate::control::ControlMessage;
use crate::edge::establisher::{EdgeEnd, EdgeProvision};
use crate::edge::plane::PlaneEvent;
use crate::events::{Direction, Event};
use crate::stage::controller::{StageCommand, StageEvent};
use crate::wire::reason::{Component, StageFault};
use crate::wire::{Peer, PortId, ProvisionStage};
use crate::worker::protocol::{Command, InputBinding, OutputBinding, PostedOutput};

impl StageHost {
    pub(super) async fn stage_command(&mut self, cmd: StageCommand) {
        // Only ids here: this runs once per step on the hot path.
        let Some((run_id, stage_index, out_edge)) = self
            .controller
            .as_ref()
            .and_then(|c| c.provisioning())
            .map(|p| (p.run_id, p.stage_index, p.outbound.edge_id))
        else {
            return;
        };
        let provisioning = |h: &Self| h.controller.as_ref().and_then(|c| c.provisioning()).cloned();
        match cmd {
            StageCommand::ConfigureRole(p) => self.fetch_weights(&p),
            StageCommand::LoadRole(config) => {
                let load = Command::ConfigureRole { role_id: STAGE_ROLE, config };
                if let Err(e) = self.worker.send(load).await {
                    eprintln!("swactor node: cannot configure the worker: {e}");
                    let reason = crate::wire::reason::WorkerFatal::Exited.into();
                    self.stage_fault(reason, Component::WorkerCtl);
                }
            }
            StageCommand::ProvisionRx(edge_id) => {
                let Some(p) = provisioning(self) else { return };
                self.provision_edge(
                    &p,
                    EdgeProvision {
                        edge_id,
                        end: EdgeEnd::Recv { producer: p.inbound.producer.clone() },
                        object: p.inbound.object,
                        ring: p.inbound.ring,
                    },
                    p.inbound.producer.clone(),
                );
            }
            StageCommand::ProvisionTx(edge_id) => {
                let Some(p) = provisioning(self) else { return };
                self.provision_edge(
                    &p,
                    EdgeProvision {
                        edge_id,
                        end: EdgeEnd::Send { consumer: p.outbound.consumer.clone() },
                        object: p.outbound.object,
                        ring: p.outbound.ring,
                    },
                    p.outbound.consumer.clone(),
                );
            }
            StageCommand::ExecuteStep { .. } | StageCommand::PostStep { .. } => {
                self.step_command(cmd, run_id, stage_index, out_edge).await;
            }
            StageCommand::WithdrawStep(step_id) => {
                self.notifier.notify(Command::WithdrawStep { step_id });
            }
            StageCommand::StopEdge(edge) => {
                if let Some(r) = self.records.get_mut(&edge)
                    && r.state != "failed"
                {
                    r.state = "stopping";
                }
                self.plane.stop_edge(edge);
                // An edge already torn down (after a fault) reports stopped at once.
                if self.plane.is_settled(edge)
                    && let Some(ctl) = self.controller.as_mut()
                {
                    ctl.edge_stopped(edge);
                }
            }
            StageCommand::ResetRole => {
                self.notifier.notify(Command::ReleaseRole { role_id: STAGE_ROLE });
            }
            StageCommand::ReleaseObject(handle) => {
                self.notifier.notify(Command::ReleaseDeviceObject { handle });
            }
        }
    }

    /// A step decided by the controller: executed now on a loaded input, or posted ahead of
    /// its input.
    async fn step_command(
        &mut self,
        cmd: StageCommand,
        run_id: crate::wire::RunId,
        stage_index: crate::wire::StageIndex,
        out_edge: crate::wire::EdgeId,
    ) {
        let node_id = self.node_id;
        match cmd {
            StageCommand::ExecuteStep {
                step_id,
                input,
                input_object,
                sequence,
                output_extent,
                output_object,
                output_sequence,
                output_flags,
            } => {
                let Some(out_ring) = self.executor.ring_of(out_edge) else {
                    self.stage_fault(StageFault::NotProvisioned.into(), Component::StageController);
                    return;
                };
                let step = Command::ExecuteStep {
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
                    run_id,
                    node_id,
                    stage_index,
                    step_id,
                    sequence,
                    worker_generation: input.generation,
                });
                self.steps.insert(step_id, sequence);
                if let Err(e) = self.worker.send(step).await {
                    eprintln!("swactor node: step refused: {e}");
                    self.stage_fault(
                        crate::wire::reason::StepFailure::StaleHandle.into(),
                        Component::WorkerCtl,
                    );
                }
            }
            StageCommand::PostStep {
                step_id,
                sequence,
                output_extent,
                output_object,
                output_sequence,
                output_flags,
            } => {
                let in_edge = self.controller.as_ref().and_then(|c| c.provisioning());
                let in_edge = in_edge.map(|p| p.inbound.edge_id);
                let rings = in_edge.and_then(|e| Some((e, self.executor.ring_of(e)?)));
                let (Some((in_edge, in_ring)), Some(out_ring)) =
                    (rings, self.executor.ring_of(out_edge))
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
                self.notifier.notify(post);
            }
            _ => {}
        }
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
                peer_endpoint: peer.endpoint_id.clone(),
                state: "provisioning",
                ring_id: None,
                bytes: 0,
                objects: 0,
                stalls: 0,
                pump_bytes: 0,
                last_fault: None,
            },
        );
        self.emit(Event::EdgeProvisionStarted {
            run_id: p.run_id,
            node_id: self.node_id,
            edge_id,
            direction,
        });
        if self.plane.provision(prov).is_err() {
            self.stage_fault(StageFault::AlreadyProvisioned.into(), Component::EdgeEstablisher);
        }
    }

    pub(super) fn stage_event(&mut self, ev: StageEvent) {
        match ev {
            StageEvent::ProvisionStarted { run_id, stage_index } => {
                self.emit(Event::StageProvisionStarted {
                    run_id,
                    node_id: self.node_id,
                    stage_index,
                });
            }
            StageEvent::WeightsLoaded { run_id, stage_index, layers, bytes } => {
                let node_id = self.node_id;
                self.emit(Event::WeightsLoaded { run_id, node_id, stage_index, layers, bytes });
            }
            StageEvent::StageReady { run_id, stage_index } => {
                self.send(ControlMessage::StageReady { run_id, stage_index });
            }
            StageEvent::StageFault { run_id, stage_index, reason } => {
                let component = self.fault_component.unwrap_or(Component::StageController);
                eprintln!(
                    "swactor node: stage {stage_index} of run {run_id} faulted: {reason} ({component})"
                );
                self.send(ControlMessage::StageFault { run_id, stage_index, reason, component });
            }
            StageEvent::StageStopped { run_id, stage_index } => {
                self.executor.forget_routes(self.records.keys().copied());
                self.executor.forget_connections();
                for r in self.records.values_mut() {
                    if r.state != "failed" {
                        r.state = "stopped";
                    }
                }
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
                    r.state = "ready";
                    r.ring_id = Some(ring_id);
                }
                if let Some((run_id, _)) = self.ids() {
                    self.emit(Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction });
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.edge_ready(edge_id);
                }
            }
            PlaneEvent::EdgeFailed { edge_id, reason, component } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.state = "failed";
                    r.last_fault.get_or_insert(reason);
                }
                self.stage_fault(reason, component);
            }
            PlaneEvent::EdgeStopped { edge_id } => {
                if let Some(r) = self.records.get_mut(&edge_id)
                    && r.state != "failed"
                {
                    r.state = "stopped";
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.edge_stopped(edge_id);
                }
            }
        }
    }
}
