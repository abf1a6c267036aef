//! `swactor pool watch`: the orchestrator's pool phase
//! (`PoolPhase`: a control session to every
//! node — nodes accept only the orchestrator endpoint they were started with —, SWIM and
//! the pool gate) alone, reporting what it observes.
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::membership::pool_gate::GateEvent;
use crate::net::endpoint::bind;
use crate::net::identity::{NodeKey, delegate_observer};
use crate::orchestrator::pool_phase::{PoolNotice, PoolPhase, Role};
use crate::planner::Pool;
use crate::wire::NodeId;
use crate::wire::reason::{BootFault, ControlFault};

/// What the watch reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WatchEvent {
    /// A node answered its control session with its availability.
    NodeAvailable {
        /// The node.
        node_id: NodeId,
        /// Its endpoint id.
        endpoint_id: String,
        /// Its SWIM address.
        swim_addr: Option<String>,
    },
    /// A node refused the control session (reported once per node).
    NodeRefused {
        /// The node.
        node_id: NodeId,
        /// The close reason it gave (`unauthorized_orchestrator`: it was started for
        /// another orchestrator's key).
        reason: String,
    },
    /// SWIM sees the member alive.
    MemberUp {
        /// The node.
        node_id: NodeId,
    },
    /// SWIM suspects the member (it missed its probes): not ready until it refutes.
    MemberSuspect {
        /// The node.
        node_id: NodeId,
    },
    /// SWIM declared the member down.
    MemberDown {
        /// The node.
        node_id: NodeId,
    },
    /// The node reported a fault over its control session (its worker failed for good):
    /// it stops and is never ready again.
    NodeFaulted {
        /// The node.
        node_id: NodeId,
        /// Why (a boot fault code).
        reason: BootFault,
    },
    /// The whole pool is ready and stable.
    PoolReady {
        /// The pool's nodes.
        nodes: Vec<NodeId>,
    },
    /// The pool is no longer ready.
    ReadinessLost {
        /// The node that broke readiness.
        node: NodeId,
    },
    /// A SWIM datagram was refused (it changes nothing in readiness); reported for the
    /// 1st, 2nd, 4th, ... refusal of each reason.
    MembershipRejected {
        /// Why (`unsigned`, `unknown_signer`, `bad_signature`, `replayed`, `stale`,
        /// `identity_mismatch`).
        reason: String,
        /// The datagram's UDP source.
        from: String,
        /// The key it claimed, if it had an envelope.
        signer: Option<String>,
        /// Refusals of this reason so far.
        count: u64,
    },
}

impl WatchEvent {
    /// The event's `type` tag in JSON Lines.
    pub fn kind(&self) -> &'static str {
        match self {
            WatchEvent::NodeAvailable { .. } => "node_available",
            WatchEvent::NodeRefused { .. } => "node_refused",
            WatchEvent::MemberUp { .. } => "member_up",
            WatchEvent::MemberSuspect { .. } => "member_suspect",
            WatchEvent::MemberDown { .. } => "member_down",
            WatchEvent::NodeFaulted { .. } => "node_faulted",
            WatchEvent::PoolReady { .. } => "pool_ready",
            WatchEvent::ReadinessLost { .. } => "readiness_lost",
            WatchEvent::MembershipRejected { .. } => "membership_rejected",
        }
    }
}

/// `node 1`, or `nodes 1, 2, 3`.
fn node_list(nodes: &[NodeId]) -> String {
    let ids = nodes.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    if nodes.len() == 1 { format!("node {ids}") } else { format!("nodes {ids}") }
}

/// One readable sentence per event (the text output of `pool watch`).
impl fmt::Display for WatchEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchEvent::NodeAvailable { node_id, endpoint_id, swim_addr } => {
                write!(f, "node {node_id} is available: endpoint {endpoint_id}")?;
                match swim_addr {
                    Some(addr) => write!(f, ", SWIM at {addr}"),
                    None => write!(f, ", no SWIM address"),
                }
            }
            WatchEvent::NodeRefused { node_id, reason } => {
                write!(f, "node {node_id} refused the control session: {reason}")?;
                if reason == ControlFault::UnauthorizedOrchestrator.as_str() {
                    write!(f, " (it was started for another orchestrator's key)")?;
                }
                Ok(())
            }
            WatchEvent::MemberUp { node_id } => write!(f, "node {node_id} is alive (SWIM)"),
            WatchEvent::MemberSuspect { node_id } => {
                write!(f, "node {node_id} is suspected down (SWIM)")
            }
            WatchEvent::MemberDown { node_id } => write!(f, "node {node_id} is down (SWIM)"),
            WatchEvent::NodeFaulted { node_id, reason } => {
                write!(f, "node {node_id} faulted: {reason}")
            }
            WatchEvent::PoolReady { nodes } => {
                write!(f, "the pool is ready: {}", node_list(nodes))
            }
            WatchEvent::ReadinessLost { node } => {
                write!(f, "the pool is no longer ready: node {node} changed")
            }
            WatchEvent::MembershipRejected { reason, from, signer, count } => {
                write!(f, "a SWIM datagram from {from} was refused: {reason}")?;
                if let Some(signer) = signer {
                    write!(f, " (signed as {signer})")?;
                }
                write!(f, "; {count} refused for this reason so far")
            }
        }
    }
}

