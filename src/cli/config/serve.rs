//! `swactor orchestrate serve`'s and `run local --serve`'s flags -> the server's config
//! ([`ServeConfig`]) and the sessions' ([`OrchestrateConfig`]).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use color_eyre::eyre::eyre;

use crate::cli::args::{LocalArgs, OrchestrateServeArgs, RuntimeArgs, ServeFlags};
use crate::cli::exit::{CliError, ExitCode, model_error, plan_error};
use crate::cli::run_sink::EventsFile;
use crate::model::ModelFacts;
use crate::model::tokenizer::{ChatFormat, Tokenizer, tokenizer_from_gguf};
use crate::orchestrator::driver::{OrchestrateConfig, OrchestratorKey};
use crate::orchestrator::local::LocalPool;
use crate::planner::{PlanRequest, check_before_reports};
use crate::serve::access::AccessRules;
use crate::server::{HttpLimits, ServeConfig, ServeDefaults};
use crate::wire::RuntimeConfig;

use super::run::{fresh_run_id, session_draft_model};
use super::runtime::runtime_config;
use super::session::{joined, session_settings};
use super::source::{check_url, placement, read_pool, weight_source};

/// Slots of a serving session unless `--max-sequences` says otherwise.
pub const DEFAULT_SERVE_SEQUENCES: u32 = 8;
/// Requests waiting for a slot unless `--queue` says otherwise.
pub const DEFAULT_SERVE_QUEUE: usize = 64;

/// The model as the server needs it.
pub struct ServedModel {
    /// Its facts.
    pub facts: ModelFacts,
    /// Its tokenizer.
    pub tokenizer: Arc<Tokenizer>,
    /// Its chat format (its own template, or the hand-written fallback).
    pub chat: Arc<ChatFormat>,
    /// The runtime settings, checked (eight slots by default).
    pub runtime: RuntimeConfig,
    /// `--max-tokens`: what a request without `max_tokens` generates at most (`None`: to
    /// the end of sequence, a stop, or the context's end).
    pub max_tokens: Option<u32>,
}

impl ServedModel {
    /// Reads `model` and checks the runtime flags against it.
    pub fn read(model: &Path, args: &RuntimeArgs) -> Result<ServedModel, CliError> {
        let file = crate::model::gguf::GgufFile::open(model).map_err(|e| model_error(model, e))?;
        let facts = file.facts().map_err(|e| model_error(model, e))?;
        let mut tokenizer =
            tokenizer_from_gguf(file.header()).map_err(|e| model_error(model, e))?;
        // Answers are read for tool calls and reasoning: their markers must be printed.
        tokenizer.print_controls(&crate::chat::MARKERS);
        let tokenizer = Arc::new(tokenizer);
        let template = crate::model::tokenizer::chat_template(file.header());
        let chat = Arc::new(ChatFormat::new(&tokenizer, template.as_deref()));
        let mut args = args.clone();
        args.max_sequences = args.max_sequences.or(Some(DEFAULT_SERVE_SEQUENCES));
        let runtime = RuntimeConfig {
            // A server's requests may ask for log-probabilities, and for constrained output:
            // every table has room for the masks of this many sampling entries.
            max_top_logprobs: Some(crate::wire::logprobs::MAX_TOP_LOGPROBS),
            mask_bytes: served_mask_bytes(facts.vocab_size),
            ..runtime_config(&args, &facts)?
        };
        Ok(ServedModel { facts, tokenizer, chat, runtime, max_tokens: args.max_tokens })
    }
}

/// The server's config from its flags, for `model` served with `runtime` on `nodes`.
pub fn server_config(
    flags: &ServeFlags,
    model: &Path,
    served: &ServedModel,
    nodes: Vec<u64>,
) -> Result<ServeConfig, CliError> {
    let api_key = flags
        .api_key_file
        .as_deref()
        .map(crate::server::key::read_key)
        .transpose()
        .map_err(|m| CliError::new(ExitCode::Input, "api_key_file", eyre!(m)))?;
    let file_name = model.file_stem().map(|s| s.to_string_lossy().into_owned());
    let model_name = flags
        .model_name
        .clone()
        .or_else(|| served.facts.name.clone())
        .or(file_name)
        .unwrap_or_else(|| "model".into());
    let defaults = HttpLimits::default();
    let runtime = &served.runtime;
    #[allow(clippy::disallowed_methods)] // a stamp, not a measurement
    let created = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.as_secs());
    let http = flags.http.unwrap_or(([127, 0, 0, 1], 8080).into());
    let max_connections = flags.max_connections.map_or(defaults.max_connections, |n| n as usize);
    let secs = |s: Option<u64>, d: Duration| s.map_or(d, Duration::from_secs);
    Ok(ServeConfig {
        http,
        grace: Duration::from_secs(flags.grace_s.unwrap_or(30)),
        api_key,
        limits: HttpLimits {
            max_body: flags.max_body_bytes.map_or(defaults.max_body, |n| n as usize),
            max_connections,
            max_connections_per_peer: flags
                .max_connections_per_peer
                .map_or((max_connections / 2).max(1), |n| n as usize),
            header_timeout: secs(flags.header_timeout_s, defaults.header_timeout),
            body_timeout: secs(flags.body_timeout_s, defaults.body_timeout),
        },
        access: AccessRules {
            bound: http,
            allowed_hosts: flags.allowed_host.clone(),
            cors_origins: flags.cors_origin.clone(),
        },
        model_name,
        created,
        vocab: served.facts.vocab_size,
        defaults: ServeDefaults {
            sampling: runtime.sampling,
            max_tokens: served.max_tokens,
            n_ctx: runtime.max_seq_len,
            slots: runtime.max_sequences,
        },
        nodes,
    })
}

