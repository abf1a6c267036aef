//! The run with real processes on loopback: three `swactor node boot` nodes and
//! `swactor orchestrate pool` (or `swactor run local`). The generated tokens equal the
//! one-process reference; the event stream keeps its contract; faults (a SIGKILLed node, a
//! killed worker, a foreign orchestrator, a skipped sequence, a weights URL that 404s) and
//! an operator stop each end in one terminal outcome and a complete teardown; ten runs in
//! a row leak nothing. Runs are serialized (two cores) and every child is reaped.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Partition, port_of, scratch, synth_model};

pub(crate) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn exe() -> PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

pub(crate) fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).expect("pid");
    rustix::process::kill_process(pid, sig).expect("signal");
}

/// Three booted nodes, an orchestrator key and the pool file naming them.
pub(crate) struct Nodes {
    dir: PathBuf,
    /// Each node's SWIM and QUIC ports.
    pub(crate) ports: Vec<[u16; 2]>,
    /// Each node's endpoint id and QUIC addresses, as it reported them.
    pub(crate) endpoints: Vec<(String, Vec<String>)>,
    children: Vec<Child>,
    pool: PathBuf,
    key: PathBuf,
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Nodes {
    /// Boots `n` nodes; `env(i)` adds environment variables to node `i`.
    pub(crate) fn boot(
        name: &str,
        n: u32,
        env: impl Fn(u32) -> Vec<(&'static str, String)>,
    ) -> Nodes {
        Nodes::boot_with(name, n, env, &[])
    }

    /// [`Nodes::boot`] with `args` added to every `node boot` (a node's relay, if it
    /// reports one, goes into the pool file).
    pub(crate) fn boot_with(
        name: &str,
        n: u32,
        env: impl Fn(u32) -> Vec<(&'static str, String)>,
        args: &[&str],
    ) -> Nodes {
        let dir = scratch().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let key = dir.join("orch.key");
        let out = Command::new(exe()).args(["node", "id", "--key"]).arg(&key).output().expect("id");
        let orch = String::from_utf8(out.stdout).expect("utf8").trim().to_string();
        let mut nodes = Nodes {
            dir: dir.clone(),
            ports: Vec::new(),
            endpoints: Vec::new(),
            children: Vec::new(),
            pool: dir.join("pool.toml"),
            key,
        };
        let mut seed: Option<String> = None;
        let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
        for i in 1..=n {
            let mut cmd = Command::new(exe());
            // Three nodes share this host (two cores on CI): one compute thread each.
            cmd.args(["node", "boot", "--json", "--node-id", &i.to_string(), "--threads", "1"])
                .args(["--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
                .arg("--key")
                .arg(dir.join(format!("n{i}.key")))
                .arg("--admin")
                .arg(dir.join(format!("n{i}.sock")))
                .arg("--cache")
                .arg(dir.join(format!("cache{i}")))
                .args(["--orchestrator", &orch])
                .args(args)
                .envs(env(i))
                .stdout(Stdio::piped())
                .stderr(Stdio::null());
            if let Some(s) = &seed {
                cmd.args(["--join", s]);
            }
            let mut child = cmd.spawn().expect("spawn node");
            let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
            nodes.children.push(child);
            // `node_started` comes first, then the identity.
            let v: Value = lines
                .by_ref()
                .map(|l| serde_json::from_str::<Value>(&l.expect("read")).expect("json"))
                .find(|v| v["type"] == "node_available")
                .expect("node_available line");
            std::thread::spawn(move || for _ in lines {});
            seed.get_or_insert_with(|| v["swim_addr"].as_str().expect("swim").to_string());
            // A relay-only node has no iroh address and is reached for SWIM through its
            // relay (ports 0: it is never restarted).
            let iroh_port = if v["addrs"][0].is_string() { port_of(&v["addrs"][0]) } else { 0 };
            let relayed = v["swim_addr"].as_str().is_some_and(|a| a.starts_with("relay:"));
            let swim_port = if relayed { 0 } else { port_of(&v["swim_addr"]) };
            nodes.ports.push([swim_port, iroh_port]);
            let addrs = v["addrs"].as_array().into_iter().flatten();
            let addrs = addrs.filter_map(|a| a.as_str().map(String::from)).collect();
            nodes.endpoints.push((v["endpoint_id"].as_str().expect("id").to_string(), addrs));
            pool.push_str(&format!(
                "[[nodes]]\nnode_id = {i}\nendpoint_id = \"{}\"\naddrs = {}\nmemory_bytes = 8589934592\n",
                v["endpoint_id"].as_str().expect("id"),
                v["addrs"]
            ));
            if let Some(relay) = v["relay"].as_str() {
                pool.push_str(&format!("relay = \"{relay}\"\n"));
            }
            pool.push('\n');
        }
        std::fs::write(&nodes.pool, pool).expect("pool file");
        nodes
    }

    /// Boots node `i` again after it died: the same key, the same addresses (the pool
    /// file stays true), joining through another node.
    pub(crate) fn restart(&mut self, i: u32) {
        let slot = (i - 1) as usize;
        let _ = self.children[slot].kill();
        let _ = self.children[slot].wait();
        let other = if i == 1 { 1 } else { 0 };
        let seed = format!("127.0.0.1:{}", self.ports[other][0]);
        let orch = {
            let out = Command::new(exe())
                .args(["node", "id", "--key"])
                .arg(&self.key)
                .output()
                .expect("id");
            String::from_utf8(out.stdout).expect("utf8").trim().to_string()
        };
        let _ = std::fs::remove_file(self.admin(i));
        let mut child = Command::new(exe())
            .args(["node", "boot", "--json", "--node-id", &i.to_string(), "--threads", "1"])
            .args(["--listen", &format!("127.0.0.1:{}", self.ports[slot][1])])
            .args(["--swim", &format!("127.0.0.1:{}", self.ports[slot][0])])
            .arg("--key")
            .arg(self.dir.join(format!("n{i}.key")))
            .arg("--admin")
            .arg(self.admin(i))
            .arg("--cache")
            .arg(self.dir.join(format!("cache{i}")))
            .args(["--orchestrator", &orch, "--join", &seed])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn node");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        lines
            .by_ref()
            .map(|l| serde_json::from_str::<Value>(&l.expect("read")).expect("json"))
            .find(|v| v["type"] == "node_available")
            .expect("node_available line");
        std::thread::spawn(move || for _ in lines {});
        self.children[slot] = child;
    }

    /// The orchestrator's key file.
    pub(crate) fn key(&self) -> &Path {
        &self.key
    }

    /// The pool file naming the nodes.
    pub(crate) fn pool_file(&self) -> &Path {
        &self.pool
    }

    /// Rewrites the pool file so that every node allows `bytes` of memory.
    pub(crate) fn set_memory_bytes(&self, bytes: u64) {
        let text = std::fs::read_to_string(&self.pool).expect("pool file");
        let text: String = text
            .lines()
            .map(|l| match l.starts_with("memory_bytes") {
                true => format!("memory_bytes = {bytes}\n"),
                false => format!("{l}\n"),
            })
            .collect();
        std::fs::write(&self.pool, text).expect("pool file");
    }

    pub(crate) fn admin(&self, i: u32) -> PathBuf {
        self.dir.join(format!("n{i}.sock"))
    }

    pub(crate) fn pid(&self, i: u32) -> u32 {
        self.children[(i - 1) as usize].id()
    }

    /// `orchestrate ROLE --json` on this pool (its own SWIM and QUIC on free loopback
    /// ports, a 300 ms window), as a child with its stdout lines on a channel.
    fn orchestrator(&self, role: &[&str], model: &Path, extra: &[&str]) -> Running {
        let mut cmd = Command::new(exe());
        cmd.arg("orchestrate")
            .args(role)
            .args(["--json", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
            .args(["--window-ms", "300", "--pool"])
            .arg(&self.pool)
            .arg("--key")
            .arg(&self.key)
            .arg("--model")
            .arg(model)
            .args(extra);
        Running::spawn(cmd)
    }

    /// `orchestrate pool` on this pool, as a child with its stdout lines on a channel.
    pub(crate) fn orchestrate(&self, model: &Path, extra: &[&str]) -> Running {
        self.orchestrator(&["pool", "--pool-timeout", "30"], model, extra)
    }

    /// `orchestrate serve` on this pool, its API on a free loopback port: its first line
    /// is `serving` with the API's URL.
    pub(crate) fn serve(&self, model: &Path, extra: &[&str]) -> Running {
        self.orchestrator(&["serve", "--http", "127.0.0.1:0", "--pool-timeout", "60"], model, extra)
    }

    /// What the node's admin socket shows.
    pub(crate) fn inspect(&self, i: u32) -> Value {
        let out = Command::new(exe())
            .args(["edge", "inspect", "--json", "--node"])
            .arg(self.admin(i))
            .output()
            .expect("inspect");
        serde_json::from_slice(&out.stdout).expect("inspect json")
    }

    /// Waits until node `i` holds no arena lease, no installed ring and no device object.
    pub(crate) fn assert_clean(&self, i: u32) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = self.inspect(i);
            if v["arena_leases"] == 0 && v["installed_rings"] == 0 && v["device_objects"] == 0 {
                return;
            }
            assert!(Instant::now() < deadline, "node {i} kept resources: {v}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A running orchestrator.
pub(crate) struct Running {
    pub(crate) child: Child,
    rx: mpsc::Receiver<Value>,
    lines: Vec<Value>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    /// Spawns `cmd` with its stdout's JSON lines on a channel and its stderr collected.
    pub(crate) fn spawn(mut cmd: Command) -> Running {
        let mut child =
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn swactor");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let stderr = child.stderr.take().expect("stderr");
        let err = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
            s
        });
        Running { child, rx, lines: Vec::new(), stderr: Some(err) }
    }

    /// Waits for a line matching `pred` (keeping every line seen).
    pub(crate) fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(v) => {
                    let hit = pred(&v);
                    self.lines.push(v);
                    if hit {
                        return;
                    }
                }
                Err(_) => panic!("timed out waiting for {what}; lines: {:?}", self.lines),
            }
        }
    }

    /// Every line seen so far.
    pub(crate) fn seen(&self) -> &[Value] {
        &self.lines
    }

    /// Waits for the exit; returns the exit code and every line.
    pub(crate) fn finish(mut self) -> (i32, Vec<Value>, String) {
        let deadline = Instant::now() + Duration::from_secs(90);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.lines.extend(self.rx.try_iter());
                let err = self.stderr.take().map(|h| h.join().unwrap_or_default());
                panic!("orchestrator did not exit; lines: {:?}; stderr: {err:?}", self.lines);
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        while let Ok(v) = self.rx.recv_timeout(Duration::from_secs(2)) {
            self.lines.push(v);
        }
        let err = self.stderr.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        (status.code().unwrap_or(-1), std::mem::take(&mut self.lines), err)
    }
}

pub(crate) fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|v| v["type"] == kind).collect()
}

fn position(lines: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    lines.iter().position(pred).unwrap_or_else(|| panic!("event missing in {lines:?}"))
}

/// Exactly one terminal outcome, `run_torn_down` last of the events, every stage of
/// `stages` reported stopped before it, and every part confirmed its teardown (nothing
/// `unconfirmed`: the deadline did not end it).
pub(crate) fn assert_one_outcome_and_teardown(lines: &[Value], outcome: &str, stages: &[u64]) {
    let terminal: Vec<&Value> = lines
        .iter()
        .filter(|v| {
            ["run_completed", "run_faulted", "run_stopped"]
                .contains(&v["type"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(terminal.len(), 1, "exactly one terminal outcome: {terminal:?}");
    let torn = events(lines, "run_torn_down");
    assert_eq!(torn.len(), 1, "run_torn_down exactly once");
    assert_eq!(torn[0]["outcome"], outcome);
    assert_eq!(torn[0]["unconfirmed"], serde_json::json!([]), "{}", torn[0]);
    let last_event = lines.iter().rposition(|v| v.get("ts_us").is_some()).expect("events");
    assert_eq!(lines[last_event]["type"], "run_torn_down", "run_torn_down is the last event");
    if outcome == "completed" {
        let completed = position(lines, |v| v["type"] == "run_completed");
        let last_token = lines.iter().rposition(|v| v["type"] == "token");
        assert!(last_token.is_none_or(|t| t < completed), "every token before run_completed");
    }
    for s in stages {
        let stopped = position(lines, |v| v["type"] == "stage_stopped" && v["stage_index"] == *s);
        assert!(stopped < last_event);
    }
}

pub(crate) fn tokens(lines: &[Value]) -> Vec<u64> {
    events(lines, "token").iter().map(|v| v["id"].as_u64().expect("id")).collect()
}

#[test]
fn a_three_stage_run_reproduces_the_reference_tokens_with_every_event_in_contract_order() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(6);
    let prompt = "the quick brown fox";
    let reference = Command::new(exe())
        .args(["generate", "--json", "--max-tokens", "24", "--prompt", prompt, "--model"])
        .arg(&model)
        .output()
        .expect("generate");
    let expected: Vec<u64> = String::from_utf8_lossy(&reference.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "token")
        .map(|v| v["id"].as_u64().expect("id"))
        .collect();
    assert!(!expected.is_empty());

    let nodes = Nodes::boot("run-reference", 3, |_| vec![]);
    let events_file = nodes.dir.join("events.jsonl");
    let run = nodes.orchestrate(
        &model,
        &[
            "--max-tokens",
            "24",
            "--prompt",
            prompt,
            "--events",
            events_file.to_str().expect("utf8"),
        ],
    );
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(tokens(&lines), expected, "the pipeline's tokens equal the reference's");

    // The events file holds the same stream as the --json events.
    let file: Vec<Value> = std::fs::read_to_string(&events_file)
        .expect("events file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("event line"))
        .collect();
    let stdout_events: Vec<&Value> = lines.iter().filter(|v| v.get("ts_us").is_some()).collect();
    assert_eq!(file.iter().collect::<Vec<_>>(), stdout_events);

    for kind in [
        "node_available",
        "pool_ready",
        "run_planned",
        "stage_provision_started",
        "weights_loaded",
        "edge_provision_started",
        "edge_ready",
        "stage_ready",
        "readiness_barrier_passed",
        "prompt_injected",
        "object_loaded",
        "execute_step_started",
        "object_produced",
        "step_completed",
        "token_received",
        "run_completed",
        "stop_run_sent",
        "stage_stopped",
        "run_torn_down",
    ] {
        assert!(!events(&file, kind).is_empty(), "event {kind} missing");
    }
    let at = |kind: &str| position(&file, |v| v["type"] == kind);
    assert!(at("pool_ready") < at("run_planned"));
    assert!(at("run_planned") < at("stage_provision_started"));
    let barrier = at("readiness_barrier_passed");
    for stage in 0..3u64 {
        let node = stage + 1;
        // Each stage's provisioning is reported twice, told apart by who reports it: the
        // orchestrator when it asks, then the node when it starts.
        let by: Vec<&Value> = events(&file, "stage_provision_started")
            .into_iter()
            .filter(|v| v["stage_index"] == stage)
            .map(|v| &v["by"])
            .collect();
        assert_eq!(by, vec!["orchestrator", "node"], "stage {stage}");
        let ready = position(&file, |v| v["type"] == "stage_ready" && v["stage_index"] == stage);
        assert!(ready < barrier);
        let loaded = position(&file, |v| v["type"] == "weights_loaded" && v["node_id"] == node);
        assert!(loaded < ready, "weights_loaded before stage_ready on stage {stage}");
        let edges: Vec<usize> = file
            .iter()
            .enumerate()
            .filter(|(_, v)| v["type"] == "edge_ready" && v["node_id"] == node)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(edges.len(), 2, "both edges of stage {stage} ready");
        assert!(edges.iter().all(|e| *e < ready));
        // Per sequence: loaded, started, produced, completed, in that order.
        for seq in 0..24u64 {
            let find = |kind: &str| {
                position(&file, |v| {
                    v["type"] == kind && v["node_id"] == node && v["sequence"] == seq
                })
            };
            assert!(find("object_loaded") < find("execute_step_started"));
            assert!(find("execute_step_started") < find("object_produced"));
            assert!(find("object_produced") < find("step_completed"));
        }
    }
    assert!(barrier < at("prompt_injected"));
    assert_one_outcome_and_teardown(&lines, "completed", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

/// File descriptors, threads, arena leases and child processes of a node.
pub(crate) fn footprint(nodes: &Nodes, i: u32) -> (usize, usize, u64, usize) {
    let pid = nodes.pid(i);
    let count = |p: String| std::fs::read_dir(p).map(|d| d.count()).unwrap_or(0);
    let children = std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter(|e| {
            std::fs::read_to_string(e.path().join("stat")).ok().is_some_and(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_string))
                    == Some(pid.to_string())
            })
        })
        .count();
    let leases = nodes.inspect(i)["arena_leases"].as_u64().expect("leases");
    // Descriptors and threads settle after a run (an admin connection closing, an idle
    // blocking thread retiring): the lowest of a few samples is the steady footprint.
    let settled = |p: String| {
        (0..5)
            .map(|_| {
                std::thread::sleep(Duration::from_millis(50));
                count(p.clone())
            })
            .min()
            .unwrap_or(0)
    };
    (settled(format!("/proc/{pid}/fd")), settled(format!("/proc/{pid}/task")), leases, children)
}

#[test]
fn ten_runs_in_a_row_on_one_pool_leak_no_descriptor_thread_lease_device_object_or_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    // Node 2 mislabels the output of sequence 10: runs of 8 tokens never get there and
    // complete; run 4, of 16 tokens, faults at node 3's ingress on the sequence violation.
    // Runs 6 and 8 are stopped by the operator mid-decode (an object in flight meets a
    // stopping stage, or a step in flight is aborted).
    let nodes = Nodes::boot("run-ten", 3, |i| {
        if i == 2 { vec![("SWACTOR_FAULT_SKIP_SEQUENCE", "10".to_string())] } else { vec![] }
    });
    let mut after = Vec::new();
    for run in 1..=10 {
        let id = run.to_string();
        match run {
            4 => {
                let r = nodes.orchestrate(&model, &["--max-tokens", "16", "--run-id", &id]);
                let (code, lines, err) = r.finish();
                assert_eq!(code, 7, "run {run}: {err}");
                let f = the_fault(&lines);
                assert_eq!(f["reason"], "object.sequence_violation", "run {run}: {f}");
                assert_eq!(f["node_id"], 3, "run {run}: {f}");
            }
            6 | 8 => {
                let args = ["--max-tokens", "1000", "--max-seq-len", "1100", "--run-id", &id];
                let mut r = nodes.orchestrate(&model, &args);
                r.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 3);
                signal(r.child.id(), rustix::process::Signal::INT);
                let (code, lines, err) = r.finish();
                assert_eq!(code, 9, "run {run}: {err}");
                assert_one_outcome_and_teardown(&lines, "operator_stopped", &[0, 1, 2]);
            }
            _ => {
                let r = nodes.orchestrate(&model, &["--max-tokens", "8", "--run-id", &id]);
                let (code, lines, err) = r.finish();
                assert_eq!(code, 0, "run {run}: {err}\n{lines:#?}");
                assert_eq!(tokens(&lines).len(), 8);
            }
        }
        // No lease, ring or device object is left, after faulted runs as after clean ones.
        for i in 1..=3 {
            nodes.assert_clean(i);
        }
        if run == 2 || run == 10 {
            after.push((1..=3).map(|i| footprint(&nodes, i)).collect::<Vec<_>>());
        }
    }
    assert_no_growth(&after[0], &after[1]);
}

/// Each node's footprint `last` against `warm`: no more descriptors, at most one more
/// thread, no lease, exactly one worker process.
pub(crate) fn assert_no_growth(
    warm: &[(usize, usize, u64, usize)],
    last: &[(usize, usize, u64, usize)],
) {
    for (i, (warm, last)) in warm.iter().zip(last).enumerate() {
        assert!(last.0 <= warm.0, "node {}: open descriptors grew {warm:?} -> {last:?}", i + 1);
        assert!(last.1 <= warm.1 + 1, "node {}: threads grew {warm:?} -> {last:?}", i + 1);
        assert_eq!(last.2, 0, "node {}: arena leases left", i + 1);
        assert_eq!(last.3, 1, "node {}: exactly one worker process", i + 1);
    }
}

#[test]
fn a_pool_watch_beside_two_runs_sees_the_pool_ready_and_disturbs_neither() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("run-beside-watch", 2, |_| vec![]);
    // The watch starts first, with the orchestrator's own key file, and stays up.
    let mut watch = Command::new(exe())
        .args(["pool", "watch", "--json", "--listen", "127.0.0.1:0", "--window-ms", "300"])
        .arg("--pool")
        .arg(&nodes.pool)
        .arg("--key")
        .arg(&nodes.key)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch");
    let (tx, seen) = mpsc::channel::<Value>();
    let stdout = watch.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let watched = seen.recv_timeout(Duration::from_secs(30)).expect("the watch reports");
    assert_eq!(watched["type"], "node_available", "{watched}");
    for run in ["1", "2"] {
        let r = nodes.orchestrate(&model, &["--max-tokens", "12", "--run-id", run]);
        let (code, lines, err) = r.finish();
        assert_eq!(code, 0, "run {run} beside the watch: {err}");
        assert_eq!(tokens(&lines).len(), 12);
        assert_one_outcome_and_teardown(&lines, "completed", &[0, 1]);
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let lines: Vec<Value> = seen.try_iter().collect();
    assert!(lines.iter().any(|v| v["type"] == "pool_ready"), "{lines:?}");
    assert!(!lines.iter().any(|v| v["type"] == "node_refused"), "{lines:?}");
    // `edge inspect` in text says which stage and layers the node ran, and lists its
    // edges as a table, not as JSON.
    nodes.assert_clean(2);
    let text = Command::new(exe())
        .args(["edge", "inspect", "--node"])
        .arg(nodes.admin(2))
        .output()
        .expect("inspect");
    let text = String::from_utf8(text.stdout).expect("utf8");
    assert!(text.contains("stage 1 of run 2: layers 2..4, torn down"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("edge") && l.contains("last fault")), "{text}");
    assert!(text.contains("recv") && text.contains("send"), "{text}");
    let rows: Vec<&str> =
        text.lines().filter(|l| l.contains("node 1") || l.contains("node 100")).collect();
    assert_eq!(rows.len(), 2, "{text}");
    // Columns are two spaces apart at least: edge, run, direction, peer, path, state, ring.
    let fields = |r: &str| -> Vec<String> {
        r.split("  ").map(str::trim).filter(|f| !f.is_empty()).map(String::from).collect()
    };
    assert!(
        rows.iter().all(|r| fields(r)[5] == "stopped" && fields(r)[6] != "-"),
        "a ring each: {text}"
    );
    assert!(!text.contains('{'), "no JSON in the text form: {text}");
    assert!(text.contains("stalls: times a pump waited"), "the stalls column is explained: {text}");
}

#[test]
fn a_pool_file_naming_another_device_than_the_node_reports_is_refused_before_any_stage() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("run-device-mismatch", 2, |_| vec![]);
    let pool = std::fs::read_to_string(&nodes.pool).expect("pool");
    // Node 2 booted on the CPU (the default); the pool file claims a GPU for it.
    let claimed = pool.replacen("node_id = 2\n", "node_id = 2\ndevice = \"cuda:0\"\n", 1);
    assert_ne!(claimed, pool);
    std::fs::write(&nodes.pool, claimed).expect("pool");
    let (code, lines, err) = nodes.orchestrate(&model, &["--max-tokens", "4"]).finish();
    assert_eq!(code, 4, "a plan rejection: {err}");
    assert!(err.contains("device_mismatch") && err.contains("node 2"), "{err}");
    assert!(events(&lines, "stage_provision_started").is_empty(), "{lines:?}");
    for i in 1..=2 {
        nodes.assert_clean(i);
    }
}

#[test]
fn a_pool_file_without_memory_bytes_plans_with_what_each_node_reported_and_the_run_completes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("run-no-memory", 2, |_| vec![]);
    let pool = std::fs::read_to_string(&nodes.pool).expect("pool");
    let without = pool.replace("memory_bytes = 8589934592\n", "");
    assert!(!without.contains("memory_bytes"), "{without}");
    std::fs::write(&nodes.pool, without).expect("pool");
    let (code, lines, err) = nodes.orchestrate(&model, &["--max-tokens", "4"]).finish();
    assert_eq!(code, 0, "memory_bytes is optional: {err}");
    assert_eq!(tokens(&lines).len(), 4);
    let planned = events(&lines, "run_planned");
    assert_eq!(planned.len(), 1, "{lines:?}");
}

/// Runs a long decode without resuming, applies `fault` once a few tokens arrived, and
/// returns the orchestrator's exit code and lines.
fn fault_run(
    nodes: &Nodes,
    extra: &[&str],
    fault: impl FnOnce(&Nodes),
) -> (i32, Vec<Value>, String) {
    let model = synth_model(4);
    let mut args = vec!["--max-tokens", "1000", "--max-seq-len", "1100", "--no-resume"];
    args.extend_from_slice(extra);
    let mut run = nodes.orchestrate(&model, &args);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    fault(nodes);
    run.finish()
}

fn the_fault(lines: &[Value]) -> Value {
    let faulted = events(lines, "run_faulted");
    assert_eq!(faulted.len(), 1, "exactly one run_faulted");
    faulted[0].clone()
}

#[test]
fn a_stage_node_killed_mid_decode_faults_the_run_and_the_survivors_tear_down() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-kill-node", 3, |_| vec![]);
    let (code, lines, err) =
        fault_run(&nodes, &[], |n| signal(n.pid(2), rustix::process::Signal::KILL));
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "membership.node_down", "{f}");
    assert_eq!(f["component"], "membership");
    assert_eq!(f["node_id"], 2);
    assert!(
        err.contains("membership.node_down on node 2") && err.contains("detected by membership"),
        "the reason, the node and the detector are printed: {err}"
    );
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 2]);
    assert_lost_not_stopped(&lines, 1, 2);
    nodes.assert_clean(1);
    nodes.assert_clean(3);
}

