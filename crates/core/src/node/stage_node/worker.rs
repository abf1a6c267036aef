//! The worker controller's outputs and the worker's events: ring evidence to the plane,
//! step answers to the controller (late ones about an earlier run dropped), objects
//! counted and reported with the worker's own stamps.

use super::{NodeAction, StageNode};
use crate::events::Event;
use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::Component;
use crate::worker::protocol::{Command, Event as WorkerEvent};
use crate::workerctl::CtlOutput;

impl StageNode {
    /// Handles one output of the worker controller. Returns `false` when the worker is
    /// gone for good (failed, or stopped on request): the node cannot compute any more.
    pub fn worker_output(&mut self, out: CtlOutput) -> bool {
        let quiet = out.quiet_evidence();
        match out {
            CtlOutput::Routed(e) => self.worker_event(e, quiet),
            CtlOutput::RingFault { ring_id, reason, .. } => {
                self.installed.remove(&ring_id);
                self.plane.ring_fault(ring_id, reason, Component::WorkerCtl);
                if let Some(q) = quiet {
                    self.plane.local_quiet(q);
                }
            }
            CtlOutput::StopPump { ring_id } => {
                self.actions.push_back(NodeAction::StopRingPump(ring_id));
            }
            CtlOutput::Ready { generation, .. } => {
                self.generation = generation;
                self.device_objects = 0; // a new worker holds nothing
            }
            CtlOutput::Restarting { generation, .. } => {
                self.generation = generation;
                self.device_objects = 0;
                // The crashed worker took the stage's role with it.
                self.fault_component.get_or_insert(Component::WorkerCtl);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.worker_reaped();
                }
            }
            CtlOutput::Failed { reason } => {
                self.log(format!("worker failed for good: {reason}"));
                self.stage_fault(reason.into(), Component::WorkerCtl);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.worker_reaped();
                }
                return false;
            }
            CtlOutput::Stopped => return false,
            CtlOutput::Spawn { .. } | CtlOutput::ToWorker(_) | CtlOutput::Kill => {}
        }
        true
    }

    /// One worker event; `quiet` is the ring evidence the worker controller found in it.
    fn worker_event(&mut self, e: WorkerEvent, quiet: Option<WorkerQuiet>) {
        match e {
            WorkerEvent::RingReadable { ring_id } | WorkerEvent::RingWritable { ring_id } => {
                self.actions.push_back(NodeAction::WakeRing(ring_id));
            }
            WorkerEvent::RoleConfigured { taken_over, .. } => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.role_ready_keeping(taken_over);
                }
            }
            WorkerEvent::RoleFailed { reason, .. } => self.stage_fault(reason, Component::Weights),
            WorkerEvent::RingInstalled { ring_id } => {
                self.installed.insert(ring_id);
                self.plane.ring_installed(ring_id);
            }
            WorkerEvent::RingQuiesced { ring_id } => {
                self.installed.remove(&ring_id);
                if let Some(q) = quiet {
                    self.plane.local_quiet(q);
                }
            }
            WorkerEvent::RingFault { ring_id, reason } => {
                self.installed.remove(&ring_id);
                self.plane.ring_fault(ring_id, reason, Component::Worker);
                // The worker detaches a ring it reports faulted.
                if let Some(q) = quiet {
                    self.plane.local_quiet(q);
                }
            }
            WorkerEvent::ObjectLoaded { .. } | WorkerEvent::ObjectProduced { .. } => {
                self.object_event(e);
            }
            WorkerEvent::ObjectFailed { edge_id, reason, .. } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.last_fault = Some(reason.into());
                }
                self.stage_fault(reason.into(), Component::IngressParser);
            }
            WorkerEvent::StepCompleted { .. }
            | WorkerEvent::StepWithdrawn { .. }
            | WorkerEvent::StepFailed { .. } => self.step_answer(e),
            WorkerEvent::WorkerFatal { reason } => self.log(format!("worker fatal: {reason}")),
            WorkerEvent::DeviceObjects { live } => self.device_objects = live,
            WorkerEvent::RoleReleased { .. } => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.role_released();
                }
            }
            WorkerEvent::WorkerReady { .. }
            | WorkerEvent::WorkerStopped { .. }
            | WorkerEvent::DeviceObjectReleased { .. }
            | WorkerEvent::ReleaseFailed { .. } => {}
        }
    }

    /// The worker's answer about a step: completed, withdrawn or failed. An answer about a
    /// step of an earlier provisioning (answered after its stage stopped) is dropped.
    fn step_answer(&mut self, e: WorkerEvent) {
        let step_id = match e {
            WorkerEvent::StepCompleted { step_id, .. }
            | WorkerEvent::StepWithdrawn { step_id, .. }
            | WorkerEvent::StepFailed { step_id, .. } => step_id,
            _ => return,
        };
        if self.is_late(step_id) {
            self.log(format!("ignored a late answer about step {step_id:?}"));
            return;
        }
        match e {
            WorkerEvent::StepCompleted { .. } => {
                if let (Some((run_id, stage_index)), Some(sequence)) =
                    (self.ids(), self.steps.remove(&step_id))
                {
                    self.emit(Event::StepCompleted {
                        run_id,
                        node_id: self.node_id,
                        stage_index,
                        step_id,
                        sequence,
                        worker_generation: self.generation,
                    });
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.step_completed(step_id);
                }
            }
            WorkerEvent::StepWithdrawn { .. } => {
                self.steps.remove(&step_id);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.step_withdrawn(step_id);
                }
            }
            WorkerEvent::StepFailed { reason, .. } => {
                self.steps.remove(&step_id);
                self.stage_fault(reason.into(), Component::Worker);
            }
            _ => {}
        }
    }

    /// An object the worker loaded or produced: reported with the worker's own stamp, and
    /// a loaded one handed to the controller.
    fn object_event(&mut self, e: WorkerEvent) {
        let node_id = self.node_id;
        match e {
            WorkerEvent::ObjectLoaded {
                ring_id,
                edge_id,
                object_id,
                sequence,
                extent,
                handle,
                taken_by,
                at_us,
                ..
            } => {
                if let Some((run_id, stage_index)) = self.ids() {
                    let worker_generation = handle.generation;
                    let loaded = Event::ObjectLoaded {
                        run_id,
                        node_id,
                        stage_index,
                        edge_id,
                        ring_id,
                        object_id,
                        sequence,
                        extent,
                        worker_generation,
                    };
                    self.emit_at(loaded, at_us);
                    if let Some(step_id) = taken_by {
                        // A posted step took the object: it started as the load completed.
                        let started = Event::ExecuteStepStarted {
                            run_id,
                            node_id,
                            stage_index,
                            step_id,
                            sequence,
                            worker_generation,
                        };
                        self.emit_at(started, at_us);
                    }
                }
                self.count(edge_id, extent);
                match self.controller.as_mut() {
                    Some(ctl) => {
                        ctl.object_loaded(edge_id, object_id, sequence, extent, handle, taken_by)
                    }
                    None if taken_by.is_none() => {
                        let release = Command::ReleaseDeviceObject { handle };
                        self.actions.push_back(NodeAction::WorkerNotify(release));
                    }
                    None => {}
                }
            }
            WorkerEvent::ObjectProduced {
                ring_id,
                edge_id,
                object_id,
                sequence,
                extent,
                at_us,
                ..
            } => {
                if let Some((run_id, stage_index)) = self.ids() {
                    let produced = Event::ObjectProduced {
                        run_id,
                        node_id,
                        stage_index,
                        edge_id,
                        ring_id,
                        object_id,
                        sequence,
                        extent,
                    };
                    self.emit_at(produced, at_us);
                }
                self.count(edge_id, extent);
            }
            _ => {}
        }
    }
}
