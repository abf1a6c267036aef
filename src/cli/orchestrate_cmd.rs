//! `swactor orchestrate pool` and `swactor run local`: one run over a pool, its text on
//! stdout as it is generated, its events as JSON Lines (`--events FILE`, and on stdout with
//! `--json`), and an exit code per outcome. Each command configures ([`super::config`]),
//! calls the orchestrator, and prints ([`super::run_sink`], [`super::run_report`]).
#![allow(clippy::disallowed_methods)] // the command owns the clock for its timings

use std::sync::Arc;
use std::time::Duration;

use color_eyre::eyre::eyre;

use super::args::{LocalArgs, OrchestratePoolArgs};
use super::batch_tokens::{self, Encode};
use super::config::local::LocalRun;
use super::config::orchestrate::PoolRun;
use super::config::run::{PrintConfig, RunInputs};
use super::exit::{CliError, ExitCode, INTERRUPTED, orchestrate_error};
use super::local_nodes::{start_pool, synth_model};
use super::output::Output;
use super::requests::Batch;
use super::run_report::{finish, finish_batch};
use super::run_sink::{CliSink, EventsFile, events_error, write_line_errors};
use super::signals::StopSignal;
use crate::chat::{Conversation, Message};
use crate::orchestrator::driver::{OrchestrateConfig, orchestrate};
use crate::orchestrator::local::LocalPool;
use crate::wire::reason::RequestEnd;

/// `swactor orchestrate pool`.
pub fn pool(args: &OrchestratePoolArgs, out: &mut Output) -> Result<(), CliError> {
    // Everything that can be judged without the nodes is judged before waiting for them.
    let mut run = PoolRun::from_args(args)?;
    if let Some(batch) = &mut run.inputs.batch
        && batch.lines.iter().all(|l| l.is_err())
    {
        return nothing_to_run(batch, out);
    }
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        let print = Print { config: run.print, waiting: true };
        execute(run.orchestrate, run.inputs, print, run.events, out, stop).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// `swactor run local` (`run local --serve` is [`super::serve_cmd::local`]).
pub fn local(args: &LocalArgs, out: &mut Output) -> Result<(), CliError> {
    super::config::serve::check_local_flags(args)?;
    // Check what can be checked before any node starts.
    let mut run = LocalRun::from_args(args)?;
    if let Some(batch) = run.inputs.as_mut().and_then(|i| i.batch.as_mut())
        && batch.lines.iter().all(|l| l.is_err())
    {
        return nothing_to_run(batch, out);
    }
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        let config = run.pool_config()?;
        let Some(mut pool) = start_pool(&config, run.print.json, &stop).await? else {
            if let Some(inputs) = &run.inputs {
                fail_batch(inputs, RequestEnd::OperatorStopped.as_str(), run.print, out)?;
            }
            let stopped = eyre!("stopped while the nodes started");
            return Err(CliError::new(ExitCode::Stopped, INTERRUPTED.to_string(), stopped));
        };
        if let Some(pause) = run.pause {
            eprintln!("swactor: test pause: the nodes started");
            tokio::time::sleep(pause).await;
        }
        let result = local_run(args, &pool, run.inputs, run.print, run.events, out, stop).await;
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
    inputs: Option<RunInputs>,
    print: PrintConfig,
    events: Option<EventsFile>,
    out: &mut Output,
    stop: StopSignal,
) -> Result<(), CliError> {
    let model = match &args.model {
        Some(m) => m.clone(),
        None => synth_model(pool, "runs")?,
    };
    let mut inputs = match inputs {
        Some(inputs) => inputs,
        None => RunInputs::read(&model, &args.run)?,
    };
    // Without `--model` the requests are judged only now: still, nothing is provisioned.
    if let Some(batch) = &mut inputs.batch
        && batch.lines.iter().all(|l| l.is_err())
    {
        return nothing_to_run(batch, out);
    }
    let config = LocalRun::orchestrate(args, pool, &model, &inputs)?;
    execute(config, inputs, Print { config: print, waiting: false }, events, out, stop).await
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

/// How a run is printed, and whether stderr says which nodes it waits for (a pool run in
/// text mode: its nodes are other hosts; a local run's are its own children).
struct Print {
    config: PrintConfig,
    waiting: bool,
}

/// Runs the orchestrator and turns its report into output and an exit code. `events` was
/// created before anything started.
async fn execute(
    config: OrchestrateConfig,
    mut inputs: RunInputs,
    print: Print,
    mut events: Option<EventsFile>,
    out: &mut Output,
    stop: StopSignal,
) -> Result<(), CliError> {
    let mut ids = None;
    let mut arriving = None;
    if let Some(batch) = &mut inputs.batch {
        write_line_errors(out, batch.errors())?;
        let pending = batch.take_pending();
        ids = Some(pending.iter().map(|p| p.id.clone()).collect());
        let (tokenizer, chat, now) =
            (inputs.tokenizer.clone(), inputs.chat.clone(), inputs.now_unix);
        let encode: Encode = Arc::new(move |p| match &p.messages {
            // Only the template's own text is special; each content is text.
            Some(m) => {
                let conv = Conversation::new(m.iter().map(|(r, c)| Message::new(r, c)).collect());
                // Judged when the line was read: the same messages write the same way.
                chat.encode(&tokenizer, &conv, now, usize::MAX).unwrap_or_default()
            }
            None => tokenizer.encode(&p.text, true, false),
        });
        arriving = Some(batch_tokens::spawn(pending, encode));
    }
    let Print { config: print, waiting } = print;
    let mut sink = CliSink::new(&mut *out, print, ids, events.as_mut());
    if waiting {
        sink = sink.waiting_for(config.pool.nodes.iter().map(|n| n.node_id));
    }
    let result =
        orchestrate(config, arriving, &inputs.facts, &inputs.tokenizer, &mut sink, stop.stopped())
            .await;
    sink.progress.done();
    let result = result.map_err(orchestrate_error);
    if let Err(e) = &result {
        // Every request gets its line, whatever ended the run before it started.
        let reason = if e.code == ExitCode::Stopped {
            RequestEnd::OperatorStopped.as_str()
        } else {
            &e.reason
        };
        sink.fail_unreported(reason);
    }
    if let Some(e) = sink.error.take() {
        return Err(e.into());
    }
    if let Some(f) = events.as_mut()
        && let Some(e) = f.error.take()
    {
        return Err(events_error(&f.path, e));
    }
    let report = result?;
    match &inputs.batch {
        Some(batch) => finish_batch(report, batch.error_count(), print, out),
        None => finish(report, inputs.prompt_tokens(), print, out),
    }
}

/// A batch job whose every line is an error (or that has none): each line's error, and
/// no pool, node or stage is started. Exit 3, `no_requests`.
fn nothing_to_run(batch: &Batch, out: &mut Output) -> Result<(), CliError> {
    write_line_errors(out, batch.errors())?;
    Err(CliError::new(
        ExitCode::Input,
        "no_requests",
        eyre!("the requests hold no request that can run ({} lines refused)", batch.error_count()),
    ))
}

/// A batch job stopped before its session started: each line's error, then every request
/// an `error` line naming `reason`.
fn fail_batch(
    inputs: &RunInputs,
    reason: &str,
    print: PrintConfig,
    out: &mut Output,
) -> Result<(), CliError> {
    let Some(batch) = &inputs.batch else { return Ok(()) };
    write_line_errors(out, batch.errors())?;
    let ids = batch.lines.iter().filter_map(|l| l.as_ref().ok()).map(|p| p.id.clone()).collect();
    CliSink::new(out, print, Some(ids), None).fail_unreported(reason);
    Ok(())
}
