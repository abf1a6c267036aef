//! `swactor orchestrate pool`'s flags -> a [`PoolRun`].

use crate::cli::args::OrchestratePoolArgs;
use crate::cli::exit::{CliError, plan_error};
use crate::cli::run_sink::EventsFile;
use crate::orchestrator::driver::{OrchestrateConfig, OrchestratorKey};
use crate::planner::{PlanRequest, check_before_reports};

use super::run::{PrintConfig, RunInputs, session_draft_model};
use super::session::{joined, session_settings};
use super::source::{check_url, placement, read_pool, weight_source};

/// A run over a pool, configured: everything judged that can be judged without the nodes.
pub struct PoolRun {
    /// The orchestrator's config.
    pub orchestrate: OrchestrateConfig,
    /// The model side: facts, tokenizer, requests.
    pub inputs: RunInputs,
    /// The `--events` file, created.
    pub events: Option<EventsFile>,
    /// How the run is printed.
    pub print: PrintConfig,
}

impl PoolRun {
    /// Reads the model, the requests and the pool file, creates the `--events` file, and
    /// plans once as the driver will once the pool is ready ([`check_before_reports`]: a
    /// node without `memory_bytes` is judged by its report, later): a request the pool can
    /// never satisfy (placement, stage count, declared memory, ...) is rejected before
    /// waiting. The checks run in the order whose first failure is reported.
    pub fn from_args(args: &OrchestratePoolArgs) -> Result<PoolRun, CliError> {
        let inputs = RunInputs::read(&args.model, &args.run)?;
        check_url(args.weights_url.as_deref())?;
        let events = args.run.session.events.as_deref().map(EventsFile::create).transpose()?;
        let pool = read_pool(&args.pool)?;
        let placement = placement(&pool, &args.placement)?;
        let source = weight_source(
            &args.model,
            args.weights_url.as_deref(),
            inputs.facts.bytes.file,
            "cannot hash the model",
        )?;
        let run_id = super::run::run_id(&args.run);
        // The driver plans again with this orchestrator's own identity.
        check_before_reports(&PlanRequest {
            run_id,
            model: &inputs.facts,
            source: source.clone(),
            pool: &pool,
            stages: args.placement.stages,
            placement: placement.clone(),
            runtime: inputs.runtime,
            prompt_tokens: match &inputs.requests[..] {
                [one] if inputs.batch.is_none() => {
                    (one.prompt.len() as u32).min(inputs.runtime.max_seq_len)
                }
                _ => 0,
            },
            fit_context: args.run.session.runtime.max_seq_len.is_none(),
            prompt_cache_bytes: args.run.session.runtime.prompt_cache_bytes,
            min_speedup: args.placement.min_speedup,
        })
        .map_err(plan_error)?;
        let session = session_settings(&args.run.session, inputs.request_count().max(1));
        let key = OrchestratorKey::File(args.key.clone());
        let config = OrchestrateConfig::new(pool, key, args.model.clone(), source, inputs.runtime);
        let spec = &args.run.session.spec;
        let orchestrate = OrchestrateConfig {
            requests: inputs.requests.clone(),
            stages: args.placement.stages,
            min_speedup: args.placement.min_speedup,
            placement,
            run_id,
            draft_model: session_draft_model(spec, &inputs.facts)?,
            ..joined(config, &args.join)?.with_session(session)
        };
        Ok(PoolRun { orchestrate, inputs, events, print: PrintConfig::of(&args.run) })
    }
}
