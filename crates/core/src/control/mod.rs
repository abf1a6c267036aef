//! The control protocol on ALPN `swactor/ctl/1`: framed, versioned messages between the
//! orchestrator and nodes (provisioning, readiness, faults, stop, forwarded events).
//!
//! A frame is a little-endian `u32` length followed by that many bytes of JSON holding a
//! [`Envelope`] (`{"v":1,"msg":{...}}`). Frames above [`MAX_FRAME`] are refused before
//! they are buffered; a malformed frame or another version ends the session with a typed
//! [`ControlFault`]; neither ever crashes a node. [`FrameDecoder`] is sans-IO.

use serde::{Deserialize, Serialize};

use crate::events::EventLine;
use crate::wire::reason::{BootFault, Component, ControlFault, FaultReason};
use crate::wire::{NodeId, ProvisionStage, RunId, StageIndex};

/// Protocol version carried by every frame.
pub const CONTROL_VERSION: u32 = 1;
/// Largest frame body accepted, in bytes.
pub const MAX_FRAME: usize = 1 << 20;

/// A control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ControlMessage {
    /// Orchestrator -> node: opens a control session (the node answers `node_available`).
    Hello {
        /// The orchestrator's node id.
        orchestrator: NodeId,
        /// The pool's members, the orchestrator included: the only participants whose
        /// signed SWIM datagrams the node accepts from now on.
        #[serde(default)]
        members: Vec<PoolMember>,
    },
    /// Observer -> node: opens a read-only session. The observer holds its own key; the
    /// orchestrator's key vouches for it (`delegation`: the orchestrator's signature over
    /// the observer's endpoint id, see `net::identity::delegate_observer`). The node answers
    /// `node_available`, then sends its `member_view` now and on every change (and its
    /// `node_faulted` if it faults); nothing else the observer sends is acted on.
    Observe {
        /// The orchestrator's signature (128 hex digits) over the observer's endpoint id.
        delegation: String,
        /// The pool's members as the observer's pool file names them: taken as the node's
        /// SWIM roster only while no orchestrator has named one (never replacing it).
        #[serde(default)]
        members: Vec<PoolMember>,
    },
    /// Node -> observer: the pool's membership as this node's SWIM participant sees it.
    MemberView {
        /// Members alive (the node itself included).
        up: Vec<NodeId>,
        /// Members suspected down (missed probes, not refuted yet).
        suspect: Vec<NodeId>,
    },
    /// A node's availability and data-plane identity.
    NodeAvailable {
        /// The node.
        node_id: NodeId,
        /// Its endpoint id.
        endpoint_id: String,
        /// Its addresses.
        addrs: Vec<String>,
        /// Its SWIM (UDP) address, so the orchestrator can join the membership.
        #[serde(default)]
        swim_addr: Option<String>,
        /// Memory the node can give a stage (weights, KV cache, rings), if it knows.
        #[serde(default)]
        memory_bytes: Option<u64>,
        /// Its arena's capacity: the most ring bytes a stage on it can lease.
        #[serde(default)]
        arena_bytes: Option<u64>,
        /// Where its stage computes (`cpu`, `cuda:N`).
        #[serde(default)]
        device: Option<String>,
        /// The most bytes its stage may keep of evicted prompt prefixes
        /// (`node boot --prompt-cache-bytes`), if its operator set it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_cache_bytes: Option<u64>,
        /// What it measured of its speed at boot (a CPU node; absent from a node on a GPU).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        speed: Option<crate::wire::NodeSpeed>,
    },
    /// Orchestrator -> node: measure the round trip to each of these peers (the pool's
    /// other nodes and the orchestrator) before the plan is made.
    MeasureLinks {
        /// The peers, as the plan would name them.
        peers: Vec<crate::wire::Peer>,
    },
    /// Node -> orchestrator: the round trips it measured (a peer it could not reach is
    /// left out).
    LinksMeasured {
        /// The round trips.
        links: Vec<crate::wire::LinkRtt>,
    },
    /// Orchestrator -> node: run one stage.
    ProvisionStage {
        /// What to run.
        provision: Box<ProvisionStage>,
    },
    /// Node -> orchestrator: the stage holds worker, weights and both edges.
    StageReady {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// Node -> orchestrator: the stage faulted.
    StageFault {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
        /// Why.
        reason: FaultReason,
        /// Who detected it.
        component: Component,
    },
    /// Orchestrator -> node: tear the run's stage down.
    StopRun {
        /// The run.
        run_id: RunId,
        /// The run faulted: its streams' last bytes matter to nobody, so a send pump does
        /// not wait for the peer's acknowledgement (a lost peer never sends one).
        #[serde(default)]
        faulted: bool,
        /// The session re-forms: the node parks its worker's role with its caches for the
        /// run that may keep this stage (`specs/reformation.md`); else the role is dropped.
        #[serde(default)]
        park: bool,
    },
    /// Node -> orchestrator: the stage is torn down.
    StageStopped {
        /// The run.
        run_id: RunId,
        /// The stage.
        stage_index: StageIndex,
    },
    /// Node -> orchestrator: the node faulted and stops serving (its worker failed for
    /// good): it is not eligible for any run, and a run it serves faults.
    NodeFaulted {
        /// The node.
        node_id: NodeId,
        /// Why (the boot fault it amounts to: the node can no longer start a worker).
        reason: BootFault,
    },
    /// Node -> orchestrator: the node ends this session, its last message on it: it stops
    /// (`node.stopped`), or the orchestrator's key opened a newer session on it
    /// (`control.taken_over`). A run the session carried faults with `reason`.
    SessionEnding {
        /// The node.
        node_id: NodeId,
        /// Why.
        reason: FaultReason,
    },
    /// Node -> orchestrator: an observability event, forwarded.
    Event {
        /// The stamped event.
        line: EventLine,
    },
}

