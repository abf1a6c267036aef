//! Edges, specs and predictions: the run's edge ids (minted here and nowhere else), the
//! object and ring spec of each edge, and the bytes each stage and the run are predicted
//! to need.

use super::pool::{Pool, PoolNode};
use super::{PlanError, PlanRequest, Result};
use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::spec::{ObjectSpec, RING_HEADER_BYTES, RingSpec};
use crate::wire::{
    EdgeId, EdgeKind, EdgePlan, HEADER_LEN, LayerRange, Peer, PlanPrediction, RuntimeConfig,
    StageIndex, StagePlan, StagePrediction,
};

/// Alignment of every ring the planner specifies (one cache line pair).
pub const RING_ALIGNMENT: u64 = 128;
/// Data capacity of token-edge rings.
pub const TOKEN_RING_CAPACITY: u64 = 64 * 1024;
/// Smallest data capacity of an activation ring.
pub const MIN_ACTIVATION_RING: u64 = 256 * 1024;
/// Largest data capacity of an activation ring: larger objects stream through it, the
/// producer's writes still in the shared cache when the consumer reads them.
pub const MAX_ACTIVATION_RING: u64 = 4 * 1024 * 1024;

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

/// Bytes of weights a stage reads per decoded token: its blocks' active bytes (the
/// experts a token runs), the head, and one row of the embedding.
pub fn stage_active_bytes(model: &ModelFacts, range: LayerRange, first: bool, last: bool) -> u64 {
    let blocks: u64 = range.blocks().map(|b| model.bytes.active_of_block(b as usize)).sum();
    let row = model.bytes.embedding / u64::from(model.vocab_size.max(1));
    blocks + if first { row } else { 0 } + if last { model.bytes.head } else { 0 }
}

/// Arena bytes one ring end takes: header area plus data capacity.
pub fn ring_arena_bytes(ring: &RingSpec) -> u64 {
    RING_HEADER_BYTES + ring.capacity
}

/// Object and ring specs of a run's three edge kinds.
pub(super) struct RingSet {
    token_in: (ObjectSpec, RingSpec),
    activation: (ObjectSpec, RingSpec),
    token_out: (ObjectSpec, RingSpec),
}

impl RingSet {
    /// The specs of a run of `model` with `runtime`.
    pub(super) fn for_model(model: &ModelFacts, runtime: &RuntimeConfig) -> RingSet {
        let token_ring = RingSpec { capacity: TOKEN_RING_CAPACITY, alignment: RING_ALIGNMENT };
        let act = ObjectSpec::activations(
            runtime.max_seq_len,
            model.hidden_size,
            runtime.activation_dtype,
        );
        let masks = runtime.mask_bytes;
        let act_capacity = (act.max_extent
            + crate::wire::batch::table_bytes(runtime.table_capacity())
            + u64::from(masks)
            + HEADER_LEN as u64)
            .next_power_of_two()
            .clamp(MIN_ACTIVATION_RING, MAX_ACTIVATION_RING);
        let cap = runtime.table_capacity();
        // A token id per entry, then the largest log-probability section (whole u32 rows).
        let out_bytes = crate::wire::logprobs::token_out_max_bytes(cap, runtime.max_top_logprobs);
        let rows = ((out_bytes - crate::wire::batch::table_bytes(cap)) / 4) as u32;
        let token_out = ObjectSpec::token_ids(rows);
        let token_out_ring = RingSpec {
            capacity: (2 * (token_out.with_table(cap, masks).max_extent + HEADER_LEN as u64))
                .next_power_of_two()
                .max(TOKEN_RING_CAPACITY),
            alignment: RING_ALIGNMENT,
        };
        RingSet {
            token_in: (
                ObjectSpec::token_ids(runtime.max_seq_len).with_table(cap, masks),
                token_ring,
            ),
            activation: (
                act.with_table(cap, masks),
                RingSpec { capacity: act_capacity, alignment: RING_ALIGNMENT },
            ),
            token_out: (token_out.with_table(cap, masks), token_out_ring),
        }
    }
}

/// The orchestrator as the plan names it (its endpoint id in lowercase).
pub(super) fn orchestrator_peer(pool: &Pool) -> Peer {
    Peer {
        node_id: pool.orchestrator.node_id,
        endpoint_id: pool.orchestrator.endpoint_id.as_ref().map(|e| e.to_ascii_lowercase()),
        addrs: pool.orchestrator.addrs.clone(),
        relay: pool.orchestrator.relay.clone(),
    }
}

