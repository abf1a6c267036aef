//! `--requests FILE`: a batch job's JSON Lines requests. Every line is judged before the
//! session starts (cheaply: JSON, limits, ids, sampling; no tokenizing) and becomes a
//! [`Pending`] request or that line's [`LineError`] (one bad line never stops the
//! others); pending requests are tokenized while the session runs
//! ([`super::batch_tokens`]).
//!
//! One object per line: `id` (string or number, echoed exactly as given; default the line
//! number as a string), `prompt` (text) or `messages` (`[{"role": ..., "content": ...}]`,
//! at least one, written with the model's chat template; a content is text, so one that
//! spells `<|im_start|>` forges no turn), `max_tokens`, `temperature` (0 is
//! greedy), `top_p`, `top_k`, `seed`, `stop` (a string or a list of at most
//! [`MAX_STOPS`] strings of at most [`MAX_STOP_BYTES`] bytes), `speculative` (`false`
//! keeps the request from drafting where the session speculates), `cache_prompt`
//! (`false` computes every prompt token, sharing nothing with a warm slot). Blank lines
//! are skipped.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::orchestrator::requests::{MAX_STOP_BYTES, MAX_STOPS};
use crate::wire::{RuntimeConfig, SamplingPolicy};

/// The largest requests file read (bigger files are refused before reading).
pub const MAX_REQUESTS_BYTES: u64 = 64 << 20;
/// The most requests one file may hold; every line past them is `too_many_requests`.
pub const MAX_REQUESTS: usize = 100_000;
/// Bytes of prompt text allowed per token of context, four contexts' worth at a generous
/// 16 bytes a token: a longer prompt can never fit and is refused before tokenizing.
pub const PROMPT_BYTES_PER_CONTEXT_TOKEN: usize = 4 * 16;

/// Writes a conversation of `(role, content)` messages as the model reads it, or says
/// why it cannot.
pub type ChatText<'a> = dyn Fn(&[(&str, &str)]) -> Result<String, String> + 'a;

/// The longest prompt text (after the chat template) a session of `max_seq_len` tokens
/// tokenizes: [`PROMPT_BYTES_PER_CONTEXT_TOKEN`] bytes per token of context.
pub fn max_prompt_bytes(max_seq_len: u32) -> usize {
    (max_seq_len as usize).saturating_mul(PROMPT_BYTES_PER_CONTEXT_TOKEN)
}

/// A request's id exactly as its line gave it (a JSON string or number), or its line
/// number as a string.
pub type RequestId = Box<RawValue>;

/// One line that could not become a request.
#[derive(Debug, Clone)]
pub struct LineError {
    /// The request's id when the line names one, else its line number.
    pub id: RequestId,
    /// A stable reason: `invalid_request`, `invalid_utf8`, `invalid_messages`,
    /// `invalid_sampling`, `invalid_stop`, `prompt_too_long`, `duplicate_id`,
    /// `too_many_requests`.
    pub reason: &'static str,
    /// What exactly.
    pub message: String,
}

/// A request judged valid, not tokenized yet.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Its id as given.
    pub id: RequestId,
    /// Its prompt text (for `messages`, the conversation as the chat template writes it).
    pub text: String,
    /// `messages` as given, `(role, content)`: tokenized with only the template's markers
    /// special, each content as text.
    pub messages: Option<Vec<(String, String)>>,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    /// How its tokens are picked.
    pub sampling: SamplingPolicy,
    /// Its stop strings.
    pub stop: Vec<String>,
    /// Whether it may draft where the session speculates.
    pub speculative: bool,
    /// Whether it may start from a prefix a warm slot holds.
    pub cache_prompt: bool,
}

impl Pending {
    /// The id as the session's book names it (a string's contents, a number's text).
    pub fn display_id(&self) -> String {
        id_display(&self.id)
    }
}

/// A requests file, judged: every non-blank line in order, a request or its error.
#[derive(Debug, Default)]
pub struct Batch {
    /// Every non-blank line in order.
    pub lines: Vec<Result<Pending, LineError>>,
}

impl Batch {
    /// The lines that could not become requests.
    pub fn errors(&self) -> impl Iterator<Item = &LineError> {
        self.lines.iter().filter_map(|l| l.as_ref().err())
    }

    /// How many lines could not become requests.
    pub fn error_count(&self) -> usize {
        self.errors().count()
    }

    /// The valid requests, in order (taken out of the batch).
    pub fn take_pending(&mut self) -> Vec<Pending> {
        let lines = std::mem::take(&mut self.lines);
        let mut pending = Vec::new();
        for line in lines {
            match line {
                Ok(p) => pending.push(p),
                Err(e) => self.lines.push(Err(e)),
            }
        }
        pending
    }
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
    id: Option<RequestId>,
    prompt: Option<String>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<u32>,
    seed: Option<u64>,
    stop: Option<Stop>,
    speculative: Option<bool>,
    cache_prompt: Option<bool>,
}

#[derive(Deserialize)]
struct IdOnly {
    id: Option<RequestId>,
}

