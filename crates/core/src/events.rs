//! The observability event stream.
//!
//! Every lifecycle fact of a run is one [`Event`], serialized as one JSON object per line
//! with a `type` tag (`{"type":"stage_ready","run_id":1,...}`). Tests and operators read
//! this stream instead of logs. Events carry identities only — never payload bytes.
//!
//! Events are plain data: the component that observes a fact builds the event, and the
//! driver that owns a clock stamps it into an [`EventLine`].

use serde::{Deserialize, Serialize};

use crate::wire::reason::{BootFault, Component, FaultReason};
use crate::wire::{
    EdgeId, LayerRange, NodeId, ObjectId, RingId, RunId, Sequence, StageIndex, StepId,
    WorkerGeneration,
};

/// Which side of an edge a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The producing (send) end.
    Send,
    /// The consuming (receive) end.
    Recv,
}

/// Who reports a step of provisioning: the orchestrator that asks for it, or the node
/// that starts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reporter {
    /// The orchestrator sent the provisioning.
    Orchestrator,
    /// The stage's node started it.
    Node,
}

/// Why a run completed normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompletionCause {
    /// The model produced its end-of-sequence token.
    Eos,
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The KV caches are full (`max_seq_len` reached).
    ContextFull,
    /// A stop string appeared in the text (its client stopped the one sequence).
    Stop,
    /// The one sequence was cancelled by its client.
    Cancelled,
    /// A session of several sequences served every one of them.
    RequestsDone,
}

/// The one terminal outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The run generated its tokens.
    Completed,
    /// The run faulted.
    Faulted,
    /// An operator stopped the run.
    OperatorStopped,
}

/// A part of a run whose teardown the orchestrator waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "part", rename_all = "snake_case")]
pub enum TeardownPart {
    /// A stage (its `stage_stopped`).
    Stage {
        /// The stage.
        stage_index: StageIndex,
    },
    /// The orchestrator's token endpoints (stopped, their leases released).
    TokenEndpoints,
}

