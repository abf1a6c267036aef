//! The planner's input checks: runtime settings, weight source, model facts, pool meaning,
//! node memory and explicit layer ranges. Each returns the first typed rejection.

use std::collections::HashSet;

use super::pool::{self, Pool, PoolNode};
use super::{PlanError, PlanRequest, Result};
use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::{LayerRange, RuntimeConfig, WeightSource, WeightsUrl};

/// Checks a request's runtime settings against its model, and that its prompt fits.
pub(super) fn check_runtime(req: &PlanRequest<'_>) -> Result<()> {
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

/// Checks a model's shape: hidden size and head counts, and one set of tensors per block.
pub(super) fn check_model(model: &ModelFacts) -> Result<()> {
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

/// Judges a pool's meaning without its nodes: node ids other than 0 (SWIM's "unknown"),
/// distinct (the orchestrator's included), endpoint ids of 64 hex digits and distinct,
/// addresses for every node that a peer can reach ([`pool::unreachable_addr`]), and device
/// labels `cpu` / `cuda:N`. The one check every command (`run plan`, `orchestrate pool`,
/// `pool watch`, `pool init`) runs on a pool, before waiting for nodes.
pub fn check_pool(pool: &Pool) -> Result<()> {
    let mut seen = HashSet::from([pool.orchestrator.node_id]);
    let mut endpoints = HashSet::new();
    let invalid = |m: String| Err(PlanError::new(PlanRejection::InvalidPool, m));
    if pool.orchestrator.node_id.0 == 0 {
        return invalid("the orchestrator's node id is 0, which names no node".into());
    }
    if let Some(e) = &pool.orchestrator.endpoint_id
        && !pool::is_endpoint_id(e)
    {
        return invalid(format!("the orchestrator's endpoint id `{e}` is not 64 hex digits"));
    }
    if let Some(why) = pool.orchestrator.addrs.iter().find_map(pool::unreachable_addr) {
        return invalid(format!("the orchestrator's address {why}"));
    }
    for n in &pool.nodes {
        check_node_entry(n)?;
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
    }
    Ok(())
}

/// Judges one node's entry on its own: its id, addresses and device label.
fn check_node_entry(n: &PoolNode) -> Result<()> {
    let invalid = |m: String| Err(PlanError::new(PlanRejection::InvalidPool, m));
    if n.node_id.0 == 0 {
        return invalid("a node's id is 0, which names no node (ids start at 1)".into());
    }
    if n.addrs.is_empty() && n.relay.is_none() {
        return invalid(format!("node {} has no addresses and no relay", n.node_id));
    }
    if let Some(relay) = n.relay.as_deref()
        && !pool::is_relay_url(relay)
    {
        return invalid(format!(
            "node {}: relay `{relay}` is not an http:// or https:// URL with a host",
            n.node_id
        ));
    }
    if let Some(why) = n.addrs.iter().find_map(pool::unreachable_addr) {
        return invalid(format!("node {}: address {why}", n.node_id));
    }
    if let Some(device) = n.device.as_deref()
        && !pool::is_device_label(device)
    {
        return invalid(format!("node {}: device `{device}` is not `cpu` or `cuda:N`", n.node_id));
    }
    Ok(())
}

/// Checks that every node chosen for a stage says how much memory it has.
pub(super) fn check_node_memory(nodes: &[&PoolNode]) -> Result<()> {
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
    Ok(())
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
