//! Before a plan: every ready node measures its round trip and bandwidth to the pool's
//! other nodes and to this orchestrator (`MeasureLinks` / `LinksMeasured`, probes on the
//! ping ALPN; each answer is a `links_measured` event), for the cost model's hops
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

/// How long the nodes get to answer (a probe to an unreachable peer gives up after 5 s, a
/// timed transfer after 3 s more).
const ANSWERS: Duration = Duration::from_secs(10);

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

/// Asks each of `ready` for its links and keeps the answers in `reports`. `Ok(false)` when
/// the pool stopped being ready meanwhile (wait for it again); a node that does not answer
/// in time is planned without its links.
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
    let mut waiting: Vec<NodeId> = Vec::new();
    for &node in ready {
        let peers = all.iter().filter(|p| p.node_id != node).cloned().collect();
        if phase.send(node, ControlMessage::MeasureLinks { peers }) {
            waiting.push(node);
        }
    }
    let deadline = tokio::time::Instant::now() + ANSWERS;
    while !waiting.is_empty() {
        let notices = tokio::select! {
            _ = &mut *stop => return Err(OrchestrateError::Stopped),
            () = tokio::time::sleep_until(deadline) => {
                sink.progress(&format!("no link round trips from nodes {waiting:?}"));
                return Ok(true);
            }
            notices = phase.next() => notices,
        };
        for notice in notices {
            let Some(notice) = node_notice(notice, reports, sink, t0) else { continue };
            match notice {
                PoolNotice::Message(node, ControlMessage::LinksMeasured { links }) => {
                    waiting.retain(|&n| n != node);
                    let event = Event::LinksMeasured { node_id: node, links: links.clone() };
                    super::emit(sink, t0, event);
                    reports.entry(node).or_default().links = links;
                }
                PoolNotice::Gate(GateEvent::ReadinessLost { node }) => {
                    sink.progress(&format!("node {node} left; waiting for the pool again"));
                    return Ok(false);
                }
                _ => {}
            }
        }
    }
    Ok(true)
}
