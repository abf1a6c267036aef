//! A pool of `swactor node boot` child processes on loopback, for `run local`: fresh keys,
//! admin sockets and a weights cache in one private temporary directory, a pool file
//! written from what the nodes report, and a teardown that leaves no process, socket or
//! file behind. Each child stops when its standard input closes, so even a killed
//! supervisor takes its nodes with it. The orchestrator's key lives only in memory, and
//! each node's key file is deleted as soon as the node has loaded it. The directory of a
//! supervisor that was killed is removed by the next local pool.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::net::identity::NodeKey;
use crate::planner::pool::{OrchestratorEntry, Pool, PoolNode};
use crate::wire::NodeId;

/// The orchestrator's node id in a local pool.
pub const LOCAL_ORCHESTRATOR: NodeId = NodeId(100);

/// Settings of a local pool.
#[derive(Debug, Clone)]
pub struct LocalPoolConfig {
    /// The `swactor` executable.
    pub exe: PathBuf,
    /// Number of nodes.
    pub nodes: u32,
    /// Compute threads per worker.
    pub worker_threads: u32,
    /// Arena bytes per node.
    pub arena_bytes: u64,
    /// Pass the nodes' logs through to this process's stderr.
    pub node_logs: bool,
}

/// The start of a local pool's directory name in the temporary directory; the owner's
/// process id and a nonce follow: `swactor-local-<pid>-<nanos>`.
pub const DIR_PREFIX: &str = "swactor-local-";

/// A running local pool.
#[derive(Debug)]
pub struct LocalPool {
    dir: PathBuf,
    children: Vec<Child>,
    /// The pool, in memory only (nothing of it is written: a killed supervisor leaves no
    /// pool file behind).
    pub pool: Pool,
    /// The orchestrator's key (the nodes accept only it), held only in memory.
    pub orchestrator_key: NodeKey,
}

/// Why a local pool could not start.
#[derive(Debug, thiserror::Error)]
#[error("{detail}")]
pub struct LocalPoolError {
    /// The boot fault a node reported (`arena_create_failed`, ...), if one did.
    pub reason: Option<String>,
    /// What happened.
    pub detail: String,
}

impl From<String> for LocalPoolError {
    fn from(detail: String) -> Self {
        LocalPoolError { reason: None, detail }
    }
}

#[derive(Deserialize)]
struct Report {
    endpoint_id: String,
    addrs: Vec<String>,
    swim_addr: String,
}

/// What a booting node prints: its boot events, then its availability, or the error it
/// failed with.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum FirstLine {
    NodeStarted {},
    NodeFaulted {},
    NodeAvailable(Report),
    Error { reason: String, message: String },
}

/// The owner's process id in a directory name made by [`LocalPool::start`].
fn owner_pid(name: &str) -> Option<i32> {
    let (pid, nonce) = name.strip_prefix(DIR_PREFIX)?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(nonce) {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

/// Whether process `pid` exists (a process of another user counts as alive).
fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else { return false };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

/// Removes the directories that local pools of a killed supervisor left in `tmp`: only
/// directories named as [`LocalPool::start`] names them, owned by this user, whose owner
/// process is gone. Returns the removed paths.
pub fn remove_stale_dirs(tmp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tmp) else { return Vec::new() };
    let me = rustix::process::geteuid().as_raw();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(owner_pid) else { continue };
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if ours && !alive(pid) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

fn memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|k| k.parse::<u64>().ok()))
        })
        .map_or(8 << 30, |kib| kib * 1024)
}

