//! The worker's line protocol: commands on stdin, events on stdout, one JSON object per
//! line with a `type` tag. stderr is for logs only.
//!
//! No payload byte ever travels here: every field is an identifier, a size, a layout of
//! offsets, an enum, a reason code or (in a role's configuration) a weights path. There is
//! deliberately no byte-array field a payload could hide in.

use serde::{Deserialize, Serialize};

use crate::events::Direction;
use crate::wire::reason::{
    DeviceFailure, FaultReason, ObjectFailure, RingFault, StepFailure, WorkerFatal,
};
use crate::wire::{
    ActivationDType, EdgeId, LayerRange, ObjectFlags, ObjectId, ObjectSpec, PortId, RingId,
    RingLayout, RoleId, SamplingPolicy, Sequence, StepId, WorkerGeneration,
};

/// Version of the ring ABI (header layout and cursor protocol) the worker must share with
/// the node.
pub const RING_ABI: u64 = crate::wire::spec::RING_ABI_VERSION;

/// Longest command or event line accepted, in bytes.
pub const MAX_LINE: usize = 64 * 1024;

/// A device object handle: meaningful only within the worker generation that minted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DeviceHandle {
    /// The minting worker generation.
    pub generation: WorkerGeneration,
    /// The object within that generation.
    pub id: u64,
}

/// Which device bridge the worker uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backend {
    /// Host memory.
    Cpu,
    /// Host memory with injected faults (tests only): the n-th allocation or copy fails.
    CpuFaulty {
        /// Fail the allocation with this 1-based index (and every later one).
        fail_alloc_at: Option<u64>,
        /// Fail the copy with this 1-based index (and every later one).
        fail_copy_at: Option<u64>,
    },
    /// An NVIDIA GPU (the `cuda` feature).
    Cuda {
        /// Device ordinal.
        ordinal: u32,
    },
}

/// A run as a worker knows it: its id and its orchestrator (run ids are the
/// orchestrator's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunRef {
    /// The orchestrator.
    pub orchestrator: crate::wire::NodeId,
    /// The run.
    pub run_id: crate::wire::RunId,
}

/// What a role computes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RoleConfig {
    /// One stage of a model of any supported family (`llama_stage` on the wire): loads its blocks (and embedding / head) from the
    /// GGUF file at `weights` when configured; each step consumes one input object (token
    /// ids on the first stage, activations otherwise) and produces activations, or on the
    /// last stage the sampled token id. Sequence 0 (the prefill) starts a new KV cache.
    #[serde(rename = "llama_stage")]
    ModelStage {
        /// Path of the GGUF file on this host (configuration, not payload).
        weights: String,
        /// The stage's blocks.
        layers: LayerRange,
        /// Whether it owns the token embedding.
        embedding: bool,
        /// Whether it owns the final norm, head and sampling.
        head: bool,
        /// KV cache length.
        max_seq_len: u32,
        /// KV cache element type.
        #[serde(default)]
        kv_cache: crate::wire::KvCacheDType,
        /// Activation dtype on the wire.
        activation_dtype: ActivationDType,
        /// The session's default token selection (every micro-batch entry carries its own).
        sampling: SamplingPolicy,
        /// Sequence slots: a KV cache each, and the capacity of every micro-batch table.
        #[serde(default = "one_slot")]
        max_sequences: u32,
        /// The prompt-cache store it keeps (blocks of its layers' KV in host memory).
        #[serde(default)]
        prompt_cache: crate::wire::PromptCachePlan,
        /// Bytes of every table's token-mask section (the runtime's `mask_bytes`).
        #[serde(default)]
        mask_bytes: u32,
        /// The run it serves and that run's orchestrator (what a parked role is known by).
        #[serde(default)]
        run: RunRef,
        /// The faulted run this one re-forms: a role parked from that run with the same
        /// stage (every field above but `run` equal) is taken over with its caches
        /// instead of loading a new one ([`RoleConfig::takes_over`]).
        #[serde(default)]
        resume_from: Option<RunRef>,
    },
    /// A built-in test role: every output byte `i` is `input[i % input_len] ^ xor`, for the
    /// output extent the step declares. It exercises the data plane without a model.
    Transform {
        /// Byte mask applied to the input.
        xor: u8,
        /// Time each step spends computing, in milliseconds (to test slow consumers and
        /// kills mid-step).
        delay_ms: u64,
        /// Fail the step of this sequence with `compute_failed`.
        fail_on_sequence: Option<Sequence>,
    },
}

