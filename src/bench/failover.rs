//! `swactor bench failover --resume`: a `run local`-style pool of child nodes serving
//! `sequences` greedy requests through `stages` stages; once every request is decoding,
//! node 2 is SIGKILLed and the session re-forms — over a spare node (the pool has one
//! node more than stages) or over the survivors alone. Measured from the session's own
//! event stream: the time from the kill to the first resumed token and its parts
//! (detect: to `run_faulted`; teardown: to `run_torn_down`; pool gate and plan: to the new
//! `run_planned`; provision: to its `readiness_barrier_passed`; replay: to the first token
//! after it). Each run also checks that no request failed.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::{BenchError, err};
use crate::events::{Event, EventLine};
use crate::orchestrator::driver::{OrchestrateConfig, RunSink, orchestrate};
use crate::orchestrator::local::{LocalPool, LocalPoolConfig};
use crate::orchestrator::requests::{Request, RequestResult};

/// One resumed failover's figures, in milliseconds from the SIGKILL.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ResumeFigure {
    /// Re-formed over a spare node, the stages that stayed keeping their caches (`spare`),
    /// over a spare node with every stage rebuilding its caches (`spare-rebuild`,
    /// `--no-keep-caches`), or over the survivors alone (`survivors`).
    pub mode: String,
    /// Positions the resumed requests kept on the stages that stayed (`kept_tokens`).
    pub kept_tokens: u64,
    /// Positions they replayed in all.
    pub replayed_tokens: u64,
    /// Requests in flight.
    pub sequences: u32,
    /// To `run_faulted`.
    pub detect_ms: f64,
    /// To `run_torn_down` of the faulted run.
    pub teardown_ms: f64,
    /// To the re-formed run's `run_planned` (the pool gate's window and the plan).
    pub gate_ms: f64,
    /// To its `readiness_barrier_passed` (weights, edges).
    pub provision_ms: f64,
    /// To the first token after it (the replay's prefill).
    pub first_token_ms: f64,
    /// Stages of the re-formed run.
    pub stages_after: u32,
    /// Requests that failed (0 when nothing was lost).
    pub failed: u32,
}

/// Kills the victim once every request has a few tokens, and stamps the events after.
struct Sink {
    kill_after: u32,
    victim: u32,
    sequences: usize,
    counts: HashMap<usize, u32>,
    killed: Option<Instant>,
    fig: ResumeFigure,
    barrier: bool,
    failed: u32,
}

impl Sink {
    fn ms(&self) -> f64 {
        self.killed.map_or(f64::NAN, |k| k.elapsed().as_secs_f64() * 1e3)
    }
}

impl RunSink for Sink {
    fn event(&mut self, line: &EventLine) {
        if self.killed.is_none() {
            return;
        }
        let ms = self.ms();
        let f = &mut self.fig;
        match &line.event {
            Event::RunFaulted { .. } if f.detect_ms == 0.0 => f.detect_ms = ms,
            Event::RunTornDown { .. } if f.teardown_ms == 0.0 => f.teardown_ms = ms,
            Event::RunPlanned { stages, .. } if f.gate_ms == 0.0 => {
                f.gate_ms = ms;
                f.stages_after = *stages;
            }
            Event::ReadinessBarrierPassed { .. } if f.provision_ms == 0.0 => {
                f.provision_ms = ms;
                self.barrier = true;
            }
            Event::SequenceResumed { replayed_tokens, kept_tokens, .. } => {
                f.replayed_tokens += u64::from(*replayed_tokens);
                f.kept_tokens += u64::from(*kept_tokens);
            }
            _ => {}
        }
    }

    fn token(&mut self, request: usize, _id: u32, _text: &str) {
        if self.barrier && self.fig.first_token_ms == 0.0 {
            self.fig.first_token_ms = self.ms();
        }
        *self.counts.entry(request).or_default() += 1;
        let all_decoding = self.counts.len() == self.sequences
            && self.counts.values().all(|c| *c >= self.kill_after);
        if self.killed.is_none()
            && all_decoding
            && let Some(pid) = rustix::process::Pid::from_raw(self.victim as i32)
        {
            self.killed = Some(Instant::now());
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    fn result(&mut self, _request: usize, result: &RequestResult) {
        self.failed += u32::from(result.is_error());
    }

    fn progress(&mut self, _message: &str) {}
}

/// How a failover run re-forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeMode {
    /// Over a spare node; the stages that stay keep their caches.
    Spare,
    /// Over a spare node; every stage rebuilds its caches from the replay.
    SpareRebuild,
    /// Over the survivors alone.
    Survivors,
}

impl ResumeMode {
    /// Every mode, in the order the benchmark runs them.
    pub const ALL: [ResumeMode; 3] =
        [ResumeMode::Spare, ResumeMode::SpareRebuild, ResumeMode::Survivors];

    /// Its name in the figures.
    pub fn name(self) -> &'static str {
        match self {
            ResumeMode::Spare => "spare",
            ResumeMode::SpareRebuild => "spare-rebuild",
            ResumeMode::Survivors => "survivors",
        }
    }
}

/// What a failover run serves.
#[derive(Debug, Clone, Copy)]
pub struct ResumeLoad {
    /// Stages of the session (the pool has one node more with a spare).
    pub stages: u32,
    /// Requests in flight.
    pub sequences: u32,
    /// Tokens each generates.
    pub tokens: u32,
    /// Tokens every request has when node 2 is killed.
    pub kill_after: u32,
}

