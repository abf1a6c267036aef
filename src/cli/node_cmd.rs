//! `swactor node boot` and `swactor edge inspect`.

use color_eyre::eyre::eyre;

use super::args::{EdgeInspectArgs, NodeBootArgs, PoolWatchArgs};
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
use crate::node::driver::{AdminPath, EdgeInspect, NodeConfig, NodeReport, run_node};
use crate::wire::NodeId;

/// The directory of default admin sockets: the runtime directory, else the temporary one.
fn default_admin_dir() -> std::path::PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn default_cache() -> std::path::PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("swactor")
        .join("weights")
}

/// `swactor node boot`.
pub fn boot(args: &NodeBootArgs, out: &mut Output) -> Result<(), CliError> {
    let config = NodeConfig {
        node_id: NodeId(args.node_id),
        key: args.key.clone(),
        listen: args.listen,
        swim: args.swim,
        join: args.join.clone(),
        orchestrator: args.orchestrator.to_ascii_lowercase(),
        arena_bytes: args.arena_bytes,
        worker_threads: args.worker_threads,
        device: args.device,
        admin: match &args.admin {
            Some(path) => AdminPath::Explicit(path.clone()),
            None => AdminPath::InDir(default_admin_dir()),
        },
        exe: std::env::current_exe()?,
        boot_timeout: std::time::Duration::from_millis(args.boot_timeout_ms),
        max_worker_restarts: args.max_worker_restarts,
        cache: args.cache.clone().unwrap_or_else(default_cache),
        fault_skip_sequence: fault_skip_sequence(),
        advertise: args.advertise,
        memory_bytes: args.memory_bytes,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let json = args.output.json;
    let mut printed = Ok(());
    let result = runtime.block_on(run_node(
        config,
        |report| {
            let r = match report {
                // Boot events are data of `--json` only: the text form says what it has to
                // say with the identity, or with the error on stderr.
                NodeReport::Event(line) if json => out.line(line.to_json()),
                NodeReport::Event(_) => Ok(()),
                NodeReport::Available(report) if json => out.json("node_available", report),
                NodeReport::Available(report) => out.line(format!(
                    "node {} available: endpoint {} at {}, swim {}, computing on {}, admin {}",
                    report.node_id,
                    report.endpoint_id,
                    report.addrs.join(", "),
                    report.swim_addr,
                    report.device,
                    report.admin
                )),
            }
            .and_then(|()| out.flush());
            if printed.is_ok() {
                printed = r;
            }
        },
        stop_signal_or_eof(args.stop_on_stdin_eof),
    ));
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    printed?;
    result.map_err(|e| {
        let device = e.reason == crate::wire::reason::BootFault::DeviceUnavailable;
        let err = CliError::new(ExitCode::BootFailed, e.reason.as_str(), eyre!(e));
        if device {
            err.with_suggestion(
                "is this a build with `--features cuda`, and does `nvidia-smi` list the device?",
            )
        } else {
            err
        }
    })
}

/// `swactor edge inspect`.
#[allow(clippy::disallowed_methods)] // the command owns its deadline
pub fn inspect(args: &EdgeInspectArgs, out: &mut Output) -> Result<(), CliError> {
    use std::io::Read;
    let socket = args.node.display();
    let mut stream = std::os::unix::net::UnixStream::connect(&args.node).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "io",
            eyre!(e).wrap_err(format!("cannot reach the node's admin socket {socket}")),
        )
        .with_suggestion("is `swactor node boot` running with this --admin path?")
    })?;
    // One deadline for the whole answer, however it trickles in.
    let timeout = std::time::Duration::from_millis(args.timeout_ms.max(1));
    let deadline = std::time::Instant::now() + timeout;
    let mut body = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let timed_out = || {
            CliError::new(
                ExitCode::Input,
                "admin_timeout",
                eyre!("the node's admin socket {socket} did not answer within {timeout:?}"),
            )
            .with_suggestion(
                "is the node stopped (SIGSTOP) or overloaded? try a longer --timeout-ms",
            )
        };
        if left.is_zero() {
            return Err(timed_out());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(timed_out());
            }
            Err(e) => {
                return Err(CliError::new(
                    ExitCode::Input,
                    "io",
                    eyre!(e).wrap_err(format!("cannot read the node's admin socket {socket}")),
                ));
            }
        }
    }
    let mut state: EdgeInspect = serde_json::from_slice(body.trim_ascii()).map_err(|e| {
        CliError::new(
            ExitCode::Input,
            "admin_answer_invalid",
            eyre!(e).wrap_err(format!("{socket} did not answer as a swactor node does")),
        )
    })?;
    if let Some(edge) = args.edge {
        state.edges.retain(|e| e["edge_id"].as_u64() == Some(edge));
    }
    if args.output.json {
        out.json("edge_inspect", &state)?;
        return Ok(());
    }
    let members: Vec<String> = state.members.iter().map(ToString::to_string).collect();
    let members = if members.is_empty() { "none".to_string() } else { members.join(", ") };
    out.line(format!(
        "node {} ({}): {} arena leases, {} installed rings, {} device objects, members up: \
         {members}",
        state.node_id,
        state.endpoint_id,
        state.arena_leases,
        state.installed_rings,
        state.device_objects
    ))?;
    if let Some(stage) = &state.stage {
        let done = if stage["stopped"].as_bool() == Some(true) { ", torn down" } else { "" };
        out.line(format!(
            "stage {} of run {}: layers {}{done}",
            stage["stage_index"],
            stage["run_id"],
            text_of(&stage["layers"])
        ))?;
    }
    if state.edges.is_empty() {
        out.line("no edges (no run is provisioned on this node)")?;
    } else {
        let mut rows = vec![
            [
                "edge",
                "run",
                "direction",
                "peer",
                "state",
                "ring",
                "objects",
                "bytes",
                "stalls",
                "last fault",
            ]
            .map(String::from)
            .to_vec(),
        ];
        rows.extend(state.edges.iter().map(|e| {
            let peer = format!("node {}", e["peer"]);
            let direction = text_of(&e["direction"]);
            ["edge_id", "run_id"]
                .iter()
                .map(|k| text_of(&e[*k]))
                .chain([direction, peer, text_of(&e["state"]), text_of(&e["ring_id"])])
                .chain(["objects", "bytes", "stalls", "last_fault"].iter().map(|k| text_of(&e[*k])))
                .collect()
        }));
        for line in table(&rows) {
            out.line(line)?;
        }
    }
    if !state.refused.is_empty() {
        let counts: Vec<String> = state.refused.iter().map(|(r, n)| format!("{n} {r}")).collect();
        out.line(format!("refused since boot: {}; latest:", counts.join(", ")))?;
        for line in &state.refusals {
            out.line(format!("  {line}"))?;
        }
    }
    Ok(())
}