/// How an uninstall is meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UninstallReason {
    /// Orderly stop of the edge.
    Stop,
    /// The edge faulted elsewhere.
    Fault,
}

/// How to shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShutdownMode {
    /// Finish the step in flight, then stop.
    Graceful,
    /// Abort the step in flight (it fails with `aborted`), then stop.
    AbortInFlight,
}

/// One input of a step: a loaded object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputBinding {
    /// The role port it feeds.
    pub port: PortId,
    /// The object.
    pub object_id: ObjectId,
    /// Its sequence.
    pub sequence: Sequence,
    /// Where it lives on the device.
    pub handle: DeviceHandle,
}

/// One output of a step: an object to produce into an egress ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputBinding {
    /// The role port it comes from.
    pub port: PortId,
    /// The egress ring to write it into.
    pub ring_id: RingId,
    /// The object's id (chosen by the node, never the worker).
    pub object_id: ObjectId,
    /// Its sequence (chosen by the node).
    pub sequence: Sequence,
    /// Payload bytes to produce.
    pub extent: u64,
    /// Header flags.
    pub flags: ObjectFlags,
}

/// How a posted step's output extent follows from its input, decided by the node before
/// the input exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OutputExtent {
    /// Always this many payload bytes (a token id on the last stage).
    Fixed {
        /// Payload bytes.
        bytes: u64,
    },
    /// One output row per whole input row (activations: `rows * output_row_bytes`),
    /// behind the same prefix (a micro-batch table passes through a stage unchanged).
    PerRow {
        /// Bytes of one input row.
        input_row_bytes: u64,
        /// Bytes of one output row.
        output_row_bytes: u64,
        /// Bytes in front of the rows, on both sides (0: none).
        #[serde(default)]
        prefix_bytes: u64,
    },
}

impl OutputExtent {
    /// The output extent for an input of `input_extent` payload bytes.
    pub fn resolve(self, input_extent: u64) -> u64 {
        match self {
            OutputExtent::Fixed { bytes } => bytes,
            OutputExtent::PerRow { input_row_bytes, output_row_bytes, prefix_bytes } => {
                let rows = input_extent.saturating_sub(prefix_bytes) / input_row_bytes.max(1);
                prefix_bytes.saturating_add(rows.saturating_mul(output_row_bytes))
            }
        }
    }
}

/// The output of a posted step: everything of an [`OutputBinding`] but its extent, which
/// follows from the input once it is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostedOutput {
    /// The role port it comes from.
    pub port: PortId,
    /// The egress ring to write it into.
    pub ring_id: RingId,
    /// The object's id (chosen by the node, never the worker).
    pub object_id: ObjectId,
    /// Its sequence (chosen by the node).
    pub sequence: Sequence,
    /// How its extent follows from the input's.
    pub extent: OutputExtent,
    /// Header flags.
    pub flags: ObjectFlags,
}

impl PostedOutput {
    /// The binding for an input of `input_extent` payload bytes.
    pub fn bind(&self, input_extent: u64) -> OutputBinding {
        OutputBinding {
            port: self.port,
            ring_id: self.ring_id,
            object_id: self.object_id,
            sequence: self.sequence,
            extent: self.extent.resolve(input_extent),
            flags: self.flags,
        }
    }
}

