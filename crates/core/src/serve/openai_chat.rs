//! OpenAI's chat messages and tools, read into the conversation every API shares
//! ([`crate::chat::Conversation`]): `content` as text or an array of `text` parts,
//! assistant `tool_calls` (arguments as JSON text or an object), `role: "tool"` results
//! with `tool_call_id`, `reasoning_content`, the `developer` role as `system`; `tools` as
//! function tools and `tool_choice`.

use serde::Deserialize;
use serde_json::Value;

use super::error::ApiError;
use crate::chat::{Message, ToolCall};

/// The most tools a request may offer.
pub const MAX_TOOLS: usize = 128;

/// Which tool calls the model may make.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ToolChoice {
    /// Text or tool calls, as the model likes (the default when tools are offered).
    #[default]
    Auto,
    /// No tool call: the tools are not shown to the model.
    None,
    /// At least one tool call.
    Required,
    /// A call of this function.
    Function(String),
}

/// A message's `content`: text, or parts.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts (only `text` ones are read).
    Parts(Vec<Part>),
}

/// One content part.
#[derive(Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
}

/// The text of `content` (`None` stays `None`); a part of another type than `text` is a
/// 400 naming it.
pub fn content_text(content: Option<Content>, at: &str) -> Result<Option<String>, ApiError> {
    match content {
        None => Ok(None),
        Some(Content::Text(t)) => Ok(Some(t)),
        Some(Content::Parts(parts)) => {
            let mut text = String::new();
            for p in parts {
                match (p.kind.as_str(), p.text) {
                    ("text", Some(t)) => text.push_str(&t),
                    ("text", None) => {
                        return Err(ApiError::invalid(format!("{at}: a text part needs 'text'")));
                    }
                    (kind, _) => {
                        return Err(ApiError::invalid(format!(
                            "{at}: content parts of type '{kind}' are not supported (text only)"
                        )));
                    }
                }
            }
            Ok(Some(text))
        }
    }
}

#[derive(Deserialize)]
struct Function {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize)]
struct RawCall {
    id: Option<String>,
    function: Function,
}

/// One message as OpenAI's chat API sends it.
#[derive(Deserialize)]
pub struct RawMessage {
    role: String,
    content: Option<Content>,
    name: Option<String>,
    tool_calls: Option<Vec<RawCall>>,
    tool_call_id: Option<String>,
    reasoning_content: Option<String>,
}

/// The messages of a chat body.
pub fn messages(raw: Vec<RawMessage>) -> Result<Vec<Message>, ApiError> {
    if raw.is_empty() {
        return Err(ApiError::invalid("'messages' must hold at least one message"));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, m) in raw.into_iter().enumerate() {
        let at = format!("messages[{i}]");
        // OpenAI's SDKs send their newer name of the system role.
        let role = if m.role == "developer" { "system".to_string() } else { m.role };
        if !matches!(role.as_str(), "system" | "user" | "assistant" | "tool") {
            return Err(ApiError::invalid(format!(
                "{at}: unknown role {role:?} (system, developer, user, assistant or tool)"
            )));
        }
        let mut tool_calls = Vec::new();
        for (k, c) in m.tool_calls.unwrap_or_default().into_iter().enumerate() {
            if role != "assistant" {
                return Err(ApiError::invalid(format!("{at}: only an assistant makes tool calls")));
            }
            let arguments = match c.function.arguments {
                None => "{}".to_string(),
                Some(Value::String(s)) => s,
                Some(v @ Value::Object(_)) => v.to_string(),
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "{at}.tool_calls[{k}]: 'arguments' must be JSON text or an object, not {other}"
                    )));
                }
            };
            let id = c.id.unwrap_or_else(|| format!("call_{i}_{k}"));
            tool_calls.push(ToolCall { id, name: c.function.name, arguments });
        }
        if role == "tool" && m.tool_call_id.is_none() {
            return Err(ApiError::invalid(format!("{at}: a tool message needs 'tool_call_id'")));
        }
        out.push(Message {
            role,
            content: content_text(m.content, &at)?,
            reasoning: m.reasoning_content,
            tool_calls,
            tool_call_id: m.tool_call_id,
            name: m.name,
        });
    }
    Ok(out)
}

/// `tools` checked: function tools with a name each (unique), at most [`MAX_TOOLS`].
pub fn tools(raw: Option<Vec<Value>>) -> Result<Vec<Value>, ApiError> {
    let tools = raw.unwrap_or_default();
    if tools.len() > MAX_TOOLS {
        return Err(ApiError::invalid(format!("at most {MAX_TOOLS} tools, not {}", tools.len())));
    }
    let mut names = std::collections::HashSet::new();
    for (i, t) in tools.iter().enumerate() {
        let kind = t.get("type").and_then(Value::as_str);
        if kind != Some("function") {
            return Err(ApiError::invalid(format!(
                "tools[{i}]: only tools of type 'function' are supported, not {kind:?}"
            )));
        }
        let name = t["function"].get("name").and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            return Err(ApiError::invalid(format!("tools[{i}]: 'function.name' is required")));
        }
        if let Some(p) = t["function"].get("parameters").filter(|p| !p.is_object()) {
            return Err(ApiError::invalid(format!(
                "tools[{i}]: 'function.parameters' must be a JSON schema object, not {p}"
            )));
        }
        if !names.insert(name) {
            return Err(ApiError::invalid(format!("tools[{i}]: the name {name:?} is given twice")));
        }
    }
    Ok(tools)
}

/// `tool_choice`: `"auto"`, `"none"`, `"required"` or `{"type":"function","function":
/// {"name":..}}` naming one of `tools`.
pub fn tool_choice(raw: Option<Value>, tools: &[Value]) -> Result<ToolChoice, ApiError> {
    let choice = match raw {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(ApiError::invalid(format!(
                    "'tool_choice' is auto, none, required or a function, not {other:?}"
                )));
            }
        },
        Some(v) => match v["function"].get("name").and_then(Value::as_str) {
            Some(name) => ToolChoice::Function(name.to_string()),
            None => return Err(ApiError::invalid("'tool_choice' names no function")),
        },
    };
    let named = |n: &str| tools.iter().any(|t| t["function"]["name"] == n);
    match &choice {
        ToolChoice::Function(n) if !named(n) => {
            Err(ApiError::invalid(format!("'tool_choice' names {n:?}, which is not in 'tools'")))
        }
        ToolChoice::Required | ToolChoice::Function(_) if tools.is_empty() => {
            Err(ApiError::invalid("'tool_choice' asks for a tool call but no 'tools' are given"))
        }
        _ => Ok(choice),
    }
}
