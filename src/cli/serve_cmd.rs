//! `swactor orchestrate serve` and `swactor run local --serve`: configure, start the
//! server ([`crate::server`]), say where it listens, and exit 0 once a stop has drained
//! it. Startup prints the URL (stderr; with `--json`, a `serving` line on stdout).

use std::net::SocketAddr;
use std::time::Duration;

use color_eyre::eyre::eyre;
use serde_json::json;

use super::args::{LocalArgs, OrchestrateServeArgs};
use super::config::serve::{
    ServeRun, ServedModel, check_local_flags, local_orchestrate, server_config,
};
use super::exit::{CliError, ExitCode, INTERRUPTED, orchestrate_error};
use super::local_nodes::{start_pool, synth_model};
use super::output::Output;
use super::run_sink::{EventsFile, events_error};
use super::signals::StopSignal;
use crate::orchestrator::driver::{OrchestrateConfig, OrchestrateError};
use crate::orchestrator::local::{LocalPool, LocalPoolConfig};
use crate::server::{ServeConfig, ServeError, ServeModel};

/// `swactor orchestrate serve`.
pub fn orchestrate(args: &OrchestrateServeArgs, out: &mut Output) -> Result<(), CliError> {
    let run = ServeRun::from_args(args)?;
    let json = args.output.json;
    let rt = runtime()?;
    let ServeRun { orchestrate, server, model, mut events } = run;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        serve(server, orchestrate, &model, events.as_mut(), stop, json, out).await
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

/// `swactor run local --serve`.
pub fn local(args: &LocalArgs, out: &mut Output) -> Result<(), CliError> {
    check_local_flags(args)?;
    if args.stages == 0 {
        return Err(super::config::run::usage("--stages must be at least 1".into()));
    }
    let served = args
        .model
        .as_deref()
        .map(|m| ServedModel::read(m, &args.run.session.runtime))
        .transpose()?;
    if let Some(s) = &served
        && args.stages > s.facts.block_count
    {
        return Err(CliError::new(
            ExitCode::PlanRejected,
            crate::wire::reason::PlanRejection::TooManyStages.as_str(),
            eyre!("{} stages for a model of {} blocks", args.stages, s.facts.block_count),
        )
        .with_suggestion("use at most one stage per transformer block"));
    }
    let mut events = args.run.session.events.as_deref().map(EventsFile::create).transpose()?;
    let json = args.run.output.json;
    let rt = runtime()?;
    let result = rt.block_on(async {
        let stop = StopSignal::install();
        let config = LocalPoolConfig {
            exe: std::env::current_exe()?,
            nodes: args.stages,
            worker_threads: args.threads(),
            arena_bytes: args.arena_bytes,
            node_logs: args.node_logs,
        };
        let Some(mut pool) = start_pool(&config, json, &stop).await? else {
            return Ok(());
        };
        let result = local_serve(args, &pool, served, events.as_mut(), stop, json, out).await;
        pool.stop().await;
        result
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

async fn local_serve(
    args: &LocalArgs,
    pool: &LocalPool,
    served: Option<ServedModel>,
    events: Option<&mut EventsFile>,
    stop: StopSignal,
    json: bool,
    out: &mut Output,
) -> Result<(), CliError> {
    let (path, model) = match (args.model.clone(), served) {
        (Some(path), Some(model)) => (path, model),
        _ => {
            let path = synth_model(pool, "serves")?;
            let model = ServedModel::read(&path, &args.run.session.runtime)?;
            (path, model)
        }
    };
    let nodes = pool.pool.nodes.iter().map(|n| n.node_id.0).collect();
    let server = server_config(&args.http, &path, &model, nodes)?;
    let orchestrate = local_orchestrate(args, pool, &path, &model)?;
    serve(server, orchestrate, &model, events, stop, json, out).await
}

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}

/// Serves until a stop has drained the server; exit 0 then.
async fn serve(
    server: ServeConfig,
    orchestrate: OrchestrateConfig,
    model: &ServedModel,
    mut events: Option<&mut EventsFile>,
    stop: StopSignal,
    json: bool,
    out: &mut Output,
) -> Result<(), CliError> {
    let served = ServeModel {
        facts: &model.facts,
        tokenizer: model.tokenizer.clone(),
        chat: model.chat.clone(),
    };
    let out = std::cell::RefCell::new(out);
    let mut said = Ok(());
    let (n_ctx, max_tokens) = (server.defaults.n_ctx, server.defaults.max_tokens);
    let fitted = orchestrate.fit_context;
    let listening = |addr: SocketAddr| {
        let url = format!("http://{addr}/");
        eprintln!("swactor: serving the OpenAI-compatible API at {url}v1 (the page at {url})");
        eprintln!("swactor: {}", defaults_words(n_ctx, fitted, max_tokens));
        if json {
            let line = json!({"url": url, "http": addr, "n_ctx": n_ctx, "max_tokens": max_tokens});
            let mut out = out.borrow_mut();
            said = out.json("serving", &line).and_then(|()| out.flush());
        }
    };
    let mut ready = Ready::default();
    let mut write = |line: &crate::events::EventLine| {
        if let Some(f) = events.as_mut() {
            f.write(&line.to_json());
        }
        if let Some(r) = ready.event(&line.event) {
            eprintln!("swactor: {}", r.words());
            if json {
                let mut out = out.borrow_mut();
                let _ = out.json("ready", &r).and_then(|()| out.flush());
            }
        }
    };
    let sink: Option<&mut dyn FnMut(&crate::events::EventLine)> = Some(&mut write);
    let stops = crate::server::Stops { stop: stop.clone().stopped(), force: stop.again() };
    let result = crate::server::serve(server, orchestrate, served, stops, listening, sink).await;
    said?;
    if let Some(f) = events.as_mut()
        && let Some(e) = f.error.take()
    {
        return Err(events_error(&f.path, e));
    }
    let report = result.map_err(serve_error)?;
    if json {
        out.into_inner().json("served", &json!({"sessions": report.sessions}))?;
    }
    Ok(())
}

/// What a request leaves out, in words: the context and `max_tokens`.
fn defaults_words(n_ctx: u32, fitted: bool, max_tokens: Option<u32>) -> String {
    let context = if fitted {
        format!(
            "a context of up to {n_ctx} tokens per sequence (the model's trained length; each \
             session's plan lowers it to what its nodes' memory holds)"
        )
    } else {
        format!("a context of {n_ctx} tokens per sequence (--max-seq-len)")
    };
    let tokens = match max_tokens {
        Some(n) => format!("a request without max_tokens generates at most {n} tokens"),
        None => "a request without max_tokens generates until a stop or the context's end".into(),
    };
    format!("{context}; {tokens}")
}

/// The `ready` line: the first session serves.
#[derive(Debug, Default, serde::Serialize)]
struct Ready {
    /// The first session's stages.
    stages: u32,
    /// Its context and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    context: Option<crate::wire::PlanContext>,
    #[serde(skip)]
    said: bool,
}

impl Ready {
    /// Follows the sessions' events; the line to say once the first session serves.
    fn event(&mut self, event: &crate::events::Event) -> Option<&Ready> {
        use crate::events::Event;
        match event {
            Event::RunPlanned { stages, context, .. } if !self.said => {
                (self.stages, self.context) = (*stages, *context);
                None
            }
            Event::ReadinessBarrierPassed { .. } if !std::mem::replace(&mut self.said, true) => {
                Some(self)
            }
            _ => None,
        }
    }

    fn words(&self) -> String {
        let context = match &self.context {
            Some(c) => format!(", {}", super::plan_cmd::context_line(c)),
            None => String::new(),
        };
        format!("ready: the first session serves over {} stages{context}", self.stages)
    }
}

fn serve_error(e: ServeError) -> CliError {
    match e {
        ServeError::Bind(addr, io) => CliError::new(
            ExitCode::Input,
            "http_bind_failed",
            eyre!(io).wrap_err(format!("cannot listen on {addr}")),
        )
        .with_suggestion("is another server on that address? choose another with --http"),
        ServeError::Orchestrate(OrchestrateError::Stopped) => {
            CliError::new(ExitCode::Stopped, INTERRUPTED.to_string(), eyre!("stopped"))
        }
        ServeError::Orchestrate(e) => orchestrate_error(e),
    }
}
