//! Memory at real sizes: a model larger than any node's memory runs split across the
//! pool, and each stage (its node and worker processes) holds no more than the plan
//! predicted for it, measured from `/proc`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use swactor::bench::memory::{children, peak_resident};
use swactor::model::synth::{SynthDType, SynthSpec, write_model};

use crate::run::{Nodes, SERIAL, exe};
use crate::session::{requests_file, results};
use crate::support::scratch;

/// A Q8_0 llama of about 170 MB (16 blocks of hidden 768, ffn 2816, vocab 16384):
/// repacked on load, as the files people run are.
fn large_model() -> PathBuf {
    large(
        "memory-large-q8_0.gguf",
        SynthSpec {
            blocks: 16,
            hidden: 768,
            heads: 12,
            kv_heads: 4,
            ffn: 2816,
            vocab: 16384,
            dtype: SynthDType::Q8_0,
            ..SynthSpec::default()
        },
    )
}

/// A Q8_0 Qwen 3 MoE of about 180 MB (8 blocks of hidden 768, 16 experts of 512 of which a
/// token runs 4, vocab 16384): every expert resident, a quarter of them read per token.
fn large_moe_model() -> PathBuf {
    large(
        "memory-large-qwen3moe-q8_0.gguf",
        SynthSpec {
            blocks: 8,
            hidden: 768,
            heads: 12,
            kv_heads: 4,
            ffn: 512,
            vocab: 16384,
            dtype: SynthDType::Q8_0,
            arch: swactor::model::synth::SynthArch::Qwen3Moe,
            experts: 16,
            experts_used: 4,
            ..SynthSpec::default()
        },
    )
}

fn large(name: &str, spec: SynthSpec) -> PathBuf {
    let path = scratch().join(name);
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let tmp = path.with_extension("tmp");
        write_model(&tmp, &spec).expect("synthesize model");
        std::fs::rename(&tmp, &path).expect("rename");
    }
    path
}

/// `run plan --json` for `model` on the pool at `pool` with `args`.
fn planned(model: &Path, pool: &Path, args: &[&str]) -> Value {
    let out = Command::new(exe())
        .args(["run", "plan", "--json", "--model"])
        .arg(model)
        .arg("--pool")
        .arg(pool)
        .args(args)
        .output()
        .expect("run plan");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf8");
    let line = text.lines().find(|l| l.contains("\"run_plan\"")).expect("a plan line");
    serde_json::from_str(line).expect("plan json")
}

#[test]
fn a_model_larger_than_any_node_runs_split_and_no_stage_holds_more_than_its_plan_predicted() {
    runs_split_within_plan(large_model(), "memory-large");
}

#[test]
fn a_mixture_of_experts_larger_than_any_node_runs_split_and_no_stage_holds_more_than_its_plan_predicted()
 {
    runs_split_within_plan(large_moe_model(), "memory-moe");
}

