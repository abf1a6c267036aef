//! The conversation a chat request carries, whatever API it came in by.

use serde_json::{Map, Value, json};

/// A call of a tool the assistant made (OpenAI's `tool_calls[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id (a `role: "tool"` message names it in `tool_call_id`).
    pub id: String,
    /// The function called.
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text (`None`: none given, as an assistant's message with only tool calls).
    pub content: Option<String>,
    /// An assistant's reasoning ("thinking") before its answer.
    pub reasoning: Option<String>,
    /// The tools an assistant's message called.
    pub tool_calls: Vec<ToolCall>,
    /// The call a `tool` message answers.
    pub tool_call_id: Option<String>,
    /// The name of the tool that answered (or of the participant).
    pub name: Option<String>,
}

impl Message {
    /// A message of `role` holding `content`.
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.into(), content: Some(content.into()), ..Message::default() }
    }

    /// The message as a template reads it: OpenAI's shape, with keys only for what is
    /// present (templates test `'tool_calls' in message`) and each call's arguments as a
    /// JSON object when they parse (templates write `arguments | tojson`).
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), json!(self.role));
        m.insert("content".into(), self.content.as_ref().map_or(Value::Null, |c| json!(c)));
        if let Some(r) = &self.reasoning {
            m.insert("reasoning_content".into(), json!(r));
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|c| {
                    let args = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!(c.arguments));
                    json!({"id": c.id, "type": "function",
                           "function": {"name": c.name, "arguments": args}})
                })
                .collect();
            m.insert("tool_calls".into(), Value::Array(calls));
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), json!(id));
        }
        if let Some(n) = &self.name {
            m.insert("name".into(), json!(n));
        }
        Value::Object(m)
    }

    /// The bytes of text this message brings (for refusing prompts too long to fit before
    /// rendering them).
    pub fn text_bytes(&self) -> usize {
        let calls: usize =
            self.tool_calls.iter().map(|c| c.id.len() + c.name.len() + c.arguments.len()).sum();
        self.role.len()
            + self.content.as_ref().map_or(0, String::len)
            + self.reasoning.as_ref().map_or(0, String::len)
            + calls
    }
}

/// What a chat template renders: the messages, the tools offered, and its options.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// The messages, oldest first.
    pub messages: Vec<Message>,
    /// The tools offered, as OpenAI's tool objects (`{"type":"function","function":{..}}`);
    /// empty: none (the template sees no `tools`).
    pub tools: Vec<Value>,
    /// Whether the text ends where the assistant's next turn begins.
    pub add_generation_prompt: bool,
    /// Further template variables (`enable_thinking`, `reasoning_effort`, ...).
    pub kwargs: Map<String, Value>,
}

impl Conversation {
    /// A conversation of `messages`, no tools, ending with the assistant's turn opened.
    pub fn new(messages: Vec<Message>) -> Conversation {
        Conversation {
            messages,
            tools: Vec::new(),
            add_generation_prompt: true,
            kwargs: Map::new(),
        }
    }

    /// The bytes of text the conversation brings.
    pub fn text_bytes(&self) -> usize {
        let tools: usize = self.tools.iter().map(|t| t.to_string().len()).sum();
        self.messages.iter().map(Message::text_bytes).sum::<usize>() + tools
    }
}
