//! `swactor orchestrate pool` and `swactor run local`: one run over a pool, its text on
//! stdout as it is generated, its events as JSON Lines (`--events FILE`, and on stdout with
//! `--json`), and an exit code per outcome. Each command configures ([`super::config`]),
//! calls the orchestrator, and prints ([`super::run_sink`], [`super::run_report`]).
#![allow(clippy::disallowed_methods)] // the command owns the clock for its timings

use std::time::Duration;

use color_eyre::eyre::eyre;

use super::args::{LocalArgs, OrchestratePoolArgs};
use super::config::local::LocalRun;
use super::config::orchestrate::PoolRun;
use super::config::run::{PrintConfig, RunInputs};
use super::exit::{CliError, ExitCode, plan_error};
use super::output::Output;
use super::progress::Progress;
use super::run_report::{finish, finish_batch};
use super::run_sink::{CliSink, EventsFile, events_error, write_line_errors};
use super::signals::StopSignal;
use crate::orchestrator::driver::{OrchestrateConfig, OrchestrateError, orchestrate};
use crate::orchestrator::local::LocalPool;

/// `swactor orchestrate pool`.
pub fn pool(args: &OrchestratePoolArgs, out: &mut Output) -> Result<(), CliError> {
    // Everything that can be judged without the nodes is judged before waiting for them.
    let run = PoolRun::from_args(args)?;
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        execute(run.orchestrate, &run.inputs, run.print, run.events, out, stop).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// `swactor run local`.
pub fn local(args: &LocalArgs, out: &mut Output) -> Result<(), CliError> {
    // Check what can be checked before any node starts.
    let run = LocalRun::from_args(args)?;
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        let config = run.pool_config()?;
        let mut starting = Progress::new(run.print.json);
        starting.spinner(format!("starting {} nodes", run.nodes));
        let mut pool = tokio::select! {
            p = LocalPool::start(&config) => p.map_err(|e| {
                let reason = e.reason.clone().unwrap_or_else(|| "local_pool_failed".into());
                CliError::new(ExitCode::BootFailed, reason, eyre!(e))
                    .with_suggestion("run again with --node-logs to see the nodes' logs")
            })?,
            _ = stop.clone().stopped() => {
                return Err(CliError::new(ExitCode::Stopped, "operator.interrupt", eyre!("stopped while the nodes started")));
            }
        };
        starting.clear();
        if let Some(pause) = run.pause {
            eprintln!("swactor: test pause: the nodes started");
            tokio::time::sleep(pause).await;
        }
        let result = local_run(args, &pool, run.print, run.events, out, stop).await;
        pool.stop().await;
        result
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// The run of `run local` once its nodes run: the model (`--model`, or a synthesized one
/// in the pool's directory), configured, executed.
async fn local_run(
    args: &LocalArgs,
    pool: &LocalPool,
    print: PrintConfig,
    events: Option<EventsFile>,
    out: &mut Output,
    stop: StopSignal,
) -> Result<(), CliError> {
    let model = match &args.model {
        Some(m) => m.clone(),
        None => {
            eprintln!(
                "swactor: no --model: a small synthesized model with random weights runs (its \
                 text is random); pass --model FILE.gguf for a real one"
            );
            let path = pool.dir().join("synth.gguf");
            crate::model::synth::write_model(&path, &crate::model::synth::SynthSpec::default())
                .map_err(|e| CliError::internal(eyre!("cannot synthesize a model: {e}")))?;
            path
        }
    };
    let (config, inputs) = LocalRun::orchestrate(args, pool, &model)?;
    execute(config, &inputs, print, events, out, stop).await
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// Runs the orchestrator and turns its report into output and an exit code. `events` was
/// created before anything started.
async fn execute(
    config: OrchestrateConfig,
    inputs: &RunInputs,
    print: PrintConfig,
    mut events: Option<EventsFile>,
    out: &mut Output,
    stop: StopSignal,
) -> Result<(), CliError> {
    let batch =
        inputs.batch.as_ref().map(|_| inputs.requests.iter().map(|r| r.id.clone()).collect());
    if let Some(errors) = &inputs.batch {
        write_line_errors(out, errors)?;
    }
    let mut sink = CliSink::new(&mut *out, print, batch, events.as_mut());
    let result =
        orchestrate(config, &inputs.facts, &inputs.tokenizer, &mut sink, stop.stopped()).await;
    sink.progress.done();
    if let Some(e) = sink.error.take() {
        return Err(e.into());
    }
    if let Some(f) = events.as_mut()
        && let Some(e) = f.error.take()
    {
        return Err(events_error(&f.path, e));
    }
    let report = result.map_err(orchestrate_error)?;
    match &inputs.batch {
        Some(errors) => finish_batch(report, errors.len(), print, out),
        None => finish(report, inputs.prompt_tokens(), print, out),
    }
}

/// Maps an orchestrator error onto its exit code.
fn orchestrate_error(e: OrchestrateError) -> CliError {
    match e {
        OrchestrateError::Setup(m) => CliError::new(ExitCode::Input, "setup_failed", eyre!(m)),
        OrchestrateError::PoolTimeout(..) => {
            CliError::new(ExitCode::PoolNotReady, "timeout.pool_readiness", eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
        OrchestrateError::PoolRefused(..) => {
            CliError::new(ExitCode::PoolNotReady, "pool_refused", eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
        OrchestrateError::Plan(p) => plan_error(p),
        OrchestrateError::Stopped => {
            CliError::new(ExitCode::Stopped, "operator.interrupt", eyre!(e))
        }
    }
}
