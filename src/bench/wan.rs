//! `bench wan` and the WAN suite's runs: a pipeline of real node processes, each host in its
//! own network namespace behind a wide-area link of a given round trip and loss
//! ([`crate::wan::netns`], `swactor util wan-link`), or relay-only through a `relay serve`
//! (which may be restarted in the middle of the run), with and without n-gram speculation:
//! the run's output, what each link carried, and its decode rate and time to first token
//! beside what its plan predicted (`specs/cost-model.md`).

use std::io::{BufRead, BufReader, Lines};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use serde::Serialize;
use serde_json::Value;

use super::{BenchError, err};
use crate::wan::netns::{Exposure, QUIC_PORT, SWIM_PORT, WanNet};

/// How the hosts are reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Link {
    /// Through a link of this round trip in front of every host (0: no delay).
    Rtt {
        /// Milliseconds.
        ms: u64,
    },
    /// Relay-only hosts, every connection through a relay in the coordinator's namespace.
    Relay,
}

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Link::Rtt { ms: 0 } => write!(f, "direct"),
            Link::Rtt { ms } => write!(f, "{ms} ms"),
            Link::Relay => write!(f, "relay"),
        }
    }
}

/// One run over the namespaces.
#[derive(Debug, Clone)]
pub struct WanSetup {
    /// The swactor binary.
    pub exe: PathBuf,
    /// The model.
    pub model: PathBuf,
    /// Hosts (one stage each, one compute thread).
    pub stages: u8,
    /// Tokens to generate.
    pub tokens: u32,
    /// The prompt.
    pub prompt: String,
    /// The links.
    pub link: Link,
    /// Share of datagrams each link loses each way.
    pub loss: f64,
    /// Megabits per second each link carries each way (`None`: unlimited).
    pub rate_mbit: Option<f64>,
    /// n-gram speculation.
    pub speculate: bool,
    /// Kill the relay at the first token and start it again on the same address.
    pub restart_relay: bool,
    /// Hosts whose node computes with the scalar kernels (`SWACTOR_ENGINE_ISA=scalar`):
    /// slower nodes beside the others.
    pub scalar_hosts: Vec<u8>,
    /// `--balance memory` instead of the default balance by speed.
    pub balance_memory: bool,
}

/// What one run gave.
#[derive(Debug, Clone)]
pub struct WanRun {
    /// `orchestrate pool --json`'s lines.
    pub lines: Vec<Value>,
    /// Its exit code.
    pub code: Option<i32>,
    /// Datagrams each host's link delivered and dropped, both ways (empty for a relay).
    pub links: Vec<(u64, u64)>,
}

impl WanRun {
    /// The token ids of the run.
    pub fn token_ids(&self) -> Vec<u64> {
        let tokens = self.lines.iter().filter(|v| v["type"] == "token");
        tokens.filter_map(|v| v["id"].as_u64()).collect()
    }

    /// The bandwidth node `node` measured to node `to` before the plan (its
    /// `links_measured` event), bytes per second.
    pub fn link_rate(&self, node: u64, to: u64) -> Option<u64> {
        let event =
            self.lines.iter().find(|v| v["type"] == "links_measured" && v["node_id"] == node)?;
        let links = event["links"].as_array()?;
        links.iter().find(|l| l["to"] == to)?["bytes_per_s"].as_u64()
    }

    /// The mean of the bandwidths the `stages` nodes measured to each other, MB/s.
    pub fn node_link_mbs(&self, stages: u8) -> Option<f64> {
        let nodes = 1..=u64::from(stages);
        let rates: Vec<u64> = nodes
            .clone()
            .flat_map(|a| nodes.clone().filter(move |&b| b != a).map(move |b| (a, b)))
            .filter_map(|(a, b)| self.link_rate(a, b))
            .collect();
        (!rates.is_empty()).then(|| rates.iter().sum::<u64>() as f64 / rates.len() as f64 / 1e6)
    }

    /// The run's summary line.
    pub fn summary(&self) -> Option<&Value> {
        self.lines.iter().find(|v| v["type"] == "run")
    }
}

