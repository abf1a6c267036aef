//! The pool file: the resource inventory the planner works from.
//!
//! ```toml
//! [orchestrator]
//! node_id = 100
//! # endpoint_id and addrs are optional here: the orchestrator fills them in at run time.
//!
//! [[nodes]]
//! node_id = 1
//! endpoint_id = "2f0c...64 hex digits..."
//! addrs = ["10.0.0.11:7400"]
//! # relay = "https://relay.example.net:3340"   # optional: beside or instead of addrs
//! memory_bytes = 8589934592
//! device = "cpu"          # optional; checked against what the node reports
//!
//! [placement]             # optional; command-line flags override it
//! nodes = [1, 2, 3]       # stage order
//! layers = ["0..10", "10..20", "20..30"]
//! ```
//!
//! Parsing only checks syntax and types ([`PoolError`]) and writes valid endpoint ids in
//! lowercase ([`parse_endpoint_id`]: either case is accepted); meaning (duplicates, unknown
//! nodes, bad endpoint ids) is judged by the planner ([`crate::planner::check_pool`]),
//! which returns typed rejections.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use thiserror::Error;

use crate::wire::{LayerRange, NodeId};

/// The orchestrator's entry in the pool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OrchestratorEntry {
    /// The orchestrator's node id (distinct from every stage node's).
    pub node_id: NodeId,
    /// Its iroh endpoint id, if already known.
    #[serde(default)]
    pub endpoint_id: Option<String>,
    /// Its addresses, if already known.
    #[serde(default)]
    pub addrs: Vec<SocketAddr>,
    /// The iroh relay it can be reached through, if any (the orchestrator fills it in from
    /// its own `--relay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<String>,
}

/// One host of the pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolNode {
    /// The node's id.
    pub node_id: NodeId,
    /// Its iroh endpoint id: 64 hex digits, as `swactor node id` prints it.
    pub endpoint_id: String,
    /// Addresses its endpoint listens on (may be empty when `relay` is given: a node
    /// behind NAT, reached through its relay alone).
    #[serde(default)]
    pub addrs: Vec<SocketAddr>,
    /// The iroh relay the node can be reached through (`http(s)://HOST:PORT`), beside or
    /// instead of `addrs`; `node boot --relay` prints it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<String>,
    /// Memory the node may use for weights, KV cache and rings (0 or absent: what the node
    /// reports in `node_available`, taken by `orchestrate pool`; written only when known).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub memory_bytes: u64,
    /// The node's arena capacity (absent: what the node reports); a stage's rings must fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arena_bytes: Option<u64>,
    /// Where the node computes (`cpu`, `cuda:0`, ...), as its `node_available` reports it
    /// (`pool init` writes it). Optional; when given, `orchestrate pool` checks it against
    /// the node's report (`device_mismatch`).
    #[serde(default)]
    pub device: Option<String>,
    /// The most bytes the node's stage may keep of evicted prompt prefixes (absent: what
    /// the node reports, else the run's `--prompt-cache-bytes`, else the planner's
    /// default). With a run's budget as well, the smaller one holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_bytes: Option<u64>,
    /// What the node measured of its own speed at boot (`node_available`; `pool init`
    /// writes it). Absent: the planner balances by memory and predicts no speed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<crate::wire::NodeSpeed>,
    /// The round trip between the orchestrator and the node, microseconds: measured on
    /// the live connection by `orchestrate`, or written here to plan for a link (absent:
    /// the cost model assumes a LAN's, [`crate::planner::cost::ASSUMED_RTT_US`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u64>,
    /// Round trips the node measured to other nodes and to the orchestrator (by node id;
    /// `orchestrate` asks for them before planning). A link missing here is estimated from
    /// the two ends' `rtt_us`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<crate::wire::LinkRtt>,
}

impl PoolNode {
    /// The measured round trip from this node to `to`, if any.
    pub fn link_to(&self, to: NodeId) -> Option<u64> {
        self.links.iter().find(|l| l.to == to).map(|l| l.rtt_us)
    }

    /// The bandwidth measured on the link to `to` in MB/s (bytes per microsecond), if
    /// any: carried from `to` to this node (this node asked `to` for the probe's bytes),
    /// so a link's two directions are measured by its two ends.
    pub fn link_mbs(&self, to: NodeId) -> Option<f64> {
        let link = self.links.iter().find(|l| l.to == to)?;
        link.bytes_per_s.map(|b| b as f64 / 1e6)
    }
}

