//! `swactor run plan`: plan a run over a pool and print the plan and its predictions.

use super::args::PlanArgs;
use super::config::plan::PlanConfig;
use super::exit::{CliError, plan_error};
use super::output::{Output, human_bytes, table};
use crate::planner::plan;
use crate::wire::{ContextWhy, EdgeKind, RunPlan, SamplingPolicy};

/// `swactor run plan`.
pub fn run_plan(args: &PlanArgs, out: &mut Output) -> Result<(), CliError> {
    let config = PlanConfig::from_args(args)?;
    let plan = plan(&config.request()).map_err(plan_error)?;
    if args.output.json {
        out.json("run_plan", &plan)?;
    } else {
        for line in render_plan(&plan) {
            out.line(line)?;
        }
    }
    Ok(())
}

/// The plan's context and why it is that long.
pub fn context_line(c: &crate::wire::PlanContext) -> String {
    let (tokens, trained) = (c.tokens, c.trained);
    match c.why {
        ContextWhy::Given => {
            format!("context: {tokens} tokens, as --max-seq-len gives (trained: {trained})")
        }
        ContextWhy::Trained => format!("context: {tokens} tokens, the model's trained length"),
        ContextWhy::Memory { node } => format!(
            "context: {tokens} tokens, the most every stage's node holds (the trained {trained} \
             do not fit node {node}'s memory; --max-seq-len sets it)"
        ),
    }
}

/// The plan's first line: the model, the stages, the runtime.
fn header_line(plan: &RunPlan) -> String {
    let m = &plan.model;
    let rt = &plan.runtime;
    format!(
        "run {}: {} ({}, {} blocks, hidden {}) in {} stages, max_seq_len {}, activations {:?}, {}",
        plan.run_id,
        m.name.as_deref().unwrap_or("model"),
        m.architecture,
        m.block_count,
        m.hidden_size,
        plan.stages.len(),
        rt.max_seq_len,
        rt.activation_dtype,
        match rt.sampling {
            SamplingPolicy::Greedy => "greedy".to_string(),
            SamplingPolicy::Sample { temperature, top_k, top_p, seed } => format!(
                "sampling t={temperature} top_k={} top_p={} seed={seed}",
                top_k.map_or("-".into(), |k| k.to_string()),
                top_p.map_or("-".into(), |p| p.to_string())
            ),
        }
    )
}

/// The prompt-cache store's line: its blocks, or why there is none.
fn prompt_cache_line(c: &crate::wire::PromptCachePlan) -> String {
    use crate::wire::PromptCacheOff;
    match c.off {
        None => format!(
            "prompt cache: {} blocks of {} positions on every stage ({} positions)",
            c.blocks,
            c.block_tokens,
            u64::from(c.blocks) * u64::from(c.block_tokens)
        ),
        Some(PromptCacheOff::Disabled) => "prompt cache: off (--prompt-cache-bytes 0)".into(),
        Some(PromptCacheOff::SlidingWindow) => {
            "prompt cache: warm slots only (sliding-window rings are shorter than the context)"
                .into()
        }
        Some(PromptCacheOff::Device) => {
            "prompt cache: warm slots only (a stage is on a GPU)".into()
        }
        Some(PromptCacheOff::TooSmall) => {
            "prompt cache: warm slots only (a stage's budget holds no block)".into()
        }
    }
}

/// Human rendering of a plan.
pub fn render_plan(plan: &RunPlan) -> Vec<String> {
    let mut lines = vec![header_line(plan)];
    if let Some(c) = &plan.context {
        lines.push(context_line(c));
    }
    lines.push(prompt_cache_line(&plan.prompt_cache));
    lines.push(String::new());
    let mut rows = vec![vec![
        "stage".into(),
        "node".into(),
        "layers".into(),
        "owns".into(),
        "weights".into(),
        "read/token".into(),
        "kv cache".into(),
        "row log".into(),
        "prompt cache".into(),
        "rings".into(),
        "compute".into(),
        "processes".into(),
        "total".into(),
        "of memory".into(),
    ]];
    for s in &plan.stages {
        let p = &s.prediction;
        let owns = match (s.embedding, s.head) {
            (true, true) => "embedding+head",
            (true, false) => "embedding",
            (false, true) => "head",
            (false, false) => "-",
        };
        rows.push(vec![
            s.stage_index.to_string(),
            s.node_id.to_string(),
            s.layers.to_string(),
            owns.into(),
            human_bytes(p.weight_bytes),
            human_bytes(p.active_weight_bytes),
            human_bytes(p.kv_cache_bytes),
            human_bytes(p.row_log_bytes),
            human_bytes(p.prompt_cache_bytes),
            human_bytes(p.ring_bytes),
            human_bytes(p.compute_bytes),
            human_bytes(p.process_bytes),
            human_bytes(p.total_bytes),
            format!(
                "{:.1}% of {}",
                100.0 * p.total_bytes as f64 / p.node_memory_bytes as f64,
                human_bytes(p.node_memory_bytes)
            ),
        ]);
    }
    lines.extend(table(&rows));
    lines.push(String::new());
    let mut rows = vec![vec![
        "edge".into(),
        "kind".into(),
        "producer".into(),
        "consumer".into(),
        "object".into(),
        "max object".into(),
        "ring".into(),
    ]];
    let end = |node: crate::wire::NodeId, stage: Option<crate::wire::StageIndex>| match stage {
        Some(s) => format!("stage {s} (node {node})"),
        None => format!("orchestrator (node {node})"),
    };
    for e in &plan.edges {
        let object = match e.kind {
            EdgeKind::Activation { .. } => {
                format!("{:?}[tokens, {}]", e.object.dtype, e.object.row_elems).to_lowercase()
            }
            _ => "u32 token ids".into(),
        };
        rows.push(vec![
            e.edge_id.to_string(),
            e.kind.label().into(),
            end(e.producer, e.producer_stage),
            end(e.consumer, e.consumer_stage),
            object,
            human_bytes(e.object.max_extent),
            ring_column(e.object.max_extent, e.ring.capacity),
        ]);
    }
    lines.extend(table(&rows));
    if plan.edges.iter().any(|e| e.object.max_extent > e.ring.capacity) {
        lines.push(
            "(streamed: an object larger than its ring passes through it a span at a time; the \
             ring never holds it whole)"
                .into(),
        );
    }
    let p = &plan.prediction;
    lines.push(String::new());
    lines.push(format!(
        "per decoded token: {} per activation hop x {} hops, {} over the network in all",
        human_bytes(p.activation_bytes_per_token),
        p.activation_hops,
        human_bytes(p.network_bytes_per_token)
    ));
    lines.push(format!(
        "prefill of {} tokens: {} per activation hop; weights in all: {}, read per decoded \
         token: {}",
        p.prompt_tokens,
        human_bytes(p.prompt_activation_bytes),
        human_bytes(p.total_weight_bytes),
        human_bytes(p.active_weight_bytes)
    ));
    lines.push(String::new());
    lines.extend(super::plan_speed::speed_lines(plan));
    lines
}

/// The ring column: its capacity, marked `streamed` when the edge's largest object does not
/// fit in it whole.
fn ring_column(max_object: u64, capacity: u64) -> String {
    if max_object > capacity {
        format!("{} (streamed)", human_bytes(capacity))
    } else {
        human_bytes(capacity)
    }
}