/// Children killed (and reaped) when dropped, whatever ends the run.
struct Reap(Vec<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `cmd` (stdout piped) and reads its lines until one of type `kind`; the child, that
/// line and the rest of its output.
fn start_until(
    mut cmd: Command,
    kind: &str,
) -> Result<(Child, Value, Lines<BufReader<ChildStdout>>), BenchError> {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(err)?;
    let stdout = child.stdout.take().ok_or_else(|| err("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let found = lines
        .by_ref()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|v| v["type"] == kind);
    match found {
        Some(v) => Ok((child, v, lines)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err(err(format!("no `{kind}` line")))
        }
    }
}

/// Runs `setup` in fresh namespaces `tag` on `10.<subnet>.0.0/16`, files in `dir`.
pub fn run_in_namespaces(
    setup: &WanSetup,
    tag: &str,
    subnet: u8,
    dir: &Path,
) -> Result<WanRun, BenchError> {
    // Relay-only hosts expose no port at all, SWIM's included.
    let exposure = match setup.link {
        Link::Relay => Exposure::None,
        Link::Rtt { .. } => Exposure::Swim,
    };
    let net = WanNet::up(tag, setup.stages, subnet, exposure).map_err(err)?;
    let exe = &setup.exe;
    let key = dir.join("orch.key");
    let out = Command::new(exe).args(["node", "id", "--key"]).arg(&key).output().map_err(err)?;
    let orch = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let mut children = Reap(Vec::new());
    let coordinator = net.host_addr(0);
    let relay_cmd = || {
        let mut cmd = net.host(0, exe);
        cmd.args(["relay", "serve", "--json", "--listen", &format!("{coordinator}:3340")]);
        cmd
    };
    let relay = match setup.link {
        Link::Relay => {
            let (child, ready, _) = start_until(relay_cmd(), "relay_ready")?;
            children.0.push(child);
            Some(ready["url"].as_str().ok_or_else(|| err("relay_ready has no url"))?.to_string())
        }
        Link::Rtt { .. } => None,
    };
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    let mut links = Vec::new();
    for i in 1..=setup.stages {
        let (host, router) = (net.host_addr(i), net.router_addr(i));
        let mut cmd = net.host(i, exe);
        cmd.args(["node", "boot", "--json", "--node-id", &i.to_string(), "--threads", "1"])
            .args([
                "--listen",
                &format!("{host}:{QUIC_PORT}"),
                "--swim",
                &format!("{host}:{SWIM_PORT}"),
            ])
            .args(["--orchestrator", &orch, "--key"])
            .arg(dir.join(format!("n{i}.key")))
            .arg("--admin")
            .arg(dir.join(format!("n{i}.sock")))
            .arg("--cache")
            .arg(dir.join(format!("cache{i}")));
        // Relay-only nodes take no seeds (none is reachable): the orchestrator announces
        // itself to each, and they learn of each other from it.
        if i > 1 && relay.is_none() {
            cmd.args(["--join", &format!("{}:{SWIM_PORT}", net.host_addr(1))]);
        }
        if let Some(url) = &relay {
            cmd.args(["--relay", url, "--relay-only"]);
        }
        if setup.scalar_hosts.contains(&i) {
            cmd.env("SWACTOR_ENGINE_ISA", "scalar");
        }
        let (child, available, rest) = start_until(cmd, "node_available")?;
        std::thread::spawn(move || for _ in rest {});
        children.0.push(child);
        let id = available["endpoint_id"].as_str().ok_or_else(|| err("no endpoint id"))?;
        pool.push_str(&format!("[[nodes]]\nnode_id = {i}\nendpoint_id = \"{id}\"\n"));
        match (setup.link, &relay) {
            (_, Some(url)) => pool.push_str(&format!("relay = \"{url}\"\n\n")),
            (Link::Rtt { ms }, None) => {
                let mut cmd = net.router(exe);
                cmd.args(["util", "wan-link", "--json"])
                    .args(["--listen", &format!("{router}:{QUIC_PORT}")])
                    .args(["--target", &format!("{host}:{QUIC_PORT}")])
                    .args(["--rtt-ms", &ms.to_string(), "--loss", &setup.loss.to_string()])
                    .args(setup.rate_mbit.map(|r| format!("--rate-mbit={r}")))
                    .args(["--seed", &(17 + 2 * u64::from(i)).to_string()]);
                let (child, _, rest) = start_until(cmd, "wan_link_ready")?;
                links.push((child, rest));
                pool.push_str(&format!("addrs = [\"{router}:{QUIC_PORT}\"]\n\n"));
            }
            (Link::Relay, None) => return Err(err("a relay run without a relay")),
        }
    }
    let pool_file = dir.join("pool.toml");
    std::fs::write(&pool_file, pool).map_err(err)?;
    let mut cmd = orchestrate_command(&net, setup, &pool_file, &key, relay.as_deref());

    let mut orchestrator = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().map_err(err)?;
    let stdout = orchestrator.stdout.take().ok_or_else(|| err("no stdout"))?;
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        let Ok(v) = serde_json::from_str::<Value>(&line) else { continue };
        let first_token =
            v["type"] == "token" && !lines.iter().any(|l: &Value| l["type"] == "token");
        if first_token && setup.restart_relay && relay.is_some() {
            // The relay dies at the first token and comes back on the same address.
            if let Some(mut old) = children.0.drain(..1).next() {
                let _ = old.kill();
                let _ = old.wait();
            }
            let (child, _, _) = start_until(relay_cmd(), "relay_ready")?;
            children.0.push(child);
        }
        lines.push(v);
    }
    let code = orchestrator.wait().map_err(err)?.code();
    let links = links.into_iter().map(|(child, rest)| stop_link(child, rest)).collect();
    drop(children);
    drop(net);
    Ok(WanRun { lines, code, links })
}

/// `orchestrate pool` in the coordinator's namespace for `setup` over `pool_file`.
fn orchestrate_command(
    net: &WanNet,
    setup: &WanSetup,
    pool_file: &Path,
    key: &Path,
    relay: Option<&str>,
) -> Command {
    let coordinator = net.host_addr(0);
    let mut cmd = net.host(0, &setup.exe);
    cmd.args(["orchestrate", "pool", "--json", "--window-ms", "300", "--pool-timeout", "60"])
        .args([
            "--listen",
            &format!("{coordinator}:7600"),
            "--swim",
            &format!("{coordinator}:7700"),
        ])
        .args(["--max-seq-len", "1024", "--max-tokens", &setup.tokens.to_string()])
        .args(["--prompt", &setup.prompt, "--pool"])
        .arg(pool_file)
        .arg("--key")
        .arg(key)
        .arg("--model")
        .arg(&setup.model);
    if let Some(url) = relay {
        cmd.args(["--relay", url]);
    }
    if setup.speculate {
        cmd.args(["--speculate", "ngram"]);
    }
    if setup.balance_memory {
        cmd.args(["--balance", "memory"]);
    }
    cmd
}

/// Stops a link (SIGTERM) and reads what it carried: delivered and dropped, both ways.
fn stop_link(mut child: Child, rest: Lines<BufReader<ChildStdout>>) -> (u64, u64) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let stopped = rest
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .find(|v| v["type"] == "wan_link_stopped");
    let _ = child.wait();
    let n = |v: &Value, way: &str, what: &str| v[way][what].as_u64().unwrap_or(0);
    stopped.map_or((0, 0), |v| {
        (
            n(&v, "up", "delivered") + n(&v, "down", "delivered"),
            n(&v, "up", "dropped") + n(&v, "down", "dropped"),
        )
    })
}

