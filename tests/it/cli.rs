//! The `swactor` binary: output formats, exit codes and typed rejections.

use assert_cmd::Command;
use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;

use crate::support::{
    metadata_value_offset, pool, pool_file, scratch, synth_model, tensor_dims_offset,
};
use swactor::planner::pool::PoolPlacement;
use swactor::wire::NodeId;

fn swactor() -> Command {
    let mut cmd = Command::cargo_bin("swactor").expect("binary");
    cmd.env("RUST_BACKTRACE", "0").env("NO_COLOR", "1");
    cmd
}

fn stdout_json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn run_plan_prints_three_contiguous_ranges_and_four_edges_for_a_twelve_block_model() {
    let model = synth_model(12);
    let pool = pool_file("cli-pool-3.toml", &pool(3));
    let out = swactor()
        .args(["run", "plan", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .args(["--stages", "3"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).expect("utf8");
    for range in ["0..4", "4..8", "8..12"] {
        assert!(text.contains(range), "missing {range} in\n{text}");
    }
    for kind in ["token_in", "token_out"] {
        assert_eq!(text.matches(kind).count(), 1, "{kind} in\n{text}");
    }
    let activation_rows =
        text.lines().filter(|l| l.split_whitespace().nth(1) == Some("activation")).count();
    assert_eq!(activation_rows, 2, "two activation edges in\n{text}");
    assert_rings_hold_their_objects_or_say_they_stream(&text);

    let out = swactor()
        .args(["run", "plan", "--json", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .args(["--stages", "3"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    assert_eq!(lines.len(), 1);
    let plan = &lines[0];
    assert_eq!(plan["type"], "run_plan");
    let stages = plan["stages"].as_array().expect("stages");
    let ranges: Vec<(u64, u64)> = stages
        .iter()
        .map(|s| (s["layers"]["start"].as_u64().unwrap(), s["layers"]["end"].as_u64().unwrap()))
        .collect();
    assert_eq!(ranges, [(0, 4), (4, 8), (8, 12)]);
    let edges = plan["edges"].as_array().expect("edges");
    let ids: std::collections::HashSet<u64> =
        edges.iter().map(|e| e["edge_id"].as_u64().unwrap()).collect();
    assert_eq!((edges.len(), ids.len()), (4, 4));
    let kinds: Vec<&str> = edges.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["token_in", "activation", "activation", "token_out"]);
}

#[test]
fn a_pool_file_placing_an_unknown_node_is_rejected_with_exit_code_4() {
    let model = synth_model(12);
    let mut p = pool(3);
    p.placement =
        Some(PoolPlacement { nodes: Some(vec![NodeId(1), NodeId(9), NodeId(3)]), layers: None });
    let pool = pool_file("cli-pool-unknown.toml", &p);
    let assert = swactor()
        .args(["run", "plan", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("unknown_node") && stderr.contains("node 9"), "{stderr}");
    assert!(assert.get_output().stdout.is_empty(), "no data on stdout");

    let out = swactor()
        .args(["run", "plan", "--json", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .code(4)
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["reason"], "unknown_node");
    assert_eq!(lines[0]["exit_code"], 4);
}

#[test]
fn more_stages_than_blocks_are_rejected_with_exit_code_4() {
    let model = synth_model(12);
    let pool = pool_file("cli-pool-13.toml", &pool(13));
    let assert = swactor()
        .args(["run", "plan", "--stages", "13", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .code(4);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("too_many_stages"), "{stderr}");
}

#[test]
fn explicit_layers_on_the_command_line_override_the_pool_file() {
    let model = synth_model(12);
    let pool = pool_file("cli-pool-layers.toml", &pool(3));
    let out = swactor()
        .args(["run", "plan", "--json", "--layers", "0..2,2..12", "--nodes", "3,2", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let plan = &stdout_json_lines(&out)[0];
    let nodes: Vec<u64> =
        plan["stages"].as_array().unwrap().iter().map(|s| s["node_id"].as_u64().unwrap()).collect();
    assert_eq!(nodes, [3, 2]);
    assert_eq!(plan["stages"][0]["layers"]["end"], 2);
}

#[test]
fn a_malformed_pool_file_is_an_input_error() {
    let model = synth_model(12);
    let path = scratch().join("broken-pool.toml");
    std::fs::write(&path, "[orchestrator]\nnode_id = \"one\"\n").expect("write");
    let assert = swactor()
        .args(["run", "plan", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&path)
        .assert()
        .code(3);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("pool file"), "{stderr}");
}

#[test]
fn model_inspect_prints_facts_as_text_or_json() {
    let model = synth_model(12);
    let out = swactor()
        .args(["model", "inspect"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).expect("utf8");
    assert!(text.contains("blocks") && text.contains("12") && text.contains("llama"), "{text}");
    let out = swactor()
        .args(["model", "inspect", "--json"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    assert_eq!(lines[0]["type"], "model_facts");
    assert_eq!(lines[0]["block_count"], 12);
    assert_eq!(lines[0]["hidden_size"], 256);
    assert!(text.contains("2 stages would load 0..6"), "the default split's bytes: {text}");
    // Each of N stages: contiguous layers covering the model, and the weight bytes they
    // load add up to the file's tensors.
    let out = swactor()
        .args(["model", "inspect", "--json", "--stages", "5"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let facts = &stdout_json_lines(&out)[0];
    let stages = facts["stages"].as_array().expect("stages");
    assert_eq!(stages.len(), 5);
    let layers: Vec<&str> = stages.iter().map(|s| s["layers"].as_str().expect("layers")).collect();
    assert!(layers[0].starts_with("0..") && layers[4].ends_with("..12"), "{layers:?}");
    let loaded: u64 = stages.iter().map(|s| s["bytes"].as_u64().expect("bytes")).sum();
    let bytes = &facts["bytes"];
    let blocks: u64 =
        bytes["per_block"].as_array().expect("blocks").iter().filter_map(|b| b.as_u64()).sum();
    let total =
        blocks + bytes["embedding"].as_u64().expect("e") + bytes["head"].as_u64().expect("h");
    assert_eq!(loaded, total);
    swactor().args(["model", "inspect", "--stages", "13"]).arg(&model).assert().code(2);
}

#[test]
fn model_inspect_rejects_a_truncated_file_with_exit_code_3() {
    let bytes = std::fs::read(synth_model(12)).expect("read");
    let path = scratch().join("cli-trunc.gguf");
    std::fs::write(&path, &bytes[..bytes.len() / 3]).expect("write");
    let assert = swactor().args(["model", "inspect", "--json"]).arg(&path).assert().code(3);
    let lines = stdout_json_lines(&assert.get_output().stdout);
    assert_eq!(lines[0]["reason"], "truncated");
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("truncated") && !stderr.contains("panicked"), "{stderr}");
}

/// SmolLM2-135M, fetched by `.ci/fetch-models`. Required under CI; skipped (with a note)
/// on a developer machine that has not fetched it.
pub fn smollm2() -> Option<PathBuf> {
    let path = std::env::var_os("SWACTOR_SMOLLM2").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(".cache/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    });
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must provide SmolLM2 at {}", path.display());
    eprintln!("note: {} not fetched; run .ci/fetch-models", path.display());
    None
}

#[test]
fn model_inspect_reads_smollm2_135m() {
    let Some(model) = smollm2() else { return };
    let out = swactor()
        .args(["model", "inspect", "--json"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let f = &stdout_json_lines(&out)[0];
    assert_eq!(f["architecture"], "llama");
    assert_eq!(f["block_count"], 30);
    assert_eq!(f["hidden_size"], 576);
    assert_eq!(f["head_count"], 9);
    assert_eq!(f["head_count_kv"], 3);
    assert_eq!(f["vocab_size"], 49152);
    assert_eq!(f["tied_embeddings"], true);
    assert_eq!(f["tokenizer_pre"], "smollm");
}

#[test]
fn model_synth_reports_the_written_file_as_json() {
    let path = scratch().join("cli-synth.gguf");
    let out = swactor()
        .args([
            "model",
            "synth",
            "--json",
            "--blocks",
            "2",
            "--hidden",
            "64",
            "--heads",
            "4",
            "--kv-heads",
            "2",
            "--ffn",
            "64",
            "--vocab",
            "260",
            "--dtype",
            "q8_0",
            "--out",
        ])
        .arg(&path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let line = &stdout_json_lines(&out)[0];
    assert_eq!(line["type"], "model_synthesized");
    assert_eq!(line["dtype"], "q8_0");
    assert_eq!(line["bytes"], std::fs::metadata(&path).expect("file").len());
    swactor().args(["model", "synth", "--hidden", "60", "--out"]).arg(&path).assert().code(2);
}

#[test]
fn usage_errors_exit_with_code_2() {
    swactor().args(["run", "plan"]).assert().code(2);
    swactor().args(["no-such-command"]).assert().code(2);
    let model = synth_model(12);
    let pool = pool_file("cli-pool-usage.toml", &pool(3));
    swactor()
        .args(["run", "plan", "--temperature", "0.5", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .code(2);
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let bin = assert_cmd::cargo::cargo_bin("swactor");
    let mut child = std::process::Command::new(bin)
        .args(["util", "markdown-help"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let status = child.wait().expect("wait");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read");
    assert!(status.success(), "exit {status:?}, stderr: {stderr}");
    assert!(stderr.is_empty(), "stderr: {stderr}");
}

#[test]
fn hidden_commands_stay_out_of_the_help() {
    let out = swactor().arg("--help").assert().success().get_output().stdout.clone();
    let help = String::from_utf8(out).expect("utf8");
    assert!(help.contains("run") && help.contains("model"));
    assert!(!help.contains("util"), "{help}");
    swactor().args(["util", "completions", "bash"]).assert().success();
}

#[test]
fn the_readme_example_pool_plans_a_synthesized_model() {
    let pool = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/pool.toml");
    let out = swactor()
        .args(["run", "plan", "--json", "--model"])
        .arg(synth_model(12))
        .arg("--pool")
        .arg(&pool)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let plan = &stdout_json_lines(&out)[0];
    assert_eq!(plan["stages"].as_array().map(Vec::len), Some(3));
    // Node 2 has half the memory of the others, so it gets the fewest blocks.
    let len = |i: usize| {
        plan["stages"][i]["layers"]["end"].as_u64().unwrap()
            - plan["stages"][i]["layers"]["start"].as_u64().unwrap()
    };
    assert!(len(1) < len(0) && len(1) < len(2), "{plan}");
}

#[test]
fn the_benchmarks_run_a_real_worker_and_report_ratios_as_json() {
    let out = swactor()
        .args([
            "bench",
            "ring",
            "--json",
            "--ring-mib",
            "4",
            "--object-mib",
            "1",
            "--span-kib",
            "256",
            "--total-mib",
            "16",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let ring = &stdout_json_lines(&out)[0];
    assert_eq!(ring["type"], "bench_ring");
    let (r, m, ratio) = (
        ring["ring_gbps"].as_f64().unwrap(),
        ring["memcpy_gbps"].as_f64().unwrap(),
        ring["ratio"].as_f64().unwrap(),
    );
    assert!(r > 0.0 && m > 0.0 && (ratio - r / m).abs() < 1e-9, "{ring}");
    let out = swactor()
        .args(["bench", "wake", "--json", "--samples", "20"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let wake = &stdout_json_lines(&out)[0];
    assert_eq!(wake["type"], "bench_wake");
    assert_eq!(wake["samples"], 20);
    let (min, median, p99) = (
        wake["min_us"].as_f64().unwrap(),
        wake["median_us"].as_f64().unwrap(),
        wake["p99_us"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= p99, "{wake}");
}

#[test]
fn model_quantize_mxfp4_moe_puts_the_experts_in_mxfp4_keeps_the_router_and_the_model_still_runs() {
    use swactor::model::synth::{SynthArch, SynthSpec, write_model};
    let model = scratch().join("cli-quantize-qwen3moe-f32.gguf");
    let spec = SynthSpec {
        blocks: 2,
        hidden: 128,
        heads: 4,
        kv_heads: 2,
        ffn: 64,
        vocab: 300,
        arch: SynthArch::Qwen3Moe,
        ..SynthSpec::default()
    };
    write_model(&model, &spec).expect("synth");
    let out_path = scratch().join("cli-quantize-qwen3moe-mxfp4.gguf");
    swactor()
        .args(["model", "quantize", "--dtype", "mxfp4_moe", "--in"])
        .arg(&model)
        .arg("--out")
        .arg(&out_path)
        .assert()
        .success();
    let facts = swactor::model::read_facts(&out_path).expect("facts");
    // Per block: three expert stacks in MXFP4; the router and the norms stay f32; the
    // four attention matrices, the embedding and the head become Q8_0.
    assert_eq!(facts.tensor_types.get("mxfp4").copied(), Some(2 * 3), "{:?}", facts.tensor_types);
    assert_eq!(facts.tensor_types.get("q8_0").copied(), Some(2 * 4 + 2));
    let out = swactor()
        .args(["generate", "--json", "--prompt", "The river", "--max-tokens", "4", "--model"])
        .arg(&out_path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(stdout_json_lines(&out).iter().filter(|l| l["type"] == "token").count(), 4);
}

#[test]
fn model_quantize_rewrites_the_weight_matrices_and_generate_still_runs() {
    let model = synth_model(4);
    let out_path = scratch().join("cli-requantized-q8.gguf");
    let out = swactor()
        .args(["model", "quantize", "--json", "--dtype", "q8_0", "--in"])
        .arg(&model)
        .arg("--out")
        .arg(&out_path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let line = &stdout_json_lines(&out)[0];
    assert_eq!(line["type"], "model_quantized");
    assert_eq!(
        line["tensors_requantized"],
        4 * 7 + 2,
        "seven matrices per block, embedding and head"
    );
    let facts = swactor::model::read_facts(&out_path).expect("facts");
    assert_eq!(facts.tensor_types.get("q8_0").copied(), Some(30));
    let out = swactor()
        .args([
            "generate",
            "--json",
            "--prompt",
            "The river",
            "--max-tokens",
            "4",
            "--stages",
            "2",
            "--model",
        ])
        .arg(&out_path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    assert_eq!(lines.iter().filter(|l| l["type"] == "token").count(), 4);
    assert_eq!(lines.last().map(|l| l["type"].clone()), Some(serde_json::json!("generation")));
    // The K-quants the engine has SIMD kernels for: a model in each generates.
    for dtype in ["q2_k", "q3_k", "q5_k"] {
        let path = scratch().join(format!("cli-requantized-{dtype}.gguf"));
        swactor()
            .args(["model", "quantize", "--dtype", dtype, "--in"])
            .arg(&model)
            .arg("--out")
            .arg(&path)
            .assert()
            .success();
        let facts = swactor::model::read_facts(&path).expect("facts");
        let key = dtype.replace('_', "");
        assert!(facts.tensor_types.get(&key).is_some_and(|n| *n > 0), "{dtype}: {facts:?}");
        let out = swactor()
            .args(["generate", "--json", "--prompt", "The river", "--max-tokens", "4", "--model"])
            .arg(&path)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let tokens = stdout_json_lines(&out).iter().filter(|l| l["type"] == "token").count();
        assert_eq!(tokens, 4, "{dtype}");
    }
    swactor()
        .args(["model", "quantize", "--dtype", "q9_9", "--in"])
        .arg(&model)
        .arg("--out")
        .arg(&out_path)
        .assert()
        .code(2);
}

#[test]
fn bench_engine_names_the_cpu_and_its_kernel_tier_and_measures_every_prompt_length() {
    let model = synth_model(2);
    let out = swactor()
        .env("SWACTOR_ENGINE_ISA", "scalar")
        .args(["bench", "engine", "--json", "--threads", "1", "--tokens", "2"])
        .args(["--prompt-tokens", "8,20", "--batch", "1", "--repeat", "1", "--model"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    let cpu = lines.iter().find(|l| l["type"] == "bench_cpu").expect("a CPU line");
    assert_eq!(cpu["engine_isa"], "scalar");
    assert!(!cpu["model"].as_str().expect("model name").is_empty(), "{cpu}");
    let fig = lines.iter().find(|l| l["type"] == "bench_engine").expect("a figure");
    assert_eq!(fig["isa"], "scalar");
    let prefill = fig["prefill"].as_array().expect("prefill figures");
    let lengths: Vec<u64> = prefill.iter().map(|p| p[0].as_u64().expect("length")).collect();
    assert_eq!(lengths, [8, 20]);
    assert!(prefill.iter().all(|p| p[1].as_f64().expect("rate") > 0.0), "{fig}");
    swactor()
        .args(["bench", "engine", "--prompt-tokens", "0", "--model"])
        .arg(&model)
        .assert()
        .code(2);
}

#[test]
fn bench_products_times_every_product_of_every_block_against_the_bytes_it_reads_and_in_cache() {
    let model = synth_model(2);
    let out = swactor()
        .args(["bench", "products", "--json", "--threads", "1", "--rows", "1,6"])
        .args(["--repeat", "1", "--model"])
        .arg(&model)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    let cpu = lines.iter().find(|l| l["type"] == "bench_cpu").expect("the CPU line");
    // The CPU line carries the memory bandwidth measured (one thread, one per core).
    assert!(cpu["bandwidth_gbps"][0].as_f64() > Some(0.0), "{cpu}");
    let figs: Vec<_> = lines.iter().filter(|l| l["type"] == "bench_products").collect();
    let rows: Vec<u64> = figs.iter().map(|f| f["rows"].as_u64().expect("rows")).collect();
    assert_eq!(rows, [1, 6]);
    let weights = std::fs::metadata(&model).expect("model").len() as f64;
    for fig in figs {
        assert!(fig["bandwidth_gbps"].as_f64().expect("bandwidth") > 0.0, "{fig}");
        let products = fig["products"].as_array().expect("products");
        let mut names: Vec<&str> =
            products.iter().map(|p| p["product"].as_str().expect("name")).collect();
        names.sort_unstable();
        assert_eq!(names, ["attn_output", "down", "gate_up", "output", "qkv"], "{fig}");
        for p in products {
            let calls = if p["product"] == "output" { 1 } else { 2 };
            assert_eq!(p["calls"], calls, "{p}");
            assert!(p["ms"].as_f64().expect("ms") > 0.0, "{p}");
            // Its kernels' own rate, with the weights resident in cache.
            assert!(p["resident_gmacs"].as_f64().expect("resident") > 0.0, "{p}");
        }
        // The products read the model's matrices: all but the embedding and the norms.
        let read: f64 = products.iter().map(|p| p["bytes"].as_f64().expect("bytes")).sum();
        assert!(read > 0.5 * weights && read < weights, "{read} of {weights}");
    }
    swactor().args(["bench", "products", "--rows", "0", "--model"]).arg(&model).assert().code(2);
}

#[test]
fn generate_rejects_a_broken_model_with_exit_code_3_and_bad_stage_counts_with_2() {
    let bytes = std::fs::read(synth_model(4)).expect("read");
    let path = scratch().join("cli-generate-trunc.gguf");
    std::fs::write(&path, &bytes[..100]).expect("write");
    swactor().args(["generate", "--prompt", "x", "--model"]).arg(&path).assert().code(3);
    swactor()
        .args(["generate", "--prompt", "x", "--stages", "9", "--model"])
        .arg(synth_model(4))
        .assert()
        .code(2);
}

#[test]
fn node_id_creates_a_private_key_once_and_prints_a_stable_endpoint_id() {
    use std::os::unix::fs::PermissionsExt;
    let key = scratch().join("node-id.key");
    let _ = std::fs::remove_file(&key);
    let first = swactor()
        .args(["node", "id", "--key"])
        .arg(&key)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let id = String::from_utf8(first).expect("utf8").trim().to_string();
    assert!(swactor::planner::pool::is_endpoint_id(&id), "{id}");
    assert_eq!(std::fs::metadata(&key).expect("key").permissions().mode() & 0o777, 0o600);
    let out = swactor()
        .args(["node", "id", "--json", "--key"])
        .arg(&key)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        stdout_json_lines(&out)[0]["endpoint_id"],
        id.as_str(),
        "the same key gives the same id"
    );
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    swactor().args(["node", "id", "--key"]).arg(&key).assert().code(3);
}

#[test]
fn node_boot_faults_are_typed_and_exit_with_code_6() {
    let dir = scratch().join("boot-faults");
    let _ = std::fs::create_dir_all(&dir);
    let boot = |swim: &str, arena: &str, orchestrator: &str| {
        let mut cmd = swactor();
        cmd.args([
            "node",
            "boot",
            "--node-id",
            "9",
            "--listen",
            "127.0.0.1:0",
            "--swim",
            swim,
            "--arena-bytes",
            arena,
        ])
        .arg("--key")
        .arg(dir.join("n9.key"))
        .arg("--admin")
        .arg(dir.join("n9.sock"))
        .args(["--orchestrator", orchestrator]);
        cmd.timeout(std::time::Duration::from_secs(30));
        String::from_utf8(cmd.assert().code(6).get_output().stderr.clone()).expect("utf8")
    };
    let orch = "ab".repeat(32);
    let err = boot("127.0.0.1:0", "1048576", "not-an-endpoint-id");
    assert!(err.contains("identity_invalid"), "{err}");
    let err = boot("127.0.0.1:0", "0", &orch);
    assert!(err.contains("arena_create_failed"), "{err}");
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let err = boot(&addr, "1048576", &orch);
    assert!(err.contains("membership_join_failed"), "{err}");
}

#[test]
fn a_plan_with_a_weights_url_carries_the_size_and_sha256_of_the_local_copy() {
    let model = synth_model(12);
    let pool = pool_file("cli-pool-url.toml", &pool(3));
    let out = swactor()
        .args(["run", "plan", "--json", "--weights-url", "http://127.0.0.1:9/m.gguf", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let source = &stdout_json_lines(&out)[0]["model"]["source"];
    assert_eq!(source["kind"], "url");
    assert_eq!(source["size"], std::fs::metadata(&model).expect("model").len());
    assert_eq!(
        source["sha256"],
        swactor::stage::weights::sha256_file(&model).expect("sha").as_str()
    );
}

/// A synthesized model with `patch` applied to its bytes, written as `name`.
fn patched_model(name: &str, patch: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(synth_model(2)).expect("read");
    patch(&mut bytes);
    let path = scratch().join(name);
    std::fs::write(&path, &bytes).expect("write");
    path
}

/// Runs `args` with `--json` and checks a typed failure: exit `code` (not a signal, not a
/// panic) and an `error` line with `reason`; returns stderr.
fn typed_failure(args: &[&str], model: &std::path::Path, code: i32, reason: &str) -> String {
    let out = swactor()
        .args(args)
        .arg("--json")
        .arg("--model")
        .arg(model)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "{args:?}: {:?}\n{stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{args:?}: only the error line on stdout: {lines:?}");
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["reason"], reason, "{args:?}: {}", lines[0]);
    stderr
}

#[test]
fn a_crafted_dimension_is_rejected_by_inspect_plan_and_generate_not_allocated() {
    // attn_q is [256, 256]; its outer dimension gets its high bit set. 2^63 + 256 times 256
    // wraps to 256 * 256 in 64 bits, so the old size check saw a well-sized tensor.
    let model = patched_model("cli-crafted-dim.gguf", |b| {
        let at = tensor_dims_offset(b, "blk.0.attn_q.weight") + 8;
        let outer = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!(outer, 256);
        b[at..at + 8].copy_from_slice(&(outer | 1 << 63).to_le_bytes());
    });
    let pool = pool_file("cli-pool-crafted.toml", &pool(2));
    let inspect = swactor()
        .args(["model", "inspect", "--json"])
        .arg(&model)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("inspect");
    let stderr = String::from_utf8_lossy(&inspect.stderr).to_string();
    assert_eq!(inspect.status.code(), Some(3), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(stdout_json_lines(&inspect.stdout)[0]["reason"], "malformed");
    assert!(stderr.contains("blk.0.attn_q.weight") && stderr.contains("corrupt"), "{stderr}");
    let plan = ["run", "plan", "--pool", pool.to_str().expect("utf8 path")];
    typed_failure(&plan, &model, 3, "malformed");
    let err =
        typed_failure(&["generate", "--prompt", "x", "--max-tokens", "2"], &model, 3, "malformed");
    assert!(!err.contains("re-quantize"), "a corrupt file is not a quantization problem: {err}");
}

#[test]
fn an_absurd_norm_epsilon_is_rejected_before_generate_runs() {
    let model = patched_model("cli-nan-eps.gguf", |b| {
        let at = metadata_value_offset(b, "llama.attention.layer_norm_rms_epsilon");
        b[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    });
    let err = typed_failure(
        &["generate", "--prompt", "x", "--max-tokens", "2"],
        &model,
        3,
        "inconsistent",
    );
    assert!(err.contains("epsilon"), "{err}");
    swactor().args(["model", "inspect"]).arg(&model).assert().code(3);
}

#[test]
fn bad_runtime_flags_get_the_same_rejection_from_generate_and_run_plan() {
    let model = synth_model(2);
    let pool = pool_file("cli-pool-runtime.toml", &pool(2));
    let plan = ["run", "plan", "--pool", pool.to_str().expect("utf8 path")];
    let generate = ["generate", "--prompt", "x"];
    for bad in bad_runtime_flags() {
        for base in [&plan[..], &generate[..]] {
            let args: Vec<&str> = base.iter().chain(bad.iter()).copied().collect();
            typed_failure(&args, &model, 4, "invalid_runtime");
        }
    }
}

/// Runtime flags every command must refuse.
pub fn bad_runtime_flags() -> Vec<Vec<&'static str>> {
    vec![
        vec!["--sampling", "sample", "--temperature=-1"],
        vec!["--sampling", "sample", "--temperature", "NaN"],
        vec!["--sampling", "sample", "--temperature", "inf"],
        vec!["--sampling", "sample", "--top-p", "1.5"],
        vec!["--sampling", "sample", "--top-p", "0"],
        vec!["--sampling", "sample", "--top-k", "0"],
        vec!["--max-tokens", "0"],
        vec!["--max-seq-len", "0"],
        vec!["--max-seq-len", "4096"],
    ]
}

#[test]
fn temperature_zero_is_greedy_in_generate_and_run_plan() {
    let model = synth_model(2);
    let tokens = |extra: &[&str]| {
        let out = swactor()
            .args(["generate", "--json", "--prompt", "The river", "--max-tokens", "6"])
            .args(extra)
            .arg("--model")
            .arg(&model)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        stdout_json_lines(&out)
            .iter()
            .filter(|l| l["type"] == "token")
            .map(|l| l["id"].as_u64().expect("id"))
            .collect::<Vec<_>>()
    };
    let greedy = tokens(&[]);
    assert_eq!(greedy.len(), 6);
    assert_eq!(tokens(&["--sampling", "sample", "--temperature", "0", "--seed", "7"]), greedy);
    let pool = pool_file("cli-pool-t0.toml", &pool(2));
    let out = swactor()
        .args(["run", "plan", "--json", "--sampling", "sample", "--temperature", "0", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(stdout_json_lines(&out)[0]["runtime"]["sampling"]["mode"], "greedy");
}

#[test]
fn an_invalid_weights_url_is_rejected_by_run_plan_and_orchestrate_pool() {
    let model = synth_model(2);
    let pool = pool_file("cli-pool-badurl.toml", &pool(2));
    let key = scratch().join("cli-badurl-orch.key");
    for url in [
        "ftp://host/m.gguf",
        "http://",
        "https:///m.gguf",
        "not a url",
        "http://h:0/m",
        "http://u@h/m",
        "m.gguf",
    ] {
        let plan = ["run", "plan", "--pool", pool.to_str().expect("utf8"), "--weights-url", url];
        typed_failure(&plan, &model, 4, "invalid_weights_url");
        let orchestrate = [
            "orchestrate",
            "pool",
            "--pool",
            pool.to_str().expect("utf8"),
            "--key",
            key.to_str().expect("utf8"),
            "--pool-timeout",
            "30",
            "--weights-url",
            url,
        ];
        typed_failure(&orchestrate, &model, 4, "invalid_weights_url");
    }
    // Either case of scheme, a port, an IPv6 host and a query are fine.
    for url in ["HTTPS://Example.org/m.gguf?x=1", "http://[::1]:8080/m.gguf", "http://h:9"] {
        swactor()
            .args(["run", "plan", "--weights-url", url, "--model"])
            .arg(&model)
            .arg("--pool")
            .arg(&pool)
            .assert()
            .success();
    }
}

#[test]
fn orchestrate_pool_rejects_a_broken_pool_file_before_waiting_for_its_nodes() {
    let model = synth_model(2);
    let key = scratch().join("cli-broken-pool-orch.key");
    // Nodes that will never answer (nothing listens on these ports), and a pool file whose
    // meaning is wrong: two entries with one node id.
    let mut dup = pool(2);
    dup.nodes[1].node_id = NodeId(1);
    let mut bad_endpoint = pool(2);
    bad_endpoint.nodes[0].endpoint_id = "xyz".into();
    let mut too_few = pool(2);
    too_few.placement =
        Some(PoolPlacement { nodes: Some(vec![NodeId(1), NodeId(7)]), layers: None });
    for (name, p, reason) in [
        ("cli-pool-dup.toml", dup, "duplicate_node"),
        ("cli-pool-bad-endpoint.toml", bad_endpoint, "invalid_pool"),
        ("cli-pool-unknown-placed.toml", too_few, "unknown_node"),
    ] {
        let path = pool_file(name, &p);
        let args = [
            "orchestrate",
            "pool",
            "--pool",
            path.to_str().expect("utf8"),
            "--key",
            key.to_str().expect("utf8"),
            "--pool-timeout",
            "30",
        ];
        let started = std::time::Instant::now();
        typed_failure(&args, &model, 4, reason);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{name}: rejected without waiting for the pool"
        );
    }
}

#[test]
fn uppercase_endpoint_ids_are_accepted_by_every_command_and_written_lowercase() {
    let model = synth_model(2);
    let mut p = pool(2);
    for n in &mut p.nodes {
        n.endpoint_id = n.endpoint_id.to_ascii_uppercase();
    }
    p.orchestrator.endpoint_id = Some("AB".repeat(32));
    let path = pool_file("cli-pool-upper.toml", &p);
    let out = swactor()
        .args(["run", "plan", "--json", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&path)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let plan = &stdout_json_lines(&out)[0];
    let ids: Vec<String> = plan["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["endpoint_id"].as_str().expect("id").to_string())
        .collect();
    assert_eq!(ids, p.nodes.iter().map(|n| n.endpoint_id.to_ascii_lowercase()).collect::<Vec<_>>());
    assert_eq!(plan["orchestrator"]["endpoint_id"], "ab".repeat(32));
    // orchestrate pool takes the same file: it waits for the (absent) nodes instead of
    // refusing their ids, and reports the pool not ready.
    let key = scratch().join("cli-upper-orch.key");
    let out = swactor()
        .args([
            "orchestrate",
            "pool",
            "--json",
            "--pool-timeout",
            "1",
            "--window-ms",
            "100",
            "--pool",
        ])
        .arg(&path)
        .arg("--key")
        .arg(&key)
        .arg("--model")
        .arg(&model)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("orchestrate");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(
        lines.last().map(|l| l["reason"].clone()),
        Some(serde_json::json!("timeout.pool_readiness"))
    );
}

#[test]
fn a_corrupt_metadata_count_says_the_file_is_corrupt_not_to_re_quantize() {
    // The metadata count is the u64 at bytes 16..24 of a GGUF v3 header.
    let count = |b: &[u8]| u64::from_le_bytes(b[16..24].try_into().expect("8 bytes"));
    for (name, craft) in [
        ("cli-kv-huge.gguf", (|_| 1 << 40) as fn(u64) -> u64),
        ("cli-kv-short.gguf", |n| n - 1),
        ("cli-kv-long.gguf", |n| n + 1),
    ] {
        let model = patched_model(name, |b| {
            let n = craft(count(b));
            b[16..24].copy_from_slice(&n.to_le_bytes());
        });
        let out = swactor()
            .args(["model", "inspect"])
            .arg(&model)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .expect("inspect");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(3), "{name}: {stderr}");
        assert!(stderr.contains("corrupt"), "{name}: {stderr}");
        assert!(
            !stderr.contains("re-quantize") && !stderr.contains("panicked"),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn a_usage_error_under_json_prints_one_error_line_with_exit_code_2() {
    let out = swactor().args(["run", "plan", "--json"]).assert().code(2).get_output().clone();
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "one error line: {lines:?}");
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["exit_code"], 2);
    assert_eq!(lines[0]["reason"], "usage");
    assert!(lines[0]["message"].as_str().is_some_and(|m| m.contains("--model")), "{lines:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"), "clap's usage on stderr");
    let out =
        swactor().args(["model", "inspect", "--json", "--no-such-flag", "x"]).assert().code(2);
    let lines = stdout_json_lines(&out.get_output().stdout);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "error");
    // Without --json, stdout stays empty; a `--json` after `--` is an argument, not the flag.
    let out = swactor().args(["run", "plan"]).assert().code(2);
    assert!(out.get_output().stdout.is_empty());
    let out = swactor().args(["model", "inspect", "a", "--", "--json"]).assert().code(2);
    assert!(out.get_output().stdout.is_empty());
}

#[test]
fn node_boot_reports_its_start_and_its_typed_fault_as_events_on_its_json_stdout() {
    let dir = scratch().join("boot-events");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = "ab".repeat(32);
    let out = swactor()
        .args(["node", "boot", "--json", "--node-id", "4", "--listen", "127.0.0.1:0"])
        .args(["--swim", "127.0.0.1:0", "--arena-bytes", "0", "--orchestrator", &orch])
        .arg("--key")
        .arg(dir.join("n4.key"))
        .arg("--admin")
        .arg(dir.join("n4.sock"))
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(6)
        .get_output()
        .clone();
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0]["type"], "node_started");
    assert_eq!(lines[0]["node_id"], 4);
    assert!(lines[0]["ts_us"].is_u64(), "an event line: {}", lines[0]);
    assert_eq!(lines[1]["type"], "node_faulted");
    assert_eq!(lines[1]["node_id"], 4);
    assert_eq!(lines[1]["reason"], "arena_create_failed");
    assert_eq!(lines[1]["component"], "node_boot");
    assert_eq!(lines[2]["type"], "error");
    assert_eq!(lines[2]["reason"], "arena_create_failed");
    assert!(!dir.join("n4.sock").exists(), "a failed boot leaves no admin socket");
}

/// Boots node 4 in a fresh `dir` with `args` added, expecting a boot fault: checks the
/// `node_started`, `node_faulted`, `error` lines and that no admin socket is left; returns
/// them with stderr.
fn faulted_boot(dir: &std::path::Path, args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let out = swactor()
        .args(["node", "boot", "--json", "--node-id", "4", "--listen", "127.0.0.1:0"])
        .args(["--swim", "127.0.0.1:0", "--orchestrator", &"ab".repeat(32)])
        .args(args)
        .arg("--key")
        .arg(dir.join("n4.key"))
        .arg("--admin")
        .arg(dir.join("n4.sock"))
        .timeout(std::time::Duration::from_secs(30))
        .assert()
        .code(6)
        .get_output()
        .clone();
    let lines = stdout_json_lines(&out.stdout);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap_or("")).collect();
    assert_eq!(types, ["node_started", "node_faulted", "error"], "{lines:?}");
    assert_eq!(lines[1]["component"], "node_boot");
    assert!(!dir.join("n4.sock").exists(), "a failed boot leaves no admin socket");
    (lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `node boot` with `args` added is a usage error (exit 2) before anything starts.
fn refused_boot(dir: &std::path::Path, args: &[&str]) {
    swactor()
        .args(["node", "boot", "--node-id", "4", "--listen", "127.0.0.1:0"])
        .args(["--swim", "127.0.0.1:0", "--orchestrator", &"ab".repeat(32)])
        .args(args)
        .arg("--key")
        .arg(dir.join("n4.key"))
        .assert()
        .code(2);
}

#[test]
fn a_node_booted_on_a_device_it_cannot_drive_faults_with_device_unavailable_and_leaves_nothing() {
    let dir = scratch().join("boot-device");
    // No machine has a 1000th GPU, and a build without the `cuda` feature drives none.
    let (lines, stderr) = faulted_boot(&dir, &["--device", "cuda:999"]);
    assert_eq!(lines[1]["reason"], "device_unavailable", "{}", lines[1]);
    assert_eq!(lines[2]["reason"], "device_unavailable");
    assert!(stderr.contains("cuda"), "the fault says which device: {stderr}");
    for bad in ["gpu", "cuda:x", "cuda:-1", ""] {
        refused_boot(&dir, &["--device", bad]);
    }
}

#[test]
fn a_node_that_cannot_boot_within_its_boot_timeout_faults_with_what_it_waited_for() {
    let dir = scratch().join("boot-timeout");
    // One millisecond: the key, the admin socket and the arena are made at once, but no
    // worker process can start and report ready that fast.
    let (lines, stderr) = faulted_boot(&dir, &["--boot-timeout-ms", "1"]);
    assert_eq!(lines[1]["reason"], "worker_init_timeout", "{}", lines[1]);
    assert!(stderr.contains("did not boot within 1ms"), "{stderr}");
    refused_boot(&dir, &["--boot-timeout-ms", "0"]);
}

#[test]
fn a_regular_file_or_a_directory_at_the_admin_path_survives_a_boot_attempt_untouched() {
    let dir = scratch().join("admin-occupied");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("notes.sock");
    let content: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
    std::fs::write(&file, &content).expect("write");
    let sub = dir.join("a-dir");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::write(sub.join("inside"), b"kept").expect("write");
    let orch = "ab".repeat(32);
    for (path, what) in [(&file, "regular file"), (&sub, "directory")] {
        let out = swactor()
            .args(["node", "boot", "--json", "--node-id", "5", "--listen", "127.0.0.1:0"])
            .args(["--swim", "127.0.0.1:0", "--arena-bytes", "1048576", "--orchestrator", &orch])
            .arg("--key")
            .arg(dir.join("n5.key"))
            .arg("--admin")
            .arg(path)
            .timeout(std::time::Duration::from_secs(30))
            .assert()
            .code(6)
            .get_output()
            .clone();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("admin_socket_in_use") && stderr.contains(what), "{stderr}");
        let lines = stdout_json_lines(&out.stdout);
        let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap_or("")).collect();
        assert_eq!(types, ["node_started", "node_faulted", "error"], "{lines:?}");
        assert_eq!(lines[1]["reason"], "admin_socket_in_use");
        assert_eq!(lines[2]["reason"], "admin_socket_in_use");
    }
    assert_eq!(std::fs::read(&file).expect("the file is still there"), content);
    assert_eq!(std::fs::read(sub.join("inside")).expect("the directory is intact"), b"kept");
}

#[test]
fn edge_inspect_against_a_socket_that_never_answers_ends_with_a_timeout_error() {
    let dir = scratch().join("admin-silent");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    // Accepts and holds every connection, never writing a byte.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().map_while(Result::ok) {
            held.push(stream);
        }
    });
    let out = swactor()
        .args(["edge", "inspect", "--json", "--timeout-ms", "300", "--node"])
        .arg(&path)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(3)
        .get_output()
        .clone();
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["reason"], "admin_timeout");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did not answer") && stderr.contains("silent.sock"), "{stderr}");
}

#[test]
fn pool_watch_refuses_an_empty_pool_before_starting_anything() {
    let path = scratch().join("empty-pool.toml");
    std::fs::write(&path, "[orchestrator]\nnode_id = 100\n").expect("write");
    let out = swactor()
        .args(["pool", "watch", "--json", "--key"])
        .arg(scratch().join("empty-pool-orch.key"))
        .arg("--pool")
        .arg(&path)
        .timeout(std::time::Duration::from_secs(20))
        .assert()
        .code(3)
        .get_output()
        .clone();
    let lines = stdout_json_lines(&out.stdout);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["reason"], "empty_pool");
    assert!(!scratch().join("empty-pool-orch.key").exists(), "nothing started: no key made");
}

#[test]
fn bench_pipeline_prints_each_stages_predicted_memory_beside_what_its_processes_held() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = swactor()
        .args(["bench", "pipeline", "--json", "--stages", "2", "--tokens", "4", "--repeat", "1"])
        .arg("--model")
        .arg(synth_model(4))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&out);
    let fig = lines.iter().find(|l| l["type"] == "bench_pipeline").expect("a figure");
    let memory = fig["memory"].as_array().expect("memory");
    assert_eq!(memory.len(), 2, "{fig}");
    for m in memory {
        let predicted = m["predicted_bytes"].as_u64().expect("predicted");
        let measured = m["measured_bytes"].as_u64().expect("measured");
        assert!(measured > 0 && measured <= predicted, "{m}");
    }
}

#[test]
fn bench_decode_and_pipeline_remove_their_temporary_directory_when_they_fail() {
    let tmp = scratch().join("bench-tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("dir");
    for bench in ["decode", "pipeline"] {
        swactor()
            .env("TMPDIR", &tmp)
            .args(["bench", bench, "--requantize", "q8_0,no-such-type", "--model"])
            .arg(synth_model(4))
            .assert()
            .code(2);
        let left: Vec<_> =
            std::fs::read_dir(&tmp).expect("tmp").flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "bench {bench} left {left:?}");
    }
}

#[test]
fn a_node_never_advertises_an_unspecified_address() {
    let dir = scratch().join("boot-advertise");
    let _ = std::fs::create_dir_all(&dir);
    let boot = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("swactor"));
        cmd.args(["node", "boot", "--json", "--node-id", "5", "--listen", "0.0.0.0:0"])
            .args(["--swim", "0.0.0.0:0", "--orchestrator", &"ab".repeat(32)])
            .args(extra)
            .arg("--key")
            .arg(dir.join("n5.key"))
            .arg("--admin")
            .arg(dir.join("n5.sock"))
            .env("NO_COLOR", "1");
        cmd
    };
    // Listening on 0.0.0.0 with no seed to route toward and no --advertise: a typed boot
    // fault that says what to do, not an unreachable address in node_available.
    let out = boot(&[]).output().expect("node boot");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(6), "{err}");
    assert!(err.contains("transport_bind_failed") && err.contains("--advertise"), "{err}");
    // With --advertise, node_available names that address (the node is stopped once it
    // reported itself).
    let mut child = boot(&["--advertise", "127.0.0.1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let available = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .find(|v| v["type"] == "node_available")
        .expect("node_available");
    let _ = child.kill();
    let _ = child.wait();
    let swim = available["swim_addr"].as_str().expect("swim");
    assert!(swim.starts_with("127.0.0.1:"), "{available}");
    for addr in available["addrs"].as_array().expect("addrs") {
        assert!(addr.as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "{available}");
    }
}

/// Starts `generate` on SmolLM2 with `sig` ignored by inheritance (as a shell's background
/// job has SIGINT), sends it `sig` once its first token is out, and returns its exit code
/// and standard error.
fn generate_stopped_by(sig: rustix::process::Signal, name: &str) -> Option<(Option<i32>, String)> {
    use std::io::BufRead;
    let model = smollm2()?;
    let exe = assert_cmd::cargo::cargo_bin("swactor");
    let script = format!(
        "trap '' {name}; exec \"$0\" generate --json --max-tokens 3000 --max-seq-len 4096 \
         --prompt 'Once upon a time' --model \"$1\""
    );
    let mut child = std::process::Command::new("sh")
        .args(["-c", &script])
        .arg(&exe)
        .arg(&model)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("generate");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(stdout).lines();
    let first = lines.by_ref().map_while(Result::ok).any(|l| l.contains("\"token\""));
    assert!(first, "a first token");
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, sig).expect("signal");
    std::thread::spawn(move || for _ in lines {});
    let mut err = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut err).expect("stderr");
    let status = child.wait().expect("wait");
    Some((status.code(), err))
}

#[test]
fn generate_stops_on_sigint_or_sigterm_with_exit_9_even_when_started_with_them_ignored() {
    for (sig, name, reason) in [
        (rustix::process::Signal::INT, "INT", "(interrupt)"),
        (rustix::process::Signal::TERM, "TERM", "(terminate)"),
    ] {
        let Some((code, err)) = generate_stopped_by(sig, name) else { return };
        assert_eq!(code, Some(9), "SIG{name}: {err}");
        assert!(err.contains(reason), "SIG{name}: {err}");
    }
}

#[test]
fn the_exit_code_table_is_in_the_top_level_help_and_man_page_only_and_says_what_run_does() {
    let top = swactor().arg("--help").assert().success().get_output().stdout.clone();
    let top = String::from_utf8(top).expect("utf8");
    assert!(top.contains("9  run stopped by the operator"), "{top}");
    assert!(top.contains("Run a whole pipeline on this machine"), "{top}");
    for cmd in [&["run", "local"][..], &["orchestrate", "pool"], &["generate"], &["node", "boot"]] {
        let help = swactor().args(cmd).arg("--help").assert().success().get_output().stdout.clone();
        let help = String::from_utf8(help).expect("utf8");
        assert!(!help.contains("9  run stopped"), "{cmd:?} repeats the table: {help}");
        assert!(help.contains("Exit codes: see `swactor --help`"), "{cmd:?}: {help}");
    }
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("man/man1/swactor.1"),
    )
    .expect("man page");
    assert!(page.contains("run stopped by the operator"), "the table is in swactor(1)");
}

#[test]
fn a_node_whose_listen_or_swim_address_is_taken_says_the_address_is_in_use() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let dir = scratch().join("cli-addr-in-use");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    for (listen, swim) in [(addr.as_str(), "127.0.0.1:0"), ("127.0.0.1:0", addr.as_str())] {
        let out = swactor()
            .args(["node", "boot", "--node-id", "1", "--listen", listen, "--swim", swim])
            .arg("--key")
            .arg(dir.join("n.key"))
            .arg("--admin")
            .arg(dir.join("n.sock"))
            .args(["--orchestrator", &"0".repeat(64)])
            .timeout(std::time::Duration::from_secs(30))
            .assert()
            .code(6)
            .get_output()
            .stderr
            .clone();
        let err = String::from_utf8_lossy(&out);
        assert!(err.contains("in use") && err.contains(&addr), "{err}");
    }
}

/// Every edge row of `run plan`'s text shows an object no larger than its ring, or says the
/// object streams through it. Returns how many rows say so.
fn assert_rings_hold_their_objects_or_say_they_stream(text: &str) -> usize {
    let bytes = |s: &str| {
        let (n, unit) = s.trim().split_once(' ').expect("a size");
        let scale = match unit {
            "B" => 1.0,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            _ => 1024.0 * 1024.0 * 1024.0,
        };
        n.parse::<f64>().expect("a number") * scale
    };
    let mut streamed = 0;
    let edge_row = |l: &&str| {
        let mut cols = l.split_whitespace();
        cols.next().is_some_and(|c| c.parse::<u64>().is_ok())
            && cols.next().is_some_and(|k| k == "activation" || k.starts_with("token_"))
    };
    for row in text.lines().filter(edge_row) {
        let cols: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        let (object, ring) = (cols[cols.len() - 2], cols[cols.len() - 1]);
        let marked = ring.ends_with("(streamed)");
        let ring = ring.trim_end_matches("(streamed)");
        assert!(bytes(object) <= bytes(ring) || marked, "{row}");
        streamed += usize::from(marked);
    }
    streamed
}

#[test]
fn run_plan_marks_an_object_larger_than_its_ring_as_streamed() {
    let Some(model) = smollm2() else { return };
    let pool = pool_file("cli-pool-stream.toml", &pool(3));
    let out = swactor()
        .args(["run", "plan", "--max-seq-len", "2048", "--model"])
        .arg(&model)
        .arg("--pool")
        .arg(&pool)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).expect("utf8");
    assert_eq!(assert_rings_hold_their_objects_or_say_they_stream(&text), 2, "{text}");
    assert!(text.contains("never holds it whole"), "{text}");
}

#[test]
fn orchestrate_pool_in_text_mode_says_on_stderr_which_nodes_it_waits_for_and_why() {
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = crate::run::Nodes::boot("cli-waiting", 2, |_| vec![]);
    let dir = crate::support::scratch().join("cli-waiting");
    // Node 3 is in the pool file but never boots.
    let key = dir.join("n3-never.key");
    let id = Command::new(crate::run::exe()).args(["node", "id", "--key"]).arg(&key).output();
    let id = String::from_utf8(id.expect("id").stdout).expect("utf8").trim().to_string();
    let pool = dir.join("pool.toml");
    let mut text = std::fs::read_to_string(&pool).expect("pool");
    text.push_str(&format!(
        "[[nodes]]\nnode_id = 3\nendpoint_id = \"{id}\"\naddrs = [\"127.0.0.1:9\"]\nmemory_bytes = 8589934592\n"
    ));
    std::fs::write(&pool, text).expect("pool file");
    let out = Command::new(crate::run::exe())
        .args(["orchestrate", "pool", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--window-ms", "300", "--pool-timeout", "4", "--max-tokens", "2"])
        .arg("--pool")
        .arg(&pool)
        .arg("--key")
        .arg(dir.join("orch.key"))
        .arg("--model")
        .arg(crate::support::synth_model(3))
        .output()
        .expect("orchestrate");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{err}");
    assert!(
        err.contains(
            "waiting for node 1 (no answer yet), node 2 (no answer yet), node 3 (no answer yet)"
        ),
        "first every node: {err}"
    );
    assert!(
        err.lines().any(|l| l == "waiting for node 3 (no answer yet)"),
        "then only node 3: {err}"
    );
    drop(nodes);
}

/// A `node_available` line as `node boot --json` prints it, with `patch` applied.
fn node_available_line(node_id: u64, patch: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v = serde_json::json!({
        "type": "node_available",
        "node_id": node_id,
        "endpoint_id": format!("{:064x}", 0xabc0 + node_id),
        "addrs": [format!("127.0.0.1:{}", 7400 + node_id)],
        "swim_addr": format!("127.0.0.1:{}", 7500 + node_id),
        "memory_bytes": 8u64 << 30,
        "device": "cpu",
    });
    patch(&mut v);
    v.to_string()
}

/// `pool init` over `lines` on standard input: its exit code, stdout and stderr.
fn pool_init(lines: &[String]) -> (Option<i32>, String, String) {
    let out = swactor()
        .args(["pool", "init"])
        .write_stdin(lines.join("\n"))
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("pool init");
    let text = |b: &[u8]| String::from_utf8_lossy(b).to_string();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn pool_init_leaves_out_the_memory_a_node_did_not_report_and_writes_the_one_it_did() {
    let lines = [
        node_available_line(1, |v| {
            v.as_object_mut().expect("object").remove("memory_bytes");
        }),
        node_available_line(2, |_| {}),
    ];
    let (code, text, err) = pool_init(&lines);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(text.matches("memory_bytes").count(), 1, "only node 2's: {text}");
    assert!(!text.contains("memory_bytes = 0"), "{text}");
    let pool = swactor::planner::Pool::from_toml(&text).expect("a valid pool file");
    assert_eq!(pool.nodes[0].memory_bytes, 0, "taken from node 1's report at run time");
    assert_eq!(pool.nodes[1].memory_bytes, 8 << 30);
}

/// A change to a `node_available` record.
type Patch = fn(&mut serde_json::Value);

#[test]
fn pool_init_and_run_plan_refuse_the_same_bad_devices_addresses_and_node_ids() {
    let model = synth_model(4);
    let cases: [(&str, Patch); 6] = [
        ("device", |v| v["device"] = "gpu please".into()),
        ("device", |v| v["device"] = "cuda:x".into()),
        ("unspecified", |v| v["addrs"] = serde_json::json!(["0.0.0.0:7401"])),
        ("unspecified", |v| v["addrs"] = serde_json::json!(["[::]:7401"])),
        ("port 0", |v| v["addrs"] = serde_json::json!(["127.0.0.1:0"])),
        ("id is 0", |v| v["node_id"] = 0.into()),
    ];
    for (i, (what, patch)) in cases.iter().enumerate() {
        let lines = [node_available_line(1, |_| {}), node_available_line(2, patch)];
        let (code, text, err) = pool_init(&lines);
        assert_eq!(code, Some(3), "{what}: {text}{err}");
        assert!(err.contains("invalid_pool") && err.contains(what), "{what}: {err}");
        assert!(text.is_empty(), "no pool file written: {text}");
        assert!(!err.contains("panicked"), "{err}");
        // The same entry written by hand: `run plan` refuses it with the same check.
        let mut p = pool(2);
        let v: serde_json::Value = serde_json::from_str(&lines[1]).expect("json");
        p.nodes[1].node_id = NodeId(v["node_id"].as_u64().expect("id"));
        p.nodes[1].addrs = vec![v["addrs"][0].as_str().expect("addr").parse().expect("addr")];
        p.nodes[1].device = v["device"].as_str().map(String::from);
        let file = pool_file(&format!("cli-pool-bad-{i}.toml"), &p);
        let out = swactor()
            .args(["run", "plan", "--json", "--model"])
            .arg(&model)
            .arg("--pool")
            .arg(&file)
            .assert()
            .code(4)
            .get_output()
            .stdout
            .clone();
        let lines = stdout_json_lines(&out);
        assert_eq!(lines[0]["reason"], "invalid_pool", "{what}: {lines:?}");
    }
    // An address that is no address at all is named, not dropped.
    let lines = [node_available_line(1, |v| v["addrs"] = serde_json::json!(["nowhere"]))];
    let (code, _, err) = pool_init(&lines);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("no valid addrs") && err.contains("nowhere"), "{err}");
}

#[test]
fn pool_init_refuses_a_line_or_an_input_over_its_size_limit_without_reading_on() {
    let long = "x".repeat(swactor::cli::pool_init_cmd::MAX_LINE_BYTES + 1);
    let (code, text, err) = pool_init(&[node_available_line(1, |_| {}), long]);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("input_too_large") && err.contains("longer than"), "{err}");
    assert!(text.is_empty(), "{text}");

    // Many short lines past the total limit, from a file.
    let path = scratch().join("pool-init-huge.jsonl");
    let filler = format!("{}\n", "y".repeat(1023));
    let count = (swactor::cli::pool_init_cmd::MAX_INPUT_BYTES / 1024 + 1) as usize;
    std::fs::write(&path, format!("{}\n{}", node_available_line(1, |_| {}), filler.repeat(count)))
        .expect("write");
    let out = swactor()
        .args(["pool", "init"])
        .arg(&path)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .expect("pool init");
    let _ = std::fs::remove_file(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("input_too_large") && err.contains("in all"), "{err}");
}

#[test]
fn generate_chat_writes_the_prompt_in_the_chat_template_and_says_what_run_local_chat_says() {
    let Some(model) = smollm2() else { return };
    let ids = |out: &[u8]| -> (Vec<u64>, u64) {
        let lines = stdout_json_lines(out);
        let tokens = lines.iter().filter(|l| l["type"] == "token").map(|l| l["id"].as_u64());
        let prompt = lines.iter().find_map(|l| l["prompt_tokens"].as_u64()).expect("summary");
        (tokens.map(|t| t.expect("id")).collect(), prompt)
    };
    let prompt = "What is the capital of France?";
    let generate = |chat: bool| {
        let mut cmd = swactor();
        cmd.args(["generate", "--json", "--max-tokens", "8", "--prompt", prompt, "--model"]);
        cmd.arg(&model);
        if chat {
            cmd.arg("--chat");
        }
        ids(&cmd.assert().success().get_output().stdout.clone())
    };
    let (chat_tokens, chat_prompt) = generate(true);
    let (_, plain_prompt) = generate(false);
    assert!(
        chat_prompt > plain_prompt + 4,
        "the template's turns: {chat_prompt} vs {plain_prompt}"
    );
    let local = swactor()
        .args(["run", "local", "--json", "--chat", "--stages", "2", "--max-tokens", "8"])
        .args(["--prompt", prompt, "--model"])
        .arg(&model)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let lines = stdout_json_lines(&local);
    let local_tokens: Vec<u64> =
        lines.iter().filter(|l| l["type"] == "token").filter_map(|l| l["id"].as_u64()).collect();
    assert_eq!(chat_tokens, local_tokens, "generate --chat equals run local --chat");
}
