//! The run planner: model facts + pool inventory + placement + runtime settings in, exactly
//! one complete [`RunPlan`] or one typed [`PlanError`] out.
//!
//! Sans-IO and deterministic: the same request always gives the same plan, the pool is
//! never mutated, and edge ids are minted here and nowhere else. [`validate_plan`] checks
//! every structural guarantee of a plan, whoever built it.

pub mod pool;

use std::collections::HashSet;
use std::fmt;

use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::spec::{ObjectSpec, RING_HEADER_BYTES, RingSpec, SpecError};
use crate::wire::{
    EdgeId, EdgeKind, EdgePlan, HEADER_LEN, LayerRange, NodeId, PayloadKind, Peer, PlanPrediction,
    PlannedModel, RunId, RunPlan, RuntimeConfig, StageIndex, StagePlan, StagePrediction,
    WeightSource, WeightsUrl,
};
pub use pool::{Pool, PoolError, PoolNode};

/// Where stages go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Nodes in stage order; `None` takes the first nodes of the pool in file order.
    pub nodes: Option<Vec<NodeId>>,
    /// Layer ranges in stage order; `None` balances blocks by bytes, weighted by memory.
    pub layers: Option<Vec<LayerRange>>,
}

/// Everything the planner needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The run's id.
    pub run_id: RunId,
    /// Facts of the model to run.
    pub model: &'a ModelFacts,
    /// Where stages get the weights.
    pub source: WeightSource,
    /// The inventory.
    pub pool: &'a Pool,
    /// Stage count; `None` means one per placed node (or per pool node).
    pub stages: Option<u32>,
    /// Placement input.
    pub placement: Placement,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// Prompt length assumed for the prefill predictions.
    pub prompt_tokens: u32,
}

/// A typed rejection: a stable [`PlanRejection`] reason and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// The stable reason.
    pub reason: PlanRejection,
    /// What exactly is wrong.
    pub message: String,
}

