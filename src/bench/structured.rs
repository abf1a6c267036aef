//! `swactor bench structured`: constrained generation against unconstrained, side by side
//! in one server (`run local --serve`): the same prompts sent with a JSON schema in
//! `response_format` and without, streamed and greedy, in turns, so both meet the host in
//! the same state. They are text completions, so any model serves them (a synthesized one
//! has no chat template). Decode tokens/s is each reply's tokens after the first over the time
//! from its first token to its last; every constrained reply must parse as JSON with the
//! schema's required keys.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::serve::Shape;
use super::serve_http::{client_and_runtime, start, wait_ready};
use super::{BenchError, err};

/// What to measure.
#[derive(Debug, Clone, Copy)]
pub struct StructuredConfig {
    /// The session's layout.
    pub shape: Shape,
    /// Requests of each kind.
    pub requests: u32,
    /// Tokens each reply generates at most.
    pub max_tokens: u32,
}

/// One model's figures.
#[derive(Debug, Clone, Serialize)]
pub struct StructuredFigures {
    /// Decode tokens/s without a constraint (tokens after the first over their time).
    pub free_tokens_per_s: f64,
    /// The same with the schema.
    pub constrained_tokens_per_s: f64,
    /// `constrained / free`.
    pub ratio: f64,
    /// Milliseconds a constrained token costs more than a free one.
    pub extra_ms_per_token: f64,
    /// Tokens generated with the schema, over every request.
    pub constrained_tokens: u64,
    /// Constrained replies that parsed with every required key, of all.
    pub valid: u32,
    /// Constrained replies.
    pub replies: u32,
}

/// The schema every constrained request asks for.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 60},
            "year": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 24}, "maxItems": 4},
            "summary": {"type": "string", "maxLength": 300}
        },
        "required": ["title", "year", "tags", "summary"],
        "additionalProperties": false
    })
}

const TOPICS: [&str; 4] =
    ["a famous bridge", "a novel about the sea", "a space mission", "a jazz album"];

/// Measures `model` served as `cfg.shape`.
pub fn structured_run(
    exe: &Path,
    model: &Path,
    cfg: StructuredConfig,
) -> Result<StructuredFigures, BenchError> {
    let (served, url) = start(exe, model, &cfg.shape.args())?;
    let (client, rt) = client_and_runtime()?;
    let figures = rt.block_on(async {
        wait_ready(&client, &url).await?;
        let (mut free, mut constrained) = ((0u64, 0.0f64), (0u64, 0.0f64));
        let (mut valid, mut replies, mut constrained_tokens) = (0, 0, 0);
        for k in 0..cfg.requests {
            let topic = TOPICS[k as usize % TOPICS.len()];
            let ask = format!(
                "Describe {topic} as JSON with a title, a year, tags and a summary.\nJSON: "
            );
            for constrain in [false, true] {
                let (text, tokens, secs) =
                    chat(&client, &url, &ask, cfg.max_tokens, constrain).await?;
                let acc = if constrain { &mut constrained } else { &mut free };
                acc.0 += tokens.saturating_sub(1);
                acc.1 += secs;
                if constrain {
                    replies += 1;
                    constrained_tokens += tokens;
                    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                    let keys = ["title", "year", "tags", "summary"];
                    if keys.iter().all(|k| v.get(k).is_some()) {
                        valid += 1;
                    }
                }
            }
        }
        let rate = |(n, s): (u64, f64)| if s > 0.0 { n as f64 / s } else { 0.0 };
        let (f, c) = (rate(free), rate(constrained));
        let per = |r: f64| if r > 0.0 { 1e3 / r } else { 0.0 };
        Ok::<_, BenchError>(StructuredFigures {
            free_tokens_per_s: f,
            constrained_tokens_per_s: c,
            ratio: if f > 0.0 { c / f } else { 0.0 },
            extra_ms_per_token: per(c) - per(f),
            constrained_tokens,
            valid,
            replies,
        })
    })?;
    drop(served);
    Ok(figures)
}

/// One streamed greedy completion: its text, its tokens, and the seconds from its first
/// token to its last.
async fn chat(
    client: &reqwest::Client,
    url: &str,
    ask: &str,
    max_tokens: u32,
    constrain: bool,
) -> Result<(String, u64, f64), BenchError> {
    let mut body = json!({"prompt": ask, "max_tokens": max_tokens,
                          "temperature": 0, "stream": true, "cache_prompt": false,
                          "stream_options": {"include_usage": true}});
    if constrain {
        body["response_format"] =
            json!({"type": "json_schema", "json_schema": {"name": "item", "schema": schema()}});
    }
    let mut r = client
        .post(format!("{url}/v1/completions"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(err)?;
    if !r.status().is_success() {
        let status = r.status();
        return Err(err(format!(
            "the server answered {status}: {}",
            r.text().await.unwrap_or_default()
        )));
    }
    let (mut text, mut tokens, mut first, mut last) = (String::new(), 0u64, None, Instant::now());
    let mut buf = String::new();
    while let Some(chunk) = r.chunk().await.map_err(err)? {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else { continue };
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            if let Some(t) = v["choices"][0]["text"].as_str().filter(|t| !t.is_empty()) {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                text.push_str(t);
            }
            if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
                tokens = n;
            }
        }
    }
    let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
    Ok((text, tokens, secs))
}
