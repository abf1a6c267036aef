//! [`StageNode`]: everything a node decides about the stage it runs, sans-IO.
//!
//! It composes the [`StageController`] (the stage's control path), the node's
//! [`EdgePlane`] (arena leases, rings, pumps and their evidence) and the worker
//! controller's verdicts, and owns what used to live in the node's driver: the numbering of
//! steps per provisioning, the filter that drops late answers about an earlier run's steps,
//! the state of each edge end as `edge inspect` shows it, and the translation of stage
//! commands into worker commands. Its driver (the node's `StageHost`, or the simulation)
//! feeds it inputs, executes the [`NodeAction`]s it queues, and runs the plane's commands
//! through its executor; it decides nothing.
//!
//! Parts: this file (inputs from the control session and weights, the fixed point, the
//! snapshot), `stage` (the controller's commands and events, the plane's events),
//! `worker` (the worker controller's outputs and the worker's events).

mod stage;
mod worker;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::control::ControlMessage;
use crate::edge::plane::EdgePlane;
use crate::events::{Direction, Event};
use crate::stage::controller::StageController;
use crate::wire::reason::{BootFault, Component, ControlFault, FaultReason, WeightsFailure};
use crate::wire::{
    EdgeId, NodeId, ProvisionStage, RingId, RoleId, RunId, Sequence, StageIndex, StepId,
    WorkerGeneration,
};
use crate::worker::protocol::Command;

/// The one role a node's worker runs for its stage.
pub const STAGE_ROLE: RoleId = RoleId(1);

/// Each provisioning numbers its steps from a range of its own: its first step id is the
/// previous range's base plus this (`runs << 32`).
const STEP_RANGE: u64 = 1 << 32;

/// The state of one edge end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeState {
    /// Its ring is being leased and installed, its stream opened.
    Provisioning,
    /// Objects flow.
    Ready,
    /// Being torn down.
    Stopping,
    /// Torn down.
    Stopped,
    /// Faulted (torn down or being torn down).
    Failed,
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
    /// Where the end is in its life.
    pub state: EdgeState,
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

/// What the admin socket shows of the node's stage.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
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

/// Weights download progress, as the node's weights resolver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightsNotice {
    /// The download starts; the file has `bytes`.
    Started {
        /// Expected size.
        bytes: u64,
    },
    /// Bytes arrived: `bytes` of `total` held.
    Received {
        /// Bytes held so far.
        bytes: u64,
        /// Bytes the download needs in all.
        total: u64,
    },
    /// The file is complete and verified.
    Downloaded {
        /// Its size.
        bytes: u64,
    },
}

/// Why a stage's weights are not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsUnavailable {
    /// The reason.
    pub reason: WeightsFailure,
    /// What happened, for the log.
    pub detail: String,
}

/// What the node's driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeAction {
    /// Send a message to the orchestrator on the open control session.
    Send(ControlMessage),
    /// Forward an event to the orchestrator, stamped `origin_us` on the host's monotonic
    /// clock (now when `None`).
    Emit {
        /// The event.
        event: Event,
        /// The worker's own stamp of what it reports.
        origin_us: Option<u64>,
    },
    /// Deliver a command to the worker and wait until it is written; when it cannot be,
    /// report [`StageNode::worker_unreachable`] with `lost`.
    WorkerSend {
        /// The command.
        command: Command,
        /// The fault if it cannot be delivered.
        lost: FaultReason,
    },
    /// Hand a command to the worker without waiting (posts, withdrawals, releases).
    WorkerNotify(Command),
    /// Resolve the stage's weights (download or find them) off the loop and report
    /// [`StageNode::weights_resolved`].
    FetchWeights(Box<ProvisionStage>),
    /// Stop the network pump of a ring.
    StopRingPump(RingId),
    /// Wake the network pump of a ring (the worker moved its cursor).
    WakeRing(RingId),
    /// The stage stopped: forget the receive routes of these edges and the cached edge
    /// connections (a peer restarted with the same key is dialed afresh).
    ForgetEdges(Vec<EdgeId>),
    /// The run's send pumps stop without waiting for their peers' acknowledgement (the run
    /// faulted: a lost peer would never send one).
    AbortPumps,
    /// Let go of the control session once what was sent is delivered.
    CloseSession,
    /// From now on send on control session `n` (the one just opened), letting go of the
    /// one before once what was sent on it is delivered.
    UseSession(u64),
    /// A line for the node's log.
    Log(String),
}

/// A bug planted on purpose, so the simulation shows its checks find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedNodeBug {
    /// Late answers about an earlier run's steps are taken for this run's.
    NoLateAnswerFilter,
}

