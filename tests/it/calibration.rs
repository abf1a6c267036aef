//! Calibration at boot and the plan that uses it (`specs/cost-model.md`): real nodes
//! measure their speed and report it, `pool init` writes it, `run plan` balances ranges by
//! it and predicts its speed, `--min-speedup` refuses a plan predicted too slow, and a run
//! over the nodes prints what it predicted beside what it measured.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::multihost::Reap;
use crate::relay::token_ids;
use crate::support::{scratch, synth_model};

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// Boots node `i` for the orchestrator `orch` in `dir` with `env`, its calibration cached
/// under `dir`; the child and its `node_available` line.
fn boot(
    dir: &Path,
    orch: &str,
    i: u32,
    env: &[(&str, &str)],
    join: Option<&str>,
) -> (Child, Value) {
    let mut cmd = Command::new(exe());
    cmd.args(["node", "boot", "--json", "--node-id", &i.to_string(), "--threads", "1"])
        .args(["--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0", "--orchestrator", orch])
        .arg("--key")
        .arg(dir.join(format!("n{i}.key")))
        .arg("--admin")
        .arg(dir.join(format!("n{i}.sock")))
        .arg("--cache")
        .arg(dir.join(format!("cache{i}")))
        .env("XDG_CACHE_HOME", dir.join("xdg"))
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(seed) = join {
        cmd.args(["--join", seed]);
    }
    let mut child = cmd.spawn().expect("node boot");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let v = lines
        .by_ref()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|v| v["type"] == "node_available")
        .expect("node_available");
    std::thread::spawn(move || for _ in lines {});
    (child, v)
}

/// The one-row Q8_0 rate a `node_available` line reports.
fn q8_decode(v: &Value) -> u64 {
    let formats = v["speed"]["formats"].as_array().expect("formats");
    let q8 = formats.iter().find(|f| f["format"] == "q8_0").expect("q8_0 measured");
    q8["decode_mmacs"].as_u64().expect("rate")
}

#[test]
fn nodes_report_their_speed_and_a_plan_gives_the_faster_node_more_layers_and_predicts_the_run() {
    let dir = scratch().join("calibration");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("orch.key");
    let out = Command::new(exe()).args(["node", "id", "--key"]).arg(&key).output().expect("id");
    let orch = String::from_utf8(out.stdout).expect("utf8").trim().to_string();

    // Node 1 computes with this CPU's kernels, node 2 with the scalar reference: slower.
    let (fast, a) = boot(&dir, &orch, 1, &[], None);
    let mut children = Reap(vec![fast]);
    let seed = a["swim_addr"].as_str().expect("swim").to_string();
    let (slow, b) = boot(&dir, &orch, 2, &[("SWACTOR_ENGINE_ISA", "scalar")], Some(&seed));
    children.0.push(slow);
    for v in [&a, &b] {
        assert_eq!(v["speed"]["threads"], 1, "{v}");
        assert!(v["speed"]["read_mbs"].as_u64().expect("bandwidth") > 100, "{v}");
    }
    assert_eq!(b["speed"]["isa"], "scalar");
    assert!(q8_decode(&a) > q8_decode(&b), "{a}\n{b}");
    // Kept in the cache directory, an entry per host boot, tier and thread count.
    let cache = std::fs::read_dir(dir.join("xdg/swactor/calibration")).expect("cache");
    let entries =
        cache.filter_map(Result::ok).filter(|e| e.path().extension().is_some_and(|x| x == "json"));
    assert_eq!(entries.count(), 2, "one entry per tier");

    // `pool init` writes each node's speed; `run plan` balances by it.
    let lines = format!("{a}\n{b}\n");
    let pool = dir.join("pool.toml");
    let init = Command::new(exe())
        .args(["pool", "init"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut init = init.expect("pool init");
    std::io::Write::write_all(&mut init.stdin.take().expect("stdin"), lines.as_bytes())
        .expect("write");
    let init = init.wait_with_output().expect("pool init");
    assert!(init.status.success());
    std::fs::write(&pool, &init.stdout).expect("pool file");
    assert!(String::from_utf8_lossy(&init.stdout).contains("[nodes.speed]"));
    let model = synth_model(8);
    let plan = |extra: &[&str]| {
        Command::new(exe())
            .args(["run", "plan", "--json", "--max-seq-len", "256", "--pool"])
            .arg(&pool)
            .arg("--model")
            .arg(&model)
            .args(extra)
            .output()
            .expect("run plan")
    };
    let by_speed = plan(&[]);
    assert!(by_speed.status.success(), "{}", String::from_utf8_lossy(&by_speed.stderr));
    let p: Value = serde_json::from_slice(&by_speed.stdout).expect("plan json");
    let blocks = |p: &Value, i: usize| {
        let l = &p["stages"][i]["layers"];
        l["end"].as_u64().expect("end") - l["start"].as_u64().expect("start")
    };
    assert_eq!(p["speed"]["placed_by"], "speed", "{}", p["speed"]);
    assert!(blocks(&p, 0) > blocks(&p, 1), "{}", p["stages"]);
    assert!(p["speed"]["pipeline"]["decode_tok_s"].as_f64().expect("rate") > 0.0);
    let by_memory: Value =
        serde_json::from_slice(&plan(&["--balance", "memory"]).stdout).expect("json");
    assert_eq!(by_memory["speed"]["placed_by"], "memory");
    assert!(blocks(&by_memory, 0) < blocks(&p, 0), "{}", by_memory["stages"]);
    let refused = plan(&["--min-speedup", "50"]);
    assert_eq!(refused.status.code(), Some(4));
    let err: Value = serde_json::from_slice(&refused.stdout).expect("error line");
    assert_eq!(err["reason"], "below_min_speedup", "{err}");

    // A run over them: the same tokens as one process, and what the plan predicted.
    let args = ["--json", "--prompt", "The river", "--max-tokens", "8", "--model"];
    let reference = Command::new(exe()).args(["generate"]).args(args).arg(&model).output();
    let reference = token_ids(&reference.expect("generate").stdout);
    let run = Command::new(exe())
        .args(["orchestrate", "pool", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--window-ms", "300", "--pool-timeout", "60", "--pool"])
        .arg(&pool)
        .arg("--key")
        .arg(&key)
        .args(args)
        .arg(&model)
        .output()
        .expect("orchestrate");
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(token_ids(&run.stdout), reference);
    let summary = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "run")
        .expect("summary");
    let predicted = &summary["predicted"];
    assert!(predicted["decode_tokens_per_s"].as_f64().expect("predicted rate") > 0.0, "{summary}");
    assert!(predicted["time_to_first_token_ms"].as_f64().expect("predicted ttft") > 0.0);
    assert!(summary["request_ttft_ms"].as_f64().expect("measured ttft") > 0.0, "{summary}");
}
