//! Runtime and sampling flags -> a checked [`RuntimeConfig`], the same for every command.

use color_eyre::Section;
use color_eyre::eyre::eyre;

use crate::cli::args::{RuntimeArgs, SamplingMode};
use crate::cli::exit::{CliError, ExitCode, plan_error};
use crate::model::ModelFacts;
use crate::planner::check_runtime_config;
use crate::wire::{RuntimeConfig, SamplingPolicy};

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
    let s = &args.sampler;
    let sampling = match s.sampling {
        SamplingMode::Greedy => {
            if s.temperature.is_some() || s.top_k.is_some() || s.top_p.is_some() || s.seed.is_some()
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
            temperature: s.temperature.unwrap_or(0.8),
            top_k: s.top_k,
            top_p: s.top_p,
            seed: s.seed.unwrap_or(0),
        },
    };
    // Without `--max-seq-len`, the model's trained length: a plan lowers it to what its
    // nodes' memory holds (`PlanRequest::fit_context`).
    let max_seq_len = args.max_seq_len.unwrap_or(context_length);
    let runtime = RuntimeConfig {
        max_seq_len,
        kv_cache: args.kv_cache.into(),
        activation_dtype: args.activation_dtype.into(),
        // Without `--max-tokens`, generation ends at the end of sequence, a stop, or the
        // context's end (a sequence never outgrows its context).
        max_tokens: args.max_tokens.unwrap_or(max_seq_len),
        sampling,
        max_sequences: args.max_sequences.unwrap_or(1),
        max_top_logprobs: None,
        mask_bytes: 0,
    };
    check_runtime_config(&runtime, context_length).map_err(plan_error)?;
    Ok(RuntimeConfig { sampling: runtime.sampling.normalized(), ..runtime })
}

/// `generate`'s context without `--max-seq-len`: the model's trained length lowered as a
/// plan lowers it, for `stages` stages sharing this host's available memory (its stages
/// run in this process, nobody else plans them). Where even the shortest context does
/// not fit, or the host's memory is unknown, the runtime is left as it is.
pub fn fit_in_host_memory(
    runtime: RuntimeConfig,
    model: &ModelFacts,
    stages: u32,
    available: Option<u64>,
) -> RuntimeConfig {
    use crate::planner::pool::OrchestratorEntry;
    use crate::planner::{Placement, PlanRequest, Pool, PoolNode, plan};
    use crate::wire::{NodeId, WeightSource};
    let Some(memory) = available else { return runtime };
    let stages = stages.max(1);
    let node = |i: u32| PoolNode {
        node_id: NodeId(u64::from(i) + 1),
        endpoint_id: format!("{:064x}", u64::from(i) + 1),
        addrs: vec![std::net::SocketAddr::from(([127, 0, 0, 1], 1))],
        relay: None,
        memory_bytes: memory / u64::from(stages),
        arena_bytes: None,
        device: None,
        prompt_cache_bytes: None,
        speed: None,
        rtt_us: None,
        links: Vec::new(),
    };
    let pool = Pool {
        orchestrator: OrchestratorEntry {
            node_id: NodeId(u64::MAX),
            endpoint_id: None,
            addrs: vec![],
            relay: None,
        },
        nodes: (0..stages).map(node).collect(),
        placement: None,
    };
    let request = PlanRequest {
        run_id: crate::wire::RunId(1),
        model,
        source: WeightSource::Local { path: String::new() },
        pool: &pool,
        stages: Some(stages),
        placement: Placement::default(),
        runtime,
        prompt_tokens: 0,
        fit_context: true,
        prompt_cache_bytes: None,
        min_speedup: None,
    };
    plan(&request).map_or(runtime, |p| p.runtime)
}
