//! Before a plan: every ready node in turn measures its round trip and bandwidth to the
//! pool's other nodes and to this orchestrator (`MeasureLinks` / `LinksMeasured`, probes on
//! the ping ALPN; each answer is a `links_measured` event), for the cost model's hops
//! (`specs/cost-model.md`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::{NodeReport, OrchestrateError, RunSink, node_notice};
use crate::control::ControlMessage;
use crate::events::Event;
use crate::membership::pool_gate::GateEvent;
use crate::orchestrator::pool_phase::{PoolNotice, PoolPhase};
use crate::planner::Pool;
use crate::wire::reason::OperatorStop;
use crate::wire::{NodeId, Peer};

/// How long a node gets to answer: the probes' connections (5 s at most) and, per peer, a
/// timed transfer (3 s at most), with room to spare.
fn answer_within(peers: usize) -> Duration {
    Duration::from_secs(7 + 3 * peers as u64)
}

/// The peer of every pool node and of the orchestrator (`pool` with the orchestrator's own
/// identity filled in).
fn peers(pool: &Pool) -> Vec<Peer> {
    let o = &pool.orchestrator;
    let orchestrator = Peer {
        node_id: o.node_id,
        endpoint_id: o.endpoint_id.clone(),
        addrs: o.addrs.clone(),
        relay: o.relay.clone(),
    };
    let nodes = pool.nodes.iter().map(|n| Peer {
        node_id: n.node_id,
        endpoint_id: Some(n.endpoint_id.to_ascii_lowercase()),
        addrs: n.addrs.clone(),
        relay: n.relay.clone(),
    });
    nodes.chain([orchestrator]).collect()
}

/// Asks each of `ready` in turn for its links (one node at a time, so that no two nodes'
/// timed transfers share a link) and keeps the answers in `reports`. `Ok(false)` when the
/// pool stopped being ready meanwhile (wait for it again); a node that does not answer in
/// time is planned without its links.
pub(super) async fn measure(
    phase: &mut PoolPhase,
    pool: &Pool,
    ready: &[NodeId],
    reports: &mut HashMap<NodeId, NodeReport>,
    sink: &mut dyn RunSink,
    stop: &mut (impl std::future::Future<Output = OperatorStop> + Unpin),
    t0: Instant,
) -> Result<bool, OrchestrateError> {
    let all = peers(pool);
    for &node in ready {
        let peers: Vec<Peer> = all.iter().filter(|p| p.node_id != node).cloned().collect();
        let deadline = tokio::time::Instant::now() + answer_within(peers.len());
        if !phase.send(node, ControlMessage::MeasureLinks { peers }) {
            continue;
        }
        let mut waiting = true;
        while waiting {
            let notices = tokio::select! {
                _ = &mut *stop => return Err(OrchestrateError::Stopped),
                () = tokio::time::sleep_until(deadline) => {
                    sink.progress(&format!("no link measurements from node {node}"));
                    break;
                }
                notices = phase.next() => notices,
            };
            for notice in notices {
                let Some(notice) = node_notice(notice, reports, sink, t0) else { continue };
                match notice {
                    PoolNotice::Message(from, ControlMessage::LinksMeasured { links }) => {
                        waiting &= from != node;
                        let event = Event::LinksMeasured { node_id: from, links: links.clone() };
                        super::emit(sink, t0, event);
                        reports.entry(from).or_default().links = links;
                    }
                    PoolNotice::Gate(GateEvent::ReadinessLost { node }) => {
                        sink.progress(&format!("node {node} left; waiting for the pool again"));
                        return Ok(false);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(true)
}
