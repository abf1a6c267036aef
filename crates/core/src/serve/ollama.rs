//! Ollama's API in its own shapes over the same request: `POST /api/chat` and
//! `POST /api/generate` (read into OpenAI chat bodies by [`chat_to_openai`] and
//! [`generate_to_openai`]; streamed by default, as newline-delimited JSON), and the model
//! list of `GET /api/tags` ([`tags`]). `options` carries the sampling (`temperature`,
//! `top_p`, `top_k`, `seed`, `num_predict`, `stop`); `format` (`"json"` or a JSON schema)
//! is the constrained output of `response_format`. Images and `raw` prompts are refused
//! with a 400 naming them.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::chat_answer::{ChatAnswer, tool_call_id};
use super::error::ApiError;
use super::params::UNSUPPORTED;
use super::shapes::Timings;
use crate::chat::{Delta, strftime};

#[derive(Deserialize, Default)]
struct Options {
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u64>,
    seed: Option<u64>,
    num_predict: Option<i64>,
    stop: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct ChatBody {
    model: Option<String>,
    messages: Vec<Value>,
    tools: Option<Vec<Value>>,
    format: Option<Value>,
    options: Option<Options>,
    stream: Option<bool>,
    think: Option<bool>,
}

#[derive(Deserialize)]
struct GenerateBody {
    model: Option<String>,
    prompt: Option<String>,
    system: Option<String>,
    format: Option<Value>,
    options: Option<Options>,
    stream: Option<bool>,
    #[serde(default)]
    raw: bool,
    images: Option<Vec<Value>>,
    think: Option<bool>,
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::invalid(m)
}

/// `format` as OpenAI's `response_format`: `"json"` any JSON object, an object a schema.
fn response_format(format: &Option<Value>, out: &mut Value) -> Result<(), ApiError> {
    match format {
        None | Some(Value::Null) => Ok(()),
        Some(f) if f == "" => Ok(()),
        Some(f) if f == "json" => {
            out["response_format"] = json!({"type": "json_object"});
            Ok(())
        }
        Some(s @ Value::Object(_)) => {
            out["response_format"] = json!({"type": "json_schema", "json_schema": {"schema": s}});
            Ok(())
        }
        Some(other) => Err(bad(format!("'format' is \"json\" or a JSON schema, not {other}"))),
    }
}

/// The OpenAI body's common fields: model, stream (Ollama's default: on), options, think.
fn common(
    out: &mut Value,
    model: Option<String>,
    stream: Option<bool>,
    o: Option<Options>,
    think: Option<bool>,
) {
    out["stream"] = json!(stream.unwrap_or(true));
    if let Some(m) = model {
        out["model"] = json!(m);
    }
    let o = o.unwrap_or_default();
    for (k, v) in [("temperature", o.temperature), ("top_p", o.top_p)] {
        if let Some(v) = v {
            out[k] = json!(v);
        }
    }
    if let Some(k) = o.top_k {
        out["top_k"] = json!(k);
    }
    if let Some(s) = o.seed {
        out["seed"] = json!(s);
    }
    if let Some(n) = o.num_predict.filter(|n| *n > 0) {
        out["max_tokens"] = json!(n);
    }
    if let Some(s) = o.stop {
        out["stop"] = json!(s);
    }
    if let Some(t) = think {
        out["chat_template_kwargs"] = json!({"enable_thinking": t});
    }
}

/// An `/api/chat` body as an OpenAI chat body (JSON bytes). A `tool` message names no
/// call in Ollama: the k-th tool message after an assistant's calls answers its k-th call.
pub fn chat_to_openai(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let b: ChatBody = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a valid request: {e}")))?;
    let mut messages = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in b.messages.iter().enumerate() {
        if m.get("images").is_some_and(|v| !v.is_null()) {
            return Err(bad(format!("messages[{i}]: images are not supported (text only)")));
        }
        let role = m["role"].as_str().unwrap_or("");
        let mut out = json!({"role": role, "content": m["content"]});
        if let Some(t) = m.get("thinking").filter(|t| t.is_string()) {
            out["reasoning_content"] = t.clone();
        }
        if let Some(calls) = m["tool_calls"].as_array() {
            pending.clear();
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    let id = tool_call_id(i as u64, k);
                    pending.push(id.clone());
                    let args = &c["function"]["arguments"];
                    let args =
                        if args.is_string() { args.clone() } else { json!(args.to_string()) };
                    json!({"id": id, "type": "function",
                           "function": {"name": c["function"]["name"], "arguments": args}})
                })
                .collect();
            out["tool_calls"] = Value::Array(calls);
        }
        if role == "tool" {
            let id = if pending.is_empty() { tool_call_id(i as u64, 0) } else { pending.remove(0) };
            out["tool_call_id"] = json!(id);
        }
        messages.push(out);
    }
    let mut out = json!({"messages": messages});
    if let Some(t) = b.tools {
        out["tools"] = Value::Array(t);
    }
    response_format(&b.format, &mut out)?;
    common(&mut out, b.model, b.stream, b.options, b.think);
    serde_json::to_vec(&out).map_err(|e| bad(e.to_string()))
}