#[test]
fn a_node_stopped_cleanly_mid_decode_says_so_and_the_run_faults_with_node_stopped() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-stop-node", 3, |_| vec![]);
    let (code, lines, err) =
        fault_run(&nodes, &[], |n| signal(n.pid(2), rustix::process::Signal::TERM));
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "node.stopped", "not a lost connection: {f}");
    assert_eq!(f["component"], "control_channel");
    assert_eq!(f["node_id"], 2);
    assert!(err.contains("node.stopped on node 2"), "{err}");
    nodes.assert_clean(1);
    nodes.assert_clean(3);
}

#[test]
fn a_second_orchestrator_with_the_same_key_taking_the_pool_over_is_named_as_a_takeover() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-takeover", 2, |_| vec![]);
    let mut second = None;
    let (code, lines, err) = fault_run(&nodes, &[], |n| {
        second = Some(n.orchestrate(&synth_model(4), &["--max-tokens", "2", "--no-resume"]));
    });
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "control.taken_over", "not a lost connection: {f}");
    assert_eq!(f["component"], "control_channel");
    // The one that took over ends too (it may find a stage still being torn down).
    let (code2, _, err2) = second.expect("started").finish();
    assert!(code2 == 0 || code2 == 7, "{err2}");
    for i in 1..=2 {
        nodes.assert_clean(i);
    }
}