/// The node's stage. See the module docs.
pub struct StageNode {
    node_id: NodeId,
    plane: EdgePlane,
    controller: Option<StageController>,
    /// The open control session: the orchestrator's node id and the session's number.
    session: Option<(NodeId, u64)>,
    generation: WorkerGeneration,
    installed: BTreeSet<RingId>,
    records: BTreeMap<EdgeId, EdgeRecord>,
    /// The ring of each edge while it is ready.
    rings: HashMap<EdgeId, RingId>,
    fault_component: Option<Component>,
    steps: HashMap<StepId, Sequence>,
    /// The first step id of the current stage (see [`STEP_RANGE`]).
    step_base: u64,
    /// Test-only fault injection: the stage controller labels the output of this sequence
    /// with the next one, as a broken stage would.
    skip_sequence: Option<Sequence>,
    device_objects: u64,
    planted: Option<PlantedNodeBug>,
    actions: VecDeque<NodeAction>,
    /// A new run's provisioning that came while the last run's stage was still being torn
    /// down (a re-formed session reaches a node that just came back): applied once the
    /// node is idle, if its session is still the open one.
    held: Option<(u64, NodeId, Box<ProvisionStage>)>,
}

impl StageNode {
    /// The stage side of node `node_id`, whose edges are `plane`'s and whose worker is
    /// `generation`.
    pub fn new(node_id: NodeId, plane: EdgePlane, generation: WorkerGeneration) -> StageNode {
        StageNode {
            node_id,
            plane,
            controller: None,
            session: None,
            generation,
            installed: BTreeSet::new(),
            records: BTreeMap::new(),
            rings: HashMap::new(),
            fault_component: None,
            steps: HashMap::new(),
            step_base: 0,
            skip_sequence: None,
            device_objects: 0,
            planted: None,
            actions: VecDeque::new(),
            held: None,
        }
    }

    /// Test-only fault injection: mislabels the output of `sequence` (see
    /// [`StageController::mislabel`]).
    pub fn mislabel(mut self, sequence: Option<Sequence>) -> StageNode {
        self.skip_sequence = sequence;
        self
    }

    /// Test-only: plants a bug (the simulation shows its checks find it).
    pub fn plant(&mut self, bug: PlantedNodeBug) {
        self.planted = Some(bug);
    }

    /// The edge plane, for the driver's executor to run its commands and hand it evidence.
    pub fn plane_mut(&mut self) -> &mut EdgePlane {
        &mut self.plane
    }

    /// The edge plane.
    pub fn plane(&self) -> &EdgePlane {
        &self.plane
    }

    /// The stage as provisioned, if any.
    pub fn provisioning(&self) -> Option<&ProvisionStage> {
        self.controller.as_ref()?.provisioning()
    }

    /// Whether no stage runs (never provisioned, or stopped).
    pub fn is_idle(&self) -> bool {
        self.controller.as_ref().is_none_or(StageController::is_stopped)
    }