/// `model` (larger than any node) through three nodes with a session of 16 requests; each
/// node's and worker's peak resident memory stays within the stage's prediction.
fn runs_split_within_plan(model: PathBuf, tag: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The test's scratch directory outlives it: the large file goes with the test.
    struct Remove<'a>(&'a Path);
    impl Drop for Remove<'_> {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(self.0);
        }
    }
    let _remove = Remove(&model);
    let model_bytes = std::fs::metadata(&model).expect("model").len();
    let nodes = Nodes::boot(tag, 3, |_| vec![]);
    // Each node allows less than the whole model: only a split runs.
    let memory = model_bytes - (1 << 20);
    nodes.set_memory_bytes(memory);
    // A prompt-cache store of 4 MiB per node: the long distinct prompts below fill it
    // and evict from it while the peaks are read.
    let runtime =
        ["--max-seq-len", "128", "--max-sequences", "4", "--prompt-cache-bytes", "4194304"];
    let plan = planned(&model, nodes.pool_file(), &runtime);
    let stages = plan["stages"].as_array().expect("stages");
    assert!(stages.len() >= 2, "{plan}");
    let mut predicted = BTreeMap::new();
    for s in stages {
        let p = &s["prediction"];
        assert!(p["node_memory_bytes"].as_u64() < Some(model_bytes), "{p}");
        assert!(p["prompt_cache_bytes"].as_u64() > Some(0), "the store is counted: {p}");
        let (total, rings) = (p["total_bytes"].as_u64(), p["ring_bytes"].as_u64());
        predicted.insert(s["node_id"].as_u64().expect("node"), (total, rings));
    }

    // Each node's and worker's peak resident memory, read while the session runs.
    let pids: Vec<(u64, u32)> = (1..=3).map(|i| (u64::from(i), nodes.pid(i))).collect();
    let peaks: Arc<Mutex<BTreeMap<u64, (u64, u64)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peaks, done) = (peaks.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                for &(node, pid) in &pids {
                    let worker: u64 =
                        children(pid).into_iter().map(peak_resident).max().unwrap_or(0);
                    let mut peaks = peaks.lock().expect("peaks");
                    let e = peaks.entry(node).or_default();
                    e.0 = e.0.max(peak_resident(pid));
                    e.1 = e.1.max(worker);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let lines: Vec<Value> = (0..16)
        .map(|i| {
            let prompt = format!(
                "Story {i}: once upon a time a keeper counted the steps of tower {i} while \
                 the sea below kept its slow time and the gulls of harbour {i} slept"
            );
            json!({"id": format!("m{i}"), "prompt": prompt, "max_tokens": 24})
        })
        .collect();
    let file = requests_file(tag, &lines);
    let mut args: Vec<&str> = vec!["--requests", file.to_str().expect("path"), "--stages", "3"];
    args.extend(runtime);
    let (code, out, err) = nodes.orchestrate(&model, &args).finish();
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    assert_eq!(code, 0, "{err}");
    let done = results(&out);
    assert_eq!(done.len(), 16);
    assert!(done.values().all(|r| r["type"] == "result"), "{done:?}");

    let peaks = peaks.lock().expect("peaks");
    for (node, (total, rings)) in predicted {
        let (total, rings) = (total.expect("total"), rings.expect("rings"));
        let (node_peak, worker_peak) = peaks[&node];
        assert!(worker_peak > 0, "node {node}'s worker was never seen");
        // Both processes map the node's ring arena, so each counts the rings' pages.
        let measured = node_peak + worker_peak;
        eprintln!(
            "node {node}: predicted {} MiB, measured {} MiB (node {} + worker {})",
            total >> 20,
            measured >> 20,
            node_peak >> 20,
            worker_peak >> 20
        );
        assert!(
            measured <= total + rings,
            "node {node}: resident {measured} (node {node_peak}, worker {worker_peak}) > \
             predicted {total} (+ {rings} of rings mapped twice)"
        );
    }
}

#[test]
fn the_engines_scratch_for_the_largest_micro_batch_stays_within_the_planned_compute_bytes() {
    use swactor::model::synth::SynthArch;
    // Dense, and mixtures of experts (one with a shared expert wider than the rest).
    for arch in [SynthArch::Llama, SynthArch::Qwen3Moe, SynthArch::Qwen2Moe, SynthArch::GptOss] {
        let model = scratch().join(format!("memory-scratch-{}-q8_0.gguf", arch.name()));
        if !model.exists() {
            let spec =
                SynthSpec { blocks: 2, dtype: SynthDType::Q8_0, arch, ..SynthSpec::default() };
            write_model(&model, &spec).expect("synthesize model");
        }
        scratch_within_plan(&model);
    }
}

fn scratch_within_plan(model: &std::path::Path) {
    use swactor::model::GgufFile;
    use swactor::model::stage::{ComputeDevice, ModelStage, StageInput, StageSpec};
    let facts = swactor::model::read_facts(model).expect("facts");
    for (max_seq_len, head) in [(64u32, true), (96, false)] {
        let spec = StageSpec {
            layers: swactor::wire::LayerRange::new(0, facts.block_count),
            embedding: true,
            head,
            max_seq_len,
            kv_cache: Default::default(),
            device: ComputeDevice::Cpu,
            threads: 1,
        };
        let mut stage =
            ModelStage::load(&GgufFile::open(model).expect("model"), spec).expect("load");
        // The largest micro-batch: a whole prompt of `max_seq_len` rows in one pass.
        let prompt: Vec<u32> = (0..max_seq_len).map(|i| 1 + i % 200).collect();
        stage.forward(StageInput::Tokens(&prompt)).expect("forward");
        let used = stage.engine_mut().expect("engine").scratch_bytes() as u64;
        // The head samples one row here; the plan allows every entry of a full table.
        let bound = facts.compute_bytes(max_seq_len, max_seq_len, head, 1);
        assert!(
            used > 0 && used <= bound,
            "{}: scratch {used} > predicted {bound} (head {head})",
            facts.architecture
        );
    }
}
