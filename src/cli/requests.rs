//! `--requests FILE`: a batch job's JSON Lines requests, read and tokenized before the
//! session starts. A line that cannot become a request is that request's error (it never
//! stops the others).
//!
//! One object per line: `id` (string or number; default the line number), `prompt`
//! (text) or `messages` (`[{"role": ..., "content": ...}]`, written with the model's chat
//! template; a content is text, so one that spells `<|im_start|>` forges no turn),
//! `max_tokens`, `temperature` (0 is greedy), `top_p`, `top_k`, `seed`, `stop`
//! (a string or a list of strings). Blank lines are skipped.

use serde::Deserialize;

use crate::model::tokenizer::Tokenizer;
use crate::orchestrator::requests::Request;
use crate::wire::{RuntimeConfig, SamplingPolicy};

/// The largest requests file read (bigger files are refused before reading).
pub const MAX_REQUESTS_BYTES: u64 = 64 << 20;
/// The most requests one file may hold.
pub const MAX_REQUESTS: usize = 100_000;

/// One line that could not become a request.
#[derive(Debug, Clone, PartialEq)]
pub struct LineError {
    /// The request's id when the line names one, else its line number.
    pub id: String,
    /// A stable reason.
    pub reason: &'static str,
    /// What exactly.
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(serde_json::Number),
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize)]
struct Message {
    role: String,
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    id: Option<Id>,
    prompt: Option<String>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<u32>,
    seed: Option<u64>,
    stop: Option<Stop>,
}

/// Parses `text` (the file's contents) into requests in line order: each line a request or
/// its error. `runtime` gives the defaults (`max_tokens`, sampling); `template` is the
/// model's chat template.
pub fn parse_requests(
    text: &str,
    tokenizer: &Tokenizer,
    template: Option<&str>,
    runtime: &RuntimeConfig,
) -> Vec<Result<Request, LineError>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .take(MAX_REQUESTS)
        .map(|(n, l)| parse_line(n + 1, l, tokenizer, template, runtime))
        .collect()
}

fn parse_line(
    number: usize,
    text: &str,
    tokenizer: &Tokenizer,
    template: Option<&str>,
    runtime: &RuntimeConfig,
) -> Result<Request, LineError> {
    let err = |id: &str, reason: &'static str, message: String| LineError {
        id: id.to_string(),
        reason,
        message,
    };
    let fallback = number.to_string();
    let line: Line = serde_json::from_str(text).map_err(|e| {
        // Keep the id of a line whose other fields are wrong.
        let id = serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| v.get("id").map(id_text))
            .unwrap_or_else(|| fallback.clone());
        err(&id, "invalid_request", format!("line {number}: {e}"))
    })?;
    let id = match line.id {
        Some(Id::Text(s)) => s,
        Some(Id::Number(n)) => n.to_string(),
        None => fallback,
    };
    let prompt = match (line.prompt, line.messages) {
        (Some(p), None) => tokenizer.encode(&p, true, false),
        (None, Some(m)) => {
            // Contents are text: only the template's markers are special tokens.
            let pairs: Vec<(&str, &str)> =
                m.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
            tokenizer
                .encode_chat(template, &pairs)
                .map_err(|e| err(&id, "invalid_messages", e.to_string()))?
        }
        _ => {
            return Err(err(
                &id,
                "invalid_request",
                format!("line {number}: give exactly one of `prompt` and `messages`"),
            ));
        }
    };
    let sampling = match (line.temperature, line.top_p, line.top_k, line.seed) {
        (None, None, None, None) => runtime.sampling,
        (t, p, k, seed) => SamplingPolicy::Sample {
            temperature: t.unwrap_or(1.0),
            top_k: k,
            top_p: p,
            seed: seed.unwrap_or(0),
        }
        .normalized(),
    };
    sampling.validate().map_err(|e| err(&id, "invalid_sampling", e))?;
    let stop = match line.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    let max_tokens = line.max_tokens.unwrap_or(runtime.max_tokens);
    if max_tokens == 0 {
        return Err(err(&id, "invalid_request", "max_tokens must be at least 1".into()));
    }
    Ok(Request { id, prompt, max_tokens, sampling, stop })
}

fn id_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
