//! `swactor bench serve`: a `run local` session serving N concurrent greedy requests
//! (a batch job), measured from its stream: aggregate decode tokens/s, time to first
//! token and inter-token latency (p50 / p95), beside one-sequence `swactor generate` with
//! the same total thread budget, measured in the same run.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::{BenchError, err};

/// Story openings: request `i` uses prompt `i % len`.
pub const PROMPTS: [&str; 16] = [
    "Once upon a time there was a little girl named Lily.",
    "The old lighthouse keeper looked out at the sea and",
    "In a small village at the edge of the forest,",
    "Tom found a strange key in his grandmother's attic.",
    "The robot woke up one morning and decided to",
    "Every summer the family went to the lake, where",
    "The dragon had not left its cave for a hundred years, until",
    "Mia wanted to learn how to paint the stars, so she",
    "On the first day of school, Ben was nervous because",
    "The baker made a cake so big that",
    "Deep under the ocean lived a curious little fish who",
    "The wind whispered through the trees as the children",
    "A tiny mouse lived inside the walls of the library and",
    "When the snow finally melted, the garden",
    "The king announced a contest to find",
    "Sam and his dog walked along the river until they",
];

/// One concurrency level's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ServeFigure {
    /// The model (its weight type, or the re-quantized type).
    pub dtype: String,
    /// Requests served at once (slots and requests).
    pub concurrency: u32,
    /// Stages of the pipeline.
    pub stages: u32,
    /// Tokens generated in all.
    pub tokens: u64,
    /// Aggregate decode tokens/s: tokens after each request's first, over the window from
    /// the first first-token to the last token.
    pub aggregate_tokens_per_s: f64,
    /// One-sequence `swactor generate` with the same total compute threads.
    pub generate_tokens_per_s: f64,
    /// Aggregate over generate.
    pub ratio: f64,
    /// One process batching as many sequences with the same total compute threads:
    /// aggregate decode tokens/s (0 where not measured).
    pub batch_tokens_per_s: f64,
    /// Aggregate over the one-process batch (0 where not measured).
    pub batch_ratio: f64,
    /// Time to first token (from the session being ready), p50 and p95, ms.
    pub ttft_p50_ms: f64,
    /// p95 of the same.
    pub ttft_p95_ms: f64,
    /// Time to first token of a request arriving while `concurrency - 1` others decode,
    /// median of a few probes, ms (0 where not measured: the batch job, one request).
    pub ttft_loaded_ms: f64,
    /// Inter-token latency within a request, p50, ms.
    pub itl_p50_ms: f64,
    /// p95 of the same.
    pub itl_p95_ms: f64,
    /// Requests that failed.
    pub failed: u64,
}

/// The value at quantile `q` of sorted `v` (0 when empty).
pub fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The median of each figure over repeated runs of one level (the first run's counts).
pub fn median_figure(runs: &[ServeFigure]) -> ServeFigure {
    let med = |f: fn(&ServeFigure) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        quantile(&v, 0.5)
    };
    let Some(first) = runs.first() else {
        return ServeFigure {
            dtype: String::new(),
            concurrency: 0,
            stages: 0,
            tokens: 0,
            aggregate_tokens_per_s: 0.0,
            generate_tokens_per_s: 0.0,
            ratio: 0.0,
            batch_tokens_per_s: 0.0,
            batch_ratio: 0.0,
            ttft_p50_ms: 0.0,
            ttft_p95_ms: 0.0,
            ttft_loaded_ms: 0.0,
            itl_p50_ms: 0.0,
            itl_p95_ms: 0.0,
            failed: 0,
        };
    };
    ServeFigure {
        aggregate_tokens_per_s: med(|f| f.aggregate_tokens_per_s),
        ttft_p50_ms: med(|f| f.ttft_p50_ms),
        ttft_p95_ms: med(|f| f.ttft_p95_ms),
        ttft_loaded_ms: med(|f| f.ttft_loaded_ms),
        itl_p50_ms: med(|f| f.itl_p50_ms),
        itl_p95_ms: med(|f| f.itl_p95_ms),
        failed: runs.iter().map(|f| f.failed).sum(),
        ..first.clone()
    }
}

/// How a benchmarked session is laid out on this host.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Stages (one node process each).
    pub stages: u32,
    /// One micro-batch in flight, every core for the stage computing it (`run local
    /// --layout one-host`), or the multi-host shape (`--layout multi-host`).
    pub one_host: bool,
    /// Compute threads of each stage worker.
    pub threads: u32,
    /// Micro-batches in flight at most (`None`: the layout's default).
    pub groups: Option<u16>,
    /// The prefill time budget, ms (`None`: the session's default).
    pub prefill_budget_ms: Option<u64>,
}

impl Shape {
    /// The `run local` arguments that lay a session out so.
    pub fn args(&self) -> Vec<String> {
        let mut a = vec![
            "--stages".to_string(),
            self.stages.to_string(),
            "--threads".to_string(),
            self.threads.to_string(),
            "--layout".to_string(),
            if self.one_host { "one-host" } else { "multi-host" }.to_string(),
        ];
        a.extend(self.groups.map(|g| format!("--groups={g}")));
        a.extend(self.prefill_budget_ms.map(|b| format!("--prefill-budget-ms={b}")));
        a
    }
}

