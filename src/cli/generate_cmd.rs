//! `swactor generate`: the one-process reference, streaming text as it is generated.
#![allow(clippy::disallowed_methods)] // the command owns the clock for its timings

use std::time::Instant;

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::args::GenerateArgs;
use super::args::flags::Speculate;
use super::config::runtime::runtime_config;
use super::exit::model_error;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::run_report::SpecSummary;
use crate::model::facts::ModelError;
use crate::model::generate::{
    LocalPipeline, SpecCounts, StopReason, even_split, generate_speculative, generate_until as run,
};
use crate::model::gguf::GgufFile;
use crate::model::sampling::Sampler;
use crate::model::stage::{ComputeDevice, StageError};
use crate::model::tokenizer::{Detokenizer, tokenizer_from_gguf};

#[derive(Serialize)]
struct TokenLine<'a> {
    index: u32,
    id: u32,
    text: &'a str,
}

/// The text the detokenizer held back at the end (an incomplete character, written
/// lossily): with the `token` lines' texts, the whole text.
#[derive(Serialize)]
pub(crate) struct TextLine<'a> {
    pub(crate) text: &'a str,
}

/// Writes the detokenizer's tail: text, or a `text` line with `--json` (none when empty).
pub(crate) fn write_tail(out: &mut Output, json: bool, rest: &str) -> std::io::Result<()> {
    match (json, rest.is_empty()) {
        (_, true) => Ok(()),
        (true, false) => out.json("text", &TextLine { text: rest }),
        (false, false) => out.write_str(rest),
    }
}

#[derive(Serialize)]
struct Summary {
    prompt_tokens: usize,
    tokens: u32,
    stop: StopReason,
    stages: u32,
    load_ms: f64,
    prefill_ms: f64,
    decode_tokens_per_s: f64,
    /// Speculation's counters (`--speculate`), named as llama.cpp's and vLLM's.
    #[serde(skip_serializing_if = "Option::is_none")]
    speculation: Option<SpecSummary>,
}

fn stage_error(e: StageError) -> CliError {
    let reason = match &e {
        StageError::Weights { reason, .. } => reason.as_str().to_string(),
        StageError::ContextFull { .. } => "context_full".into(),
        StageError::BadInput(_) => "bad_input".into(),
        StageError::Compute(_) => "compute_failed".into(),
        StageError::Aborted => "aborted".into(),
    };
    CliError::new(ExitCode::ModelFailed, reason, eyre!(e))
}

/// `--threads`: at least 1; by default every CPU this process may use.
pub(crate) fn compute_threads(threads: Option<u32>) -> Result<u32, CliError> {
    match threads {
        Some(0) => {
            Err(CliError::new(ExitCode::Usage, "usage", eyre!("--threads must be at least 1")))
        }
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get() as u32)),
    }
}

/// The stages of `generate`'s pipeline, split evenly, loaded on the chosen device.
fn load_pipeline(
    args: &GenerateArgs,
    file: &GgufFile,
    facts: &crate::model::ModelFacts,
    runtime: &crate::wire::RuntimeConfig,
) -> Result<LocalPipeline, CliError> {
    let ranges = even_split(facts.block_count, args.stages);
    let device = ComputeDevice::parse(&args.device).ok_or_else(|| {
        CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--device must be `cpu`, `candle` or `cuda:N`, not `{}`", args.device),
        )
    })?;
    if device != ComputeDevice::Cpu && runtime.kv_cache != crate::wire::KvCacheDType::F32 {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--kv-cache f16 needs the CPU engine, not --device {}", args.device),
        ));
    }
    let threads = compute_threads(args.threads)?;
    LocalPipeline::load(
        file,
        &ranges,
        runtime.max_seq_len,
        runtime.kv_cache,
        runtime.activation_dtype,
        device,
        threads,
    )
    .map_err(stage_error)
}

/// The runtime flags, checked; without `--max-seq-len`, the context fitted to this host's
/// available memory as a plan fits it.
fn generate_runtime(
    args: &GenerateArgs,
    facts: &crate::model::ModelFacts,
) -> Result<crate::wire::RuntimeConfig, CliError> {
    let runtime = runtime_config(&args.runtime, facts)?;
    if args.runtime.max_seq_len.is_some() {
        return Ok(runtime);
    }
    let available = crate::node::host_memory_available();
    Ok(super::config::runtime::fit_in_host_memory(runtime, facts, args.stages, available))
}

