//! `swactor pool init`: a pool file from the `node_available` lines nodes printed.

use color_eyre::eyre::eyre;

use super::args::PoolInitArgs;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use crate::wire::NodeId;

/// `swactor pool init`: a pool file from `node_available` lines.
pub fn pool_init(args: &PoolInitArgs, out: &mut Output) -> Result<(), CliError> {
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