/// A pool member as the orchestrator names it: the pair a SWIM participant must prove.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolMember {
    /// The member's node id.
    pub node_id: NodeId,
    /// The member's endpoint id (its iroh public key, 64 hex digits).
    pub endpoint_id: String,
}

/// A versioned frame body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Protocol version.
    pub v: u32,
    /// The message.
    pub msg: ControlMessage,
}

/// Encodes one message as a frame.
pub fn encode(msg: &ControlMessage) -> Result<Vec<u8>, ControlFault> {
    let body = serde_json::to_vec(&Envelope { v: CONTROL_VERSION, msg: msg.clone() })
        .map_err(|_| ControlFault::MalformedFrame)?;
    if body.len() > MAX_FRAME {
        return Err(ControlFault::FrameTooLarge);
    }
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Reassembles frames from a byte stream.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    failed: Option<ControlFault>,
}

impl FrameDecoder {
    /// An empty decoder.
    pub fn new() -> FrameDecoder {
        FrameDecoder::default()
    }

    /// Adds received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// The next complete message, `None` when more bytes are needed. After an error the
    /// session is over: the same error is returned forever.
    pub fn next_message(&mut self) -> Option<Result<ControlMessage, ControlFault>> {
        if let Some(f) = self.failed {
            return Some(Err(f));
        }
        if self.buf.len() < 4 {
            return None;
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_FRAME {
            return Some(Err(self.fail(ControlFault::FrameTooLarge)));
        }
        if self.buf.len() < 4 + len {
            return None;
        }
        let body: Vec<u8> = self.buf.drain(..4 + len).skip(4).collect();
        let value: serde_json::Value = match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(_) => return Some(Err(self.fail(ControlFault::MalformedFrame))),
        };
        if value.get("v").and_then(serde_json::Value::as_u64) != Some(u64::from(CONTROL_VERSION)) {
            return Some(Err(self.fail(ControlFault::UnsupportedVersion)));
        }
        match serde_json::from_value::<Envelope>(value) {
            Ok(env) => Some(Ok(env.msg)),
            Err(_) => Some(Err(self.fail(ControlFault::MalformedFrame))),
        }
    }

    fn fail(&mut self, fault: ControlFault) -> ControlFault {
        self.failed = Some(fault);
        self.buf.clear();
        fault
    }
}

/// Accepts a control session only from the configured orchestrator.
pub fn authorize(peer_endpoint: &str, orchestrator_endpoint: &str) -> Result<(), ControlFault> {
    if peer_endpoint.eq_ignore_ascii_case(orchestrator_endpoint) {
        Ok(())
    } else {
        Err(ControlFault::UnauthorizedOrchestrator)
    }
}

#[cfg(test)]
mod tests;