/// Stage `stage` of node `node` was reported lost, never stopped, and the teardown counted
/// it as lost.
pub(crate) fn assert_lost_not_stopped(lines: &[Value], stage: u64, node: u64) {
    let lost = events(lines, "stage_lost");
    assert!(
        lost.iter().any(|v| v["stage_index"] == stage && v["node_id"] == node),
        "stage {stage} reported lost: {lost:?}"
    );
    let stopped: Vec<_> =
        events(lines, "stage_stopped").into_iter().filter(|v| v["stage_index"] == stage).collect();
    assert!(stopped.is_empty(), "nobody confirmed stage {stage} stopped: {stopped:?}");
    assert_eq!(events(lines, "run_torn_down")[0]["lost"], serde_json::json!([stage]));
    assert_eq!(events(lines, "run_torn_down")[0]["lost_nodes"], serde_json::json!([node]));
}

/// The worker process of node `i`.
fn worker_of(nodes: &Nodes, i: u32) -> u32 {
    let pid = nodes.pid(i).to_string();
    std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .find_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.to_string();
            (ppid == pid).then(|| e.file_name().to_str()?.parse().ok()).flatten()
        })
        .expect("worker process")
}

#[test]
fn a_worker_killed_mid_step_faults_the_run_and_its_node_serves_the_next_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-kill-worker", 3, |_| vec![]);
    let (code, lines, err) =
        fault_run(&nodes, &[], |n| signal(worker_of(n, 2), rustix::process::Signal::KILL));
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "ring.worker_crashed", "{f}");
    assert_eq!(f["component"], "worker_ctl");
    assert_eq!(f["node_id"], 2);
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
    // The node restarted its worker: the next run completes.
    let (code, lines, err) =
        nodes.orchestrate(&synth_model(4), &["--max-tokens", "4", "--run-id", "2"]).finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines).len(), 4);
}

