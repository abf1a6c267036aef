//! `swactor bench speculate`: single-sequence decode tokens/s with and without
//! speculation (n-gram drafts, or a draft model's), in one process (`swactor generate`) and through a `run local` pipeline,
//! on an input-grounded workload (prompts whose answer repeats or edits text they hold:
//! `examples/speculate-grounded.jsonl`) and on free generation (story openings), each
//! pair measured one after the other in the same run.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::path::Path;

use serde::Serialize;

use super::{BenchError, err};

/// One prompt's run: decode tokens/s and speculation's counters.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SpecRun {
    /// Decode tokens/s (after the first token).
    pub tokens_per_s: f64,
    /// Tokens drafted.
    pub draft_tokens: u64,
    /// Drafted tokens accepted.
    pub accepted_tokens: u64,
    /// Trips that carried a draft.
    pub drafts: u64,
}

/// One workload through one layout: the mean rates off and on, and the counters summed.
#[derive(Debug, Clone, Serialize)]
pub struct SpecFigure {
    /// `grounded` or `free`.
    pub workload: String,
    /// `one process` or `N stages`.
    pub layout: String,
    /// Where drafts came from: `ngram`, or the draft model's file name.
    pub drafter: String,
    /// Prompts measured.
    pub prompts: usize,
    /// Mean decode tokens/s without speculation.
    pub off_tokens_per_s: f64,
    /// Mean decode tokens/s with it.
    pub on_tokens_per_s: f64,
    /// On over off.
    pub ratio: f64,
    /// Accepted over drafted tokens.
    pub acceptance: f64,
    /// Tokens drafted per draft (the length the controller chose, on average).
    pub mean_draft_length: f64,
}

/// Runs one prompt: `generate` when `stages` is 0, else `run local --stages`; with
/// `speculate`, drafts by `draft_model` where given, else by n-gram lookup.
pub fn spec_run(
    exe: &Path,
    (model, draft_model): (&Path, Option<&Path>),
    stages: u32,
    (prompt, max_tokens): (&str, u32),
    speculate: bool,
) -> Result<SpecRun, BenchError> {
    let mut cmd = std::process::Command::new(exe);
    if stages == 0 {
        cmd.args(["generate", "--threads", "1"]);
    } else {
        cmd.args(["run", "local", "--stages", &stages.to_string(), "--threads", "1"]);
    }
    cmd.args(["--json", "--prompt", prompt, "--max-tokens", &max_tokens.to_string()])
        .arg("--max-seq-len")
        .arg("1024");
    match (speculate, draft_model) {
        (true, Some(d)) => cmd.arg("--draft-model").arg(d),
        (true, None) => cmd.args(["--speculate", "ngram"]),
        (false, _) => cmd.args(["--speculate", "off"]),
    };
    let output =
        cmd.arg("--model").arg(model).stderr(std::process::Stdio::null()).output().map_err(err)?;
    if !output.status.success() {
        return Err(err(format!("a speculation run failed ({})", output.status)));
    }
    let summary = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "generation" || v["type"] == "run")
        .ok_or_else(|| err("no summary line"))?;
    let spec = &summary["speculation"];
    let count = |k: &str| spec[k].as_u64().unwrap_or(0);
    Ok(SpecRun {
        tokens_per_s: summary["decode_tokens_per_s"].as_f64().unwrap_or(0.0),
        draft_tokens: count("swactor_spec_decode_num_draft_tokens_total"),
        accepted_tokens: count("swactor_spec_decode_num_accepted_tokens_total"),
        drafts: count("swactor_spec_decode_num_drafts_total"),
    })
}

/// The figure of a workload's runs (`pairs`: each prompt off, then on).
pub fn figure(
    (workload, layout, drafter): (&str, String, String),
    pairs: &[(SpecRun, SpecRun)],
) -> SpecFigure {
    let n = pairs.len().max(1) as f64;
    let off = pairs.iter().map(|(a, _)| a.tokens_per_s).sum::<f64>() / n;
    let on = pairs.iter().map(|(_, b)| b.tokens_per_s).sum::<f64>() / n;
    let drafted: u64 = pairs.iter().map(|(_, b)| b.draft_tokens).sum();
    let accepted: u64 = pairs.iter().map(|(_, b)| b.accepted_tokens).sum();
    let drafts: u64 = pairs.iter().map(|(_, b)| b.drafts).sum();
    SpecFigure {
        workload: workload.to_string(),
        layout,
        drafter,
        prompts: pairs.len(),
        off_tokens_per_s: off,
        on_tokens_per_s: on,
        ratio: if off > 0.0 { on / off } else { 0.0 },
        acceptance: accepted as f64 / drafted.max(1) as f64,
        mean_draft_length: drafted as f64 / drafts.max(1) as f64,
    }
}

/// The grounded workload's prompts and token counts from a JSONL file of `{prompt,
/// max_tokens}` lines.
pub fn grounded_prompts(file: &Path) -> Result<Vec<(String, u32)>, BenchError> {
    let text = std::fs::read_to_string(file).map_err(err)?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).map_err(err)?;
            let prompt = v["prompt"].as_str().ok_or_else(|| err("a line without a prompt"))?;
            Ok((prompt.to_string(), v["max_tokens"].as_u64().unwrap_or(64) as u32))
        })
        .collect()
}