/// A session of `concurrency` requests of `tokens` tokens of `model` laid out as `shape`,
/// requests written to `dir`.
pub fn serve_run(
    exe: &Path,
    model: &Path,
    shape: Shape,
    concurrency: u32,
    tokens: u32,
    dir: &Path,
) -> Result<ServeFigure, BenchError> {
    let file = dir.join(format!("requests-{concurrency}.jsonl"));
    let lines: String = (0..concurrency as usize)
        .map(|i| {
            let r = serde_json::json!({
                "id": format!("r{i}"),
                "prompt": PROMPTS[i % PROMPTS.len()],
                "max_tokens": tokens,
            });
            format!("{r}\n")
        })
        .collect();
    std::fs::write(&file, lines).map_err(err)?;
    let mut child = std::process::Command::new(exe)
        .args(["run", "local", "--stream", "--requests"])
        .arg(&file)
        .arg("--model")
        .arg(model)
        .args(shape.args())
        .args(["--max-sequences", &concurrency.to_string(), "--max-seq-len", "512"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(err)?;
    let stdout = child.stdout.take().ok_or_else(|| err("no stdout"))?;
    let mut arrivals: HashMap<String, Vec<Instant>> = HashMap::new();
    let mut ttft = Vec::new();
    let mut failed = 0u64;
    for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
        let now = Instant::now();
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let id = v["id"].as_str().unwrap_or_default().to_string();
        match v["type"].as_str() {
            Some("token") => arrivals.entry(id).or_default().push(now),
            Some("result") => ttft.extend(v["ttft_ms"].as_f64()),
            Some("error") => failed += 1,
            _ => {}
        }
    }
    let status = child.wait().map_err(err)?;
    if !status.success() {
        return Err(err(format!("swactor run local --requests failed ({status})")));
    }
    let streams: Vec<&[Instant]> = arrivals.values().map(Vec::as_slice).collect();
    let total: u64 = streams.iter().map(|a| a.len() as u64).sum();
    let after_first = streams.iter().map(|a| a.len().saturating_sub(1) as u64).sum();
    let counts = Counts { total, after_first, failed };
    Ok(figure_of(&streams, counts, ttft, concurrency, shape.stages))
}

/// A level's token counts: in all, after each request's first, and failed requests.
pub struct Counts {
    /// Tokens generated in all.
    pub total: u64,
    /// Tokens after each request's first.
    pub after_first: u64,
    /// Requests that failed.
    pub failed: u64,
}

/// A level's figures from each request's token arrivals, its counts and its times to
/// first token (ms): the aggregate over the window from the first first-token to the last
/// token, and the quantiles.
pub fn figure_of(
    arrivals: &[&[Instant]],
    counts: Counts,
    mut ttft: Vec<f64>,
    concurrency: u32,
    stages: u32,
) -> ServeFigure {
    let first = arrivals.iter().filter_map(|a| a.first()).min().copied();
    let last = arrivals.iter().filter_map(|a| a.last()).max().copied();
    let window = first.zip(last).map_or(0.0, |(f, l)| (l - f).as_secs_f64());
    let mut itl: Vec<f64> = arrivals
        .iter()
        .flat_map(|a| a.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3))
        .collect();
    itl.sort_by(f64::total_cmp);
    ttft.sort_by(f64::total_cmp);
    let rate = if window > 0.0 { counts.after_first as f64 / window } else { 0.0 };
    ServeFigure {
        dtype: String::new(),
        concurrency,
        stages,
        tokens: counts.total,
        aggregate_tokens_per_s: rate,
        generate_tokens_per_s: 0.0,
        ratio: 0.0,
        batch_tokens_per_s: 0.0,
        batch_ratio: 0.0,
        ttft_p50_ms: quantile(&ttft, 0.5),
        ttft_p95_ms: quantile(&ttft, 0.95),
        ttft_loaded_ms: 0.0,
        itl_p50_ms: quantile(&itl, 0.5),
        itl_p95_ms: quantile(&itl, 0.95),
        failed: counts.failed,
    }
}

/// One-sequence `swactor generate` at `threads` compute threads: decode tokens/s.
pub fn generate_rate_threads(
    exe: &Path,
    model: &Path,
    threads: u32,
    tokens: u32,
) -> Result<f64, BenchError> {
    let output = std::process::Command::new(exe)
        .args(["generate", "--json", "--prompt", PROMPTS[0]])
        .arg("--model")
        .arg(model)
        .args(["--max-tokens", &tokens.to_string(), "--max-seq-len", "512"])
        .args(["--threads", &threads.to_string()])
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(err)?;
    if !output.status.success() {
        return Err(err(format!("swactor generate failed ({})", output.status)));
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "generation")
        .and_then(|v| v["decode_tokens_per_s"].as_f64())
        .ok_or_else(|| err("no generation summary"))
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_pick_the_nearest_rank_of_sorted_values() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!((quantile(&v, 0.5), quantile(&v, 0.95), quantile(&[], 0.5)), (3.0, 5.0, 0.0));
    }
}
