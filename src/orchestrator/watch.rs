//! `swactor pool watch`: the orchestrator side of pool readiness. It opens a control
//! session to every node of the pool (nodes accept only the orchestrator endpoint they were
//! started with), learns each node's availability and SWIM address, joins the SWIM
//! membership, and feeds both into the [`PoolGate`].
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::control::ControlMessage;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::membership::swim::{self, MembershipEvent, SwimIdentity};
use crate::net::endpoint::bind;
use crate::net::identity::NodeKey;
use crate::orchestrator::sessions::{self, SessionEvent};
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
    /// SWIM listen address.
    pub swim: SocketAddr,
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
    let key = NodeKey::load_or_create(&config.key).map_err(|e| WatchError::Setup(e.to_string()))?;
    let endpoint = bind(&key, config.listen).await.map_err(|e| WatchError::Setup(e.to_string()))?;
    let result =
        watch_on(&config, until_ready, &mut report, shutdown, &key, &endpoint, start).await;
    endpoint.close().await;
    result
}

async fn watch_on(
    config: &WatchConfig,
    until_ready: bool,
    report: &mut impl FnMut(&WatchEvent) -> ControlFlow<()>,
    shutdown: impl std::future::Future<Output = ()>,
    key: &NodeKey,
    endpoint: &iroh::Endpoint,
    start: Instant,
) -> Result<(), WatchError> {
    let candidates: Vec<NodeId> = config.pool.nodes.iter().map(|n| n.node_id).collect();
    let mut gate = PoolGate::new(Instant::now(), candidates, config.window);
    // Nodes may boot after the watch starts: sessions are retried until they open.
    let members = swim::pool_members(&config.pool, &key.endpoint_id_hex());
    let roster = swim::RosterHandle::new(swim::roster_of(&members));
    let mut session_rx = sessions::open_all(
        endpoint,
        &config.pool.nodes,
        config.pool.orchestrator.node_id,
        &members,
    )
    .map_err(WatchError::Setup)?;
    // Each open session's queue is kept: dropping it would end the session.
    let mut sessions: HashMap<NodeId, mpsc::UnboundedSender<ControlMessage>> = HashMap::new();
    let mut refused: BTreeMap<NodeId, String> = BTreeMap::new();
    let mut ever_ready = false;
    let give_up_at = config.pool_timeout.map(|t| start + t);
    // Every report may end the watch (its reader went away): checked once per turn.
    let stop = std::cell::Cell::new(false);
    let mut report = |ev: &WatchEvent| {
        if report(ev).is_break() {
            stop.set(true);
        }
    };
    let socket = tokio::net::UdpSocket::bind(config.swim)
        .await
        .map_err(|e| WatchError::Setup(format!("SWIM bind {}: {e}", config.swim)))?;
    let swim_addr = socket.local_addr().map_err(|e| WatchError::Setup(format!("SWIM: {e}")))?;
    let mut socket = Some(socket);
    let mut swim: Option<(swim::Swim, mpsc::UnboundedReceiver<MembershipEvent>)> = None;
    tokio::pin!(shutdown);
    loop {
        while let Some(ev) = gate.poll_event() {
            let out = match ev {
                GateEvent::PoolReady { nodes } => WatchEvent::PoolReady { nodes },
                GateEvent::ReadinessLost { node } | GateEvent::RequiredNodeLost { node, .. } => {
                    WatchEvent::ReadinessLost { node }
                }
            };
            report(&out);
            if matches!(out, WatchEvent::PoolReady { .. }) {
                ever_ready = true;
                if until_ready {
                    return Ok(());
                }
            }
        }
        if stop.get() {
            return Ok(());
        }
        if refused.len() == config.pool.nodes.len() {
            return Err(WatchError::Refused(refused));
        }
        let deadline = gate.poll_timeout();
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = async { match give_up_at { Some(t) if !ever_ready => tokio::time::sleep_until(t.into()).await, _ => std::future::pending().await } } => {
                let missing: Vec<String> = config.pool.nodes.iter()
                    .filter(|n| !sessions.contains_key(&n.node_id))
                    .map(|n| match refused.get(&n.node_id) {
                        Some(r) => format!("node {} refused the control session ({r})", n.node_id),
                        None => format!("node {} did not answer", n.node_id),
                    })
                    .collect();
                let detail = if missing.is_empty() { "membership did not converge".to_string() } else { missing.join("; ") };
                return Err(WatchError::NotReady(config.pool_timeout.unwrap_or_default(), detail));
            }
            Some((node_id, event)) = session_rx.recv() => match event {
                SessionEvent::Refused(reason) => {
                    if let std::collections::btree_map::Entry::Vacant(e) = refused.entry(node_id) {
                        report(&WatchEvent::NodeRefused { node_id, reason: reason.clone() });
                        e.insert(reason);
                    }
                }
                SessionEvent::Available { hello, tx } => {
                    let ControlMessage::NodeAvailable { node_id: said, endpoint_id, addrs, swim_addr: seed } = hello else { continue };
                    if said != node_id {
                        eprintln!("swactor: the node at node {node_id}'s address says it is node {said}; ignored");
                        continue;
                    }
                    refused.remove(&node_id);
                    sessions.insert(node_id, tx);
                    report(&WatchEvent::NodeAvailable { node_id, endpoint_id: endpoint_id.clone(), swim_addr: seed.clone() });
                    gate.node_available(Instant::now(), node_id, DataPlaneIdentity { endpoint_id, addrs });
                    if let (Some(seed), Some(sock)) = (seed.and_then(|s| s.parse::<SocketAddr>().ok()), socket.take()) {
                        let identity = SwimIdentity {
                            node_id: config.pool.orchestrator.node_id,
                            addr: swim_addr,
                            endpoint_id: key.endpoint_id_hex(),
                            bump: 0,
                        };
                        let n = config.pool.nodes.len() as u32 + 1;
                        let swim_config = swim::SwimConfig {
                            identity,
                            key: key.secret().clone(),
                            roster: roster.clone(),
                            seeds: vec![seed],
                            cluster_size: n,
                            seed_rng: 7,
                        };
                        swim = Some(swim::spawn(swim_config, sock));
                    }
                }
                SessionEvent::Message(ControlMessage::NodeFaulted { node_id: said, reason }) if said == node_id => {
                    report(&WatchEvent::NodeFaulted { node_id, reason });
                    gate.node_faulted(Instant::now(), node_id, reason);
                }
                // The session ended (SWIM reports whether the node is gone) or carried
                // run work, which a watch has none of.
                SessionEvent::Closed | SessionEvent::Message(_) => {}
            },
            Some(ev) = async { match swim.as_mut() { Some((_, rx)) => rx.recv().await, None => std::future::pending().await } } => {
                let now = Instant::now();
                match ev {
                    MembershipEvent::Up(id) => {
                        report(&WatchEvent::MemberUp { node_id: id.node_id });
                        gate.member_up(now, id.node_id);
                    }
                    MembershipEvent::Suspect(id) => {
                        report(&WatchEvent::MemberSuspect { node_id: id.node_id });
                        gate.member_suspect(now, id.node_id);
                    }
                    MembershipEvent::Down(id) => {
                        report(&WatchEvent::MemberDown { node_id: id.node_id });
                        gate.member_down(now, id.node_id);
                    }
                    MembershipEvent::Rejected(r) => {
                        let count = roster.rejects().by_reason.get(&r.reason).copied().unwrap_or(0);
                        report(&WatchEvent::MembershipRejected {
                            reason: r.reason.as_str().into(),
                            from: r.from,
                            signer: r.signer,
                            count,
                        });
                    }
                }
            }
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await, None => std::future::pending().await } } => {
                gate.handle_timeout(Instant::now());
            }
        }
    }
}
