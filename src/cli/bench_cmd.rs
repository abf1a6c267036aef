//! `swactor bench ring` and `swactor bench wake`.

use color_eyre::eyre::eyre;

use super::args::{BenchDecodeArgs, BenchEdgeArgs, BenchEngineArgs, BenchRingArgs, BenchWakeArgs};
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
use super::progress::Progress;
use crate::bench;

fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(CliError::from)
}

fn exe() -> Result<std::path::PathBuf, CliError> {
    std::env::current_exe().map_err(CliError::from)
}

fn failed(e: bench::BenchError) -> CliError {
    CliError::internal(eyre!(e))
}

/// `swactor bench ring`.
pub fn ring(args: &BenchRingArgs, out: &mut Output) -> Result<(), CliError> {
    const MIB: u64 = 1 << 20;
    if args.ring_mib == 0 || args.span_kib == 0 || args.object_mib == 0 || args.total_mib == 0 {
        return Err(CliError::new(ExitCode::Usage, "usage", eyre!("sizes must be at least 1")));
    }
    let mut progress = Progress::new(args.output.json);
    progress.spinner(format!("streaming {} MiB through a ring", args.total_mib));
    let result = runtime()?
        .block_on(bench::ring_throughput(
            exe()?,
            args.ring_mib * MIB,
            args.span_kib * 1024,
            args.object_mib * MIB,
            args.total_mib * MIB,
        ))
        .map_err(failed)?;
    progress.clear();
    if args.output.json {
        out.json("bench_ring", &result)?;
        return Ok(());
    }
    let rows = vec![
        vec![
            "streamed".into(),
            format!(
                "{} MiB in {} KiB spans through a {} MiB ring",
                result.bytes / MIB,
                args.span_kib,
                args.ring_mib
            ),
        ],
        vec!["memcpy".into(), format!("{:.2} GB/s", result.memcpy_gbps)],
        vec!["ring, cross-process".into(), format!("{:.2} GB/s", result.ring_gbps)],
        vec!["ratio".into(), format!("{:.2} (target >= 0.5)", result.ratio)],
    ];
    for line in table(&rows) {
        out.line(line)?;
    }
    Ok(())
}

