//! README's multi-host walkthrough, command for command, across real network boundaries:
//! the coordinator and three nodes each in a network namespace of its own, with its own
//! address on one bridge (itself in a namespace of its own, so the host's firewall sees
//! none of it). Nodes boot with `--json` into files, `pool init` writes the pool file from
//! them, `pool watch` runs beside `orchestrate pool`, the run streams text, and SIGTERM
//! stops every node cleanly. Needs root and `ip`; without them the test says so and
//! returns, except under `CI`, where it fails. Every namespace and process is removed at
//! the end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{scratch, synth_model};

fn exe() -> PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// Network namespaces on one bridge; removed on drop (with every process in them).
pub(crate) struct Net {
    /// The switch namespace (holds the bridge) and one per host, in that order.
    pub(crate) namespaces: Vec<String>,
}

impl Net {
    pub(crate) fn ip(args: &[&str]) -> bool {
        Command::new("ip")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Namespaces `<tag>-<i>` for each address in `addrs` (a /24), linked to one bridge.
    /// `None` when they cannot be made (not root, no `ip`).
    pub(crate) fn up(tag: &str, addrs: &[&str]) -> Option<Net> {
        let switch = format!("{tag}-sw");
        let mut net = Net { namespaces: vec![switch.clone()] };
        if !Net::ip(&["netns", "add", &switch]) {
            net.namespaces.clear();
            return None;
        }
        let ok = Net::ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])
            && Net::ip(&["-n", &switch, "link", "set", "br0", "up"]);
        if !ok {
            return None;
        }
        for (i, addr) in addrs.iter().enumerate() {
            let ns = format!("{tag}-{i}");
            let (host_end, switch_end) = (format!("{tag}h{i}"), format!("{tag}s{i}"));
            net.namespaces.push(ns.clone());
            let ok = Net::ip(&["netns", "add", &ns])
                && Net::ip(&[
                    "link",
                    "add",
                    &host_end,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &switch_end,
                ])
                && Net::ip(&["link", "set", &host_end, "netns", &ns])
                && Net::ip(&["link", "set", &switch_end, "netns", &switch])
                && Net::ip(&["-n", &switch, "link", "set", &switch_end, "master", "br0", "up"])
                && Net::ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &host_end])
                && Net::ip(&["-n", &ns, "link", "set", &host_end, "up"])
                && Net::ip(&["-n", &ns, "link", "set", "lo", "up"]);
            if !ok {
                return None;
            }
        }
        Some(net)
    }

    /// `swactor ARGS` inside host `i`'s namespace.
    pub(crate) fn swactor(&self, i: usize) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.namespaces[i + 1]]).arg(exe());
        cmd
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            // Whatever still runs in it goes first (nothing should).
            let _ = Command::new("ip").args(["netns", "pids", ns]).output().map(|out| {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            });
            Net::ip(&["netns", "del", ns]);
        }
    }
}

