//! The worker: its controller's outputs and events, and the worker as the local user of the
//! stage's rings (the edge executor attaches rings through it).

use super::StageHost;
use crate::edge::executor::{AttachFault, Hint, Ring, RingUser};
use crate::events::{Direction, Event};
use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::{Component, RingFault};
use crate::wire::{EdgeId, ObjectSpec, PortId, RingId, RingLayout};
use crate::worker::protocol::{Command, Event as WorkerEvent, UninstallReason};
use crate::workerctl::{CtlOutput, WorkerDriver, WorkerNotifier};

/// The worker as the rings' local user: rings are installed by command (it answers
/// `RingInstalled`), uninstalled by command (it answers `RingQuiesced`), and woken with
/// `RingReadable` / `RingWritable`.
pub(super) struct WorkerUser<'a> {
    pub(super) worker: &'a mut WorkerDriver,
    pub(super) notifier: &'a WorkerNotifier,
}

impl RingUser for WorkerUser<'_> {
    async fn attach(
        &mut self,
        edge_id: EdgeId,
        direction: Direction,
        layout: RingLayout,
        object: ObjectSpec,
        _ring: Ring,
    ) -> Result<bool, AttachFault> {
        let install = Command::InstallRing {
            ring_id: layout.ring_id,
            edge_id,
            port_id: PortId(0),
            direction,
            layout,
            object_spec: object,
        };
        match self.worker.send(install).await {
            Ok(()) => Ok(false),
            Err(_) => Err((RingFault::WorkerCrashed, Component::WorkerCtl)),
        }
    }

    fn detach(&mut self, ring_id: RingId) -> Option<WorkerQuiet> {
        self.worker.pump_wakes().lock().unwrap_or_else(|e| e.into_inner()).remove(&ring_id);
        self.notifier.notify(Command::UninstallRing { ring_id, reason: UninstallReason::Stop });
        None
    }

    fn drained_hint(&self, ring_id: RingId) -> Hint {
        let notifier = self.notifier.clone();
        Box::new(move || notifier.wake(Command::RingWritable { ring_id }))
    }

    fn filled_hint(&self, ring_id: RingId) -> Hint {
        let notifier = self.notifier.clone();
        Box::new(move || notifier.wake(Command::RingReadable { ring_id }))
    }

    fn pump_started(&mut self, ring_id: RingId, wake: std::sync::Arc<tokio::sync::Notify>) {
        self.worker.pump_wakes().lock().unwrap_or_else(|e| e.into_inner()).insert(ring_id, wake);
    }
}

impl StageHost {
    /// Handles one output of the worker controller. Returns `false` when the worker failed
    /// for good (the node cannot compute any more).
    pub async fn worker_output(&mut self, out: CtlOutput) -> bool {
        let mut alive = true;
        let quiet = out.quiet_evidence();
        match out {
            CtlOutput::Routed(e) => self.worker_event(e, quiet).await,
            CtlOutput::RingFault { ring_id, reason, .. } => {
                self.installed.remove(&ring_id);
                self.plane.ring_fault(ring_id, reason, Component::WorkerCtl);
                if let Some(q) = quiet {
                    self.plane.local_quiet(q);
                }
            }
            CtlOutput::StopPump { ring_id } => self.executor.stop_ring_pump(ring_id),
            CtlOutput::Ready { generation, .. } => {
                self.generation = generation;
                self.device_objects = 0; // a new worker holds nothing
            }
            CtlOutput::Restarting { generation } => {
                self.generation = generation;
                self.device_objects = 0;
                // The crashed worker took the stage's role with it.
                self.fault_component.get_or_insert(Component::WorkerCtl);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.worker_reaped();
                }
            }
            CtlOutput::Failed { reason } => {
                eprintln!("swactor node: worker failed for good: {reason}");
                self.stage_fault(reason.into(), Component::WorkerCtl);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.worker_reaped();
                }
                alive = false;
            }
            CtlOutput::Stopped => alive = false,
            CtlOutput::Spawn { .. } | CtlOutput::ToWorker(_) | CtlOutput::Kill => {}
        }
        self.drain().await;
        alive
    }

    /// One worker event; `quiet` is the ring evidence the worker controller found in it.
    pub(super) async fn worker_event(&mut self, e: WorkerEvent, quiet: Option<WorkerQuiet>) {
        let node_id = self.node_id;
        match e {
            WorkerEvent::RingReadable { ring_id } | WorkerEvent::RingWritable { ring_id } => {
                self.executor.wake_ring(ring_id);
            }
            WorkerEvent::RoleConfigured { .. } => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.role_ready();
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
            WorkerEvent::StepCompleted { step_id, .. }
            | WorkerEvent::StepWithdrawn { step_id, .. }
            | WorkerEvent::StepFailed { step_id, .. }
                if step_id.0 >> 32 != self.step_base >> 32 =>
            {
                // About a step of an earlier run (answered after its stage stopped).
                eprintln!("swactor node: ignored a late answer about step {step_id:?}");
            }
            WorkerEvent::StepCompleted { step_id, .. } => {
                if let (Some((run_id, stage_index)), Some(sequence)) =
                    (self.ids(), self.steps.remove(&step_id))
                {
                    self.emit(Event::StepCompleted {
                        run_id,
                        node_id,
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
            WorkerEvent::StepWithdrawn { step_id, .. } => {
                self.steps.remove(&step_id);
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.step_withdrawn(step_id);
                }
            }
            WorkerEvent::StepFailed { step_id, reason, .. } => {
                self.steps.remove(&step_id);
                self.stage_fault(reason.into(), Component::Worker);
            }
            WorkerEvent::WorkerFatal { reason } => {
                eprintln!("swactor node: worker fatal: {reason}");
            }
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
                    let loaded = Event::ObjectLoaded {
                        run_id,
                        node_id,
                        stage_index,
                        edge_id,
                        ring_id,
                        object_id,
                        sequence,
                        extent,
                        worker_generation: handle.generation,
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
                            worker_generation: handle.generation,
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
                        self.notifier.notify(Command::ReleaseDeviceObject { handle })
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
