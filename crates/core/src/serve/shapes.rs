//! What the API answers: a whole response, or a stream of chunks (the role first, then
//! text deltas, then a choice chunk with `finish_reason`, then, when asked, a usage chunk
//! with `choices: []`), in OpenAI's shapes for chat and text completions, each carrying
//! `usage` and llama-server's `timings`.

use serde::Serialize;
use serde_json::{Value, json};

use crate::model::tokenizer::{DetokenizerState, Tokenizer};
use crate::orchestrator::scheduler::FinishReason;

/// llama-server's `timings`: the prompt (from admission to the first token) and the
/// generated tokens (first to last).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Timings {
    /// Prompt tokens found cached (not computed again).
    pub cache_n: u32,
    /// Prompt tokens computed (the cached ones not counted).
    pub prompt_n: u32,
    /// From admission to the first token, ms.
    pub prompt_ms: f64,
    /// `prompt_ms` per prompt token.
    pub prompt_per_token_ms: f64,
    /// Prompt tokens per second.
    pub prompt_per_second: f64,
    /// Generated tokens.
    pub predicted_n: u32,
    /// From the first token to the last, ms.
    pub predicted_ms: f64,
    /// `predicted_ms` per generated token after the first.
    pub predicted_per_token_ms: f64,
    /// Generated tokens per second after the first.
    pub predicted_per_second: f64,
}

fn per(ms: f64, n: u32) -> (f64, f64) {
    if n == 0 || ms <= 0.0 { (0.0, 0.0) } else { (ms / n as f64, n as f64 * 1e3 / ms) }
}

impl Timings {
    /// Timings of `prompt_n` tokens in `prompt_ms` and `predicted_n` in `predicted_ms`.
    pub fn new(prompt_n: u32, prompt_ms: f64, predicted_n: u32, predicted_ms: f64) -> Timings {
        let (prompt_per_token_ms, prompt_per_second) = per(prompt_ms, prompt_n);
        let (predicted_per_token_ms, predicted_per_second) =
            per(predicted_ms, predicted_n.saturating_sub(1));
        Timings {
            cache_n: 0,
            prompt_n,
            prompt_ms,
            prompt_per_token_ms,
            prompt_per_second,
            predicted_n,
            predicted_ms,
            predicted_per_token_ms,
            predicted_per_second,
        }
    }

    /// The same, `cache_n` of whose prompt tokens were found cached (llama-server counts
    /// only the others in `prompt_n`).
    pub fn with_cache(self, cache_n: u32) -> Timings {
        let prompt_n = self.prompt_n.saturating_sub(cache_n);
        let (prompt_per_token_ms, prompt_per_second) = per(self.prompt_ms, prompt_n);
        Timings { cache_n, prompt_n, prompt_per_token_ms, prompt_per_second, ..self }
    }
}

/// Tokens billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Both.
    pub total_tokens: u32,
    /// What the prompt tokens were.
    pub prompt_tokens_details: PromptTokensDetails,
}

/// OpenAI's breakdown of the prompt tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens found in the prefix cache (not computed again).
    pub cached_tokens: u32,
}

impl Usage {
    /// `prompt` and `completion` tokens.
    pub fn new(prompt: u32, completion: u32) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptTokensDetails::default(),
        }
    }

    /// The same, `cached` of whose prompt tokens were found cached.
    pub fn with_cached(self, cached: u32) -> Usage {
        Usage { prompt_tokens_details: PromptTokensDetails { cached_tokens: cached }, ..self }
    }
}

/// One token's log-probabilities as a response lists them: its text and bytes, its
/// log-probability, and the most likely alternatives'.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenChoice {
    /// The token's text (lossy where it is part of a character).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability.
    pub logprob: f32,
    /// The alternatives, highest first: text, bytes, log-probability.
    pub top: Vec<(String, Vec<u8>, f32)>,
    /// Where its text begins in the completion's text, in bytes ([`TextOffsets`]).
    pub offset: usize,
}

