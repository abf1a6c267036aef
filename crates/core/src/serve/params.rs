//! Request bodies of `/v1/chat/completions` and `/v1/completions`, parsed and judged:
//! unknown fields are ignored (as OpenAI does), every field that is present must be in
//! range, and what is left out takes the server's defaults. A known field that would
//! change the output but is not implemented (`logit_bias`, `presence_penalty`,
//! `frequency_penalty`) is refused with a 400 `unsupported_field` unless its value is neutral, never
//! silently ignored. The result names the prompt (a conversation for the chat template,
//! with its tools; text; or token ids) and everything else a session's request needs;
//! [`Parsed::request`] makes that request once the prompt is tokenized.

use serde::Deserialize;
use serde::de::IgnoredAny;

use super::error::ApiError;
use super::openai_chat::{self, RawMessage, ToolChoice};
use crate::chat::Conversation;
use crate::orchestrator::requests::{MAX_STOP_BYTES, MAX_STOPS, Request};
use crate::wire::SamplingPolicy;

/// The most `top_logprobs` a request may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: u32 = crate::wire::logprobs::MAX_TOP_LOGPROBS;

/// What a request leaves out, the server decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Defaults {
    /// Sampling when the request gives no temperature (the server's `--sampling` flags).
    pub sampling: SamplingPolicy,
    /// Tokens to generate at most (`None`: until EOS or the context is full).
    pub max_tokens: Option<u32>,
    /// The context: positions per sequence.
    pub n_ctx: u32,
}

/// What to feed the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// A chat: the conversation (and tools) for the model's chat template.
    Chat(Conversation),
    /// Text (a beginning-of-sequence token is added as the model asks).
    Text(String),
    /// Token ids, as given.
    Tokens(Vec<u32>),
}

/// A judged request body.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The model the client named (echoed; one model is served).
    pub model: Option<String>,
    /// The prompt.
    pub prompt: Prompt,
    /// Tokens to generate at most (`None`: what the context leaves).
    pub max_tokens: Option<u32>,
    /// How tokens are picked.
    pub sampling: SamplingPolicy,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Server-sent events instead of one response.
    pub stream: bool,
    /// A usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// Top log-probabilities per token asked for (`None`: none).
    pub logprobs: Option<u32>,
    /// Whether the session may speculate for it (`"speculative": false` opts out).
    pub speculative: bool,
    /// Whether it may start from a cached prefix (`"cache_prompt": false` opts out).
    pub cache_prompt: bool,
    /// A completion that echoes its prompt's text before its own (`echo`).
    pub echo: bool,
    /// Which tool calls the model may make (a chat with `tools`).
    pub tool_choice: ToolChoice,
    /// The JSON schema the output must follow (`response_format`), enforced by
    /// constrained sampling.
    pub format: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// Fields both endpoints share.
#[derive(Deserialize)]
struct Common {
    model: Option<String>,
    max_tokens: Option<u32>,
    max_completion_tokens: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<u32>,
    seed: Option<u64>,
    stop: Option<Stop>,
    n: Option<u32>,
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    speculative: Option<bool>,
    /// llama-server's per-request opt-out of the prefix cache.
    cache_prompt: Option<bool>,
    #[allow(dead_code)]
    user: Option<IgnoredAny>,
    logit_bias: Option<serde_json::Map<String, serde_json::Value>>,
    presence_penalty: Option<f32>,
    frequency_penalty: Option<f32>,
    response_format: Option<ResponseFormat>,
}

#[derive(Deserialize)]
struct ResponseFormat {
    #[serde(rename = "type")]
    kind: String,
    json_schema: Option<JsonSchemaFormat>,
}

#[derive(Deserialize)]
struct JsonSchemaFormat {
    schema: Option<serde_json::Value>,
}

/// The JSON schema a `response_format` asks the output to follow: none for `text`, any
/// JSON object for `json_object`, the given schema for `json_schema`.
fn format_schema(f: Option<&ResponseFormat>) -> Result<Option<serde_json::Value>, ApiError> {
    match f.map(|f| (f.kind.as_str(), f)) {
        None | Some(("text", _)) => Ok(None),
        Some(("json_object", _)) => Ok(Some(serde_json::json!({"type": "object"}))),
        Some(("json_schema", f)) => match f.json_schema.as_ref().and_then(|j| j.schema.clone()) {
            Some(s @ (serde_json::Value::Object(_) | serde_json::Value::Bool(true))) => Ok(Some(s)),
            _ => Err(ApiError::invalid(
                "'response_format.json_schema.schema' must be a JSON schema object",
            )),
        },
        Some((other, _)) => Err(ApiError::invalid(format!(
            "'response_format' is text, json_object or json_schema, not {other:?}"
        ))),
    }
}

