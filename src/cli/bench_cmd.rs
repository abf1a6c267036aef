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

pub(super) fn exe() -> Result<std::path::PathBuf, CliError> {
    std::env::current_exe().map_err(CliError::from)
}

pub(super) fn failed(e: bench::BenchError) -> CliError {
    CliError::internal(eyre!(e))
}

/// Every `--requantize` type must be one `model quantize` knows (a usage error otherwise,
/// before anything is written).
pub(super) fn check_requantize(types: &[String]) -> Result<(), CliError> {
    match types.iter().find(|q| crate::model::quantize::parse_recipe(q).is_none()) {
        Some(q) => Err(CliError::new(ExitCode::Usage, "usage", eyre!("unknown type `{q}`"))),
        None => Ok(()),
    }
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
        vec!["ratio".into(), format!("{:.2} (target >= 0.7)", result.ratio)],
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

/// The CPU line every benchmark of compute prints first (`bench_cpu` under `--json`).
pub(super) fn print_cpu(json: bool, out: &mut Output) -> Result<(), CliError> {
    let cpu = bench::cpu::this_cpu();
    if json {
        out.json("bench_cpu", &cpu)?
    } else {
        out.line(cpu.to_string())?
    }
    Ok(())
}

/// The most common non-f32 tensor type of a model (what it "is": `q4_1`, `q8_0`, ...).
fn model_label(path: &std::path::Path) -> Result<String, CliError> {
    let facts = crate::model::read_facts(path).map_err(|e| super::exit::model_error(path, e))?;
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
    check_requantize(&args.requantize)?;
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models = Vec::new();
    for m in &args.model {
        models.push((model_label(m)?, m.clone()));
    }
    for q in &args.requantize {
        let target = crate::model::quantize::parse_recipe(q)
            .ok_or_else(|| CliError::new(ExitCode::Usage, "usage", eyre!("unknown type `{q}`")))?;
        let path = dir.join(format!("model-{q}.gguf"));
        crate::model::quantize::quantize_file(&args.model[0], &path, target)
            .map_err(|e| CliError::internal(eyre!(e)))?;
        models.push((q.clone(), path));
    }
    let config = bench::EngineBenchConfig {
        tokens: args.tokens,
        prompt_tokens: args.prompt_tokens.clone(),
        batches: args.batch.clone(),
        repeat: args.repeat,
    };
    if args.prompt_tokens.contains(&0) || args.prompt_tokens.is_empty() {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--prompt-tokens takes lengths of at least 1"),
        ));
    }
    let cpu = bench::cpu::this_cpu();
    if args.output.json {
        out.json("bench_cpu", &cpu)?;
    } else {
        out.line(cpu.to_string())?;
        let prefills: Vec<String> =
            args.prompt_tokens.iter().map(|n| format!("{:>11}", format!("prefill {n}"))).collect();
        out.line(format!(
            "{:<8} {:>3}  {:>12}  {}  {:<30}  {:>16}",
            "model",
            "thr",
            "decode tok/s",
            prefills.join("  "),
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
                let prefills: Vec<String> =
                    fig.prefill.iter().map(|(_, r)| format!("{r:>11.1}")).collect();
                out.line(format!(
                    "{:<8} {:>3}  {:>12.1}  {}  {:<30}  {:>7.1} ({})",
                    fig.label,
                    fig.threads,
                    fig.decode_tokens_per_s,
                    prefills.join("  "),
                    batches.join("  "),
                    fig.load_ms,
                    fig.candle_load_ms.map_or("-".to_string(), |ms| format!("{ms:.1}"))
                ))?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// `swactor bench decode`.
pub fn decode(args: &BenchDecodeArgs, out: &mut Output) -> Result<(), CliError> {
    let first = args.model.first().map(|p| p.as_path()).unwrap_or(std::path::Path::new(""));
    let facts = crate::model::read_facts(first).map_err(|e| super::exit::model_error(first, e))?;
    let shipped = facts
        .tensor_types
        .iter()
        .filter(|(t, _)| t.as_str() != "f32")
        .max_by_key(|(_, n)| **n)
        .map(|(t, _)| t.clone())
        .unwrap_or_else(|| "f32".into());
    check_requantize(&args.requantize)?;
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models = bench::runs::with_requantized(&args.model, &args.requantize, shipped, &dir)
        .map_err(failed)?;
    if args.synth_1b {
        models.push(bench::runs::synth_1b(&dir).map_err(failed)?);
    }
    let mut figures = Vec::new();
    let mut progress = Progress::new(args.output.json);
    progress.bar(models.len() as u64 * u64::from(args.repeat.max(1)), "bench decode");
    for (dtype, path) in &models {
        let mut whole = 0f64;
        let mut split = 0f64;
        for _ in 0..args.repeat.max(1) {
            progress.message(format!("bench decode: {dtype}"));
            whole = whole
                .max(bench::runs::generate_rate(&exe()?, path, 1, args.tokens).map_err(failed)?);
            split = split.max(
                bench::runs::generate_rate(&exe()?, path, args.stages, args.tokens)
                    .map_err(failed)?,
            );
            progress.step();
        }
        let fig = bench::runs::DecodeFigure {
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
    let mut r = rt
        .block_on(bench::edge(args.mib << 20, args.object_bytes, args.samples))
        .map_err(failed)?;
    progress.spinner("timing workers' wake-ups".to_string());
    for part in &mut r.parts {
        part.worker_wake_us = rt
            .block_on(bench::wake_round_trip(exe()?, args.samples, part.object_bytes))
            .map_err(failed)?
            .median_us;
    }
    progress.clear();
    print_cpu(args.output.json, out)?;
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
                "median {:.0} µs, p99 {:.0} µs for {} bytes (ring to ring in one process)",
                r.hop_median_us, r.hop_p99_us, r.object_bytes
            ),
        ],
    ];
    for line in table(&rows) {
        out.line(line)?;
    }
    for p in &r.parts {
        out.line(format!(
            "hop of {} bytes: quic {:.0} µs (through a relay on this host {:.0} µs: +{:.0} µs); \
             ring to ring through the pumps {:.0} µs; a worker's wake (doorbell, read, control \
             line) {:.0} µs; modeled hop = ring to ring + 2 wakes = {:.0} µs (target < {} µs)",
            p.object_bytes,
            p.quic_us,
            p.relayed_quic_us,
            p.relayed_quic_us - p.quic_us,
            p.ring_to_ring_us,
            p.worker_wake_us,
            p.modeled_us(),
            if p.object_bytes < 4096 { 200 } else { 300 }
        ))?;
    }
    Ok(())
}

/// `swactor bench pipeline`.
pub fn pipeline(args: &BenchDecodeArgs, out: &mut Output) -> Result<(), CliError> {
    check_requantize(&args.requantize)?;
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models =
        bench::runs::with_requantized(&args.model, &args.requantize, "shipped".into(), &dir)
            .map_err(failed)?;
    if args.synth_1b {
        models.push(bench::runs::synth_1b(&dir).map_err(failed)?);
    }
    print_cpu(args.output.json, out)?;
    let mut progress = Progress::new(args.output.json);
    progress.bar(models.len() as u64 * u64::from(args.repeat.max(1)), "bench pipeline");
    for (dtype, path) in &models {
        let (mut whole, mut split, mut first) = (0f64, 0f64, f64::MAX);
        let mut hops = Vec::new();
        let mut peaks = std::collections::BTreeMap::new();
        for _ in 0..args.repeat.max(1) {
            progress.message(format!("bench pipeline: {dtype}"));
            whole = whole
                .max(bench::runs::generate_rate(&exe()?, path, 1, args.tokens).map_err(failed)?);
            let run = bench::runs::pipeline_rate(&exe()?, path, args.stages, args.tokens)
                .map_err(failed)?;
            split = split.max(run.rate);
            first = first.min(run.first_ms);
            hops.extend(run.hops);
            bench::memory::keep_peaks(&mut peaks, run.peaks);
            progress.step();
        }
        let memory = bench::memory::predicted(path, args.stages, 512)
            .map_err(failed)?
            .into_iter()
            .map(|(stage, node_id, predicted_bytes)| bench::memory::StageMemory {
                stage,
                node_id,
                predicted_bytes,
                measured_bytes: peaks.get(&node_id).copied().unwrap_or(0),
            })
            .collect();
        hops.sort_unstable();
        let pick = |q: f64| {
            hops.get(((hops.len().saturating_sub(1)) as f64 * q).round() as usize)
                .map_or(0.0, |&v| v as f64)
        };
        let fig = bench::runs::PipelineFigure {
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
            memory,
        };
        if args.output.json {
            out.json("bench_pipeline", &fig)?;
        } else {
            progress.suspend(|| {
                out.line(format!(
                "{:<8} generate {:>6.1} tok/s   run local ({} stages) {:>6.1} tok/s   ratio {:.3} \
                 (target >= 0.95)   start to first token {:.0} ms   hop worker to worker \
                 median {:.0} µs, p99 {:.0} µs (target < 200 µs, < 1000 µs) over {} decode objects",
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
            for m in &fig.memory {
                progress.suspend(|| {
                    out.line(format!(
                        "         stage {} (node {}): predicted {:.1} MiB, resident at most \
                         {:.1} MiB (node and worker)",
                        m.stage,
                        m.node_id,
                        m.predicted_bytes as f64 / 1048576.0,
                        m.measured_bytes as f64 / 1048576.0
                    ))
                })?;
            }
        }
        out.flush()?;
    }
    Ok(())
}

/// `swactor bench failover`.
pub fn failover(args: &super::args::BenchFailoverArgs, out: &mut Output) -> Result<(), CliError> {
    if args.stages < 2 {
        return Err(CliError::new(ExitCode::Usage, "usage", eyre!("--stages must be at least 2")));
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    if let (true, Some(model)) = (args.resume, args.model.as_deref()) {
        let r = failover_resume(&rt, args, model, out);
        rt.shutdown_timeout(std::time::Duration::from_secs(2));
        return r;
    }
    let mut progress = Progress::new(args.output.json);
    progress.bar(u64::from(args.repeat.max(1)), "bench failover");
    for run in 1..=args.repeat.max(1) {
        let fig =
            rt.block_on(bench::runs::failover_run(&exe()?, args.stages, run)).map_err(failed)?;
        progress.step();
        if args.output.json {
            out.json("bench_failover", &fig)?;
        } else {
            progress.suspend(|| {
                out.line(format!(
                    "run {}: SIGKILL of node 2 -> run_faulted ({}) {:.0} ms (target < 1000), \
                     -> run_torn_down {:.0} ms (target < 3000)",
                    fig.run, fig.reason, fig.kill_to_run_faulted_ms, fig.kill_to_run_torn_down_ms
                ))
            })?;
        }
        out.flush()?;
    }
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(())
}

/// `swactor bench failover --resume`: each series (spare node, survivors alone) x each
/// count of requests in flight, `--repeat` runs each.
fn failover_resume(
    rt: &tokio::runtime::Runtime,
    args: &super::args::BenchFailoverArgs,
    model: &std::path::Path,
    out: &mut Output,
) -> Result<(), CliError> {
    let exe = exe()?;
    let repeat = args.repeat.max(1);
    let mut progress = Progress::new(args.output.json);
    let modes = bench::failover::ResumeMode::ALL;
    let points = modes.len() as u64 * args.sequences.len() as u64 * u64::from(repeat);
    progress.bar(points, "bench failover --resume");
    // Time to the first resumed token per (mode, sequences), for the ratio line.
    let mut first = std::collections::HashMap::new();
    for mode in modes {
        for &sequences in &args.sequences {
            let mut runs = Vec::new();
            for _ in 0..repeat {
                let load = bench::failover::ResumeLoad {
                    stages: args.stages,
                    sequences,
                    tokens: args.tokens,
                    kill_after: args.kill_after,
                };
                let run = bench::failover::resume_run(&exe, model, mode, load);
                let fig = rt.block_on(run).map_err(failed)?;
                progress.step();
                if args.output.json {
                    out.json("bench_failover_resume_run", &fig)?;
                }
                runs.push(fig);
            }
            let s = bench::failover::summarize(&runs);
            let replay = s.first_token_p50_ms - s.provision_p50_ms;
            first.insert((mode.name(), sequences), (s.first_token_p50_ms, replay));
            if args.output.json {
                out.json("bench_failover_resume", &s)?;
            } else {
                progress.suspend(|| {
                    out.line(format!(
                        "{:<13} {:>2} in flight: SIGKILL -> first resumed token p50 {:.0} ms, \
                         max {:.0} ms (target < 1500 with a spare); p50 from the kill: \
                         run_faulted at {:.0} ms (max {:.0}, target < 1000), torn down at \
                         {:.0}, re-planned at {:.0}, serving at {:.0} ms; {} stages after; \
                         {} of {} replayed positions kept; {} requests failed",
                        s.mode,
                        s.sequences,
                        s.first_token_p50_ms,
                        s.first_token_max_ms,
                        s.detect_p50_ms,
                        s.detect_max_ms,
                        s.teardown_p50_ms,
                        s.gate_p50_ms,
                        s.provision_p50_ms,
                        s.stages_after,
                        s.kept_tokens,
                        s.replayed_tokens,
                        s.failed
                    ))
                })?;
            }
            out.flush()?;
        }
    }
    for &sequences in &args.sequences {
        let p50 = |mode| first.get(&(mode, sequences)).copied().unwrap_or((f64::NAN, f64::NAN));
        let ((keep, keep_replay), (rebuild, rebuild_replay)) = (p50("spare"), p50("spare-rebuild"));
        let line = format!(
            "{sequences:>2} in flight, spare: first resumed token {keep:.0} ms keeping the caches \
             of the stages that stayed, {rebuild:.0} ms rebuilding every stage ({:.2}x); the \
             replay alone (serving to first token) {keep_replay:.0} ms against \
             {rebuild_replay:.0} ms ({:.2}x)",
            rebuild / keep,
            rebuild_replay / keep_replay
        );
        if args.output.json {
            let ratio = serde_json::json!({
                "sequences": sequences, "keep_ms": keep, "rebuild_ms": rebuild,
                "rebuild_over_keep": rebuild / keep, "keep_replay_ms": keep_replay,
                "rebuild_replay_ms": rebuild_replay,
                "replay_rebuild_over_keep": rebuild_replay / keep_replay,
            });
            out.json("bench_failover_resume_keep", &ratio)?;
        } else {
            progress.suspend(|| out.line(line))?;
        }
    }
    Ok(())
}