impl PlanError {
    /// A rejection with its reason and what exactly is wrong.
    pub fn new(reason: PlanRejection, message: impl Into<String>) -> PlanError {
        PlanError { reason, message: message.into() }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

impl std::error::Error for PlanError {}

/// Alignment of every ring the planner specifies (one cache line pair).
pub const RING_ALIGNMENT: u64 = 128;
/// Data capacity of token-edge rings.
pub const TOKEN_RING_CAPACITY: u64 = 64 * 1024;
/// Smallest data capacity of an activation ring.
pub const MIN_ACTIVATION_RING: u64 = 256 * 1024;
/// Largest data capacity of an activation ring: larger objects stream through it, the
/// producer's writes still in the shared cache when the consumer reads them.
pub const MAX_ACTIVATION_RING: u64 = 4 * 1024 * 1024;

type Result<T> = std::result::Result<T, PlanError>;

/// Plans a run. Returns exactly one complete plan or the first rejection.
pub fn plan(req: &PlanRequest<'_>) -> Result<RunPlan> {
    let model = req.model;
    check_runtime(req)?;
    check_model(model)?;
    check_source(&req.source)?;
    check_pool(req.pool)?;

    let nodes = choose_nodes(req)?;
    if let Some(n) = nodes.iter().find(|n| n.memory_bytes == 0) {
        return Err(PlanError::new(
            PlanRejection::InvalidPool,
            format!(
                "node {} has no memory_bytes: write it in the pool file (run plan has no node \
                 to ask), or let orchestrate pool take what the node reports",
                n.node_id
            ),
        ));
    }
    let stage_count = nodes.len() as u32;
    let layers = match &req.placement.layers {
        Some(layers) => {
            check_ranges(layers, model.block_count)?;
            layers.clone()
        }
        None => balance(
            model,
            req.runtime.max_seq_len,
            req.runtime.kv_cache,
            req.runtime.table_capacity(),
            &nodes,
        ),
    };

    let rings = RingSet::for_model(model, &req.runtime);
    let orchestrator = Peer {
        node_id: req.pool.orchestrator.node_id,
        endpoint_id: req.pool.orchestrator.endpoint_id.as_ref().map(|e| e.to_ascii_lowercase()),
        addrs: req.pool.orchestrator.addrs.clone(),
    };
    // Edge ids: 1 = token-in, 2..=N = activation hops, N + 1 = token-out.
    let edge_id = |i: u32| EdgeId(u64::from(i) + 1);
    let mut edges = Vec::with_capacity(stage_count as usize + 1);
    edges.push(EdgePlan {
        edge_id: edge_id(0),
        kind: EdgeKind::TokenIn,
        producer: orchestrator.node_id,
        producer_stage: None,
        consumer: nodes[0].node_id,
        consumer_stage: Some(StageIndex(0)),
        object: rings.token_in.0,
        ring: rings.token_in.1,
    });
    for s in 0..stage_count - 1 {
        edges.push(EdgePlan {
            edge_id: edge_id(s + 1),
            kind: EdgeKind::Activation { from: StageIndex(s) },
            producer: nodes[s as usize].node_id,
            producer_stage: Some(StageIndex(s)),
            consumer: nodes[s as usize + 1].node_id,
            consumer_stage: Some(StageIndex(s + 1)),
            object: rings.activation.0,
            ring: rings.activation.1,
        });
    }
    edges.push(EdgePlan {
        edge_id: edge_id(stage_count),
        kind: EdgeKind::TokenOut,
        producer: nodes[stage_count as usize - 1].node_id,
        producer_stage: Some(StageIndex(stage_count - 1)),
        consumer: orchestrator.node_id,
        consumer_stage: None,
        object: rings.token_out.0,
        ring: rings.token_out.1,
    });

    let mut stages = Vec::with_capacity(stage_count as usize);
    for (i, (node, range)) in nodes.iter().zip(&layers).enumerate() {
        let i = i as u32;
        let first = i == 0;
        let last = i == stage_count - 1;
        let inbound = edges[i as usize];
        let outbound = edges[i as usize + 1];
        let weight_bytes = stage_weight_bytes(model, *range, first, last);
        let kv_cache_bytes = u64::from(range.len())
            * model.kv_bytes_per_block(req.runtime.max_seq_len, req.runtime.kv_cache)
            * u64::from(req.runtime.table_capacity());
        let ring_bytes = ring_arena_bytes(&inbound.ring) + ring_arena_bytes(&outbound.ring);
        // The arena manager aligns every lease to a page.
        let page = crate::arena::manager::LEASE_PAGE;
        let leased = ring_arena_bytes(&inbound.ring).div_ceil(page) * page
            + ring_arena_bytes(&outbound.ring).div_ceil(page) * page;
        if let Some(arena) = node.arena_bytes
            && leased > arena
        {
            return Err(PlanError::new(
                PlanRejection::ExceedsNodeArena,
                format!(
                    "stage {i} on node {} needs {leased} bytes of ring arena but the node's arena \
                     holds {arena}: boot it with --arena-bytes {leased} or more, or lower \
                     --max-seq-len",
                    node.node_id
                ),
            ));
        }
        let total_bytes = weight_bytes + kv_cache_bytes + ring_bytes;
        if total_bytes > node.memory_bytes {
            return Err(PlanError::new(
                PlanRejection::ExceedsNodeMemory,
                format!(
                    "stage {i} on node {} needs {total_bytes} bytes (weights {weight_bytes}, KV cache {kv_cache_bytes}, rings {ring_bytes}) but the node has {}",
                    node.node_id, node.memory_bytes
                ),
            ));
        }
        stages.push(StagePlan {
            stage_index: StageIndex(i),
            node_id: node.node_id,
            layers: *range,
            embedding: first,
            head: last,
            inbound: inbound.edge_id,
            outbound: outbound.edge_id,
            prediction: StagePrediction {
                weight_bytes,
                kv_cache_bytes,
                ring_bytes,
                total_bytes,
                node_memory_bytes: node.memory_bytes,
            },
        });
    }

    let per_token = rings.activation.0.row_bytes();
    let hops = stage_count - 1;
    let prediction = PlanPrediction {
        activation_bytes_per_token: per_token,
        activation_hops: hops,
        prompt_tokens: req.prompt_tokens,
        prompt_activation_bytes: per_token * u64::from(req.prompt_tokens),
        network_bytes_per_token: (per_token + HEADER_LEN as u64) * u64::from(hops)
            + 2 * (4 + HEADER_LEN as u64),
        total_weight_bytes: stages.iter().map(|s| s.prediction.weight_bytes).sum(),
    };
    let plan = RunPlan {
        run_id: req.run_id,
        model: PlannedModel {
            source: req.source.clone(),
            name: model.name.clone(),
            architecture: model.architecture.clone(),
            block_count: model.block_count,
            hidden_size: model.hidden_size,
            vocab_size: model.vocab_size,
            eos_token_id: model.eos_token_id,
        },
        orchestrator,
        nodes: nodes
            .iter()
            .map(|n| Peer {
                node_id: n.node_id,
                endpoint_id: Some(n.endpoint_id.to_ascii_lowercase()),
                addrs: n.addrs.clone(),
            })
            .collect(),
        stages,
        edges,
        runtime: req.runtime,
        prediction,
    };
    validate_plan(&plan)?;
    Ok(plan)
}

/// The layer ranges `stages` stages of equal memory would get (the planner's balance,
/// weights only): what `model inspect --stages N` shows. `None` for zero stages or more
/// stages than blocks.
pub fn split_evenly(model: &ModelFacts, stages: u32) -> Option<Vec<LayerRange>> {
    if stages == 0
        || stages > model.block_count
        || model.bytes.per_block.len() != model.block_count as usize
    {
        return None;
    }
    let node = PoolNode {
        node_id: NodeId(0),
        endpoint_id: String::new(),
        addrs: Vec::new(),
        memory_bytes: 1,
        arena_bytes: None,
        device: None,
    };
    let nodes: Vec<&PoolNode> = (0..stages).map(|_| &node).collect();
    Some(balance(model, 0, Default::default(), 1, &nodes))
}

/// Bytes of the tensors a stage loads.
pub fn stage_weight_bytes(model: &ModelFacts, range: LayerRange, first: bool, last: bool) -> u64 {
    let blocks: u64 = model
        .bytes
        .per_block
        .get(range.start as usize..range.end as usize)
        .map(|b| b.iter().sum())
        .unwrap_or(0);
    blocks + if first { model.bytes.embedding } else { 0 } + if last { model.bytes.head } else { 0 }
}

/// Arena bytes one ring end takes: header area plus data capacity.
pub fn ring_arena_bytes(ring: &RingSpec) -> u64 {
    RING_HEADER_BYTES + ring.capacity
}

/// Object and ring specs of a run's three edge kinds.
struct RingSet {
    token_in: (ObjectSpec, RingSpec),
    activation: (ObjectSpec, RingSpec),
    token_out: (ObjectSpec, RingSpec),
}

impl RingSet {
    fn for_model(model: &ModelFacts, runtime: &RuntimeConfig) -> RingSet {
        let token_ring = RingSpec { capacity: TOKEN_RING_CAPACITY, alignment: RING_ALIGNMENT };
        let act = ObjectSpec::activations(
            runtime.max_seq_len,
            model.hidden_size,
            runtime.activation_dtype,
        );
        let act_capacity = (act.max_extent
            + crate::wire::batch::table_bytes(runtime.table_capacity())
            + HEADER_LEN as u64)
            .next_power_of_two()
            .clamp(MIN_ACTIVATION_RING, MAX_ACTIVATION_RING);
        let cap = runtime.table_capacity();
        RingSet {
            token_in: (ObjectSpec::token_ids(runtime.max_seq_len).with_table(cap), token_ring),
            activation: (
                act.with_table(cap),
                RingSpec { capacity: act_capacity, alignment: RING_ALIGNMENT },
            ),
            token_out: (ObjectSpec::token_ids(u32::from(cap)).with_table(cap), token_ring),
        }
    }
}

fn check_runtime(req: &PlanRequest<'_>) -> Result<()> {
    let rt = &req.runtime;
    check_runtime_config(rt, req.model.context_length)?;
    if req.prompt_tokens > rt.max_seq_len {
        return Err(PlanError::new(
            PlanRejection::InvalidRuntime,
            format!(
                "a prompt of {} tokens does not fit max_seq_len {}",
                req.prompt_tokens, rt.max_seq_len
            ),
        ));
    }
    Ok(())
}

/// Checks runtime settings for a model of `context_length` tokens: `max_seq_len` in
/// `1..=context_length`, `max_tokens` at least 1, and sampling parameters in range
/// (temperature finite and >= 0, where 0 means greedy; `top_k` >= 1; `top_p` in (0, 1]).
/// The one check every command runs on its runtime flags, before anything starts.
pub fn check_runtime_config(rt: &RuntimeConfig, context_length: u32) -> Result<()> {
    let bad = |m: String| Err(PlanError::new(PlanRejection::InvalidRuntime, m));
    if rt.max_seq_len == 0 {
        return bad("max_seq_len must be at least 1".into());
    }
    if rt.max_seq_len > context_length {
        return bad(format!(
            "max_seq_len {} exceeds the model's context length {context_length}",
            rt.max_seq_len
        ));
    }
    if rt.max_tokens == 0 {
        return bad("max_tokens must be at least 1".into());
    }
    let most = u32::from(crate::wire::batch::MAX_CAPACITY);
    if rt.max_sequences == 0 || rt.max_sequences > most {
        return bad(format!("max_sequences {} must lie in 1..={most}", rt.max_sequences));
    }
    rt.sampling.validate().or_else(|m| bad(format!("sampling: {m}")))
}

/// Checks a weight source: a URL must be an `http` or `https` URL with a host
/// ([`WeightsUrl::parse`]).
pub fn check_source(source: &WeightSource) -> Result<()> {
    match source {
        WeightSource::Local { .. } => Ok(()),
        WeightSource::Url { url, .. } => check_weights_url(url),
    }
}

/// Checks a weights URL ([`WeightsUrl::parse`]); rejects it as `invalid_weights_url`.
pub fn check_weights_url(url: &str) -> Result<()> {
    WeightsUrl::parse(url)
        .map(|_| ())
        .map_err(|m| PlanError::new(PlanRejection::InvalidWeightsUrl, m))
}

fn check_model(model: &ModelFacts) -> Result<()> {
    let hidden = |m: String| Err(PlanError::new(PlanRejection::InvalidHiddenDim, m));
    if model.hidden_size == 0 {
        return hidden("hidden size is 0".into());
    }
    if model.head_count == 0 || !model.hidden_size.is_multiple_of(model.head_count) {
        return hidden(format!(
            "hidden size {} is not a multiple of the head count {}",
            model.hidden_size, model.head_count
        ));
    }
    let inconsistent = |m: String| Err(PlanError::new(PlanRejection::ModelInconsistent, m));
    if model.block_count == 0 {
        return inconsistent("the model has no blocks".into());
    }
    if model.bytes.per_block.len() != model.block_count as usize {
        return inconsistent(format!(
            "block_count {} but {} blocks of tensors",
            model.block_count,
            model.bytes.per_block.len()
        ));
    }
    if model.head_count_kv == 0 || !model.head_count.is_multiple_of(model.head_count_kv) {
        return inconsistent(format!(
            "head count {} is not a multiple of the KV head count {}",
            model.head_count, model.head_count_kv
        ));
    }
    Ok(())
}

/// Judges a pool's meaning without its nodes: distinct node ids (the orchestrator's
/// included) and endpoint ids, endpoint ids of 64 hex digits, addresses and memory for
/// every node. The one check every command runs on a pool file, before waiting for nodes.
pub fn check_pool(pool: &Pool) -> Result<()> {
    let mut seen = HashSet::from([pool.orchestrator.node_id]);
    let mut endpoints = HashSet::new();
    let invalid = |m: String| Err(PlanError::new(PlanRejection::InvalidPool, m));
    if let Some(e) = &pool.orchestrator.endpoint_id
        && !pool::is_endpoint_id(e)
    {
        return invalid(format!("the orchestrator's endpoint id `{e}` is not 64 hex digits"));
    }
    for n in &pool.nodes {
        if !seen.insert(n.node_id) {
            return Err(PlanError::new(
                PlanRejection::DuplicateNode,
                format!(
                    "node id {} appears twice in the pool (or is the orchestrator's)",
                    n.node_id
                ),
            ));
        }
        if !pool::is_endpoint_id(&n.endpoint_id) {
            return invalid(format!(
                "node {}: endpoint id `{}` is not 64 hex digits",
                n.node_id, n.endpoint_id
            ));
        }
        if !endpoints.insert(n.endpoint_id.to_ascii_lowercase()) {
            return Err(PlanError::new(
                PlanRejection::DuplicateNode,
                format!("node {}: endpoint id is shared with another node", n.node_id),
            ));
        }
        if n.addrs.is_empty() {
            return invalid(format!("node {} has no addresses", n.node_id));
        }
    }
    Ok(())
}

/// Picks the node of each stage and settles the stage count.
fn choose_nodes<'p>(req: &PlanRequest<'p>) -> Result<Vec<&'p PoolNode>> {
    let pool = req.pool;
    let blocks = req.model.block_count;
    let from_layers = req.placement.layers.as_ref().map(|l| l.len() as u32);
    let from_nodes = req.placement.nodes.as_ref().map(|n| n.len() as u32);
    let stages = req.stages.or(from_layers).or(from_nodes).unwrap_or(pool.nodes.len() as u32);
    if stages == 0 {
        return Err(PlanError::new(PlanRejection::ZeroStages, "the stage count is 0"));
    }
    if stages > blocks {
        return Err(PlanError::new(
            PlanRejection::TooManyStages,
            format!("{stages} stages for a model of {blocks} blocks"),
        ));
    }
    for (what, n) in [("layer ranges", from_layers), ("placement nodes", from_nodes)] {
        match n {
            Some(n) if n < stages => {
                return Err(PlanError::new(
                    PlanRejection::MissingStageAssignment,
                    format!("{stages} stages but only {n} {what}"),
                ));
            }
            Some(n) if n > stages => {
                return Err(PlanError::new(
                    PlanRejection::DuplicateStageAssignment,
                    format!("{stages} stages but {n} {what}"),
                ));
            }
            _ => {}
        }
    }
    match &req.placement.nodes {
        Some(ids) => {
            let mut seen = HashSet::new();
            ids.iter()
                .map(|&id| {
                    let node = pool.node(id).ok_or_else(|| {
                        PlanError::new(
                            PlanRejection::UnknownNode,
                            format!("node {id} is not in the pool"),
                        )
                    })?;
                    if !seen.insert(id) {
                        return Err(PlanError::new(
                            PlanRejection::DuplicateStageAssignment,
                            format!("node {id} is assigned more than one stage"),
                        ));
                    }
                    Ok(node)
                })
                .collect()
        }
        None => {
            if stages as usize > pool.nodes.len() {
                return Err(PlanError::new(
                    PlanRejection::NotEnoughNodes,
                    format!("{stages} stages but the pool has {} nodes", pool.nodes.len()),
                ));
            }
            Ok(pool.nodes.iter().take(stages as usize).collect())
        }
    }
}

