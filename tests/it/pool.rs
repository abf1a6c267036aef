//! Real processes on loopback: three `swactor node boot` nodes and `swactor pool watch`
//! reach PoolReady; `edge inspect` shows a node's state; a SIGKILLed node makes the gate
//! withdraw readiness. Every child is killed and reaped at the end.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::support::{Partition, port_of, scratch};

struct Kill(Vec<Child>);

impl Drop for Kill {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// Spawns a command whose stdout JSON lines arrive on the returned channel.
fn spawn_lines(cmd: &mut Command) -> (Child, mpsc::Receiver<serde_json::Value>) {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line)
                && tx.send(v).is_err()
            {
                return;
            }
        }
    });
    (child, rx)
}

fn wait_for(
    rx: &mpsc::Receiver<serde_json::Value>,
    what: &str,
    timeout: Duration,
    mut pred: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + timeout;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(v) if pred(&v) => return v,
            Ok(v) => seen.push(v),
            Err(_) => panic!("timed out waiting for {what}; saw {seen:?}"),
        }
    }
}

#[test]
fn three_booted_nodes_reach_pool_ready_and_a_killed_node_withdraws_it() {
    let dir = scratch().join("pool-it");
    let (mut children, events) = pool_of(&dir, 3);
    let ready =
        wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");
    assert_eq!(ready["nodes"], serde_json::json!([1, 2, 3]));

    let inspect = Command::new(exe())
        .args(["edge", "inspect", "--json", "--node"])
        .arg(dir.join("n1.sock"))
        .output()
        .expect("inspect");
    assert!(inspect.status.success());
    let state: serde_json::Value = serde_json::from_slice(&inspect.stdout).expect("json");
    assert_eq!(state["type"], "edge_inspect");
    assert_eq!(state["node_id"], 1);
    assert_eq!(state["edges"], serde_json::json!([]));
    assert_eq!(state["arena_leases"], 0);

    // SIGKILL node 3: the gate withdraws readiness, and node 3's worker dies with it.
    let node3 = &mut children.0[2];
    let node3_pid = node3.id();
    let parent_of = |stat: &str| {
        stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)).map(String::from)
    };
    let worker: u32 = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            (parent_of(&stat)? == node3_pid.to_string()).then_some(pid)
        })
        .next()
        .expect("node 3 runs a worker");
    node3.kill().expect("kill");
    node3.wait().expect("reap");
    let lost = wait_for(&events, "readiness_lost", Duration::from_secs(15), |v| {
        v["type"] == "readiness_lost"
    });
    assert_eq!(lost["node"], 3);
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(format!("/proc/{worker}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()) != Some("Z")
    }) {
        assert!(Instant::now() < deadline, "node 3's worker {worker} outlived it");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Boots `n` nodes and a pool watch in `dir`; returns the children (nodes first, watch
/// last) and the watch's events.
fn pool_of(dir: &std::path::Path, n: u64) -> (Kill, mpsc::Receiver<serde_json::Value>) {
    let (children, events, _) = pool_with_nodes(dir, n);
    (children, events)
}

/// As [`pool_of`], also returning each node's `node_available` record.
fn pool_with_nodes(
    dir: &std::path::Path,
    n: u64,
) -> (Kill, mpsc::Receiver<serde_json::Value>, Vec<serde_json::Value>) {
    pool_with_extra_seeds(dir, n, |_, _| None)
}

/// As [`pool_with_nodes`]; `extra_seed(i, first_swim)` may name one more `--join` seed for
/// node `i` (called before it boots, with node 1's SWIM address once node 1 runs).
fn pool_with_extra_seeds(
    dir: &std::path::Path,
    n: u64,
    extra_seed: impl FnMut(u64, Option<&str>) -> Option<String>,
) -> (Kill, mpsc::Receiver<serde_json::Value>, Vec<serde_json::Value>) {
    pool_with_node_args(dir, n, extra_seed, |_| vec![])
}

/// As [`pool_with_extra_seeds`]; `extra_args(i)` adds arguments to node `i`'s command.
fn pool_with_node_args(
    dir: &std::path::Path,
    n: u64,
    mut extra_seed: impl FnMut(u64, Option<&str>) -> Option<String>,
    extra_args: impl Fn(u64) -> Vec<&'static str>,
) -> (Kill, mpsc::Receiver<serde_json::Value>, Vec<serde_json::Value>) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let orch_key = dir.join("orch.key");
    let out =
        Command::new(exe()).args(["node", "id", "--key"]).arg(&orch_key).output().expect("node id");
    let orch = String::from_utf8(out.stdout).expect("utf8").trim().to_string();
    let mut children = Kill(Vec::new());
    let mut nodes = Vec::new();
    let mut seed: Option<String> = None;
    for i in 1..=n {
        let mut cmd = Command::new(exe());
        cmd.args([
            "node",
            "boot",
            "--json",
            "--node-id",
            &i.to_string(),
            "--listen",
            "127.0.0.1:0",
            "--swim",
            "127.0.0.1:0",
        ])
        .arg("--key")
        .arg(dir.join(format!("n{i}.key")))
        .arg("--admin")
        .arg(dir.join(format!("n{i}.sock")))
        .args(["--orchestrator", &orch]);
        if let Some(s) = &seed {
            cmd.args(["--join", s]);
        }
        if let Some(extra) = extra_seed(i, seed.as_deref()) {
            cmd.args(["--join", &extra]);
        }
        cmd.args(extra_args(i));
        let (child, rx) = spawn_lines(&mut cmd);
        children.0.push(child);
        let avail = wait_for(&rx, "node_available", Duration::from_secs(30), |v| {
            v["type"] == "node_available"
        });
        seed.get_or_insert_with(|| avail["swim_addr"].as_str().expect("swim").to_string());
        nodes.push(avail);
    }
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    for node in &nodes {
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {}\nendpoint_id = \"{}\"\naddrs = {}\nmemory_bytes = 8589934592\n\n",
            node["node_id"],
            node["endpoint_id"].as_str().expect("id"),
            node["addrs"]
        ));
    }
    let pool_path = dir.join("pool.toml");
    std::fs::write(&pool_path, pool).expect("pool");
    let (watch, events) = spawn_lines(
        Command::new(exe())
            .args(["pool", "watch", "--json", "--listen", "127.0.0.1:0", "--window-ms", "500"])
            .arg("--pool")
            .arg(&pool_path)
            .arg("--key")
            .arg(&orch_key),
    );
    children.0.push(watch);
    (children, events, nodes)
}