#[test]
fn a_foreign_orchestrator_is_refused_and_faults_the_run_it_tried_to_take_over() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-foreign", 3, |_| vec![]);
    let foreign_key = nodes.dir.join("foreign.key");
    let (code, lines, err) = fault_run(&nodes, &[], |n| {
        let out = Command::new(exe())
            .args(["orchestrate", "pool", "--json", "--listen", "127.0.0.1:0"])
            .args(["--swim", "127.0.0.1:0", "--pool-timeout", "2", "--max-tokens", "2"])
            .arg("--pool")
            .arg(&n.pool)
            .arg("--key")
            .arg(&foreign_key)
            .arg("--model")
            .arg(synth_model(4))
            .output()
            .expect("foreign orchestrate");
        assert_eq!(out.status.code(), Some(8), "the foreign orchestrator never gets a pool");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("unauthorized_orchestrator"), "{text}");
    });
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "control.unauthorized_orchestrator", "{f}");
    assert_eq!(f["component"], "control_channel");
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

/// Opens early edge streams for the plan's small edge ids on every node from an endpoint
/// of its own, again and again, until `stop` is raised. Returns how many it opened.
fn flood_edge_streams(
    nodes: &[(String, Vec<String>)],
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    let nodes = nodes.to_vec();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async move {
            let key = swactor::net::identity::NodeKey::from_bytes(&[77; 32]);
            let stranger = swactor::net::endpoint::bind(
                &key,
                "127.0.0.1:0".parse().expect("addr"),
                &swactor::net::relay::Relays::none(),
            )
            .await
            .expect("bind");
            let mut conns = Vec::new();
            for (id, addrs) in &nodes {
                let id: iroh::EndpointId = id.parse().expect("endpoint id");
                let mut addr = iroh::EndpointAddr::new(id);
                for a in addrs {
                    addr = addr.with_ip_addr(a.parse().expect("socket address"));
                }
                let conn = stranger.connect(addr, swactor::net::endpoint::EDGE_ALPN).await;
                conns.push(conn.expect("the stranger reaches the node"));
            }
            let mut opened = 0;
            let mut streams = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for conn in &conns {
                    for edge in 1..=4u64 {
                        // The node grants streams as it refuses them: never wait for one.
                        let wait = Duration::from_millis(50);
                        let Ok(Ok(mut s)) = tokio::time::timeout(wait, conn.open_uni()).await
                        else {
                            continue;
                        };
                        let (run, edge) = (swactor::wire::RunId(1), swactor::wire::EdgeId(edge));
                        let preamble = swactor::net::edge::preamble(run, edge);
                        if let Ok(Ok(())) = tokio::time::timeout(wait, s.write_all(&preamble)).await
                        {
                            opened += 1;
                            streams.push(s);
                        }
                    }
                    streams.truncate(64);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            opened
        })
    })
}

