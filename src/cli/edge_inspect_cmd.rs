//! `swactor edge inspect`: ask a node's admin socket for its edges and what it sees of
//! the pool, and print the answer.

use color_eyre::eyre::eyre;

use super::args::EdgeInspectArgs;
use super::exit::{CliError, ExitCode};
use super::output::{Output, table};
use crate::node::inspect::EdgeInspect;

/// `swactor edge inspect`.
pub fn inspect(args: &EdgeInspectArgs, out: &mut Output) -> Result<(), CliError> {
    let body = read_answer(args)?;
    let socket = args.node.display();
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
    print_text(&state, out)
}

/// The node's whole answer, read before one deadline (`--timeout-ms`) however it trickles
/// in.
#[allow(clippy::disallowed_methods)] // the command owns its deadline
fn read_answer(args: &EdgeInspectArgs) -> Result<Vec<u8>, CliError> {
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
    Ok(body)
}

/// The answer as text: the node, its stage, a table of its edges, and its refusals.
/// What the `stalls` column counts, printed under the edge table.
const STALLS_LEGEND: &str = "stalls: times a pump waited for its ring (receive: the ring was \
                             full, the stage behind it slower; send: the ring was empty, \
                             waiting for the stage's output)";

fn print_text(state: &EdgeInspect, out: &mut Output) -> Result<(), CliError> {
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
        for line in table(&edge_rows(&state.edges)) {
            out.line(line)?;
        }
        out.line(STALLS_LEGEND)?;
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

/// The edge table: a header row, then one row per edge record.
fn edge_rows(edges: &[serde_json::Value]) -> Vec<Vec<String>> {
    let mut rows = vec![
        [
            "edge",
            "run",
            "direction",
            "peer",
            "path",
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
    rows.extend(edges.iter().map(|e| {
        let peer = format!("node {}", e["peer"]);
        let direction = text_of(&e["direction"]);
        // How the peer is reached now: `direct 0.4 ms`, `relayed 21.0 ms`, or `-`.
        let path = match (e["path"].as_str(), e["rtt_us"].as_u64()) {
            (Some(kind), Some(us)) => format!("{kind} {:.1} ms", us as f64 / 1e3),
            _ => "-".into(),
        };
        ["edge_id", "run_id"]
            .iter()
            .map(|k| text_of(&e[*k]))
            .chain([direction, peer, path, text_of(&e["state"]), text_of(&e["ring_id"])])
            .chain(["objects", "bytes", "stalls", "last_fault"].iter().map(|k| text_of(&e[*k])))
            .collect()
    }));
    rows
}

/// A JSON value as a person reads it: strings without quotes, nothing as `-`.
fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "-".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
