//! StageController (DESIGN.md 4.5): one per provisioned stage, control path only.
//!
//! `Unprovisioned -> Preparing -> Ready <-> Executing -> Stopping -> Stopped`, plus
//! `Faulted` (rejects run work until `StopRun`).
//!
//! - Provisioning is accepted only from the configured orchestrator, for a consistent
//!   stage (index below the count, a non-empty range inside the model, embedding exactly on
//!   stage 0 and head exactly on the last, two distinct edges); anything else is refused
//!   with `stage.provision_rejected`, and a second provisioning of an active stage with
//!   `stage.already_provisioned`.
//! - Preparation runs in parallel: resolve the weights then have the worker load them,
//!   establish the inbound and outbound edges. `WeightsLoaded` comes only once the worker
//!   reported the role configured (a load failure is a weights fault and no
//!   `WeightsLoaded`); `StageReady` only once the role is configured and both edges are
//!   ready.
//! - Ready: an inbound object with the next expected sequence (0 is the prefill, then +1)
//!   is executed as exactly one step whose output carries the same sequence, object id
//!   `sequence + 1` and the `PREFILL` flag on sequence 0 — decided here, not by the host
//!   (a test-only [`StageController::mislabel`] labels one output with the next sequence,
//!   as a broken stage would); one active step at a time (an object arriving during a step
//!   waits). A duplicate, skipped or regressed sequence faults the stage with
//!   `stage.sequence_violation`.
//! - The step is decided ahead: with nothing waiting, the controller posts the step for
//!   the next expected sequence (`PostStep`) before its object exists, and the worker runs
//!   it as soon as that object is loaded (it reports the load with the step that took it).
//!   An object that arrives untaken (the post came too late) is executed with an
//!   `ExecuteStep` as before. A fault or a stop withdraws the post; a post the worker
//!   withdrew or refused on its own faults the stage (`step.post_rejected`).
//! - Role failures, step failures, object failures and edge faults fault the stage with
//!   their own reasons; the first reason is kept.
//! - `StopRun` (from the orchestrator, for this run): stop both edges and release the role;
//!   `StageStopped` only once both edges report stopped (their leases released with
//!   proofs) and the worker confirmed the role released (or its process was reaped).

use std::collections::VecDeque;

use crate::wire::reason::{FaultReason, StageFault, WorkerFatal};
use crate::wire::{
    EdgeId, NodeId, ObjectFlags, ObjectId, ProvisionStage, RunId, Sequence, StageIndex, StepId,
};
use crate::worker::protocol::{DeviceHandle, OutputExtent, RoleConfig, RunRef};

/// What the controller asks of the node's other components.
#[derive(Debug, Clone, PartialEq)]
pub enum StageCommand {
    /// Make the stage's weights available on this host and check them (download, parse,
    /// block count); answered by [`StageController::weights_ready`] or a weights fault.
    ConfigureRole(Box<ProvisionStage>),
    /// Configure the worker role from the resolved weights (the worker reads them,
    /// validates the range and binds them); answered by the worker's `RoleConfigured`
    /// ([`StageController::role_ready`]) or `RoleFailed` (a weights fault).
    LoadRole(RoleConfig),
    /// Establish the receive edge.
    ProvisionRx(EdgeId),
    /// Establish the send edge.
    ProvisionTx(EdgeId),
    /// Run one step.
    ExecuteStep {
        /// The step.
        step_id: StepId,
        /// The loaded input.
        input: DeviceHandle,
        /// The input object.
        input_object: ObjectId,
        /// The input's sequence.
        sequence: Sequence,
        /// Output payload bytes.
        output_extent: u64,
        /// The output object's id.
        output_object: ObjectId,
        /// The output object's sequence (the input's, unless mislabelled for a test).
        output_sequence: Sequence,
        /// The output object's flags (`PREFILL` on sequence 0).
        output_flags: ObjectFlags,
    },
    /// Post the step for the next expected sequence ahead of its object: the worker runs it
    /// on exactly that object of the inbound edge, as soon as it is loaded.
    PostStep {
        /// The step.
        step_id: StepId,
        /// The sequence of the input it waits for.
        sequence: Sequence,
        /// How the output's payload bytes follow from the input's.
        output_extent: OutputExtent,
        /// The output object's id.
        output_object: ObjectId,
        /// The output object's sequence (the input's, unless mislabelled for a test).
        output_sequence: Sequence,
        /// The output object's flags (`PREFILL` on sequence 0).
        output_flags: ObjectFlags,
    },
    /// Withdraw a posted step that has not taken its object (fault or stop).
    WithdrawStep(StepId),
    /// Stop an edge.
    StopEdge(EdgeId),
    /// Release the worker role (weights, KV cache); answered by the worker's
    /// `RoleReleased` ([`StageController::role_released`]). `park`: a faulted run's
    /// stage, kept aside with its caches for the run that may re-form it.
    ResetRole {
        /// Park the role rather than drop it.
        park: bool,
    },
    /// Free a loaded input object that will never be executed (fault or stop).
    ReleaseObject(DeviceHandle),
}

