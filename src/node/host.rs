//! The node's stage host: the driver that runs one provisioned stage. It joins the
//! [`StageController`] (control path), the [`EdgeEstablisher`] with the [`ArenaManager`]
//! (edge ends), the worker controller's driver and the network pumps, and forwards every
//! stage event to the orchestrator over the control session.
//!
//! It decides nothing itself: every input is fed to one of the state machines, and every
//! command they emit is executed (arena lease, ring init and install, pump start / stop,
//! worker command, control message). Which component detected a fault is recorded where
//! the fault enters, so the orchestrator's `run_faulted` names it.
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use iroh::endpoint::Connection;
use iroh::{Endpoint, EndpointId};
use serde::Serialize;
use tokio::sync::mpsc;

use crate::arena::memfd::ArenaRegion;
use crate::arena::{Arena, ArenaEvent, ArenaManager, WorkerQuiet};
use crate::control::ControlMessage;
use crate::edge::{EdgeEnd, EdgeEstablisher, EdgeProvision, EstablisherCommand, EstablisherEvent};
use crate::events::{Direction, Event, EventLine};
use crate::net::edge::{EdgeRouter, PumpEnd, PumpHandle, spawn_recv, spawn_send};
use crate::net::endpoint::EDGE_ALPN;
use crate::ring::{MappedRing, RingDrain, RingFeeder};
use crate::stage::controller::{StageCommand, StageController, StageEvent};
use crate::stage::weights::{WeightsError, WeightsProgress, resolve};
use crate::wire::reason::{
    Component, ControlFault, FaultReason, StageFault, StreamFault, WeightsFailure,
};
use crate::wire::{
    EdgeId, NodeId, ObjectFlags, ObjectId, Peer, PortId, ProvisionStage, RingId, RoleId, RunId,
    Sequence, StageIndex, StepId, WorkerGeneration,
};
use crate::worker::protocol::{
    Command, Event as WorkerEvent, InputBinding, OutputBinding, UninstallReason,
};
use crate::workerctl::{CtlOutput, WorkerDriver, WorkerNotifier};

type Ring = Arc<MappedRing<ArenaRegion>>;

/// Test-only fault injection: a node started with this variable set to `N` labels the
/// output of sequence `N` as `N + 1` (a skipped sequence downstream).
pub const SKIP_SEQUENCE_ENV: &str = "SWACTOR_FAULT_SKIP_SEQUENCE";

/// The one role a node's worker runs for its stage.
pub const STAGE_ROLE: RoleId = RoleId(1);

/// Inputs the host's tasks report back to the node loop.
#[derive(Debug)]
pub enum HostInput {
    /// The orchestrator opened a control session (replacing any earlier one).
    SessionOpened {
        /// Messages to the orchestrator.
        tx: mpsc::UnboundedSender<ControlMessage>,
        /// The orchestrator's node id (from its `Hello`).
        orchestrator: NodeId,
        /// The session's number.
        session: u64,
    },
    /// A control message on session `session`.
    Control(u64, ControlMessage),
    /// The orchestrator's control session `session` ended.
    SessionClosed(u64),
    /// Another endpoint tried to open a control session and was refused.
    ForeignControl(String),
    /// Weights download progress.
    Weights(RunId, WeightsProgress),
    /// The weights are on this host (or could not be made available).
    WeightsResolved(RunId, Result<(PathBuf, u64), WeightsError>),
    /// A send pump opened its stream, or a receive rendezvous is registered.
    PumpReady(EdgeId),
    /// A pump ended.
    PumpEnded(EdgeId, PumpEnd),
}

/// One edge end as `edge inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeRecord {
    /// The run.
    pub run_id: RunId,
    /// The edge.
    pub edge_id: EdgeId,
    /// `send` or `recv`.
    pub direction: Direction,
    /// The other end's node.
    pub peer: NodeId,
    /// The other end's endpoint id.
    pub peer_endpoint: Option<String>,
    /// `provisioning`, `ready`, `stopping`, `stopped` or `failed`.
    pub state: &'static str,
    /// The ring backing this end, once leased.
    pub ring_id: Option<RingId>,
    /// Object headers plus payload moved through the ring.
    pub bytes: u64,
    /// Objects moved.
    pub objects: u64,
    /// Times the pump waited (ring full on receive, ring empty on send).
    pub stalls: u64,
    /// Bytes the network pump moved.
    pub pump_bytes: u64,
    /// The last fault, `class.code`.
    pub last_fault: Option<FaultReason>,
}

