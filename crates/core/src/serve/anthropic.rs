//! Anthropic's Messages API (`POST /v1/messages`) over the same request as OpenAI's chat:
//! a body is read into an OpenAI chat body ([`to_openai_chat`]) and judged by
//! [`super::params::parse_chat`]; the answer leaves as a `message` whole, or streamed as
//! Anthropic's events ([`EventWriter`]): `message_start`, a `content_block_start` /
//! `_delta` / `_stop` triple per text, thinking or `tool_use` block, `message_delta` with
//! the stop reason and usage, `message_stop`.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::chat_answer::{ChatAnswer, tool_call_id};
use super::error::ApiError;
use crate::chat::{Delta, ParsedCall};

#[derive(Deserialize)]
struct Body {
    model: Option<String>,
    max_tokens: Option<u64>,
    system: Option<Value>,
    messages: Vec<Message>,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    stop_sequences: Option<Vec<String>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    top_k: Option<u64>,
    #[serde(default)]
    stream: bool,
    thinking: Option<Value>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: Value,
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::invalid(m)
}

/// The text of a `system` or `tool_result` content: a string or `text` blocks.
fn text_of(v: &Value, at: &str) -> Result<String, ApiError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(blocks) => {
            let mut out = String::new();
            for b in blocks {
                match b["type"].as_str() {
                    Some("text") => out.push_str(b["text"].as_str().unwrap_or("")),
                    other => {
                        return Err(bad(format!(
                            "{at}: content blocks of type {other:?} are not supported here (text only)"
                        )));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(bad(format!("{at}: content must be a string or an array of blocks"))),
    }
}

/// One Anthropic message as OpenAI messages: a user's `tool_result` blocks become `tool`
/// messages (in order, before the user's text); an assistant's `tool_use` blocks its
/// `tool_calls`, its `thinking` blocks its reasoning.
fn convert(i: usize, m: Message, out: &mut Vec<Value>) -> Result<(), ApiError> {
    let at = format!("messages[{i}]");
    if !matches!(m.role.as_str(), "user" | "assistant") {
        return Err(bad(format!("{at}: the role is user or assistant, not {:?}", m.role)));
    }
    let blocks = match m.content {
        Value::String(s) => vec![json!({"type": "text", "text": s})],
        Value::Array(b) => b,
        _ => return Err(bad(format!("{at}: content must be a string or an array of blocks"))),
    };
    let (mut text, mut thinking, mut calls) = (String::new(), String::new(), Vec::new());
    for (k, b) in blocks.iter().enumerate() {
        let at = format!("{at}.content[{k}]");
        match (b["type"].as_str(), m.role.as_str()) {
            (Some("text"), _) => text.push_str(b["text"].as_str().unwrap_or("")),
            (Some("thinking"), "assistant") => {
                thinking.push_str(b["thinking"].as_str().unwrap_or(""));
            }
            (Some("redacted_thinking"), "assistant") => {}
            (Some("tool_use"), "assistant") => {
                let name =
                    b["name"].as_str().ok_or_else(|| bad(format!("{at}: 'name' is required")))?;
                let input = b.get("input").cloned().unwrap_or(json!({}));
                calls.push(json!({"id": b["id"], "type": "function",
                                  "function": {"name": name, "arguments": input.to_string()}}));
            }
            (Some("tool_result"), "user") => {
                let id = b["tool_use_id"]
                    .as_str()
                    .ok_or_else(|| bad(format!("{at}: 'tool_use_id' is required")))?;
                let content = text_of(b.get("content").unwrap_or(&Value::Null), &at)?;
                let content =
                    if b["is_error"] == true { format!("Error: {content}") } else { content };
                out.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
            }
            (kind, role) => {
                return Err(bad(format!(
                    "{at}: content blocks of type {kind:?} are not supported in a {role} message"
                )));
            }
        }
    }
    if m.role == "assistant" {
        let mut msg = json!({"role": "assistant", "content": text});
        if !thinking.is_empty() {
            msg["reasoning_content"] = json!(thinking);
        }
        if !calls.is_empty() {
            msg["tool_calls"] = Value::Array(calls);
        }
        out.push(msg);
    } else if !text.is_empty() || out.last().is_none_or(|l| l["role"] != "tool") {
        out.push(json!({"role": "user", "content": text}));
    }
    Ok(())
}

/// An Anthropic tool (`name`, `description`, `input_schema`) as OpenAI's function tool.
fn tool(i: usize, t: &Value) -> Result<Value, ApiError> {
    if let Some(kind) = t["type"].as_str().filter(|k| *k != "custom") {
        return Err(bad(format!("tools[{i}]: server tools ({kind:?}) are not supported")));
    }
    let mut f = Map::new();
    f.insert("name".into(), t["name"].clone());
    if let Some(d) = t.get("description") {
        f.insert("description".into(), d.clone());
    }
    f.insert(
        "parameters".into(),
        t.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
    );
    Ok(json!({"type": "function", "function": f}))
}

/// A Messages API body as the equivalent OpenAI chat body (JSON bytes), or why it is not
/// a valid request.
pub fn to_openai_chat(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a valid request: {e}")))?;
    let max_tokens = b.max_tokens.ok_or_else(|| bad("'max_tokens' is required"))?;
    let mut messages = Vec::new();
    if let Some(system) = &b.system {
        let text = text_of(system, "system")?;
        messages.push(json!({"role": "system", "content": text}));
    }
    if b.messages.is_empty() {
        return Err(bad("'messages' must hold at least one message"));
    }
    for (i, m) in b.messages.into_iter().enumerate() {
        convert(i, m, &mut messages)?;
    }
    let mut out = json!({"messages": messages, "max_tokens": max_tokens, "stream": b.stream});
    if let Some(m) = b.model {
        out["model"] = json!(m);
    }
    if let Some(tools) = &b.tools {
        let tools: Result<Vec<Value>, ApiError> =
            tools.iter().enumerate().map(|(i, t)| tool(i, t)).collect();
        out["tools"] = Value::Array(tools?);
    }
    if let Some(choice) = &b.tool_choice {
        out["tool_choice"] = match choice["type"].as_str() {
            Some("auto") => json!("auto"),
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => json!({"type": "function", "function": {"name": choice["name"]}}),
            other => return Err(bad(format!("'tool_choice' of type {other:?} is not known"))),
        };
    }
    if let Some(s) = b.stop_sequences {
        out["stop"] = json!(s);
    }
    for (k, v) in
        [("temperature", b.temperature.map(Value::from)), ("top_p", b.top_p.map(Value::from))]
    {
        if let Some(v) = v {
            out[k] = v;
        }
    }
    if let Some(k) = b.top_k {
        out["top_k"] = json!(k);
    }
    if let Some(t) = b.thinking {
        out["chat_template_kwargs"] = json!({"enable_thinking": t["type"] == "enabled"});
    }
    serde_json::to_vec(&out).map_err(|e| bad(e.to_string()))
}

/// Anthropic's stop reason for an OpenAI finish reason.
pub fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "tool_calls" => "tool_use",
        "length" => "max_tokens",
        _ => "end_turn",
    }
}

