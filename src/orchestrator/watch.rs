//! `swactor pool watch`: the orchestrator side of pool readiness. It opens a control
//! session to every node of the pool (nodes accept only the orchestrator endpoint they were
//! started with), learns each node's availability and SWIM address, joins the SWIM
//! membership, and feeds both into the [`PoolGate`].
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, Instant};

use iroh::{EndpointAddr, EndpointId};
use tokio::sync::mpsc;

use crate::control::{self, ControlMessage, FrameDecoder};
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::membership::swim::{self, MembershipEvent, SwimIdentity};
use crate::net::endpoint::{CTL_ALPN, bind};
use crate::net::identity::NodeKey;
use crate::planner::Pool;
use crate::wire::NodeId;

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
    /// SWIM sees the member alive.
    MemberUp {
        /// The node.
        node_id: NodeId,
    },
    /// SWIM declared the member down.
    MemberDown {
        /// The node.
        node_id: NodeId,
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
}

/// Why a watch could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WatchError(String);

/// Runs the gate until `shutdown` resolves, or until the pool is ready when `until_ready`.
pub async fn watch(
    config: WatchConfig,
    until_ready: bool,
    mut report: impl FnMut(&WatchEvent),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WatchError> {
    let key = NodeKey::load_or_create(&config.key).map_err(|e| WatchError(e.to_string()))?;
    let endpoint = bind(&key, config.listen).await.map_err(|e| WatchError(e.to_string()))?;
    let candidates: Vec<NodeId> = config.pool.nodes.iter().map(|n| n.node_id).collect();
    let mut gate = PoolGate::new(Instant::now(), candidates, config.window);
    let (avail_tx, mut avail_rx) = mpsc::unbounded_channel::<(NodeId, ControlMessage)>();
    let members = swim::pool_members(&config.pool, &key.endpoint_id_hex());
    let roster = swim::RosterHandle::new(swim::roster_of(&members));
    for node in &config.pool.nodes {
        let id = EndpointId::from_str(&node.endpoint_id)
            .map_err(|e| WatchError(format!("node {}: {e}", node.node_id)))?;
        let addr = node.addrs.iter().fold(EndpointAddr::new(id), |a, s| a.with_ip_addr(*s));
        let (endpoint, tx, node_id) = (endpoint.clone(), avail_tx.clone(), node.node_id);
        let hello = ControlMessage::Hello {
            orchestrator: config.pool.orchestrator.node_id,
            members: members.clone(),
        };
        tokio::spawn(async move {
            // Nodes may boot after the watch starts: retry until the session opens.
            loop {
                if let Ok(conn) = endpoint.connect(addr.clone(), CTL_ALPN).await
                    && let Ok((mut send, mut recv)) = conn.open_bi().await
                    && control::write_message(&mut send, &hello).await.is_ok()
                {
                    let mut decoder = FrameDecoder::new();
                    if let Some(Ok(msg)) = control::read_message(&mut recv, &mut decoder).await {
                        let _ = tx.send((node_id, msg));
                        // Keep the session open while the node lives.
                        let _ = conn.closed().await;
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        });
    }
    drop(avail_tx);
    let socket =
        tokio::net::UdpSocket::bind(config.swim).await.map_err(|e| WatchError(e.to_string()))?;
    let swim_addr = socket.local_addr().map_err(|e| WatchError(e.to_string()))?;
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
            if until_ready && matches!(out, WatchEvent::PoolReady { .. }) {
                endpoint.close().await;
                return Ok(());
            }
        }
        let deadline = gate.poll_timeout();
        tokio::select! {
            _ = &mut shutdown => {
                endpoint.close().await;
                return Ok(());
            }
            Some((node_id, msg)) = avail_rx.recv() => {
                if let ControlMessage::NodeAvailable { node_id: said, endpoint_id, addrs, swim_addr: seed } = msg {
                    if said != node_id {
                        eprintln!("swactor: the node at node {node_id}'s address says it is node {said}; ignored");
                        continue;
                    }
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
            }
            Some(ev) = async { match swim.as_mut() { Some((_, rx)) => rx.recv().await, None => std::future::pending().await } } => {
                let now = Instant::now();
                match ev {
                    MembershipEvent::Up(id) => {
                        report(&WatchEvent::MemberUp { node_id: id.node_id });
                        gate.member_up(now, id.node_id);
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