/// One lifecycle fact. See `specs/events.md` for the ordering guarantees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A node process started booting.
    NodeStarted {
        /// The node.
        node_id: NodeId,
    },
    /// A node holds every boot readiness fact.
    NodeAvailable {
        /// The node.
        node_id: NodeId,
        /// Its iroh endpoint id.
        endpoint_id: String,
        /// Its data-plane addresses.
        addrs: Vec<String>,
    },
    /// A node failed to boot and is not eligible for planning.
    NodeFaulted {
        /// The node.
        node_id: NodeId,
        /// Which resource failed.
        reason: BootFault,
        /// Detecting component.
        component: Component,
    },
    /// A node stopped cleanly (SIGINT, SIGTERM, its supervisor): the last line of its
    /// `--json` stream. Its control session was told first (`node.stopped`).
    NodeStopped {
        /// The node.
        node_id: NodeId,
    },
    /// A SWIM datagram was refused: unsigned, from a signer the pool does not name, with a
    /// bad signature, replayed or stale, or naming a member its signer may not speak as.
    /// Reported for the 1st, 2nd, 4th, ... refusal of each reason; it changes nothing in
    /// the pool's readiness.
    MembershipRejected {
        /// Why (`unsigned`, `unknown_signer`, `bad_signature`, `replayed`, `stale`,
        /// `identity_mismatch`).
        reason: String,
        /// The datagram's UDP source.
        from: String,
        /// The key it claimed to be signed with, if it had an envelope.
        signer: Option<String>,
        /// Refusals of this reason so far.
        count: u64,
    },
    /// A node measured its links to the pool's other nodes and to the orchestrator, before
    /// the plan (round trip and, where the probe could tell, bandwidth).
    LinksMeasured {
        /// The node that measured.
        node_id: NodeId,
        /// Its links, one per peer it reached.
        links: Vec<crate::wire::LinkRtt>,
    },
    /// The intended pool is alive and stable.
    PoolReady {
        /// The candidate nodes, sorted.
        nodes: Vec<NodeId>,
    },
    /// A run plan was committed.
    RunPlanned {
        /// The run.
        run_id: RunId,
        /// Number of stages.
        stages: u32,
        /// Number of edges.
        edges: u32,
        /// Its context and why it is that long (the plan's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<crate::wire::PlanContext>,
    },
    /// A stage's provisioning was sent (orchestrator) or accepted (node).
    StageProvisionStarted {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// `orchestrator` when it sent the provisioning, `node` when the node started it
        /// (each stage has one of each).
        #[serde(default = "orchestrator_reports")]
        by: Reporter,
    },
    /// A stage started downloading its weights.
    WeightsDownloadStarted {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// Expected size in bytes.
        bytes: u64,
    },
    /// A stage's weights download moves on (at most once per percent or MiB).
    WeightsDownloading {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// Bytes held so far.
        bytes: u64,
        /// Bytes the download needs in all.
        total: u64,
    },
    /// A stage finished downloading and checking its weights.
    WeightsDownloaded {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// Bytes downloaded.
        bytes: u64,
    },
    /// A stage's worker loaded and bound its weights.
    WeightsLoaded {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// The blocks loaded.
        layers: LayerRange,
        /// Bytes loaded.
        bytes: u64,
        /// The worker took over the faulted run's role for this very stage, with its
        /// caches (a re-formed run's stage that stayed where it was).
        #[serde(default)]
        kept_caches: bool,
    },
    /// Establishment of one end of an edge started.
    EdgeProvisionStarted {
        /// The run.
        run_id: RunId,
        /// The node establishing the end.
        node_id: NodeId,
        /// The edge.
        edge_id: EdgeId,
        /// Which end.
        direction: Direction,
    },
    /// One end of an edge is ready (lease, ring and driver state installed).
    EdgeReady {
        /// The run.
        run_id: RunId,
        /// The node holding the end.
        node_id: NodeId,
        /// The edge.
        edge_id: EdgeId,
        /// The ring backing the end.
        ring_id: RingId,
        /// Which end.
        direction: Direction,
    },
    /// A stage holds worker, weights and both edges.
    StageReady {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// Every stage and both token endpoints are ready.
    ReadinessBarrierPassed {
        /// The run.
        run_id: RunId,
    },
    /// The orchestrator wrote a token-in object (sequence 0 is the prompt).
    PromptInjected {
        /// The run.
        run_id: RunId,
        /// The token-in edge.
        edge_id: EdgeId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Token ids in the object.
        tokens: u32,
    },
    /// A worker loaded a whole object from an ingress ring.
    ObjectLoaded {
        /// The run.
        run_id: RunId,
        /// The node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// The edge.
        edge_id: EdgeId,
        /// The ingress ring.
        ring_id: RingId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Payload bytes.
        extent: u64,
        /// The worker generation holding it.
        worker_generation: WorkerGeneration,
    },
    /// A stage asked its worker to execute a step.
    ExecuteStepStarted {
        /// The run.
        run_id: RunId,
        /// The node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// The step.
        step_id: StepId,
        /// The sequence it computes.
        sequence: Sequence,
        /// The worker generation running it.
        worker_generation: WorkerGeneration,
    },
    /// A worker committed a whole object to an egress ring.
    ObjectProduced {
        /// The run.
        run_id: RunId,
        /// The node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// The edge.
        edge_id: EdgeId,
        /// The egress ring.
        ring_id: RingId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Payload bytes.
        extent: u64,
    },
    /// A worker finished a step and every declared output.
    StepCompleted {
        /// The run.
        run_id: RunId,
        /// The node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// The step.
        step_id: StepId,
        /// The sequence it computed.
        sequence: Sequence,
        /// The worker generation that ran it.
        worker_generation: WorkerGeneration,
    },
    /// The orchestrator consumed a token object.
    TokenReceived {
        /// The run.
        run_id: RunId,
        /// The token-out edge.
        edge_id: EdgeId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
    },
    /// The run ended normally (terminal outcome).
    RunCompleted {
        /// The run.
        run_id: RunId,
        /// Tokens generated.
        tokens: u64,
        /// Why generation stopped.
        cause: CompletionCause,
    },
    /// The run faulted (terminal outcome). Carries the first fault only.
    RunFaulted {
        /// The run.
        run_id: RunId,
        /// The first fault's reason.
        reason: FaultReason,
        /// The component that detected it.
        component: Component,
        /// The node where it was detected, if any.
        node_id: Option<NodeId>,
        /// The stage concerned, if any.
        stage_index: Option<StageIndex>,
        /// The edge concerned, if any.
        edge_id: Option<EdgeId>,
    },
    /// An operator stopped the run (terminal outcome).
    RunStopped {
        /// The run.
        run_id: RunId,
        /// How it was stopped.
        reason: FaultReason,
    },
    /// The orchestrator sent `StopRun` to a stage.
    StopRunSent {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// A stage stopped its edges, released its leases and reset its role.
    StageStopped {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// The orchestrator lost a stage's node (its control session closed, or SWIM declared
    /// it down): that stage will confirm nothing more. It counts as settled for teardown
    /// and is never reported as `stage_stopped` on its behalf.
    StageLost {
        /// The run.
        run_id: RunId,
        /// The stage's node.
        node_id: NodeId,
        /// The stage.
        stage_index: StageIndex,
        /// How it was lost.
        reason: FaultReason,
    },
    /// Teardown finished; always the last event of a run. Every stage reported stopped or
    /// was lost, and the token endpoints stopped with their leases released — or the
    /// teardown deadline passed, and `unconfirmed` names what had not confirmed by then.
    RunTornDown {
        /// The run.
        run_id: RunId,
        /// The run's one terminal outcome.
        outcome: RunOutcome,
        /// Parts that did not confirm their teardown before the deadline (empty when
        /// everything confirmed).
        #[serde(default)]
        unconfirmed: Vec<TeardownPart>,
        /// Stages that were lost instead of confirming (see `stage_lost`).
        #[serde(default)]
        lost: Vec<StageIndex>,
        /// The nodes of those stages, in the same order.
        #[serde(default)]
        lost_nodes: Vec<NodeId>,
    },
    /// A stage node was lost and the session re-forms instead of failing: its live and
    /// queued sequences are kept (the run that faulted still tears down as always).
    SessionReforming {
        /// The run that faulted.
        run_id: RunId,
        /// Why it faulted.
        cause: FaultReason,
        /// The sequences kept to resume.
        sequences: u32,
    },
    /// A kept sequence was re-admitted to the re-formed pipeline: its prompt and the
    /// tokens it had generated are its prefill, and decoding continues from there.
    SequenceResumed {
        /// The new run.
        run_id: RunId,
        /// Its sequence in the new run.
        id: u64,
        /// Tokens replayed (prompt and generated).
        replayed_tokens: u32,
        /// Of which the positions its slot kept on the stages that stayed where they were:
        /// those stages send their logged rows for them and compute none (0: every stage
        /// recomputes the replay).
        #[serde(default)]
        kept_tokens: u32,
    },
    /// The session re-formed: the new run's plan, one entry per stage.
    SessionReformed {
        /// The new run.
        run_id: RunId,
        /// The new plan's stages.
        plan: Vec<PlannedStage>,
    },
    /// Re-forming was given up (`why`: `resume_timeout`, `operator_stop`, `plan`): every
    /// kept sequence ends with the fault that started it.
    SessionReformFailed {
        /// The run that faulted.
        run_id: RunId,
        /// The fault.
        cause: FaultReason,
        /// Why re-forming stopped.
        why: String,
    },
}

/// One stage of a re-formed plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedStage {
    /// The stage.
    pub stage_index: StageIndex,
    /// Its node.
    pub node_id: NodeId,
    /// Its first layer.
    pub layer_start: u32,
    /// One past its last layer.
    pub layer_end: u32,
    /// It stays where the faulted run had it (same node, layers and settings): its node
    /// keeps its caches and it recomputes nothing it held.
    #[serde(default)]
    pub kept: bool,
}

impl Event {
    /// The `type` tag of this event.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::NodeStarted { .. } => "node_started",
            Event::NodeAvailable { .. } => "node_available",
            Event::NodeFaulted { .. } => "node_faulted",
            Event::NodeStopped { .. } => "node_stopped",
            Event::MembershipRejected { .. } => "membership_rejected",
            Event::LinksMeasured { .. } => "links_measured",
            Event::PoolReady { .. } => "pool_ready",
            Event::RunPlanned { .. } => "run_planned",
            Event::StageProvisionStarted { .. } => "stage_provision_started",
            Event::WeightsDownloadStarted { .. } => "weights_download_started",
            Event::WeightsDownloading { .. } => "weights_downloading",
            Event::WeightsDownloaded { .. } => "weights_downloaded",
            Event::WeightsLoaded { .. } => "weights_loaded",
            Event::EdgeProvisionStarted { .. } => "edge_provision_started",
            Event::EdgeReady { .. } => "edge_ready",
            Event::StageReady { .. } => "stage_ready",
            Event::ReadinessBarrierPassed { .. } => "readiness_barrier_passed",
            Event::PromptInjected { .. } => "prompt_injected",
            Event::ObjectLoaded { .. } => "object_loaded",
            Event::ExecuteStepStarted { .. } => "execute_step_started",
            Event::ObjectProduced { .. } => "object_produced",
            Event::StepCompleted { .. } => "step_completed",
            Event::TokenReceived { .. } => "token_received",
            Event::RunCompleted { .. } => "run_completed",
            Event::RunFaulted { .. } => "run_faulted",
            Event::RunStopped { .. } => "run_stopped",
            Event::StopRunSent { .. } => "stop_run_sent",
            Event::StageStopped { .. } => "stage_stopped",
            Event::StageLost { .. } => "stage_lost",
            Event::RunTornDown { .. } => "run_torn_down",
            Event::SessionReforming { .. } => "session_reforming",
            Event::SequenceResumed { .. } => "sequence_resumed",
            Event::SessionReformed { .. } => "session_reformed",
            Event::SessionReformFailed { .. } => "session_reform_failed",
        }
    }

    /// Whether this event is one of a run's terminal outcomes.
    pub fn is_terminal_outcome(&self) -> bool {
        matches!(
            self,
            Event::RunCompleted { .. } | Event::RunFaulted { .. } | Event::RunStopped { .. }
        )
    }
}

/// An event stamped by the driver that observed it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventLine {
    /// Microseconds since the stream started (monotonic).
    pub ts_us: u64,
    /// When and where the event happened, as the host's `CLOCK_MONOTONIC` in microseconds
    /// (see `crate::clock::monotonic_us`): comparable between processes of one host (a hop's latency
    /// is `object_loaded.origin_us - object_produced.origin_us`), not between hosts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_us: Option<u64>,
    /// The event, flattened beside `ts_us`.
    #[serde(flatten)]
    pub event: Event,
}

impl EventLine {
    /// Serializes the line as one JSON object without a trailing newline.
    pub fn to_json(&self) -> String {
        // An event holds only strings, numbers and enums: serialization cannot fail.
        serde_json::to_string(self)
            .unwrap_or_else(|e| format!("{{\"type\":\"serialization_error\",\"message\":\"{e}\"}}"))
    }

    /// Parses one JSON line.
    pub fn from_json(line: &str) -> Result<EventLine, serde_json::Error> {
        serde_json::from_str(line)
    }
}

/// The reporter of a `stage_provision_started` line written before the field existed.
fn orchestrator_reports() -> Reporter {
    Reporter::Orchestrator
}
