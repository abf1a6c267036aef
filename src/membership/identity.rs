//! Who a SWIM member is ([`SwimIdentity`]) and what the SWIM driver reports about members
//! ([`MembershipEvent`]): shared by the driver (`swim.rs`) and its suspicion bookkeeping.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::auth::RejectRecord;
use crate::wire::NodeId;

/// A member's identity in the SWIM cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SwimIdentity {
    /// Node id from the pool file (0 for a seed whose id is not known yet).
    pub node_id: NodeId,
    /// SWIM (UDP) address.
    pub addr: SocketAddr,
    /// iroh endpoint id.
    pub endpoint_id: String,
    /// Bumped on every rejoin so a restarted node wins over its old self.
    pub bump: u16,
}

impl foca::Identity for SwimIdentity {
    /// The socket address: foca accepts an announce addressed to a seed (whose identity
    /// it cannot know yet) by it. Every identity that reaches foca is on the roster (the
    /// codec checks the sender and every update), so only pool members can conflict.
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(SwimIdentity { bump: self.bump.wrapping_add(1), ..self.clone() })
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        // Wrapping comparison: the more recent bump wins.
        self.bump.wrapping_sub(adversary.bump) < u16::MAX / 2 && self.bump != adversary.bump
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