#[derive(Deserialize)]
struct ChatBody {
    messages: Vec<RawMessage>,
    tools: Option<Vec<serde_json::Value>>,
    tool_choice: Option<serde_json::Value>,
    /// Further template variables (`enable_thinking`), as llama-server and vLLM take them.
    chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    logprobs: bool,
    top_logprobs: Option<u32>,
    #[serde(flatten)]
    common: Common,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum PromptField {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
    TokenLists(Vec<Vec<u32>>),
}

#[derive(Deserialize)]
struct CompletionBody {
    prompt: Option<PromptField>,
    tools: Option<Vec<IgnoredAny>>,
    logprobs: Option<u32>,
    #[serde(default)]
    echo: bool,
    #[serde(flatten)]
    common: Common,
}

fn json_error(e: serde_json::Error) -> ApiError {
    ApiError::invalid(format!("the body is not a valid request: {e}"))
}

/// A `/v1/chat/completions` body.
pub fn parse_chat(body: &[u8], defaults: &Defaults, fresh_seed: u64) -> Result<Parsed, ApiError> {
    let body: ChatBody = serde_json::from_slice(body).map_err(json_error)?;
    let messages = openai_chat::messages(body.messages)?;
    let tools = openai_chat::tools(body.tools)?;
    let tool_choice = openai_chat::tool_choice(body.tool_choice, &tools)?;
    let mut conv = Conversation::new(messages);
    if tool_choice != ToolChoice::None {
        conv.tools = tools;
    }
    conv.kwargs = body.chat_template_kwargs.unwrap_or_default();
    let logprobs = match (body.logprobs, body.top_logprobs) {
        (false, Some(_)) => {
            return Err(ApiError::invalid("'top_logprobs' needs 'logprobs': true"));
        }
        (false, None) => None,
        (true, k) => Some(k.unwrap_or(0)),
    };
    let parsed = common(body.common, Prompt::Chat(conv), logprobs, defaults, fresh_seed)?;
    let forces = matches!(tool_choice, ToolChoice::Required | ToolChoice::Function(_));
    if forces && parsed.format.is_some() {
        return Err(ApiError::invalid(
            "a 'tool_choice' that forces a call and a 'response_format' cannot both constrain \
             the answer",
        ));
    }
    Ok(Parsed { tool_choice, ..parsed })
}

/// A `/v1/completions` body.
pub fn parse_completion(
    body: &[u8],
    defaults: &Defaults,
    fresh_seed: u64,
) -> Result<Parsed, ApiError> {
    let body: CompletionBody = serde_json::from_slice(body).map_err(json_error)?;
    if body.tools.as_ref().is_some_and(|t| !t.is_empty()) {
        let m = "'tools' need a conversation: send them to /v1/chat/completions";
        return Err(ApiError::invalid(m).because(UNSUPPORTED));
    }
    let one = || ApiError::invalid("one prompt per request ('prompt' lists more than one)");
    let prompt = match body.prompt {
        None => return Err(ApiError::invalid("'prompt' is required")),
        Some(PromptField::Text(t)) => Prompt::Text(t),
        Some(PromptField::Tokens(t)) => Prompt::Tokens(t),
        Some(PromptField::Texts(mut t)) if t.len() == 1 => Prompt::Text(t.remove(0)),
        Some(PromptField::TokenLists(mut t)) if t.len() == 1 => Prompt::Tokens(t.remove(0)),
        Some(_) => return Err(one()),
    };
    if body.echo && body.logprobs.is_some() {
        return Err(ApiError::invalid(
            "'echo' with 'logprobs' is not supported: the prompt's tokens get no \
             log-probabilities here",
        )
        .because(UNSUPPORTED));
    }
    let parsed = common(body.common, prompt, body.logprobs, defaults, fresh_seed)?;
    Ok(Parsed { echo: body.echo, ..parsed })
}

/// The reason of a refused field that would change the output but is not implemented.
pub const UNSUPPORTED: &str = "unsupported_field";

/// Refuses what would change the output but is not implemented, unless it is neutral:
/// penalties of 0, an empty `logit_bias`.
fn refuse_unsupported(c: &Common) -> Result<(), ApiError> {
    let refuse = |m: String| Err(ApiError::invalid(m).because(UNSUPPORTED));
    for (name, value) in
        [("presence_penalty", c.presence_penalty), ("frequency_penalty", c.frequency_penalty)]
    {
        if let Some(v) = value.filter(|v| *v != 0.0) {
            return refuse(format!("'{name}' is not supported: only 0 is accepted, not {v}"));
        }
    }
    if c.logit_bias.as_ref().is_some_and(|b| !b.is_empty()) {
        return refuse("'logit_bias' is not supported: only an empty map is accepted".into());
    }
    Ok(())
}

fn common(
    mut c: Common,
    prompt: Prompt,
    logprobs: Option<u32>,
    defaults: &Defaults,
    fresh_seed: u64,
) -> Result<Parsed, ApiError> {
    if let Some(n) = c.n.filter(|n| *n != 1) {
        return Err(ApiError::invalid(format!("'n' must be 1 (one choice per request), not {n}")));
    }
    refuse_unsupported(&c)?;
    if let Some(k) = logprobs.filter(|k| *k > MAX_TOP_LOGPROBS) {
        return Err(ApiError::invalid(format!(
            "at most {MAX_TOP_LOGPROBS} top log-probabilities per token, not {k}"
        )));
    }
    let max_tokens = c.max_completion_tokens.or(c.max_tokens).or(defaults.max_tokens);
    if max_tokens == Some(0) {
        return Err(ApiError::invalid("'max_tokens' must be at least 1"));
    }
    let stop = match c.stop.take() {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(v)) => v,
    };
    if stop.len() > MAX_STOPS {
        return Err(ApiError::invalid(format!("at most {MAX_STOPS} stop strings")));
    }
    if stop.iter().any(|s| s.len() > MAX_STOP_BYTES) {
        return Err(ApiError::invalid(format!("a stop string is at most {MAX_STOP_BYTES} bytes")));
    }
    let sampling = sampling(&c, defaults.sampling, fresh_seed)?;
    Ok(Parsed {
        model: c.model,
        prompt,
        max_tokens,
        sampling,
        stop,
        stream: c.stream,
        include_usage: c.stream_options.is_some_and(|o| o.include_usage),
        logprobs,
        speculative: c.speculative.unwrap_or(true),
        cache_prompt: c.cache_prompt.unwrap_or(true),
        echo: false,
        tool_choice: ToolChoice::Auto,
        format: format_schema(c.response_format.as_ref())?,
    })
}

