//! `swactor run plan`: plan a run over a pool and print the plan and its predictions.

use color_eyre::Section;
use color_eyre::eyre::eyre;
use std::path::Path;

use super::args::{PlanArgs, RuntimeArgs, SamplingMode};
use super::exit::{CliError, ExitCode};
use super::model_cmd::model_error;
use super::output::{Output, human_bytes, table};
use crate::model::{ModelFacts, read_facts};
use crate::planner::{
    Placement, PlanError, PlanRequest, Pool, check_pool, check_runtime_config, check_weights_url,
    plan,
};
use crate::wire::{EdgeKind, RunId, RunPlan, RuntimeConfig, SamplingPolicy, WeightSource};

/// Default `max_seq_len` cap when the flag is absent.
pub const DEFAULT_MAX_SEQ_LEN: u32 = 2048;

/// Turns runtime flags into a checked config for a model.
pub fn runtime_config(args: &RuntimeArgs, model: &ModelFacts) -> Result<RuntimeConfig, CliError> {
    runtime_config_for(args, model.context_length)
}

/// Turns runtime flags into a config for a model of `context_length` tokens, checked by
/// the planner's own [`check_runtime_config`] (a rejection is `invalid_runtime`, exit 4),
/// so that every command accepts and refuses the same flags. A sampling temperature of 0
/// is greedy.
pub fn runtime_config_for(
    args: &RuntimeArgs,
    context_length: u32,
) -> Result<RuntimeConfig, CliError> {
    let sampling = match args.sampling {
        SamplingMode::Greedy => {
            if args.temperature.is_some()
                || args.top_k.is_some()
                || args.top_p.is_some()
                || args.seed.is_some()
            {
                return Err(CliError::new(
                    ExitCode::Usage,
                    "usage",
                    eyre!("--temperature, --top-k, --top-p and --seed apply only to sampling")
                        .suggestion("add `--sampling sample`"),
                ));
            }
            SamplingPolicy::Greedy
        }
        SamplingMode::Sample => SamplingPolicy::Sample {
            temperature: args.temperature.unwrap_or(0.8),
            top_k: args.top_k,
            top_p: args.top_p,
            seed: args.seed.unwrap_or(0),
        },
    };
    let runtime = RuntimeConfig {
        max_seq_len: args.max_seq_len.unwrap_or(context_length.min(DEFAULT_MAX_SEQ_LEN)),
        kv_cache: args.kv_cache.into(),
        activation_dtype: args.activation_dtype.into(),
        max_tokens: args.max_tokens,
        sampling,
        max_sequences: args.max_sequences.unwrap_or(1),
    };
    check_runtime_config(&runtime, context_length).map_err(plan_error)?;
    Ok(RuntimeConfig { sampling: runtime.sampling.normalized(), ..runtime })
}

/// Checks `--weights-url` before anything is hashed or started (`invalid_weights_url`,
/// exit 4).
pub fn check_url(url: Option<&str>) -> Result<(), CliError> {
    url.map_or(Ok(()), |u| check_weights_url(u).map_err(plan_error))
}

/// Reads and parses a pool file, then judges what can be judged without its nodes
/// ([`check_pool`]: a rejection exits 4 with its plan reason).
pub fn read_pool(path: &Path) -> Result<Pool, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot read pool file {}", path.display())),
        )
    })?;
    let pool = Pool::from_toml(&text).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "invalid_pool_file",
            eyre!(e)
                .wrap_err(format!("cannot use pool file {}", path.display()))
                .suggestion("see `swactor run plan --help` and README.md for the pool file format"),
        )
    })?;
    check_pool(&pool).map_err(plan_error)?;
    Ok(pool)
}

/// Maps a plan rejection onto its exit code.
pub fn plan_error(e: PlanError) -> CliError {
    let reason = e.reason.as_str().to_string();
    CliError::new(ExitCode::PlanRejected, reason, eyre!(e).wrap_err("the run cannot be planned"))
}

/// `swactor run plan`.
pub fn run_plan(args: &PlanArgs, out: &mut Output) -> Result<(), CliError> {
    let facts = read_facts(&args.model).map_err(|e| model_error(&args.model, e))?;
    let pool = read_pool(&args.pool)?;
    let runtime = runtime_config(&args.runtime, &facts)?;
    let file_placement = pool.placement.clone().unwrap_or_default();
    let file_layers = pool
        .placement_layers()
        .map_err(|e| CliError::new(ExitCode::Input, "invalid_pool_file", eyre!(e)))?;
    let placement = Placement {
        nodes: args.node_ids().or(file_placement.nodes),
        layers: args.layers.clone().or(file_layers),
    };
    check_url(args.weights_url.as_deref())?;
    let source = match &args.weights_url {
        None => WeightSource::Local { path: absolute(&args.model) },
        Some(url) => WeightSource::Url {
            url: url.clone(),
            size: facts.bytes.file,
            sha256: crate::stage::weights::sha256_file(&args.model).map_err(|e| {
                CliError::new(
                    ExitCode::Input,
                    "io",
                    eyre!(e).wrap_err(format!("cannot hash {}", args.model.display())),
                )
            })?,
        },
    };
    let request = PlanRequest {
        run_id: RunId(args.run_id),
        model: &facts,
        source,
        pool: &pool,
        stages: args.stages,
        placement,
        runtime,
        prompt_tokens: args.prompt_tokens.min(runtime.max_seq_len),
    };
    let plan = plan(&request).map_err(plan_error)?;
    if args.output.json {
        out.json("run_plan", &plan)?;
    } else {
        for line in render_plan(&plan) {
            out.line(line)?;
        }
    }
    Ok(())
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

/// Human rendering of a plan.
pub fn render_plan(plan: &RunPlan) -> Vec<String> {
    let m = &plan.model;
    let rt = &plan.runtime;
    let mut lines = vec![format!(
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
    )];
    lines.push(String::new());
    let mut rows = vec![vec![
        "stage".into(),
        "node".into(),
        "layers".into(),
        "owns".into(),
        "weights".into(),
        "kv cache".into(),
        "rings".into(),
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
            human_bytes(p.kv_cache_bytes),
            human_bytes(p.ring_bytes),
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
            human_bytes(e.ring.capacity),
        ]);
    }
    lines.extend(table(&rows));
    let p = &plan.prediction;
    lines.push(String::new());
    lines.push(format!(
        "per decoded token: {} per activation hop x {} hops, {} over the network in all",
        human_bytes(p.activation_bytes_per_token),
        p.activation_hops,
        human_bytes(p.network_bytes_per_token)
    ));
    lines.push(format!(
        "prefill of {} tokens: {} per activation hop; weights in all: {}",
        p.prompt_tokens,
        human_bytes(p.prompt_activation_bytes),
        human_bytes(p.total_weight_bytes)
    ));
    lines
}
