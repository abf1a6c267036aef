//! `swactor orchestrate pool` and `swactor run local`: one run over a pool, its text on
//! stdout as it is generated, its events as JSON Lines (`--events FILE`, and on stdout with
//! `--json`), and an exit code per outcome.
#![allow(clippy::disallowed_methods)] // the command owns the clock for its timings

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::args::{LocalArgs, OrchestratePoolArgs, PromptArgs};
use super::exit::{CliError, ExitCode};
use super::model_cmd::model_error;
use super::output::Output;
use super::plan_cmd::{check_url, plan_error, read_pool, runtime_config, runtime_config_for};
use super::progress::{Progress, RunProgress};
use super::requests::{LineError, MAX_REQUESTS_BYTES, parse_requests};
use crate::events::{EventLine, RunOutcome};
use crate::model::ModelFacts;
use crate::model::facts::facts_from_content;
use crate::model::gguf::read_content;
use crate::model::tokenizer::{Tokenizer, chat_prompt, tokenizer_from_gguf};
use crate::orchestrator::driver::{
    OrchestrateConfig, OrchestrateError, OrchestratorKey, RunReport, RunSink, orchestrate,
};
use crate::orchestrator::local::{LocalPool, LocalPoolConfig};
use crate::orchestrator::requests::{Request, RequestResult};
use crate::orchestrator::run::{RunTimeouts, SessionLimits};
use crate::planner::{Placement, PlanRequest, plan};
use crate::wire::reason::OperatorStop;
use crate::wire::{NodeId, RunId, RuntimeConfig, WeightSource};

/// The model side of a run: facts, tokenizer, its requests and runtime settings.
struct Prepared {
    facts: ModelFacts,
    tokenizer: Tokenizer,
    /// The session's requests (one for `--prompt`).
    requests: Vec<Request>,
    /// `--requests`: the lines that could not become requests, with their position among
    /// all lines (reported first; they never reach the session).
    batch: Option<Vec<LineError>>,
    runtime: RuntimeConfig,
}

impl Prepared {
    fn prompt_tokens(&self) -> usize {
        self.requests.first().map_or(0, |r| r.prompt.len())
    }
}

fn usage(message: String) -> CliError {
    CliError::new(ExitCode::Usage, "usage", eyre!(message))
}

fn prepare(model: &Path, run: &PromptArgs) -> Result<Prepared, CliError> {
    let (content, len) = read_content(model).map_err(|e| model_error(model, e))?;
    let facts = facts_from_content(&content, len).map_err(|e| model_error(model, e))?;
    let tokenizer = tokenizer_from_gguf(&content).map_err(|e| model_error(model, e))?;
    let template =
        content.metadata.get("tokenizer.chat_template").and_then(|v| v.to_string().ok()).cloned();
    if let Some(path) = &run.requests {
        let mut args = run.runtime.clone();
        args.max_sequences = args.max_sequences.or(Some(DEFAULT_BATCH_SEQUENCES));
        let runtime = runtime_config(&args, &facts)?;
        let text = read_requests(path)?;
        let mut requests = Vec::new();
        let mut errors = Vec::new();
        for line in parse_requests(&text, &tokenizer, template.as_deref(), &runtime) {
            match line {
                Ok(r) => requests.push(r),
                Err(e) => errors.push(e),
            }
        }
        return Ok(Prepared { facts, tokenizer, requests, batch: Some(errors), runtime });
    }
    let runtime = runtime_config(&run.runtime, &facts)?;
    let prompt = if run.chat {
        let text = chat_prompt(template.as_deref(), &run.prompt)
            .map_err(|e| usage(format!("--chat: {e}")))?;
        tokenizer.encode(&text, true, true)
    } else {
        tokenizer.encode(&run.prompt, true, false)
    };
    if prompt.is_empty() {
        return Err(usage("the prompt is empty".into()));
    }
    if prompt.len() >= runtime.max_seq_len as usize {
        return Err(usage(format!(
            "the prompt has {} tokens; max_seq_len is {}",
            prompt.len(),
            runtime.max_seq_len
        )));
    }
    let request = Request {
        id: "0".into(),
        prompt,
        max_tokens: runtime.max_tokens,
        sampling: runtime.sampling,
        stop: Vec::new(),
    };
    Ok(Prepared { facts, tokenizer, requests: vec![request], batch: None, runtime })
}

