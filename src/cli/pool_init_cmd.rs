//! `swactor pool init`: a pool file from the `node_available` lines nodes printed.
//!
//! What it reads is bounded ([`MAX_INPUT_BYTES`] in all, [`MAX_LINE_BYTES`] a line), and
//! the pool it writes is judged by the planner's own [`check_pool`](crate::planner::check_pool),
//! as `run plan` and `orchestrate pool` judge a pool file: node ids, endpoint ids,
//! addresses and device labels.

use std::io::{BufRead, BufReader, Read};

use color_eyre::eyre::eyre;

use super::args::PoolInitArgs;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use crate::planner::pool::{OrchestratorEntry, PoolNode};
use crate::wire::NodeId;

/// The most bytes `pool init` reads from all its inputs together (a node's saved
/// `--json` log included).
pub const MAX_INPUT_BYTES: u64 = 64 << 20;
/// The longest line `pool init` reads (a `node_available` line is a few hundred bytes).
pub const MAX_LINE_BYTES: usize = 64 << 10;

/// `swactor pool init`: a pool file from `node_available` lines.
pub fn pool_init(args: &PoolInitArgs, out: &mut Output) -> Result<(), CliError> {
    let mut nodes: Vec<PoolNode> = Vec::new();
    let mut budget = MAX_INPUT_BYTES;
    if args.files.is_empty() {
        read_nodes(std::io::stdin().lock(), "standard input", &mut budget, &mut nodes)?;
    }
    for f in &args.files {
        let file = std::fs::File::open(f).map_err(|e| {
            CliError::new(
                ExitCode::Input,
                "io",
                eyre!(e).wrap_err(format!("cannot read {}", f.display())),
            )
        })?;
        read_nodes(file, &f.display().to_string(), &mut budget, &mut nodes)?;
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
            relay: None,
        },
        nodes,
        placement: None,
    };
    crate::planner::check_pool(&pool)
        .map_err(|e| CliError::new(ExitCode::Input, e.reason.as_str(), eyre!(e.to_string())))?;
    out.line(pool.to_toml().trim_end())?;
    Ok(())
}

/// Reads `input` (named `name`) line by line, within `budget` bytes left and
/// [`MAX_LINE_BYTES`] a line, adding each `node_available` line's node to `nodes` (the
/// latest line of a node id wins: a node restarted with the same id).
fn read_nodes(
    input: impl Read,
    name: &str,
    budget: &mut u64,
    nodes: &mut Vec<PoolNode>,
) -> Result<(), CliError> {
    let too_large = |what: String| {
        CliError::new(ExitCode::Input, "input_too_large", eyre!("{name}: {what} (input_too_large)"))
            .with_suggestion("give it the `node_available` lines of `node boot --json`")
    };
    let mut reader = BufReader::new(input.take(budget.saturating_add(1)));
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| CliError::new(ExitCode::Input, "io", eyre!(e)))?;
        if n == 0 {
            return Ok(());
        }
        *budget = budget.checked_sub(n as u64).ok_or_else(|| {
            too_large(format!("more than {MAX_INPUT_BYTES} bytes in all were given"))
        })?;
        if line.len() > MAX_LINE_BYTES {
            return Err(too_large(format!("a line is longer than {MAX_LINE_BYTES} bytes")));
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else { continue };
        if v["type"] != "node_available" {
            continue;
        }
        let node = node_of(&v, String::from_utf8_lossy(&line).trim_end())?;
        nodes.retain(|n| n.node_id != node.node_id);
        nodes.push(node);
    }
}

/// The pool entry of one `node_available` record (its text `line` for messages). Memory
/// the node did not report stays out of the pool file: `orchestrate pool` takes it from
/// the node's report.
fn node_of(v: &serde_json::Value, line: &str) -> Result<PoolNode, CliError> {
    let bad = |what: &str| {
        CliError::new(
            ExitCode::Input,
            "invalid_node_available",
            eyre!("a node_available line with no valid {what}: {line}"),
        )
    };
    let node_id = NodeId(v["node_id"].as_u64().ok_or_else(|| bad("node_id"))?);
    let endpoint_id = crate::planner::pool::parse_endpoint_id(
        v["endpoint_id"].as_str().ok_or_else(|| bad("endpoint_id"))?,
    )
    .map_err(|e| bad(&format!("endpoint_id ({e})")))?;
    let addrs = v["addrs"]
        .as_array()
        .ok_or_else(|| bad("addrs"))?
        .iter()
        .map(|a| {
            a.as_str().and_then(|a| a.parse().ok()).ok_or_else(|| bad(&format!("addrs ({a})")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let memory_bytes = match &v["memory_bytes"] {
        serde_json::Value::Null => 0,
        m => m.as_u64().ok_or_else(|| bad("memory_bytes"))?,
    };
    let device = match &v["device"] {
        serde_json::Value::Null => None,
        d => Some(d.as_str().ok_or_else(|| bad("device"))?.to_string()),
    };
    let relay = match &v["relay"] {
        serde_json::Value::Null => None,
        r => Some(r.as_str().ok_or_else(|| bad("relay"))?.to_string()),
    };
    // The node's calibration, as it printed it (absent from an older node, or a GPU's).
    let speed = match &v["speed"] {
        serde_json::Value::Null => None,
        sp => Some(serde_json::from_value(sp.clone()).map_err(|_| bad("speed"))?),
    };
    Ok(PoolNode {
        node_id,
        endpoint_id,
        addrs,
        relay,
        memory_bytes,
        arena_bytes: None,
        device,
        prompt_cache_bytes: None,
        speed,
        rtt_us: None,
        links: Vec::new(),
    })
}