/// One resumed failover on a fresh local pool (one node more with a spare) serving `load`
/// on `model`.
pub async fn resume_run(
    exe: &Path,
    model: &Path,
    mode: ResumeMode,
    load: ResumeLoad,
) -> Result<ResumeFigure, BenchError> {
    let ResumeLoad { stages, .. } = load;
    let spare = mode != ResumeMode::Survivors;
    let config = LocalPoolConfig {
        exe: exe.to_path_buf(),
        nodes: stages + u32::from(spare),
        worker_threads: 1,
        arena_bytes: 256 << 20,
        node_logs: false,
    };
    let mut pool = LocalPool::start(&config).await.map_err(err)?;
    let keep = mode != ResumeMode::SpareRebuild;
    let result = run_on(&pool, model, load, keep).await;
    pool.stop().await;
    let mut fig = result?;
    fig.mode = mode.name().into();
    Ok(fig)
}

async fn run_on(
    pool: &LocalPool,
    model: &Path,
    load: ResumeLoad,
    keep: bool,
) -> Result<ResumeFigure, BenchError> {
    let ResumeLoad { stages, sequences, tokens, kill_after } = load;
    let file = crate::model::gguf::GgufFile::open(model).map_err(err)?;
    let facts = file.facts().map_err(err)?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header()).map_err(err)?;
    let runtime = crate::wire::RuntimeConfig {
        // Room for the prompts (under 128 tokens) and every token.
        max_seq_len: (tokens.max(kill_after + 2) + 128).max(512).next_multiple_of(256),
        kv_cache: Default::default(),
        activation_dtype: crate::wire::ActivationDType::F32,
        max_tokens: tokens.max(kill_after + 2),
        sampling: crate::wire::SamplingPolicy::Greedy,
        max_sequences: sequences,
        max_top_logprobs: None,
        mask_bytes: 0,
    };
    let requests = (0..sequences as usize)
        .map(|i| Request {
            id: i.to_string(),
            prompt: tokenizer.encode(super::serve::PROMPTS[i % 16], true, false),
            max_tokens: runtime.max_tokens,
            sampling: runtime.sampling,
            stop: Vec::new(),
            logprobs: None,
            speculative: true,
            cache_prompt: true,
            constraint: None,
        })
        .collect();
    // The pool may hold a spare node: the session starts on `stages` of them.
    let local = OrchestrateConfig::local(pool, model, runtime);
    let resume = crate::orchestrator::reform::ResumePolicy { keep_caches: keep, ..local.resume };
    let config = OrchestrateConfig { requests, stages: Some(stages), resume, ..local };
    let mut sink = Sink {
        kill_after,
        victim: pool.pid(2).unwrap_or(0),
        sequences: sequences as usize,
        counts: HashMap::new(),
        killed: None,
        fig: ResumeFigure { sequences, ..ResumeFigure::default() },
        barrier: false,
        failed: 0,
    };
    let report = orchestrate(config, None, &facts, &tokenizer, &mut sink, std::future::pending())
        .await
        .map_err(err)?;
    if sink.killed.is_none() {
        return Err(err("the run ended before every request was decoding"));
    }
    let mut fig = sink.fig;
    fig.failed = sink.failed + report.results.iter().filter(|r| r.is_error()).count() as u32;
    fig.failed = fig.failed.min(sequences);
    Ok(fig)
}

/// p50 and max of each part over repeated runs of one (mode, sequences) point.
#[derive(Debug, Clone, Serialize)]
pub struct ResumeSummary {
    /// The runs' mode.
    pub mode: String,
    /// Positions kept on the stages that stayed, over every run.
    pub kept_tokens: u64,
    /// Positions replayed, over every run.
    pub replayed_tokens: u64,
    /// Requests in flight.
    pub sequences: u32,
    /// Runs.
    pub runs: usize,
    /// Kill to the first resumed token: p50 and max.
    pub first_token_p50_ms: f64,
    /// Max of the same.
    pub first_token_max_ms: f64,
    /// Parts' medians: detect, teardown, gate, provision, first token.
    pub detect_p50_ms: f64,
    /// Teardown's median.
    pub teardown_p50_ms: f64,
    /// Pool gate and plan's median.
    pub gate_p50_ms: f64,
    /// Provision's median.
    pub provision_p50_ms: f64,
    /// Detection's max.
    pub detect_max_ms: f64,
    /// Stages after the re-formation.
    pub stages_after: u32,
    /// Requests that failed over all runs.
    pub failed: u32,
}

/// Summarizes `runs` of one point.
pub fn summarize(runs: &[ResumeFigure]) -> ResumeSummary {
    let sorted = |f: fn(&ResumeFigure) -> f64| {
        let mut v: Vec<f64> = runs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let p50 = |f| super::serve::quantile(&sorted(f), 0.5);
    let max = |f| sorted(f).last().copied().unwrap_or(f64::NAN);
    ResumeSummary {
        mode: runs.first().map(|r| r.mode.clone()).unwrap_or_default(),
        sequences: runs.first().map_or(0, |r| r.sequences),
        runs: runs.len(),
        first_token_p50_ms: p50(|r| r.first_token_ms),
        first_token_max_ms: max(|r| r.first_token_ms),
        detect_p50_ms: p50(|r| r.detect_ms),
        teardown_p50_ms: p50(|r| r.teardown_ms),
        gate_p50_ms: p50(|r| r.gate_ms),
        provision_p50_ms: p50(|r| r.provision_ms),
        detect_max_ms: max(|r| r.detect_ms),
        stages_after: runs.first().map_or(0, |r| r.stages_after),
        failed: runs.iter().map(|r| r.failed).sum(),
        kept_tokens: runs.iter().map(|r| r.kept_tokens).sum(),
        replayed_tokens: runs.iter().map(|r| r.replayed_tokens).sum(),
    }
}