fn tool_use(ticket: u64, c: &ParsedCall) -> Value {
    let input: Value = serde_json::from_str(&c.arguments).unwrap_or(json!({}));
    json!({"type": "tool_use", "id": tool_call_id(ticket, c.index), "name": c.name, "input": input})
}

/// The `message` object of request `ticket`'s whole answer.
pub fn message(
    ticket: u64,
    model: &str,
    answer: &ChatAnswer,
    finish: &str,
    usage: (u32, u32, u32),
) -> Value {
    let mut content = Vec::new();
    if !answer.reasoning.is_empty() {
        content.push(json!({"type": "thinking", "thinking": answer.reasoning, "signature": ""}));
    }
    if !answer.content.is_empty() || answer.calls.is_empty() {
        content.push(json!({"type": "text", "text": answer.content}));
    }
    content.extend(answer.calls.iter().map(|c| tool_use(ticket, c)));
    let (input, output, cached) = usage;
    json!({
        "id": format!("msg_{ticket}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(finish), "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": output,
                  "cache_read_input_tokens": cached},
    })
}

/// The kind of the content block a stream has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
}

/// Writes one answer as Anthropic's stream events: `(event name, data)`.
#[derive(Debug)]
pub struct EventWriter {
    ticket: u64,
    open: Option<Open>,
    index: usize,
}

impl EventWriter {
    /// A writer for request `ticket`.
    pub fn new(ticket: u64) -> EventWriter {
        EventWriter { ticket, open: None, index: 0 }
    }

    /// `message_start`.
    pub fn start(&self, model: &str, input_tokens: u32) -> (&'static str, Value) {
        let message = json!({
            "id": format!("msg_{}", self.ticket), "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 0},
        });
        ("message_start", json!({"type": "message_start", "message": message}))
    }

    fn close(&mut self, out: &mut Vec<(&'static str, Value)>) {
        if self.open.take().is_some() {
            out.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": self.index}),
            ));
            self.index += 1;
        }
    }

    fn block_start(&self, block: Value) -> (&'static str, Value) {
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": self.index, "content_block": block}),
        )
    }

    fn block_delta(&self, delta: Value) -> (&'static str, Value) {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": self.index, "delta": delta}),
        )
    }

    /// The events of one read piece of the answer.
    pub fn delta(&mut self, d: &Delta) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        let (kind, block, delta) =
            match d {
                Delta::Content(s) => (
                    Open::Text,
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": s}),
                ),
                Delta::Reasoning(s) => (
                    Open::Thinking,
                    json!({"type": "thinking", "thinking": ""}),
                    json!({"type": "thinking_delta", "thinking": s}),
                ),
                Delta::ToolCall(c) => {
                    self.close(&mut out);
                    let mut block = tool_use(self.ticket, c);
                    block["input"] = json!({});
                    out.push(self.block_start(block));
                    out.push(self.block_delta(
                        json!({"type": "input_json_delta", "partial_json": c.arguments}),
                    ));
                    out.push((
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": self.index}),
                    ));
                    self.index += 1;
                    return out;
                }
            };
        if self.open != Some(kind) {
            self.close(&mut out);
            out.push(self.block_start(block));
            self.open = Some(kind);
        }
        out.push(self.block_delta(delta));
        out
    }

    /// The closing events: the open block's stop, `message_delta` and `message_stop`.
    pub fn finish(&mut self, finish: &str, output_tokens: u32) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if self.index == 0 && self.open.is_none() {
            // An empty answer still has one (empty) text block.
            out.push(self.block_start(json!({"type": "text", "text": ""})));
            self.open = Some(Open::Text);
        }
        self.close(&mut out);
        out.push((
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": stop_reason(finish), "stop_sequence": null},
                   "usage": {"output_tokens": output_tokens}}),
        ));
        out.push(("message_stop", json!({"type": "message_stop"})));
        out
    }
}

#[cfg(test)]
mod tests;