/// Everything `orchestrate serve` needs.
pub struct ServeRun {
    /// The sessions' config.
    pub orchestrate: OrchestrateConfig,
    /// The server's.
    pub server: ServeConfig,
    /// The model.
    pub model: ServedModel,
    /// The `--events` file.
    pub events: Option<EventsFile>,
}

impl ServeRun {
    /// From `orchestrate serve`'s flags; everything that can be judged before the nodes
    /// answer is.
    pub fn from_args(args: &OrchestrateServeArgs) -> Result<ServeRun, CliError> {
        let model = ServedModel::read(&args.model, &args.session.runtime)?;
        check_url(args.weights_url.as_deref())?;
        let pool = read_pool(&args.pool)?;
        let placement = placement(&pool, &args.placement)?;
        let source = weight_source(
            &args.model,
            args.weights_url.as_deref(),
            model.facts.bytes.file,
            "cannot hash the model",
        )?;
        let run_id = fresh_run_id();
        check_before_reports(&PlanRequest {
            run_id,
            model: &model.facts,
            source: source.clone(),
            pool: &pool,
            stages: args.placement.stages,
            placement: placement.clone(),
            runtime: model.runtime,
            prompt_tokens: 0,
            fit_context: args.session.runtime.max_seq_len.is_none(),
            prompt_cache_bytes: args.session.runtime.prompt_cache_bytes,
            min_speedup: args.placement.min_speedup,
        })
        .map_err(plan_error)?;
        let nodes = pool.nodes.iter().map(|n| n.node_id.0).collect();
        let server = server_config(&args.http, &args.model, &model, nodes)?;
        let events = args.session.events.as_deref().map(EventsFile::create).transpose()?;
        let key = OrchestratorKey::File(args.key.clone());
        let config = OrchestrateConfig::new(pool, key, args.model.clone(), source, model.runtime);
        let session = session_settings(&args.session, DEFAULT_SERVE_QUEUE);
        let orchestrate = OrchestrateConfig {
            stages: args.placement.stages,
            min_speedup: args.placement.min_speedup,
            placement,
            run_id,
            draft_model: session_draft_model(&args.session.spec, &model.facts)?,
            ..joined(config, &args.join)?.with_session(session)
        };
        Ok(ServeRun { orchestrate, server, model, events })
    }
}

/// `run local --serve`'s flags that make no sense without it, or with it, refused.
pub fn check_local_flags(args: &LocalArgs) -> Result<(), CliError> {
    if !args.serve && args.http.any() {
        return Err(super::run::usage(
            "--http, --grace-s, --api-key-file, --max-body-bytes, --max-connections, \
             --max-connections-per-peer, --header-timeout-s, --body-timeout-s, --cors-origin, \
             --allowed-host and --model-name need --serve"
                .into(),
        ));
    }
    let batchy = args.run.session.queue.is_some() || args.run.session.groups.is_some();
    if batchy && !args.serve && args.run.requests.is_none() {
        return Err(super::run::usage("--queue and --groups need --requests or --serve".into()));
    }
    Ok(())
}

/// The sessions' config of `run local --serve` once its nodes run.
pub fn local_orchestrate(
    args: &LocalArgs,
    pool: &LocalPool,
    model: &Path,
    served: &ServedModel,
) -> Result<OrchestrateConfig, CliError> {
    let mut session = session_settings(&args.run.session, DEFAULT_SERVE_QUEUE);
    session.limits.groups = args.groups();
    let spec = &args.run.session.spec;
    Ok(OrchestrateConfig {
        run_id: fresh_run_id(),
        draft_model: session_draft_model(spec, &served.facts)?,
        ..OrchestrateConfig::local(pool, model, served.runtime).with_session(session)
    })
}

/// Constrained entries one micro-batch of a server carries (more wait for the next).
pub const MASKS_PER_BATCH: u32 = 4;

/// A server's mask section: room for [`MASKS_PER_BATCH`] masks of a token bit each (a
/// mask that allows fewer tokens than it has words travels as their ids, and takes less).
pub fn served_mask_bytes(vocab: u32) -> u32 {
    let one = crate::wire::mask::mask_bytes(&crate::wire::mask::MaskSet::Bits(vec![
        0;
        vocab.div_ceil(32)
            as usize
    ]));
    4 + MASKS_PER_BATCH * one as u32
}
