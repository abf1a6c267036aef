//! `swactor bench ring` and `swactor bench wake`.

use color_eyre::eyre::eyre;

use super::args::{BenchRingArgs, BenchWakeArgs};
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
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
    let result = runtime()?
        .block_on(bench::ring_throughput(
            exe()?,
            args.ring_mib * MIB,
            args.span_kib * 1024,
            args.object_mib * MIB,
            args.total_mib * MIB,
        ))
        .map_err(failed)?;
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
    let result = runtime()?
        .block_on(bench::wake_round_trip(exe()?, args.samples, args.bytes))
        .map_err(failed)?;
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