/// Slots of a batch job's session unless `--max-sequences` says otherwise.
const DEFAULT_BATCH_SEQUENCES: u32 = 8;

/// Reads a `--requests` file (at most [`MAX_REQUESTS_BYTES`]).
fn read_requests(path: &Path) -> Result<String, CliError> {
    let io = |e: std::io::Error| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot read --requests {}", path.display())),
        )
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_REQUESTS_BYTES {
        return Err(CliError::new(
            ExitCode::Input,
            "requests_too_large",
            eyre!("--requests {}: {len} bytes, at most {MAX_REQUESTS_BYTES}", path.display()),
        ));
    }
    let bytes = std::fs::read(path).map_err(io)?;
    String::from_utf8(bytes).map_err(|_| {
        CliError::new(
            ExitCode::Input,
            "invalid_request",
            eyre!("--requests {}: the file is not UTF-8 text", path.display()),
        )
    })
}

/// Session limits for a run: a batch job's queue holds every request unless `--queue`.
fn session_limits(run: &PromptArgs, prepared: &Prepared) -> SessionLimits {
    SessionLimits {
        queue_capacity: run.queue.unwrap_or(prepared.requests.len().max(1)),
        groups: run.groups.unwrap_or(0),
        ..SessionLimits::default()
    }
}

fn timeouts(run: &PromptArgs) -> RunTimeouts {
    RunTimeouts {
        readiness: Duration::from_secs(run.readiness_timeout),
        token: Duration::from_secs(run.token_timeout),
        teardown: Duration::from_secs(10),
    }
}

#[derive(Serialize)]
struct TokenLine<'a> {
    index: usize,
    id: u32,
    text: &'a str,
}

#[derive(Serialize)]
struct Summary {
    run_id: RunId,
    outcome: RunOutcome,
    /// Why a completed run stopped, named as `generate` names it.
    stop: Option<crate::events::CompletionCause>,
    reason: Option<String>,
    component: Option<String>,
    stages: usize,
    prompt_tokens: usize,
    tokens: usize,
    pool_ready_ms: f64,
    time_to_first_token_ms: Option<f64>,
    decode_tokens_per_s: f64,
}

/// The `--events` file, created before anything starts.
struct EventsFile {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    /// The first write error (the run goes on; it is reported at the end).
    error: Option<std::io::Error>,
}

impl EventsFile {
    /// Creates the file, or says which file cannot be written and why. An existing regular
    /// file is never overwritten (`events_file_exists`); a device or a pipe that exists
    /// (`/dev/stderr`, a FIFO) is written to.
    fn create(path: &Path) -> Result<EventsFile, CliError> {
        let exists = || {
            CliError::new(
                ExitCode::Input,
                "events_file_exists",
                eyre!("--events {}: the file exists and is never overwritten", path.display()),
            )
            .with_suggestion("remove it, or give --events a path that does not exist yet")
        };
        let existing = std::fs::metadata(path).ok();
        if existing.as_ref().is_some_and(std::fs::Metadata::is_file) {
            return Err(exists());
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(existing.is_none())
            .open(path)
            .map_err(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    return exists();
                }
                events_error(path, e)
                    .with_suggestion("give --events a file in an existing, writable directory")
            })?;
        Ok(EventsFile {
            path: path.to_path_buf(),
            file: std::io::BufWriter::new(file),
            error: None,
        })
    }

    fn write(&mut self, json: &str) {
        if self.error.is_none()
            && let Err(e) = writeln!(self.file, "{json}").and_then(|()| self.file.flush())
        {
            self.error = Some(e);
        }
    }
}

fn events_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::new(
        ExitCode::Input,
        "io",
        eyre!(e).wrap_err(format!("cannot write events to {}", path.display())),
    )
}