impl LocalPool {
    /// Starts the nodes one after the other (the first is every other's SWIM seed) and
    /// returns once each has reported itself available.
    /// First removes the directories of killed supervisors ([`remove_stale_dirs`]).
    pub async fn start(config: &LocalPoolConfig) -> Result<LocalPool, LocalPoolError> {
        let tmp = std::env::temp_dir();
        for stale in remove_stale_dirs(&tmp) {
            eprintln!(
                "swactor: removed {}, left by a local pool whose process died",
                stale.display()
            );
        }
        #[allow(clippy::disallowed_methods)] // a unique name, not a measurement
        let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.subsec_nanos());
        let dir = tmp.join(format!("{DIR_PREFIX}{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let orchestrator_key = match NodeKey::generate() {
            Ok(key) => key,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("cannot make the orchestrator's key: {e}").into());
            }
        };
        let mut pool = LocalPool {
            dir: dir.clone(),
            children: Vec::new(),
            pool: Pool {
                orchestrator: OrchestratorEntry {
                    node_id: LOCAL_ORCHESTRATOR,
                    endpoint_id: None,
                    addrs: Vec::new(),
                    relay: None,
                },
                nodes: Vec::new(),
                placement: None,
            },
            orchestrator_key,
        };
        match pool.boot(config).await {
            Ok(()) => Ok(pool),
            Err(e) => {
                pool.stop().await;
                Err(e)
            }
        }
    }

    async fn boot(&mut self, config: &LocalPoolConfig) -> Result<(), LocalPoolError> {
        let orchestrator = self.orchestrator_key.endpoint_id_hex();
        let memory = memory_bytes() / u64::from(config.nodes.max(1));
        let mut seed: Option<String> = None;
        for k in 1..=config.nodes {
            let key = self.dir.join(format!("node-{k}.key"));
            let mut cmd = Command::new(&config.exe);
            // Its nodes share this host and are balanced by memory: nothing to measure.
            cmd.args(["node", "boot", "--json", "--stop-on-stdin-eof", "--no-calibrate"])
                .args(["--node-id", &k.to_string()])
                .arg("--key")
                .arg(&key)
                .args(["--listen", "127.0.0.1:0", "--swim", "127.0.0.1:0"])
                .args(["--orchestrator", &orchestrator])
                .arg("--admin")
                .arg(self.admin(k))
                .arg("--cache")
                .arg(self.dir.join("cache"))
                .args(["--worker-threads", &config.worker_threads.to_string()])
                .args(["--arena-bytes", &config.arena_bytes.to_string()]);
            if let Some(seed) = &seed {
                cmd.args(["--join", seed]);
            }
            // Their own process group: a terminal's Ctrl-C reaches only the orchestrator,
            // which stops the run and tears the stages down before the nodes stop.
            cmd.process_group(0)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(if config.node_logs { Stdio::inherit() } else { Stdio::null() })
                .kill_on_drop(true);
            let mut child = cmd.spawn().map_err(|e| format!("cannot start node {k}: {e}"))?;
            let stdout = child.stdout.take();
            self.children.push(child);
            let Some(stdout) = stdout else { return Err(format!("node {k}: no stdout").into()) };
            let mut lines = BufReader::new(stdout).lines();
            let booted = tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    let line = lines
                        .next_line()
                        .await
                        .map_err(|e| LocalPoolError::from(format!("node {k}: {e}")))?
                        .ok_or_else(|| {
                            format!("node {k} exited during boot (run with --node-logs)")
                        })?;
                    match serde_json::from_str::<FirstLine>(&line) {
                        // Its boot events; a fault is followed by the error line.
                        Ok(FirstLine::NodeStarted {} | FirstLine::NodeFaulted {}) => {}
                        Ok(FirstLine::NodeAvailable(report)) => return Ok(report),
                        Ok(FirstLine::Error { reason, message }) => {
                            return Err(LocalPoolError {
                                detail: format!("node {k}: {message}"),
                                reason: Some(reason),
                            });
                        }
                        Err(e) => return Err(format!("node {k} said `{line}`: {e}").into()),
                    }
                }
            })
            .await;
            // The node has loaded its key (or failed): the file is not needed any more.
            let _ = std::fs::remove_file(&key);
            let report = booted.map_err(|_| format!("node {k} did not boot within 30 s"))??;
            // Keep draining the node's stdout so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            seed.get_or_insert(report.swim_addr.clone());
            self.pool.nodes.push(PoolNode {
                node_id: NodeId(u64::from(k)),
                endpoint_id: report.endpoint_id,
                addrs: report.addrs.iter().filter_map(|a| a.parse().ok()).collect(),
                relay: None,
                memory_bytes: memory,
                device: Some("cpu".into()),
                prompt_cache_bytes: None,
                arena_bytes: None,
                speed: None,
                rtt_us: None,
                links: Vec::new(),
            });
        }
        Ok(())
    }

    /// The admin socket of node `k`.
    pub fn admin(&self, k: u32) -> PathBuf {
        self.dir.join(format!("node-{k}.sock"))
    }

    /// The process id of node `k` (1-based), while it runs.
    pub fn pid(&self, k: u32) -> Option<u32> {
        self.children.get((k as usize).checked_sub(1)?)?.id()
    }

    /// The pool's private directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops every node (closing its stdin, then killing it after 5 s) and removes the
    /// directory.
    pub async fn stop(&mut self) {
        for child in &mut self.children {
            drop(child.stdin.take());
        }
        for child in &mut self.children {
            if tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_err() {
                let _ = child.kill().await;
            }
        }
        self.children.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for LocalPool {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
