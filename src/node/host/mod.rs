//! The node's stage host: the driver that runs one provisioned stage. It joins the
//! [`StageController`] (control path), the [`EdgePlane`] (edge ends: arena leases, rings,
//! pumps and their evidence) through the shared [`PlaneExecutor`], the worker controller's
//! driver, and forwards every stage event to the orchestrator over the control session.
//!
//! It decides nothing itself: every input is fed to one of the state machines, and every
//! command they emit is executed. Its parts: `control` (control messages and weights),
//! `worker` (the worker's outputs, and the worker as the rings' local user), `stage`
//! (the stage controller's commands and events, and the plane's events).
#![allow(clippy::disallowed_methods)] // the driver owns the clock

mod control;
mod stage;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use iroh::Endpoint;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::arena::{Arena, ArenaManager};
use crate::control::ControlMessage;
use crate::edge::executor::{PlaneExecutor, PumpNotice};
use crate::edge::plane::EdgePlane;
use crate::events::{Direction, Event, EventLine};
use crate::net::edge::EdgeRouter;
use crate::stage::controller::StageController;
use crate::stage::weights::{WeightsError, WeightsProgress};
use crate::wire::reason::{Component, ControlFault, FaultReason};
use crate::wire::{
    EdgeId, NodeId, RingId, RoleId, RunId, Sequence, StageIndex, StepId, WorkerGeneration,
};
use crate::workerctl::{WorkerDriver, WorkerNotifier};

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
    /// A pump's notice (its stream opened, or it ended with its evidence).
    Pump(EdgeId, PumpNotice),
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
    plane: EdgePlane,
    executor: PlaneExecutor,
    controller: Option<StageController>,
    worker: WorkerDriver,
    notifier: WorkerNotifier,
    generation: WorkerGeneration,
    inputs: mpsc::UnboundedSender<HostInput>,
    session: Option<(mpsc::UnboundedSender<ControlMessage>, NodeId, u64)>,
    cache: PathBuf,
    t0: Instant,
    installed: std::collections::BTreeSet<RingId>,
    records: BTreeMap<EdgeId, EdgeRecord>,
    fault_component: Option<Component>,
    steps: HashMap<StepId, Sequence>,
    /// The first step id of the current stage: each provisioning numbers its steps from
    /// a base of its own (`runs << 32`), so a late answer about a step of an earlier run
    /// is never taken for one of this run's.
    step_base: u64,
    /// Test-only fault injection (configured by the CLI): the stage controller labels the
    /// output of this sequence with the next one, as a broken stage would.
    skip_sequence: Option<Sequence>,
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
        skip_sequence: Option<Sequence>,
    ) -> StageHost {
        let notifier = worker.notifier();
        let notices = inputs.clone();
        let executor = PlaneExecutor::new(endpoint, router, arena, move |edge, notice| {
            let _ = notices.send(HostInput::Pump(edge, notice));
        });
        StageHost {
            node_id,
            plane: EdgePlane::new(manager, Component::EdgeEstablisher),
            executor,
            controller: None,
            worker,
            notifier,
            generation,
            inputs,
            session: None,
            cache,
            t0: Instant::now(),
            installed: Default::default(),
            records: BTreeMap::new(),
            fault_component: None,
            steps: HashMap::new(),
            step_base: 0,
            skip_sequence,
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
            arena_leases: self.plane.live_leases(),
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
        self.emit_at(event, None);
    }

    /// Emits `event` stamped `origin_us` on the host's monotonic clock (now when `None`):
    /// the worker's own stamp of what it reports, so that a hop's latency does not include
    /// the time its report waited behind a step.
    fn emit_at(&self, event: Event, origin_us: Option<u64>) {
        if let Some((tx, _, _)) = &self.session {
            let line = EventLine {
                ts_us: self.t0.elapsed().as_micros() as u64,
                origin_us: Some(origin_us.unwrap_or_else(crate::clock::monotonic_us)),
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
            HostInput::Pump(edge, notice) => {
                let fault = match &notice {
                    PumpNotice::Ended(crate::net::edge::PumpEnd::Faulted(reason, ..)) => {
                        Some(*reason)
                    }
                    _ => None,
                };
                if let Some(stats) = self.executor.notice(&mut self.plane, edge, notice)
                    && let Some(r) = self.records.get_mut(&edge)
                {
                    r.stalls += stats.stalls;
                    r.pump_bytes += stats.bytes;
                    if let Some(reason) = fault {
                        r.last_fault = Some(reason.into());
                    }
                }
            }
        }
        self.drain().await;
    }

    fn count(&mut self, edge: EdgeId, extent: u64) {
        if let Some(r) = self.records.get_mut(&edge) {
            r.objects += 1;
            r.bytes += extent + crate::wire::HEADER_LEN as u64;
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
            let mut user =
                worker::WorkerUser { worker: &mut self.worker, notifier: &self.notifier };
            progressed |= self.executor.drive(&mut self.plane, &mut user).await;
            while let Some(ev) = self.plane.poll_event() {
                progressed = true;
                self.plane_event(ev);
            }
            if !progressed {
                return;
            }
        }
    }
}
