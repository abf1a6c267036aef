//! Stable reason enums: every fault, rejection and failure in swactor is reported with one
//! of these codes, together with the [`Component`] that detected it.
//!
//! Codes are `snake_case` strings that never change meaning once released; new codes may be
//! added. A [`FaultReason`] serializes as `"class.code"` (for example `"stream.write_failed"`)
//! so that event streams can be filtered with plain string comparison.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

macro_rules! reason_enum {
    (
        $(#[$doc:meta])*
        $name:ident {
            $( $(#[$vdoc:meta])* $variant:ident = $code:literal, )+
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $( $(#[$vdoc])* #[serde(rename = $code)] $variant, )+
        }

        impl $name {
            /// Every code of this enum, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The stable `snake_case` code.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $code, )+
                }
            }

            /// Parses a stable code.
            pub fn from_code(code: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|r| r.as_str() == code)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

reason_enum!(
    /// Why a node failed to boot (it never becomes available).
    BootFault {
        /// The node identity (key file) is missing, unreadable or invalid.
        IdentityInvalid = "identity_invalid",
        /// The memfd arena could not be created or sized.
        ArenaCreate = "arena_create_failed",
        /// The arena could not be mapped.
        ArenaMap = "arena_map_failed",
        /// The worker process could not be started.
        WorkerStart = "worker_start_failed",
        /// The worker did not report ready in time.
        WorkerInitTimeout = "worker_init_timeout",
        /// The worker kept exiting soon after each start (`worker.crash_looping`).
        WorkerCrashLooping = "worker_crash_looping",
        /// The compute device (`--device`) is missing, or this build cannot drive it.
        DeviceUnavailable = "device_unavailable",
        /// The iroh endpoint could not be bound.
        TransportBind = "transport_bind_failed",
        /// None of the node's `--relay`s could be reached within the boot deadline.
        RelayUnreachable = "relay_unreachable",
        /// The SWIM participant could not join or bind.
        MembershipJoin = "membership_join_failed",
        /// The control inbox could not be opened.
        ControlInbox = "control_inbox_failed",
        /// The admin socket could not be opened.
        AdminSocket = "admin_socket_failed",
        /// Something other than a stale socket of ours is at the admin socket's path (a
        /// file, a directory, another live node's socket); it was left untouched.
        AdminSocketInUse = "admin_socket_in_use",
    }
);

reason_enum!(
    /// Why the planner rejected a plan request, or a plan failed validation.
    PlanRejection {
        /// A placement or the pool names a node that the inventory does not hold.
        UnknownNode = "unknown_node",
        /// Two inventory entries (or the orchestrator and a node) share a node id.
        DuplicateNode = "duplicate_node",
        /// One node is assigned two stages, or one stage two nodes.
        DuplicateStageAssignment = "duplicate_stage_assignment",
        /// A stage has no node or no layer range.
        MissingStageAssignment = "missing_stage_assignment",
        /// The stage count is zero.
        ZeroStages = "zero_stages",
        /// More stages than the model has blocks.
        TooManyStages = "too_many_stages",
        /// More stages than the pool has nodes.
        NotEnoughNodes = "not_enough_nodes",
        /// An edge's producer or consumer does not match the stages it connects.
        EdgeEndpointMismatch = "edge_endpoint_mismatch",
        /// Two edges share an id.
        DuplicateEdgeId = "duplicate_edge_id",
        /// An object extent is zero or not whole rows.
        InvalidExtent = "invalid_extent",
        /// A dtype width does not match its payload.
        InvalidDTypeWidth = "invalid_dtype_width",
        /// The hidden size is zero or inconsistent with the head layout.
        InvalidHiddenDim = "invalid_hidden_dim",
        /// An alignment is not a power of two.
        AlignmentNotPowerOfTwo = "alignment_not_power_of_two",
        /// Layer ranges are empty, overlapping, out of order or do not cover the model.
        InvalidLayerRanges = "invalid_layer_ranges",
        /// The model facts are inconsistent with a transformer layout.
        ModelInconsistent = "model_inconsistent",
        /// A stage's weights, KV cache and rings exceed its node's memory.
        ExceedsNodeMemory = "exceeds_node_memory",
        /// A stage's rings do not fit its node's arena.
        ExceedsNodeArena = "exceeds_node_arena",
        /// The pool file's device for a node is not the one the node computes on.
        DeviceMismatch = "device_mismatch",
        /// A runtime setting (max_seq_len, max_tokens, sampling) is invalid.
        InvalidRuntime = "invalid_runtime",
        /// The pool inventory itself is invalid.
        InvalidPool = "invalid_pool",
        /// The weights URL is not an `http` or `https` URL with a host.
        InvalidWeightsUrl = "invalid_weights_url",
        /// The plan's predicted decode rate is below `--min-speedup` times the best single
        /// node's.
        BelowMinSpeedup = "below_min_speedup",
    }
);

reason_enum!(
    /// Why an object on an edge was rejected or could not be loaded.
    ObjectFailure {
        /// The header magic is wrong.
        BadMagic = "bad_magic",
        /// The header version is unsupported.
        UnsupportedVersion = "unsupported_version",
        /// The header length is wrong.
        BadHeaderLength = "bad_header_length",
        /// Reserved header bytes are not zero.
        ReservedNonZero = "reserved_nonzero",
        /// Unknown flag bits are set.
        UnknownFlags = "unknown_flags",
        /// The extent exceeds the edge's maximum.
        ExtentOverMax = "extent_over_max",
        /// The extent is not whole rows.
        ExtentMisaligned = "extent_misaligned",
        /// The payload is empty.
        EmptyObject = "empty_object",
        /// The sequence is duplicated, skipped or regressed.
        SequenceViolation = "sequence_violation",
        /// The stream or ring ended inside an object.
        EofMidObject = "eof_mid_object",
        /// Device memory for the object could not be allocated.
        AllocationFailed = "allocation_failed",
        /// Copying the object to or from the device failed.
        CopyFailed = "copy_failed",
    }
);

reason_enum!(
    /// Why a ring faulted.
    RingFault {
        /// The ring header's magic or ABI version is wrong.
        AbiMismatch = "abi_mismatch",
        /// A cursor moved outside the protocol (regressed or past capacity).
        CursorCorrupt = "cursor_corrupt",
        /// The ring layout does not fit the arena.
        LayoutInvalid = "layout_invalid",
        /// The worker that owned the other side died.
        WorkerCrashed = "worker_crashed",
        /// The ring id is not installed.
        UnknownRing = "unknown_ring",
    }
);

reason_enum!(
    /// Why a worker step failed.
    StepFailure {
        /// The model computation failed.
        ComputeFailed = "compute_failed",
        /// An input handle is not loaded.
        MissingInput = "missing_input",
        /// A handle belongs to an older worker generation.
        StaleHandle = "stale_handle",
        /// An output ring faulted during the step.
        OutputRingFault = "output_ring_fault",
        /// The step was aborted by shutdown.
        Aborted = "aborted",
        /// No role is configured for the step.
        RoleNotConfigured = "role_not_configured",
        /// A posted step names no installed ingress ring, or its ring already has one.
        PostRejected = "post_rejected",
    }
);

reason_enum!(
    /// Why a worker process failed as a whole.
    WorkerFatal {
        /// The ring ABI version differs between node and worker.
        AbiMismatch = "abi_mismatch",
        /// A command line was not valid JSON or had a bad shape.
        MalformedCommand = "malformed_command",
        /// A command was not expected in the worker's state.
        UnexpectedCommand = "unexpected_command",
        /// The arena fd could not be mapped.
        ArenaMapFailed = "arena_map_failed",
        /// The inherited doorbells named in the environment are unusable.
        DoorbellUnusable = "doorbell_unusable",
        /// The requested compute backend is not available.
        BackendUnavailable = "backend_unavailable",
        /// The worker did not become ready in time.
        InitTimeout = "init_timeout",
        /// The worker process exited or was killed.
        Exited = "exited",
        /// The worker's event stream was malformed.
        MalformedEvent = "malformed_event",
        /// The worker kept crashing soon after each start, restarts paused longer and
        /// longer ([`crate::workerctl::RestartPolicy`]), and the controller gave up.
        CrashLooping = "crash_looping",
    }
);

reason_enum!(
    /// Why a device operation failed.
    DeviceFailure {
        /// Allocation failed.
        AllocationFailed = "allocation_failed",
        /// A host/device copy failed.
        CopyFailed = "copy_failed",
        /// The handle belongs to an older worker generation.
        StaleHandle = "stale_handle",
        /// The handle is unknown.
        UnknownHandle = "unknown_handle",
        /// The object is still in use by compute or a copy.
        InUse = "in_use",
    }
);

reason_enum!(
    /// Why a stage's weights could not be made ready.
    WeightsFailure {
        /// The download failed (HTTP error, connection).
        DownloadFailed = "download_failed",
        /// The downloaded size differs from the plan.
        SizeMismatch = "size_mismatch",
        /// The sha256 differs from the plan.
        ChecksumMismatch = "checksum_mismatch",
        /// The GGUF could not be parsed.
        ParseFailed = "parse_failed",
        /// The stage's layer range lies outside the file's blocks.
        InvalidRange = "invalid_range",
        /// A tensor the stage needs is missing.
        MissingTensor = "missing_tensor",
        /// A tensor's type is not supported.
        UnsupportedTensorType = "unsupported_tensor_type",
        /// Memory for the weights could not be allocated.
        AllocationFailed = "allocation_failed",
        /// The worker could not bind the weights to its role.
        BindFailed = "bind_failed",
    }
);

reason_enum!(
    /// Why an edge stream faulted.
    StreamFault {
        /// Reading from the QUIC stream failed.
        ReadFailed = "read_failed",
        /// Writing to the QUIC stream failed.
        WriteFailed = "write_failed",
        /// The stream violated the edge protocol (bad preamble).
        ProtocolError = "protocol_error",
        /// The stream came from a peer that is not the edge's planned producer.
        UnauthorizedPeer = "unauthorized_peer",
        /// The stream names an edge id outside the active plan.
        UnknownEdge = "unknown_edge",
        /// The peer closed the stream or connection.
        PeerClosed = "peer_closed",
        /// Connecting to the peer failed.
        ConnectFailed = "connect_failed",
        /// A second stream for an edge whose stream is already taken (never displaces it).
        DuplicateStream = "duplicate_stream",
    }
);

reason_enum!(
    /// Why a control session faulted.
    ControlFault {
        /// A frame could not be decoded.
        MalformedFrame = "malformed_frame",
        /// A frame exceeds the size limit.
        FrameTooLarge = "frame_too_large",
        /// The peer speaks another control protocol version.
        UnsupportedVersion = "unsupported_version",
        /// The peer is not the configured orchestrator.
        UnauthorizedOrchestrator = "unauthorized_orchestrator",
        /// The control connection was lost.
        ConnectionLost = "connection_lost",
        /// The authorized orchestrator's key opened a newer session on the node (a second
        /// orchestrator took the pool over): the older session and the run it carried end.
        TakenOver = "taken_over",
    }
);

reason_enum!(
    /// Why a required member is considered lost.
    MembershipLoss {
        /// SWIM declared the node down.
        NodeDown = "node_down",
        /// SWIM suspects the node.
        NodeSuspect = "node_suspect",
        /// The node reported a fault.
        NodeFaulted = "node_faulted",
    }
);

reason_enum!(
    /// Why a stage faulted on its own account.
    StageFault {
        /// An inbound object's sequence was duplicated, skipped or regressed.
        SequenceViolation = "sequence_violation",
        /// The provisioning message was invalid.
        ProvisionRejected = "provision_rejected",
        /// Run work arrived for a stage that is not provisioned.
        NotProvisioned = "not_provisioned",
        /// A second provisioning arrived for an active run.
        AlreadyProvisioned = "already_provisioned",
    }
);

reason_enum!(
    /// Why a token object from the pipeline was rejected by the orchestrator.
    TokenFault {
        /// The token object is not a single valid token id.
        Malformed = "malformed",
        /// The token object's sequence is not the one expected.
        OutOfOrder = "out_of_order",
        /// The token id is outside the vocabulary.
        OutOfVocab = "out_of_vocab",
    }
);

reason_enum!(
    /// Which wait ran out.
    Timeout {
        /// The pool did not become ready.
        PoolReadiness = "pool_readiness",
        /// Stages did not report ready.
        Readiness = "readiness",
        /// No token arrived in time.
        TokenWait = "token_wait",
        /// Teardown did not finish.
        Teardown = "teardown",
        /// The worker did not initialize.
        WorkerInit = "worker_init",
        /// The worker did not stop.
        WorkerStop = "worker_stop",
    }
);

reason_enum!(
    /// How an operator stopped a run.
    OperatorStop {
        /// Ctrl-C (SIGINT).
        Interrupt = "interrupt",
        /// SIGTERM.
        Terminate = "terminate",
    }
);

reason_enum!(
    /// The component that detected a fault.
    Component {
        /// The node's arena manager.
        ArenaManager = "arena_manager",
        /// A shared-memory ring.
        Ring = "ring",
        /// A worker's ingress parser.
        IngressParser = "ingress_parser",
        /// A worker's egress producer.
        EgressProducer = "egress_producer",
        /// A worker's device bridge.
        DeviceBridge = "device_bridge",
        /// The worker process.
        Worker = "worker",
        /// The node-side worker controller.
        WorkerCtl = "worker_ctl",
        /// The node's edge establisher.
        EdgeEstablisher = "edge_establisher",
        /// A send edge actor.
        TxEdge = "tx_edge",
        /// A receive edge actor.
        RxEdge = "rx_edge",
        /// The iroh driver and its pumps.
        Driver = "driver",
        /// The control channel.
        ControlChannel = "control_channel",
        /// The SWIM membership.
        Membership = "membership",
        /// The orchestrator's pool readiness gate.
        PoolGate = "pool_gate",
        /// Node boot.
        NodeBoot = "node_boot",
        /// A stage controller.
        StageController = "stage_controller",
        /// Weight loading.
        Weights = "weights",
        /// The orchestrator's run state machine.
        Orchestrator = "orchestrator",
        /// An orchestrator token endpoint.
        TokenEndpoint = "token_endpoint",
        /// The planner.
        Planner = "planner",
        /// A human operator.
        Operator = "operator",
    }
);

reason_enum!(
    /// Why a node ended its sessions on its own.
    NodeStop {
        /// The node was stopped cleanly (SIGINT, SIGTERM, its supervisor): a run it served
        /// faults.
        Stopped = "stopped",
    }
);

reason_enum!(
    /// Why a serving session's pipeline was ended on purpose to re-form it.
    PoolChange {
        /// More nodes are ready than the pipeline uses (a lost node came back, or a new
        /// one joined): the session re-forms to the larger plan, losing nothing.
        CapacityGrew = "capacity_grew",
    }
);

reason_enum!(
    /// Why a request ended without its result when no fault of its own ended it (a
    /// request error's reason beside a fault's `class.code` and a refusal's `busy`).
    RequestEnd {
        /// The session ended before the request did.
        SessionEnded = "session.ended",
        /// The operator stopped the run (or the server's grace ran out) first.
        OperatorStopped = "operator.stopped",
    }
);

reason_enum!(
    /// Why the HTTP API refused a request or a connection: an API error's `reason` below
    /// its `type` (a request that failed in a session carries its fault's `class.code`).
    ApiRefusal {
        /// The admission queue is full.
        Busy = "busy",
        /// The pool is not ready.
        PoolNotReady = "pool_not_ready",
        /// No session serves yet.
        SessionForming = "session_forming",
        /// The session faulted; a new one forms when the pool is ready.
        SessionFaulted = "session_faulted",
        /// A node was lost: the session re-forms.
        Reforming = "reforming",
        /// The session ended before it took the request.
        SessionEnded = "session_ended",
        /// The server is shutting down.
        ShuttingDown = "shutting_down",
        /// No such model.
        ModelNotFound = "model_not_found",
        /// A `/tokenize` or `/detokenize` body is over its limit.
        ContentTooLong = "content_too_long",
        /// The request's `Host` is not allowed.
        HostNotAllowed = "host_not_allowed",
        /// The request's `Origin` is not allowed.
        OriginNotAllowed = "origin_not_allowed",
        /// The body did not arrive in time.
        BodyTimeout = "body_timeout",
        /// The server holds as many connections as it takes.
        TooManyConnections = "too_many_connections",
        /// The client's address holds as many connections as one address may.
        TooManyConnectionsFromPeer = "too_many_connections_from_peer",
    }
);

/// Any fault reason, grouped by class. Serializes as `"class.code"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultReason {
    /// Node boot failed.
    Boot(BootFault),
    /// A plan was rejected.
    Plan(PlanRejection),
    /// An object failed.
    Object(ObjectFailure),
    /// A ring faulted.
    Ring(RingFault),
    /// A worker step failed.
    Step(StepFailure),
    /// A worker failed as a whole.
    Worker(WorkerFatal),
    /// A device operation failed.
    Device(DeviceFailure),
    /// Weights could not be made ready.
    Weights(WeightsFailure),
    /// An edge stream faulted.
    Stream(StreamFault),
    /// A control session faulted.
    Control(ControlFault),
    /// A required member was lost.
    Membership(MembershipLoss),
    /// A stage faulted.
    Stage(StageFault),
    /// A token object was rejected.
    Token(TokenFault),
    /// A wait timed out.
    Timeout(Timeout),
    /// An operator stopped the run.
    Operator(OperatorStop),
    /// A node ended its sessions (it stopped).
    Node(NodeStop),
    /// The pool changed and the session re-forms on purpose.
    Pool(PoolChange),
}

impl FaultReason {
    /// Whether the fault is the loss of a node (or of the connection to it): SWIM declared
    /// it down or faulted, its control session or an edge stream toward it broke, its
    /// worker died and could not be restarted, or the node stopped. A session re-forms over
    /// the nodes left after such a fault; any other fault (a protocol violation, a bad
    /// token, a failed step, weights that do not load) would repeat, and fails the session.
    pub const fn is_node_loss(&self) -> bool {
        matches!(
            self,
            FaultReason::Membership(_)
                | FaultReason::Control(ControlFault::ConnectionLost)
                | FaultReason::Stream(
                    StreamFault::ReadFailed
                        | StreamFault::WriteFailed
                        | StreamFault::PeerClosed
                        | StreamFault::ConnectFailed
                )
                | FaultReason::Worker(WorkerFatal::Exited)
                | FaultReason::Node(NodeStop::Stopped)
        )
    }

    /// Whether a session that faulted with this reason re-forms over the nodes ready
    /// (policy permitting): a node loss, or a pool that grew back.
    pub const fn reforms(&self) -> bool {
        self.is_node_loss() || matches!(self, FaultReason::Pool(_))
    }

    /// Whether a re-formation for this reason counts against a sequence's resume cap: a
    /// pool that grew is not a failure, so it never uses up a sequence's resumes.
    pub const fn counts_as_resume(&self) -> bool {
        !matches!(self, FaultReason::Pool(_))
    }

    /// Whether a new session would meet the same fault again: the weights' bytes are
    /// wrong (their digest or size is not the plan's, the file does not parse, a range or
    /// tensor is not in it). A failed download, a lost node or a timeout may pass.
    pub const fn repeats_on_retry(&self) -> bool {
        matches!(
            self,
            FaultReason::Weights(
                WeightsFailure::ChecksumMismatch
                    | WeightsFailure::SizeMismatch
                    | WeightsFailure::ParseFailed
                    | WeightsFailure::InvalidRange
                    | WeightsFailure::MissingTensor
                    | WeightsFailure::UnsupportedTensorType
            )
        )
    }

    /// The class part of the code (`"stream"` in `"stream.write_failed"`).
    pub const fn class(&self) -> &'static str {
        match self {
            FaultReason::Boot(_) => "boot",
            FaultReason::Plan(_) => "plan",
            FaultReason::Object(_) => "object",
            FaultReason::Ring(_) => "ring",
            FaultReason::Step(_) => "step",
            FaultReason::Worker(_) => "worker",
            FaultReason::Device(_) => "device",
            FaultReason::Weights(_) => "weights",
            FaultReason::Stream(_) => "stream",
            FaultReason::Control(_) => "control",
            FaultReason::Membership(_) => "membership",
            FaultReason::Stage(_) => "stage",
            FaultReason::Token(_) => "token",
            FaultReason::Timeout(_) => "timeout",
            FaultReason::Operator(_) => "operator",
            FaultReason::Node(_) => "node",
            FaultReason::Pool(_) => "pool",
        }
    }

    /// The code within the class (`"write_failed"` in `"stream.write_failed"`).
    pub const fn code(&self) -> &'static str {
        match self {
            FaultReason::Boot(r) => r.as_str(),
            FaultReason::Plan(r) => r.as_str(),
            FaultReason::Object(r) => r.as_str(),
            FaultReason::Ring(r) => r.as_str(),
            FaultReason::Step(r) => r.as_str(),
            FaultReason::Worker(r) => r.as_str(),
            FaultReason::Device(r) => r.as_str(),
            FaultReason::Weights(r) => r.as_str(),
            FaultReason::Stream(r) => r.as_str(),
            FaultReason::Control(r) => r.as_str(),
            FaultReason::Membership(r) => r.as_str(),
            FaultReason::Stage(r) => r.as_str(),
            FaultReason::Token(r) => r.as_str(),
            FaultReason::Timeout(r) => r.as_str(),
            FaultReason::Operator(r) => r.as_str(),
            FaultReason::Node(r) => r.as_str(),
            FaultReason::Pool(r) => r.as_str(),
        }
    }

    /// Parses `"class.code"`.
    pub fn parse(text: &str) -> Option<FaultReason> {
        let (class, code) = text.split_once('.')?;
        Some(match class {
            "boot" => FaultReason::Boot(BootFault::from_code(code)?),
            "plan" => FaultReason::Plan(PlanRejection::from_code(code)?),
            "object" => FaultReason::Object(ObjectFailure::from_code(code)?),
            "ring" => FaultReason::Ring(RingFault::from_code(code)?),
            "step" => FaultReason::Step(StepFailure::from_code(code)?),
            "worker" => FaultReason::Worker(WorkerFatal::from_code(code)?),
            "device" => FaultReason::Device(DeviceFailure::from_code(code)?),
            "weights" => FaultReason::Weights(WeightsFailure::from_code(code)?),
            "stream" => FaultReason::Stream(StreamFault::from_code(code)?),
            "control" => FaultReason::Control(ControlFault::from_code(code)?),
            "membership" => FaultReason::Membership(MembershipLoss::from_code(code)?),
            "stage" => FaultReason::Stage(StageFault::from_code(code)?),
            "token" => FaultReason::Token(TokenFault::from_code(code)?),
            "timeout" => FaultReason::Timeout(Timeout::from_code(code)?),
            "operator" => FaultReason::Operator(OperatorStop::from_code(code)?),
            "node" => FaultReason::Node(NodeStop::from_code(code)?),
            "pool" => FaultReason::Pool(PoolChange::from_code(code)?),
            _ => return None,
        })
    }
}

impl fmt::Display for FaultReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.class(), self.code())
    }
}

impl Serialize for FaultReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FaultReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        FaultReason::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown fault reason `{text}`")))
    }
}

macro_rules! into_fault_reason {
    ($($ty:ident => $variant:ident),+ $(,)?) => {
        $(impl From<$ty> for FaultReason {
            fn from(r: $ty) -> Self {
                FaultReason::$variant(r)
            }
        })+
    };
}

into_fault_reason!(
    BootFault => Boot,
    PlanRejection => Plan,
    ObjectFailure => Object,
    RingFault => Ring,
    StepFailure => Step,
    WorkerFatal => Worker,
    DeviceFailure => Device,
    WeightsFailure => Weights,
    StreamFault => Stream,
    ControlFault => Control,
    MembershipLoss => Membership,
    StageFault => Stage,
    TokenFault => Token,
    Timeout => Timeout,
    OperatorStop => Operator,
    NodeStop => Node,
    PoolChange => Pool,
);
