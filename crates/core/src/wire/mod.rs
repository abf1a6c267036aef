//! Wire and model types: identifiers, object and ring specs, the object header, run plans
//! and the stable reason enums.
//!
//! Everything here is pure data plus validation. Nothing performs IO or reads a clock, so
//! every role (node, worker, orchestrator) and every test shares the same definitions.

pub mod batch;
pub mod batch_error;
pub mod cache_ops;
pub mod evidence;
pub mod header;
pub mod ids;
pub mod logprobs;
pub mod mask;
pub mod plan;
pub mod prompt_cache;
pub mod reason;
pub mod spec;
pub mod speed;

pub use header::{
    HEADER_LEN, HeaderError, OBJECT_MAGIC, OBJECT_VERSION, ObjectFlags, ObjectHeader,
};
pub use ids::{
    EdgeId, NodeId, ObjectId, PortId, RingId, RoleId, RunId, Sequence, StageIndex, StepId,
    WorkerGeneration,
};
pub use plan::{
    ContextWhy, EdgeKind, EdgePlan, KvCacheDType, LayerRange, Peer, PlanContext, PlanPrediction,
    PlannedModel, PromptCacheOff, PromptCachePlan, ProvisionStage, RecvEdgeProvision, RunPlan,
    RuntimeConfig, SamplingPolicy, SendEdgeProvision, StagePlan, StagePrediction, WeightRange,
    WeightSource, WeightsUrl,
};
pub use reason::{Component, FaultReason, ObjectFailure};
pub use spec::{
    ActivationDType, ObjectSpec, PayloadKind, RingLayout, RingSpec, SpecError, WireDType,
};
pub use speed::{
    FormatRate, LayoutSpeed, LinkRtt, NodeSpeed, PlacedBy, ROUND_ROWS, SpeedPrediction,
    SplitVerdict, StageSpeed,
};
