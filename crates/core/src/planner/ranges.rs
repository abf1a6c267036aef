//! Node choice and layer ranges: which node runs each stage, and the contiguous block
//! ranges the stages get, explicit or balanced by a min-max dynamic program over block
//! bytes and KV cache weighted by node memory.

use std::collections::HashSet;

use super::checks::check_ranges;
use super::pool::PoolNode;
use super::{PlanError, PlanRequest, Result};
use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::{LayerRange, NodeId, PlacedBy};

/// Picks the node of each stage and settles the stage count.
pub(super) fn choose_nodes<'p>(req: &PlanRequest<'p>) -> Result<Vec<&'p PoolNode>> {
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

/// The layer range of each stage and how it was chosen: the placement's (checked), or
/// balanced over `nodes`: by speed where `by_speed` and every node's speed is known and
/// some split fits every node, else by memory.
pub(super) fn layer_ranges(
    req: &PlanRequest<'_>,
    nodes: &[&PoolNode],
    by_speed: bool,
) -> Result<(Vec<LayerRange>, PlacedBy)> {
    let model = req.model;
    if let Some(layers) = &req.placement.layers {
        check_ranges(layers, model.block_count)?;
        return Ok((layers.clone(), PlacedBy::Given));
    }
    let (seq, kv, slots) =
        (req.runtime.max_seq_len, req.runtime.kv_cache, req.runtime.table_capacity());
    if by_speed && let Some(ranges) = balance_by_speed(model, seq, kv, slots, nodes) {
        return Ok((ranges, PlacedBy::Speed));
    }
    Ok((balance(model, seq, kv, slots, nodes), PlacedBy::Memory))
}

/// Splits blocks into contiguous ranges, one per node, minimising the slowest stage's
/// decode step (the cost model's, with each node's measured speed) among the splits whose
/// every stage's weights and KV cache fit its node's memory. `None` where a node's speed
/// is unknown or no split fits. Ties go to earlier cuts.
fn balance_by_speed(
    model: &ModelFacts,
    max_seq_len: u32,
    kv_cache: crate::wire::KvCacheDType,
    slots: u16,
    nodes: &[&PoolNode],
) -> Option<Vec<LayerRange>> {
    let costs: Vec<_> = nodes
        .iter()
        .map(|n| super::speed::node_cost(n, model).map(|c| c.0))
        .collect::<Option<_>>()?;
    let bytes = stage_bytes(model, max_seq_len, kv_cache, slots, nodes.len());
    let last = nodes.len() - 1;
    let ranges = min_max_split(model.block_count as usize, nodes.len(), |s, a, b| {
        if bytes(s, a, b) > nodes[s].memory_bytes {
            return f64::INFINITY;
        }
        let range = LayerRange::new(a as u32, b as u32);
        costs[s].step_us(super::cost::stage_step_bytes(model, range, s == last), 1)
    })?;
    Some(ranges)
}

/// The bytes (weights and KV cache) of stage `s` of `stages` over blocks `a..b`.
fn stage_bytes(
    model: &ModelFacts,
    max_seq_len: u32,
    kv_cache: crate::wire::KvCacheDType,
    slots: u16,
    stages: usize,
) -> impl Fn(usize, usize, usize) -> u64 + '_ {
    let l = model.block_count as usize;
    let mut prefix = vec![0u64; l + 1];
    for i in 0..l {
        let kv = model.kv_bytes_of_block(i as u32, max_seq_len, kv_cache) * u64::from(slots);
        prefix[i + 1] = prefix[i] + model.bytes.per_block[i] + kv;
    }
    move |s, a, b| {
        let mut bytes = prefix[b] - prefix[a];
        if s == 0 {
            bytes += model.bytes.embedding;
        }
        if s == stages - 1 {
            bytes += model.bytes.head;
        }
        bytes
    }
}

/// The contiguous split of `blocks` blocks over `stages` stages that minimises the
/// largest `cost(stage, start, end)`; `None` when every split costs infinity. Ties go to
/// earlier cuts.
fn min_max_split(
    blocks: usize,
    stages: usize,
    cost: impl Fn(usize, usize, usize) -> f64,
) -> Option<Vec<LayerRange>> {
    let (n, l) = (stages, blocks);
    // best[s][i]: smallest achievable max cost placing blocks 0..i on stages 0..=s.
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
    if !best[n - 1][l].is_finite() {
        return None;
    }
    let mut ranges = vec![LayerRange::new(0, 0); n];
    let mut end = l;
    for s in (0..n).rev() {
        let start = if s == 0 { 0 } else { cut[s][end] };
        ranges[s] = LayerRange::new(start as u32, end as u32);
        end = start;
    }
    Some(ranges)
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
        relay: None,
        memory_bytes: 1,
        arena_bytes: None,
        device: None,
        prompt_cache_bytes: None,
        speed: None,
        rtt_us: None,
        links: Vec::new(),
    };
    let nodes: Vec<&PoolNode> = (0..stages).map(|_| &node).collect();
    Some(balance(model, 0, Default::default(), 1, &nodes))
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
    let bytes = stage_bytes(model, max_seq_len, kv_cache, slots, nodes.len());
    let ratio = |s: usize, a: usize, b: usize| bytes(s, a, b) as f64 / nodes[s].memory_bytes as f64;
    // A ratio is finite for every split (memory is never 0 here), so a split exists.
    min_max_split(model.block_count as usize, nodes.len(), ratio)
        .unwrap_or_else(|| vec![LayerRange::new(0, model.block_count)])
}
