//! A pool of `swactor node boot` child processes on loopback, for `run local`: fresh keys,
//! admin sockets and a weights cache in one private temporary directory, a pool file
//! written from what the nodes report, and a teardown that leaves no process, socket or
//! file behind. Each child stops when its standard input closes, so even a killed
//! supervisor takes its nodes with it.

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

/// A running local pool.
#[derive(Debug)]
pub struct LocalPool {
    dir: PathBuf,
    children: Vec<Child>,
    /// The pool file's content (also written as `pool.toml` in the pool's directory).
    pub pool: Pool,
    /// The orchestrator's key file (the nodes accept only it).
    pub orchestrator_key: PathBuf,
}

#[derive(Deserialize)]
struct Report {
    endpoint_id: String,
    addrs: Vec<String>,
    swim_addr: String,
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
    pub async fn start(config: &LocalPoolConfig) -> Result<LocalPool, String> {
        let nanos = std::time::SystemTime::UNIX_EPOCH.elapsed().map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("swactor-local-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut pool = LocalPool {
            dir: dir.clone(),
            children: Vec::new(),
            pool: Pool {
                orchestrator: OrchestratorEntry {
                    node_id: LOCAL_ORCHESTRATOR,
                    endpoint_id: None,
                    addrs: Vec::new(),
                },
                nodes: Vec::new(),
                placement: None,
            },
            orchestrator_key: dir.join("orchestrator.key"),
        };
        match pool.boot(config).await {
            Ok(()) => Ok(pool),
            Err(e) => {
                pool.stop().await;
                Err(e)
            }
        }
    }

    async fn boot(&mut self, config: &LocalPoolConfig) -> Result<(), String> {
        let key = NodeKey::load_or_create(&self.orchestrator_key).map_err(|e| e.to_string())?;
        let orchestrator = key.endpoint_id_hex();
        let memory = memory_bytes() / u64::from(config.nodes.max(1));
        let mut seed: Option<String> = None;
        for k in 1..=config.nodes {
            let mut cmd = Command::new(&config.exe);
            cmd.args(["node", "boot", "--json", "--stop-on-stdin-eof"])
                .args(["--node-id", &k.to_string()])
                .arg("--key")
                .arg(self.dir.join(format!("node-{k}.key")))
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
            let Some(stdout) = stdout else { return Err(format!("node {k}: no stdout")) };
            let mut lines = BufReader::new(stdout).lines();
            let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
                .await
                .map_err(|_| format!("node {k} did not boot within 30 s"))?
                .map_err(|e| format!("node {k}: {e}"))?
                .ok_or_else(|| format!("node {k} exited during boot (run with --node-logs)"))?;
            let report: Report =
                serde_json::from_str(&line).map_err(|e| format!("node {k} said `{line}`: {e}"))?;
            // Keep draining the node's stdout so it never blocks on a full pipe.
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
            seed.get_or_insert(report.swim_addr.clone());
            self.pool.nodes.push(PoolNode {
                node_id: NodeId(u64::from(k)),
                endpoint_id: report.endpoint_id,
                addrs: report.addrs.iter().filter_map(|a| a.parse().ok()).collect(),
                memory_bytes: memory,
                device: Some("cpu".into()),
            });
        }
        let toml = toml::to_string(&self.pool).map_err(|e| e.to_string())?;
        std::fs::write(self.dir.join("pool.toml"), toml).map_err(|e| e.to_string())?;
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
