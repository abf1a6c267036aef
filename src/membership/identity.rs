//! Who a SWIM member is ([`SwimIdentity`]) and what the SWIM driver reports about members
//! ([`MembershipEvent`]) and how its datagrams reach it ([`SwimAddr`]): shared by the
//! driver (`swim.rs`), the carrier of relayed members' datagrams and the suspicion
//! bookkeeping.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::auth::RejectRecord;
use crate::wire::NodeId;

/// A member's identity in the SWIM cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SwimIdentity {
    /// Node id from the pool file (0 for a seed whose id is not known yet).
    pub node_id: NodeId,
    /// Where its SWIM datagrams go: a UDP address, or its iroh endpoint through a relay.
    pub addr: SwimAddr,
    /// iroh endpoint id.
    pub endpoint_id: String,
    /// Bumped on every rejoin so a restarted node wins over its old self.
    pub bump: u16,
}

impl foca::Identity for SwimIdentity {
    /// The socket address: foca accepts an announce addressed to a seed (whose identity
    /// it cannot know yet) by it. Every identity that reaches foca is on the roster (the
    /// codec checks the sender and every update), so only pool members can conflict.
    type Addr = SwimAddr;

    fn renew(&self) -> Option<Self> {
        Some(SwimIdentity { bump: self.bump.wrapping_add(1), ..self.clone() })
    }

    fn addr(&self) -> SwimAddr {
        self.addr.clone()
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        // Wrapping comparison: the more recent bump wins.
        self.bump.wrapping_sub(adversary.bump) < u16::MAX / 2 && self.bump != adversary.bump
    }
}

/// Where a member's SWIM datagrams go.
///
/// A member with a reachable UDP port is addressed by it. A member that exposes no port
/// (`--relay-only`, behind a NAT) is addressed by its iroh endpoint and the relay it is
/// homed on: its datagrams travel as QUIC datagrams on the SWIM ALPN
/// (`crate::membership::carrier`), through the relay unless iroh found a direct path. The
/// endpoint id keeps the address unique (foca tells members apart by address), and the
/// same for a restarted node, whose bump then wins.
///
/// Written `10.0.0.2:7501` or `relay:<endpoint id>@<relay url>` (what `node_available`
/// prints and what the orchestrator joins through).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SwimAddr {
    /// A UDP socket address.
    Udp(SocketAddr),
    /// An iroh endpoint reached through a relay (or a direct path iroh found).
    Relayed {
        /// The endpoint id (hex).
        endpoint: String,
        /// The relay it is homed on.
        relay: String,
    },
}

impl SwimAddr {
    /// The UDP address, when it has one.
    pub fn udp(&self) -> Option<SocketAddr> {
        match self {
            SwimAddr::Udp(a) => Some(*a),
            SwimAddr::Relayed { .. } => None,
        }
    }
}

impl From<SocketAddr> for SwimAddr {
    fn from(addr: SocketAddr) -> SwimAddr {
        SwimAddr::Udp(addr)
    }
}

impl fmt::Display for SwimAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwimAddr::Udp(a) => write!(f, "{a}"),
            SwimAddr::Relayed { endpoint, relay } => write!(f, "relay:{endpoint}@{relay}"),
        }
    }
}

/// A SWIM address that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a SWIM address (`host:port` or `relay:<endpoint id>@<relay url>`): {0}")]
pub struct BadSwimAddr(pub String);

impl FromStr for SwimAddr {
    type Err = BadSwimAddr;

    fn from_str(s: &str) -> Result<SwimAddr, BadSwimAddr> {
        let bad = || BadSwimAddr(s.to_string());
        if let Some(rest) = s.strip_prefix("relay:") {
            let (endpoint, relay) = rest.split_once('@').ok_or_else(bad)?;
            let hex = endpoint.len() == 64 && endpoint.bytes().all(|b| b.is_ascii_hexdigit());
            if !hex || relay.is_empty() {
                return Err(bad());
            }
            return Ok(SwimAddr::Relayed { endpoint: endpoint.into(), relay: relay.into() });
        }
        s.parse::<SocketAddr>().map(SwimAddr::Udp).map_err(|_| bad())
    }
}

/// A membership change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member is alive (also: a suspect member refuted the suspicion).
    Up(SwimIdentity),
    /// A member is suspected down: it missed its probes and has not refuted yet. It
    /// becomes `Up` again when it refutes, or `Down` when the suspicion times out.
    Suspect(SwimIdentity),
    /// A member was declared down.
    Down(SwimIdentity),
    /// A datagram was refused (reported for the 1st, 2nd, 4th, ... refusal of a reason;
    /// [`RosterHandle::rejects`](super::swim::RosterHandle::rejects) has every count).
    Rejected(RejectRecord),
}
