//! What every run needs from its `PromptArgs`: the model side ([`RunInputs`]: facts,
//! tokenizer, requests, runtime settings), the draft model, the run id and how the run is
//! printed. The session's settings are [`super::session`]'s.

use color_eyre::eyre::eyre;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use crate::chat::{Conversation, Message};
use crate::cli::args::PromptArgs;
use crate::cli::exit::{CliError, ExitCode, model_error};
use crate::cli::requests::{Batch, MAX_REQUESTS_BYTES, parse_requests};
use crate::model::ModelFacts;
use crate::model::tokenizer::{ChatFormat, Tokenizer, tokenizer_from_gguf};
use crate::orchestrator::requests::Request;
use crate::wire::RuntimeConfig;

use super::runtime::runtime_config;

/// Slots of a batch job's session unless `--max-sequences` says otherwise.
const DEFAULT_BATCH_SEQUENCES: u32 = 8;

/// The model side of a run: facts, tokenizer, its requests and runtime settings.
pub struct RunInputs {
    /// The model's facts.
    pub facts: ModelFacts,
    /// The model's tokenizer (shared with the threads that tokenize a batch's prompts).
    pub tokenizer: Arc<Tokenizer>,
    /// The session's requests known at the start (`--prompt`'s one; none for a batch).
    pub requests: Vec<Request>,
    /// `--requests`: every line judged, a pending request (tokenized while the session
    /// runs) or its error (reported first; it never reaches the session).
    pub batch: Option<Batch>,
    /// The runtime settings, checked.
    pub runtime: RuntimeConfig,
    /// The model's chat format (its own template, or the hand-written fallback).
    pub chat: Arc<ChatFormat>,
    /// The time the inputs were read (seconds since the epoch): templates print its date.
    pub now_unix: i64,
}

impl RunInputs {
    /// Reads `model` and turns the prompt or the `--requests` file into requests.
    pub fn read(model: &Path, run: &PromptArgs) -> Result<RunInputs, CliError> {
        let file = crate::model::gguf::GgufFile::open(model).map_err(|e| model_error(model, e))?;
        let facts = file.facts().map_err(|e| model_error(model, e))?;
        let tokenizer =
            Arc::new(tokenizer_from_gguf(file.header()).map_err(|e| model_error(model, e))?);
        let template = crate::model::tokenizer::chat_template(file.header());
        let chat = Arc::new(ChatFormat::new(&tokenizer, template.as_deref()));
        let now_unix = crate::clock::unix_now();
        if let Some(path) = &run.requests {
            let mut args = run.session.runtime.clone();
            args.max_sequences = args.max_sequences.or(Some(DEFAULT_BATCH_SEQUENCES));
            let runtime = runtime_config(&args, &facts)?;
            let bytes = read_requests(path)?;
            let text = |m: &[(&str, &str)]| chat_text_of(&tokenizer, &chat, m, now_unix);
            let batch = parse_requests(&bytes, Some(&text), &runtime);
            let requests = Vec::new();
            let batch = Some(batch);
            return Ok(RunInputs { facts, tokenizer, requests, batch, runtime, chat, now_unix });
        }
        let runtime = runtime_config(&run.session.runtime, &facts)?;
        let request = prompt_request(run, &tokenizer, &chat, now_unix, &runtime)?;
        let requests = vec![request];
        Ok(RunInputs { facts, tokenizer, requests, batch: None, runtime, chat, now_unix })
    }

    /// The prompt's length in tokens (0 for a batch job).
    pub fn prompt_tokens(&self) -> usize {
        self.requests.first().map_or(0, |r| r.prompt.len())
    }

    /// How many requests the session will serve (a batch's valid lines).
    pub fn request_count(&self) -> usize {
        match &self.batch {
            Some(b) => b.lines.iter().filter(|l| l.is_ok()).count(),
            None => self.requests.len(),
        }
    }
}

/// A batch line's conversation as the model reads it, as text.
fn chat_text_of(
    tokenizer: &Tokenizer,
    chat: &ChatFormat,
    messages: &[(&str, &str)],
    now_unix: i64,
) -> Result<String, String> {
    let conv = Conversation::new(messages.iter().map(|(r, c)| Message::new(r, c)).collect());
    chat.text(tokenizer, &conv, now_unix, usize::MAX).map_err(|e| e.to_string())
}

/// A usage error (exit 2).
pub fn usage(message: String) -> CliError {
    CliError::new(ExitCode::Usage, "usage", eyre!(message))
}