/// One row of `bench wan`.
#[derive(Debug, Clone, Serialize)]
pub struct WanFigure {
    /// The link.
    pub link: Link,
    /// Whether n-gram speculation drafted.
    pub speculate: bool,
    /// Stages.
    pub stages: u8,
    /// Hosts on the scalar kernels (slower nodes).
    pub scalar_hosts: Vec<u8>,
    /// What the ranges balanced: `speed` or `memory`.
    pub balance: &'static str,
    /// Blocks per stage.
    pub blocks: Vec<u64>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Decode tokens/s measured.
    pub decode_tokens_per_s: f64,
    /// Decode tokens/s the plan predicted (one sequence, no speculation).
    pub predicted_decode_tokens_per_s: Option<f64>,
    /// Time to first token measured from the moment the pipeline could serve the prompt, ms.
    pub ttft_ms: f64,
    /// Time to first token predicted, ms.
    pub predicted_ttft_ms: Option<f64>,
    /// Accepted over drafted tokens, with speculation.
    pub acceptance: Option<f64>,
    /// Datagrams the links delivered, both ways (0 through the relay).
    pub link_datagrams: u64,
    /// The mean bandwidth the nodes measured to each other before the plan, MB/s (`None`:
    /// every link too fast for the probe to tell).
    pub link_mbs: Option<f64>,
}