    /// The next thing the driver must do.
    pub fn poll_action(&mut self) -> Option<NodeAction> {
        self.actions.pop_front()
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
            stage: self.provisioning().map(|p| {
                serde_json::json!({
                    "run_id": p.run_id,
                    "stage_index": p.stage_index,
                    "layers": p.layers.to_string(),
                    "prompt_cache": p.prompt_cache,
                    "stopped": self.is_idle(),
                })
            }),
        }
    }

    /// The edge records of the current (or last) run.
    pub fn records(&self) -> impl Iterator<Item = &EdgeRecord> {
        self.records.values()
    }

    /// The orchestrator opened control session `session` (replacing any earlier one).
    ///
    /// A session that opens while another is open takes the node over: the old session is
    /// told why it ends (`control.taken_over`, sent on it before the driver switches), and
    /// a stage it carried is faulted with that and torn down by the node itself (nobody
    /// will stop it on the old session).
    pub fn session_opened(&mut self, orchestrator: NodeId, session: u64) {
        if self.session.is_some_and(|s| s.1 != session) {
            let reason = ControlFault::TakenOver.into();
            self.send(ControlMessage::SessionEnding { node_id: self.node_id, reason });
            self.tear_down_for(reason);
        }
        self.session = Some((orchestrator, session));
        self.actions.push_back(NodeAction::UseSession(session));
    }

    /// Faults a running stage with `reason` (detected by the control channel) and stops it
    /// on the node's own authority.
    fn tear_down_for(&mut self, reason: FaultReason) {
        if let Some((run, _)) = self.ids()
            && let Some(ctl) = self.controller.as_mut()
            && !ctl.is_stopped()
        {
            self.fault_component.get_or_insert(Component::ControlChannel);
            ctl.fault(reason);
            let from = ctl.provisioning().map(|p| p.orchestrator).unwrap_or_default();
            ctl.stop_run(from, run);
        }
    }

    /// Control session `session` ended: nobody will send `StopRun` on it, so a running
    /// stage is faulted and torn down by the node itself.
    pub fn session_closed(&mut self, session: u64) {
        if self.session.is_none_or(|s| s.1 != session) {
            return;
        }
        self.session = None;
        self.actions.push_back(NodeAction::CloseSession);
        self.tear_down_for(ControlFault::ConnectionLost.into());
    }

    /// Another endpoint tried to open a control session and was refused: a running stage
    /// faults (someone is trying to take it over). The driver logs the refusal, rate-limited
    /// (a refused peer retries several times a second).
    pub fn foreign_control(&mut self, _peer: &str) {
        if !self.is_idle() {
            self.stage_fault(
                ControlFault::UnauthorizedOrchestrator.into(),
                Component::ControlChannel,
            );
        }
    }

    /// A control message on session `session` (ignored unless it is the open one).
    pub fn control(&mut self, session: u64, msg: ControlMessage) {
        let Some(orchestrator) = self.session.filter(|s| s.1 == session).map(|s| s.0) else {
            return;
        };
        match msg {
            ControlMessage::ProvisionStage { provision } => {
                let stopping = self.controller.as_ref().is_some_and(StageController::is_stopping);
                let other_run = self.ids().is_some_and(|(r, _)| r != provision.run_id);
                if stopping && other_run && self.held.is_none() {
                    self.held = Some((session, orchestrator, provision));
                } else {
                    self.provision(orchestrator, *provision)
                }
            }
            ControlMessage::StopRun { run_id, faulted, park } => {
                let this_run = self.ids().is_some_and(|(r, _)| r == run_id);
                // A step in flight (a long prefill) must not hold the teardown.
                if !self.steps.is_empty() && this_run {
                    self.actions.push_back(NodeAction::WorkerNotify(Command::AbortStep));
                }
                // A faulted run's send pumps end without waiting for their peers.
                if faulted && this_run && !self.is_idle() {
                    self.actions.push_back(NodeAction::AbortPumps);
                }
                if let Some(ctl) = self.controller.as_mut() {
                    if park {
                        ctl.stop_faulted_run(orchestrator, run_id);
                    } else {
                        ctl.stop_run(orchestrator, run_id);
                    }
                }
            }
            other => self.log(format!("unexpected control message {other:?}")),
        }
    }

    fn provision(&mut self, orchestrator: NodeId, p: ProvisionStage) {
        let (run_id, stage_index) = (p.run_id, p.stage_index);
        let result = if !self.is_idle() {
            Err(crate::wire::reason::StageFault::AlreadyProvisioned)
        } else {
            let base = self.step_base + STEP_RANGE;
            let mut ctl =
                StageController::new(orchestrator).mislabel(self.skip_sequence).first_step(base);
            let r = ctl.provision(orchestrator, p);
            if r.is_ok() {
                self.controller = Some(ctl);
                self.step_base = base;
                self.fault_component = None;
                self.records.clear();
                self.rings.clear();
                self.steps.clear();
            }
            r
        };
        if let Err(reason) = result {
            self.log(format!("provisioning of run {run_id} refused: {reason}"));
            self.send(ControlMessage::StageFault {
                run_id,
                stage_index,
                reason: reason.into(),
                component: Component::StageController,
            });
        }
    }

    /// Weights download progress for `run`.
    pub fn weights_progress(&mut self, run: RunId, notice: WeightsNotice) {
        let Some((r, stage_index)) = self.ids() else { return };
        if r != run {
            return;
        }
        let node_id = self.node_id;
        self.emit(match notice {
            WeightsNotice::Started { bytes } => {
                Event::WeightsDownloadStarted { run_id: run, node_id, stage_index, bytes }
            }
            WeightsNotice::Received { bytes, total } => {
                Event::WeightsDownloading { run_id: run, node_id, stage_index, bytes, total }
            }
            WeightsNotice::Downloaded { bytes } => {
                Event::WeightsDownloaded { run_id: run, node_id, stage_index, bytes }
            }
        });
    }

    /// The weights of `run` are on this host (`path`, the stage's share `bytes`), or could
    /// not be made available.
    pub fn weights_resolved(
        &mut self,
        run: RunId,
        result: Result<(String, u64), WeightsUnavailable>,
    ) {
        if self.provisioning().is_none_or(|p| p.run_id != run) || self.is_idle() {
            return;
        }
        match result {
            Err(e) => {
                self.log(e.detail);
                self.stage_fault(e.reason.into(), Component::Weights);
            }
            Ok((path, bytes)) => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.weights_ready(run, path, bytes);
                }
            }
        }
    }

    /// A pump's counters when it ended, and the fault it ended with.
    pub fn pump_counted(
        &mut self,
        edge: EdgeId,
        bytes: u64,
        stalls: u64,
        fault: Option<FaultReason>,
    ) {
        if let Some(r) = self.records.get_mut(&edge) {
            r.stalls += stalls;
            r.pump_bytes += bytes;
            if let Some(reason) = fault {
                r.last_fault = Some(reason);
            }
        }
    }

    /// A command could not reach the worker (it died): the stage faults with `lost`.
    pub fn worker_unreachable(&mut self, lost: FaultReason) {
        self.stage_fault(lost, Component::WorkerCtl);
    }

    /// The node faulted and stops (its worker failed for good): tells the orchestrator
    /// and lets go of the session once that is delivered.
    pub fn node_faulted(&mut self, reason: BootFault) {
        self.send(ControlMessage::NodeFaulted { node_id: self.node_id, reason });
        if self.session.take().is_some() {
            self.actions.push_back(NodeAction::CloseSession);
        }
    }

    /// The node ends its control session on its own (it stops: `node.stopped`): the session
    /// is told why, its last message, and let go of so that it is delivered before the node
    /// closes; a run it carried faults with that reason at the orchestrator.
    pub fn session_ending(&mut self, reason: FaultReason) {
        self.send(ControlMessage::SessionEnding { node_id: self.node_id, reason });
        if self.session.take().is_some() {
            self.actions.push_back(NodeAction::CloseSession);
        }
    }

    /// Runs the stage controller's and the plane's queued commands and events into
    /// actions, to a fixed point. Returns whether anything happened. The driver calls it,
    /// executes the actions and the plane's commands, and calls it again until nothing
    /// moves.
    pub fn advance(&mut self) -> bool {
        let mut any = false;
        loop {
            let mut progressed = false;
            while let Some(ev) = self.controller.as_mut().and_then(StageController::poll_event) {
                progressed = true;
                self.stage_event(ev);
            }
            while let Some(cmd) = self.controller.as_mut().and_then(StageController::poll_command) {
                progressed = true;
                self.stage_command(cmd);
            }
            while let Some(ev) = self.plane.poll_event() {
                progressed = true;
                self.plane_event(ev);
            }
            if !progressed {
                match self.held.take() {
                    Some((session, orchestrator, p)) if self.is_idle() => {
                        if self.session.is_some_and(|s| s.1 == session) {
                            self.provision(orchestrator, *p);
                        }
                    }
                    held => {
                        self.held = held;
                        return any;
                    }
                }
            }
            any = true;
        }
    }

    fn ids(&self) -> Option<(RunId, StageIndex)> {
        let p = self.provisioning()?;
        Some((p.run_id, p.stage_index))
    }

    fn emit(&mut self, event: Event) {
        self.emit_at(event, None);
    }

    fn emit_at(&mut self, event: Event, origin_us: Option<u64>) {
        if self.session.is_some() {
            self.actions.push_back(NodeAction::Emit { event, origin_us });
        }
    }

    fn send(&mut self, msg: ControlMessage) {
        if self.session.is_some() {
            self.actions.push_back(NodeAction::Send(msg));
        }
    }

    fn log(&mut self, line: String) {
        self.actions.push_back(NodeAction::Log(line));
    }

    /// Feeds a fault with the component that detected it (the first one is kept).
    fn stage_fault(&mut self, reason: FaultReason, component: Component) {
        if let Some(ctl) = self.controller.as_mut() {
            self.fault_component.get_or_insert(component);
            ctl.fault(reason);
        }
    }

    /// Whether an answer about `step` concerns an earlier provisioning's step (answered
    /// after its stage stopped): such answers are dropped.
    fn is_late(&self, step: StepId) -> bool {
        self.planted != Some(PlantedNodeBug::NoLateAnswerFilter)
            && step.0 / STEP_RANGE != self.step_base / STEP_RANGE
    }

    fn count(&mut self, edge: EdgeId, extent: u64) {
        if let Some(r) = self.records.get_mut(&edge) {
            r.objects += 1;
            r.bytes += extent + crate::wire::HEADER_LEN as u64;
        }
    }
}

#[cfg(test)]
mod tests;