/// Judges `bytes` (the file's contents) line by line: each non-blank line a pending
/// request or its error, in order. `runtime` gives the defaults (`max_tokens`, sampling)
/// and the context; `chat` writes a conversation as the model reads it (`None`: the model
/// has no chat format, and lines with `messages` are refused).
pub fn parse_requests(bytes: &[u8], chat: Option<&ChatText<'_>>, runtime: &RuntimeConfig) -> Batch {
    let mut seen = HashSet::new();
    let mut lines = Vec::new();
    let mut count = 0usize;
    for (n, raw) in bytes.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        count += 1;
        let number = n + 1;
        let line = match std::str::from_utf8(raw) {
            Err(e) => Err(LineError {
                id: line_id(number),
                reason: "invalid_utf8",
                message: format!("line {number}: not UTF-8 text ({e})"),
            }),
            Ok(_) if count > MAX_REQUESTS => Err(LineError {
                id: overflow_id(raw, number),
                reason: "too_many_requests",
                message: format!("line {number}: a file holds at most {MAX_REQUESTS} requests"),
            }),
            Ok(text) => parse_line(number, text, chat, runtime),
        };
        let line = line.and_then(|p| {
            if seen.insert(id_key(&p.id)) {
                Ok(p)
            } else {
                let message = format!("line {number}: the id {} was given before", p.id.get());
                Err(LineError { id: p.id, reason: "duplicate_id", message })
            }
        });
        lines.push(line);
    }
    Batch { lines }
}

/// The id of a line past the limit (its own when it names one), read without judging it.
fn overflow_id(raw: &[u8], number: usize) -> RequestId {
    serde_json::from_slice::<IdOnly>(raw)
        .ok()
        .and_then(|l| l.id)
        .filter(|id| valid_id(id))
        .unwrap_or_else(|| line_id(number))
}

fn parse_line(
    number: usize,
    text: &str,
    chat: Option<&ChatText<'_>>,
    runtime: &RuntimeConfig,
) -> Result<Pending, LineError> {
    let fallback = line_id(number);
    let line: Line = serde_json::from_str(text).map_err(|e| {
        // Keep the id of a line whose other fields are wrong.
        let id = serde_json::from_str::<IdOnly>(text)
            .ok()
            .and_then(|l| l.id)
            .filter(|id| valid_id(id))
            .unwrap_or_else(|| fallback.clone());
        LineError { id, reason: "invalid_request", message: format!("line {number}: {e}") }
    })?;
    let id = match line.id {
        Some(id) if valid_id(&id) => id,
        Some(id) => {
            let message = format!("line {number}: the id {} is not a string or a number", id);
            return Err(LineError { id: fallback, reason: "invalid_request", message });
        }
        None => fallback,
    };
    let err = |reason: &'static str, message: String| LineError {
        id: id.clone(),
        reason,
        message: format!("line {number}: {message}"),
    };
    let (text, messages) = match (line.prompt, line.messages) {
        (Some(p), None) => (p, None),
        (None, Some(m)) if m.is_empty() => {
            return Err(err("invalid_messages", "`messages` is empty".into()));
        }
        (None, Some(m)) => {
            // Contents are text: only the template's markers are special tokens.
            let pairs: Vec<(&str, &str)> =
                m.iter().map(|m| (m.role.as_str(), m.content.as_str())).collect();
            let text = match chat {
                Some(chat) => chat(&pairs).map_err(|e| err("invalid_messages", e))?,
                None => {
                    let e = crate::model::tokenizer::ChatError::NoTemplate;
                    return Err(err("invalid_messages", e.to_string()));
                }
            };
            (text, Some(m.into_iter().map(|m| (m.role, m.content)).collect()))
        }
        _ => {
            return Err(err(
                "invalid_request",
                "give exactly one of `prompt` and `messages`".into(),
            ));
        }
    };
    let limit = max_prompt_bytes(runtime.max_seq_len);
    if text.len() > limit {
        let context = runtime.max_seq_len;
        return Err(err(
            "prompt_too_long",
            format!(
                "the prompt has {} bytes; a context of {context} tokens takes at most {limit}",
                text.len()
            ),
        ));
    }
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
    sampling.validate().map_err(|e| err("invalid_sampling", e))?;
    let stop = match line.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    if stop.len() > MAX_STOPS {
        let message = format!("{} stop strings; at most {MAX_STOPS}", stop.len());
        return Err(err("invalid_stop", message));
    }
    if let Some(s) = stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
        let message = format!("a stop string of {} bytes; at most {MAX_STOP_BYTES}", s.len());
        return Err(err("invalid_stop", message));
    }
    let max_tokens = line.max_tokens.unwrap_or(runtime.max_tokens);
    if max_tokens == 0 {
        return Err(err("invalid_request", "max_tokens must be at least 1".into()));
    }
    let speculative = line.speculative.unwrap_or(true);
    let cache_prompt = line.cache_prompt.unwrap_or(true);
    Ok(Pending { id, text, messages, max_tokens, sampling, stop, speculative, cache_prompt })
}