/// `bench wan`: every link of `links`, without and (with `speculate`) with n-gram
/// speculation, then (with `mixed`) the direct link with every host but the first on the
/// scalar kernels, its ranges balanced by speed and by memory; each in fresh namespaces.
pub fn wan(
    base: &WanSetup,
    links: &[Link],
    speculate: bool,
    mixed: bool,
    dir: &Path,
) -> Result<Vec<WanFigure>, BenchError> {
    let mut runs = Vec::new();
    let modes: &[bool] = if speculate { &[false, true] } else { &[false] };
    for &link in links {
        for &spec in modes {
            runs.push(WanSetup { link, speculate: spec, ..base.clone() });
        }
    }
    if mixed {
        let slow: Vec<u8> = (2..=base.stages).collect();
        for balance_memory in [false, true] {
            let link = Link::Rtt { ms: 0 };
            let scalar_hosts = slow.clone();
            runs.push(WanSetup {
                link,
                speculate: false,
                scalar_hosts,
                balance_memory,
                ..base.clone()
            });
        }
    }
    let tag = format!("swb{}", std::process::id() % 10_000);
    let mut figures = Vec::new();
    for (i, setup) in runs.iter().enumerate() {
        let run_dir = dir.join(format!("wan-{i}"));
        std::fs::create_dir_all(&run_dir).map_err(err)?;
        let run = run_in_namespaces(setup, &tag, 240, &run_dir)?;
        figures.push(figure(setup, &run)?);
    }
    Ok(figures)
}

/// The row of one completed run.
fn figure(setup: &WanSetup, run: &WanRun) -> Result<WanFigure, BenchError> {
    let link = setup.link;
    let summary = run.summary().ok_or_else(|| err(format!("the {link} run printed no summary")))?;
    if summary["outcome"] != "completed" {
        return Err(err(format!("the {link} run did not complete: {summary}")));
    }
    let f = |v: &Value| v.as_f64();
    Ok(WanFigure {
        link,
        speculate: setup.speculate,
        stages: setup.stages,
        scalar_hosts: setup.scalar_hosts.clone(),
        balance: if setup.balance_memory { "memory" } else { "speed" },
        blocks: summary["blocks"]
            .as_array()
            .map(|b| b.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default(),
        prompt_tokens: summary["prompt_tokens"].as_u64().unwrap_or(0),
        decode_tokens_per_s: f(&summary["decode_tokens_per_s"]).unwrap_or(0.0),
        predicted_decode_tokens_per_s: f(&summary["predicted"]["decode_tokens_per_s"]),
        ttft_ms: f(&summary["request_ttft_ms"]).unwrap_or(0.0),
        predicted_ttft_ms: f(&summary["predicted"]["time_to_first_token_ms"]),
        acceptance: f(&summary["speculation"]["acceptance"]),
        link_datagrams: run.links.iter().map(|l| l.0).sum(),
        link_mbs: run.node_link_mbs(setup.stages),
    })
}
