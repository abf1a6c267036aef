//! The model's answer read back into what the APIs return: reasoning ("thinking") apart
//! from the content, and tool calls in the format the model's template taught it.
//!
//! [`OutputParser`] reads the answer as it streams, piece by piece, and gives
//! [`Delta`]s: content and reasoning as soon as they cannot be the start of a marker,
//! and each tool call whole once it closes and parses. A call the model writes badly comes
//! back as content, never as an error. Reading a whole answer is pushing it in one piece.
//!
//! Formats ([`ToolFormat`], picked from the template's text):
//! - Hermes / Qwen: `<tool_call>{"name": .., "arguments": {..}}</tool_call>`, any number;
//!   small Qwen models often leave the tags out, so an answer that is one such JSON object
//!   (bare or in a ```` ```json ```` fence) naming an offered tool is a call too;
//! - Llama 3.x: the whole answer one JSON object `{"name": .., "parameters": {..}}`
//!   (optionally after `<|python_tag|>`);
//! - Mistral: `[TOOL_CALLS]` then a JSON array of `{"name", "arguments"}`, or
//!   `[TOOL_CALLS]name[ARGS]{..}` repeated (newer templates);
//! - gpt-oss's harmony: channels and recipients in message headers (`super::harmony`),
//!   read whether or not tools were offered (its reasoning is a channel).

use serde_json::Value;

/// The markers the parser reads that some vocabularies hold as control tokens (printed by
/// [`crate::model::tokenizer::Tokenizer::print_controls`] so the answer's text has them).
pub const MARKERS: [&str; 14] = [
    "<tool_call>",
    "</tool_call>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|python_tag|>",
    "<think>",
    "</think>",
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|constrain|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
];

/// How a model writes tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    /// `<tool_call>` JSON `</tool_call>` (Hermes, Qwen 2.5 and 3).
    Hermes,
    /// The answer is one JSON object with `name` and `parameters` (Llama 3.x).
    Llama3Json,
    /// `[TOOL_CALLS]` (Mistral).
    Mistral,
    /// gpt-oss's harmony messages (`to=functions.NAME`).
    Harmony,
    /// None this build reads: the answer is content.
    None,
}

impl ToolFormat {
    /// The format a chat template teaches, read from its text.
    pub fn of_template(template: &str) -> ToolFormat {
        if template.contains("<|channel|>") {
            ToolFormat::Harmony
        } else if template.contains("<tool_call>") {
            ToolFormat::Hermes
        } else if template.contains("[TOOL_CALLS]") {
            ToolFormat::Mistral
        } else if template.contains("<|start_header_id|>") && template.contains("parameters") {
            ToolFormat::Llama3Json
        } else {
            ToolFormat::None
        }
    }

    /// A stable name (`hermes`, `llama3_json`, `mistral`, `none`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Hermes => "hermes",
            ToolFormat::Llama3Json => "llama3_json",
            ToolFormat::Mistral => "mistral",
            ToolFormat::Harmony => "harmony",
            ToolFormat::None => "none",
        }
    }
}

pub use super::delta::{Delta, ParsedCall};

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";
const HERMES_OPEN: &str = "<tool_call>";
const HERMES_CLOSE: &str = "</tool_call>";
const MISTRAL_OPEN: &str = "[TOOL_CALLS]";
const MISTRAL_ARGS: &str = "[ARGS]";
const PYTHON_TAG: &str = "<|python_tag|>";
const FENCE: &str = "```";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing read yet: the answer may open with reasoning or a JSON call.
    Start,
    /// Inside the reasoning.
    Thinking,
    /// In the answer's text.
    Content,
    /// Inside a `<tool_call>` block.
    HermesCall,
    /// After `[TOOL_CALLS]`: the rest is calls.
    MistralCalls,
    /// The answer may be one JSON call: held to the end.
    JsonCall,
}

/// Reads one answer as it streams.
#[derive(Debug, Clone)]
pub struct OutputParser {
    format: ToolFormat,
    /// Whether `<think>` blocks are reasoning (the template writes them).
    reasoning: bool,
    state: State,
    buf: String,
    calls: usize,
    /// Whether content was given yet (leading blank lines after reasoning are dropped).
    content_seen: bool,
    /// The tools offered: a bare JSON answer is a call only when it names one.
    names: Vec<String>,
    /// The harmony reader, which takes the whole answer (gpt-oss).
    harmony: Option<super::harmony::HarmonyParser>,
}

