//! Failure detection without false positives: with a busy thread on every core, a healthy
//! pool keeps running for a minute. `run local` runs (three nodes, the orchestrator and
//! their SWIM) follow one another on a synthesized model; every one completes, and none
//! sees a node declared down or a stage lost.
//!
//! Its own test binary: it loads every core on purpose, so it must not share the machine
//! with the other integration tests (cargo runs test binaries one after another).
#![allow(clippy::disallowed_methods)] // the test measures a minute of wall time

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long the pool runs under load.
const LOADED_FOR: Duration = Duration::from_secs(60);

/// Busy threads, one per core, stopped (and joined) when dropped.
struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
}

impl Hogs {
    fn start() -> Hogs {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                    x
                })
            })
            .collect();
        Hogs { stop, threads }
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn a_healthy_pool_with_every_core_busy_runs_for_a_minute_without_a_node_declared_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = dir.path().join("synth.gguf");
    let spec = swactor::model::synth::SynthSpec { blocks: 6, ..Default::default() };
    swactor::model::synth::write_model(&model, &spec).expect("synthesize model");
    let exe = assert_cmd::cargo::cargo_bin("swactor");

    let hogs = Hogs::start();
    let start = Instant::now();
    let mut runs = 0;
    while start.elapsed() < LOADED_FOR {
        let out = Command::new(&exe)
            .env("TMPDIR", dir.path())
            .args(["run", "local", "--json", "--stages", "3", "--threads", "1"])
            .args(["--max-tokens", "200", "--prompt", "Once upon a time"])
            .arg("--model")
            .arg(&model)
            .output()
            .expect("run local");
        runs += 1;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let faults: Vec<&str> = stdout
            .lines()
            .filter(|l| {
                ["\"run_faulted\"", "\"stage_lost\"", "node_down"].iter().any(|k| l.contains(k))
            })
            .collect();
        assert!(faults.is_empty(), "run {runs} after {:?}: {faults:?}", start.elapsed());
        assert!(out.status.success(), "run {runs} exited {}: {stderr}", out.status);
        assert!(stdout.contains("\"run_completed\""), "run {runs} did not complete: {stderr}");
    }
    drop(hogs);
    eprintln!("{runs} runs completed in {:?} with every core busy", start.elapsed());
    assert!(runs >= 2, "the pool ran for the whole minute");
}
