//! The worker's steps: one active at a time, the rest pending in order; a step's inputs
//! are read from device memory, its role computes, and its outputs are written into their
//! egress rings as space allows.

use super::{ActiveStep, Output, PendingStep, Slot, Worker};
use crate::wire::reason::StepFailure;
use crate::worker::device::DeviceBridge;
use crate::worker::egress::Progress;
use crate::worker::protocol::Event;

impl Worker {
    pub(super) fn start_next_step(&mut self) {
        while self.active.is_none() {
            let Some(step) = self.pending.pop_front() else { return };
            match self.begin(&step) {
                Ok(active) => {
                    self.active = Some(active);
                    self.drive_step();
                }
                Err(reason) => self.step_failed(
                    step.role_id,
                    step.step_id,
                    &step.inputs,
                    step.release_inputs_after,
                    reason,
                ),
            }
        }
    }

    /// Validates a step, computes its outputs into device objects and starts the egress.
    fn begin(&mut self, step: &PendingStep) -> Result<ActiveStep, StepFailure> {
        let role = self.roles.get_mut(&step.role_id).ok_or(StepFailure::RoleNotConfigured)?;
        let ready = self.ready.as_mut().ok_or(StepFailure::RoleNotConfigured)?;
        let generation = ready.bridge.generation();
        for input in &step.inputs {
            if input.handle.generation != generation {
                return Err(StepFailure::StaleHandle);
            }
            ready.bridge.size(input.handle).map_err(|_| StepFailure::MissingInput)?;
        }
        for o in &step.outputs {
            match self.rings.get(&o.ring_id) {
                Some(Slot::Egress { egress, .. }) if !egress.is_busy() => {}
                _ => return Err(StepFailure::OutputRingFault),
            }
        }
        let sequence = step
            .outputs
            .first()
            .map(|o| o.sequence)
            .or(step.inputs.first().map(|i| i.sequence))
            .unwrap_or_default();
        let mut outputs = Vec::with_capacity(step.outputs.len());
        for binding in &step.outputs {
            let computed = match step.inputs.first() {
                Some(input) => match ready.bridge.host_copy(input.handle) {
                    Ok(bytes) => role.compute(sequence, Some(&bytes), binding.extent, &self.abort),
                    Err(_) => Err(StepFailure::MissingInput),
                },
                None => role.compute(sequence, None, binding.extent, &self.abort),
            };
            let bytes = match computed {
                Ok(b) => b,
                Err(e) => {
                    free_outputs(ready.bridge.as_mut(), &outputs);
                    return Err(e);
                }
            };
            let handle = match ready.bridge.alloc(binding.extent) {
                Ok(h) => h,
                Err(_) => {
                    free_outputs(ready.bridge.as_mut(), &outputs);
                    return Err(StepFailure::ComputeFailed);
                }
            };
            outputs.push(Output { binding: *binding, handle, done: false });
            if ready.bridge.host_to_device(handle, 0, &bytes).is_err() {
                free_outputs(ready.bridge.as_mut(), &outputs);
                return Err(StepFailure::ComputeFailed);
            }
        }
        for o in &outputs {
            if let Some(Slot::Egress { egress, .. }) = self.rings.get_mut(&o.binding.ring_id)
                && let Err(e) = egress.start(o.binding, o.handle)
            {
                for o in &outputs {
                    if let Some(Slot::Egress { egress, .. }) =
                        self.rings.get_mut(&o.binding.ring_id)
                    {
                        egress.abandon();
                    }
                }
                free_outputs(ready.bridge.as_mut(), &outputs);
                return Err(e);
            }
        }
        Ok(ActiveStep {
            role_id: step.role_id,
            step_id: step.step_id,
            inputs: step.inputs.clone(),
            outputs,
            release_inputs_after: step.release_inputs_after,
        })
    }

    /// Writes what fits of the active step's outputs; completes the step when all are
    /// committed.
    pub(super) fn drive_step(&mut self) {
        let Some(ready) = self.ready.as_mut() else { return };
        let Some(active) = self.active.as_mut() else { return };
        let mut failure = None;
        for o in active.outputs.iter_mut().filter(|o| !o.done) {
            let Some(Slot::Egress { producer, egress }) = self.rings.get_mut(&o.binding.ring_id)
            else {
                failure = Some(StepFailure::OutputRingFault);
                break;
            };
            match egress.poll(producer, ready.bridge.as_mut(), &mut self.events) {
                Progress::Done => o.done = true,
                Progress::Blocked | Progress::Idle => {}
                Progress::Failed(reason) => {
                    failure = Some(reason);
                    break;
                }
            }
        }
        stamp_produced(&mut self.events);
        if let Some(reason) = failure {
            self.fail_active(reason);
            return;
        }
        if active.outputs.iter().all(|o| o.done) {
            let Some(done) = self.active.take() else { return };
            free_outputs(ready.bridge.as_mut(), &done.outputs);
            if done.release_inputs_after {
                self.release_inputs(&done.inputs);
            }
            self.events.push(Event::StepCompleted { role_id: done.role_id, step_id: done.step_id });
            self.start_next_step();
        }
    }

    pub(super) fn fail_active(&mut self, reason: StepFailure) {
        let Some(active) = self.active.take() else { return };
        for o in &active.outputs {
            if let Some(Slot::Egress { egress, .. }) = self.rings.get_mut(&o.binding.ring_id) {
                egress.abandon();
            }
        }
        if let Some(ready) = self.ready.as_mut() {
            free_outputs(ready.bridge.as_mut(), &active.outputs);
        }
        self.step_failed(
            active.role_id,
            active.step_id,
            &active.inputs,
            active.release_inputs_after,
            reason,
        );
        self.start_next_step();
    }

    /// Fails every step that has not started with `aborted`.
    pub(super) fn abort_pending(&mut self) {
        while let Some(p) = self.pending.pop_front() {
            self.step_failed(
                p.role_id,
                p.step_id,
                &p.inputs,
                p.release_inputs_after,
                StepFailure::Aborted,
            );
        }
    }

    pub(super) fn abort_active(&mut self) {
        self.fail_active(StepFailure::Aborted);
        self.abort_pending();
    }
}

/// Stamps the objects just produced with the time their last byte was committed.
fn stamp_produced(events: &mut [Event]) {
    for e in events.iter_mut().rev() {
        match e {
            Event::ObjectProduced { at_us: at @ None, .. } => {
                *at = Some(crate::clock::monotonic_us());
            }
            Event::ObjectProduced { .. } => break,
            _ => {}
        }
    }
}

pub(super) fn free_outputs(bridge: &mut dyn DeviceBridge, outputs: &[Output]) {
    for o in outputs {
        let _ = bridge.free(o.handle);
    }
}