#[test]
fn a_paused_node_withdraws_readiness_and_the_pool_is_ready_again_after_it_resumes() {
    let (children, events) = pool_of(&scratch().join("pool-pause"), 3);
    wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");
    let node3 = children.0[2].id() as i32;
    let pid = rustix::process::Pid::from_raw(node3).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).expect("SIGSTOP");
    // A suspect node is not ready: readiness is withdrawn at the suspicion, before (or
    // without) SWIM declaring it down.
    let mut seen = Vec::new();
    let lost = wait_for(&events, "readiness_lost", Duration::from_secs(15), |v| {
        seen.push(v.clone());
        v["type"] == "readiness_lost"
    });
    assert_eq!(lost["node"], 3);
    // Readiness fell at the first bad news about node 3: its suspicion, or (when another
    // member's gossip declared it down before this watcher suspected it) its down.
    let bad_news = seen
        .iter()
        .filter(|v| {
            v["node_id"] == 3 && (v["type"] == "member_suspect" || v["type"] == "member_down")
        })
        .count();
    assert!(bad_news <= 1, "readiness fell at the first bad news, not a later one: {seen:?}");
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).expect("SIGCONT");
    let again = wait_for(&events, "pool_ready again", Duration::from_secs(30), |v| {
        v["type"] == "pool_ready"
    });
    assert_eq!(again["nodes"], serde_json::json!([1, 2, 3]), "the resumed node rejoined cleanly");
}

#[test]
fn a_node_whose_worker_fails_for_good_reports_its_fault_and_the_pool_is_not_ready() {
    let dir = scratch().join("pool-node-fault");
    let (mut children, events, _) = pool_with_node_args(
        &dir,
        3,
        |_, _| None,
        |i| if i == 3 { vec!["--max-worker-restarts", "0"] } else { vec![] },
    );
    wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");
    let node3 = children.0[2].id().to_string();
    let worker: i32 = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .find_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid = stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.to_string();
            (ppid == node3).then(|| e.file_name().to_str()?.parse().ok()).flatten()
        })
        .expect("node 3 runs a worker");
    let pid = rustix::process::Pid::from_raw(worker).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
    // Node 3 may not restart its worker: it reports the fault over its control session
    // before it stops, and the gate takes it out of the pool at once.
    let mut seen = Vec::new();
    let faulted = wait_for(&events, "node_faulted", Duration::from_secs(15), |v| {
        seen.push(v.clone());
        v["type"] == "node_faulted"
    });
    assert_eq!(faulted["node_id"], 3);
    assert_eq!(faulted["reason"], "worker_start_failed");
    assert!(!seen.iter().any(|v| v["type"] == "member_down"), "before SWIM noticed: {seen:?}");
    let lost = wait_for(&events, "readiness_lost", Duration::from_secs(15), |v| {
        v["type"] == "readiness_lost"
    });
    assert_eq!(lost["node"], 3);
    let status = children.0[2].wait().expect("node 3 stops");
    assert_eq!(status.code(), Some(6), "a node fault exits like a boot fault");
}