#[test]
fn a_stranger_flooding_early_edge_streams_during_provisioning_is_refused_and_the_run_completes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("run-edge-flood", 2, |_| vec![]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flood = flood_edge_streams(&nodes.endpoints, std::sync::Arc::clone(&stop));
    let r = nodes.orchestrate(&model, &["--max-tokens", "12"]);
    let (code, lines, err) = r.finish();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened = flood.join().expect("flood");
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines).len(), 12);
    assert_one_outcome_and_teardown(&lines, "completed", &[0, 1]);
    assert!(opened > 0);
    for i in 1..=2 {
        let v = nodes.inspect(i);
        let refused = v["refused"]["unauthorized_peer"].as_u64().unwrap_or(0);
        assert!(refused > 0, "node {i} counted the stranger's streams: {v}");
        // Refused at once, never held: no stream of the stranger's displaced another or
        // waited to be refused as an unknown edge.
        assert_eq!(v["refused"].get("unknown_edge"), None, "node {i}: {v}");
        nodes.assert_clean(i);
    }
}

#[test]
fn a_token_object_with_a_skipped_sequence_faults_the_run_at_the_token_endpoint() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-skip", 3, |i| {
        if i == 3 { vec![("SWACTOR_FAULT_SKIP_SEQUENCE", "3".to_string())] } else { vec![] }
    });
    let (code, lines, err) = nodes.orchestrate(&synth_model(4), &["--max-tokens", "10"]).finish();
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "token.out_of_order", "{f}");
    assert_eq!(f["component"], "token_endpoint");
    assert_eq!(tokens(&lines).len(), 3, "tokens 0..3 arrived before the gap");
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

