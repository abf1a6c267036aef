//! `swactor run plan`'s flags -> a [`PlanConfig`].

use crate::cli::args::PlanArgs;
use crate::cli::exit::{CliError, model_error};
use crate::model::{ModelFacts, read_facts};
use crate::planner::{Placement, PlanRequest, Pool};
use crate::wire::{RunId, RuntimeConfig, WeightSource};

use super::runtime::runtime_config;
use super::source::{check_url, placement, read_pool, weight_source};

/// Everything `run plan` plans with, read and checked.
pub struct PlanConfig {
    /// The model's facts.
    pub facts: ModelFacts,
    /// The pool file, checked.
    pub pool: Pool,
    /// Where the nodes read the weights.
    pub source: WeightSource,
    /// `--stages`.
    pub stages: Option<u32>,
    /// Nodes and layers, from the flags or the pool file.
    pub placement: Placement,
    /// The runtime settings, checked.
    pub runtime: RuntimeConfig,
    /// `--run-id`.
    pub run_id: RunId,
    /// The prompt length the prefill predictions assume (at most `max_seq_len`).
    pub prompt_tokens: u32,
    /// No `--max-seq-len`: the context is fitted to memory.
    pub fit_context: bool,
    /// `--prompt-cache-bytes`.
    pub prompt_cache_bytes: Option<u64>,
    /// `--min-speedup`.
    pub min_speedup: Option<f64>,
}

impl PlanConfig {
    /// Reads the model and the pool file and checks the flags, in the order whose first
    /// failure is reported.
    pub fn from_args(args: &PlanArgs) -> Result<PlanConfig, CliError> {
        let facts = read_facts(&args.model).map_err(|e| model_error(&args.model, e))?;
        let pool = read_pool(&args.pool)?;
        let runtime = runtime_config(&args.runtime, &facts)?;
        let placement = placement(&pool, &args.placement)?;
        check_url(args.weights_url.as_deref())?;
        let hash_context = format!("cannot hash {}", args.model.display());
        let source = weight_source(
            &args.model,
            args.weights_url.as_deref(),
            facts.bytes.file,
            &hash_context,
        )?;
        Ok(PlanConfig {
            facts,
            pool,
            source,
            stages: args.placement.stages,
            placement,
            runtime,
            run_id: RunId(args.run_id),
            prompt_tokens: args.prompt_tokens.min(runtime.max_seq_len),
            fit_context: args.runtime.max_seq_len.is_none(),
            prompt_cache_bytes: args.runtime.prompt_cache_bytes,
            min_speedup: args.placement.min_speedup,
        })
    }

    /// The planner's request.
    pub fn request(&self) -> PlanRequest<'_> {
        PlanRequest {
            run_id: self.run_id,
            model: &self.facts,
            source: self.source.clone(),
            pool: &self.pool,
            stages: self.stages,
            placement: self.placement.clone(),
            runtime: self.runtime,
            prompt_tokens: self.prompt_tokens,
            fit_context: self.fit_context,
            prompt_cache_bytes: self.prompt_cache_bytes,
            min_speedup: self.min_speedup,
        }
    }
}