/// A command from the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Command {
    /// First command: checks the ring ABI, maps the arena, starts the backend.
    InitializeWorker {
        /// This worker's generation.
        generation: WorkerGeneration,
        /// Arena size the node mapped.
        arena_ceiling: u64,
        /// The node's ring ABI version.
        ring_abi: u64,
        /// Device backend.
        backend: Backend,
    },
    /// Configures (or replaces) a role.
    ConfigureRole {
        /// The role.
        role_id: RoleId,
        /// What it computes.
        config: RoleConfig,
    },
    /// Aborts the step in flight (it fails with `aborted` within one block's compute), and
    /// any step that starts before this command is processed; sent when a stage is being
    /// stopped, so a long prefill does not hold the teardown. Not answered.
    AbortStep,
    /// Drops a role and everything it holds (weights, KV cache); answered by
    /// `RoleReleased`, also for a role that was never configured. With `park` (a faulted
    /// run's stage) a model role is kept aside instead, with its caches, until the next
    /// `ConfigureRole`: the re-formed run takes it over when it keeps the same stage on
    /// this node, else it is dropped before the new role loads.
    ReleaseRole {
        /// The role.
        role_id: RoleId,
        /// Park the role rather than drop it.
        #[serde(default)]
        park: bool,
    },
    /// Attaches to a ring the node initialized in the arena.
    InstallRing {
        /// The ring.
        ring_id: RingId,
        /// Its edge.
        edge_id: EdgeId,
        /// The role port it serves.
        port_id: PortId,
        /// `recv`: ingress (the worker consumes); `send`: egress (the worker produces).
        direction: Direction,
        /// Where it lives.
        layout: RingLayout,
        /// What its objects look like.
        object_spec: ObjectSpec,
    },
    /// Stops using a ring; answered by `RingQuiesced`.
    UninstallRing {
        /// The ring.
        ring_id: RingId,
        /// Why.
        reason: UninstallReason,
    },
    /// Wake hint: new bytes were committed to an ingress ring.
    RingReadable {
        /// The ring.
        ring_id: RingId,
    },
    /// Wake hint: bytes were released from an egress ring.
    RingWritable {
        /// The ring.
        ring_id: RingId,
    },
    /// Runs one step of a role.
    ExecuteStep {
        /// The role.
        role_id: RoleId,
        /// The step.
        step_id: StepId,
        /// Loaded input objects.
        inputs: Vec<InputBinding>,
        /// Objects to produce.
        outputs: Vec<OutputBinding>,
        /// Free the inputs once the step ends, however it ends (completed, failed, aborted
        /// or refused).
        release_inputs_after: bool,
    },
    /// Posts a step ahead of its input: the worker runs it as soon as the object with
    /// `sequence` is loaded from `ring_id` (on `edge_id`, into `port`), and only on that
    /// object; it reports the load as `ObjectLoaded` with `taken_by` naming the step, then
    /// the step's `StepCompleted` or `StepFailed`. The input is freed once the step ends.
    /// A post for a sequence the ring has already loaded can never run: it is withdrawn at
    /// once (`StepWithdrawn`). One post per ring at a time; a second, or a post naming no
    /// installed ingress ring, fails with `post_rejected`.
    PostStep {
        /// The role.
        role_id: RoleId,
        /// The step.
        step_id: StepId,
        /// The ingress ring whose object it takes.
        ring_id: RingId,
        /// That ring's edge.
        edge_id: EdgeId,
        /// The role port the input feeds.
        port: PortId,
        /// The sequence of the object it takes.
        sequence: Sequence,
        /// Its output.
        output: PostedOutput,
    },
    /// Withdraws a posted step that has not taken its object yet (answered by
    /// `StepWithdrawn`); a step that already took it runs to its end.
    WithdrawStep {
        /// The step.
        step_id: StepId,
    },
    /// Frees a device object.
    ReleaseDeviceObject {
        /// The object.
        handle: DeviceHandle,
    },
    /// Stops the worker.
    ShutdownWorker {
        /// How.
        mode: ShutdownMode,
    },
}

