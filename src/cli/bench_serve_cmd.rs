//! `swactor bench serve`: a session serving N concurrent requests beside one-sequence
//! `generate` and one process batching the same N sequences, with the CPU named.

use super::args::{BenchServeArgs, BenchSpeculateArgs};
use super::bench_cmd::{check_requantize, exe, failed, print_cpu};
use super::exit::CliError;
use super::output::Output;
use super::progress::Progress;
use crate::bench;

/// `swactor bench serve`.
pub fn serve(args: &BenchServeArgs, out: &mut Output) -> Result<(), CliError> {
    check_requantize(&args.requantize)?;
    if args.stages == 0 || args.concurrency.iter().any(|&c| c == 0 || c > 256) {
        return Err(CliError::new(
            super::exit::ExitCode::Usage,
            "usage",
            color_eyre::eyre::eyre!("--stages must be at least 1 and each concurrency in 1..=256"),
        ));
    }
    let dir = bench::runs::ScratchDir::create().map_err(failed)?;
    let mut models =
        bench::runs::with_requantized(&args.model, &args.requantize, "shipped".into(), &dir)
            .map_err(failed)?;
    if args.synth_1b {
        models.push(bench::runs::synth_1b(&dir).map_err(failed)?);
    }
    print_cpu(args.output.json, out)?;
    let mut progress = Progress::new(args.output.json);
    let repeat = args.repeat.max(1) as usize;
    let per_level = if args.http { 2 * repeat } else { repeat };
    progress.bar((models.len() * (per_level * args.concurrency.len() + 1)) as u64, "bench serve");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let shape = bench::serve::Shape {
        stages: args.stages,
        one_host: args.layout == crate::cli::args::Layout::OneHost,
        threads: args.layout.threads(args.threads, cores),
        groups: args.groups,
        prefill_budget_ms: args.prefill_budget_ms,
    };
    // The baselines get this host's every core: the best one process does on them.
    let threads = cores;
    for (dtype, path) in &models {
        progress.message(format!("bench serve: {dtype}: generate"));
        let generate = bench::serve::generate_rate_threads(&exe()?, path, threads, args.tokens)
            .map_err(failed)?;
        progress.step();
        let mut one_ttft = None;
        let mut one_rate = None;
        let mut one_http_ttft = None;
        for &c in &args.concurrency {
            // Each repetition runs the batch job and then, with --http, the same level
            // through HTTP: the pairs share the host's state of the moment.
            let (mut direct, mut http) = (Vec::new(), Vec::new());
            for _ in 0..repeat {
                progress.message(format!("bench serve: {dtype}: {c} concurrent"));
                let fig = bench::serve::serve_run(&exe()?, path, shape, c, args.tokens, &dir)
                    .map_err(failed)?;
                progress.step();
                direct.push(fig);
                if args.http {
                    progress.message(format!("bench serve: {dtype}: {c} concurrent over HTTP"));
                    let exe = exe()?;
                    let fig = bench::serve_http::serve_http_run(&exe, path, shape, c, args.tokens)
                        .map_err(failed)?;
                    progress.step();
                    http.push(fig);
                }
            }
            let mut fig = bench::serve::median_figure(&direct);
            fig.dtype = dtype.clone();
            fig.generate_tokens_per_s = generate;
            fig.ratio = fig.aggregate_tokens_per_s / generate;
            if c > 1 {
                progress.message(format!("bench serve: {dtype}: one process batching {c}"));
                fig.batch_tokens_per_s =
                    bench::batch_rate(path, threads, c as usize, args.tokens).map_err(failed)?;
                fig.batch_ratio = fig.aggregate_tokens_per_s / fig.batch_tokens_per_s;
            }
            if c == 1 {
                one_ttft = Some(fig.ttft_p50_ms);
                one_rate = Some(fig.aggregate_tokens_per_s);
            }
            if args.output.json {
                out.json("bench_serve", &fig)?;
            } else {
                let line = direct_line(&fig, threads, (one_ttft, one_rate));
                progress.suspend(|| out.line(line))?;
            }
            if args.http {
                let mut http = bench::serve::median_figure(&http);
                http.dtype = dtype.clone();
                if c == 1 {
                    one_http_ttft = Some(http.ttft_p50_ms);
                }
                print_http(out, &mut progress, args.output.json, &fig, &http, one_http_ttft)?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// One level's figures through HTTP beside the batch job's.
fn print_http(
    out: &mut Output,
    progress: &mut Progress,
    json: bool,
    direct: &bench::serve::ServeFigure,
    http: &bench::serve::ServeFigure,
    single_ttft: Option<f64>,
) -> Result<(), CliError> {
    let ratio = http.aggregate_tokens_per_s / direct.aggregate_tokens_per_s;
    if json {
        let line = serde_json::json!({
            "dtype": direct.dtype, "concurrency": direct.concurrency, "http": http,
            "direct": direct, "aggregate_ratio": ratio, "single_ttft_ms": single_ttft,
        });
        out.json("bench_serve_http", &line)?;
        return Ok(());
    }
    let loaded = match single_ttft {
        Some(one) if http.ttft_loaded_ms > 0.0 => format!(
            "; a request arriving while {} decode: ttft {:.0} ms = {:.2} x alone (target < 2)",
            direct.concurrency - 1,
            http.ttft_loaded_ms,
            http.ttft_loaded_ms / one
        ),
        _ => String::new(),
    };
    progress.suspend(|| {
        out.line(format!(
            "{:<8} {:>2} over HTTP:   aggregate {:>6.1} tok/s = {:.3} of the batch job (target \
             >= 0.95); ttft p50 {:.0} ms p95 {:.0} ms (batch {:.0} / {:.0}); inter-token p50 \
             {:.1} ms p95 {:.1} ms; {} tokens, {} failed{loaded}",
            direct.dtype,
            direct.concurrency,
            http.aggregate_tokens_per_s,
            ratio,
            http.ttft_p50_ms,
            http.ttft_p95_ms,
            direct.ttft_p50_ms,
            direct.ttft_p95_ms,
            http.itl_p50_ms,
            http.itl_p95_ms,
            http.tokens,
            http.failed
        ))
    })?;
    Ok(())
}

/// One level's line without HTTP: the session beside its baselines and targets (`single`:
/// the 1-concurrent time to first token and aggregate rate, where measured).
fn direct_line(
    fig: &bench::serve::ServeFigure,
    threads: u32,
    single: (Option<f64>, Option<f64>),
) -> String {
    let (c, generate) = (fig.concurrency, fig.generate_tokens_per_s);
    let (one_ttft, one_rate) = single;
    let target = match (c, one_ttft) {
        (8, Some(one)) => format!(
            "   (targets: ratio >= 3 x own single, batching ratio >= 0.8, ttft p50 \
             < 2 x {one:.0} ms = {:.0} ms)",
            2.0 * one
        ),
        (8, None) => "   (target: batching ratio >= 0.8)".into(),
        _ => String::new(),
    };
    let own = match one_rate {
        Some(one) if c > 1 && one > 0.0 => {
            format!(", {:.2} x own single", fig.aggregate_tokens_per_s / one)
        }
        _ => String::new(),
    };
    let batching = if fig.batch_tokens_per_s > 0.0 {
        format!(
            ", one process batching {c} {:.1} tok/s, ratio {:.2}",
            fig.batch_tokens_per_s, fig.batch_ratio
        )
    } else {
        String::new()
    };
    format!(
        "{:<8} {:>2} concurrent: aggregate {:>6.1} tok/s, generate ({} threads) \
             {:>6.1} tok/s, ratio {:.2}{own}{batching}; ttft p50 {:.0} ms p95 {:.0} ms; inter-token \
             p50 {:.1} ms p95 {:.1} ms; {} tokens, {} failed{target}",
        fig.dtype,
        c,
        fig.aggregate_tokens_per_s,
        threads,
        generate,
        fig.ratio,
        fig.ttft_p50_ms,
        fig.ttft_p95_ms,
        fig.itl_p50_ms,
        fig.itl_p95_ms,
        fig.tokens,
        fig.failed
    )
}

/// `swactor bench speculate`.
pub fn speculate(args: &BenchSpeculateArgs, out: &mut Output) -> Result<(), CliError> {
    let grounded = bench::speculate::grounded_prompts(&args.grounded).map_err(failed)?;
    let free: Vec<(String, u32)> = (0..args.free as usize)
        .map(|i| (bench::serve::PROMPTS[i % bench::serve::PROMPTS.len()].to_string(), args.tokens))
        .collect();
    print_cpu(args.output.json, out)?;
    let mut progress = Progress::new(args.output.json);
    let layouts = [0, args.stages];
    progress.bar((2 * layouts.len() * (grounded.len() + free.len())) as u64, "bench speculate");
    for (workload, prompts) in [("grounded", &grounded), ("free", &free)] {
        for stages in layouts {
            let layout =
                if stages == 0 { "one process".to_string() } else { format!("{stages} stages") };
            let mut pairs = Vec::new();
            for (prompt, tokens) in prompts {
                progress.message(format!("bench speculate: {workload}, {layout}"));
                let run = |on| {
                    let models = (args.model.as_path(), args.draft_model.as_deref());
                    bench::speculate::spec_run(&exe()?, models, stages, (prompt, *tokens), on)
                        .map_err(failed)
                };
                let off = run(false)?;
                progress.step();
                let on = run(true)?;
                progress.step();
                pairs.push((off, on));
            }
            let drafter = match &args.draft_model {
                Some(d) => {
                    d.file_name().map_or("draft model".into(), |n| n.to_string_lossy().into())
                }
                None => "ngram".to_string(),
            };
            let fig = bench::speculate::figure((workload, layout, drafter), &pairs);
            if args.output.json {
                out.json("bench_speculate", &fig)?;
            } else {
                let target = match (workload, stages) {
                    ("grounded", s) if s > 0 => " (target >= 2)",
                    ("free", _) => " (target >= 0.97)",
                    _ => "",
                };
                let how = if args.draft_model.is_some() { "draft" } else { "ngram" };
                let line = format!(
                    "{:<8} {:<12} {} prompts: off {:>6.1} tok/s, {how} {:>6.1} tok/s, ratio \
                     {:.2}{target}; acceptance {:.2}, mean draft {:.1} tokens",
                    fig.workload,
                    fig.layout,
                    fig.prompts,
                    fig.off_tokens_per_s,
                    fig.on_tokens_per_s,
                    fig.ratio,
                    fig.acceptance,
                    fig.mean_draft_length
                );
                progress.suspend(|| out.line(line))?;
            }
            out.flush()?;
        }
    }
    Ok(())
}
