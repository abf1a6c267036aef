//! What `edge inspect` shows of a node ([`EdgeInspect`]): kept by the driver, filled in by
//! the inbox, served by the admin socket.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::wire::NodeId;
use crate::wire::reason::FaultReason;

/// The edge records `edge inspect` shows (none until runs provision edges).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct EdgeInspect {
    /// The node.
    pub node_id: NodeId,
    /// Endpoint id.
    pub endpoint_id: String,
    /// Live arena leases.
    pub arena_leases: usize,
    /// Rings installed in the worker.
    #[serde(default)]
    pub installed_rings: usize,
    /// Device objects the worker holds (loaded inputs, outputs of a step in flight): zero
    /// between runs.
    #[serde(default)]
    pub device_objects: u64,
    /// Edge records of the current (or last) run.
    pub edges: Vec<serde_json::Value>,
    /// The provisioned stage, if any.
    #[serde(default)]
    pub stage: Option<serde_json::Value>,
    /// Members the node sees up in SWIM.
    pub members: Vec<u64>,
    /// The latest edge streams and control sessions refused (at most [`REFUSALS_KEPT`]).
    #[serde(default)]
    pub refusals: Vec<String>,
    /// SWIM datagrams refused since boot (by reason, and the last few).
    #[serde(default)]
    pub swim_rejected: crate::membership::auth::RejectCounts,
    /// How many edge streams and control sessions were refused since boot, per reason.
    #[serde(default)]
    pub refused: BTreeMap<String, u64>,
}

/// How many refusal lines `edge inspect` keeps (the counts keep counting).
pub const REFUSALS_KEPT: usize = 16;

impl EdgeInspect {
    /// Counts one refusal under `reason` (by its code: `unknown_edge`) and keeps its line
    /// among the latest [`REFUSALS_KEPT`]: a peer refused over and over grows nothing.
    pub fn record_refusal(&mut self, reason: FaultReason, line: String) {
        *self.refused.entry(reason.code().to_string()).or_default() += 1;
        if self.refusals.len() >= REFUSALS_KEPT {
            let excess = self.refusals.len() + 1 - REFUSALS_KEPT;
            self.refusals.drain(..excess);
        }
        self.refusals.push(line);
    }
}