/// Checks that ranges are non-empty, contiguous, in order and cover `0..block_count`.
pub fn check_ranges(ranges: &[LayerRange], block_count: u32) -> Result<()> {
    let bad = |m: String| Err(PlanError::new(PlanRejection::InvalidLayerRanges, m));
    let mut next = 0;
    for (i, r) in ranges.iter().enumerate() {
        if r.is_empty() {
            return bad(format!("stage {i}: range {r} is empty"));
        }
        if r.start != next {
            return bad(format!(
                "stage {i}: range {r} should start at block {next} (ranges must be contiguous and in order)"
            ));
        }
        next = r.end;
    }
    if next != block_count {
        return bad(format!("ranges end at block {next}, the model has {block_count} blocks"));
    }
    Ok(())
}

/// Splits blocks into contiguous ranges, one per node, minimising the largest ratio of a
/// stage's bytes (weights + KV cache) to its node's memory. Ties go to earlier cuts.
fn balance(
    model: &ModelFacts,
    max_seq_len: u32,
    kv_cache: crate::wire::KvCacheDType,
    slots: u16,
    nodes: &[&PoolNode],
) -> Vec<LayerRange> {
    let n = nodes.len();
    let l = model.block_count as usize;
    let kv = model.kv_bytes_per_block(max_seq_len, kv_cache) * u64::from(slots);
    let mut prefix = vec![0u64; l + 1];
    for i in 0..l {
        prefix[i + 1] = prefix[i] + model.bytes.per_block[i] + kv;
    }
    let cost = |s: usize, a: usize, b: usize| -> f64 {
        let mut bytes = prefix[b] - prefix[a];
        if s == 0 {
            bytes += model.bytes.embedding;
        }
        if s == n - 1 {
            bytes += model.bytes.head;
        }
        bytes as f64 / nodes[s].memory_bytes as f64
    };
    // best[s][i]: smallest achievable max ratio placing blocks 0..i on stages 0..=s.
    let mut best = vec![vec![f64::INFINITY; l + 1]; n];
    let mut cut = vec![vec![0usize; l + 1]; n];
    for (i, slot) in best[0].iter_mut().enumerate().skip(1) {
        *slot = cost(0, 0, i);
    }
    for s in 1..n {
        for i in (s + 1)..=l {
            for j in s..i {
                let v = best[s - 1][j].max(cost(s, j, i));
                if v < best[s][i] {
                    best[s][i] = v;
                    cut[s][i] = j;
                }
            }
        }
    }
    let mut ranges = vec![LayerRange::new(0, 0); n];
    let mut end = l;
    for s in (0..n).rev() {
        let start = if s == 0 { 0 } else { cut[s][end] };
        ranges[s] = LayerRange::new(start as u32, end as u32);
        end = start;
    }
    ranges
}