/// What the admin socket shows of the host.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct HostSnapshot {
    /// Live arena leases.
    pub arena_leases: usize,
    /// Rings installed in the worker.
    pub installed_rings: usize,
    /// Edge records of the current (or last) run.
    pub edges: Vec<serde_json::Value>,
    /// The stage, if one was provisioned.
    pub stage: Option<serde_json::Value>,
    /// Device objects the worker holds.
    #[serde(default)]
    pub device_objects: u64,
}

/// The stage host. See the module docs.
pub struct StageHost {
    node_id: NodeId,
    endpoint: Endpoint,
    router: EdgeRouter,
    arena: Arc<Arena>,
    manager: ArenaManager,
    establisher: EdgeEstablisher,
    controller: Option<StageController>,
    worker: WorkerDriver,
    notifier: WorkerNotifier,
    generation: WorkerGeneration,
    inputs: mpsc::UnboundedSender<HostInput>,
    session: Option<(mpsc::UnboundedSender<ControlMessage>, NodeId, u64)>,
    cache: PathBuf,
    t0: Instant,
    rings: HashMap<RingId, (EdgeId, Ring)>,
    edge_rings: HashMap<EdgeId, RingId>,
    pumps: HashMap<EdgeId, PumpHandle>,
    installed: std::collections::BTreeSet<RingId>,
    conns: Arc<Mutex<HashMap<EndpointId, Connection>>>,
    records: BTreeMap<EdgeId, EdgeRecord>,
    edge_components: HashMap<EdgeId, Component>,
    fault_component: Option<Component>,
    steps: HashMap<StepId, Sequence>,
    /// Evidence of pumps that ended before their edge was stopped (the producer finished
    /// its stream): handed to the establisher when the edge stops.
    parked: HashMap<EdgeId, crate::arena::PumpStopped>,
    /// Fault injection for tests (`SWACTOR_FAULT_SKIP_SEQUENCE`): the output of this
    /// sequence is labelled with the next one, as a broken stage would.
    skip_sequence: Option<u64>,
    /// Device objects the worker holds, as it last reported.
    device_objects: u64,
}