/// Each token's `text_offset` in a completion's text: the bytes of text complete before
/// it (what the detokenizer released; a token that finishes a character another began
/// starts where that character does). The same tokens give the same offsets whether the
/// response is whole or streamed, whatever is held back for stop strings.
#[derive(Debug, Clone, Default)]
pub struct TextOffsets {
    detok: DetokenizerState,
    released: usize,
}

impl TextOffsets {
    /// The next token's offset (`id`, detokenized with `tokenizer`).
    pub fn next(&mut self, tokenizer: &Tokenizer, id: u32) -> usize {
        let at = self.released;
        self.released += self.detok.push(tokenizer, id).len();
        at
    }
}

/// Which API a response belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completion,
}

/// OpenAI's `finish_reason` for a sequence's end: `stop` (EOS or a stop string) or
/// `length` (`max_tokens`, or a full context).
pub fn finish_reason(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::MaxTokens | FinishReason::ContextFull => "length",
        _ => "stop",
    }
}

/// What every response and chunk of one request repeats, and its text chunk serialized
/// once around the place of the text (a token's chunk is then two copies and the text's
/// escaping, not a JSON tree).
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The API.
    pub api: Api,
    /// `chatcmpl-N` or `cmpl-N`.
    pub id: String,
    /// Unix seconds at arrival.
    pub created: u64,
    /// The model's name.
    pub model: String,
    /// A text chunk's JSON before the text.
    head: String,
    /// A text chunk's JSON after the text.
    tail: String,
    /// The prompt's text a completion echoes before its own (`echo`; empty: none).
    echo: String,
}

/// Stands for the text while a text chunk's frame is serialized.
const TEXT_MARK: &str = "\u{1}swactor-text\u{1}";

impl Meta {
    /// The response's metadata; `ticket` numbers the request.
    pub fn new(api: Api, ticket: u64, created: u64, model: String) -> Meta {
        let id = match api {
            Api::Chat => format!("chatcmpl-{ticket}"),
            Api::Completion => format!("cmpl-{ticket}"),
        };
        let (head, tail, echo) = (String::new(), String::new(), String::new());
        let mut meta = Meta { api, id, created, model, head, tail, echo };
        let frame = meta.text_chunk_value(TEXT_MARK).to_string();
        let mark = serde_json::to_string(TEXT_MARK).unwrap_or_default();
        if let Some(at) = frame.find(&mark) {
            meta.head = frame[..at].to_string();
            meta.tail = frame[at + mark.len()..].to_string();
        }
        meta
    }

