//! Node choice and layer ranges: which node runs each stage, and the contiguous block
//! ranges the stages get, explicit or balanced by a min-max dynamic program over block
//! bytes and KV cache weighted by node memory.

use std::collections::HashSet;

use super::checks::check_ranges;
use super::pool::PoolNode;
use super::{PlanError, PlanRequest, Result};
use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::{LayerRange, NodeId};

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

/// The layer range of each stage: the placement's (checked), or balanced over `nodes`.
pub(super) fn layer_ranges(req: &PlanRequest<'_>, nodes: &[&PoolNode]) -> Result<Vec<LayerRange>> {
    let model = req.model;
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
            nodes,
        ),
    };
    Ok(layers)
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
    let n = nodes.len();
    let l = model.block_count as usize;
    let mut prefix = vec![0u64; l + 1];
    for i in 0..l {
        let kv = model.kv_bytes_of_block(i as u32, max_seq_len, kv_cache) * u64::from(slots);
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