/// A JSON value as a person reads it: strings without quotes, nothing as `-`.
fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// SIGINT / SIGTERM, or the end of standard input when `eof` (the supervisor is gone).
async fn stop_signal_or_eof(eof: bool) {
    if !eof {
        return stop_signal().await;
    }
    let stdin_closed = async {
        use tokio::io::AsyncReadExt;
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    tokio::select! {
        _ = stop_signal() => {}
        _ = stdin_closed => {}
    }
}

async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        _ => std::future::pending::<()>().await,
    }
}

/// `swactor pool watch`.
pub fn watch(args: &PoolWatchArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::orchestrator::watch::{WatchConfig, WatchError, watch as run_watch};
    use std::ops::ControlFlow;
    let pool = super::plan_cmd::read_pool(&args.pool)?;
    let config = WatchConfig {
        pool,
        key: args.key.clone(),
        listen: args.listen,
        window: std::time::Duration::from_millis(args.window_ms),
        pool_timeout: args.pool_timeout.map(std::time::Duration::from_secs),
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let json = args.output.json;
    let mut write_err = None;
    let result = runtime.block_on(async {
        let stop = async {
            tokio::select! {
                _ = stop_signal() => {}
                _ = stdout_closed() => {}
            }
        };
        run_watch(
            config,
            args.until_ready,
            |ev| {
                let r = if json {
                    serde_json::to_string(ev)
                        .map_err(std::io::Error::other)
                        .and_then(|line| out.line(line))
                } else {
                    out.line(ev.to_string())
                }
                .and_then(|()| out.flush());
                match r {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        write_err.get_or_insert(e);
                        ControlFlow::Break(())
                    }
                }
            },
            stop,
        )
        .await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    if let Some(e) = write_err {
        return Err(e.into());
    }
    result.map_err(|e| match e {
        WatchError::EmptyPool => CliError::new(ExitCode::Input, "empty_pool", eyre!(e))
            .with_suggestion("list the pool's nodes under [[nodes]] in the pool file"),
        WatchError::Setup(_) => CliError::new(ExitCode::Input, "watch_failed", eyre!(e)),
        WatchError::Refused(_) => CliError::new(ExitCode::PoolNotReady, "pool_refused", eyre!(e))
            .with_suggestion(
                "were the nodes started with this key's endpoint id as --orchestrator?",
            ),
        WatchError::NotReady(..) => {
            CliError::new(ExitCode::PoolNotReady, "timeout.pool_readiness", eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
    })
}

/// Resolves once standard output is gone: its reader closed a pipe or a socket (for
/// example `swactor pool watch | head -1`), so nobody reads what the command would print.
/// Never resolves for a file or a terminal that stays open.
async fn stdout_closed() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let watcher = std::thread::Builder::new().name("stdout-watch".into()).spawn(move || {
        use rustix::event::{PollFd, PollFlags, poll};
        let stdout = std::io::stdout();
        loop {
            let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
            match poll(&mut fds, None) {
                Ok(_) if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) => {
                    let _ = tx.send(());
                    return;
                }
                Err(rustix::io::Errno::INTR) => {}
                // An invalid descriptor, or nothing this can watch.
                Ok(_) | Err(_) => return,
            }
        }
    });
    if watcher.is_err() || rx.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Test-only fault injection, read here at the edge and passed in as configuration: a node
/// started with `SWACTOR_FAULT_SKIP_SEQUENCE=N` labels the output of sequence `N` as
/// `N + 1` (a skipped sequence downstream).
fn fault_skip_sequence() -> Option<crate::wire::Sequence> {
    std::env::var("SWACTOR_FAULT_SKIP_SEQUENCE").ok()?.parse().ok().map(crate::wire::Sequence)
}

/// `swactor pool init`: a pool file from `node_available` lines.
pub fn pool_init(args: &super::args::PoolInitArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::planner::pool::{OrchestratorEntry, PoolNode};
    let mut text = String::new();
    if args.files.is_empty() {
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
    }
    for f in &args.files {
        text.push_str(&std::fs::read_to_string(f).map_err(|e| {
            CliError::new(
                ExitCode::Input,
                "io",
                eyre!(e).wrap_err(format!("cannot read {}", f.display())),
            )
        })?);
        text.push('\n');
    }
    let mut nodes: Vec<PoolNode> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v["type"] != "node_available" {
            continue;
        }
        let bad = |what: &str| {
            CliError::new(
                ExitCode::Input,
                "invalid_node_available",
                eyre!("a node_available line without {what}: {line}"),
            )
        };
        let node_id = NodeId(v["node_id"].as_u64().ok_or_else(|| bad("node_id"))?);
        let endpoint_id = crate::planner::pool::parse_endpoint_id(
            v["endpoint_id"].as_str().ok_or_else(|| bad("endpoint_id"))?,
        )
        .map_err(|e| bad(&e))?;
        let addrs = v["addrs"]
            .as_array()
            .ok_or_else(|| bad("addrs"))?
            .iter()
            .filter_map(|a| a.as_str()?.parse().ok())
            .collect();
        // The latest line of a node wins (a node restarted with the same id).
        nodes.retain(|n| n.node_id != node_id);
        nodes.push(PoolNode {
            node_id,
            endpoint_id,
            addrs,
            memory_bytes: v["memory_bytes"].as_u64().unwrap_or(0),
            arena_bytes: None,
            device: v["device"].as_str().map(str::to_string),
        });
    }
    if nodes.is_empty() {
        return Err(CliError::new(
            ExitCode::Input,
            "empty_pool",
            eyre!("no node_available line found"),
        )
        .with_suggestion("give it the output of `swactor node boot --json` of every node"));
    }
    nodes.sort_by_key(|n| n.node_id);
    let pool = crate::planner::Pool {
        orchestrator: OrchestratorEntry {
            node_id: NodeId(args.orchestrator_node_id),
            endpoint_id: None,
            addrs: vec![],
        },
        nodes,
        placement: None,
    };
    crate::planner::check_pool(&pool)
        .map_err(|e| CliError::new(ExitCode::Input, e.reason.as_str(), eyre!(e.message)))?;
    out.line(pool.to_toml().trim_end())?;
    Ok(())
}