/// The request's sampling: what it gives over the server's defaults; temperature 0 is
/// greedy; a sampled request without a seed gets `fresh_seed`.
fn sampling(
    c: &Common,
    default: SamplingPolicy,
    fresh_seed: u64,
) -> Result<SamplingPolicy, ApiError> {
    let (d_temp, d_k, d_p) = match default {
        SamplingPolicy::Greedy => (0.0, None, None),
        SamplingPolicy::Sample { temperature, top_k, top_p, .. } => (temperature, top_k, top_p),
    };
    let temperature = c.temperature.unwrap_or(d_temp);
    if temperature == 0.0 {
        return Ok(SamplingPolicy::Greedy);
    }
    let top_k = match c.top_k {
        Some(0) => None,
        Some(k) => Some(k),
        None => d_k,
    };
    let top_p = match c.top_p {
        Some(1.0) => None,
        Some(p) => Some(p),
        None => d_p,
    };
    let policy =
        SamplingPolicy::Sample { temperature, top_k, top_p, seed: c.seed.unwrap_or(fresh_seed) };
    policy.validate().map_err(ApiError::invalid)?;
    Ok(policy)
}

impl Parsed {
    /// The text a completion that asked for `echo` repeats before its own: the prompt as
    /// given, or its token ids decoded (`None` without `echo`, and for a chat).
    pub fn echo_text(&self, tokenizer: &crate::model::tokenizer::Tokenizer) -> Option<String> {
        if !self.echo {
            return None;
        }
        match &self.prompt {
            Prompt::Text(t) => Some(t.clone()),
            Prompt::Tokens(ids) => Some(tokenizer.decode(ids)),
            Prompt::Chat(_) => None,
        }
    }

    /// The session's request for `prompt` (the tokenized prompt), or why it cannot run:
    /// an empty prompt, a prompt that leaves no room in the context, a token id outside
    /// the vocabulary.
    pub fn request(
        &self,
        id: String,
        prompt: Vec<u32>,
        n_ctx: u32,
        vocab: u32,
    ) -> Result<Request, ApiError> {
        if prompt.is_empty() {
            return Err(ApiError::invalid("the prompt is empty").because("empty_prompt"));
        }
        if let Some(t) = prompt.iter().find(|t| **t >= vocab) {
            return Err(ApiError::invalid(format!(
                "token id {t} is outside the vocabulary of {vocab}"
            )));
        }
        let n = prompt.len() as u32;
        if n >= n_ctx {
            return Err(ApiError::exceeds_context(n, n_ctx));
        }
        Ok(Request {
            id,
            max_tokens: self.max_tokens.unwrap_or(n_ctx - n).min(n_ctx - n),
            prompt,
            sampling: self.sampling,
            stop: self.stop.clone(),
            logprobs: self.logprobs,
            speculative: self.speculative,
            cache_prompt: self.cache_prompt,
            constraint: None,
        })
    }
}

#[cfg(test)]
mod tests;
