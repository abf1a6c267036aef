//! `swactor bench prefix`: what the prefix cache saves a conversation, measured side by side
//! in one server (`run local --serve`): each turn of a multi-turn chat is sent twice, once
//! as clients send it (the cache on) and once with `cache_prompt: false` (every prompt
//! token computed), so both meet the host in the same state. Then several conversations
//! sharing one long system prompt, all at once, with the cache and without. Then more
//! conversations than slots, taking turns one after another, so that each conversation's
//! slot has gone to another by its next turn: what it finds comes from the stages' block
//! stores (the cache's second level), side by side with the same turn without the cache.
//! The turns are
//! text completions of the transcript so far (`System:` / `User:` / `Assistant:` lines),
//! so any model serves them, a chat template or not.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::serve::{Shape, quantile};
use super::serve_http::{client_and_runtime, start, wait_ready};
use super::{BenchError, err};

/// What to measure.
#[derive(Debug, Clone, Copy)]
pub struct PrefixConfig {
    /// The session's layout.
    pub shape: Shape,
    /// Turns of the single conversation.
    pub turns: u32,
    /// Words of user text each turn adds (about a token each).
    pub turn_words: u32,
    /// Tokens each reply generates at most.
    pub reply_tokens: u32,
    /// Conversations at once in the shared-system-prompt part (0: skipped).
    pub conversations: u32,
    /// Words of the shared system prompt.
    pub system_words: u32,
    /// Turns of each of those conversations.
    pub shared_turns: u32,
    /// Each sequence's context (`None`: the server's, the model's trained length as far
    /// as memory holds it).
    pub max_seq_len: Option<u32>,
    /// Conversations taking turns in the crowded part (0: skipped; more than the slots).
    pub crowd: u32,
}

/// More conversations than slots, taking turns one after another: their turns after the
/// first, with the cache and without.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CrowdFigure {
    /// Conversations.
    pub conversations: u32,
    /// Slots of the server.
    pub slots: u32,
    /// Turns each.
    pub turns: u32,
    /// Median time to first token of the turns after the first, with the cache, ms.
    pub ttft_p50_ms: f64,
    /// The same without it.
    pub cold_ttft_p50_ms: f64,
    /// `cold_ttft_p50_ms / ttft_p50_ms`.
    pub speedup: f64,
    /// Prompt tokens found cached over the turns after the first.
    pub cached_tokens: u64,
    /// Prompt tokens over those turns.
    pub prompt_tokens: u64,
    /// Every reply's text was the same with the cache and without.
    pub same_text: bool,
}

/// One turn of the single conversation, with the cache and without.
#[derive(Debug, Clone, Serialize)]
pub struct TurnFigure {
    /// The turn (from 1).
    pub turn: u32,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Prompt tokens found cached.
    pub cached_tokens: u64,
    /// Time to first token with the cache, ms.
    pub ttft_ms: f64,
    /// Time to first token without it, ms.
    pub cold_ttft_ms: f64,
    /// `cold_ttft_ms / ttft_ms`.
    pub speedup: f64,
    /// Both replies' texts are the same.
    pub same_text: bool,
}

/// The conversations sharing a system prompt, with the cache and without.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct SharedFigure {
    /// Conversations at once.
    pub conversations: u32,
    /// Turns each.
    pub turns: u32,
    /// Tokens generated per second over the whole exchange, with the cache.
    pub tokens_per_s: f64,
    /// The same without it.
    pub cold_tokens_per_s: f64,
    /// `tokens_per_s / cold_tokens_per_s`.
    pub ratio: f64,
    /// Median time to first token with the cache, ms.
    pub ttft_p50_ms: f64,
    /// The same without it.
    pub cold_ttft_p50_ms: f64,
    /// Prompt tokens found cached over every turn.
    pub cached_tokens: u64,
    /// Prompt tokens over every turn.
    pub prompt_tokens: u64,
}

/// Everything one model gave.
#[derive(Debug, Clone, Serialize)]
pub struct PrefixFigures {
    /// Each turn of the single conversation.
    pub turns: Vec<TurnFigure>,
    /// The shared-system-prompt part, when run.
    pub shared: Option<SharedFigure>,
    /// The crowded part, when run.
    pub crowd: Option<CrowdFigure>,
}

/// One streamed chat turn as the client saw it.
#[derive(Debug, Clone, Default)]
struct Reply {
    text: String,
    ttft_ms: f64,
    completion_tokens: u64,
    prompt_tokens: u64,
    cached_tokens: u64,
}