/// An event from the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", deny_unknown_fields)]
pub enum Event {
    /// Initialized: arena mapped, backend up.
    WorkerReady {
        /// The worker's process id.
        pid: u32,
        /// Its generation.
        generation: WorkerGeneration,
        /// Its ring ABI.
        ring_abi: u64,
        /// Its backend.
        backend: Backend,
    },
    /// The worker cannot go on; it exits non-zero after this line.
    WorkerFatal {
        /// Why.
        reason: WorkerFatal,
    },
    /// The worker stopped on request; it exits 0 after this line.
    WorkerStopped {
        /// How it was asked to stop.
        mode: ShutdownMode,
    },
    /// A role is configured.
    RoleConfigured {
        /// The role.
        role_id: RoleId,
        /// It took over a parked role of the run this one re-forms, with its caches (no
        /// weights were loaded again).
        #[serde(default)]
        taken_over: bool,
    },
    /// A role could not be configured.
    RoleFailed {
        /// The role.
        role_id: RoleId,
        /// Why.
        reason: FaultReason,
    },
    /// A role was dropped (answer to `ReleaseRole`).
    RoleReleased {
        /// The role.
        role_id: RoleId,
    },
    /// A ring is attached.
    RingInstalled {
        /// The ring.
        ring_id: RingId,
    },
    /// A ring faulted; the worker no longer touches it.
    RingFault {
        /// The ring.
        ring_id: RingId,
        /// Why.
        reason: RingFault,
    },
    /// A ring is no longer touched by the worker (answer to `UninstallRing`).
    RingQuiesced {
        /// The ring.
        ring_id: RingId,
    },
    /// A whole object was copied from an ingress ring into device memory.
    ObjectLoaded {
        /// The ring.
        ring_id: RingId,
        /// Its edge.
        edge_id: EdgeId,
        /// Its port.
        port_id: PortId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Payload bytes.
        extent: u64,
        /// Where it lives.
        handle: DeviceHandle,
        /// The posted step that took the object as its input (it owns it from now on);
        /// `None`: the node decides (an `ExecuteStep` or a release).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        taken_by: Option<StepId>,
        /// When the load completed, on the host's monotonic clock (µs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_us: Option<u64>,
    },
    /// A whole object was committed to an egress ring.
    ObjectProduced {
        /// The ring.
        ring_id: RingId,
        /// Its edge.
        edge_id: EdgeId,
        /// Its port.
        port_id: PortId,
        /// The object.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Payload bytes.
        extent: u64,
        /// When its last byte was committed, on the host's monotonic clock (µs).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        at_us: Option<u64>,
    },
    /// An object could not be loaded; the ring stops being consumed.
    ObjectFailed {
        /// The ring.
        ring_id: RingId,
        /// Its edge.
        edge_id: EdgeId,
        /// Its port.
        port_id: PortId,
        /// The object, if its header was read.
        object_id: Option<ObjectId>,
        /// Its sequence, if its header was read.
        sequence: Option<Sequence>,
        /// Why.
        reason: ObjectFailure,
    },
    /// A step produced every declared output.
    StepCompleted {
        /// The role.
        role_id: RoleId,
        /// The step.
        step_id: StepId,
    },
    /// A step failed.
    StepFailed {
        /// The role.
        role_id: RoleId,
        /// The step.
        step_id: StepId,
        /// Why.
        reason: StepFailure,
    },
    /// A posted step will never run: withdrawn (`WithdrawStep`, its role released, its
    /// ring uninstalled, the worker stopping) or passed (its object was already loaded).
    StepWithdrawn {
        /// The role.
        role_id: RoleId,
        /// The step.
        step_id: StepId,
    },
    /// A device object was freed.
    DeviceObjectReleased {
        /// The object.
        handle: DeviceHandle,
    },
    /// A device object could not be freed.
    ReleaseFailed {
        /// The object.
        handle: DeviceHandle,
        /// Why.
        reason: DeviceFailure,
    },
    /// How many device objects the worker holds (loaded inputs and the outputs of the step
    /// in flight), sent whenever the count changed while handling a command or polling the
    /// rings. Zero once a run released everything it loaded.
    DeviceObjects {
        /// Live device objects.
        live: u64,
    },
    /// Wake hint: bytes were committed to an egress ring.
    RingReadable {
        /// The ring.
        ring_id: RingId,
    },
    /// Wake hint: bytes were released from an ingress ring.
    RingWritable {
        /// The ring.
        ring_id: RingId,
    },
}

/// Why a protocol line could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineError {
    /// Longer than [`MAX_LINE`].
    #[error("line longer than {MAX_LINE} bytes")]
    TooLong,
    /// Not JSON, or not a known message shape.
    #[error("malformed line: {0}")]
    Malformed(String),
}

/// Encodes one message as a JSON line (with the trailing newline).
pub fn encode_line<T: Serialize>(msg: &T) -> String {
    // Messages hold only numbers, enums and fixed structs: serialization cannot fail.
    let mut line = serde_json::to_string(msg).unwrap_or_default();
    line.push('\n');
    line
}

/// Decodes one line (without its newline).
pub fn decode_line<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, LineError> {
    if line.len() > MAX_LINE {
        return Err(LineError::TooLong);
    }
    serde_json::from_str(line).map_err(|e| LineError::Malformed(e.to_string()))
}

fn one_slot() -> u32 {
    1
}

impl RoleConfig {
    /// Whether this configuration takes over `parked` (a model role kept aside from a
    /// faulted run): it re-forms that run (`resume_from`) and runs the very same stage —
    /// the same weights, layers, ends, context, caches, activations and slots.
    pub fn takes_over(&self, parked: &RoleConfig) -> bool {
        match (self, parked) {
            (
                RoleConfig::ModelStage { resume_from: Some(from), .. },
                RoleConfig::ModelStage { run, .. },
            ) if from == run => {
                // The session's default sampling is no part of the caches.
                let strip = |c: &RoleConfig| {
                    let mut c = c.clone();
                    if let RoleConfig::ModelStage { run, resume_from, sampling, .. } = &mut c {
                        (*run, *resume_from) = (RunRef::default(), None);
                        *sampling = SamplingPolicy::Greedy;
                    }
                    c
                };
                strip(self) == strip(parked)
            }
            _ => false,
        }
    }
}