#[test]
fn a_weights_url_that_404s_faults_the_run_with_download_failed() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (url, hits, _) = crate::weights::serve(Vec::new(), 404, false);
    let nodes = Nodes::boot("run-404", 3, |_| vec![]);
    let (code, lines, err) =
        nodes.orchestrate(&synth_model(4), &["--max-tokens", "4", "--weights-url", &url]).finish();
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "weights.download_failed", "{f}");
    assert_eq!(f["component"], "weights");
    assert!(hits.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    assert!(events(&lines, "token").is_empty());
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

#[test]
fn a_worker_that_cannot_load_its_weights_faults_the_run_and_its_stage_never_says_weights_loaded() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A model whose header is sound (the node's checks pass: it parses, its block count is
    // the plan's) but one of block 1's tensors is named so no loader finds it: only the
    // worker that reads block 1 fails, with `weights.missing_tensor`.
    let broken = scratch().join("synth-4-missing-tensor.gguf");
    let mut bytes = std::fs::read(synth_model(4)).expect("model");
    let (from, to) = (b"blk.1.ffn_up.weight", b"blk.1.ffn_zz.weight");
    let at = bytes.windows(from.len()).position(|w| w == from).expect("tensor name");
    bytes[at..at + to.len()].copy_from_slice(to);
    std::fs::write(&broken, bytes).expect("write");
    let nodes = Nodes::boot("run-weights-load", 3, |_| vec![]);
    let (code, lines, err) = nodes.orchestrate(&broken, &["--max-tokens", "4"]).finish();
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "weights.missing_tensor", "{f}");
    assert_eq!(f["component"], "weights");
    let failed = f["node_id"].clone();
    let loaded: Vec<&Value> =
        events(&lines, "weights_loaded").into_iter().filter(|v| v["node_id"] == failed).collect();
    assert!(loaded.is_empty(), "the stage that failed to load said weights_loaded: {loaded:?}");
    assert!(events(&lines, "token").is_empty());
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

#[test]
fn sigint_during_decode_stops_the_run_as_operator_stopped_with_a_full_teardown() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-sigint", 3, |_| vec![]);
    let mut run =
        nodes.orchestrate(&synth_model(4), &["--max-tokens", "1000", "--max-seq-len", "1100"]);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(run.child.id(), rustix::process::Signal::INT);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 9, "{err}");
    let stopped = events(&lines, "run_stopped");
    assert_eq!(stopped.len(), 1);
    assert_eq!(stopped[0]["reason"], "operator.interrupt");
    assert_one_outcome_and_teardown(&lines, "operator_stopped", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

#[test]
fn run_local_runs_three_stages_and_leaves_no_process_or_file_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-clean");
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--max-tokens", "6"])
        .output()
        .expect("run local");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(tokens(&lines).len(), 6);
    let summary = events(&lines, "run")[0].clone();
    assert_eq!(summary["stages"], 3);
    assert_eq!(summary["outcome"], "completed");
    assert_eq!(entries(&tmp), Vec::<String>::new(), "no swactor-local directory is left behind");
    assert!(!node_processes_left(&tmp), "no node process is left behind");
}

#[test]
fn an_f16_kv_cache_reaches_every_stage_of_run_local_and_gives_generates_tokens() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(6);
    let prompt = "the quick brown fox";
    let ids = |cmd: &mut Command| -> Vec<u64> {
        let out = cmd.output().expect("run");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        tokens(&lines)
    };
    let args = ["--json", "--max-tokens", "24", "--kv-cache", "f16", "--prompt", prompt];
    let reference = ids(Command::new(exe()).arg("generate").args(args).arg("--model").arg(&model));
    assert_eq!(reference.len(), 24);
    let tmp = fresh_tmp("run-local-kv-f16");
    let piped = ids(Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--stages", "3"])
        .args(args)
        .arg("--model")
        .arg(&model));
    assert_eq!(piped, reference, "three stages with f16 caches give the one-process tokens");
    assert!(!node_processes_left(&tmp), "no node process is left behind");
}

/// An empty directory of its own for a test's `TMPDIR`.
fn fresh_tmp(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("tmp");
    dir
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("dir")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Waits until no process has `needle` in its command line.
fn wait_until_no_process_mentions(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_dir("/proc").expect("proc").flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
    }) {
        assert!(Instant::now() < deadline, "processes of {needle} outlived it");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_killed_run_local_leaves_no_key_and_the_next_run_local_removes_what_it_left() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-killed");
    // Beside it: a directory of a live owner (this test) and one not named by `run local`.
    let live = format!("swactor-local-{}-1", std::process::id());
    std::fs::create_dir(tmp.join(&live)).expect("mkdir");
    std::fs::create_dir(tmp.join("swactor-local-notes")).expect("mkdir");
    let mut child = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--max-tokens", "1000", "--max-seq-len", "1100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run local");
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first_token = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| serde_json::from_str::<Value>(&l).is_ok_and(|v| v["type"] == "token"));
    assert!(first_token, "the run produced a token");
    signal(pid, rustix::process::Signal::KILL);
    child.wait().expect("reap");
    let left = format!("swactor-local-{pid}-");
    let dir = entries(&tmp)
        .into_iter()
        .find(|n| n.starts_with(&left))
        .map(|n| tmp.join(n))
        .expect("a SIGKILLed run local leaves its directory");
    // Its nodes stop once their stdin closes.
    wait_until_no_process_mentions(&dir.display().to_string());
    let keys: Vec<PathBuf> = files_under(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "key"))
        .collect();
    assert!(keys.is_empty(), "private keys outlived the run: {keys:?}");
    // The pool it ran is in memory only: no pool file (addresses, endpoint ids) is left.
    let pools: Vec<PathBuf> =
        files_under(&dir).into_iter().filter(|p| p.ends_with("pool.toml")).collect();
    assert!(pools.is_empty(), "a pool file outlived the run: {pools:?}");

    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--max-tokens", "2"])
        .output()
        .expect("run local");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        entries(&tmp),
        vec![live, "swactor-local-notes".to_string()],
        "the dead owner's directory is gone; the others are untouched"
    );
}

#[test]
fn run_local_with_a_zero_byte_arena_reports_the_arena_size() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-arena-0");
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--arena-bytes", "0"])
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("0-byte") && stderr.contains("arena"), "{stderr}");
    assert!(!stderr.contains("endpoint_id"), "{stderr}");
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(events(&lines, "error")[0]["reason"], "arena_create_failed");
    assert_eq!(entries(&tmp), Vec::<String>::new());
    assert!(!node_processes_left(&tmp));
}