/// Writes tokens and events where the flags say; progress on a terminal.
struct CliSink<'a> {
    out: &'a mut Output,
    json: bool,
    /// A batch job's request ids (its output is JSON Lines results), and `--stream`.
    batch: Option<(Vec<String>, bool)>,
    events: Option<&'a mut EventsFile>,
    progress: RunProgress,
    count: usize,
    error: Option<std::io::Error>,
}

impl CliSink<'_> {
    fn keep(&mut self, r: std::io::Result<()>) {
        if let Err(e) = r {
            self.error.get_or_insert(e);
        }
    }
}

impl RunSink for CliSink<'_> {
    fn event(&mut self, line: &EventLine) {
        self.progress.event(&line.event);
        let json = line.to_json();
        if let Some(f) = self.events.as_mut() {
            f.write(&json);
        }
        if self.json {
            let r = self.out.line(json).and_then(|()| self.out.flush());
            self.keep(r);
        }
    }

    fn token(&mut self, request: usize, id: u32, text: &str) {
        self.progress.token();
        if let Some((ids, stream)) = &self.batch {
            if *stream {
                let line = BatchToken { id: &ids[request], token: id, text };
                let r = self.out.json("token", &line).and_then(|()| self.out.flush());
                self.keep(r);
            }
            return;
        }
        let r = if self.json {
            self.out.json("token", &TokenLine { index: self.count, id, text })
        } else {
            self.out.write_str(text)
        }
        .and_then(|()| self.out.flush());
        self.count += 1;
        self.keep(r);
    }

    fn progress(&mut self, message: &str) {
        self.progress.message(message);
    }

    fn result(&mut self, _request: usize, result: &RequestResult) {
        if self.batch.is_none() {
            return;
        }
        let r = write_result(self.out, result).and_then(|()| self.out.flush());
        self.keep(r);
    }
}

#[derive(Serialize)]
struct BatchToken<'a> {
    id: &'a str,
    token: u32,
    text: &'a str,
}

#[derive(Serialize)]
struct BatchError<'a> {
    id: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    prompt_tokens: u32,
    completion_tokens: u32,
}

/// One `result` line, or an `error` line for a request that failed.
fn write_result(out: &mut Output, r: &RequestResult) -> std::io::Result<()> {
    match &r.error {
        None => out.json("result", r),
        Some(reason) => out.json(
            "error",
            &BatchError {
                id: &r.id,
                reason,
                message: None,
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.completion_tokens,
            },
        ),
    }
}

/// The command's one SIGINT / SIGTERM listener, installed before anything starts: a
/// signal at any moment after that is kept for whoever waits for it, in whichever phase
/// (starting nodes, waiting for the pool, running), so none is lost between phases.
#[derive(Clone)]
struct StopSignal(tokio::sync::watch::Receiver<Option<OperatorStop>>);