/// `swactor generate`.
pub fn generate(args: &GenerateArgs, out: &mut Output) -> Result<(), CliError> {
    let signals = super::signals::StopFlag::install();
    let t_load = Instant::now();
    let file = GgufFile::open(&args.model).map_err(|e| model_error(&args.model, e))?;
    let facts = file.facts().map_err(|e| model_error(&args.model, e))?;
    let tokenizer =
        tokenizer_from_gguf(file.header()).map_err(|e: ModelError| model_error(&args.model, e))?;
    let runtime = generate_runtime(args, &facts)?;
    if args.stages == 0 || args.stages > facts.block_count {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--stages must lie in 1..={} for this model", facts.block_count),
        ));
    }
    let text = args.prompt.as_deref().unwrap_or_default();
    let prompt = if let Some(ids) = &args.prompt_ids {
        if let Some(bad) = ids.iter().find(|&&id| id >= facts.vocab_size) {
            return Err(CliError::new(
                ExitCode::Usage,
                "usage",
                eyre!("--prompt-ids: {bad} lies outside the vocabulary of {}", facts.vocab_size),
            ));
        }
        ids.clone()
    } else if args.chat {
        let template = crate::model::tokenizer::chat_template(file.header());
        tokenizer
            .encode_chat_prompt(template.as_deref(), text, crate::clock::unix_now())
            .map_err(|e| CliError::new(ExitCode::Usage, e.code(), eyre!("--chat: {e}")))?
    } else {
        tokenizer.encode(text, true, false)
    };
    if prompt.is_empty() {
        return Err(CliError::new(ExitCode::Usage, "usage", eyre!("the prompt is empty")));
    }
    if prompt.len() >= runtime.max_seq_len as usize {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("the prompt has {} tokens; max_seq_len is {}", prompt.len(), runtime.max_seq_len),
        ));
    }
    let mut pipeline = load_pipeline(args, &file, &facts, &runtime)?;
    let drafter = load_drafter(args, &facts, runtime.max_seq_len)?;
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;

    let mut sampler = Sampler::new(runtime.sampling);
    let mut detok = Detokenizer::new(&tokenizer);
    let mut count = 0u32;
    let mut write_err = None;
    let t0 = Instant::now();
    let mut first_token_at = None;
    let json = args.output.json;
    let stops: Vec<u32> = [facts.eos_token_id, facts.eot_token_id].into_iter().flatten().collect();
    let mut spec = SpecCounts::default();
    let on_token = |id| {
        if first_token_at.is_none() {
            first_token_at = Some(Instant::now());
        }
        let text = detok.push(id);
        let r = match (json, text.is_empty()) {
            (true, _) => out.json("token", &TokenLine { index: count, id, text: &text }),
            (false, true) => Ok(()),
            (false, false) => out.write_str(&text),
        };
        if let Err(e) = r {
            write_err.get_or_insert(e);
        }
        count += 1;
        signals.stopped().is_none()
    };
    let stop = match drafter {
        None => run(&mut pipeline, &prompt, runtime.max_tokens, &mut sampler, &stops, on_token),
        Some(mut drafter) => generate_speculative(
            &mut pipeline,
            &prompt,
            runtime.max_tokens,
            &mut sampler,
            &stops,
            (drafter.as_mut(), args.draft_max as usize, None),
            &mut spec,
            on_token,
        ),
    }
    .map_err(stage_error)?;
    if let Some(e) = write_err {
        return Err(e.into());
    }
    if let Some(how) = signals.stopped() {
        let _ = write_tail(out, json, &detok.finish());
        if !json {
            let _ = out.line("");
        }
        return Err(CliError::new(
            ExitCode::Stopped,
            crate::wire::reason::FaultReason::Operator(how).to_string(),
            eyre!("stopped by the operator ({how}) after {count} tokens"),
        ));
    }
    let end = Instant::now();
    let rest = detok.finish();
    let prefill = first_token_at.map(|t| t - t0).unwrap_or(end - t0);
    let decode = first_token_at.map(|t| end - t).unwrap_or_default();
    let summary = Summary {
        prompt_tokens: prompt.len(),
        tokens: count,
        stop,
        stages: args.stages,
        load_ms,
        prefill_ms: prefill.as_secs_f64() * 1e3,
        decode_tokens_per_s: if count > 1 {
            f64::from(count - 1) / decode.as_secs_f64()
        } else {
            0.0
        },
        speculation: spec_block(&spec, count),
    };
    print_summary(out, json, &summary, &rest)
}

/// The generation's summary: a `generation` line, or the rest of the text and a line on
/// stderr.
fn print_summary(
    out: &mut Output,
    json: bool,
    summary: &Summary,
    rest: &str,
) -> Result<(), CliError> {
    write_tail(out, json, rest)?;
    if json {
        out.json("generation", &summary)?;
    } else {
        out.line("")?;
        eprintln!(
            "completed ({}): {} prompt tokens, {} generated; prefill {:.0} ms, decode {:.1} \
             tokens/s",
            super::output::stop_words(&summary.stop),
            summary.prompt_tokens,
            summary.tokens,
            summary.prefill_ms,
            summary.decode_tokens_per_s
        );
    }
    Ok(())
}

/// `--draft-model`'s drafter, or the n-gram one with `--speculate ngram`; `None` without
/// speculation. A draft model that cannot load or has another vocabulary is a usage error.
fn load_drafter(
    args: &GenerateArgs,
    facts: &crate::model::ModelFacts,
    max_seq_len: u32,
) -> Result<Option<Box<dyn crate::speculate::Draft>>, CliError> {
    let speculates = args.draft_model.is_some() || args.speculate == Speculate::Ngram;
    if speculates && args.device != "cpu" {
        let message = eyre!("speculation verifies drafts on the CPU engine: use --device cpu");
        return Err(CliError::new(ExitCode::Usage, "usage", message));
    }
    let ngram = args.speculate == Speculate::Ngram;
    let sizing = (max_seq_len, compute_threads(args.threads)?);
    crate::cli::config::run::drafter(ngram, args.draft_model.as_deref(), sizing, facts)
}

/// The summary's `speculation` block (`None` where nothing was verified).
fn spec_block(spec: &SpecCounts, tokens: u32) -> Option<SpecSummary> {
    let counters = crate::orchestrator::scheduler::SpecCounters {
        drafts: spec.drafts,
        draft_tokens: spec.draft_tokens,
        accepted_tokens: spec.accepted_tokens,
    };
    let per_pass = f64::from(tokens.saturating_sub(1)) / spec.trips.max(1) as f64;
    (spec.trips > 0).then(|| SpecSummary::of(counters, Some(per_pass)))
}