#[test]
fn an_unwritable_events_file_fails_before_any_node_starts_and_is_named() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-events");
    let missing = tmp.join("no-such-dir").join("events.jsonl");
    // A zero-byte arena would fail the first node's boot: the events file is checked first.
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--arena-bytes", "0", "--events"])
        .arg(&missing)
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
    assert!(!stderr.contains("arena"), "no node was started: {stderr}");
    // A write that fails during the run names the file too.
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--max-tokens", "2", "--events", "/dev/full"])
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("/dev/full"), "{stderr}");
    // An existing file is the user's: it is refused before anything starts, byte for byte.
    let kept = tmp.join("earlier-run.jsonl");
    std::fs::write(&kept, b"an earlier run's events\n").expect("write");
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--max-tokens", "2", "--events"])
        .arg(&kept)
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let error: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("one error line");
    assert_eq!(error["reason"], "events_file_exists");
    assert!(stderr.contains("never overwritten"), "{stderr}");
    assert_eq!(std::fs::read(&kept).expect("kept"), b"an earlier run's events\n");
    // A FIFO that nobody reads: a clear error after a bounded wait, before any node starts
    // (a plain open would block forever).
    let fifo = tmp.join("events.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--json", "--arena-bytes", "0", "--events"])
        .arg(&fifo)
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let error: Value = serde_json::from_slice(out.stdout.trim_ascii()).expect("one error line");
    assert_eq!(error["reason"], "events_no_reader", "{error}");
    assert!(stderr.contains("nobody reads"), "{stderr}");
}

/// Whether any node process that a `run local` with `TMPDIR=tmp` started is still alive
/// (other runs on the machine, a parallel test suite's included, are not looked at).
fn node_processes_left(tmp: &Path) -> bool {
    let tmp = tmp.display().to_string();
    std::fs::read_dir("/proc").expect("proc").flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains("--stop-on-stdin-eof") && c.contains(&tmp)
        })
    })
}

#[test]
fn a_partitioned_stage_node_faults_the_run_and_cleans_up_by_itself_after_the_heal() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let nodes = Nodes::boot("run-partition", 3, |_| vec![]);
    let mut cut = None;
    let (code, lines, err) = fault_run(&nodes, &[], |n| cut = Partition::cut(&n.ports[1]));
    if cut.is_none() {
        assert!(std::env::var_os("CI").is_none(), "CI must be able to partition loopback ports");
        eprintln!("note: partition test skipped: iptables needs root");
        return;
    }
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert_eq!(f["reason"], "membership.node_down", "{f}");
    assert_eq!(f["node_id"], 2);
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 2]);
    assert_lost_not_stopped(&lines, 1, 2);
    nodes.assert_clean(1);
    nodes.assert_clean(3);
    // The cut-off node lost its orchestrator: once it can be asked again, it holds nothing.
    drop(cut);
    nodes.assert_clean(2);
}

#[test]
fn run_local_refuses_more_stages_than_blocks_before_starting_any_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-nine");
    let out = Command::new(exe())
        .env("TMPDIR", &tmp)
        .args(["run", "local", "--stages", "9"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("9 stages for a model of 4 blocks"));
    assert_eq!(entries(&tmp), Vec::<String>::new(), "no local pool was made");
    assert!(!node_processes_left(&tmp));
}

#[test]
fn a_prompt_that_fills_the_context_completes_as_context_full_exactly_like_generate() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(6);
    let args =
        ["--json", "--max-seq-len", "16", "--max-tokens", "100", "--prompt", "the quick brown fox"];
    let parse = |out: &std::process::Output| -> Vec<Value> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let reference = Command::new(exe())
        .arg("generate")
        .args(args)
        .arg("--model")
        .arg(&model)
        .output()
        .expect("generate");
    assert_eq!(reference.status.code(), Some(0));
    let reference = parse(&reference);
    let generation = events(&reference, "generation")[0].clone();
    assert_eq!(generation["stop"], "context_full", "{generation}");

    let out = Command::new(exe())
        .args(["run", "local", "--stages", "3"])
        .args(args)
        .arg("--model")
        .arg(&model)
        .output()
        .expect("run local");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = parse(&out);
    assert_eq!(tokens(&lines), tokens(&reference), "the same tokens as generate");
    let summary = events(&lines, "run")[0].clone();
    assert_eq!(summary["outcome"], "completed", "{summary}");
    assert_eq!(summary["stop"], "context_full", "{summary}");
    assert!(events(&lines, "run_faulted").is_empty());
    let completed = events(&lines, "run_completed");
    assert_eq!(completed[0]["cause"], "context_full");
    assert_eq!(
        summary["prompt_tokens"].as_u64().unwrap() + summary["tokens"].as_u64().unwrap(),
        17
    );
}

#[test]
fn a_ctrl_c_right_after_run_local_started_its_nodes_stops_it_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = fresh_tmp("run-local-ctrl-c");
    // The test hook holds run local between starting its nodes and running: the window
    // in which the signal listener of the start phase was gone and the run's was not
    // installed yet.
    let mut child = Command::new(exe())
        .args(["run", "local", "--json", "--max-tokens", "200"])
        .env("TMPDIR", &tmp)
        .env("SWACTOR_TEST_PAUSE_AFTER_NODES_MS", "3000")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run local");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    loop {
        line.clear();
        assert!(stderr.read_line(&mut line).expect("stderr") > 0, "run local ended early");
        if line.contains("test pause: the nodes started") {
            break;
        }
    }
    signal(child.id(), rustix::process::Signal::INT);
    let status = child.wait().expect("wait");
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(status.code(), Some(9), "the Ctrl-C was honoured: {rest}");
    assert_eq!(entries(&tmp), Vec::<String>::new(), "no swactor-local directory is left behind");
    assert!(!node_processes_left(&tmp), "no node process is left behind");
}

#[test]
fn a_stop_during_a_long_prefill_aborts_the_step_instead_of_waiting_for_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(model) = crate::cli::smollm2() else { return };
    let nodes = Nodes::boot("run-prefill-stop", 3, |_| vec![]);
    // About 1,500 tokens: a prefill of many seconds on this machine.
    let prompt = "Once upon a time there was a little girl named Lily. ".repeat(110);
    let mut run = nodes.orchestrate(&model, &["--max-tokens", "4", "--prompt", &prompt]);
    run.wait_for("stage 0's prefill step", |v| {
        v["type"] == "execute_step_started" && v["stage_index"] == 0
    });
    let t0 = Instant::now();
    signal(run.child.id(), rustix::process::Signal::INT);
    let (code, lines, err) = run.finish();
    let took = t0.elapsed();
    eprintln!("stop during prefill took {took:?}");
    assert_eq!(code, 9, "{err}");
    assert_one_outcome_and_teardown(&lines, "operator_stopped", &[0, 1, 2]);
    // The prefill step of stage 0 was aborted, not waited for.
    assert!(
        events(&lines, "step_completed").is_empty(),
        "a stage finished its prefill step before stopping: {:?}",
        events(&lines, "step_completed")
    );
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
}