/// Words of deterministic user text, different for each `seed`.
fn words(seed: u32, n: u32) -> String {
    const W: [&str; 24] = [
        "river", "lantern", "copper", "meadow", "quiet", "signal", "harbor", "winter", "garden",
        "thunder", "pencil", "orbit", "valley", "candle", "mirror", "forest", "engine", "market",
        "silver", "bridge", "planet", "window", "shadow", "letter",
    ];
    let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(12_345);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            W[(x >> 16) as usize % W.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Measures `model` served as `cfg.shape`.
pub fn prefix_run(
    exe: &Path,
    model: &Path,
    cfg: PrefixConfig,
) -> Result<PrefixFigures, BenchError> {
    let slots = cfg.conversations.max(2);
    let mut args = cfg.shape.args();
    args.extend(["--max-sequences".into(), slots.to_string()]);
    if let Some(n) = cfg.max_seq_len {
        args.extend(["--max-seq-len".into(), n.to_string()]);
    }
    let (served, url) = start(exe, model, &args)?;
    let (client, rt) = client_and_runtime()?;
    let figures = rt.block_on(async {
        wait_ready(&client, &url).await?;
        let turns = conversation(&client, &url, cfg).await?;
        let shared = if cfg.conversations > 0 {
            let warm = shared(&client, &url, cfg, true).await?;
            let cold = shared(&client, &url, cfg, false).await?;
            Some(shared_figure(cfg, &warm, &cold))
        } else {
            None
        };
        let crowd =
            if cfg.crowd > 0 { Some(crowded(&client, &url, cfg, slots).await?) } else { None };
        Ok::<_, BenchError>(PrefixFigures { turns, shared, crowd })
    })?;
    drop(served);
    Ok(figures)
}

/// The single conversation: each turn with the cache, then the same messages without it.
async fn conversation(
    client: &reqwest::Client,
    url: &str,
    cfg: PrefixConfig,
) -> Result<Vec<TurnFigure>, BenchError> {
    let mut transcript = String::from("System: You are a helpful assistant.\n");
    let mut figures = Vec::new();
    for turn in 1..=cfg.turns {
        transcript.push_str(&format!("User: {}\nAssistant:", words(turn, cfg.turn_words)));
        // A conversation that outgrew the context ends with the turns it had.
        let Some(warm) = complete(client, url, &transcript, cfg.reply_tokens, true).await? else {
            break;
        };
        let Some(cold) = complete(client, url, &transcript, cfg.reply_tokens, false).await? else {
            break;
        };
        figures.push(TurnFigure {
            turn,
            prompt_tokens: warm.prompt_tokens,
            cached_tokens: warm.cached_tokens,
            ttft_ms: warm.ttft_ms,
            cold_ttft_ms: cold.ttft_ms,
            speedup: cold.ttft_ms / warm.ttft_ms.max(1e-9),
            same_text: warm.text == cold.text,
        });
        transcript.push_str(&format!("{}\n", warm.text));
    }
    Ok(figures)
}

/// `cfg.conversations` conversations at once, each `cfg.shared_turns` turns after one long
/// system prompt; returns every turn's reply and the wall time, seconds.
async fn shared(
    client: &reqwest::Client,
    url: &str,
    cfg: PrefixConfig,
    cache: bool,
) -> Result<(Vec<Reply>, f64), BenchError> {
    let system = words(1000, cfg.system_words);
    let t0 = Instant::now();
    let all = (0..cfg.conversations).map(|c| {
        let system = system.clone();
        async move {
            let mut transcript = format!("System: {system}\n");
            let mut replies = Vec::new();
            for turn in 0..cfg.shared_turns {
                let user = words(100 * (c + 1) + turn, cfg.turn_words);
                transcript.push_str(&format!("User: {user}\nAssistant:"));
                let r = complete(client, url, &transcript, cfg.reply_tokens, cache)
                    .await?
                    .ok_or_else(|| err("a shared conversation outgrew the context"))?;
                transcript.push_str(&format!("{}\n", r.text));
                replies.push(r);
            }
            Ok::<_, BenchError>(replies)
        }
    });
    let done = futures_util::future::join_all(all).await;
    let wall = t0.elapsed().as_secs_f64();
    let mut replies = Vec::new();
    for d in done {
        replies.extend(d?);
    }
    Ok((replies, wall))
}

/// `cfg.crowd` conversations taking turns one after another (each turn with the cache,
/// then the same without it), `cfg.shared_turns` turns each.
async fn crowded(
    client: &reqwest::Client,
    url: &str,
    cfg: PrefixConfig,
    slots: u32,
) -> Result<CrowdFigure, BenchError> {
    let mut transcripts: Vec<String> = (0..cfg.crowd)
        .map(|c| format!("System: conversation {c}. You are a helpful assistant.\n"))
        .collect();
    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    let (mut cached, mut prompt, mut same) = (0, 0, true);
    for turn in 0..cfg.shared_turns {
        for (c, transcript) in transcripts.iter_mut().enumerate() {
            let user = words(7000 + 100 * c as u32 + turn, cfg.turn_words);
            transcript.push_str(&format!("User: {user}\nAssistant:"));
            let outgrew = || err("a crowded conversation outgrew the context");
            let w = complete(client, url, transcript, cfg.reply_tokens, true)
                .await?
                .ok_or_else(outgrew)?;
            let k = complete(client, url, transcript, cfg.reply_tokens, false)
                .await?
                .ok_or_else(outgrew)?;
            same &= w.text == k.text;
            if turn > 0 {
                warm.push(w.ttft_ms);
                cold.push(k.ttft_ms);
                cached += w.cached_tokens;
                prompt += w.prompt_tokens;
            }
            transcript.push_str(&format!("{}\n", w.text));
        }
    }
    warm.sort_by(f64::total_cmp);
    cold.sort_by(f64::total_cmp);
    let (ttft_p50_ms, cold_ttft_p50_ms) = (quantile(&warm, 0.5), quantile(&cold, 0.5));
    Ok(CrowdFigure {
        conversations: cfg.crowd,
        slots,
        turns: cfg.shared_turns,
        ttft_p50_ms,
        cold_ttft_p50_ms,
        speedup: cold_ttft_p50_ms / ttft_p50_ms.max(1e-9),
        cached_tokens: cached,
        prompt_tokens: prompt,
        same_text: same,
    })
}

fn shared_figure(
    cfg: PrefixConfig,
    warm: &(Vec<Reply>, f64),
    cold: &(Vec<Reply>, f64),
) -> SharedFigure {
    let rate = |(r, wall): &(Vec<Reply>, f64)| {
        r.iter().map(|x| x.completion_tokens).sum::<u64>() as f64 / wall.max(1e-9)
    };
    let ttft = |(r, _): &(Vec<Reply>, f64)| {
        let mut v: Vec<f64> = r.iter().map(|x| x.ttft_ms).collect();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    let (tokens_per_s, cold_tokens_per_s) = (rate(warm), rate(cold));
    SharedFigure {
        conversations: cfg.conversations,
        turns: cfg.shared_turns,
        tokens_per_s,
        cold_tokens_per_s,
        ratio: tokens_per_s / cold_tokens_per_s.max(1e-9),
        ttft_p50_ms: ttft(warm),
        cold_ttft_p50_ms: ttft(cold),
        cached_tokens: warm.0.iter().map(|x| x.cached_tokens).sum(),
        prompt_tokens: warm.0.iter().map(|x| x.prompt_tokens).sum(),
    }
}

/// One streamed greedy completion of `prompt` (`None`: the prompt does not fit the
/// context).
async fn complete(
    client: &reqwest::Client,
    url: &str,
    prompt: &str,
    max_tokens: u32,
    cache: bool,
) -> Result<Option<Reply>, BenchError> {
    let body = json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                      "stream": true, "stream_options": {"include_usage": true},
                      "cache_prompt": cache});
    let sent = Instant::now();
    let mut r = client
        .post(format!("{url}/v1/completions"))
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(err)?;
    if !r.status().is_success() {
        let status = r.status();
        let text = r.text().await.unwrap_or_default();
        if text.contains("exceed_context_size_error") {
            return Ok(None);
        }
        return Err(err(format!("the server answered {status}: {text}")));
    }
    let mut reply = Reply::default();
    let mut first = None;
    let mut buf = String::new();
    while let Some(chunk) = r.chunk().await.map_err(err)? {
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            let Some(data) = event.trim().strip_prefix("data: ") else { continue };
            if data == "[DONE]" {
                continue;
            }
            let v: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            if let Some(t) = v["choices"][0]["text"].as_str().filter(|t| !t.is_empty()) {
                first.get_or_insert_with(Instant::now);
                reply.text.push_str(t);
            }
            if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                reply.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
                reply.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
                reply.cached_tokens =
                    u["prompt_tokens_details"]["cached_tokens"].as_u64().unwrap_or(0);
            }
        }
    }
    let first = first.ok_or_else(|| err("a reply without a token"))?;
    reply.ttft_ms = (first - sent).as_secs_f64() * 1e3;
    Ok(Some(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_is_the_same_for_a_seed_and_differs_between_seeds() {
        assert_eq!(words(3, 10), words(3, 10));
        assert_ne!(words(3, 10), words(4, 10));
        assert_eq!(words(7, 100).split(' ').count(), 100);
    }
}