/// Placement written in the pool file (overridden by command-line flags).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolPlacement {
    /// Nodes in stage order.
    #[serde(default)]
    pub nodes: Option<Vec<NodeId>>,
    /// Layer ranges in stage order, as `"start..end"` strings.
    #[serde(default)]
    pub layers: Option<Vec<String>>,
}

/// A parsed pool file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pool {
    /// The orchestrator.
    pub orchestrator: OrchestratorEntry,
    /// The hosts, in file order.
    #[serde(default)]
    pub nodes: Vec<PoolNode>,
    /// Optional placement.
    #[serde(default)]
    pub placement: Option<PoolPlacement>,
}

/// Why a pool file could not be parsed.
#[derive(Debug, Error)]
pub enum PoolError {
    /// The TOML is malformed or has the wrong shape.
    #[error("invalid pool file: {0}")]
    Syntax(String),
    /// A placement layer range is not `start..end`.
    #[error("invalid pool file: placement.layers: {0}")]
    BadLayerRange(String),
}

impl Pool {
    /// Parses a pool file's text.
    pub fn from_toml(text: &str) -> Result<Pool, PoolError> {
        let mut pool: Pool = toml::from_str(text).map_err(|e| PoolError::Syntax(e.to_string()))?;
        pool.placement_layers()?;
        if let Some(e) = pool.orchestrator.endpoint_id.as_mut() {
            normalize(e);
        }
        pool.nodes.iter_mut().for_each(|n| normalize(&mut n.endpoint_id));
        Ok(pool)
    }

    /// Renders the pool as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// The SWIM members the pool names: every node and the orchestrator (whose endpoint
    /// id is the running orchestrator's own, `orchestrator_endpoint`), as (node id,
    /// endpoint id) pairs.
    pub fn members(&self, orchestrator_endpoint: &str) -> Vec<(NodeId, String)> {
        std::iter::once((self.orchestrator.node_id, orchestrator_endpoint.to_string()))
            .chain(self.nodes.iter().map(|n| (n.node_id, n.endpoint_id.clone())))
            .collect()
    }

    /// The node with this id.
    pub fn node(&self, id: NodeId) -> Option<&PoolNode> {
        self.nodes.iter().find(|n| n.node_id == id)
    }

    /// The placement's layer ranges, parsed.
    pub fn placement_layers(&self) -> Result<Option<Vec<LayerRange>>, PoolError> {
        let Some(layers) = self.placement.as_ref().and_then(|p| p.layers.as_ref()) else {
            return Ok(None);
        };
        layers
            .iter()
            .map(|s| s.parse::<LayerRange>().map_err(PoolError::BadLayerRange))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// Whether `id` is an iroh endpoint id as the pool file writes it: 64 hex digits, in
/// either case.
pub fn is_endpoint_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `label` names a device as pool files and `node_available` write it: `cpu` or
/// `cuda:N` (N a device ordinal, decimal digits only).
pub fn is_device_label(label: &str) -> bool {
    label == "cpu"
        || label.strip_prefix("cuda:").is_some_and(|n| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && n.parse::<u32>().is_ok()
        })
}

/// Whether `url` can name a relay: `http://` or `https://`, a host, no whitespace (the
/// network plane parses it fully; the core only judges the shape).
pub fn is_relay_url(url: &str) -> bool {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| {
        let host = r.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !host.starts_with(':') && !url.chars().any(char::is_whitespace)
    })
}

/// Why `addr` cannot be a pool member's address, if it cannot: an unspecified IP
/// (`0.0.0.0`, `::`) or port 0 is where a process listens, never where a peer reaches it.
pub fn unreachable_addr(addr: &SocketAddr) -> Option<String> {
    if addr.ip().is_unspecified() {
        Some(format!("{addr} is unspecified: write the address other hosts reach it at"))
    } else if addr.port() == 0 {
        Some(format!("{addr} has port 0: write the port it listens on"))
    } else {
        None
    }
}

/// Parses an endpoint id as typed anywhere (pool file, `--orchestrator`): 64 hex digits in
/// either case, returned in lowercase (the only form iroh parses).
pub fn parse_endpoint_id(text: &str) -> Result<String, String> {
    if is_endpoint_id(text) {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(format!("`{text}` is not an endpoint id (64 hex digits)"))
    }
}

/// Whether a memory figure is the "not given" 0 (left out of a written pool file).
fn is_zero(bytes: &u64) -> bool {
    *bytes == 0
}

/// Lowercases `id` in place when it is an endpoint id; leaves anything else for the
/// planner to reject.
fn normalize(id: &mut String) {
    if let Ok(lower) = parse_endpoint_id(id) {
        *id = lower;
    }
}
