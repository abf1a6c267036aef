//! How each peer is reached right now: the connections an endpoint holds to each peer
//! (edge connections both ways), and for each the path iroh has selected for its data,
//! direct (UDP between the hosts) or relayed, with that path's round-trip time.
//! `edge inspect` shows it per edge.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iroh::EndpointId;
use iroh::endpoint::Connection;
use serde::{Deserialize, Serialize};

/// How a connection's data travels now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// UDP between the two hosts (their own addresses, or a hole punched through NAT).
    Direct,
    /// Through an iroh relay.
    Relayed,
}

/// The selected path of a live connection to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathReport {
    /// Direct or relayed.
    pub path: PathKind,
    /// The path's smoothed round-trip time, microseconds.
    pub rtt_us: u64,
}

/// The live connections to each peer (closed ones are dropped as they are seen).
#[derive(Debug, Clone, Default)]
pub struct Paths(Arc<Mutex<HashMap<EndpointId, Vec<Connection>>>>);

impl Paths {
    /// Remembers `conn` (a connection to `conn.remote_id()`).
    pub fn track(&self, conn: &Connection) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let conns = map.entry(conn.remote_id()).or_default();
        conns.retain(|c| c.close_reason().is_none());
        if !conns.iter().any(|c| c.stable_id() == conn.stable_id()) {
            conns.push(conn.clone());
        }
    }

    /// The selected path of the most recent live connection to `peer` (64 hex digits),
    /// if there is one with a path selected.
    pub fn of(&self, peer: &str) -> Option<PathReport> {
        use std::str::FromStr;
        let id = EndpointId::from_str(peer).ok()?;
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let conns = map.get_mut(&id)?;
        conns.retain(|c| c.close_reason().is_none());
        conns.iter().rev().find_map(selected)
    }
}

/// The path `conn` sends its data on now.
pub fn selected(conn: &Connection) -> Option<PathReport> {
    let paths = conn.paths();
    let p = paths.iter().find(|p| p.is_selected())?;
    let path = if p.is_relay() { PathKind::Relayed } else { PathKind::Direct };
    Some(PathReport { path, rtt_us: u64::try_from(p.rtt().as_micros()).unwrap_or(u64::MAX) })
}