/// The length of the longest suffix of `text` that is a proper prefix of `marker` (held
/// back: the marker may be completed by the next piece).
fn partial_suffix(text: &str, marker: &str) -> usize {
    (1..marker.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && marker.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

/// A call object's name and arguments (`arguments` or `parameters`, an object or JSON
/// text of one).
fn call_of(v: &Value) -> Option<(String, String)> {
    let name = v.get("name")?.as_str()?.to_string();
    let args = v.get("arguments").or_else(|| v.get("parameters")).cloned().unwrap_or(Value::Null);
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::String(s) => serde_json::from_str::<Value>(&s).ok().filter(Value::is_object)?,
        v @ Value::Object(_) => v,
        _ => return None,
    };
    (!name.is_empty()).then(|| (name, args.to_string()))
}

impl OutputParser {
    /// A parser of answers in `format`; `reasoning`: the template writes `<think>`
    /// blocks; `thinking_open`: the prompt ends inside one (the template opened it).
    pub fn new(format: ToolFormat, reasoning: bool, thinking_open: bool) -> OutputParser {
        let state = if reasoning && thinking_open { State::Thinking } else { State::Start };
        OutputParser {
            format,
            reasoning,
            state,
            buf: String::new(),
            calls: 0,
            content_seen: false,
            names: Vec::new(),
            harmony: None,
        }
    }

    /// A parser of gpt-oss's harmony answers; `tools`: messages to functions are calls.
    pub fn harmony(tools: bool) -> OutputParser {
        let mut p = OutputParser::new(ToolFormat::Harmony, false, false);
        p.harmony = Some(super::harmony::HarmonyParser::new(tools));
        p
    }

    /// The parser, reading a bare JSON answer as a call when it names one of `names` (the
    /// tools offered).
    pub fn with_tool_names(mut self, names: Vec<String>) -> OutputParser {
        self.names = names;
        self
    }

    /// A parser for a template's answers to `prompt_text` (the rendered prompt); tool
    /// calls are read only when `tools` were offered.
    pub fn for_template(template: &str, prompt_text: &str, tools: bool) -> OutputParser {
        if ToolFormat::of_template(template) == ToolFormat::Harmony {
            return OutputParser::harmony(tools);
        }
        let reasoning = template.contains(THINK_OPEN);
        let open = prompt_text.trim_end().ends_with(THINK_OPEN);
        let format = if tools { ToolFormat::of_template(template) } else { ToolFormat::None };
        OutputParser::new(format, reasoning, open)
    }

    /// How many tool calls were read so far.
    pub fn calls(&self) -> usize {
        self.harmony.as_ref().map_or(self.calls, |h| h.calls())
    }

    fn content(&mut self, text: &str, out: &mut Vec<Delta>) {
        let text = if self.content_seen { text } else { text.trim_start() };
        if !text.is_empty() {
            self.content_seen = true;
            out.push(Delta::Content(text.to_string()));
        }
    }

    fn call(&mut self, name: String, arguments: String, out: &mut Vec<Delta>) {
        out.push(Delta::ToolCall(ParsedCall { index: self.calls, name, arguments }));
        self.calls += 1;
    }

    /// Reads the next piece of the answer.
    pub fn push(&mut self, piece: &str) -> Vec<Delta> {
        let mut out = Vec::new();
        if let Some(h) = &mut self.harmony {
            h.step(piece, false, &mut out);
            return out;
        }
        self.buf.push_str(piece);
        self.step(false, &mut out);
        out
    }

    /// The answer ended: what was held back, read as it stands.
    pub fn finish(&mut self) -> Vec<Delta> {
        let mut out = Vec::new();
        if let Some(h) = &mut self.harmony {
            h.step("", true, &mut out);
            return out;
        }
        self.step(true, &mut out);
        out
    }

    fn step(&mut self, end: bool, out: &mut Vec<Delta>) {
        loop {
            let before = (self.state, self.buf.len());
            match self.state {
                State::Start => self.start(end),
                State::Thinking => self.thinking(end, out),
                State::Content => self.in_content(end, out),
                State::HermesCall => self.hermes(end, out),
                State::MistralCalls => {
                    if end {
                        self.mistral(out);
                    }
                }
                State::JsonCall => {
                    if end {
                        self.json_call(out);
                    }
                }
            }
            if (self.state, self.buf.len()) == before {
                return;
            }
        }
    }

    fn start(&mut self, end: bool) {
        let t = self.buf.trim_start();
        if self.reasoning && t.starts_with(THINK_OPEN) {
            let at = self.buf.len() - t.len() + THINK_OPEN.len();
            self.buf.drain(..at);
            self.state = State::Thinking;
        } else if self.bare_json()
            && (t.starts_with('{') || t.starts_with(PYTHON_TAG) || t.starts_with(FENCE))
        {
            self.state = State::JsonCall;
        } else if end
            || !(t.is_empty()
                || (self.reasoning && THINK_OPEN.starts_with(t))
                || (self.bare_json() && (PYTHON_TAG.starts_with(t) || FENCE.starts_with(t))))
        {
            self.state = State::Content;
        }
    }

    /// Whether an answer that is one JSON object may be a call.
    fn bare_json(&self) -> bool {
        match self.format {
            ToolFormat::Llama3Json => true,
            ToolFormat::Hermes => !self.names.is_empty(),
            _ => false,
        }
    }

    /// Whether a call read from a bare answer names an offered tool (any name when the
    /// offered tools are not known).
    fn offered(&self, name: &str) -> bool {
        self.names.is_empty() || self.names.iter().any(|n| n == name)
    }

    fn thinking(&mut self, end: bool, out: &mut Vec<Delta>) {
        if let Some(at) = self.buf.find(THINK_CLOSE) {
            let text: String = self.buf.drain(..at + THINK_CLOSE.len()).collect();
            let text = &text[..at];
            if !text.is_empty() {
                out.push(Delta::Reasoning(text.to_string()));
            }
            self.state = State::Content;
            return;
        }
        let keep = if end { 0 } else { partial_suffix(&self.buf, THINK_CLOSE) };
        let text: String = self.buf.drain(..self.buf.len() - keep).collect();
        if !text.is_empty() {
            out.push(Delta::Reasoning(text));
        }
    }

    fn in_content(&mut self, end: bool, out: &mut Vec<Delta>) {
        let marker = match self.format {
            ToolFormat::Hermes => HERMES_OPEN,
            ToolFormat::Mistral => MISTRAL_OPEN,
            _ => {
                let text = std::mem::take(&mut self.buf);
                self.content(&text, out);
                return;
            }
        };
        if let Some(at) = self.buf.find(marker) {
            let text: String = self.buf.drain(..at + marker.len()).collect();
            self.content(&text[..at], out);
            self.state = match self.format {
                ToolFormat::Hermes => State::HermesCall,
                _ => State::MistralCalls,
            };
            return;
        }
        let keep = if end { 0 } else { partial_suffix(&self.buf, marker) };
        let text: String = self.buf.drain(..self.buf.len() - keep).collect();
        self.content(&text, out);
    }

    fn hermes(&mut self, end: bool, out: &mut Vec<Delta>) {
        let (body, consumed) = match self.buf.find(HERMES_CLOSE) {
            Some(at) => (self.buf[..at].to_string(), at + HERMES_CLOSE.len()),
            None if end => (self.buf.clone(), self.buf.len()),
            None => return,
        };
        self.buf.drain(..consumed);
        self.state = State::Content;
        match serde_json::from_str::<Value>(body.trim()).ok().as_ref().and_then(call_of) {
            Some((name, args)) => self.call(name, args, out),
            None => {
                let close = if consumed > body.len() { HERMES_CLOSE } else { "" };
                self.content(&format!("{HERMES_OPEN}{body}{close}"), out);
            }
        }
    }

    fn mistral(&mut self, out: &mut Vec<Delta>) {
        let body = std::mem::take(&mut self.buf);
        self.state = State::Content;
        let mut calls = Vec::new();
        let parsed = if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(body.trim()) {
            items.iter().all(|v| call_of(v).map(|c| calls.push(c)).is_some())
        } else {
            // `name[ARGS]{..}`, each call after its own [TOOL_CALLS].
            body.split(MISTRAL_OPEN).all(|one| {
                let Some((name, args)) = one.split_once(MISTRAL_ARGS) else { return false };
                let args = serde_json::from_str::<Value>(args.trim()).ok().filter(Value::is_object);
                let name = name.trim();
                match args {
                    Some(a) if !name.is_empty() => {
                        calls.push((name.to_string(), a.to_string()));
                        true
                    }
                    _ => false,
                }
            })
        };
        if parsed && !calls.is_empty() {
            for (name, args) in calls {
                self.call(name, args, out);
            }
        } else {
            self.content(&format!("{MISTRAL_OPEN}{body}"), out);
        }
    }

    fn json_call(&mut self, out: &mut Vec<Delta>) {
        let body = std::mem::take(&mut self.buf);
        self.state = State::Content;
        let json = body.trim().strip_prefix(PYTHON_TAG).unwrap_or(body.trim()).trim();
        let json = json
            .strip_prefix(FENCE)
            .and_then(|j| j.strip_suffix("```"))
            .map(|j| j.trim_start_matches("json").trim())
            .unwrap_or(json);
        match serde_json::from_str::<Value>(json).ok().as_ref().and_then(call_of) {
            Some((name, args)) if self.offered(&name) => self.call(name, args, out),
            _ => self.content(&body, out),
        }
    }
}

/// Reads a whole answer.
pub fn parse_whole(parser: &mut OutputParser, text: &str) -> Vec<Delta> {
    let mut out = parser.push(text);
    out.extend(parser.finish());
    out
}

#[cfg(test)]
mod tests;
