//! The simulated node side: what reaches a node (control, objects, boot facts, its
//! worker's lines), the objects' arrival and the steps' compute, the node's actions, its
//! stage side, edge plane and worker controller pumped to a fixed point, and the simulated
//! worker process.

use std::time::Duration;

use rand::RngExt;

use super::{Ev, HIDDEN, Link, Membership, NodeIn, OrchIn, Post, SESSION, VOCAB, World};
use crate::control::ControlMessage;
use crate::edge::plane::PlaneCommand;
use crate::node::boot::{BootEvent, BootFact};
use crate::node::stage_node::{NodeAction, STAGE_ROLE};
use crate::sim::model::{self, SlotState};
use crate::wire::evidence::PumpStopped;
use crate::wire::reason::{BootFault, Component, ObjectFailure, RingFault, StepFailure};
use crate::wire::{ObjectId, Sequence, StepId, WorkerGeneration};
use crate::worker::protocol::{Backend, Command, DeviceHandle, Event as WorkerEvent, RING_ABI};
use crate::workerctl::CtlOutput;

impl World {
    pub(super) fn node(&mut self, i: usize, m: NodeIn) {
        let n = &mut self.nodes[i];
        match m {
            NodeIn::Provision(provision) => {
                // A new run: the simulated worker's view of its ingress starts afresh
                // (an earlier run's objects and steps are told apart by their run).
                (n.next_in, n.posted) = (0, None);
                n.executed.clear();
                n.ended.clear();
                n.stage.control(SESSION, ControlMessage::ProvisionStage { provision });
            }
            NodeIn::StopRun(run_id, faulted, park) => {
                let stop = ControlMessage::StopRun { run_id, faulted, park };
                self.nodes[i].stage.control(SESSION, stop);
            }
            NodeIn::WeightsReady => {
                let run = self.run;
                self.nodes[i].stage.weights_resolved(run, Ok(("/sim".into(), 1 << 12)));
            }
            NodeIn::RoleReady(taken_over) => {
                let ev = WorkerEvent::RoleConfigured { role_id: STAGE_ROLE, taken_over };
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            NodeIn::PumpReady(e) => n.stage.plane_mut().pump_ready(e),
            NodeIn::PumpEnded(e, r) => {
                n.stage.plane_mut().pump_ended(e, PumpStopped::observed(r), None);
            }
            NodeIn::Spawned(g) => {
                if g == n.wctl.generation() {
                    n.wctl.spawned(self.base + self.now);
                }
            }
            NodeIn::Worker(g, cmd) => self.worker_process(i, g, cmd),
            NodeIn::FromWorker(g, ev) => n.wctl.worker_event(g, ev, self.base + self.now),
            NodeIn::Exited(g) => n.wctl.worker_exited(g, self.base + self.now),
            NodeIn::RoleReleased => {
                n.slots.clear();
                n.store = Default::default();
                let ev = WorkerEvent::RoleReleased { role_id: STAGE_ROLE };
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            NodeIn::Late(ev) => {
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            // An earlier run's object (its stream is that run's): nobody takes it.
            NodeIn::Object(run, ..) if run != self.run => {}
            NodeIn::Object(_, object, sequence, payload) => {
                self.arrive(i, object, sequence, payload);
            }
            NodeIn::Boot(fact, failed) => {
                match failed {
                    None => n.boot.fact_ready(fact),
                    Some(reason) => n.boot.resource_failed(reason),
                }
                self.boot_events(i);
            }
            NodeIn::StepDone(run, step, ..) if run != self.run => {
                // A step of an earlier run ends late: the stage node drops the answer.
                let done = WorkerEvent::StepCompleted { role_id: STAGE_ROLE, step_id: step };
                n.stage.worker_output(CtlOutput::Routed(done));
            }
            NodeIn::StepDone(_, step, sequence, result, out_object, out_sequence) => {
                self.done(i, step, sequence, result, out_object, out_sequence);
            }
        }
    }

    /// Carries node `i`'s boot events to the orchestrator.
    pub(super) fn boot_events(&mut self, i: usize) {
        while let Some(ev) = self.nodes[i].boot.poll_event() {
            match ev {
                BootEvent::NodeAvailable { .. } => {
                    self.send(Link::Report(i), 200, 3000, Ev::Orch(OrchIn::Available(i)));
                    self.send(
                        Link::Orch,
                        100,
                        100_000,
                        Ev::Orch(OrchIn::Member(i, Membership::Up)),
                    );
                }
                BootEvent::BootFaulted { reason, .. } => {
                    self.send(Link::Report(i), 200, 3000, Ev::Orch(OrchIn::BootFaulted(i, reason)));
                }
                BootEvent::Started { .. } => {}
            }
        }
    }

    /// An object reaches node `i`'s ingress: checked in sequence, taken by the posted step
    /// or loaded for the controller.
    fn arrive(&mut self, i: usize, object: ObjectId, sequence: Sequence, payload: Vec<u8>) {
        let n = &mut self.nodes[i];
        let Some(edge) = n.stage.provisioning().map(|p| p.inbound.edge_id) else { return };
        if n.stage.plane().is_settled(edge) {
            return;
        }
        let ring_id =
            n.rings.iter().find(|(_, e)| **e == edge).map_or(crate::wire::RingId(0), |(r, _)| *r);
        if sequence.0 != n.next_in {
            let want = n.next_in;
            let reason = ObjectFailure::SequenceViolation;
            let failed = WorkerEvent::ObjectFailed {
                ring_id,
                edge_id: edge,
                port_id: crate::wire::PortId(0),
                object_id: Some(object),
                sequence: Some(sequence),
                reason,
            };
            n.stage.worker_output(CtlOutput::Routed(failed));
            self.violation(format!("node {i}: object {} arrived, {want} expected", sequence.0));
            return;
        }
        n.next_in += 1;
        let handle = DeviceHandle { generation: WorkerGeneration(1), id: n.next_handle };
        n.next_handle += 1;
        let extent = payload.len() as u64;
        let loaded = |taken_by| WorkerEvent::ObjectLoaded {
            ring_id,
            edge_id: edge,
            port_id: crate::wire::PortId(0),
            object_id: object,
            sequence,
            extent,
            handle,
            taken_by,
            at_us: None,
        };
        match n.posted {
            Some(p) if p.sequence == sequence => {
                n.posted = None;
                n.stage.worker_output(CtlOutput::Routed(loaded(Some(p.step))));
                let want = p.extent.resolve(extent);
                self.compute(i, p.step, sequence, payload, want, p.object, p.out_sequence);
            }
            _ => {
                n.loaded.insert(handle.id, (object, sequence, payload));
                n.stage.worker_output(CtlOutput::Routed(loaded(None)));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn compute(
        &mut self,
        i: usize,
        step: StepId,
        sequence: Sequence,
        payload: Vec<u8>,
        extent: u64,
        out_object: ObjectId,
        out_sequence: Sequence,
    ) {
        let stage = self.stage_of(i).unwrap_or_default();
        let last = self.next_of(i).is_none();
        let layers = self.plan.stages.get(stage).map_or(0..0, |s| s.layers.start..s.layers.end);
        let limits = self.limits();
        let row = if stage == 0 { 4 } else { u64::from(HIDDEN) * 4 };
        let run = self.run;
        let cache = self.plan.prompt_cache;
        let n = &mut self.nodes[i];
        if n.store.blocks.len() != cache.blocks as usize {
            n.store = model::Store {
                block: cache.block_tokens,
                blocks: vec![None; cache.blocks as usize],
            };
        }
        let result = model::step(
            layers,
            last,
            &mut n.slots,
            &mut n.store,
            limits,
            row,
            u64::from(HIDDEN) * 4,
            VOCAB,
            &payload,
            &mut self.report.kept_rows,
        )
        .map_err(|e| format!("{e:?}"))
        .and_then(|mut out| {
            // As the real worker: the token-out object has one size, zeros after the
            // sections its entries ask for.
            if last && (out.len() as u64) < extent {
                out.resize(extent as usize, 0);
            }
            if out.len() as u64 == extent {
                Ok(out)
            } else {
                Err(format!("{} bytes produced, {extent} declared", out.len()))
            }
        });
        let cost = Duration::from_micros(self.rng.random_range(200..3000) * u64::from(n.slow));
        n.busy_until = n.busy_until.max(self.now) + cost;
        let at = n.busy_until;
        self.at(
            at,
            Ev::Node(i, NodeIn::StepDone(run, step, sequence, result, out_object, out_sequence)),
        );
    }

    fn done(
        &mut self,
        i: usize,
        step: StepId,
        sequence: Sequence,
        result: Result<Vec<u8>, String>,
        out_object: ObjectId,
        out_sequence: Sequence,
    ) {
        let n = &mut self.nodes[i];
        if n.executed.last().is_some_and(|&s| s >= sequence.0)
            || (n.executed.is_empty() && sequence.0 != 0)
        {
            let seen = n.executed.clone();
            self.violation(format!("node {i}: step of sequence {} after {seen:?}", sequence.0));
        }
        self.nodes[i].executed.push(sequence.0);
        match result {
            Err(e) => {
                if !self.faulty {
                    self.violation(format!("node {i}: step {} failed: {e}", sequence.0));
                }
                let reason = StepFailure::ComputeFailed;
                let failed = WorkerEvent::StepFailed { role_id: STAGE_ROLE, step_id: step, reason };
                self.nodes[i].stage.worker_output(CtlOutput::Routed(failed));
            }
            Ok(out) => {
                let run = self.run;
                let (link, dest) = match self.next_of(i) {
                    None => (
                        Link::Edge(self.nodes.len()),
                        Ev::Orch(OrchIn::TokenOut(run, out_object, out_sequence, out)),
                    ),
                    Some(j) => (
                        Link::Edge(j),
                        Ev::Node(j, NodeIn::Object(run, out_object, out_sequence, out)),
                    ),
                };
                let stage = &self.nodes[i].stage;
                let outbound = stage.provisioning().map(|p| p.outbound.edge_id);
                if outbound.is_some_and(|e| !stage.plane().is_settled(e)) {
                    self.send(link, 50, 1500, dest);
                }
                let done = WorkerEvent::StepCompleted { role_id: STAGE_ROLE, step_id: step };
                self.nodes[i].stage.worker_output(CtlOutput::Routed(done));
            }
        }
    }

    /// Executes one action of node `i`'s stage side, as the node's host does; the
    /// simulated worker process carries out the commands meant for the worker.
    fn node_action(&mut self, i: usize, action: NodeAction) {
        match action {
            NodeAction::Send(msg) => {
                let to = match msg {
                    ControlMessage::StageReady { run_id, stage_index } => {
                        OrchIn::StageReady(run_id, stage_index, i)
                    }
                    ControlMessage::StageFault { run_id, stage_index, reason, component } => {
                        OrchIn::StageFault(run_id, stage_index, i, reason, component)
                    }
                    ControlMessage::StageStopped { run_id, stage_index } => {
                        OrchIn::StageStopped(run_id, stage_index, i)
                    }
                    _ => return,
                };
                self.send(Link::Report(i), 500, 5000, Ev::Orch(to));
            }
            NodeAction::FetchWeights(_) => {
                self.send(Link::Local(i), 1000, 10_000, Ev::Node(i, NodeIn::WeightsReady))
            }
            NodeAction::WorkerSend { command, .. } | NodeAction::WorkerNotify(command) => {
                self.worker_step_command(i, command);
            }
            NodeAction::StopRingPump(ring_id) => {
                let n = &mut self.nodes[i];
                if let Some(&edge) = n.rings.get(&ring_id)
                    && n.ended.insert(edge)
                {
                    let ev = Ev::Node(i, NodeIn::PumpEnded(edge, ring_id));
                    self.send(Link::Local(i), 100, 2000, ev);
                }
            }
            NodeAction::Log(line) => self.trace(format!("node {i}: {line}")),
            NodeAction::Emit { .. }
            | NodeAction::WakeRing(_)
            | NodeAction::ForgetEdges(_)
            | NodeAction::AbortPumps
            | NodeAction::CloseSession
            | NodeAction::UseSession(_) => {}
        }
    }

    /// The simulated worker process takes a command about its role or its steps.
    fn worker_step_command(&mut self, i: usize, command: Command) {
        match command {
            Command::ConfigureRole { config, .. } => {
                let n = &mut self.nodes[i];
                // As the real worker: a parked role of the run this one re-forms, for the
                // very same stage, is taken over with its caches; any other is dropped.
                let mut taken_over = false;
                match n.parked.take() {
                    Some((parked, slots)) if config.takes_over(&parked) => {
                        self.kept_stages += 1;
                        taken_over = true;
                        n.slots = slots;
                    }
                    _ => {
                        if let crate::worker::protocol::RoleConfig::ModelStage {
                            max_sequences,
                            ..
                        } = config
                        {
                            n.slots = vec![SlotState::default(); max_sequences.max(1) as usize];
                        }
                    }
                }
                n.store = Default::default();
                n.role = Some(config);
                self.send(Link::Local(i), 1000, 20_000, Ev::Node(i, NodeIn::RoleReady(taken_over)));
            }
            Command::PostStep { step_id, sequence, output, .. } => {
                self.nodes[i].posted = Some(Post {
                    step: step_id,
                    sequence,
                    extent: output.extent,
                    object: output.object_id,
                    out_sequence: output.sequence,
                });
            }
            Command::ExecuteStep { step_id, inputs, outputs, .. } => {
                let (Some(input), Some(output)) = (inputs.first(), outputs.first()) else {
                    self.violation(format!("node {i}: a step without input or output"));
                    return;
                };
                let sequence = input.sequence;
                match self.nodes[i].loaded.remove(&input.handle.id) {
                    Some((_, s, payload)) if s == sequence => {
                        let extent = output.extent;
                        let (object, out_sequence) = (output.object_id, output.sequence);
                        self.compute(i, step_id, sequence, payload, extent, object, out_sequence);
                    }
                    other => {
                        self.violation(format!(
                            "node {i}: step {} on a missing or other input {:?}",
                            sequence.0,
                            other.map(|o| o.1)
                        ));
                    }
                }
            }
            Command::WithdrawStep { step_id }
                if self.nodes[i].posted.is_some_and(|p| p.step == step_id) =>
            {
                self.nodes[i].posted = None;
            }
            Command::ReleaseRole { park, .. } => {
                let n = &mut self.nodes[i];
                n.parked = None;
                if let Some(role) = n.role.take()
                    && park
                {
                    n.parked = Some((role, std::mem::take(&mut n.slots)));
                }
                self.send(Link::Local(i), 100, 2000, Ev::Node(i, NodeIn::RoleReleased))
            }
            Command::ReleaseDeviceObject { handle } => {
                self.nodes[i].loaded.remove(&handle.id);
            }
            _ => {}
        }
    }

    /// Runs node `i`'s stage side to a fixed point: its actions, and its plane's commands
    /// through the simulated executor.
    pub(super) fn pump_node(&mut self, i: usize) {
        loop {
            let mut progressed = self.nodes[i].stage.advance();
            while let Some(action) = self.nodes[i].stage.poll_action() {
                progressed = true;
                self.node_action(i, action);
            }
            progressed |= self.pump_plane(i);
            if !progressed {
                return;
            }
        }
    }

    /// Executes what node `i`'s edge plane asks (the simulated executor: rings, pumps and
    /// the worker's hold on rings). Returns whether it did anything.
    fn pump_plane(&mut self, i: usize) -> bool {
        let mut any = false;
        {
            while let Some(cmd) = self.nodes[i].stage.plane_mut().poll_command() {
                any = true;
                self.trace(format!("node {i} plane: {cmd:?}"));
                match cmd {
                    PlaneCommand::InstallRing { edge_id, direction, layout, object } => {
                        self.nodes[i].rings.insert(layout.ring_id, edge_id);
                        let cmd = Command::InstallRing {
                            ring_id: layout.ring_id,
                            edge_id,
                            port_id: crate::wire::PortId(0),
                            direction,
                            layout,
                            object_spec: object,
                        };
                        if self.nodes[i].wctl.command(cmd).is_err() {
                            let r = layout.ring_id;
                            let w = RingFault::WorkerCrashed;
                            self.nodes[i].stage.plane_mut().ring_fault(r, w, Component::WorkerCtl);
                        }
                        self.pump_wctl(i);
                    }
                    PlaneCommand::StartSend { edge_id, .. }
                    | PlaneCommand::StartRecv { edge_id, .. } => {
                        self.send(
                            Link::Local(i),
                            200,
                            5000,
                            Ev::Node(i, NodeIn::PumpReady(edge_id)),
                        );
                    }
                    PlaneCommand::StopPump { edge_id } => {
                        if self.nodes[i].ended.contains(&edge_id) {
                            continue;
                        }
                        let ring = self.nodes[i]
                            .rings
                            .iter()
                            .find(|(_, e)| **e == edge_id)
                            .map(|(r, _)| *r);
                        if let Some(r) = ring {
                            self.send(
                                Link::Local(i),
                                100,
                                3000,
                                Ev::Node(i, NodeIn::PumpEnded(edge_id, r)),
                            );
                        }
                    }
                    PlaneCommand::DetachRing { ring_id } => {
                        let reason = crate::worker::protocol::UninstallReason::Stop;
                        // A worker that is gone answers for its rings by being reaped.
                        let _ =
                            self.nodes[i].wctl.command(Command::UninstallRing { ring_id, reason });
                        self.pump_wctl(i);
                    }
                    PlaneCommand::ForgetRing { ring_id, .. } => {
                        self.nodes[i].rings.remove(&ring_id);
                    }
                }
            }
        }
        any
    }

    /// The simulated worker process of generation `g` on node `i` reads one command line.
    fn worker_process(&mut self, i: usize, g: WorkerGeneration, cmd: Command) {
        let reply = match cmd {
            Command::InitializeWorker { generation, .. } if !self.nodes[i].mute => {
                Some(WorkerEvent::WorkerReady {
                    pid: 1000 + i as u32,
                    generation,
                    ring_abi: RING_ABI,
                    backend: Backend::Cpu,
                })
            }
            Command::InstallRing { ring_id, .. } => Some(WorkerEvent::RingInstalled { ring_id }),
            Command::UninstallRing { ring_id, .. } => Some(WorkerEvent::RingQuiesced { ring_id }),
            Command::ShutdownWorker { .. } => {
                self.send(Link::Local(i), 100, 2000, Ev::Node(i, NodeIn::Exited(g)));
                None
            }
            _ => None,
        };
        if let Some(ev) = reply {
            self.send(Link::Local(i), 50, 1500, Ev::Node(i, NodeIn::FromWorker(g, ev)));
        }
    }

    /// Executes what node `i`'s worker controller asks and carries what it reports to the
    /// node's boot and stage side, as the node's driver does.
    pub(super) fn pump_wctl(&mut self, i: usize) {
        while let Some(out) = self.nodes[i].wctl.poll_output() {
            let g = self.nodes[i].wctl.generation();
            let n = &mut self.nodes[i];
            match out {
                CtlOutput::Spawn { generation } => {
                    self.send(Link::Local(i), 500, 5000, Ev::Node(i, NodeIn::Spawned(generation)));
                }
                CtlOutput::ToWorker(cmd) => {
                    self.send(Link::Local(i), 50, 1000, Ev::Node(i, NodeIn::Worker(g, cmd)));
                }
                CtlOutput::Kill => {
                    self.send(Link::Local(i), 100, 1000, Ev::Node(i, NodeIn::Exited(g)));
                }
                CtlOutput::Ready { .. } => {
                    n.slots.clear();
                    n.store = Default::default();
                    n.stage.worker_output(out);
                    if !n.boot.is_available() {
                        n.boot.fact_ready(BootFact::Worker);
                        self.boot_events(i);
                    }
                }
                CtlOutput::Restarting { .. } => {
                    // The crashed worker took the stage's role with it.
                    n.posted = None;
                    n.loaded.clear();
                    n.slots.clear();
                    n.store = Default::default();
                    n.stage.worker_output(out);
                }
                CtlOutput::Failed { .. } if !n.boot.is_available() => {
                    n.boot.resource_failed(BootFault::WorkerInitTimeout);
                    self.boot_events(i);
                }
                out => {
                    n.stage.worker_output(out);
                }
            }
        }
    }
}