    /// A completion that echoes `prompt` (its text) before its own text, whole and
    /// streamed (`None`, and for a chat: no echo).
    pub fn with_echo(mut self, prompt: Option<String>) -> Meta {
        if self.api == Api::Completion {
            self.echo = prompt.unwrap_or_default();
        }
        self
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.api, chunk) {
            (Api::Chat, false) => "chat.completion",
            (Api::Chat, true) => "chat.completion.chunk",
            (Api::Completion, _) => "text_completion",
        }
    }

    /// A stream chunk holding `choices`.
    pub fn chunk(&self, choices: Value) -> Value {
        self.envelope(true, choices)
    }

    fn envelope(&self, chunk: bool, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "swactor",
            "choices": choices,
        })
    }

    /// The `logprobs` object of a choice listing `tokens`: OpenAI's `content` list for a
    /// chat; `tokens`, `token_logprobs`, `top_logprobs` and `text_offset` (each token's
    /// [`TokenChoice::offset`]) for a completion.
    pub fn logprobs_value(&self, tokens: &[TokenChoice]) -> Value {
        match self.api {
            Api::Chat => {
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let top: Vec<Value> = t
                            .top
                            .iter()
                            .map(|(s, b, l)| json!({"token": s, "logprob": l, "bytes": b}))
                            .collect();
                        json!({"token": t.token, "logprob": t.logprob, "bytes": t.bytes, "top_logprobs": top})
                    })
                    .collect();
                json!({"content": content})
            }
            Api::Completion => {
                let offsets: Vec<usize> = tokens.iter().map(|t| t.offset).collect();
                let top: Vec<serde_json::Map<String, Value>> = tokens
                    .iter()
                    .map(|t| t.top.iter().map(|(s, _, l)| (s.clone(), json!(l))).collect())
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| &t.token).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": top,
                    "text_offset": offsets,
                })
            }
        }
    }

    /// A chunk carrying `text` and its tokens' `logprobs` object.
    pub fn text_chunk_with(&self, text: &str, logprobs: Value) -> String {
        let mut v = self.text_chunk_value(text);
        v["choices"][0]["logprobs"] = logprobs;
        v.to_string()
    }

    /// A whole (not streamed) response.
    pub fn response(&self, text: &str, finish: &str, usage: Usage, timings: Timings) -> Value {
        let choice = match self.api {
            Api::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": null,
                "finish_reason": finish,
            }),
            Api::Completion => json!({
                "index": 0, "text": format!("{}{text}", self.echo), "logprobs": null,
                "finish_reason": finish,
            }),
        };
        let mut v = self.envelope(false, json!([choice]));
        v["usage"] = json!(usage);
        v["timings"] = json!(timings);
        v
    }

    /// The first chunk of a stream: a chat's role (no text), or the prompt a completion
    /// echoes (`None` for a completion that echoes nothing).
    pub fn role_chunk(&self) -> Option<Value> {
        if self.api == Api::Completion {
            return (!self.echo.is_empty()).then(|| self.text_chunk_value(&self.echo));
        }
        (self.api == Api::Chat).then(|| {
            let delta = json!({"role": "assistant", "content": ""});
            self.envelope(
                true,
                json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
            )
        })
    }

    /// A chunk carrying `text`, serialized.
    pub fn text_chunk(&self, text: &str) -> String {
        let text = serde_json::to_string(text).unwrap_or_default();
        let mut out = String::with_capacity(self.head.len() + text.len() + self.tail.len());
        out.push_str(&self.head);
        out.push_str(&text);
        out.push_str(&self.tail);
        out
    }

    fn text_chunk_value(&self, text: &str) -> Value {
        let choice = match self.api {
            Api::Chat => {
                json!({"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null})
            }
            Api::Completion => {
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": null})
            }
        };
        self.envelope(true, json!([choice]))
    }

    /// The last choice chunk: its `finish_reason` (and the timings).
    pub fn finish_chunk(&self, finish: &str, timings: Timings) -> Value {
        let choice = match self.api {
            Api::Chat => {
                json!({"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish})
            }
            Api::Completion => {
                json!({"index": 0, "text": "", "logprobs": null, "finish_reason": finish})
            }
        };
        let mut v = self.envelope(true, json!([choice]));
        v["timings"] = json!(timings);
        v
    }

    /// The usage chunk before `[DONE]`, when the client asked for it.
    pub fn usage_chunk(&self, usage: Usage, timings: Timings) -> Value {
        let mut v = self.envelope(true, json!([]));
        v["usage"] = json!(usage);
        v["timings"] = json!(timings);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_stream_starts_with_the_role_and_ends_with_a_finish_reason_and_usage() {
        let m = Meta::new(Api::Chat, 7, 1_700_000_000, "smol".into());
        let first = m.role_chunk().expect("chat has a role chunk");
        assert_eq!(first["object"], "chat.completion.chunk");
        assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
        let chunk: Value = serde_json::from_str(&m.text_chunk("hi \"\u{1}\n")).expect("json");
        assert_eq!(chunk["choices"][0]["delta"]["content"], "hi \"\u{1}\n");
        assert_eq!(chunk["id"], "chatcmpl-7");
        assert_eq!(chunk, m.text_chunk_value("hi \"\u{1}\n"), "the fast path writes the same JSON");
        let t = Timings::new(10, 20.0, 5, 40.0);
        assert_eq!(m.finish_chunk("stop", t)["choices"][0]["finish_reason"], "stop");
        let u = m.usage_chunk(Usage::new(10, 5), t);
        assert_eq!(u["choices"], json!([]));
        assert_eq!(u["usage"]["total_tokens"], 15);
        assert_eq!(u["id"], "chatcmpl-7");
    }

    #[test]
    fn a_whole_completion_carries_text_usage_and_timings_and_has_no_role_chunk() {
        let m = Meta::new(Api::Completion, 1, 0, "smol".into());
        assert!(m.role_chunk().is_none());
        let v = m.response("abc", "length", Usage::new(3, 4), Timings::new(3, 3.0, 4, 30.0));
        assert_eq!(v["object"], "text_completion");
        assert_eq!(v["choices"][0]["text"], "abc");
        assert_eq!(v["timings"]["predicted_n"], 4);
        assert_eq!(v["timings"]["predicted_per_second"], 100.0);
        assert_eq!(v["usage"]["completion_tokens"], 4);
    }

    #[test]
    fn a_completion_that_echoes_repeats_its_prompt_whole_and_as_the_first_chunk() {
        let m = Meta::new(Api::Completion, 1, 0, "smol".into()).with_echo(Some("Once".into()));
        let v = m.response(" upon", "length", Usage::new(2, 1), Timings::new(2, 1.0, 1, 1.0));
        assert_eq!(v["choices"][0]["text"], "Once upon");
        assert_eq!(v["usage"]["prompt_tokens"], 2, "echo bills nothing more");
        let first = m.role_chunk().expect("the echo comes first");
        assert_eq!(first["choices"][0]["text"], "Once");
        let chat = Meta::new(Api::Chat, 1, 0, "smol".into()).with_echo(Some("x".into()));
        assert_eq!(chat.role_chunk().expect("role")["choices"][0]["delta"]["content"], "");
    }

    #[test]
    fn a_tokens_text_offset_is_where_its_text_begins_in_the_lossy_text() {
        use crate::model::tokenizer::{Kind, Tokenizer, byte_to_unicode, pre_tokenizer};
        let tokens: Vec<String> = byte_to_unicode().iter().map(|c| c.to_string()).collect();
        let n = tokens.len();
        let (pre, ignore_merges) = pre_tokenizer("default").expect("pre-tokenizer");
        let kind = Kind::Bpe { pre: pre.into_iter().map(String::from).collect(), ignore_merges };
        let tok = Tokenizer::new(kind, tokens, vec![1; n], vec![0.0; n], &[], None, None, false)
            .expect("tokenizer");
        let ids: Vec<u32> = [b'a', 0xFF, b'b', 0xE2, 0x82, 0xAC, b'c'].map(u32::from).to_vec();
        let mut offsets = TextOffsets::default();
        let at: Vec<usize> = ids.iter().map(|&id| offsets.next(&tok, id)).collect();
        let text = tok.decode(&ids);
        assert_eq!(text, "a\u{FFFD}b\u{20AC}c");
        // The euro sign's three tokens start where it does.
        assert_eq!(at, [0, 1, 4, 5, 5, 5, 8]);
        assert!(at.iter().all(|&o| text.is_char_boundary(o)));
    }

    #[test]
    fn the_finish_reason_is_stop_for_eos_and_stop_strings_and_length_for_limits() {
        assert_eq!(finish_reason(FinishReason::Eos), "stop");
        assert_eq!(finish_reason(FinishReason::Stop), "stop");
        assert_eq!(finish_reason(FinishReason::MaxTokens), "length");
        assert_eq!(finish_reason(FinishReason::ContextFull), "length");
    }
}