/// Settings of a watch.
#[derive(Debug, Clone)]
pub struct WatchConfig {
    /// The pool.
    pub pool: Pool,
    /// The orchestrator's key file.
    pub key: PathBuf,
    /// iroh listen address.
    pub listen: SocketAddr,
    /// The relays it may reach nodes through.
    pub relays: crate::net::relay::Relays,
    /// Convergence window.
    pub window: Duration,
    /// Give up when the pool is not ready this long after the start (`None`: wait on).
    pub pool_timeout: Option<Duration>,
}

/// Why a watch ended without success.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The pool file names no node: nothing could ever be ready.
    #[error("the pool file names no node: there is no pool to watch")]
    EmptyPool,
    /// The watch could not start (key, bind, endpoint ids).
    #[error("{0}")]
    Setup(String),
    /// Every node of the pool refused the control session.
    #[error("every node refused the control session: {}", refusals(.0))]
    Refused(BTreeMap<NodeId, String>),
    /// The pool was not ready before the deadline.
    #[error("the pool was not ready within {0:?}: {1}")]
    NotReady(Duration, String),
}

fn refusals(refused: &BTreeMap<NodeId, String>) -> String {
    refused.iter().map(|(n, r)| format!("node {n} ({r})")).collect::<Vec<_>>().join(", ")
}

/// Runs the gate until `shutdown` resolves, `report` breaks, or (when `until_ready`) the
/// pool is ready. Ends with an error once every node refused the control session, or when
/// the pool was not ready by the configured deadline.
pub async fn watch(
    config: WatchConfig,
    until_ready: bool,
    mut report: impl FnMut(&WatchEvent) -> ControlFlow<()>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WatchError> {
    if config.pool.nodes.is_empty() {
        return Err(WatchError::EmptyPool);
    }
    let start = Instant::now();
    // The orchestrator's key only vouches for this observer, which holds its own: the run's
    // endpoint, sessions and SWIM identity stay the orchestrator's alone.
    let orchestrator = NodeKey::load(&config.key).map_err(|e| WatchError::Setup(e.to_string()))?;
    let key = NodeKey::generate().map_err(|e| WatchError::Setup(e.to_string()))?;
    let role = Role::Observer {
        delegation: delegate_observer(&orchestrator, &key.endpoint_id()),
        orchestrator: orchestrator.endpoint_id_hex(),
    };
    let endpoint = bind(&key, config.listen, &config.relays)
        .await
        .map_err(|e| WatchError::Setup(e.to_string()))?;
    // Nodes may boot after the watch starts: sessions are retried until they open.
    let result = match PoolPhase::start(&endpoint, &key, &config.pool, role, config.window).await {
        Ok(phase) => watch_on(&config, until_ready, &mut report, shutdown, phase, start).await,
        Err(e) => Err(WatchError::Setup(e)),
    };
    endpoint.close().await;
    result
}

async fn watch_on(
    config: &WatchConfig,
    until_ready: bool,
    report: &mut impl FnMut(&WatchEvent) -> ControlFlow<()>,
    shutdown: impl std::future::Future<Output = ()>,
    mut phase: PoolPhase,
    start: Instant,
) -> Result<(), WatchError> {
    let mut ever_ready = false;
    let give_up_at = config.pool_timeout.map(|t| start + t);
    tokio::pin!(shutdown);
    loop {
        if phase.all_refused() {
            return Err(WatchError::Refused(phase.refused().clone()));
        }
        let notices = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = async { match give_up_at { Some(t) if !ever_ready => tokio::time::sleep_until(t.into()).await, _ => std::future::pending().await } } => {
                return Err(WatchError::NotReady(config.pool_timeout.unwrap_or_default(), phase.missing()));
            }
            notices = phase.next() => notices,
        };
        for notice in notices {
            let Some(event) = watch_event(notice) else { continue };
            // Every report may end the watch (its reader went away).
            if report(&event).is_break() {
                return Ok(());
            }
            if matches!(event, WatchEvent::PoolReady { .. }) {
                ever_ready = true;
                if until_ready {
                    return Ok(());
                }
            }
        }
    }
}

/// What the watch reports of a pool-phase notice.
fn watch_event(notice: PoolNotice) -> Option<WatchEvent> {
    Some(match notice {
        PoolNotice::NodeAvailable { node_id, endpoint_id, swim_addr, .. } => {
            WatchEvent::NodeAvailable { node_id, endpoint_id, swim_addr }
        }
        PoolNotice::NodeRefused { node_id, reason } => WatchEvent::NodeRefused { node_id, reason },
        PoolNotice::MemberUp(node_id) => WatchEvent::MemberUp { node_id },
        PoolNotice::MemberSuspect(node_id) => WatchEvent::MemberSuspect { node_id },
        PoolNotice::NodeFaulted { node_id, reason } => WatchEvent::NodeFaulted { node_id, reason },
        PoolNotice::MemberDown(node_id) => WatchEvent::MemberDown { node_id },
        PoolNotice::Rejected(r, count) => WatchEvent::MembershipRejected {
            reason: r.reason.as_str().into(),
            from: r.from,
            signer: r.signer,
            count,
        },
        PoolNotice::Gate(GateEvent::PoolReady { nodes }) => WatchEvent::PoolReady { nodes },
        PoolNotice::Gate(
            GateEvent::ReadinessLost { node } | GateEvent::RequiredNodeLost { node, .. },
        ) => WatchEvent::ReadinessLost { node },
        // A watch runs no run: session messages and closes change only the gate, and
        // a run's growth is the orchestrator's business.
        PoolNotice::Message(..)
        | PoolNotice::SessionClosed(_)
        | PoolNotice::Gate(GateEvent::CapacityGrew { .. }) => return None,
    })
}