/// Children killed and reaped on drop (after a failure; a clean run stops them itself).
pub(crate) struct Reap(pub(crate) Vec<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits until `file` holds a JSON line of `kind`; returns it.
pub(crate) fn wait_for_line(file: &Path, kind: &str, child: &mut Child) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let hit = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v["type"] == kind);
        if let Some(v) = hit {
            return v;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{} exited ({status}) before {kind}: {text}", file.display());
        }
        assert!(Instant::now() < deadline, "no {kind} in {}: {text}", file.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn readmes_multi_host_walkthrough_runs_across_network_namespaces_with_a_watch_beside_it() {
    let tag = format!("sw{}", std::process::id() % 100_000);
    let subnet = 10 + std::process::id() % 200;
    let addr = |host: u32| format!("10.231.{subnet}.{host}");
    let (coordinator, hosts) = (addr(10), [addr(11), addr(12), addr(13)]);
    let all = [coordinator.as_str(), &hosts[0], &hosts[1], &hosts[2]];
    let Some(net) = Net::up(&tag, &all) else {
        assert!(std::env::var_os("CI").is_none(), "CI must be able to make network namespaces");
        eprintln!("note: multi-host walkthrough skipped: network namespaces need root and ip");
        return;
    };
    let dir = scratch().join("multihost");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let model = dir.join("model.gguf");
    std::fs::copy(synth_model(6), &model).expect("model");
    let mut children = Reap(Vec::new());

    // On the coordinator: the orchestrator's key and its endpoint id.
    let out = net.swactor(0).args(["node", "id", "--key", "orch.key"]).current_dir(&dir).output();
    let orch = String::from_utf8(out.expect("node id").stdout).expect("utf8").trim().to_string();
    assert_eq!(orch.len(), 64, "{orch}");

    // On every host, a node that accepts only that orchestrator; node 1 is the seed.
    for (i, host) in hosts.iter().enumerate() {
        let n = i + 1;
        let mut cmd = net.swactor(n);
        cmd.args(["node", "boot", "--node-id", &n.to_string(), "--key", &format!("n{n}.key")])
            .args(["--listen", &format!("{host}:7401"), "--swim", &format!("{host}:7501")]);
        if n > 1 {
            cmd.args(["--join", &format!("{}:7501", hosts[0])]);
        }
        let log = std::fs::File::create(dir.join(format!("n{n}.jsonl"))).expect("log");
        cmd.args(["--orchestrator", &orch, "--json"])
            .current_dir(&dir)
            .env("TMPDIR", &dir)
            .stdout(log)
            .stderr(Stdio::null());
        children.0.push(cmd.spawn().expect("node boot"));
        let node = children.0.last_mut().expect("node");
        let available = wait_for_line(&dir.join(format!("n{n}.jsonl")), "node_available", node);
        assert_eq!(available["addrs"], serde_json::json!([format!("{host}:7401")]));
        assert_eq!(available["device"], "cpu");
    }

    // On the coordinator: the pool file from what the nodes printed.
    let pool = std::fs::File::create(dir.join("pool.toml")).expect("pool");
    let status = net
        .swactor(0)
        .args(["pool", "init", "n1.jsonl", "n2.jsonl", "n3.jsonl"])
        .current_dir(&dir)
        .stdout(pool)
        .status()
        .expect("pool init");
    assert!(status.success());

    // `pool watch` beside the run, as README says it may.
    let mut watch = net
        .swactor(0)
        .args(["pool", "watch", "--pool", "pool.toml", "--key", "orch.key"])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("pool watch");
    let watched = BufReader::new(watch.stdout.take().expect("stdout"));
    children.0.push(watch);
    let (tx, watch_lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in watched.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.starts_with("the pool is ready")) {
        let left = deadline.saturating_duration_since(Instant::now());
        seen.push(watch_lines.recv_timeout(left).unwrap_or_else(|_| panic!("{seen:?}")));
    }

    let run = net
        .swactor(0)
        .args(["orchestrate", "pool", "--pool", "pool.toml", "--key", "orch.key"])
        .args(["--listen", &format!("{coordinator}:7400")])
        .args(["--model", "model.gguf", "--prompt", "Once upon a time", "--events", "run.jsonl"])
        .current_dir(&dir)
        .output()
        .expect("orchestrate pool");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(!run.stdout.is_empty(), "the run streamed its text: {stderr}");
    let events = std::fs::read_to_string(dir.join("run.jsonl")).expect("events");
    let kinds: Vec<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| v["type"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(kinds.iter().any(|k| k == "token_received"), "{kinds:?}");
    assert!(
        kinds.contains(&"run_completed".to_string()) && kinds.ends_with(&["run_torn_down".into()])
    );
    for line in &events.lines().collect::<Vec<_>>() {
        assert!(!line.contains("0.0.0.0"), "nothing advertises an unspecified address: {line}");
    }

    // The watch was let in by every node and saw none fault (a SWIM flap on a loaded host
    // is an observation, not a disturbance: the run above is the proof of that).
    seen.extend(watch_lines.try_iter());
    assert!(!seen.iter().any(|l| l.contains("faulted") || l.contains("refused")), "{seen:?}");

    // SIGTERM stops every node cleanly.
    let watch = children.0.pop().expect("watch");
    drop(Reap(vec![watch]));
    for node in &mut children.0 {
        let pid = rustix::process::Pid::from_raw(node.id() as i32).expect("pid");
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
        let status = node.wait().expect("node exits");
        assert!(status.success(), "{status:?}");
    }
    drop(net);
}
