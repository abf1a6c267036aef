//! OpenAI's Responses API (`POST /v1/responses`) over the same request as the chat API:
//! a body is read into an OpenAI chat body ([`to_openai_chat`]; `input` as text or items:
//! messages with `input_text` / `output_text` parts, `function_call` and
//! `function_call_output` items; `instructions` as the system message; flat function
//! tools; `text.format` as `response_format`) and judged by
//! [`super::params::parse_chat`]. The answer leaves as a `response`
//! object whole, or streamed as its events ([`EventWriter`]). The server keeps no state:
//! `previous_response_id` is refused, and each request carries its whole conversation.

use serde::Deserialize;
use serde_json::{Value, json};

use super::chat_answer::{ChatAnswer, tool_call_id};
use super::error::ApiError;
use super::params::UNSUPPORTED;
use crate::chat::{Delta, ParsedCall};

#[derive(Deserialize)]
struct Body {
    model: Option<String>,
    input: Value,
    instructions: Option<String>,
    tools: Option<Vec<Value>>,
    tool_choice: Option<Value>,
    max_output_tokens: Option<u64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    #[serde(default)]
    stream: bool,
    previous_response_id: Option<String>,
    text: Option<Value>,
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::invalid(m)
}

/// The text of a message item's `content`: a string, or `input_text` / `output_text`
/// parts.
fn content_text(v: &Value, at: &str) -> Result<String, ApiError> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = String::new();
            for (k, p) in parts.iter().enumerate() {
                match p["type"].as_str() {
                    Some("input_text" | "output_text" | "text") => {
                        out.push_str(p["text"].as_str().unwrap_or(""));
                    }
                    other => {
                        return Err(bad(format!(
                            "{at}.content[{k}]: content parts of type {other:?} are not supported (text only)"
                        )));
                    }
                }
            }
            Ok(out)
        }
        _ => Err(bad(format!("{at}: 'content' must be text or an array of parts"))),
    }
}