/// Mints the run's edges: token-in to the first stage, one activation hop per stage
/// boundary, token-out from the last stage.
pub(super) fn mint_edges(
    orchestrator: &Peer,
    nodes: &[&PoolNode],
    rings: &RingSet,
) -> Vec<EdgePlan> {
    let stage_count = nodes.len() as u32;
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
    edges
}

/// Each stage's plan with its predicted bytes; the first stage its node cannot hold is
/// rejected.
pub(super) fn stage_plans(
    req: &PlanRequest<'_>,
    nodes: &[&PoolNode],
    layers: &[LayerRange],
    edges: &[EdgePlan],
) -> Result<Vec<StagePlan>> {
    let last = nodes.len() - 1;
    nodes
        .iter()
        .zip(layers)
        .enumerate()
        .map(|(i, (node, range))| stage_plan(req, i as u32, i == last, node, *range, edges))
        .collect()
}

/// Stage `i`'s plan: its bytes (weights, KV cache, ring arena) checked against its node's
/// ring arena and memory.
fn stage_plan(
    req: &PlanRequest<'_>,
    i: u32,
    last: bool,
    node: &PoolNode,
    range: LayerRange,
    edges: &[EdgePlan],
) -> Result<StagePlan> {
    let model = req.model;
    let first = i == 0;
    let inbound = edges[i as usize];
    let outbound = edges[i as usize + 1];
    let weight_bytes = stage_weight_bytes(model, range, first, last);
    let kv_cache_bytes =
        model.kv_bytes_of_blocks(range.blocks(), req.runtime.max_seq_len, req.runtime.kv_cache)
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
    let rt = &req.runtime;
    let compute_bytes =
        model.compute_bytes(rt.max_seq_len, rt.max_seq_len, last, u32::from(rt.table_capacity()));
    let process_bytes = crate::model::STAGE_PROCESS_BYTES;
    // Every stage but the last logs the rows it sends on (a resume sends kept positions'
    // rows from it): a row per position of every slot.
    let row_log_bytes = if last {
        0
    } else {
        row_bytes(req) * u64::from(rt.max_seq_len) * u64::from(rt.table_capacity())
    };
    let total_bytes =
        weight_bytes + kv_cache_bytes + ring_bytes + compute_bytes + process_bytes + row_log_bytes;
    if total_bytes > node.memory_bytes {
        return Err(PlanError::new(
            PlanRejection::ExceedsNodeMemory,
            format!(
                "stage {i} on node {} needs {total_bytes} bytes (weights {weight_bytes}, KV cache {kv_cache_bytes}, row log {row_log_bytes}, rings {ring_bytes}, compute {compute_bytes}, processes {process_bytes}) but the node has {}",
                node.node_id, node.memory_bytes
            ),
        ));
    }
    Ok(StagePlan {
        stage_index: StageIndex(i),
        node_id: node.node_id,
        layers: range,
        embedding: first,
        head: last,
        inbound: inbound.edge_id,
        outbound: outbound.edge_id,
        prediction: StagePrediction {
            weight_bytes,
            active_weight_bytes: stage_active_bytes(model, range, first, last),
            kv_cache_bytes,
            ring_bytes,
            compute_bytes,
            process_bytes,
            row_log_bytes,
            prompt_cache_bytes: 0,
            total_bytes,
            node_memory_bytes: node.memory_bytes,
        },
    })
}

/// Bytes of one activation row between stages.
pub(super) fn row_bytes(req: &PlanRequest<'_>) -> u64 {
    u64::from(req.model.hidden_size) * u64::from(req.runtime.activation_dtype.wire().width())
}

/// The run's predicted activation and network bytes, and its weight bytes in all.
pub(super) fn plan_prediction(
    req: &PlanRequest<'_>,
    rings: &RingSet,
    stages: &[StagePlan],
) -> PlanPrediction {
    let stage_count = stages.len() as u32;
    let per_token = rings.activation.0.row_bytes();
    let hops = stage_count - 1;
    PlanPrediction {
        activation_bytes_per_token: per_token,
        activation_hops: hops,
        prompt_tokens: req.prompt_tokens,
        prompt_activation_bytes: per_token * u64::from(req.prompt_tokens),
        network_bytes_per_token: (per_token + HEADER_LEN as u64) * u64::from(hops)
            + 2 * (4 + HEADER_LEN as u64),
        total_weight_bytes: stages.iter().map(|s| s.prediction.weight_bytes).sum(),
        active_weight_bytes: stages.iter().map(|s| s.prediction.active_weight_bytes).sum(),
    }
}