/// `swactor bench wake`.
pub fn wake(args: &BenchWakeArgs, out: &mut Output) -> Result<(), CliError> {
    if args.samples == 0 || args.bytes == 0 || !args.bytes.is_multiple_of(4) {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--samples must be >= 1 and --bytes a positive multiple of 4"),
        ));
    }
    let mut progress = Progress::new(args.output.json);
    progress.spinner(format!("timing {} wake round trips", args.samples));
    let result = runtime()?
        .block_on(bench::wake_round_trip(exe()?, args.samples, args.bytes))
        .map_err(failed)?;
    progress.clear();
    if args.output.json {
        out.json("bench_wake", &result)?;
        return Ok(());
    }
    let rows = vec![
        vec![
            "samples".into(),
            format!("{} objects of {} bytes", result.samples, result.object_bytes),
        ],
        vec!["median".into(), format!("{:.1} µs (target < 100 µs)", result.median_us)],
        vec!["p99".into(), format!("{:.1} µs", result.p99_us)],
        vec!["min".into(), format!("{:.1} µs", result.min_us)],
    ];
    for line in table(&rows) {
        out.line(line)?;
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct DecodeFigure {
    dtype: String,
    whole_tokens_per_s: f64,
    split_tokens_per_s: f64,
    ratio: f64,
    stages: u32,
    tokens: u32,
}

/// Runs `swactor generate --json` at one compute thread; returns decode tokens/s.
fn generate_rate(model: &std::path::Path, stages: u32, tokens: u32) -> Result<f64, CliError> {
    let output = std::process::Command::new(exe()?)
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
        .output()?;
    if !output.status.success() {
        return Err(CliError::internal(eyre!("swactor generate failed ({})", output.status)));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let summary = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["type"] == "generation")
        .ok_or_else(|| CliError::internal(eyre!("no generation summary")))?;
    summary["decode_tokens_per_s"]
        .as_f64()
        .ok_or_else(|| CliError::internal(eyre!("no decode rate")))
}

/// The most common non-f32 tensor type of a model (what it "is": `q4_1`, `q8_0`, ...).
fn model_label(path: &std::path::Path) -> Result<String, CliError> {
    let facts =
        crate::model::read_facts(path).map_err(|e| super::model_cmd::model_error(path, e))?;
    Ok(facts
        .tensor_types
        .iter()
        .filter(|(t, _)| t.as_str() != "f32")
        .max_by_key(|(_, n)| **n)
        .map(|(t, _)| t.clone())
        .unwrap_or_else(|| "f32".into()))
}

/// `swactor bench engine`.
pub fn engine(args: &BenchEngineArgs, out: &mut Output) -> Result<(), CliError> {
    if args.threads.contains(&0) || args.batch.contains(&0) || args.tokens == 0 {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("threads, batch sizes and tokens must be at least 1"),
        ));
    }
    let dir = ScratchDir::create()?;
    let mut models = Vec::new();
    for m in &args.model {
        models.push((model_label(m)?, m.clone()));
    }
    for q in &args.requantize {
        let target = crate::model::synth::parse_quant(q)
            .ok_or_else(|| CliError::new(ExitCode::Usage, "usage", eyre!("unknown type `{q}`")))?;
        let path = dir.join(format!("model-{q}.gguf"));
        crate::model::synth::quantize_file(&args.model[0], &path, target)
            .map_err(|e| CliError::internal(eyre!(e)))?;
        models.push((q.clone(), path));
    }
    let config = bench::EngineBenchConfig {
        tokens: args.tokens,
        prompt_tokens: args.prompt_tokens,
        batches: args.batch.clone(),
        repeat: args.repeat,
    };
    if !args.output.json {
        out.line(format!(
            "{:<8} {:>3}  {:>12}  {:>13}  {:<30}  {:>16}",
            "model",
            "thr",
            "decode tok/s",
            format!("prefill {}", args.prompt_tokens),
            "batch decode tok/s",
            "load ms (candle)"
        ))?;
    }
    for (label, path) in &models {
        for &threads in &args.threads {
            let fig = bench::engine_figures(label, path, threads, &config).map_err(failed)?;
            if args.output.json {
                out.json("bench_engine", &fig)?;
            } else {
                let batches: Vec<String> =
                    fig.batch_tokens_per_s.iter().map(|(b, r)| format!("{b}: {r:.1}")).collect();
                out.line(format!(
                    "{:<8} {:>3}  {:>12.1}  {:>13.1}  {:<30}  {:>7.1} ({:.1})",
                    fig.label,
                    fig.threads,
                    fig.decode_tokens_per_s,
                    fig.prefill_tokens_per_s,
                    batches.join("  "),
                    fig.load_ms,
                    fig.candle_load_ms
                ))?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// `swactor bench decode`.
pub fn decode(args: &BenchDecodeArgs, out: &mut Output) -> Result<(), CliError> {
    let facts = crate::model::read_facts(&args.model)
        .map_err(|e| super::model_cmd::model_error(&args.model, e))?;
    let shipped = facts
        .tensor_types
        .iter()
        .filter(|(t, _)| t.as_str() != "f32")
        .max_by_key(|(_, n)| **n)
        .map(|(t, _)| t.clone())
        .unwrap_or_else(|| "f32".into());
    let dir = ScratchDir::create()?;
    let models = with_requantized(args, shipped, &dir)?;
    let mut figures = Vec::new();
    let mut progress = Progress::new(args.output.json);
    progress.bar(models.len() as u64 * u64::from(args.repeat.max(1)), "bench decode");
    for (dtype, path) in &models {
        let mut whole = 0f64;
        let mut split = 0f64;
        for _ in 0..args.repeat.max(1) {
            progress.message(format!("bench decode: {dtype}"));
            whole = whole.max(generate_rate(path, 1, args.tokens)?);
            split = split.max(generate_rate(path, args.stages, args.tokens)?);
            progress.step();
        }
        let fig = DecodeFigure {
            dtype: dtype.clone(),
            whole_tokens_per_s: whole,
            split_tokens_per_s: split,
            ratio: split / whole,
            stages: args.stages,
            tokens: args.tokens,
        };
        if args.output.json {
            out.json("bench_decode", &fig)?;
        } else {
            progress.suspend(|| out.line(format!(
                "{:<6} whole {:>6.1} tok/s   {} stages {:>6.1} tok/s   ratio {:.3} (target >= 0.97)",
                fig.dtype, fig.whole_tokens_per_s, fig.stages, fig.split_tokens_per_s, fig.ratio
            )))?;
        }
        figures.push(fig);
    }
    Ok(())
}

/// The model as `label`, then a copy re-quantized into `dir` for each `--requantize` type.
fn with_requantized(
    args: &BenchDecodeArgs,
    label: String,
    dir: &std::path::Path,
) -> Result<Vec<(String, std::path::PathBuf)>, CliError> {
    let mut models = vec![(label, args.model.clone())];
    for q in &args.requantize {
        let target = crate::model::synth::parse_quant(q)
            .ok_or_else(|| CliError::new(ExitCode::Usage, "usage", eyre!("unknown type `{q}`")))?;
        let path = dir.join(format!("model-{q}.gguf"));
        crate::model::synth::quantize_file(&args.model, &path, target)
            .map_err(|e| CliError::internal(eyre!(e)))?;
        models.push((q.clone(), path));
    }
    Ok(models)
}

/// A private temporary directory for re-quantized copies, removed however the benchmark
/// ends (success, error or panic).
struct ScratchDir(std::path::PathBuf);

impl ScratchDir {
    fn create() -> Result<ScratchDir, CliError> {
        use std::os::unix::fs::DirBuilderExt;
        #[allow(clippy::disallowed_methods)] // a unique name, not a measurement
        let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("swactor-bench-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new().mode(0o700).create(&dir).map_err(|e| {
            CliError::new(
                ExitCode::Input,
                "io",
                eyre!(e).wrap_err(format!("cannot create {}", dir.display())),
            )
        })?;
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

/// `swactor bench edge`.
pub fn edge(args: &BenchEdgeArgs, out: &mut Output) -> Result<(), CliError> {
    if args.mib == 0 || args.object_bytes == 0 || args.samples == 0 {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("sizes and samples must be at least 1"),
        ));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut progress = Progress::new(args.output.json);
    progress.spinner(format!("streaming {} MiB over loopback QUIC", args.mib));
    let r = rt
        .block_on(bench::edge(args.mib << 20, args.object_bytes, args.samples))
        .map_err(failed)?;
    progress.clear();
    if args.output.json {
        out.json("bench_edge", &r)?;
        return Ok(());
    }
    let rows = vec![
        vec!["streamed".into(), format!("{} MiB over loopback QUIC", r.bytes >> 20)],
        vec!["raw iroh stream".into(), format!("{:.2} GB/s", r.raw_gbps)],
        vec!["edge, ring to ring".into(), format!("{:.2} GB/s", r.edge_gbps)],
        vec!["ratio".into(), format!("{:.2} (target >= 0.8)", r.ratio)],
        vec![
            "with workers' copies".into(),
            format!(
                "{:.2} GB/s, ratio {:.2} (copies share the pumps' cores)",
                r.edge_copying_gbps, r.ratio_copying
            ),
        ],
        vec![
            "hop latency".into(),
            format!(
                "median {:.0} µs, p99 {:.0} µs for {} bytes (target median < 500 µs)",
                r.hop_median_us, r.hop_p99_us, r.object_bytes
            ),
        ],
    ];
    for line in table(&rows) {
        out.line(line)?;
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct PipelineFigure {
    dtype: String,
    generate_tokens_per_s: f64,
    pipeline_tokens_per_s: f64,
    ratio: f64,
    stages: u32,
    tokens: u32,
    start_to_first_token_ms: f64,
    hop_median_us: f64,
    hop_p99_us: f64,
    hops_measured: usize,
}

/// Runs `swactor run local --json` at one compute thread per worker; returns the decode
/// rate its summary reports and the wall time from spawning it to its first token line.
#[allow(clippy::disallowed_methods)] // a benchmark owns the clock
fn pipeline_rate(
    model: &std::path::Path,
    stages: u32,
    tokens: u32,
) -> Result<(f64, f64, Vec<u64>), CliError> {
    use std::collections::HashMap;
    use std::io::BufRead;
    let start = std::time::Instant::now();
    let mut child = std::process::Command::new(exe()?)
        .args(["run", "local", "--json", "--prompt"])
        .arg("Once upon a time there was a little girl named Lily.")
        .arg("--model")
        .arg(model)
        .args(["--stages", &stages.to_string(), "--max-tokens", &tokens.to_string()])
        .args(["--max-seq-len", "512", "--threads", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or_else(|| CliError::internal(eyre!("no stdout")))?;
    let mut first = None;
    let mut rate = None;
    // Decode objects on activation edges: produced on one host clock, loaded on the next.
    let mut produced: HashMap<(u64, u64), u64> = HashMap::new();
    let mut hops = Vec::new();
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
        if v["type"] == "token" && first.is_none() {
            first = Some(start.elapsed().as_secs_f64() * 1e3);
        }
        if v["type"] == "run" {
            rate = v["decode_tokens_per_s"].as_f64();
        }
    }
    let status = child.wait()?;
    match (status.success(), rate, first) {
        (true, Some(rate), Some(first)) => Ok((rate, first, hops)),
        _ => Err(CliError::internal(eyre!("swactor run local failed ({status})"))),
    }
}

/// `swactor bench pipeline`.
pub fn pipeline(args: &BenchDecodeArgs, out: &mut Output) -> Result<(), CliError> {
    let dir = ScratchDir::create()?;
    let models = with_requantized(args, "shipped".into(), &dir)?;
    let mut progress = Progress::new(args.output.json);
    progress.bar(models.len() as u64 * u64::from(args.repeat.max(1)), "bench pipeline");
    for (dtype, path) in &models {
        let (mut whole, mut split, mut first) = (0f64, 0f64, f64::MAX);
        let mut hops = Vec::new();
        for _ in 0..args.repeat.max(1) {
            progress.message(format!("bench pipeline: {dtype}"));
            whole = whole.max(generate_rate(path, 1, args.tokens)?);
            let (rate, ttft, h) = pipeline_rate(path, args.stages, args.tokens)?;
            split = split.max(rate);
            first = first.min(ttft);
            hops.extend(h);
            progress.step();
        }
        hops.sort_unstable();
        let pick = |q: f64| {
            hops.get(((hops.len().saturating_sub(1)) as f64 * q).round() as usize)
                .map_or(0.0, |&v| v as f64)
        };
        let fig = PipelineFigure {
            dtype: dtype.clone(),
            generate_tokens_per_s: whole,
            pipeline_tokens_per_s: split,
            ratio: split / whole,
            stages: args.stages,
            tokens: args.tokens,
            start_to_first_token_ms: first,
            hop_median_us: pick(0.5),
            hop_p99_us: pick(0.99),
            hops_measured: hops.len(),
        };
        if args.output.json {
            out.json("bench_pipeline", &fig)?;
        } else {
            progress.suspend(|| {
                out.line(format!(
                "{:<8} generate {:>6.1} tok/s   run local ({} stages) {:>6.1} tok/s   ratio {:.3} \
                 (target >= 0.85)   start to first token {:.0} ms   hop worker to worker \
                 median {:.0} µs, p99 {:.0} µs over {} decode objects",
                fig.dtype,
                fig.generate_tokens_per_s,
                fig.stages,
                fig.pipeline_tokens_per_s,
                fig.ratio,
                fig.start_to_first_token_ms,
                fig.hop_median_us,
                fig.hop_p99_us,
                fig.hops_measured
            ))
            })?;
        }
        out.flush()?;
    }
    Ok(())
}

#[derive(serde::Serialize)]
struct FailoverFigure {
    run: u32,
    kill_to_run_faulted_ms: f64,
    kill_to_run_torn_down_ms: f64,
    reason: String,
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

    fn token(&mut self, _id: u32, _text: &str) {
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

/// `swactor bench failover`.
pub fn failover(args: &super::args::BenchFailoverArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::orchestrator::driver::{OrchestrateConfig, orchestrate};
    use crate::orchestrator::local::{LocalPool, LocalPoolConfig};
    if args.stages < 2 {
        return Err(CliError::new(ExitCode::Usage, "usage", eyre!("--stages must be at least 2")));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut progress = Progress::new(args.output.json);
    progress.bar(u64::from(args.repeat.max(1)), "bench failover");
    for run in 1..=args.repeat.max(1) {
        let fig = rt.block_on(async {
            let config = LocalPoolConfig {
                exe: exe()?,
                nodes: args.stages,
                worker_threads: 1,
                arena_bytes: 64 << 20,
                node_logs: false,
            };
            let mut pool =
                LocalPool::start(&config).await.map_err(|e| CliError::internal(eyre!(e)))?;
            let model = pool.dir().join("synth.gguf");
            crate::model::synth::write_model(&model, &crate::model::synth::SynthSpec::default())
                .map_err(|e| CliError::internal(eyre!(e)))?;
            let (content, len) = crate::model::gguf::read_content(&model)
                .map_err(|e| CliError::internal(eyre!(e)))?;
            let facts = crate::model::facts::facts_from_content(&content, len)
                .map_err(|e| CliError::internal(eyre!(e)))?;
            let tokenizer = crate::model::tokenizer::Tokenizer::from_gguf(&content)
                .map_err(|e| CliError::internal(eyre!(e)))?;
            let runtime = crate::wire::RuntimeConfig {
                max_seq_len: 2048,
                activation_dtype: crate::wire::ActivationDType::F32,
                max_tokens: 2000,
                sampling: crate::wire::SamplingPolicy::Greedy,
            };
            let config = OrchestrateConfig {
                pool: pool.pool.clone(),
                key: crate::orchestrator::driver::OrchestratorKey::Memory(
                    pool.orchestrator_key.clone(),
                ),
                listen: ([127, 0, 0, 1], 0).into(),
                swim: ([127, 0, 0, 1], 0).into(),
                advertise: None,
                model: model.clone(),
                source: crate::wire::WeightSource::Local { path: model.display().to_string() },
                prompt: tokenizer.encode("Once upon a time", true, false),
                stages: Some(args.stages),
                placement: Default::default(),
                runtime,
                run_id: crate::wire::RunId(u64::from(run)),
                window: std::time::Duration::from_millis(300),
                pool_timeout: std::time::Duration::from_secs(30),
                timeouts: crate::orchestrator::run::RunTimeouts {
                    readiness: std::time::Duration::from_secs(60),
                    token: std::time::Duration::from_secs(60),
                    teardown: std::time::Duration::from_secs(10),
                },
            };
            let mut sink = FailoverSink {
                victim: pool.pid(2).unwrap_or(0),
                killed_at: None,
                faulted: None,
                torn_down: None,
                count: 0,
            };
            let result =
                orchestrate(config, &facts, &tokenizer, &mut sink, std::future::pending()).await;
            pool.stop().await;
            result.map_err(|e| CliError::internal(eyre!(e)))?;
            let (faulted, reason) = sink.faulted.unwrap_or((f64::NAN, "none".into()));
            Ok::<_, CliError>(FailoverFigure {
                run,
                kill_to_run_faulted_ms: faulted,
                kill_to_run_torn_down_ms: sink.torn_down.unwrap_or(f64::NAN),
                reason,
            })
        })?;
        progress.step();
        if args.output.json {
            out.json("bench_failover", &fig)?;
        } else {
            progress.suspend(|| {
                out.line(format!(
                    "run {}: SIGKILL of node 2 -> run_faulted ({}) {:.0} ms (target < 2000), \
                     -> run_torn_down {:.0} ms (target < 5000)",
                    fig.run, fig.reason, fig.kill_to_run_faulted_ms, fig.kill_to_run_torn_down_ms
                ))
            })?;
        }
        out.flush()?;
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(())
}
