//! A chat answer read into OpenAI's message: `content`, `reasoning_content` and
//! `tool_calls`, whole or as stream deltas, with `finish_reason: "tool_calls"` when the
//! model called a tool.

use serde_json::{Value, json};

use super::shapes::Meta;
use crate::chat::{Delta, ParsedCall};

/// A tool call's id: `call_` and nine letters and digits drawn from the request's ticket
/// and the call's index (nine alphanumerics is what Mistral's templates accept).
pub fn tool_call_id(ticket: u64, index: usize) -> String {
    const ALPHABET: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    // SplitMix64 of the pair: distinct, stable, no state.
    let mut x = ticket ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (0..9)
        .map(|_| {
            let c = ALPHABET[(x % 62) as usize] as char;
            x /= 62;
            c
        })
        .collect()
}

/// A whole answer, read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatAnswer {
    /// The answer's text.
    pub content: String,
    /// The reasoning before it.
    pub reasoning: String,
    /// The tool calls.
    pub calls: Vec<ParsedCall>,
}

impl ChatAnswer {
    /// Adds what a parser read.
    pub fn add(&mut self, deltas: Vec<Delta>) {
        for d in deltas {
            match d {
                Delta::Content(s) => self.content.push_str(&s),
                Delta::Reasoning(s) => self.reasoning.push_str(&s),
                Delta::ToolCall(c) => self.calls.push(c),
            }
        }
    }

    /// The finish reason: `tool_calls` when the model called a tool and stopped on its
    /// own, else `finish`.
    pub fn finish<'a>(&self, finish: &'a str) -> &'a str {
        if !self.calls.is_empty() && finish == "stop" { "tool_calls" } else { finish }
    }
}

/// A call as OpenAI's `tool_calls[]` entry.
fn call_value(ticket: u64, c: &ParsedCall) -> Value {
    json!({
        "id": tool_call_id(ticket, c.index),
        "type": "function",
        "function": {"name": c.name, "arguments": c.arguments},
    })
}

/// The choice's `message` of a whole answer.
pub fn message(ticket: u64, a: &ChatAnswer) -> Value {
    let content =
        if a.content.is_empty() && !a.calls.is_empty() { Value::Null } else { json!(a.content) };
    let mut m = json!({"role": "assistant", "content": content});
    if !a.reasoning.is_empty() {
        m["reasoning_content"] = json!(a.reasoning);
    }
    if !a.calls.is_empty() {
        m["tool_calls"] = a.calls.iter().map(|c| call_value(ticket, c)).collect();
    }
    m
}

/// The stream chunks (serialized) of one read piece: text and reasoning deltas, and a
/// tool call as two deltas, its id and name, then its arguments.
pub fn delta_chunks(meta: &Meta, ticket: u64, d: &Delta) -> Vec<String> {
    let chunk = |delta: Value| {
        let choice = json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]);
        meta.chunk(choice).to_string()
    };
    match d {
        Delta::Content(s) => vec![meta.text_chunk(s)],
        Delta::Reasoning(s) => vec![chunk(json!({"reasoning_content": s}))],
        Delta::ToolCall(c) => {
            let mut head = call_value(ticket, c);
            head["index"] = json!(c.index);
            head["function"]["arguments"] = json!("");
            let args = json!({"index": c.index, "function": {"arguments": c.arguments}});
            vec![chunk(json!({"tool_calls": [head]})), chunk(json!({"tool_calls": [args]}))]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_ids_are_nine_alphanumerics_distinct_per_call() {
        let ids: std::collections::HashSet<String> =
            (0..1000).flat_map(|t| (0..4).map(move |i| tool_call_id(t, i))).collect();
        assert_eq!(ids.len(), 4000);
        assert!(
            ids.iter().all(|id| id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()))
        );
    }

    #[test]
    fn an_answer_with_calls_finishes_for_tool_calls_and_has_no_content() {
        let mut a = ChatAnswer::default();
        a.add(vec![
            Delta::Reasoning("think".into()),
            Delta::ToolCall(ParsedCall { index: 0, name: "f".into(), arguments: "{}".into() }),
        ]);
        assert_eq!(a.finish("stop"), "tool_calls");
        assert_eq!(a.finish("length"), "length");
        let m = message(7, &a);
        assert_eq!(m["content"], Value::Null);
        assert_eq!(m["reasoning_content"], "think");
        assert_eq!(m["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(m["tool_calls"][0]["id"], tool_call_id(7, 0));
    }
}