#[test]
fn a_partitioned_node_withdraws_readiness_while_it_runs_on_and_rejoins_when_the_partition_heals() {
    let (children, events, nodes) = pool_with_nodes(&scratch().join("pool-partition"), 3);
    wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");
    // Cut node 3 off: its SWIM and QUIC ports, both directions. The process keeps running.
    let ports = [port_of(&nodes[2]["swim_addr"]), port_of(&nodes[2]["addrs"][0])];
    let Some(cut) = Partition::cut(&ports) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must be able to partition loopback ports (root and iptables)"
        );
        eprintln!("note: partition test skipped: iptables needs root");
        return;
    };
    let lost = wait_for(&events, "readiness_lost", Duration::from_secs(15), |v| {
        v["type"] == "readiness_lost"
    });
    assert_eq!(lost["node"], 3);
    assert!(
        std::fs::read_to_string(format!("/proc/{}/stat", children.0[2].id()))
            .is_ok_and(|s| !s.contains(") Z ")),
        "the partitioned node itself keeps running"
    );
    drop(cut);
    let again = wait_for(&events, "pool_ready after the heal", Duration::from_secs(30), |v| {
        v["type"] == "pool_ready"
    });
    assert_eq!(again["nodes"], serde_json::json!([1, 2, 3]), "node 3 rejoined after the heal");
}

fn impostor(mode: &str, node_id: u64, endpoint_id: &str, target: &str) -> (Child, String) {
    let (child, rx) = spawn_lines(Command::new(exe()).args([
        "util",
        "swim-impostor",
        "--mode",
        mode,
        "--node-id",
        &node_id.to_string(),
        "--endpoint-id",
        endpoint_id,
        "--target",
        target,
    ]));
    let started = wait_for(&rx, "impostor_started", Duration::from_secs(10), |v| {
        v["type"] == "impostor_started"
    });
    (child, started["addr"].as_str().expect("addr").to_string())
}

#[test]
fn swim_impostors_claiming_a_members_identity_are_refused_counted_and_change_nothing() {
    // A replaying impostor sits among node 2's seeds: it captures one of node 2's genuine,
    // signed announces and replays it to node 1 over and over.
    let mut replayer = None;
    let (mut children, events, nodes) =
        pool_with_extra_seeds(&scratch().join("pool-impostor"), 2, |i, first| {
            let first = first?;
            (i == 2).then(|| {
                let (child, addr) = impostor("replay", 2, &format!("{:064x}", 0), first);
                replayer = Some(child);
                addr
            })
        });
    children.0.extend(replayer);
    let dir = scratch().join("pool-impostor");
    wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");

    // Three more impostors claim node 2's node id and endpoint id, each its own way.
    let node1 = nodes[0]["swim_addr"].as_str().expect("swim").to_string();
    let node2_id = nodes[1]["endpoint_id"].as_str().expect("id").to_string();
    for mode in ["plain", "own-key", "forged-signer"] {
        children.0.push(impostor(mode, 2, &node2_id, &node1).0);
    }
    // Node 1 counts every kind of refusal (waiting for the counts, not for time).
    let deadline = Instant::now() + Duration::from_secs(20);
    let wanted = ["unsigned", "unknown_signer", "bad_signature", "replayed"];
    loop {
        let state = inspect(&dir.join("n1.sock"));
        let counts = &state["swim_rejected"]["by_reason"];
        if wanted.iter().all(|r| counts[r].as_u64().is_some_and(|c| c >= 1)) {
            assert!(state["swim_rejected"]["recent"].as_array().is_some_and(|r| r.len() <= 16));
            break;
        }
        assert!(Instant::now() < deadline, "node 1 did not refuse every impostor: {counts}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The impostors go away: nobody is declared down, the pool stays ready.
    let first_impostor = children.0.len() - 4;
    drop(Kill(children.0.split_off(first_impostor)));
    let quiet_until = Instant::now() + Duration::from_secs(4);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        match events.recv_timeout(left) {
            Ok(v) => assert!(
                !["member_down", "readiness_lost"].contains(&v["type"].as_str().unwrap_or("")),
                "an impostor changed the pool: {v}"
            ),
            Err(_) => break,
        }
    }
}

/// Boots one node with `args` added; returns it and its `node_available` record.
fn boot_node(
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::path::Path)],
) -> (Child, serde_json::Value) {
    let mut cmd = Command::new(exe());
    cmd.args(["node", "boot", "--json", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)));
    let (child, rx) = spawn_lines(&mut cmd);
    let avail =
        wait_for(&rx, "node_available", Duration::from_secs(30), |v| v["type"] == "node_available");
    (child, avail)
}

