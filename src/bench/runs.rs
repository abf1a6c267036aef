//! Benchmarks that run whole commands or a local pool and read their figures: decode rates
//! of `generate` (whole and split), a `run local` pipeline's rate, start-to-first-token and
//! worker-to-worker hops, and failover after a SIGKILL. The CLI only prints them.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use serde::Serialize;

use super::{BenchError, err};

/// One model's decode rates, whole and split in one process.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeFigure {
    /// The model (its weight type, or the re-quantized type).
    pub dtype: String,
    /// Decode tokens/s of the whole model in one stage.
    pub whole_tokens_per_s: f64,
    /// Decode tokens/s split into `stages` stages in one process.
    pub split_tokens_per_s: f64,
    /// Split over whole (or pipeline over generate).
    pub ratio: f64,
    /// Stage count.
    pub stages: u32,
    /// Tokens decoded.
    pub tokens: u32,
}

/// Runs `swactor generate --json` at one compute thread; returns decode tokens/s.
pub fn generate_rate(
    exe: &std::path::Path,
    model: &std::path::Path,
    stages: u32,
    tokens: u32,
) -> Result<f64, BenchError> {
    let output = std::process::Command::new(exe)
        .args([
            "generate",
            "--json",
            "--prompt",
            "Once upon a time there was a little girl named Lily.",
        ])
        .arg("--model")
        .arg(model)
        .args([
            "--stages",
            &stages.to_string(),
            "--max-tokens",
            &tokens.to_string(),
            "--max-seq-len",
            "512",
        ])
        .args(["--threads", "1"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(err)?;
    if !output.status.success() {
        return Err(err(format!("swactor generate failed ({})", output.status)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "generation")
        .ok_or_else(|| err("no generation summary"))?;
    summary["decode_tokens_per_s"].as_f64().ok_or_else(|| err("no decode rate"))
}

/// The first model as `label`, every further one labelled by its file name, then a copy of
/// the first re-quantized into `dir` for each `--requantize` type.
pub fn with_requantized(
    models: &[std::path::PathBuf],
    requantize: &[String],
    label: String,
    dir: &std::path::Path,
) -> Result<Vec<(String, std::path::PathBuf)>, BenchError> {
    let Some(model) = models.first() else { return Err(err("no model")) };
    let mut out = vec![(label, model.clone())];
    // Further models (`--model` again): measured as shipped, labelled by their file name.
    for m in &models[1..] {
        let stem = m.file_stem().map(|s| s.to_string_lossy().into_owned());
        out.push((stem.unwrap_or_else(|| m.display().to_string()), m.clone()));
    }
    let mut models = out;
    for q in requantize {
        let target = crate::model::quantize::parse_recipe(q)
            .ok_or_else(|| err(format!("unknown type `{q}`")))?;
        let path = dir.join(format!("model-{q}.gguf"));
        crate::model::quantize::quantize_file(model, &path, target).map_err(err)?;
        models.push((q.clone(), path));
    }
    Ok(models)
}

/// Writes the 1.1B llama of the real-size figures into `dir` (22 blocks, hidden 2048,
/// 32 / 4 heads, ffn 5632, vocab 32000, Q4_0, seeded): its label and path.
pub fn synth_1b(dir: &std::path::Path) -> Result<(String, std::path::PathBuf), BenchError> {
    use crate::model::synth::{SynthDType, SynthSpec, write_model};
    let spec = SynthSpec {
        blocks: 22,
        hidden: 2048,
        heads: 32,
        kv_heads: 4,
        ffn: 5632,
        vocab: 32000,
        dtype: SynthDType::Q4_0,
        ..SynthSpec::default()
    };
    let path = dir.join("synth-1b-q4_0.gguf");
    write_model(&path, &spec).map_err(err)?;
    Ok(("1b q4_0".into(), path))
}

/// A private temporary directory for re-quantized copies, removed however the benchmark
/// ends (success, error or panic).
pub struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    /// Creates it (0700) in the temporary directory.
    pub fn create() -> Result<ScratchDir, BenchError> {
        use std::os::unix::fs::DirBuilderExt;
        #[allow(clippy::disallowed_methods)] // a unique name, not a measurement
        let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("swactor-bench-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| err(format!("cannot create {}: {e}", dir.display())))?;
        Ok(ScratchDir(dir))
    }
}

impl std::ops::Deref for ScratchDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One model's `run local` pipeline figures beside `generate`.
#[derive(Debug, Clone, Serialize)]
pub struct PipelineFigure {
    /// The model (its weight type, or the re-quantized type).
    pub dtype: String,
    /// Decode tokens/s of `swactor generate`.
    pub generate_tokens_per_s: f64,
    /// Decode tokens/s of the `run local` pipeline.
    pub pipeline_tokens_per_s: f64,
    /// Split over whole (or pipeline over generate).
    pub ratio: f64,
    /// Stage count.
    pub stages: u32,
    /// Tokens decoded.
    pub tokens: u32,
    /// From spawning `run local` to its first token.
    pub start_to_first_token_ms: f64,
    /// Median worker-to-worker hop of a decode object.
    pub hop_median_us: f64,
    /// 99th percentile of the same hops.
    pub hop_p99_us: f64,
    /// Hops measured.
    pub hops_measured: usize,
    /// Each stage's memory, predicted beside measured.
    pub memory: Vec<super::memory::StageMemory>,
}

/// What one `run local` measured.
#[derive(Debug, Clone)]
pub struct PipelineRun {
    /// Decode tokens/s its summary reports.
    pub rate: f64,
    /// From spawning it to its first token, ms.
    pub first_ms: f64,
    /// Worker-to-worker hops of decode objects, µs.
    pub hops: Vec<u64>,
    /// Each node's peak resident bytes (node and worker processes), by node id.
    pub peaks: std::collections::BTreeMap<u64, u64>,
}

/// Runs `swactor run local --json` at one compute thread per worker; returns the decode
/// rate its summary reports and the wall time from spawning it to its first token line.
#[allow(clippy::disallowed_methods)] // a benchmark owns the clock
pub fn pipeline_rate(
    exe: &std::path::Path,
    model: &std::path::Path,
    stages: u32,
    tokens: u32,
) -> Result<PipelineRun, BenchError> {
    use std::collections::HashMap;
    use std::io::BufRead;
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(exe)
        .args(["run", "local", "--json", "--prompt"])
        .arg("Once upon a time there was a little girl named Lily.")
        .arg("--model")
        .arg(model)
        .args(["--stages", &stages.to_string(), "--max-tokens", &tokens.to_string()])
        .args(["--max-seq-len", "512", "--threads", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .map_err(err)?;
    let stdout = child.stdout.take().ok_or_else(|| err("no stdout"))?;
    let mut first = None;
    let mut rate = None;
    // Decode objects on activation edges: produced on one host clock, loaded on the next.
    let mut produced: HashMap<(u64, u64), u64> = HashMap::new();
    let mut hops = Vec::new();
    let mut peaks = std::collections::BTreeMap::new();
    let mut seen = 0u32;
    for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let key = (v["edge_id"].as_u64().unwrap_or(0), v["sequence"].as_u64().unwrap_or(0));
        if let Some(at) = v["origin_us"].as_u64().filter(|_| key.1 >= 1) {
            if v["type"] == "object_produced" {
                produced.insert(key, at);
            } else if v["type"] == "object_loaded"
                && let Some(p) = produced.remove(&key)
            {
                hops.push(at.saturating_sub(p));
            }
        }
        if v["type"] == "token" {
            first.get_or_insert_with(|| start.elapsed().as_secs_f64() * 1e3);
            seen += 1;
            // Peaks only grow: a sample at the last token (before teardown) holds them
            // all, read once so that reading `/proc` takes no time from the workers.
            if seen == tokens {
                super::memory::keep_peaks(&mut peaks, super::memory::stage_peaks(child.id()));
            }
        }
        if v["type"] == "run" {
            rate = v["decode_tokens_per_s"].as_f64();
        }
    }
    let status = child.wait().map_err(err)?;
    match (status.success(), rate, first) {
        (true, Some(rate), Some(first)) => Ok(PipelineRun { rate, first_ms: first, hops, peaks }),
        _ => Err(err(format!("swactor run local failed ({status})"))),
    }
}

/// One failover run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverFigure {
    /// The run (1-based).
    pub run: u32,
    /// From the SIGKILL to `run_faulted`.
    pub kill_to_run_faulted_ms: f64,
    /// From the SIGKILL to `run_torn_down`.
    pub kill_to_run_torn_down_ms: f64,
    /// The fault reported.
    pub reason: String,
}

/// Kills node 2 at the fifth token and stamps the run's fault and teardown events.
struct FailoverSink {
    victim: u32,
    killed_at: Option<std::time::Instant>,
    faulted: Option<(f64, String)>,
    torn_down: Option<f64>,
    count: u32,
}

#[allow(clippy::disallowed_methods)] // a benchmark owns the clock
impl crate::orchestrator::driver::RunSink for FailoverSink {
    fn event(&mut self, line: &crate::events::EventLine) {
        let Some(at) = self.killed_at else { return };
        let ms = at.elapsed().as_secs_f64() * 1e3;
        match &line.event {
            crate::events::Event::RunFaulted { reason, .. } => {
                self.faulted.get_or_insert((ms, reason.to_string()));
            }
            crate::events::Event::RunTornDown { .. } => {
                self.torn_down.get_or_insert(ms);
            }
            _ => {}
        }
    }

    fn token(&mut self, _request: usize, _id: u32, _text: &str) {
        self.count += 1;
        if self.count == 5
            && let Some(pid) = rustix::process::Pid::from_raw(self.victim as i32)
        {
            self.killed_at = Some(std::time::Instant::now());
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }

    fn progress(&mut self, _message: &str) {}
}

/// One failover run: a `run local`-style pool of `stages` child nodes of `exe`, a run on
/// a synthesized model, node 2 SIGKILLed at the fifth token; the times from the kill to
/// `run_faulted` and `run_torn_down`.
pub async fn failover_run(
    exe: &std::path::Path,
    stages: u32,
    run: u32,
) -> Result<FailoverFigure, BenchError> {
    use crate::orchestrator::driver::{OrchestrateConfig, orchestrate};
    use crate::orchestrator::local::{LocalPool, LocalPoolConfig};
    let config = LocalPoolConfig {
        exe: exe.to_path_buf(),
        nodes: stages,
        worker_threads: 1,
        arena_bytes: 64 << 20,
        node_logs: false,
    };
    let mut pool = LocalPool::start(&config).await.map_err(err)?;
    let model = pool.dir().join("synth.gguf");
    crate::model::synth::write_model(&model, &crate::model::synth::SynthSpec::default())
        .map_err(err)?;
    let file = crate::model::gguf::GgufFile::open(&model).map_err(err)?;
    let facts = file.facts().map_err(err)?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header()).map_err(err)?;
    let runtime = crate::wire::RuntimeConfig {
        max_seq_len: 2048,
        kv_cache: Default::default(),
        activation_dtype: crate::wire::ActivationDType::F32,
        max_tokens: 2000,
        sampling: crate::wire::SamplingPolicy::Greedy,
        max_sequences: 1,
        max_top_logprobs: None,
        mask_bytes: 0,
    };
    let prompt = tokenizer.encode("Once upon a time", true, false);
    let config = OrchestrateConfig {
        requests: vec![crate::orchestrator::requests::Request {
            id: "0".into(),
            prompt,
            max_tokens: runtime.max_tokens,
            sampling: runtime.sampling,
            stop: Vec::new(),
            logprobs: None,
            speculative: true,
            cache_prompt: true,
            constraint: None,
        }],
        run_id: crate::wire::RunId(u64::from(run)),
        pool_timeout: std::time::Duration::from_secs(30),
        resume: crate::orchestrator::reform::ResumePolicy::DISABLED,
        ..OrchestrateConfig::local(&pool, &model, runtime)
    };
    let mut sink = FailoverSink {
        victim: pool.pid(2).unwrap_or(0),
        killed_at: None,
        faulted: None,
        torn_down: None,
        count: 0,
    };
    let result =
        orchestrate(config, None, &facts, &tokenizer, &mut sink, std::future::pending()).await;
    pool.stop().await;
    result.map_err(err)?;
    let (faulted, reason) = sink.faulted.unwrap_or((f64::NAN, "none".into()));
    Ok(FailoverFigure {
        run,
        kill_to_run_faulted_ms: faulted,
        kill_to_run_torn_down_ms: sink.torn_down.unwrap_or(f64::NAN),
        reason,
    })
}
