//! `swactor orchestrate pool`'s flags -> a [`PoolRun`].

use std::time::Duration;

use crate::cli::args::OrchestratePoolArgs;
use crate::cli::exit::{CliError, plan_error};
use crate::cli::run_sink::EventsFile;
use crate::orchestrator::driver::{OrchestrateConfig, OrchestratorKey};
use crate::planner::{PlanRequest, check_before_reports};

use super::run::{PrintConfig, RunInputs, session_draft_model, session_limits, timeouts};
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
        let events = args.run.events.as_deref().map(EventsFile::create).transpose()?;
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
            fit_context: args.run.runtime.max_seq_len.is_none(),
        })
        .map_err(plan_error)?;
        let join = &args.join;
        let orchestrate = OrchestrateConfig {
            pool,
            key: OrchestratorKey::File(args.key.clone()),
            listen: join.listen,
            swim: join.swim,
            advertise: join.advertise,
            model: args.model.clone(),
            source,
            requests: inputs.requests.clone(),
            session: session_limits(&args.run, &inputs),
            stages: args.placement.stages,
            placement,
            runtime: inputs.runtime,
            fit_context: args.run.runtime.max_seq_len.is_none(),
            run_id,
            window: Duration::from_millis(join.window_ms),
            pool_timeout: Duration::from_secs(join.pool_timeout),
            timeouts: timeouts(&args.run),
            resume: args.run.resume.policy(),
            draft_model: session_draft_model(&args.run.spec, &inputs.facts)?,
        };
        Ok(PoolRun { orchestrate, inputs, events, print: PrintConfig::of(&args.run) })
    }
}
