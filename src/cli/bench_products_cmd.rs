//! `swactor bench products`: where a forward's time goes, product by product.

use color_eyre::eyre::eyre;

use super::args::BenchProductsArgs;
use super::bench_cmd::{failed, print_cpu};
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
use crate::bench;

/// `swactor bench products`.
pub fn products(args: &BenchProductsArgs, out: &mut Output) -> Result<(), CliError> {
    if args.threads.contains(&0) || args.rows.contains(&0) || args.rows.is_empty() {
        return Err(CliError::new(
            ExitCode::Usage,
            "usage",
            eyre!("threads and rows must be at least 1"),
        ));
    }
    crate::model::read_facts(&args.model).map_err(|e| super::exit::model_error(&args.model, e))?;
    print_cpu(args.output.json, out)?;
    for &threads in &args.threads {
        let figs = bench::products::products_figures(&args.model, threads, &args.rows, args.repeat)
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