#[test]
fn run_local_refuses_bad_runtime_flags_before_starting_any_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The same flags `generate` and `run plan` refuse (tests/it/cli.rs), with the same
    // reason; a node that started would have announced itself on stdout.
    let tmp = fresh_tmp("run-local-bad-flags");
    for bad in crate::cli::bad_runtime_flags() {
        let out = Command::new(exe())
            .env("TMPDIR", &tmp)
            .args(["run", "local", "--json"])
            .args(&bad)
            .output()
            .expect("run local");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{bad:?}: {stderr}");
        let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        assert_eq!(lines.len(), 1, "{bad:?}: no event before the rejection: {lines:?}");
        assert_eq!(lines[0]["type"], "error");
        assert_eq!(lines[0]["reason"], "invalid_runtime", "{bad:?}");
        assert!(!node_processes_left(&tmp), "{bad:?}: no node process");
    }
}

/// A tmpfs of `bytes` mounted at `dir` (made empty first); unmounted on drop.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, bytes: u64) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_disk_that_fills_during_a_weights_download_faults_the_run_typed_and_the_node_serves_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let bytes = std::fs::read(&model).expect("model");
    let (url, _, _) = crate::weights::serve(bytes.clone(), 200, false);
    // Node 2's weights cache is a 64 KiB disk: the download cannot fit.
    let disk = std::cell::RefCell::new(None);
    let cache = scratch().join("run-full-disk").join("cache2");
    let nodes = Nodes::boot("run-full-disk", 3, |i| {
        if i == 2 {
            *disk.borrow_mut() = SmallDisk::mount(&cache, 64 << 10);
        }
        vec![]
    });
    let Some(_disk) = disk.into_inner() else {
        assert!(std::env::var_os("CI").is_none(), "CI must be able to mount a tmpfs");
        eprintln!("note: full-disk test skipped: mounting a tmpfs needs root");
        return;
    };
    assert!(bytes.len() > 64 << 10, "the model is larger than the disk");
    let (code, lines, err) =
        nodes.orchestrate(&model, &["--max-tokens", "4", "--weights-url", &url]).finish();
    assert_eq!(code, 7, "{err}");
    let f = the_fault(&lines);
    assert!(
        f["reason"].as_str().is_some_and(|r| r.starts_with("weights.")),
        "a typed weights fault: {f}"
    );
    assert_eq!((f["node_id"].as_u64(), f["component"].as_str()), (Some(2), Some("weights")));
    eprintln!("full disk during a download: {}", f["reason"]);
    assert_one_outcome_and_teardown(&lines, "faulted", &[0, 1, 2]);
    for i in 1..=3 {
        nodes.assert_clean(i);
    }
    // The node serves on: the next run (weights from the local path) completes.
    let (code, lines, err) =
        nodes.orchestrate(&model, &["--max-tokens", "4", "--run-id", "2"]).finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines).len(), 4);
}

#[test]
fn two_runs_of_run_local_get_run_ids_of_their_own() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let run_id = || {
        let out = Command::new(exe())
            .args(["run", "local", "--json", "--max-tokens", "1"])
            .output()
            .expect("run local");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<Value> = out
            .stdout
            .split(|b| *b == b'\n')
            .filter_map(|l| serde_json::from_slice(l).ok())
            .collect();
        let planned = events(&lines, "run_planned");
        planned.first().and_then(|e| e["run_id"].as_u64()).expect("run_planned names its run")
    };
    let (first, second) = (run_id(), run_id());
    assert_ne!(first, second);
    assert!(first < (1 << 53) && second < (1 << 53), "exact in every JSON reader");
}

#[test]
fn a_run_stopped_in_text_mode_says_so_once_in_its_summary_with_no_error_block_after_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(exe())
        .args(["run", "local", "--max-tokens", "1000", "--max-seq-len", "1100"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run local");
    // Text streams as it is generated: the run is decoding once some has arrived.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut buf = [0u8; 16];
    std::io::Read::read_exact(&mut stdout, &mut buf).expect("some text");
    signal(child.id(), rustix::process::Signal::INT);
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(9), "{err}");
    assert_eq!(err.matches("stopped by the operator").count(), 1, "{err}");
    assert!(!err.contains("Error:"), "the summary said it; nothing repeats it: {err}");
}

#[test]
fn speculation_through_one_to_three_stages_gives_generates_tokens_and_counts_its_drafts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(model) = crate::cli::smollm2() else { return };
    // Text the answer repeats, so that the n-gram drafter has something to propose.
    let prompt = "Copy the line twice. Line: the old lighthouse keeper looked out at the sea. \
                  Copy: the old lighthouse keeper looked out at the sea. Copy:";
    let lines = |cmd: &mut Command| -> Vec<Value> {
        let out = cmd.output().expect("run");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let args = ["--json", "--max-tokens", "40", "--prompt", prompt, "--threads", "1"];
    let reference =
        tokens(&lines(Command::new(exe()).arg("generate").args(args).arg("--model").arg(&model)));
    assert_eq!(reference.len(), 40);
    let mut accepted = 0;
    for stages in ["1", "2", "3"] {
        let tmp = fresh_tmp("run-local-speculate");
        let got = lines(
            Command::new(exe())
                .env("TMPDIR", &tmp)
                .args(["run", "local", "--stages", stages, "--speculate", "ngram"])
                .args(args)
                .arg("--model")
                .arg(&model),
        );
        assert_eq!(tokens(&got), reference, "{stages} stages with speculation");
        let spec = &events(&got, "run")[0]["speculation"];
        let (drafted, kept) = (
            spec["swactor_spec_decode_num_draft_tokens_total"].as_u64().unwrap_or(0),
            spec["swactor_spec_decode_num_accepted_tokens_total"].as_u64().unwrap_or(0),
        );
        assert!(kept <= drafted, "{spec}");
        accepted += kept;
        assert!(!node_processes_left(&tmp), "no node process is left behind");
    }
    assert!(accepted > 0, "no draft was ever accepted: the test proves nothing");
    // A draft model (a tiny random one with the vocabulary: nearly every draft is
    // rejected and rolled back) through 2 stages: the same tokens.
    let tmp = fresh_tmp("run-local-draft-model");
    let draft = tmp.join("draft.gguf");
    let synth = Command::new(exe())
        .args(["model", "synth", "--blocks", "1", "--hidden", "64", "--heads", "2"])
        .args(["--kv-heads", "1", "--ffn", "128", "--vocab-from"])
        .arg(&model)
        .arg("--out")
        .arg(&draft)
        .output()
        .expect("synth");
    assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
    let got = lines(
        Command::new(exe())
            .env("TMPDIR", &tmp)
            .args(["run", "local", "--stages", "2", "--draft-model"])
            .arg(&draft)
            .args(args)
            .arg("--model")
            .arg(&model),
    );
    assert_eq!(tokens(&got), reference, "2 stages with a draft model");
    let spec = &events(&got, "run")[0]["speculation"];
    assert!(spec["swactor_spec_decode_num_draft_tokens_total"].as_u64() > Some(0), "{spec}");
    assert!(!node_processes_left(&tmp), "no node process is left behind");
}