/// An `/api/generate` body as an OpenAI chat body (the prompt as the user's message, the
/// system text before it).
pub fn generate_to_openai(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let b: GenerateBody = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a valid request: {e}")))?;
    if b.raw {
        return Err(bad("'raw' prompts are not supported: use /v1/completions for text without \
                        the chat template")
        .because(UNSUPPORTED));
    }
    if b.images.as_ref().is_some_and(|i| !i.is_empty()) {
        return Err(bad("images are not supported (text only)"));
    }
    let mut messages = Vec::new();
    if let Some(s) = b.system {
        messages.push(json!({"role": "system", "content": s}));
    }
    messages.push(json!({"role": "user", "content": b.prompt.unwrap_or_default()}));
    let mut out = json!({"messages": messages});
    response_format(&b.format, &mut out)?;
    common(&mut out, b.model, b.stream, b.options, b.think);
    serde_json::to_vec(&out).map_err(|e| bad(e.to_string()))
}

/// Which of Ollama's endpoints answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `/api/chat`: `message` objects.
    Chat,
    /// `/api/generate`: `response` text.
    Generate,
}

/// Writes one answer as Ollama's lines.
#[derive(Debug)]
pub struct LineWriter {
    endpoint: Endpoint,
    model: String,
    created_at: String,
    ticket: u64,
}

impl LineWriter {
    /// A writer for request `ticket` that arrived at `created` (unix seconds).
    pub fn new(endpoint: Endpoint, model: String, created: u64, ticket: u64) -> LineWriter {
        let created_at = strftime("%Y-%m-%dT%H:%M:%SZ", created as i64);
        LineWriter { endpoint, model, created_at, ticket }
    }

    fn line(&self, message: Map<String, Value>, done: bool) -> Value {
        let mut v = json!({"model": self.model, "created_at": self.created_at, "done": done});
        match self.endpoint {
            Endpoint::Chat => {
                let mut m = json!({"role": "assistant", "content": ""});
                for (k, x) in message {
                    m[k] = x;
                }
                v["message"] = m;
            }
            Endpoint::Generate => {
                v["response"] = message.get("content").cloned().unwrap_or(json!(""));
                if let Some(t) = message.get("thinking") {
                    v["thinking"] = t.clone();
                }
            }
        }
        v
    }

    fn calls(&self, a: &ChatAnswer) -> Value {
        a.calls
            .iter()
            .map(|c| {
                let args: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
                json!({"id": tool_call_id(self.ticket, c.index),
                       "function": {"index": c.index, "name": c.name, "arguments": args}})
            })
            .collect()
    }

    /// The line of one read piece of the answer.
    pub fn delta(&self, d: &Delta) -> Value {
        let mut m = Map::new();
        match d {
            Delta::Content(s) => {
                m.insert("content".into(), json!(s));
            }
            Delta::Reasoning(s) => {
                m.insert("thinking".into(), json!(s));
            }
            Delta::ToolCall(c) => {
                let a = ChatAnswer { calls: vec![c.clone()], ..ChatAnswer::default() };
                m.insert("tool_calls".into(), self.calls(&a));
            }
        }
        self.line(m, false)
    }

    /// The last line: done, why, and the counts and durations (nanoseconds).
    pub fn done(&self, answer: Option<&ChatAnswer>, finish: &str, t: &Timings) -> Value {
        let mut m = Map::new();
        if let Some(a) = answer {
            m.insert("content".into(), json!(a.content));
            if !a.reasoning.is_empty() {
                m.insert("thinking".into(), json!(a.reasoning));
            }
            if !a.calls.is_empty() {
                m.insert("tool_calls".into(), self.calls(a));
            }
        }
        let mut v = self.line(m, true);
        let ns = |ms: f64| (ms * 1e6) as u64;
        v["done_reason"] = json!(if finish == "length" { "length" } else { "stop" });
        v["total_duration"] = json!(ns(t.prompt_ms + t.predicted_ms));
        v["load_duration"] = json!(0);
        v["prompt_eval_count"] = json!(t.prompt_n);
        v["prompt_eval_duration"] = json!(ns(t.prompt_ms));
        v["eval_count"] = json!(t.predicted_n);
        v["eval_duration"] = json!(ns(t.predicted_ms));
        v
    }
}

/// `/api/tags`' answer: the served model, loaded at `created` (unix seconds).
pub fn tags(model: &str, created: u64) -> Value {
    json!({"models": [{
        "name": model, "model": model,
        "modified_at": strftime("%Y-%m-%dT%H:%M:%SZ", created as i64),
        "size": 0, "digest": "", "details": {"format": "gguf"},
    }]})
}

#[cfg(test)]
mod tests;