impl StageHost {
    /// A host for a node whose worker, arena and endpoint are up.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node_id: NodeId,
        endpoint: Endpoint,
        router: EdgeRouter,
        arena: Arc<Arena>,
        manager: ArenaManager,
        worker: WorkerDriver,
        generation: WorkerGeneration,
        inputs: mpsc::UnboundedSender<HostInput>,
        cache: PathBuf,
    ) -> StageHost {
        let notifier = worker.notifier();
        StageHost {
            node_id,
            endpoint,
            router,
            arena,
            manager,
            establisher: EdgeEstablisher::new(),
            controller: None,
            worker,
            notifier,
            generation,
            inputs,
            session: None,
            cache,
            t0: Instant::now(),
            rings: HashMap::new(),
            edge_rings: HashMap::new(),
            pumps: HashMap::new(),
            installed: Default::default(),
            conns: Arc::default(),
            records: BTreeMap::new(),
            edge_components: HashMap::new(),
            fault_component: None,
            steps: HashMap::new(),
            parked: HashMap::new(),
            skip_sequence: std::env::var(SKIP_SEQUENCE_ENV).ok().and_then(|v| v.parse().ok()),
            device_objects: 0,
        }
    }

    /// The worker driver (to stop it when the node stops).
    pub fn into_worker(self) -> WorkerDriver {
        self.worker
    }

    /// What `edge inspect` shows.
    pub fn snapshot(&self) -> HostSnapshot {
        HostSnapshot {
            arena_leases: self.manager.live_count(),
            installed_rings: self.installed.len(),
            device_objects: self.device_objects,
            edges: self
                .records
                .values()
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .collect(),
            stage: self.controller.as_ref().and_then(|c| c.provisioning()).map(|p| {
                serde_json::json!({
                    "run_id": p.run_id,
                    "stage_index": p.stage_index,
                    "layers": p.layers.to_string(),
                    "stopped": self.controller.as_ref().is_some_and(StageController::is_stopped),
                })
            }),
        }
    }

    fn ids(&self) -> Option<(RunId, StageIndex)> {
        let p = self.controller.as_ref()?.provisioning()?;
        Some((p.run_id, p.stage_index))
    }

    fn emit(&self, event: Event) {
        if let Some((tx, _, _)) = &self.session {
            let line = EventLine {
                ts_us: self.t0.elapsed().as_micros() as u64,
                origin_us: Some(crate::events::monotonic_us()),
                event,
            };
            let _ = tx.send(ControlMessage::Event { line });
        }
    }

    fn send(&self, msg: ControlMessage) {
        if let Some((tx, _, _)) = &self.session {
            let _ = tx.send(msg);
        }
    }

    /// The node faulted and stops (its worker failed for good): tells the orchestrator,
    /// and lets go of the session so that everything sent is delivered before the node
    /// closes.
    pub fn node_faulted(&mut self, reason: crate::wire::reason::BootFault) {
        self.send(ControlMessage::NodeFaulted { node_id: self.node_id, reason });
        self.session = None;
    }

    /// Feeds a fault with the component that detected it (the first one is kept).
    fn stage_fault(&mut self, reason: FaultReason, component: Component) {
        if let Some(ctl) = self.controller.as_mut() {
            self.fault_component.get_or_insert(component);
            ctl.fault(reason);
        }
    }

    /// Handles one input from the node's tasks.
    pub async fn input(&mut self, input: HostInput) {
        match input {
            HostInput::SessionOpened { tx, orchestrator, session } => {
                self.session = Some((tx, orchestrator, session));
            }
            HostInput::SessionClosed(session) => {
                if self.session.as_ref().is_none_or(|s| s.2 != session) {
                    return;
                }
                self.session = None;
                // Nobody will send StopRun: tear the stage down ourselves.
                if let Some((run, _)) = self.ids()
                    && let Some(ctl) = self.controller.as_mut()
                    && !ctl.is_stopped()
                {
                    self.fault_component.get_or_insert(Component::ControlChannel);
                    ctl.fault(ControlFault::ConnectionLost.into());
                    let from = ctl.provisioning().map(|p| p.orchestrator).unwrap_or_default();
                    ctl.stop_run(from, run);
                }
            }
            HostInput::ForeignControl(peer) => {
                eprintln!("swactor node: refused a control session from {peer}");
                if self.controller.as_ref().is_some_and(|c| !c.is_stopped()) {
                    self.stage_fault(
                        ControlFault::UnauthorizedOrchestrator.into(),
                        Component::ControlChannel,
                    );
                }
            }
            HostInput::Control(session, msg) => {
                if self.session.as_ref().is_some_and(|s| s.2 == session) {
                    self.control(msg);
                }
            }
            HostInput::Weights(run, progress) => {
                if let Some((r, stage_index)) = self.ids()
                    && r == run
                {
                    let node_id = self.node_id;
                    self.emit(match progress {
                        WeightsProgress::Started { bytes, .. } => Event::WeightsDownloadStarted {
                            run_id: run,
                            node_id,
                            stage_index,
                            bytes,
                        },
                        WeightsProgress::Downloaded { bytes } => {
                            Event::WeightsDownloaded { run_id: run, node_id, stage_index, bytes }
                        }
                    });
                }
            }
            HostInput::WeightsResolved(run, result) => self.weights_resolved(run, result),
            HostInput::PumpReady(edge) => self.establisher.driver_ready(edge),
            HostInput::PumpEnded(edge, end) => {
                self.pumps.remove(&edge);
                let (evidence, stats) = match end {
                    PumpEnd::Stopped(evidence, stats) => (evidence, stats),
                    PumpEnd::Faulted(reason, evidence, stats) => {
                        let component = match self.records.get(&edge).map(|r| r.direction) {
                            Some(Direction::Send) => Component::TxEdge,
                            _ => Component::RxEdge,
                        };
                        self.edge_components.entry(edge).or_insert(component);
                        if let Some(r) = self.records.get_mut(&edge) {
                            r.last_fault = Some(reason.into());
                        }
                        self.establisher.stream_fault(edge, reason);
                        (evidence, stats)
                    }
                };
                if let Some(r) = self.records.get_mut(&edge) {
                    r.stalls += stats.stalls;
                    r.pump_bytes += stats.bytes;
                }
                if self.establisher.is_stopping(edge) {
                    self.establisher.pump_stopped(edge, evidence);
                } else {
                    self.parked.insert(edge, evidence);
                }
            }
        }
        self.drain().await;
    }

    fn control(&mut self, msg: ControlMessage) {
        let Some(orchestrator) = self.session.as_ref().map(|s| s.1) else { return };
        match msg {
            ControlMessage::ProvisionStage { provision } => {
                let p = *provision;
                let (run_id, stage_index) = (p.run_id, p.stage_index);
                let busy = self.controller.as_ref().is_some_and(|c| !c.is_stopped());
                let result = if busy {
                    Err(StageFault::AlreadyProvisioned)
                } else {
                    let mut ctl = StageController::new(orchestrator);
                    let r = ctl.provision(orchestrator, p);
                    if r.is_ok() {
                        self.controller = Some(ctl);
                        self.fault_component = None;
                        self.records.clear();
                        self.steps.clear();
                    }
                    r
                };
                if let Err(reason) = result {
                    eprintln!("swactor node: provisioning of run {run_id} refused: {reason}");
                    self.send(ControlMessage::StageFault {
                        run_id,
                        stage_index,
                        reason: reason.into(),
                        component: Component::StageController,
                    });
                }
            }
            ControlMessage::StopRun { run_id } => {
                // A step in flight (a long prefill) must not hold the teardown.
                if !self.steps.is_empty() && self.ids().is_some_and(|(r, _)| r == run_id) {
                    self.notifier.notify(Command::AbortStep);
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.stop_run(orchestrator, run_id);
                }
            }
            other => eprintln!("swactor node: unexpected control message {other:?}"),
        }
    }

    /// Handles one output of the worker controller. Returns `false` when the worker failed
    /// for good (the node cannot compute any more).
    pub async fn worker_output(&mut self, out: CtlOutput) -> bool {
        let mut alive = true;
        match out {
            CtlOutput::Routed(e) => self.worker_event(e).await,
            CtlOutput::RingFault { ring_id, reason, generation } => {
                let quiet = WorkerQuiet::from_ctl_output(&CtlOutput::RingFault {
                    ring_id,
                    reason,
                    generation,
                });
                self.installed.remove(&ring_id);
                if let Some((edge, _)) = self.rings.get(&ring_id) {
                    self.edge_components.entry(*edge).or_insert(Component::WorkerCtl);
                }
                self.establisher.ring_fault(ring_id, reason);
                if let Some(q) = quiet {
                    self.establisher.worker_quiet(ring_id, q);
                }
            }
            CtlOutput::StopPump { ring_id } => {
                if let Some((edge, _)) = self.rings.get(&ring_id)
                    && let Some(p) = self.pumps.get(edge)
                {
                    p.stop.notify_one();
                }
            }
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

    async fn worker_event(&mut self, e: WorkerEvent) {
        let node_id = self.node_id;
        match e {
            WorkerEvent::RingReadable { ring_id } | WorkerEvent::RingWritable { ring_id } => {
                if let Some((edge, _)) = self.rings.get(&ring_id)
                    && let Some(p) = self.pumps.get(edge)
                {
                    p.hint.notify_one();
                }
            }
            WorkerEvent::RoleConfigured { .. } => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.role_ready();
                }
            }
            WorkerEvent::RoleFailed { reason, .. } => self.stage_fault(reason, Component::Weights),
            WorkerEvent::RingInstalled { ring_id } => {
                self.installed.insert(ring_id);
                self.establisher.ring_installed(ring_id);
            }
            WorkerEvent::RingQuiesced { ring_id } => {
                self.installed.remove(&ring_id);
                if let Some(q) = WorkerQuiet::from_worker_event(&e) {
                    self.establisher.worker_quiet(ring_id, q);
                }
            }
            WorkerEvent::RingFault { ring_id, reason } => {
                self.installed.remove(&ring_id);
                if let Some((edge, _)) = self.rings.get(&ring_id) {
                    self.edge_components.entry(*edge).or_insert(Component::Worker);
                }
                self.establisher.ring_fault(ring_id, reason);
                // The worker no longer touches a faulted ring.
                let quiet = WorkerQuiet::from_worker_event(&WorkerEvent::RingQuiesced { ring_id });
                if let Some(q) = quiet {
                    self.establisher.worker_quiet(ring_id, q);
                }
            }
            WorkerEvent::ObjectLoaded {
                ring_id,
                edge_id,
                object_id,
                sequence,
                extent,
                handle,
                ..
            } => {
                if let Some((run_id, stage_index)) = self.ids() {
                    self.emit(Event::ObjectLoaded {
                        run_id,
                        node_id,
                        stage_index,
                        edge_id,
                        ring_id,
                        object_id,
                        sequence,
                        extent,
                        worker_generation: handle.generation,
                    });
                }
                self.count(edge_id, extent);
                match self.controller.as_mut() {
                    Some(ctl) => ctl.object_loaded(edge_id, object_id, sequence, extent, handle),
                    None => self.notifier.notify(Command::ReleaseDeviceObject { handle }),
                }
            }
            WorkerEvent::ObjectProduced {
                ring_id, edge_id, object_id, sequence, extent, ..
            } => {
                if let Some((run_id, stage_index)) = self.ids() {
                    self.emit(Event::ObjectProduced {
                        run_id,
                        node_id,
                        stage_index,
                        edge_id,
                        ring_id,
                        object_id,
                        sequence,
                        extent,
                    });
                }
                self.count(edge_id, extent);
            }
            WorkerEvent::ObjectFailed { edge_id, reason, .. } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.last_fault = Some(reason.into());
                }
                self.stage_fault(reason.into(), Component::IngressParser);
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

    fn count(&mut self, edge: EdgeId, extent: u64) {
        if let Some(r) = self.records.get_mut(&edge) {
            r.objects += 1;
            r.bytes += extent + crate::wire::HEADER_LEN as u64;
        }
    }

    fn weights_resolved(&mut self, run: RunId, result: Result<(PathBuf, u64), WeightsError>) {
        let Some(p) = self.controller.as_ref().and_then(|c| c.provisioning()).cloned() else {
            return;
        };
        if p.run_id != run || self.controller.as_ref().is_some_and(StageController::is_stopped) {
            return;
        }
        match result {
            Err(e) => {
                eprintln!("swactor node: {e}");
                self.stage_fault(e.reason.into(), Component::Weights);
            }
            Ok((path, bytes)) => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.weights_ready(run, path.display().to_string(), bytes);
                }
            }
        }
    }

    /// Runs every state machine's queued commands and events to a fixed point.
    async fn drain(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(ev) = self.controller.as_mut().and_then(StageController::poll_event) {
                progressed = true;
                self.stage_event(ev);
            }
            while let Some(cmd) = self.controller.as_mut().and_then(StageController::poll_command) {
                progressed = true;
                self.stage_command(cmd).await;
            }
            while let Some(cmd) = self.establisher.poll_command() {
                progressed = true;
                self.establisher_command(cmd).await;
            }
            while let Some(ev) = self.establisher.poll_event() {
                progressed = true;
                self.establisher_event(ev);
            }
            while let Some(ev) = self.manager.poll_event() {
                progressed = true;
                match ev {
                    ArenaEvent::RingLeased { request_id, layout, .. } => {
                        self.establisher.ring_leased(request_id, layout)
                    }
                    ArenaEvent::RingLeaseRejected { request_id, .. } => {
                        self.establisher.lease_rejected(request_id)
                    }
                    _ => {}
                }
            }
            if !progressed {
                return;
            }
        }
    }

    async fn stage_command(&mut self, cmd: StageCommand) {
        // Only ids here: this runs once per step on the hot path.
        let Some((run_id, stage_index, out_edge)) = self
            .controller
            .as_ref()
            .and_then(|c| c.provisioning())
            .map(|p| (p.run_id, p.stage_index, p.outbound.edge_id))
        else {
            return;
        };
        let node_id = self.node_id;
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
            StageCommand::ExecuteStep { step_id, input, input_object, sequence, output_extent } => {
                let Some(out_ring) = self.edge_rings.get(&out_edge).copied() else {
                    self.stage_fault(StageFault::NotProvisioned.into(), Component::StageController);
                    return;
                };
                let flags =
                    if sequence == Sequence(0) { ObjectFlags::PREFILL } else { ObjectFlags::NONE };
                let out_sequence =
                    if self.skip_sequence == Some(sequence.0) { sequence.next() } else { sequence };
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
                        object_id: ObjectId(out_sequence.0 + 1),
                        sequence: out_sequence,
                        extent: output_extent,
                        flags,
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
            StageCommand::StopEdge(edge) => {
                if let Some(r) = self.records.get_mut(&edge)
                    && r.state != "failed"
                {
                    r.state = "stopping";
                }
                self.establisher.stop_edge(edge);
                // An edge already torn down (after a fault) reports stopped at once.
                if self.establisher.is_settled(edge)
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
        if self.establisher.provision(prov).is_err() {
            self.stage_fault(StageFault::AlreadyProvisioned.into(), Component::EdgeEstablisher);
        }
    }

    fn fetch_weights(&mut self, p: &ProvisionStage) {
        let (source, cache, run, inputs) =
            (p.weights.clone(), self.cache.clone(), p.run_id, self.inputs.clone());
        let (layers, embedding, head, blocks) = (p.layers, p.embedding, p.head, p.block_count);
        tokio::task::spawn_blocking(move || {
            let progress = inputs.clone();
            let result = resolve(&source, &cache, |e| {
                let _ = progress.send(HostInput::Weights(run, e));
            })
            .and_then(|path| {
                let facts = crate::model::gguf::read_facts(&path).map_err(|e| WeightsError {
                    reason: WeightsFailure::ParseFailed,
                    detail: e.to_string(),
                })?;
                if facts.block_count != blocks {
                    return Err(WeightsError {
                        reason: WeightsFailure::InvalidRange,
                        detail: format!(
                            "the plan has {blocks} blocks, the file {}",
                            facts.block_count
                        ),
                    });
                }
                let bytes = crate::planner::stage_weight_bytes(&facts, layers, embedding, head);
                Ok((path, bytes))
            });
            let _ = inputs.send(HostInput::WeightsResolved(run, result));
        });
    }

    fn stage_event(&mut self, ev: StageEvent) {
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
                for r in self.records.values_mut() {
                    self.router.forget(r.edge_id);
                    if r.state != "failed" {
                        r.state = "stopped";
                    }
                }
                self.send(ControlMessage::StageStopped { run_id, stage_index });
            }
        }
    }

    async fn establisher_command(&mut self, cmd: EstablisherCommand) {
        match cmd {
            EstablisherCommand::LeaseRing(req) => self.manager.lease(req),
            EstablisherCommand::CancelLease { request_id } => self.manager.cancel(request_id),
            EstablisherCommand::InstallRing { edge_id, direction, layout, object } => {
                let ring = self
                    .arena
                    .region(&layout)
                    .ok()
                    .and_then(|region| MappedRing::init(region, &layout).ok());
                let Some(ring) = ring else {
                    self.edge_components.entry(edge_id).or_insert(Component::ArenaManager);
                    self.establisher
                        .ring_fault(layout.ring_id, crate::wire::reason::RingFault::LayoutInvalid);
                    return;
                };
                self.rings.insert(layout.ring_id, (edge_id, Arc::new(ring)));
                self.edge_rings.insert(edge_id, layout.ring_id);
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.ring_id = Some(layout.ring_id);
                }
                let install = Command::InstallRing {
                    ring_id: layout.ring_id,
                    edge_id,
                    port_id: PortId(0),
                    direction,
                    layout,
                    object_spec: object,
                };
                if self.worker.send(install).await.is_err() {
                    self.edge_components.entry(edge_id).or_insert(Component::WorkerCtl);
                    self.establisher
                        .ring_fault(layout.ring_id, crate::wire::reason::RingFault::WorkerCrashed);
                }
            }
            EstablisherCommand::EstablishSend { edge_id, consumer, layout } => {
                let Some((_, ring)) = self.rings.get(&layout.ring_id) else { return };
                let drain = RingDrain::new(layout.ring_id, Arc::clone(ring));
                let (endpoint, conns, notifier, ring_id) = (
                    self.endpoint.clone(),
                    Arc::clone(&self.conns),
                    self.notifier.clone(),
                    layout.ring_id,
                );
                let (ready, ended) = (self.inputs.clone(), self.inputs.clone());
                let pump = spawn_send(
                    edge_id,
                    drain,
                    async move { connect(&endpoint, &conns, &consumer).await },
                    move || notifier.notify(Command::RingWritable { ring_id }),
                    move || drop(ready.send(HostInput::PumpReady(edge_id))),
                    move |end| drop(ended.send(HostInput::PumpEnded(edge_id, end))),
                );
                self.pumps.insert(edge_id, pump);
            }
            EstablisherCommand::EstablishRecv { edge_id, producer, layout } => {
                let Some((_, ring)) = self.rings.get(&layout.ring_id) else { return };
                let feeder = RingFeeder::new(layout.ring_id, Arc::clone(ring));
                let Some(peer) =
                    producer.endpoint_id.as_deref().and_then(|e| EndpointId::from_str(e).ok())
                else {
                    self.edge_components.entry(edge_id).or_insert(Component::RxEdge);
                    self.establisher.stream_fault(edge_id, StreamFault::UnauthorizedPeer);
                    return;
                };
                self.router.expect(edge_id, peer);
                let (notifier, ring_id, ended) =
                    (self.notifier.clone(), layout.ring_id, self.inputs.clone());
                let pump = spawn_recv(
                    self.router.stream_for(edge_id),
                    feeder,
                    move || notifier.notify(Command::RingReadable { ring_id }),
                    move |end| drop(ended.send(HostInput::PumpEnded(edge_id, end))),
                );
                self.pumps.insert(edge_id, pump);
                // The rendezvous is registered: the stream is routed whenever it arrives.
                self.establisher.driver_ready(edge_id);
            }
            EstablisherCommand::StopPump { edge_id } => {
                if let Some(p) = self.pumps.get(&edge_id) {
                    p.stop.notify_one();
                } else if let Some(evidence) = self.parked.remove(&edge_id) {
                    self.establisher.pump_stopped(edge_id, evidence);
                }
            }
            EstablisherCommand::UninstallRing { ring_id } => {
                self.notifier
                    .notify(Command::UninstallRing { ring_id, reason: UninstallReason::Stop });
            }
            EstablisherCommand::ReleaseRing(proof) => {
                let ring_id = proof.ring_id();
                if let Some((edge, _)) = self.rings.remove(&ring_id) {
                    self.edge_rings.remove(&edge);
                    self.router.forget(edge);
                }
                if let Err(e) = self.manager.release(proof) {
                    eprintln!("swactor node: release of ring {ring_id} refused: {e}");
                }
            }
        }
    }

    fn establisher_event(&mut self, ev: EstablisherEvent) {
        let node_id = self.node_id;
        match ev {
            EstablisherEvent::EdgeReady { edge_id, ring_id, direction } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.state = "ready";
                }
                if let Some((run_id, _)) = self.ids() {
                    self.emit(Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction });
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.edge_ready(edge_id);
                }
            }
            EstablisherEvent::EdgeFailed { edge_id, reason } => {
                if let Some(r) = self.records.get_mut(&edge_id) {
                    r.state = "failed";
                    r.last_fault.get_or_insert(reason);
                }
                let component =
                    self.edge_components.remove(&edge_id).unwrap_or(Component::EdgeEstablisher);
                self.stage_fault(reason, component);
            }
            EstablisherEvent::EdgeStopped { edge_id } => {
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

/// The cached connection to `peer` on the edge ALPN, or a new one.
async fn connect(
    endpoint: &Endpoint,
    conns: &Mutex<HashMap<EndpointId, Connection>>,
    peer: &Peer,
) -> Result<Connection, StreamFault> {
    let addr = crate::net::endpoint::peer_addr(peer).ok_or(StreamFault::ConnectFailed)?;
    let id = addr.id;
    let cached = conns.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
    if let Some(c) = cached
        && c.close_reason().is_none()
    {
        return Ok(c);
    }
    let conn = endpoint.connect(addr, EDGE_ALPN).await.map_err(|_| StreamFault::ConnectFailed)?;
    conns.lock().unwrap_or_else(|e| e.into_inner()).insert(id, conn.clone());
    Ok(conn)
}