fn spec_rejection(e: &SpecError) -> PlanRejection {
    match e {
        SpecError::DTypeMismatch { .. } | SpecError::TokenRowNotOne { .. } => {
            PlanRejection::InvalidDTypeWidth
        }
        SpecError::ZeroRowElems => PlanRejection::InvalidHiddenDim,
        SpecError::ZeroExtent
        | SpecError::ExtentNotWholeRows { .. }
        | SpecError::BadRingCapacity { .. } => PlanRejection::InvalidExtent,
        SpecError::AlignmentNotPowerOfTwo { .. } => PlanRejection::AlignmentNotPowerOfTwo,
        SpecError::BadLayout { .. } => PlanRejection::InvalidExtent,
    }
}

/// Checks every structural guarantee of a plan: stage indices, contiguous covering ranges,
/// one node per stage, the edge chain and its endpoints, unique edge ids, valid specs.
pub fn validate_plan(plan: &RunPlan) -> Result<()> {
    let n = plan.stages.len();
    if n == 0 {
        return Err(PlanError::new(PlanRejection::ZeroStages, "the plan has no stages"));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut nodes = HashSet::new();
    for (i, s) in plan.stages.iter().enumerate() {
        if s.stage_index.0 as usize != i {
            return Err(PlanError::new(
                PlanRejection::MissingStageAssignment,
                format!("stage at position {i} has index {}", s.stage_index),
            ));
        }
        if s.embedding != (i == 0) || s.head != (i == n - 1) {
            return Err(PlanError::new(
                PlanRejection::MissingStageAssignment,
                format!(
                    "stage {i}: only the first stage owns the embedding and only the last the head"
                ),
            ));
        }
        if !nodes.insert(s.node_id) {
            return Err(PlanError::new(
                PlanRejection::DuplicateStageAssignment,
                format!("node {} runs more than one stage", s.node_id),
            ));
        }
        if s.node_id == plan.orchestrator.node_id
            || !plan.nodes.iter().any(|p| p.node_id == s.node_id)
        {
            return Err(PlanError::new(
                PlanRejection::UnknownNode,
                format!("stage {i}'s node {} has no data-plane identity in the plan", s.node_id),
            ));
        }
        ranges.push(s.layers);
    }
    check_ranges(&ranges, plan.model.block_count)?;

    if plan.edges.len() != n + 1 {
        return Err(PlanError::new(
            PlanRejection::EdgeEndpointMismatch,
            format!("{} edges for {n} stages (expected {})", plan.edges.len(), n + 1),
        ));
    }
    let mut ids = HashSet::new();
    for e in &plan.edges {
        if !ids.insert(e.edge_id) {
            return Err(PlanError::new(
                PlanRejection::DuplicateEdgeId,
                format!("edge id {} is used twice", e.edge_id),
            ));
        }
    }
    let orch = plan.orchestrator.node_id;
    let node_of = |i: usize| plan.stages[i].node_id;
    for (i, e) in plan.edges.iter().enumerate() {
        let (kind, producer, producer_stage, consumer, consumer_stage) = if i == 0 {
            (EdgeKind::TokenIn, orch, None, node_of(0), Some(0))
        } else if i == n {
            (EdgeKind::TokenOut, node_of(n - 1), Some(n - 1), orch, None)
        } else {
            (
                EdgeKind::Activation { from: StageIndex(i as u32 - 1) },
                node_of(i - 1),
                Some(i - 1),
                node_of(i),
                Some(i),
            )
        };
        let stage = |s: Option<usize>| s.map(|s| StageIndex(s as u32));
        if e.kind != kind
            || e.producer != producer
            || e.consumer != consumer
            || e.producer_stage != stage(producer_stage)
            || e.consumer_stage != stage(consumer_stage)
        {
            return Err(PlanError::new(
                PlanRejection::EdgeEndpointMismatch,
                format!(
                    "edge {} ({}) does not connect the stages it should",
                    e.edge_id,
                    e.kind.label()
                ),
            ));
        }
        if let Some(s) = consumer_stage
            && plan.stages[s].inbound != e.edge_id
        {
            return Err(PlanError::new(
                PlanRejection::EdgeEndpointMismatch,
                format!("stage {s}'s inbound edge is not edge {}", e.edge_id),
            ));
        }
        if let Some(s) = producer_stage
            && plan.stages[s].outbound != e.edge_id
        {
            return Err(PlanError::new(
                PlanRejection::EdgeEndpointMismatch,
                format!("stage {s}'s outbound edge is not edge {}", e.edge_id),
            ));
        }
        let spec_err = |err: SpecError| {
            PlanError::new(spec_rejection(&err), format!("edge {}: {err}", e.edge_id))
        };
        e.object.validate().map_err(spec_err)?;
        e.ring.validate().map_err(spec_err)?;
        let expected_payload = if matches!(kind, EdgeKind::Activation { .. }) {
            PayloadKind::Activations
        } else {
            PayloadKind::TokenIds
        };
        if e.object.payload != expected_payload {
            return Err(PlanError::new(
                PlanRejection::InvalidDTypeWidth,
                format!(
                    "edge {} carries {:?}, expected {:?}",
                    e.edge_id, e.object.payload, expected_payload
                ),
            ));
        }
        if expected_payload == PayloadKind::Activations {
            if e.object.row_elems != plan.model.hidden_size {
                return Err(PlanError::new(
                    PlanRejection::InvalidHiddenDim,
                    format!(
                        "edge {} rows hold {} elements, the model's hidden size is {}",
                        e.edge_id, e.object.row_elems, plan.model.hidden_size
                    ),
                ));
            }
            if e.object.dtype != plan.runtime.activation_dtype.wire() {
                return Err(PlanError::new(
                    PlanRejection::InvalidDTypeWidth,
                    format!("edge {} dtype differs from the run's activation dtype", e.edge_id),
                ));
            }
            let want = crate::wire::batch::table_bytes(plan.runtime.table_capacity())
                + u64::from(plan.runtime.max_seq_len) * e.object.row_bytes();
            if e.object.max_extent != want {
                return Err(PlanError::new(
                    PlanRejection::InvalidExtent,
                    format!(
                        "edge {} max extent {} should be the micro-batch table plus \
                         max_seq_len * hidden * width = {want}",
                        e.edge_id, e.object.max_extent
                    ),
                ));
            }
        }
    }
    Ok(())
}