/// `--prompt` (and `--chat`) as the one request of the session.
fn prompt_request(
    run: &PromptArgs,
    tokenizer: &Tokenizer,
    chat: &ChatFormat,
    now_unix: i64,
    runtime: &RuntimeConfig,
) -> Result<Request, CliError> {
    let prompt = if run.chat {
        let conv = Conversation::new(vec![Message::new("user", &run.prompt)]);
        chat.encode(tokenizer, &conv, now_unix, usize::MAX)
            .map_err(|e| usage(format!("--chat: {e}")))?
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
    Ok(Request {
        id: "0".into(),
        prompt,
        max_tokens: runtime.max_tokens,
        sampling: runtime.sampling,
        stop: Vec::new(),
        logprobs: None,
        speculative: true,
        cache_prompt: true,
        constraint: None,
    })
}

/// Reads a `--requests` file (at most [`MAX_REQUESTS_BYTES`]; `-` is standard input).
fn read_requests(path: &Path) -> Result<Vec<u8>, CliError> {
    let io = |e: std::io::Error| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot read --requests {}", path.display())),
        )
    };
    let too_large = |len: u64| {
        CliError::new(
            ExitCode::Input,
            "requests_too_large",
            eyre!("--requests {}: {len} bytes, at most {MAX_REQUESTS_BYTES}", path.display()),
        )
    };
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin().lock().take(MAX_REQUESTS_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 > MAX_REQUESTS_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        return Ok(bytes);
    }
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_REQUESTS_BYTES {
        return Err(too_large(len));
    }
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_REQUESTS_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > MAX_REQUESTS_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The drafter `--speculate ngram` or `--draft-model` asks for (see
/// [`crate::model::draft::load_drafter`]). A draft model that cannot load or has another
/// vocabulary than `facts` is a usage error (`bad_draft_model`).
pub fn drafter(
    ngram: bool,
    model: Option<&Path>,
    sizing: (u32, u32),
    facts: &ModelFacts,
) -> Result<Option<Box<dyn crate::speculate::Draft>>, CliError> {
    crate::model::draft::load_drafter(ngram, model, sizing, facts)
        .map_err(|e| CliError::new(ExitCode::Usage, "bad_draft_model", eyre!("{e}")))
}

/// `--draft-model`'s model for the session's sequences (`None`: without it, a
/// speculating session drafts by n-gram lookup), checked now from its header: one that
/// cannot be read or has another vocabulary than `facts` is a usage error
/// (`bad_draft_model`). The role that drafts with it loads it.
pub fn session_draft_model(
    spec: &crate::cli::args::SpeculateFlags,
    facts: &ModelFacts,
) -> Result<Option<crate::orchestrator::driver::DraftModelConfig>, CliError> {
    let Some(path) = spec.draft_model.as_ref() else { return Ok(None) };
    let target = crate::model::draft::DraftTarget::of(facts);
    crate::model::draft::DraftModel::check(path, &target)
        .map_err(|e| CliError::new(ExitCode::Usage, "bad_draft_model", eyre!("{e}")))?;
    Ok(Some(crate::orchestrator::driver::DraftModelConfig {
        path: path.clone(),
        threads: spec.draft_threads,
    }))
}

/// How a run is printed.
#[derive(Debug, Clone, Copy)]
pub struct PrintConfig {
    /// `--json`: JSON Lines with every event, a `token` line per token and a `run` summary.
    pub json: bool,
    /// `--stream` (with `--requests`): a JSON line per generated token.
    pub stream: bool,
}

impl PrintConfig {
    /// From the run's flags.
    pub fn of(run: &PromptArgs) -> PrintConfig {
        PrintConfig { json: run.output.json, stream: run.stream }
    }
}

/// The run id: `--run-id`, or a [`fresh_run_id`].
pub fn run_id(run: &PromptArgs) -> crate::wire::RunId {
    run.run_id.map_or_else(fresh_run_id, crate::wire::RunId)
}

/// A fresh run id from this host's clock in microseconds (below 2^53, so it stays exact
/// in every JSON reader), so that no two runs of an orchestrator share one (a server's
/// sessions each take the next).
pub fn fresh_run_id() -> crate::wire::RunId {
    #[allow(clippy::disallowed_methods)] // an identity, not a measurement
    let t = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(1, |d| d.as_micros() as u64);
    crate::wire::RunId(t.max(1))
}