impl StopSignal {
    /// Installs the listener; call inside the runtime, first thing.
    fn install() -> StopSignal {
        use tokio::signal::unix::{SignalKind, signal};
        let (tx, rx) = tokio::sync::watch::channel(None);
        if let (Ok(mut int), Ok(mut term)) =
            (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
        {
            tokio::spawn(async move {
                loop {
                    let how = tokio::select! {
                        _ = int.recv() => OperatorStop::Interrupt,
                        _ = term.recv() => OperatorStop::Terminate,
                    };
                    // The first signal is the one reported; later ones change nothing.
                    tx.send_if_modified(|s| s.is_none().then(|| *s = Some(how)).is_some());
                }
            });
        }
        StopSignal(rx)
    }

    /// Resolves once a signal has arrived (at once if one already has).
    async fn stopped(mut self) -> OperatorStop {
        match self.0.wait_for(Option::is_some).await {
            Ok(how) => how.unwrap_or(OperatorStop::Interrupt),
            Err(_) => std::future::pending().await,
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?)
}

fn open_events(path: &Option<PathBuf>) -> Result<Option<EventsFile>, CliError> {
    path.as_deref().map(EventsFile::create).transpose()
}

/// Runs the orchestrator and turns its report into output and an exit code. `events` was
/// created before anything started.
async fn execute(
    config: OrchestrateConfig,
    prepared: &Prepared,
    run: &PromptArgs,
    mut events: Option<EventsFile>,
    out: &mut Output,
    stop: StopSignal,
) -> Result<(), CliError> {
    let batch = prepared
        .batch
        .as_ref()
        .map(|_| (prepared.requests.iter().map(|r| r.id.clone()).collect(), run.stream));
    if let Some(errors) = &prepared.batch {
        for e in errors {
            out.json(
                "error",
                &BatchError {
                    id: &e.id,
                    reason: e.reason,
                    message: Some(&e.message),
                    prompt_tokens: 0,
                    completion_tokens: 0,
                },
            )?;
        }
        out.flush()?;
    }
    let mut sink = CliSink {
        batch,
        json: run.output.json,
        events: events.as_mut(),
        progress: RunProgress::new(Progress::new(run.output.json)),
        count: 0,
        error: None,
        out: &mut *out,
    };
    let result =
        orchestrate(config, &prepared.facts, &prepared.tokenizer, &mut sink, stop.stopped()).await;
    sink.progress.done();
    if let Some(e) = sink.error.take() {
        return Err(e.into());
    }
    if let Some(f) = events.as_mut()
        && let Some(e) = f.error.take()
    {
        return Err(events_error(&f.path, e));
    }
    let report = result.map_err(|e| match e {
        OrchestrateError::Setup(m) => CliError::new(ExitCode::Input, "setup_failed", eyre!(m)),
        OrchestrateError::PoolTimeout(..) => {
            CliError::new(ExitCode::PoolNotReady, "timeout.pool_readiness", eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
        OrchestrateError::Plan(p) => plan_error(p),
        OrchestrateError::Stopped => {
            CliError::new(ExitCode::Stopped, "operator.interrupt", eyre!(e))
        }
    })?;
    match &prepared.batch {
        Some(errors) => finish_batch(report, errors.len(), run, out),
        None => finish(report, prepared.prompt_tokens(), run, out),
    }
}

#[derive(Serialize)]
struct BatchSummary {
    run_id: RunId,
    outcome: RunOutcome,
    reason: Option<String>,
    stages: usize,
    requests: usize,
    failed: usize,
    completion_tokens: u64,
    pool_ready_ms: f64,
    decode_tokens_per_s: f64,
}

/// A batch job's summary (stderr, or a `run` line with `--json`) and exit code: the
/// session's outcome decides it; requests that failed alone are in their lines.
fn finish_batch(
    report: RunReport,
    bad_lines: usize,
    run: &PromptArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    let tokens: u64 = report.results.iter().map(|r| u64::from(r.completion_tokens)).sum();
    let decode = report.decode_time.as_secs_f64();
    let summary = BatchSummary {
        run_id: report.plan.run_id,
        outcome: report.outcome,
        reason: report.fault.map(|f| f.reason.to_string()),
        stages: report.plan.stages.len(),
        requests: report.results.len() + bad_lines,
        failed: report.results.iter().filter(|r| r.is_error()).count() + bad_lines,
        completion_tokens: tokens,
        pool_ready_ms: report.pool_ready_after.as_secs_f64() * 1e3,
        decode_tokens_per_s: if decode > 0.0 { tokens as f64 / decode } else { 0.0 },
    };
    if run.output.json {
        out.json("run", &summary)?;
        out.flush()?;
    } else {
        eprintln!(
            "{}: {} requests ({} failed) on {} stages, {} tokens generated, {:.1} tokens/s",
            match summary.outcome {
                RunOutcome::Completed => "completed",
                RunOutcome::Faulted => "faulted",
                RunOutcome::OperatorStopped => "stopped by the operator",
            },
            summary.requests,
            summary.failed,
            summary.stages,
            summary.completion_tokens,
            summary.decode_tokens_per_s
        );
    }
    finish_outcome(&report)
}

fn finish(
    report: RunReport,
    prompt_tokens: usize,
    run: &PromptArgs,
    out: &mut Output,
) -> Result<(), CliError> {
    let decode = report.decode_time.as_secs_f64();
    let summary = Summary {
        run_id: report.plan.run_id,
        outcome: report.outcome,
        stop: report.stop,
        reason: report.fault.map(|f| f.reason.to_string()),
        component: report.fault.map(|f| f.component.to_string()),
        stages: report.plan.stages.len(),
        prompt_tokens,
        tokens: report.tokens.len(),
        pool_ready_ms: report.pool_ready_after.as_secs_f64() * 1e3,
        time_to_first_token_ms: report.first_token_after.map(|d| d.as_secs_f64() * 1e3),
        decode_tokens_per_s: if report.tokens.len() > 1 && decode > 0.0 {
            (report.tokens.len() - 1) as f64 / decode
        } else {
            0.0
        },
    };
    if run.output.json {
        out.json("run", &summary)?;
    } else {
        out.write_str(&report.tail)?;
        out.line("")?;
        out.flush()?;
        let outcome = match (summary.outcome, &summary.stop) {
            (RunOutcome::Completed, Some(stop)) => {
                format!("completed ({})", super::output::stop_words(stop))
            }
            (RunOutcome::Completed, None) => "completed".into(),
            (RunOutcome::Faulted, _) => "faulted".into(),
            (RunOutcome::OperatorStopped, _) => "stopped by the operator".into(),
        };
        let first = match summary.time_to_first_token_ms {
            Some(ms) => format!("first token after {ms:.0} ms"),
            None => "no token".into(),
        };
        eprintln!(
            "{outcome}: {} stages, {} prompt tokens, {} generated; {first}, decode {:.1} tokens/s",
            summary.stages, summary.prompt_tokens, summary.tokens, summary.decode_tokens_per_s
        );
    }
    finish_outcome(&report)
}

fn finish_outcome(report: &RunReport) -> Result<(), CliError> {
    match report.outcome {
        RunOutcome::Completed => Ok(()),
        RunOutcome::Faulted => {
            let reason = report.fault.map_or_else(|| "unknown".into(), |f| f.reason.to_string());
            let what = report.fault.map_or_else(|| "unknown".into(), |f| f.to_string());
            Err(CliError::new(ExitCode::RunFaulted, reason, eyre!("the run faulted: {what}")))
        }
        RunOutcome::OperatorStopped => Err(CliError::new(
            ExitCode::Stopped,
            "operator.stopped",
            eyre!("the run was stopped by the operator and torn down"),
        )),
    }
}

fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

/// `swactor orchestrate pool`.
pub fn pool(args: &OrchestratePoolArgs, out: &mut Output) -> Result<(), CliError> {
    // Everything that can be judged without the nodes is judged before waiting for them.
    let prepared = prepare(&args.model, &args.run)?;
    check_url(args.weights_url.as_deref())?;
    let events = open_events(&args.run.events)?;
    let pool = read_pool(&args.pool)?;
    let file_placement = pool.placement.clone().unwrap_or_default();
    let file_layers = pool
        .placement_layers()
        .map_err(|e| CliError::new(ExitCode::Input, "invalid_pool_file", eyre!(e)))?;
    let placement = Placement {
        nodes: args
            .nodes
            .as_ref()
            .map(|n| n.iter().copied().map(NodeId).collect())
            .or(file_placement.nodes),
        layers: args.layers.clone().or(file_layers),
    };
    let source = match &args.weights_url {
        None => WeightSource::Local { path: absolute(&args.model) },
        Some(url) => WeightSource::Url {
            url: url.clone(),
            size: prepared.facts.bytes.file,
            sha256: crate::stage::weights::sha256_file(&args.model).map_err(|e| {
                CliError::new(ExitCode::Input, "io", eyre!(e).wrap_err("cannot hash the model"))
            })?,
        },
    };
    // The same plan the driver makes once the pool is ready, made now: a request the pool
    // can never satisfy (placement, stage count, memory, ...) is rejected before waiting.
    // The driver plans again with this orchestrator's own identity.
    plan(&PlanRequest {
        run_id: RunId(args.run.run_id),
        model: &prepared.facts,
        source: source.clone(),
        pool: &pool,
        stages: args.stages,
        placement: placement.clone(),
        runtime: prepared.runtime,
        prompt_tokens: match &prepared.requests[..] {
            [one] if prepared.batch.is_none() => {
                (one.prompt.len() as u32).min(prepared.runtime.max_seq_len)
            }
            _ => 0,
        },
    })
    .map_err(plan_error)?;
    let config = OrchestrateConfig {
        pool,
        key: OrchestratorKey::File(args.key.clone()),
        listen: args.listen,
        swim: args.swim,
        advertise: args.advertise,
        model: args.model.clone(),
        source,
        requests: prepared.requests.clone(),
        session: session_limits(&args.run, &prepared),
        stages: args.stages,
        placement,
        runtime: prepared.runtime,
        run_id: RunId(args.run.run_id),
        window: Duration::from_millis(args.window_ms),
        pool_timeout: Duration::from_secs(args.pool_timeout),
        timeouts: timeouts(&args.run),
    };
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        execute(config, &prepared, &args.run, events, out, stop).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// `swactor run local`.
pub fn local(args: &LocalArgs, out: &mut Output) -> Result<(), CliError> {
    if args.stages == 0 {
        return Err(usage("--stages must be at least 1".into()));
    }
    // Check what can be checked before any node starts.
    let blocks = match &args.model {
        Some(m) => prepare(m, &args.run)?.facts.block_count,
        None => {
            let synth = crate::model::synth::SynthSpec::default();
            runtime_config_for(&args.run.runtime, synth.context)?;
            synth.blocks
        }
    };
    if args.stages > blocks {
        return Err(CliError::new(
            ExitCode::PlanRejected,
            crate::wire::reason::PlanRejection::TooManyStages.as_str(),
            eyre!("{} stages for a model of {blocks} blocks", args.stages),
        )
        .with_suggestion("use at most one stage per transformer block"));
    }
    // Test hook, read here at the edge: hold between starting the nodes and running, the
    // window in which a Ctrl-C used to be lost.
    let pause = std::env::var("SWACTOR_TEST_PAUSE_AFTER_NODES_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    let events = open_events(&args.run.events)?;
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        let config = LocalPoolConfig {
            exe: std::env::current_exe()?,
            nodes: args.stages,
            worker_threads: args.worker_threads,
            arena_bytes: args.arena_bytes,
            node_logs: args.node_logs,
        };
        let mut starting = Progress::new(args.run.output.json);
        starting.spinner(format!("starting {} nodes", args.stages));
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
        if let Some(pause) = pause {
            eprintln!("swactor: test pause: the nodes started");
            tokio::time::sleep(pause).await;
        }
        let result = local_run(args, &pool, events, out, stop).await;
        pool.stop().await;
        result
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn local_run(
    args: &LocalArgs,
    pool: &LocalPool,
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
    let prepared = prepare(&model, &args.run)?;
    let config = OrchestrateConfig {
        pool: pool.pool.clone(),
        key: OrchestratorKey::Memory(pool.orchestrator_key.clone()),
        listen: "127.0.0.1:0".parse().map_err(|_| CliError::internal(eyre!("address")))?,
        swim: "127.0.0.1:0".parse().map_err(|_| CliError::internal(eyre!("address")))?,
        advertise: None,
        model: model.clone(),
        source: WeightSource::Local { path: absolute(&model) },
        requests: prepared.requests.clone(),
        session: session_limits(&args.run, &prepared),
        stages: Some(args.stages),
        placement: Placement::default(),
        runtime: prepared.runtime,
        run_id: RunId(args.run.run_id),
        window: Duration::from_millis(300),
        pool_timeout: Duration::from_secs(60),
        timeouts: timeouts(&args.run),
    };
    execute(config, &prepared, &args.run, events, out, stop).await
}