/// What the controller reports to the orchestrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StageEvent {
    /// Provisioning accepted.
    ProvisionStarted {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// The worker configured the role: its weights are read, its range validated and
    /// bound. Never before the worker said so, never after a load failure.
    WeightsLoaded {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
        /// The blocks loaded.
        layers: crate::wire::LayerRange,
        /// The stage's weight bytes.
        bytes: u64,
        /// The worker took over the faulted run's role for this very stage: its caches
        /// were kept.
        kept_caches: bool,
    },
    /// Worker, weights and both edges are ready.
    StageReady {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// The stage faulted (first reason).
    StageFault {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
        /// Why.
        reason: FaultReason,
    },
    /// The stage is torn down: both edges stopped with their leases released, and the
    /// worker released the role.
    StageStopped {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loaded {
    object: ObjectId,
    sequence: Sequence,
    extent: u64,
    handle: DeviceHandle,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Unprovisioned,
    Preparing {
        role: bool,
        inbound: bool,
        outbound: bool,
    },
    Ready,
    /// A step is posted for the object of `sequence`.
    Posted {
        step: StepId,
        sequence: Sequence,
    },
    Executing {
        step: StepId,
    },
    Faulted,
    /// Waiting for both edges (their leases released with proofs) and the role's release.
    Stopping {
        inbound: bool,
        outbound: bool,
        role: bool,
    },
    Stopped,
}

/// The stage controller.
#[derive(Debug)]
pub struct StageController {
    orchestrator: NodeId,
    prov: Option<Box<ProvisionStage>>,
    /// The resolved weights' bytes, once `LoadRole` was asked for.
    loading: Option<u64>,
    /// The worker process that held this stage's role is gone (reaped): the role went with
    /// it.
    role_gone: bool,
    state: State,
    next: Sequence,
    next_step: u64,
    waiting: VecDeque<Loaded>,
    mislabel: Option<Sequence>,
    commands: VecDeque<StageCommand>,
    events: VecDeque<StageEvent>,
}

impl StageController {
    /// A controller accepting provisioning only from `orchestrator`.
    pub fn new(orchestrator: NodeId) -> StageController {
        StageController {
            orchestrator,
            prov: None,
            loading: None,
            role_gone: false,
            state: State::Unprovisioned,
            next: Sequence(0),
            next_step: 1,
            waiting: VecDeque::new(),
            mislabel: None,
            commands: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Numbers this stage's steps from `first` (a node gives each run's stage its own
    /// range, so step ids never repeat on a node).
    pub fn first_step(mut self, first: u64) -> StageController {
        self.next_step = first.max(1);
        self
    }

    /// Test-only fault injection, configured at the CLI edge: the output of `sequence` is
    /// labelled with the next sequence (a skipped sequence downstream).
    pub fn mislabel(mut self, sequence: Option<Sequence>) -> StageController {
        self.mislabel = sequence;
        self
    }

    fn ids(&self) -> Option<(RunId, StageIndex)> {
        self.prov.as_ref().map(|p| (p.run_id, p.stage_index))
    }

    /// Provisioning from `from`. Refusals change nothing and return the reason.
    pub fn provision(&mut self, from: NodeId, p: ProvisionStage) -> Result<(), StageFault> {
        if !matches!(self.state, State::Unprovisioned | State::Stopped) {
            return Err(StageFault::AlreadyProvisioned);
        }
        let last = p.stage_count.checked_sub(1);
        let valid = from == self.orchestrator
            && p.orchestrator == self.orchestrator
            && p.stage_index.0 < p.stage_count
            && !p.layers.is_empty()
            && p.layers.end <= p.block_count
            && p.embedding == (p.stage_index.0 == 0)
            && p.head == (Some(p.stage_index.0) == last)
            && p.inbound.edge_id != p.outbound.edge_id;
        if !valid {
            return Err(StageFault::ProvisionRejected);
        }
        self.events.push_back(StageEvent::ProvisionStarted {
            run_id: p.run_id,
            stage_index: p.stage_index,
        });
        self.commands.push_back(StageCommand::ConfigureRole(Box::new(p.clone())));
        self.commands.push_back(StageCommand::ProvisionRx(p.inbound.edge_id));
        self.commands.push_back(StageCommand::ProvisionTx(p.outbound.edge_id));
        self.prov = Some(Box::new(p));
        self.loading = None;
        self.role_gone = false;
        self.state = State::Preparing { role: false, inbound: false, outbound: false };
        self.next = Sequence(0);
        self.waiting.clear();
        Ok(())
    }

    /// The weights of `run` are on this host (at `path`, `bytes` of them for this stage)
    /// and checked: the worker is asked to load them. Ignored unless the stage of `run` is
    /// preparing and has not asked yet.
    pub fn weights_ready(&mut self, run: RunId, path: String, bytes: u64) {
        let Some(p) = &self.prov else { return };
        if p.run_id != run
            || self.loading.is_some()
            || !matches!(self.state, State::Preparing { role: false, .. })
        {
            return;
        }
        self.loading = Some(bytes);
        self.commands.push_back(StageCommand::LoadRole(RoleConfig::ModelStage {
            weights: path,
            layers: p.layers,
            embedding: p.embedding,
            head: p.head,
            max_seq_len: p.runtime.max_seq_len,
            kv_cache: p.runtime.kv_cache,
            activation_dtype: p.runtime.activation_dtype,
            sampling: p.runtime.sampling,
            max_sequences: p.runtime.max_sequences,
            mask_bytes: p.runtime.mask_bytes,
            prompt_cache: p.prompt_cache,
            run: RunRef { orchestrator: p.orchestrator, run_id: p.run_id },
            resume_from: p
                .resume_from
                .map(|run_id| RunRef { orchestrator: p.orchestrator, run_id }),
        }));
    }

    /// The worker configured the role (`RoleConfigured`): the weights are loaded. Counts
    /// only as the answer to `LoadRole`, while preparing.
    pub fn role_ready(&mut self) {
        self.role_ready_keeping(false);
    }

    /// As [`StageController::role_ready`], for a worker that took over the faulted run's
    /// role with its caches (`kept_caches`).
    pub fn role_ready_keeping(&mut self, kept_caches: bool) {
        let Some((run_id, stage_index)) = self.ids() else { return };
        let (Some(bytes), Some(layers)) = (self.loading, self.prov.as_ref().map(|p| p.layers))
        else {
            return;
        };
        if let State::Preparing { role, .. } = &mut self.state
            && !*role
        {
            *role = true;
            let ev = StageEvent::WeightsLoaded { run_id, stage_index, layers, bytes, kept_caches };
            self.events.push_back(ev);
        }
        self.check_ready();
    }

    /// An edge of this stage is ready.
    pub fn edge_ready(&mut self, edge: EdgeId) {
        let Some(p) = &self.prov else { return };
        let (inb, outb) = (p.inbound.edge_id, p.outbound.edge_id);
        if let State::Preparing { inbound, outbound, .. } = &mut self.state {
            *inbound |= edge == inb;
            *outbound |= edge == outb;
        }
        self.check_ready();
    }

    fn check_ready(&mut self) {
        if self.state == (State::Preparing { role: true, inbound: true, outbound: true })
            && let Some((run_id, stage_index)) = self.ids()
        {
            self.state = State::Ready;
            self.events.push_back(StageEvent::StageReady { run_id, stage_index });
            self.try_execute();
        }
    }

    /// A whole object was loaded from the inbound edge. `taken_by`: the posted step the
    /// worker ran on it (the worker owns and frees it). Every other loaded object ends as
    /// the input of exactly one step or in a `ReleaseObject`: one the stage does not take
    /// (a wrong edge, a sequence violation, a stage faulted, stopping or stopped) is
    /// released at once.
    pub fn object_loaded(
        &mut self,
        edge: EdgeId,
        object: ObjectId,
        sequence: Sequence,
        extent: u64,
        handle: DeviceHandle,
        taken_by: Option<StepId>,
    ) {
        let ours = self.prov.as_ref().is_some_and(|p| p.inbound.edge_id == edge);
        if let Some(step) = taken_by {
            match self.state {
                State::Posted { step: posted, sequence: s } if ours && posted == step => {
                    if s == sequence {
                        self.state = State::Executing { step };
                    } else {
                        self.fault(FaultReason::Stage(StageFault::SequenceViolation));
                    }
                }
                // Withdrawn meanwhile (fault, stop): the step runs, nothing to release.
                State::Faulted | State::Stopping { .. } | State::Stopped => {}
                _ => self.fault(FaultReason::Stage(StageFault::SequenceViolation)),
            }
            return;
        }
        let accepted = ours
            && matches!(
                self.state,
                State::Ready
                    | State::Posted { .. }
                    | State::Executing { .. }
                    | State::Preparing { .. }
            );
        if !accepted {
            // Another edge's, or a stage that takes no run work (faulted, stopping, stopped,
            // never provisioned): the object is freed, never kept or dropped.
            self.commands.push_back(StageCommand::ReleaseObject(handle));
            return;
        }
        let expected = Sequence(
            self.next.0
                + self.waiting.len() as u64
                + u64::from(matches!(self.state, State::Executing { .. })),
        );
        if sequence != expected {
            self.commands.push_back(StageCommand::ReleaseObject(handle));
            self.fault(FaultReason::Stage(StageFault::SequenceViolation));
            return;
        }
        if let State::Posted { sequence: s, .. } = self.state
            && s == sequence
        {
            // The post reached the worker after this object: it can never run (the worker
            // withdraws it); the object is executed the ordinary way.
            self.state = State::Ready;
        }
        self.waiting.push_back(Loaded { object, sequence, extent, handle });
        self.try_execute();
    }

    fn try_execute(&mut self) {
        if self.state != State::Ready {
            return;
        }
        let Some(p) = &self.prov else { return };
        let step_id = StepId(self.next_step);
        let in_row = p.inbound.object.row_bytes().max(1);
        let out_row = p.outbound.object.row_bytes();
        let prefix = p.inbound.object.prefix_bytes;
        // The last stage writes one fixed-size token-out object.
        let head = p.head.then_some(p.outbound.object.max_extent);
        let Some(l) = self.waiting.pop_front() else {
            // Nothing waits: decide the next step ahead of its object.
            self.next_step += 1;
            let sequence = self.next;
            let (output_object, output_sequence, output_flags) = self.output_of(sequence);
            let output_extent = match head {
                Some(bytes) => OutputExtent::Fixed { bytes },
                None => OutputExtent::PerRow {
                    input_row_bytes: in_row,
                    output_row_bytes: out_row,
                    prefix_bytes: prefix,
                },
            };
            self.commands.push_back(StageCommand::PostStep {
                step_id,
                sequence,
                output_extent,
                output_object,
                output_sequence,
                output_flags,
            });
            self.state = State::Posted { step: step_id, sequence };
            return;
        };
        self.next_step += 1;
        let output_extent = match head {
            Some(bytes) => bytes,
            None => OutputExtent::PerRow {
                input_row_bytes: in_row,
                output_row_bytes: out_row,
                prefix_bytes: prefix,
            }
            .resolve(l.extent),
        };
        let (output_object, output_sequence, output_flags) = self.output_of(l.sequence);
        self.commands.push_back(StageCommand::ExecuteStep {
            step_id,
            input: l.handle,
            input_object: l.object,
            sequence: l.sequence,
            output_extent,
            output_object,
            output_sequence,
            output_flags,
        });
        self.state = State::Executing { step: step_id };
    }

    /// The output object's id, sequence and flags for the input of `sequence`.
    fn output_of(&self, sequence: Sequence) -> (ObjectId, Sequence, ObjectFlags) {
        let output_sequence =
            if self.mislabel == Some(sequence) { sequence.next() } else { sequence };
        let flags = if sequence == Sequence(0) { ObjectFlags::PREFILL } else { ObjectFlags::NONE };
        (ObjectId(output_sequence.0 + 1), output_sequence, flags)
    }

    /// The worker withdrew or refused a posted step on its own (not at our request): if it
    /// is the one posted now, the stage cannot go on (`step.post_rejected`).
    pub fn step_withdrawn(&mut self, step: StepId) {
        if matches!(self.state, State::Posted { step: posted, .. } if posted == step) {
            self.fault(FaultReason::Step(crate::wire::reason::StepFailure::PostRejected));
        }
    }

    /// The active step finished (its output produced).
    pub fn step_completed(&mut self, step: StepId) {
        if self.state == (State::Executing { step }) {
            self.next = self.next.next();
            self.state = State::Ready;
            self.try_execute();
        }
    }

    /// A failure from the worker, an edge or the weights: faults the stage (first reason).
    pub fn fault(&mut self, reason: FaultReason) {
        if matches!(
            self.state,
            State::Unprovisioned | State::Faulted | State::Stopping { .. } | State::Stopped
        ) {
            return;
        }
        if let Some((run_id, stage_index)) = self.ids() {
            self.withdraw_post();
            self.state = State::Faulted;
            self.release_waiting();
            self.events.push_back(StageEvent::StageFault { run_id, stage_index, reason });
        }
    }

    /// `StopRun` from `from` for `run`: tear the stage down.
    pub fn stop_run(&mut self, from: NodeId, run: RunId) {
        self.stop(from, run, false);
    }

    /// `StopRun` of a faulted run: tear the stage down, parking the worker's role with
    /// its caches (the run that re-forms it may keep this very stage).
    pub fn stop_faulted_run(&mut self, from: NodeId, run: RunId) {
        self.stop(from, run, true);
    }

    fn stop(&mut self, from: NodeId, run: RunId, park: bool) {
        let Some(p) = &self.prov else { return };
        if from != self.orchestrator
            || run != p.run_id
            || matches!(self.state, State::Stopping { .. } | State::Stopped)
        {
            return;
        }
        let (inb, outb) = (p.inbound.edge_id, p.outbound.edge_id);
        self.withdraw_post();
        self.release_waiting();
        self.state = State::Stopping { inbound: false, outbound: false, role: self.role_gone };
        self.commands.push_back(StageCommand::StopEdge(inb));
        self.commands.push_back(StageCommand::StopEdge(outb));
        if !self.role_gone {
            self.commands.push_back(StageCommand::ResetRole { park });
        }
    }

    /// The worker confirmed the role's release (`RoleReleased`: weights and KV cache
    /// dropped).
    pub fn role_released(&mut self) {
        if let State::Stopping { role, .. } = &mut self.state {
            *role = true;
        }
        self.check_stopped();
    }

    /// The worker process that served this stage is gone (reaped after a crash, or failed
    /// for good): the role and everything it held went with it. An active stage faults
    /// (`worker.exited`, unless it already faulted); a stopping one counts its role as
    /// released.
    pub fn worker_reaped(&mut self) {
        if self.prov.is_none() || matches!(self.state, State::Stopped) {
            return;
        }
        self.role_gone = true;
        self.fault(FaultReason::Worker(WorkerFatal::Exited));
        if let State::Stopping { role, .. } = &mut self.state {
            *role = true;
        }
        self.check_stopped();
    }

    fn withdraw_post(&mut self) {
        if let State::Posted { step, .. } = self.state {
            self.commands.push_back(StageCommand::WithdrawStep(step));
        }
    }

    fn release_waiting(&mut self) {
        for l in self.waiting.drain(..) {
            self.commands.push_back(StageCommand::ReleaseObject(l.handle));
        }
    }

    /// An edge of this stage is fully torn down: its pump stopped, the worker quiet and
    /// its lease released with that proof.
    pub fn edge_stopped(&mut self, edge: EdgeId) {
        let Some(p) = &self.prov else { return };
        let (inb, outb) = (p.inbound.edge_id, p.outbound.edge_id);
        if let State::Stopping { inbound, outbound, .. } = &mut self.state {
            *inbound |= edge == inb;
            *outbound |= edge == outb;
        }
        self.check_stopped();
    }

    /// `StageStopped` once both edges stopped and the role is released.
    fn check_stopped(&mut self) {
        if self.state == (State::Stopping { inbound: true, outbound: true, role: true })
            && let Some((run_id, stage_index)) = self.ids()
        {
            self.state = State::Stopped;
            self.events.push_back(StageEvent::StageStopped { run_id, stage_index });
        }
    }

    /// The active provisioning (also while stopping, and after it stopped).
    pub fn provisioning(&self) -> Option<&ProvisionStage> {
        self.prov.as_deref()
    }

    /// Whether the stage is torn down (or was never provisioned).
    pub fn is_stopped(&self) -> bool {
        matches!(self.state, State::Unprovisioned | State::Stopped)
    }

    /// Whether the stage is being torn down (edges and role not all released yet).
    pub fn is_stopping(&self) -> bool {
        matches!(self.state, State::Stopping { .. })
    }

    /// Whether the stage is ready for run work (ready or executing).
    pub fn is_ready(&self) -> bool {
        matches!(self.state, State::Ready | State::Posted { .. } | State::Executing { .. })
    }

    /// The next command, if any.
    pub fn poll_command(&mut self) -> Option<StageCommand> {
        self.commands.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<StageEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