/// `input` as OpenAI chat messages (after `instructions`' system message).
fn messages(input: &Value, out: &mut Vec<Value>) -> Result<(), ApiError> {
    let items = match input {
        Value::String(s) => {
            out.push(json!({"role": "user", "content": s}));
            return Ok(());
        }
        Value::Array(items) => items,
        _ => return Err(bad("'input' must be text or an array of items")),
    };
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        match item["type"].as_str() {
            None | Some("message") => {
                let role = item["role"].as_str().unwrap_or("");
                if !matches!(role, "user" | "system" | "developer" | "assistant") {
                    return Err(bad(format!("{at}: unknown role {role:?}")));
                }
                let text = content_text(&item["content"], &at)?;
                // Consecutive calls of one turn join the assistant message before them.
                out.push(json!({"role": role, "content": text}));
            }
            Some("function_call") => {
                let call = json!({"id": item["call_id"], "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]}});
                match out.last_mut() {
                    Some(last) if last["role"] == "assistant" => {
                        let calls = last["tool_calls"].as_array().cloned().unwrap_or_default();
                        let mut calls = calls;
                        calls.push(call);
                        last["tool_calls"] = Value::Array(calls);
                    }
                    _ => out
                        .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
                }
            }
            Some("function_call_output") => {
                let output = match &item["output"] {
                    Value::String(s) => s.clone(),
                    other => content_text(other, &at)?,
                };
                out.push(
                    json!({"role": "tool", "tool_call_id": item["call_id"], "content": output}),
                );
            }
            Some("reasoning") => {}
            Some(other) => {
                return Err(bad(format!("{at}: items of type {other:?} are not supported")));
            }
        }
    }
    Ok(())
}

/// A Responses body as the equivalent OpenAI chat body (JSON bytes), or why it is not a
/// valid request here.
pub fn to_openai_chat(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let b: Body = serde_json::from_slice(body)
        .map_err(|e| bad(format!("the body is not a valid request: {e}")))?;
    if b.previous_response_id.is_some() {
        return Err(bad(
            "'previous_response_id' is not supported: this server keeps no responses; send \
             the whole conversation in 'input'",
        )
        .because(UNSUPPORTED));
    }
    let format = b.text.as_ref().map(|t| &t["format"]);
    let response_format = match format.and_then(|f| f["type"].as_str()) {
        None | Some("text") => None,
        Some("json_object") => Some(json!({"type": "json_object"})),
        Some("json_schema") => Some(json!({"type": "json_schema",
            "json_schema": {"schema": format.map(|f| f["schema"].clone())}})),
        Some(kind) => return Err(bad(format!("'text.format' of type '{kind}' is not known"))),
    };
    let mut msgs = Vec::new();
    if let Some(i) = &b.instructions {
        msgs.push(json!({"role": "system", "content": i}));
    }
    messages(&b.input, &mut msgs)?;
    let mut out = json!({"messages": msgs, "stream": b.stream});
    if let Some(f) = response_format {
        out["response_format"] = f;
    }
    if let Some(m) = b.model {
        out["model"] = json!(m);
    }
    if let Some(n) = b.max_output_tokens {
        out["max_tokens"] = json!(n);
    }
    if let Some(tools) = b.tools {
        let mut converted = Vec::new();
        for (i, t) in tools.iter().enumerate() {
            if t["type"] != "function" {
                return Err(bad(format!(
                    "tools[{i}]: only function tools are supported, not {}",
                    t["type"]
                )));
            }
            let mut f = json!({"name": t["name"],
                               "parameters": t.get("parameters").cloned().unwrap_or(json!({"type": "object"}))});
            if let Some(d) = t.get("description") {
                f["description"] = d.clone();
            }
            converted.push(json!({"type": "function", "function": f}));
        }
        out["tools"] = Value::Array(converted);
    }
    if let Some(c) = b.tool_choice {
        out["tool_choice"] = match c {
            Value::String(s) => json!(s),
            v => json!({"type": "function", "function": {"name": v["name"]}}),
        };
    }
    for (k, v) in [("temperature", b.temperature), ("top_p", b.top_p)] {
        if let Some(v) = v {
            out[k] = json!(v);
        }
    }
    serde_json::to_vec(&out).map_err(|e| bad(e.to_string()))
}

/// What every response object of one request repeats.
#[derive(Debug, Clone)]
pub struct ResponseMeta {
    /// The request's ticket.
    pub ticket: u64,
    /// Unix seconds at arrival.
    pub created: u64,
    /// The model's name.
    pub model: String,
}

impl ResponseMeta {
    fn id(&self) -> String {
        format!("resp_{}", self.ticket)
    }

    /// The `response` object in `status` with `output` and `usage` (input, output, cached).
    pub fn response(
        &self,
        status: &str,
        output: Vec<Value>,
        finish: &str,
        usage: (u32, u32, u32),
    ) -> Value {
        let (input, out, cached) = usage;
        let incomplete = (finish == "length").then(|| json!({"reason": "max_output_tokens"}));
        json!({
            "id": self.id(), "object": "response", "created_at": self.created, "model": self.model,
            "status": status, "output": output, "error": null, "incomplete_details": incomplete,
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}},
            "usage": {"input_tokens": input, "output_tokens": out, "total_tokens": input + out,
                      "input_tokens_details": {"cached_tokens": cached},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        })
    }

    fn item_id(&self, kind: &str, n: usize) -> String {
        format!("{kind}_{}_{n}", self.ticket)
    }

    fn call_item(&self, c: &ParsedCall, status: &str) -> Value {
        json!({"type": "function_call", "id": self.item_id("fc", c.index),
               "call_id": tool_call_id(self.ticket, c.index), "name": c.name,
               "arguments": c.arguments, "status": status})
    }

    /// The `output` items of a whole answer: reasoning, the message, the calls.
    pub fn output(&self, a: &ChatAnswer) -> Vec<Value> {
        let mut out = Vec::new();
        if !a.reasoning.is_empty() {
            out.push(json!({"type": "reasoning", "id": self.item_id("rs", 0), "summary": [],
                            "content": [{"type": "reasoning_text", "text": a.reasoning}]}));
        }
        if !a.content.is_empty() || a.calls.is_empty() {
            out.push(json!({"type": "message", "id": self.item_id("msg", 0), "status": "completed",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": a.content, "annotations": []}]}));
        }
        out.extend(a.calls.iter().map(|c| self.call_item(c, "completed")));
        out
    }
}

/// The item a stream has open: its kind, id, index and text so far.
#[derive(Debug)]
struct OpenItem {
    reasoning: bool,
    id: String,
    index: usize,
    text: String,
}

/// Writes one answer as the Responses API's stream events: `(event type, data)`, each
/// data carrying its `type` and `sequence_number`.
#[derive(Debug)]
pub struct EventWriter {
    meta: ResponseMeta,
    seq: u64,
    open: Option<OpenItem>,
    items: Vec<Value>,
}

impl EventWriter {
    /// A writer for the response `meta` describes.
    pub fn new(meta: ResponseMeta) -> EventWriter {
        EventWriter { meta, seq: 0, open: None, items: Vec::new() }
    }

    fn event(&mut self, kind: &'static str, mut data: Value) -> (&'static str, Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        (kind, data)
    }

    /// `response.created` and `response.in_progress`.
    pub fn start(&mut self) -> Vec<(&'static str, Value)> {
        let r = self.meta.response("in_progress", Vec::new(), "stop", (0, 0, 0));
        vec![
            self.event("response.created", json!({"response": r.clone()})),
            self.event("response.in_progress", json!({"response": r})),
        ]
    }

    fn close(&mut self, out: &mut Vec<(&'static str, Value)>) {
        let Some(item) = self.open.take() else { return };
        let (id, index, text) = (item.id, item.index, item.text);
        let done = if item.reasoning {
            out.push(self.event(
                "response.reasoning_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
            ));
            json!({"type": "reasoning", "id": id, "summary": [],
                   "content": [{"type": "reasoning_text", "text": text}]})
        } else {
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            out.push(self.event(
                "response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text}),
            ));
            out.push(self.event(
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            ));
            json!({"type": "message", "id": id, "status": "completed", "role": "assistant",
                   "content": [part]})
        };
        out.push(
            self.event("response.output_item.done", json!({"output_index": index, "item": done})),
        );
        self.items.push(done);
    }

    fn open(&mut self, reasoning: bool, out: &mut Vec<(&'static str, Value)>) {
        let index = self.items.len();
        let id = self.meta.item_id(if reasoning { "rs" } else { "msg" }, index);
        let item = if reasoning {
            json!({"type": "reasoning", "id": id, "summary": []})
        } else {
            json!({"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []})
        };
        out.push(
            self.event("response.output_item.added", json!({"output_index": index, "item": item})),
        );
        if !reasoning {
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            out.push(self.event(
                "response.content_part.added",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            ));
        }
        self.open = Some(OpenItem { reasoning, id, index, text: String::new() });
    }

    /// The events of one read piece of the answer.
    pub fn delta(&mut self, d: &Delta) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        let (reasoning, text) = match d {
            Delta::Content(s) => (false, s),
            Delta::Reasoning(s) => (true, s),
            Delta::ToolCall(c) => {
                self.close(&mut out);
                let index = self.items.len();
                let added = self.meta.call_item(
                    &ParsedCall { arguments: String::new(), ..c.clone() },
                    "in_progress",
                );
                let done = self.meta.call_item(c, "completed");
                let id = done["id"].clone();
                out.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": added}),
                ));
                out.push(self.event(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": index, "delta": c.arguments}),
                ));
                out.push(self.event(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": index, "arguments": c.arguments}),
                ));
                out.push(self.event(
                    "response.output_item.done",
                    json!({"output_index": index, "item": done}),
                ));
                self.items.push(done);
                return out;
            }
        };
        if self.open.as_ref().is_none_or(|o| o.reasoning != reasoning) {
            self.close(&mut out);
            self.open(reasoning, &mut out);
        }
        let (id, index) = {
            let o = self.open.as_mut().expect("just opened");
            o.text.push_str(text);
            (o.id.clone(), o.index)
        };
        let kind =
            if reasoning { "response.reasoning_text.delta" } else { "response.output_text.delta" };
        out.push(self.event(
            kind,
            json!({"item_id": id, "output_index": index, "content_index": 0, "delta": text}),
        ));
        out
    }

    /// The closing events: the open item's, then `response.completed` (or
    /// `response.incomplete` when the answer ran out of tokens) with every item.
    pub fn finish(&mut self, finish: &str, usage: (u32, u32, u32)) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if self.items.is_empty() && self.open.is_none() {
            self.open(false, &mut out);
        }
        self.close(&mut out);
        let (status, kind) = if finish == "length" {
            ("incomplete", "response.incomplete")
        } else {
            ("completed", "response.completed")
        };
        let r = self.meta.response(status, self.items.clone(), finish, usage);
        out.push(self.event(kind, json!({"response": r})));
        out
    }
}

#[cfg(test)]
mod tests;