/// Line `number`'s default id: its number, as a JSON string.
pub fn line_id(number: usize) -> RequestId {
    text_id(&number.to_string())
}

/// `text` as a JSON string id.
pub fn text_id(text: &str) -> RequestId {
    // A JSON string is always valid raw JSON.
    RawValue::from_string(serde_json::Value::from(text).to_string())
        .unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// Whether `id` is a JSON string or number.
fn valid_id(id: &RawValue) -> bool {
    id.get().starts_with(|c: char| c == '"' || c == '-' || c.is_ascii_digit())
}

/// Ids equal as given: a string by its contents, a number by its text.
fn id_key(id: &RawValue) -> String {
    match serde_json::from_str::<String>(id.get()) {
        Ok(s) => format!("s{s}"),
        Err(_) => format!("n{}", id.get()),
    }
}

/// The id as text: a string's contents, a number's digits.
pub fn id_display(id: &RawValue) -> String {
    serde_json::from_str::<String>(id.get()).unwrap_or_else(|_| id.get().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> RuntimeConfig {
        RuntimeConfig {
            max_seq_len: 64,
            kv_cache: Default::default(),
            activation_dtype: crate::wire::ActivationDType::F32,
            max_tokens: 8,
            sampling: SamplingPolicy::Greedy,
            max_sequences: 1,
            max_top_logprobs: None,
            mask_bytes: 0,
        }
    }

    fn judge(text: &str) -> Vec<Result<Pending, LineError>> {
        parse_requests(text.as_bytes(), None, &runtime()).lines
    }

    fn reason(line: &Result<Pending, LineError>) -> &'static str {
        line.as_ref().err().map_or("ok", |e| e.reason)
    }

    #[test]
    fn a_prompt_past_the_byte_limit_is_refused_before_tokenizing() {
        let big = "x".repeat(max_prompt_bytes(64) + 1);
        let lines = judge(&format!("{{\"prompt\":\"{big}\"}}\n{{\"prompt\":\"ok\"}}\n"));
        assert_eq!(reason(&lines[0]), "prompt_too_long");
        assert!(lines[0].as_ref().err().is_some_and(|e| e.message.contains("bytes")));
        assert_eq!(reason(&lines[1]), "ok");
    }

    #[test]
    fn too_many_or_too_long_stop_strings_are_that_requests_error() {
        let many: Vec<String> = (0..=MAX_STOPS).map(|i| format!("s{i}")).collect();
        let long = "y".repeat(MAX_STOP_BYTES + 1);
        let text = format!(
            "{}\n{}\n{}\n",
            serde_json::json!({"prompt": "a", "stop": many}),
            serde_json::json!({"prompt": "a", "stop": long}),
            serde_json::json!({"prompt": "a", "stop": many[..MAX_STOPS]}),
        );
        let lines = judge(&text);
        assert_eq!(
            lines.iter().map(reason).collect::<Vec<_>>(),
            ["invalid_stop", "invalid_stop", "ok"]
        );
    }

    #[test]
    fn ids_come_back_exactly_as_given_and_a_duplicate_is_that_lines_error() {
        let lines = judge(
            "{\"id\": 12345678901234567890123, \"prompt\": \"a\"}\n{\"id\": \"x\", \"prompt\": \
             \"a\"}\n{\"id\": \"x\", \"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n",
        );
        let id = |i: usize| match &lines[i] {
            Ok(p) => p.id.get().to_string(),
            Err(e) => e.id.get().to_string(),
        };
        assert_eq!(id(0), "12345678901234567890123");
        assert_eq!((id(1), reason(&lines[1])), ("\"x\"".to_string(), "ok"));
        assert_eq!((id(2), reason(&lines[2])), ("\"x\"".to_string(), "duplicate_id"));
        assert_eq!(id(3), "\"4\"", "a line without an id is named by its number");
    }

    #[test]
    fn a_bad_byte_empty_messages_or_a_bad_id_is_that_lines_error_only() {
        let mut bytes = b"{\"prompt\": \"a\"}\n{\"prompt\": \"\xff\"}\n".to_vec();
        bytes.extend_from_slice(b"{\"messages\": []}\n{\"id\": [1], \"prompt\": \"a\"}\n");
        let lines = parse_requests(&bytes, None, &runtime()).lines;
        assert_eq!(
            lines.iter().map(reason).collect::<Vec<_>>(),
            ["ok", "invalid_utf8", "invalid_messages", "invalid_request"]
        );
    }

    #[test]
    fn every_line_past_the_request_limit_is_too_many_requests() {
        let text = "{\"prompt\": \"a\"}\n".repeat(MAX_REQUESTS + 2);
        let lines = judge(&text);
        assert_eq!(lines.len(), MAX_REQUESTS + 2);
        assert_eq!(reason(&lines[MAX_REQUESTS - 1]), "ok");
        assert_eq!(reason(&lines[MAX_REQUESTS]), "too_many_requests");
        assert_eq!(reason(&lines[MAX_REQUESTS + 1]), "too_many_requests");
    }
}