/// The orchestrator key file `key` and its endpoint id.
fn orchestrator_id(key: &std::path::Path) -> String {
    let out = Command::new(exe()).args(["node", "id", "--key"]).arg(key).output().expect("id");
    String::from_utf8(out.stdout).expect("utf8").trim().to_string()
}

fn inspect(socket: &std::path::Path) -> serde_json::Value {
    let out = Command::new(exe())
        .args(["edge", "inspect", "--json", "--node"])
        .arg(socket)
        .output()
        .expect("inspect");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("json")
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

#[test]
fn two_nodes_with_one_node_id_on_one_host_each_answer_on_their_own_default_admin_socket() {
    let dir = scratch().join("admin-default");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = orchestrator_id(&dir.join("orch.key"));
    let env = [("XDG_RUNTIME_DIR", dir.as_path())];
    let key = |name: &str| dir.join(name).into_os_string();
    let (ka, kb) = (key("a.key"), key("b.key"));
    let common = ["--node-id", "7", "--orchestrator", &orch].map(os);
    let mut children = Kill(Vec::new());
    let mut reports = Vec::new();
    for k in [&ka, &kb] {
        let mut args: Vec<&std::ffi::OsStr> = common.to_vec();
        args.extend([os("--key"), k.as_os_str()]);
        let (child, report) = boot_node(&args, &env);
        children.0.push(child);
        reports.push(report);
    }
    assert_ne!(reports[0]["admin"], reports[1]["admin"], "{reports:?}");
    for r in &reports {
        let socket = std::path::PathBuf::from(r["admin"].as_str().expect("admin"));
        assert!(socket.starts_with(&dir), "{socket:?} is in the runtime directory");
        let state = inspect(&socket);
        assert_eq!(state["endpoint_id"], r["endpoint_id"], "each socket reaches its own node");
    }
    // A third node with node a's key would take node a's socket: it is refused instead.
    let out = Command::new(exe())
        .args(["node", "boot", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(common)
        .arg("--key")
        .arg(&ka)
        .env("XDG_RUNTIME_DIR", &dir)
        .stdout(Stdio::null())
        .output()
        .expect("boot");
    assert_eq!(out.status.code(), Some(6));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("admin_socket_in_use") && stderr.contains("live node"), "{stderr}");
    let first = std::path::PathBuf::from(reports[0]["admin"].as_str().expect("admin"));
    assert_eq!(inspect(&first)["endpoint_id"], reports[0]["endpoint_id"], "node a kept it");
}

#[test]
fn a_stale_admin_socket_is_replaced_and_the_node_removes_its_own_at_shutdown() {
    let dir = scratch().join("admin-stale");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let socket = dir.join("n1.sock");
    // What a SIGKILLed node leaves: a socket nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).expect("bind"));
    let orch = orchestrator_id(&dir.join("orch.key"));
    let key = dir.join("n1.key");
    let (child, report) = boot_node(
        &[
            os("--node-id"),
            os("1"),
            os("--orchestrator"),
            os(&orch),
            os("--key"),
            key.as_os_str(),
            os("--admin"),
            socket.as_os_str(),
        ],
        &[],
    );
    let mut children = Kill(vec![child]);
    assert_eq!(inspect(&socket)["endpoint_id"], report["endpoint_id"]);
    let pid = rustix::process::Pid::from_raw(children.0[0].id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = children.0[0].wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(!socket.exists(), "the node removed its own socket");
}

#[test]
fn a_watch_with_a_key_the_nodes_refuse_reports_each_refusal_and_exits_with_code_8() {
    let dir = scratch().join("pool-refused");
    let (children, _events) = pool_of(&dir, 2);
    orchestrator_id(&dir.join("foreign.key"));
    let mut children = children;
    // Stop the pool's own watch: only the foreign one is looked at here.
    if let Some(mut watch) = children.0.pop() {
        let _ = watch.kill();
        let _ = watch.wait();
    }
    for json in [true, false] {
        let mut cmd = Command::new(exe());
        cmd.args(["pool", "watch", "--listen", "127.0.0.1:0"])
            .arg("--pool")
            .arg(dir.join("pool.toml"))
            .arg("--key")
            .arg(dir.join("foreign.key"));
        if json {
            cmd.arg("--json");
        }
        let out = cmd.stderr(Stdio::piped()).output().expect("watch");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(8), "{stdout}\n{stderr}");
        assert!(stderr.contains("every node refused"), "{stderr}");
        if json {
            let lines: Vec<serde_json::Value> =
                stdout.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
            let mut refused: Vec<u64> = lines
                .iter()
                .filter(|v| v["type"] == "node_refused")
                .map(|v| {
                    assert_eq!(v["reason"], "unauthorized_orchestrator");
                    v["node_id"].as_u64().expect("id")
                })
                .collect();
            refused.sort();
            assert_eq!(refused, [1, 2], "each refusal once: {lines:?}");
            let error = lines.last().expect("an error line");
            assert_eq!(
                (error["type"].as_str(), error["exit_code"].as_u64()),
                (Some("error"), Some(8))
            );
        } else {
            for node in [1, 2] {
                let sentence =
                    format!("node {node} refused the control session: unauthorized_orchestrator");
                assert!(stdout.contains(&sentence), "{stdout}");
            }
            assert!(!stdout.contains("NodeRefused") && !stdout.contains('{'), "{stdout}");
        }
    }
}

#[test]
fn a_watch_whose_reader_goes_away_ends_quietly_and_prints_sentences() {
    let dir = scratch().join("pool-reader-gone");
    let (children, _events) = pool_of(&dir, 1);
    let mut children = children;
    if let Some(mut watch) = children.0.pop() {
        let _ = watch.kill();
        let _ = watch.wait();
    }
    let mut watch = Command::new(exe())
        .args(["pool", "watch", "--listen", "127.0.0.1:0"])
        .arg("--pool")
        .arg(dir.join("pool.toml"))
        .arg("--key")
        .arg(dir.join("orch.key"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("watch");
    // `| head -1`: read one line, then close the pipe.
    let mut first = String::new();
    BufReader::new(watch.stdout.take().expect("stdout")).read_line(&mut first).expect("line");
    assert!(first.starts_with("node 1 is available: endpoint "), "{first}");
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = watch.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = watch.kill();
            let _ = watch.wait();
            panic!("the watch went on after its reader left");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut watch.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    assert!(status.success(), "{status:?}: {stderr}");
    assert!(stderr.is_empty(), "no error message: {stderr}");
}

#[test]
fn many_foreign_control_sessions_leave_the_refusal_list_bounded_and_a_silent_admin_client_blocks_nobody()
 {
    use swactor::net::endpoint::{CTL_ALPN, bind};
    use swactor::net::identity::NodeKey;
    let dir = scratch().join("admin-foreign");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = orchestrator_id(&dir.join("orch.key"));
    let key = dir.join("n1.key");
    let socket = dir.join("n1.sock");
    let (child, report) = boot_node(
        &[
            os("--node-id"),
            os("1"),
            os("--orchestrator"),
            os(&orch),
            os("--key"),
            key.as_os_str(),
            os("--admin"),
            socket.as_os_str(),
        ],
        &[],
    );
    let _children = Kill(vec![child]);
    let node_id: iroh::EndpointId =
        report["endpoint_id"].as_str().expect("id").parse().expect("endpoint id");
    let node_addr: std::net::SocketAddr =
        report["addrs"][0].as_str().expect("addr").parse().expect("addr");
    const ATTEMPTS: u64 = 40;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let foreign = bind(
            &NodeKey::from_bytes(&[0x5a; 32]),
            "127.0.0.1:0".parse().expect("addr"),
            &swactor::net::relay::Relays::none(),
        )
        .await
        .expect("bind");
        for _ in 0..ATTEMPTS {
            let addr = iroh::EndpointAddr::new(node_id).with_ip_addr(node_addr);
            // A foreign orchestrator opens its session as the real one does; it is refused
            // as soon as its `Hello` is read (a silent one only after the hello timeout).
            if let Ok(conn) = foreign.connect(addr, CTL_ALPN).await {
                if let Ok((mut send, _recv)) = conn.open_bi().await {
                    let hello = swactor::control::ControlMessage::Hello {
                        orchestrator: swactor::wire::NodeId(100),
                        members: vec![],
                    };
                    let _ = swactor::control::write_message(&mut send, &hello).await;
                }
                let _ = conn.closed().await;
            }
        }
        foreign.close().await;
    });
    // A local client that connects to the admin socket and never reads.
    let _silent = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    let deadline = Instant::now() + Duration::from_secs(20);
    let state = loop {
        let state = inspect(&socket);
        if state["refused"]["unauthorized_orchestrator"] == ATTEMPTS {
            break state;
        }
        assert!(Instant::now() < deadline, "the count stopped short: {state}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let kept = state["refusals"].as_array().expect("refusals").len();
    assert_eq!(kept, swactor::node::inspect::REFUSALS_KEPT, "{state}");
}

#[test]
fn pool_init_writes_a_pool_file_from_what_the_nodes_printed_and_the_pool_is_ready_with_it() {
    let dir = scratch().join("pool-init");
    let (children, events, nodes) = pool_with_nodes(&dir, 2);
    wait_for(&events, "pool_ready", Duration::from_secs(30), |v| v["type"] == "pool_ready");
    // What `node boot --json` printed, as an operator would have saved it.
    let lines: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
    let printed = dir.join("nodes.jsonl");
    std::fs::write(&printed, lines.join("\n")).expect("write");
    let out = Command::new(exe()).args(["pool", "init"]).arg(&printed).output().expect("init");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf8");
    let pool = swactor::planner::Pool::from_toml(&text).expect("a valid pool file");
    assert_eq!(pool.nodes.len(), 2);
    for (node, printed) in pool.nodes.iter().zip(&nodes) {
        assert_eq!(node.endpoint_id, printed["endpoint_id"].as_str().expect("id"));
        assert!(node.memory_bytes > 0, "the node's reported memory: {text}");
    }
    // A watch over the written file reaches readiness (the first watch gone: two watches
    // with one orchestrator key would be two SWIM members claiming one identity).
    let mut children = children;
    if let Some(mut watch) = children.0.pop() {
        let _ = watch.kill();
        let _ = watch.wait();
    }
    let written = dir.join("pool-init.toml");
    std::fs::write(&written, &text).expect("write");
    let status = Command::new(exe())
        .args(["pool", "watch", "--until-ready", "--pool-timeout", "30", "--window-ms", "300"])
        .args(["--listen", "127.0.0.1:0", "--pool"])
        .arg(&written)
        .arg("--key")
        .arg(dir.join("orch.key"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("watch");
    assert!(status.success());
    drop(children);
}

#[test]
fn the_authorized_orchestrator_holds_at_most_eight_control_sessions_and_the_node_serves_on() {
    use swactor::control::{ControlMessage, FrameDecoder, read_message, write_message};
    use swactor::net::endpoint::{CTL_ALPN, bind};
    use swactor::net::identity::NodeKey;
    let dir = scratch().join("session-cap");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch_key = dir.join("orch.key");
    let orch = orchestrator_id(&orch_key);
    let key = dir.join("n1.key");
    let (child, report) = boot_node(
        &[os("--node-id"), os("1"), os("--orchestrator"), os(&orch), os("--key"), key.as_os_str()],
        &[],
    );
    let _children = Kill(vec![child]);
    let node_id: iroh::EndpointId =
        report["endpoint_id"].as_str().expect("id").parse().expect("endpoint id");
    let node_addr: std::net::SocketAddr =
        report["addrs"][0].as_str().expect("addr").parse().expect("addr");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let me = NodeKey::load_or_create(&orch_key).expect("orchestrator key");
        let endpoint =
            bind(&me, "127.0.0.1:0".parse().expect("addr"), &swactor::net::relay::Relays::none())
                .await
                .expect("bind");
        // Opens a session and says hello; `Some` with the connection when the node answers
        // with its `node_available`, `None` with the close reason otherwise.
        let open = |endpoint: iroh::Endpoint| async move {
            let addr = iroh::EndpointAddr::new(node_id).with_ip_addr(node_addr);
            let conn = endpoint.connect(addr, CTL_ALPN).await.map_err(|e| e.to_string())?;
            let (mut send, mut recv) = match conn.open_bi().await {
                Ok(s) => s,
                Err(e) => return Err(format!("{e:?}")),
            };
            let hello =
                ControlMessage::Hello { orchestrator: swactor::wire::NodeId(100), members: vec![] };
            let _ = write_message(&mut send, &hello).await;
            let mut decoder = FrameDecoder::new();
            match read_message(&mut recv, &mut decoder).await {
                Some(Ok(ControlMessage::NodeAvailable { .. })) => Ok((conn, send, recv)),
                _ => Err(format!("{:?}", conn.closed().await)),
            }
        };
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(open(endpoint.clone()).await.expect("one of the first eight sessions"));
        }
        for _ in 0..4 {
            let Err(refused) = open(endpoint.clone()).await else {
                panic!("a ninth session is refused");
            };
            assert!(refused.contains("too_many_sessions"), "{refused}");
        }
        // The sessions end; the node serves the orchestrator again.
        for (conn, _, _) in held.drain(..) {
            conn.close(0u32.into(), b"done");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match open(endpoint.clone()).await {
                Ok(_) => break,
                Err(e) => assert!(Instant::now() < deadline, "the node never served again: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        endpoint.close().await;
    });
}

#[test]
fn a_node_booted_without_threads_computes_on_every_cpu_it_may_use_and_says_so() {
    let dir = scratch().join("node-threads");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = orchestrator_id(&dir.join("orch.key"));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (key1, key2) = (dir.join("n1.key"), dir.join("n2.key"));
    let (sock1, sock2) = (dir.join("n1.sock"), dir.join("n2.sock"));
    let args = [os("--node-id"), os("1"), os("--orchestrator"), os(&orch)];
    let mut first = args.to_vec();
    first.extend([os("--key"), key1.as_os_str(), os("--admin"), sock1.as_os_str()]);
    let (child, report) = boot_node(&first, &[]);
    let _children = Kill(vec![child]);
    assert_eq!(report["threads"], cpus, "one worker per node, on the node's cores: {report}");
    let mut second = vec![os("--node-id"), os("2"), os("--orchestrator"), os(&orch)];
    second.extend([os("--key"), key2.as_os_str(), os("--admin"), sock2.as_os_str()]);
    second.extend([os("--threads"), os("1")]);
    let (child, report) = boot_node(&second, &[]);
    let _more = Kill(vec![child]);
    assert_eq!(report["threads"], 1, "--threads still chooses: {report}");
}

/// Opens `count` control sessions to the node at `report` (its `node_available`) from an
/// endpoint of key `key_byte` (not the orchestrator's), each refused; returns once each
/// ended.
fn foreign_sessions(report: &serde_json::Value, key_byte: u8, count: usize) {
    use swactor::net::endpoint::{CTL_ALPN, bind};
    use swactor::net::identity::NodeKey;
    let node_id: iroh::EndpointId =
        report["endpoint_id"].as_str().expect("id").parse().expect("endpoint id");
    let node_addr: std::net::SocketAddr =
        report["addrs"][0].as_str().expect("addr").parse().expect("addr");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    rt.block_on(async {
        let me = NodeKey::from_bytes(&[key_byte; 32]);
        let foreign =
            bind(&me, "127.0.0.1:0".parse().expect("addr"), &swactor::net::relay::Relays::none())
                .await
                .expect("bind");
        for _ in 0..count {
            let addr = iroh::EndpointAddr::new(node_id).with_ip_addr(node_addr);
            if let Ok(conn) = foreign.connect(addr, CTL_ALPN).await {
                if let Ok((mut send, _recv)) = conn.open_bi().await {
                    let hello = swactor::control::ControlMessage::Hello {
                        orchestrator: swactor::wire::NodeId(100),
                        members: vec![],
                    };
                    let _ = swactor::control::write_message(&mut send, &hello).await;
                }
                let _ = conn.closed().await;
            }
        }
        foreign.close().await;
    });
}

#[test]
fn orchestrate_pool_with_a_key_every_node_refuses_exits_8_at_once_and_the_nodes_log_refusals_rate_limited()
 {
    let dir = scratch().join("orchestrate-refused");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = orchestrator_id(&dir.join("orch.key"));
    let mut children = Kill(Vec::new());
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    let mut reports = Vec::new();
    for i in 1..=2u64 {
        let log = std::fs::File::create(dir.join(format!("n{i}.err"))).expect("log");
        let mut cmd = Command::new(exe());
        cmd.args(["node", "boot", "--json", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
            .args(["--node-id", &i.to_string(), "--orchestrator", &orch, "--key"])
            .arg(dir.join(format!("n{i}.key")))
            .arg("--admin")
            .arg(dir.join(format!("n{i}.sock")));
        let mut child = cmd.stdout(Stdio::piped()).stderr(log).spawn().expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        children.0.push(child);
        let mut lines = BufReader::new(stdout).lines();
        let report: serde_json::Value = lines
            .by_ref()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .find(|v: &serde_json::Value| v["type"] == "node_available")
            .expect("node_available");
        std::thread::spawn(move || for _ in lines {});
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {i}\nendpoint_id = \"{}\"\naddrs = {}\n\n",
            report["endpoint_id"].as_str().expect("id"),
            report["addrs"]
        ));
        reports.push(report);
    }
    std::fs::write(dir.join("pool.toml"), pool).expect("pool");
    let started = Instant::now();
    let out = Command::new(exe())
        .args(["orchestrate", "pool", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--pool-timeout", "60", "--max-tokens", "2", "--pool"])
        .arg(dir.join("pool.toml"))
        .arg("--key")
        .arg(dir.join("foreign.key"))
        .arg("--model")
        .arg(crate::support::synth_model(2))
        .output()
        .expect("orchestrate");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(
        stderr.contains("every node refused") && stderr.contains("unauthorized_orchestrator"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(30), "exit 8 as soon as every node refused: {took:?}");

    // A peer refused over and over: its first refusal is logged, then a count at most every
    // few seconds; `edge inspect` counts every one.
    const MORE: u64 = 30;
    foreign_sessions(&reports[0], 0x77, MORE as usize);
    let socket = dir.join("n1.sock");
    let deadline = Instant::now() + Duration::from_secs(30);
    while inspect(&socket)["refused"]["unauthorized_orchestrator"].as_u64().unwrap_or(0) < MORE {
        assert!(Instant::now() < deadline, "the node did not count the refusals");
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed();
    let log = std::fs::read_to_string(dir.join("n1.err")).expect("log");
    let lines = log.lines().filter(|l| l.contains("control session from")).count();
    let most = 2 + 2 * (elapsed.as_secs() / 5) as usize;
    assert!(lines >= 2, "the first refusal of each peer is logged: {log}");
    assert!(lines <= most, "{lines} lines in {elapsed:?} (at most {most}):\n{log}");
}

#[test]
fn orchestrate_pool_gives_up_on_a_pool_that_never_answers_after_its_pool_timeout_not_later() {
    let dir = scratch().join("orchestrate-timeout");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    // A node nobody runs, at an address where nothing listens.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    let addr = silent.local_addr().expect("addr");
    drop(silent);
    let pool = format!(
        "[orchestrator]\nnode_id = 100\n\n[[nodes]]\nnode_id = 1\nendpoint_id = \"{}\"\n\
         addrs = [\"{addr}\"]\n",
        orchestrator_id(&dir.join("n1.key"))
    );
    std::fs::write(dir.join("pool.toml"), pool).expect("pool");
    let model = crate::support::synth_model(2);
    let started = Instant::now();
    let out = Command::new(exe())
        .args(["orchestrate", "pool", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--pool-timeout", "2", "--max-tokens", "2", "--pool"])
        .arg(dir.join("pool.toml"))
        .arg("--key")
        .arg(dir.join("orch.key"))
        .arg("--model")
        .arg(&model)
        .output()
        .expect("orchestrate");
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("within 2s") && stderr.contains("node 1 did not answer"), "{stderr}");
    assert!(took >= Duration::from_secs(2), "it waited its timeout: {took:?}");
    assert!(took < Duration::from_millis(4500), "--pool-timeout 2 takes 2 s: {took:?}");
}

#[test]
fn a_node_stopped_by_sigterm_ends_its_json_stream_with_node_stopped() {
    let dir = scratch().join("node-stopped");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let orch = orchestrator_id(&dir.join("orch.key"));
    let key = dir.join("n1.key");
    let socket = dir.join("n1.sock");
    let mut cmd = Command::new(exe());
    cmd.args(["node", "boot", "--json", "--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
        .args(["--node-id", "1", "--orchestrator", &orch, "--key"])
        .arg(&key)
        .arg("--admin")
        .arg(&socket);
    let (child, rx) = spawn_lines(&mut cmd);
    let mut children = Kill(vec![child]);
    wait_for(&rx, "node_available", Duration::from_secs(30), |v| v["type"] == "node_available");
    let pid = rustix::process::Pid::from_raw(children.0[0].id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("signal");
    let status = children.0[0].wait().expect("wait");
    assert!(status.success(), "a clean stop: {status:?}");
    let rest: Vec<serde_json::Value> = rx.iter().collect();
    let last = rest.last().expect("a last line");
    assert_eq!(last["type"], "node_stopped", "{rest:?}");
    assert_eq!(last["node_id"], 1);
}
