//! The prompt cache's store: how many KV blocks every stage keeps in host memory, counted
//! in each stage's predicted memory (`specs/prefix-cache.md`).
//!
//! Every stage keeps the same number of blocks (a block holds the same positions on every
//! stage, each of its own layers), so the store's size is the smallest over the stages of
//! what the stage's node budget holds. A node's budget is its own (`prompt_cache_bytes` in
//! the pool file or its report) and the request's, the smaller where both are given, or,
//! when neither is, a quarter of what the node has left after the stage, at most
//! [`DEFAULT_BUDGET_CAP`].

use super::pool::PoolNode;
use super::{PlanError, PlanRejection, PlanRequest, Result};
use crate::wire::{PromptCacheOff, PromptCachePlan, StagePlan};

/// The default budget's cap per node (llama-server's prompt cache defaults to 8 GiB for
/// a whole model; a stage holds a part of it).
pub const DEFAULT_BUDGET_CAP: u64 = 4 << 30;
/// The most blocks a store holds, whatever the budget (the orchestrator's directory keeps
/// one entry per block).
pub const MAX_BLOCKS: u32 = 1 << 16;
/// The fewest positions in a block.
pub const MIN_BLOCK_TOKENS: u32 = 64;

/// Positions per block for a context of `max_seq_len`: at least [`MIN_BLOCK_TOKENS`], and
/// large enough that a slot holds at most 32 blocks, so that saving a whole slot and
/// loading a whole prompt fit one table's cache operations.
pub fn block_tokens(max_seq_len: u32) -> u32 {
    let per_slot = u32::from(crate::wire::cache_ops::MAX_CACHE_OPS) / 2;
    max_seq_len.div_ceil(per_slot).next_power_of_two().max(MIN_BLOCK_TOKENS)
}

/// Sizes the store and adds each stage's part to its prediction. A stage whose node
/// cannot hold its part of an explicit budget is rejected (`exceeds_node_memory`).
pub(super) fn plan_store(
    req: &PlanRequest<'_>,
    stages: &mut [StagePlan],
    nodes: &[&PoolNode],
) -> Result<PromptCachePlan> {
    let rt = &req.runtime;
    let block = block_tokens(rt.max_seq_len);
    let off = |why| Ok(PromptCachePlan { block_tokens: block, blocks: 0, off: Some(why) });
    // Each node's budget: its own and the run's, the smaller where both are given.
    let budgets: Vec<Option<u64>> = nodes
        .iter()
        .map(|n| match (n.prompt_cache_bytes, req.prompt_cache_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
        .collect();
    if budgets.contains(&Some(0)) {
        return off(PromptCacheOff::Disabled);
    }
    let ring = |w: u32| w.saturating_add(crate::model::arch::SLIDING_WINDOW_SLACK);
    if req.model.arch.sliding_window.is_some_and(|w| ring(w) < rt.max_seq_len) {
        return off(PromptCacheOff::SlidingWindow);
    }
    if nodes.iter().any(|n| n.device.as_deref().is_some_and(|d| d.starts_with("cuda"))) {
        return off(PromptCacheOff::Device);
    }
    // A block holds the stage's KV of its positions and, but on the last stage, the rows
    // it logged for them.
    let rows = super::edges::row_bytes(req) * u64::from(block);
    let per_block = |s: &StagePlan| {
        let kv = req.model.kv_bytes_of_blocks(s.layers.blocks(), block, rt.kv_cache);
        (kv + if s.head { 0 } else { rows }).max(1)
    };
    let mut blocks = MAX_BLOCKS;
    for (s, asked) in stages.iter().zip(&budgets) {
        let left = s.prediction.node_memory_bytes.saturating_sub(s.prediction.total_bytes);
        let budget = match *asked {
            Some(b) if b > left => {
                return Err(PlanError::new(
                    PlanRejection::ExceedsNodeMemory,
                    format!(
                        "stage {} on node {} has {left} bytes left for a prompt cache of {b}: \
                         lower --prompt-cache-bytes (the run's or the node's)",
                        s.stage_index.0, s.node_id
                    ),
                ));
            }
            Some(b) => b,
            None => (left / 4).min(DEFAULT_BUDGET_CAP),
        };
        blocks = blocks.min(u32::try_from(budget / per_block(s)).unwrap_or(u32::MAX));
    }
    if blocks == 0 {
        return off(PromptCacheOff::TooSmall);
    }
    for s in stages.iter_mut() {
        let bytes = u64::from(blocks) * per_block(s);
        s.prediction.prompt_cache_bytes = bytes;
        s.prediction.total_bytes += bytes;
    }
    Ok(PromptCachePlan { block_tokens: block, blocks, off: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_at_least_64_positions_and_a_slot_at_most_32_blocks() {
        assert_eq!(block_tokens(128), 64);
        assert_eq!(block_tokens(2048), 64);
        assert_eq!(block_tokens(2049), 128);
        assert_eq!(block_tokens(8192), 256);
        for ctx in [1u32, 100, 4096, 5000, 131_072] {
            assert!(ctx.div_ceil(block_tokens(ctx)) <= 32, "{ctx}");
        }
    }
}
