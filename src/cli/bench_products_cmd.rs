//! `swactor bench products`: where a forward's time goes, product by product.

use color_eyre::eyre::eyre;

use super::args::BenchProductsArgs;
use super::bench_cmd::{failed, print_cpu};
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
use crate::bench;
use swactor_engine::WeightFormat;

/// `swactor bench products`.
pub fn products(args: &BenchProductsArgs, out: &mut Output) -> Result<(), CliError> {
    if args.threads.contains(&0) || args.rows.contains(&0) || args.rows.is_empty() {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("threads and rows must be at least 1"),
        ));
    }
    let Some(model) = &args.model else {
        let formats = formats_asked(args.formats.as_deref().unwrap_or_default())?;
        return format_table(args, &formats, out);
    };
    crate::model::read_facts(model).map_err(|e| super::exit::model_error(model, e))?;
    print_cpu(args.output.json, out)?;
    for &threads in &args.threads {
        let figs = bench::products::products_figures(model, threads, &args.rows, args.repeat)
            .map_err(failed)?;
        for fig in figs {
            if args.output.json {
                out.json("bench_products", &fig)?;
                continue;
            }
            out.line(format!(
                "{} rows, {} threads, {}: forward {:.1} ms, memory read {:.1} GB/s \
                 (resident: GMAC/s with {} KiB of weights per thread in cache)",
                fig.rows,
                fig.threads,
                fig.isa,
                fig.forward_ms,
                fig.bandwidth_gbps,
                bench::products::RESIDENT_BYTES >> 10
            ))?;
            let mut rows = vec![
                [
                    "product", "format", "shape", "calls", "MB", "ms", "GB/s", "of bw", "GMAC/s",
                    "resident", "of fwd",
                ]
                .map(String::from)
                .to_vec(),
            ];
            for p in &fig.products {
                rows.push(vec![
                    p.product.clone(),
                    p.format.clone(),
                    format!("{}x{}", p.shape.0, p.shape.1),
                    p.calls.to_string(),
                    format!("{:.1}", p.bytes as f64 / 1e6),
                    format!("{:.2}", p.ms),
                    format!("{:.1}", p.gbps),
                    format!("{:.2}", p.of_bandwidth),
                    format!("{:.1}", p.gmacs),
                    format!("{:.1}", p.resident_gmacs),
                    format!("{:.2}", p.of_forward),
                ]);
            }
            let share = fig.other_ms / fig.forward_ms;
            rows.push(vec!["other".into(), String::new(), String::new(), String::new()]);
            rows.last_mut().expect("a row").extend([
                String::new(),
                format!("{:.2}", fig.other_ms),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                format!("{share:.2}"),
            ]);
            for line in table(&rows) {
                out.line(line)?;
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// The formats `--formats` names (`all`: every one the engine reads but f32), or a usage
/// error naming the unknown one.
fn formats_asked(names: &[String]) -> Result<Vec<WeightFormat>, CliError> {
    let mut formats = Vec::new();
    for name in names {
        let name = name.trim().to_ascii_lowercase();
        if name == "all" {
            formats.extend(WeightFormat::ALL.iter().filter(|f| **f != WeightFormat::F32));
            continue;
        }
        match WeightFormat::ALL.iter().find(|f| f.name() == name) {
            Some(f) => formats.push(*f),
            None => {
                let known: Vec<&str> = WeightFormat::ALL.iter().map(|f| f.name()).collect();
                return Err(CliError::new(
                    ExitCode::Usage,
                    "usage",
                    eyre!("unknown weight format `{name}` (known: all, {})", known.join(", ")),
                ));
            }
        }
    }
    formats.dedup();
    Ok(formats)
}

/// `bench products --formats`: each format's cache-resident single-row product at each
/// thread count.
fn format_table(
    args: &BenchProductsArgs,
    formats: &[WeightFormat],
    out: &mut Output,
) -> Result<(), CliError> {
    if args.cols == 0 || !args.cols.is_multiple_of(256) {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("--cols must be a positive multiple of 256, not {}", args.cols),
        ));
    }
    print_cpu(args.output.json, out)?;
    let mut rows =
        vec![["format", "tier", "threads", "shape", "resident GMAC/s"].map(String::from)];
    for &threads in &args.threads {
        for fig in bench::products::format_figures(formats, args.cols, threads).map_err(failed)? {
            if args.output.json {
                out.json("bench_format", &fig)?;
                continue;
            }
            rows.push([
                fig.format,
                fig.isa,
                fig.threads.to_string(),
                format!("{}x{}", fig.rows, fig.cols),
                format!("{:.1}", fig.resident_gmacs),
            ]);
        }
    }
    if !args.output.json {
        let rows: Vec<Vec<String>> = rows.into_iter().map(|r| r.to_vec()).collect();
        for line in table(&rows) {
            out.line(line)?;
        }
    }
    Ok(())
}
