//! `swactor bench prefix`: time to first token per turn of a conversation with the prefix
//! cache and without it, side by side in one server, and conversations sharing a system
//! prompt at once. `swactor bench structured`: constrained generation beside free.

use super::args::{BenchPrefixArgs, BenchStructuredArgs};
use super::bench_cmd::{exe, failed, print_cpu};
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::progress::Progress;
use crate::bench;
use crate::bench::prefix::{CrowdFigure, PrefixFigures, SharedFigure, TurnFigure};

/// `swactor bench prefix`.
pub fn prefix(args: &BenchPrefixArgs, out: &mut Output) -> Result<(), CliError> {
    if args.stages == 0 || args.turn_words == 0 || args.max_seq_len.is_some_and(|n| n < 64) {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            color_eyre::eyre::eyre!(
                "--stages and --turn-words must be at least 1, --max-seq-len at least 64"
            ),
        ));
    }
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models: Vec<(String, std::path::PathBuf)> =
        args.model.iter().map(|m| ("shipped".to_string(), m.clone())).collect();
    if args.synth_1b {
        models.push(bench::runs::synth_1b(&dir).map_err(failed)?);
    }
    print_cpu(args.output.json, out)?;
    let mut progress = Progress::new(args.output.json);
    progress.bar(models.len() as u64, "bench prefix");
    let cfg = bench::prefix::PrefixConfig {
        shape: bench::serve::Shape {
            stages: args.stages,
            one_host: false,
            threads: args.threads,
            groups: None,
            prefill_budget_ms: None,
        },
        turns: args.turns,
        turn_words: args.turn_words,
        reply_tokens: args.reply_tokens,
        conversations: args.conversations,
        system_words: args.system_words,
        shared_turns: args.shared_turns,
        max_seq_len: args.max_seq_len,
        // Twice the server's slots (the shared part's conversations, at least 2).
        crowd: args.crowd.unwrap_or(2 * args.conversations.max(2)),
    };
    for (dtype, path) in &models {
        progress.message(format!("bench prefix: {dtype}: {}", path.display()));
        let figures = bench::prefix::prefix_run(&exe()?, path, cfg).map_err(failed)?;
        progress.step();
        if args.output.json {
            let line = serde_json::json!({"dtype": dtype, "model": path, "figures": figures});
            out.json("bench_prefix", &line)?;
        } else {
            let text = report(dtype, args.stages, args.turns, &figures);
            progress.suspend(|| out.line(text))?;
        }
        out.flush()?;
    }
    Ok(())
}

/// The text report of one model.
fn report(dtype: &str, stages: u32, turns: u32, f: &PrefixFigures) -> String {
    let mut s = format!(
        "{dtype}, {stages} stages: one conversation, each turn with the cache and without\n\
         turn  prompt  cached  ttft ms  cold ttft ms  speedup  same text\n"
    );
    for t in &f.turns {
        s.push_str(&turn_line(t));
    }
    if let (Some(first), Some(last)) = (f.turns.first(), f.turns.last()) {
        s.push_str(&format!(
            "turn {} vs turn 1 with the cache: {:.2}x; turn {} without it / with it: {:.1}x\n",
            last.turn,
            last.ttft_ms / first.ttft_ms.max(1e-9),
            last.turn,
            last.speedup
        ));
    }
    if f.turns.len() < turns as usize {
        s.push_str(&format!(
            "the conversation outgrew the context after {} of {turns} turns\n",
            f.turns.len()
        ));
    }
    if let Some(sh) = &f.shared {
        s.push_str(&shared_line(sh));
    }
    if let Some(c) = &f.crowd {
        s.push_str(&crowd_line(c));
    }
    s
}

fn crowd_line(c: &CrowdFigure) -> String {
    format!(
        "{} conversations taking turns over {} slots, {} turns each: turns after the first \
         ttft p50 {:.0} ms with the cache, {:.0} ms without ({:.1}x); {} of {} prompt tokens \
         cached; same text: {}\n",
        c.conversations,
        c.slots,
        c.turns,
        c.ttft_p50_ms,
        c.cold_ttft_p50_ms,
        c.speedup,
        c.cached_tokens,
        c.prompt_tokens,
        if c.same_text { "yes" } else { "NO" }
    )
}

fn turn_line(t: &TurnFigure) -> String {
    format!(
        "{:>4}  {:>6}  {:>6}  {:>7.0}  {:>12.0}  {:>6.1}x  {}\n",
        t.turn,
        t.prompt_tokens,
        t.cached_tokens,
        t.ttft_ms,
        t.cold_ttft_ms,
        t.speedup,
        if t.same_text { "yes" } else { "NO" }
    )
}

fn shared_line(s: &SharedFigure) -> String {
    format!(
        "{} conversations at once, {} turns each, one shared system prompt: {:.1} tokens/s \
         with the cache, {:.1} without ({:.2}x); ttft p50 {:.0} ms vs {:.0} ms; {} of {} \
         prompt tokens cached\n",
        s.conversations,
        s.turns,
        s.tokens_per_s,
        s.cold_tokens_per_s,
        s.ratio,
        s.ttft_p50_ms,
        s.cold_ttft_p50_ms,
        s.cached_tokens,
        s.prompt_tokens
    )
}

/// `swactor bench structured`.
pub fn structured(args: &BenchStructuredArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models: Vec<(String, std::path::PathBuf)> =
        args.model.iter().map(|m| ("shipped".to_string(), m.clone())).collect();
    if args.synth_1b {
        models.push(bench::runs::synth_1b(&dir).map_err(failed)?);
    }
    print_cpu(args.output.json, out)?;
    let cfg = bench::structured::StructuredConfig {
        shape: bench::serve::Shape {
            stages: args.stages,
            one_host: false,
            threads: args.threads,
            groups: None,
            prefill_budget_ms: None,
        },
        requests: args.requests,
        max_tokens: args.max_tokens,
    };
    for (dtype, path) in &models {
        let f = bench::structured::structured_run(&exe()?, path, cfg).map_err(failed)?;
        if args.output.json {
            let line = serde_json::json!({"dtype": dtype, "model": path, "figures": f});
            out.json("bench_structured", &line)?;
        } else {
            out.line(format!(
                "{dtype} {}, {} stages: decode free {:.1} tok/s, with the schema {:.1} tok/s: \
                 ratio {:.2} (target >= 0.9), +{:.2} ms per token; {}/{} constrained replies \
                 parsed with the schema's keys ({} tokens)",
                path.display(),
                args.stages,
                f.free_tokens_per_s,
                f.constrained_tokens_per_s,
                f.ratio,
                f.extra_ms_per_token,
                f.valid,
                f.replies,
                f.constrained_tokens
            ))?;
        }
        out.flush()?;
    }
    Ok(())
}
