//! The orchestrator's pool phase, one component for `orchestrate pool` and `pool watch`:
//! a control session to every node of the pool (retried while nodes boot; each `Hello`
//! names the pool's SWIM roster), the orchestrator's own SWIM participant (joined through
//! the first node that answers), and the [`PoolGate`] fed with both. Its driver asks for
//! the next input with [`PoolPhase::next`] and gets back what it changed as
//! [`PoolNotice`]s; what to do with them (print them, plan a run, fault one) is the
//! driver's business. It keeps running during a run: sessions carry the run's messages,
//! and the gate reports a required node it lost.
#![allow(clippy::disallowed_methods)] // a driver: it owns the clock

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::sessions::{self, SessionEvent};
use crate::control::ControlMessage;
use crate::membership::auth::RejectRecord;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::membership::swim::{self, MembershipEvent, RosterHandle, SwimIdentity};
use crate::net::identity::NodeKey;
use crate::planner::Pool;
use crate::wire::NodeId;

/// What one input changed.
#[derive(Debug, Clone, PartialEq)]
pub enum PoolNotice {
    /// A node answered its control session with its availability.
    NodeAvailable {
        /// The node.
        node_id: NodeId,
        /// Its endpoint id.
        endpoint_id: String,
        /// Its data-plane addresses.
        addrs: Vec<String>,
        /// Its SWIM address.
        swim_addr: Option<String>,
        /// Memory it can give a stage, if it reported it.
        memory_bytes: Option<u64>,
        /// Its arena's capacity, if it reported it.
        arena_bytes: Option<u64>,
    },
    /// A node refused the control session (reported once per node until it answers).
    NodeRefused {
        /// The node.
        node_id: NodeId,
        /// The reason it gave.
        reason: String,
    },
    /// SWIM sees the member alive.
    MemberUp(NodeId),
    /// SWIM suspects the member (it missed its probes): not ready until it refutes.
    MemberSuspect(NodeId),
    /// The node reported a fault over its session (its worker failed for good).
    NodeFaulted {
        /// The node.
        node_id: NodeId,
        /// Why.
        reason: crate::wire::reason::BootFault,
    },
    /// SWIM declared the member down.
    MemberDown(NodeId),
    /// A SWIM datagram was refused (with the count of its reason so far).
    Rejected(RejectRecord, u64),
    /// The gate decided something (ready, readiness lost, a required node lost).
    Gate(GateEvent),
    /// A node sent a message on its session.
    Message(NodeId, ControlMessage),
    /// A node's session ended.
    SessionClosed(NodeId),
}

/// The pool phase. See the module docs.
pub struct PoolPhase {
    me: NodeId,
    nodes: Vec<NodeId>,
    key: NodeKey,
    gate: PoolGate,
    roster: RosterHandle,
    sessions: HashMap<NodeId, mpsc::UnboundedSender<ControlMessage>>,
    refused: BTreeMap<NodeId, String>,
    session_rx: mpsc::UnboundedReceiver<(NodeId, SessionEvent)>,
    socket: Option<UdpSocket>,
    swim_addr: SocketAddr,
    swim: Option<(swim::Swim, mpsc::UnboundedReceiver<MembershipEvent>)>,
    seed_rng: u64,
}

impl PoolPhase {
    /// Opens a session to every node of `pool` on `endpoint` and binds the SWIM socket at
    /// `swim.0` (advertising `swim.1`, or the route toward the pool's nodes, when that is an
    /// unspecified address); `window` is the gate's convergence window.
    pub async fn start(
        endpoint: &Endpoint,
        key: &NodeKey,
        pool: &Pool,
        swim: (SocketAddr, Option<std::net::IpAddr>),
        window: Duration,
        seed_rng: u64,
    ) -> Result<PoolPhase, String> {
        let (swim_bind, advertise) = swim;
        let me = pool.orchestrator.node_id;
        let members = swim::pool_members(pool, &key.endpoint_id_hex());
        let roster = RosterHandle::new(swim::roster_of(&members));
        let session_rx = sessions::open_all(endpoint, &pool.nodes, me, &members)?;
        let socket =
            UdpSocket::bind(swim_bind).await.map_err(|e| format!("SWIM bind {swim_bind}: {e}"))?;
        let bound = socket.local_addr().map_err(|e| format!("SWIM: {e}"))?;
        let toward: Vec<SocketAddr> = pool.nodes.iter().flat_map(|n| n.addrs.clone()).collect();
        let swim_addr = crate::net::advertise::advertised(bound, advertise, &toward)
            .map_err(|e| format!("SWIM: {e}"))?;
        let nodes: Vec<NodeId> = pool.nodes.iter().map(|n| n.node_id).collect();
        Ok(PoolPhase {
            me,
            gate: PoolGate::new(Instant::now(), nodes.clone(), window),
            nodes,
            key: key.clone(),
            roster,
            sessions: HashMap::new(),
            refused: BTreeMap::new(),
            session_rx,
            socket: Some(socket),
            swim_addr,
            swim: None,
            seed_rng,
        })
    }

    /// Waits for the next input (a session event, a membership event, the gate's timer)
    /// and returns what it changed. Cancel-safe: an input is taken only when it is handled.
    pub async fn next(&mut self) -> Vec<PoolNotice> {
        let deadline = self.gate.poll_timeout();
        let mut out = Vec::new();
        tokio::select! {
            Some((node, event)) = self.session_rx.recv() => self.session(node, event, &mut out),
            Some(event) = async {
                match self.swim.as_mut() {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            } => self.member(event, &mut out),
            () = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            } => self.gate.handle_timeout(Instant::now()),
        }
        while let Some(ev) = self.gate.poll_event() {
            out.push(PoolNotice::Gate(ev));
        }
        out
    }

    fn session(&mut self, node: NodeId, event: SessionEvent, out: &mut Vec<PoolNotice>) {
        match event {
            SessionEvent::Available { hello, tx } => {
                let ControlMessage::NodeAvailable {
                    node_id,
                    endpoint_id,
                    addrs,
                    swim_addr,
                    memory_bytes,
                    arena_bytes,
                } = hello
                else {
                    return;
                };
                if node_id != node {
                    eprintln!(
                        "swactor: the node at node {node}'s address says it is node {node_id}; ignored"
                    );
                    return;
                }
                self.refused.remove(&node);
                self.sessions.insert(node, tx);
                let identity =
                    DataPlaneIdentity { endpoint_id: endpoint_id.clone(), addrs: addrs.clone() };
                self.gate.node_available(Instant::now(), node, identity);
                self.join_swim(swim_addr.as_deref());
                out.push(PoolNotice::NodeAvailable {
                    node_id,
                    endpoint_id,
                    addrs,
                    swim_addr,
                    memory_bytes,
                    arena_bytes,
                });
            }
            SessionEvent::Refused(reason) => {
                if let std::collections::btree_map::Entry::Vacant(e) = self.refused.entry(node) {
                    e.insert(reason.clone());
                    out.push(PoolNotice::NodeRefused { node_id: node, reason });
                }
            }
            SessionEvent::Closed => {
                self.sessions.remove(&node);
                // Without its session a node can be neither provisioned nor stopped: it is
                // unavailable until a new session opens (liveness stays SWIM's).
                self.gate.node_unavailable(Instant::now(), node);
                out.push(PoolNotice::SessionClosed(node));
            }
            SessionEvent::Message(ControlMessage::NodeFaulted { node_id, reason })
                if node_id == node =>
            {
                self.gate.node_faulted(Instant::now(), node, reason);
                out.push(PoolNotice::NodeFaulted { node_id, reason });
            }
            SessionEvent::Message(msg) => out.push(PoolNotice::Message(node, msg)),
        }
    }

    /// Joins SWIM through the first node that names its SWIM address.
    fn join_swim(&mut self, seed: Option<&str>) {
        let Some(seed) = seed.and_then(|s| s.parse::<SocketAddr>().ok()) else { return };
        let Some(socket) = self.socket.take() else { return };
        let config = swim::SwimConfig {
            identity: SwimIdentity {
                node_id: self.me,
                addr: self.swim_addr,
                endpoint_id: self.key.endpoint_id_hex(),
                bump: 0,
            },
            key: self.key.secret().clone(),
            roster: self.roster.clone(),
            seeds: vec![seed],
            cluster_size: self.nodes.len() as u32 + 1,
            seed_rng: self.seed_rng,
        };
        self.swim = Some(swim::spawn(config, socket));
    }

    fn member(&mut self, event: MembershipEvent, out: &mut Vec<PoolNotice>) {
        let now = Instant::now();
        match event {
            MembershipEvent::Up(id) => {
                self.gate.member_up(now, id.node_id);
                out.push(PoolNotice::MemberUp(id.node_id));
            }
            MembershipEvent::Suspect(id) => {
                self.gate.member_suspect(now, id.node_id);
                out.push(PoolNotice::MemberSuspect(id.node_id));
            }
            MembershipEvent::Down(id) => {
                self.gate.member_down(now, id.node_id);
                out.push(PoolNotice::MemberDown(id.node_id));
            }
            MembershipEvent::Rejected(r) => {
                let count = self.roster.rejects().by_reason.get(&r.reason).copied().unwrap_or(0);
                out.push(PoolNotice::Rejected(r, count));
            }
        }
    }

    /// The gate (to start provisioning once it is ready).
    pub fn gate(&mut self) -> &mut PoolGate {
        &mut self.gate
    }

    /// Sends `msg` on `node`'s session; `false` when the node has none.
    pub fn send(&self, node: NodeId, msg: ControlMessage) -> bool {
        self.sessions.get(&node).is_some_and(|tx| tx.send(msg).is_ok())
    }

    /// The nodes that refused their session, and why.
    pub fn refused(&self) -> &BTreeMap<NodeId, String> {
        &self.refused
    }

    /// Whether every node of the pool refused its session.
    pub fn all_refused(&self) -> bool {
        self.refused.len() == self.nodes.len()
    }

    /// Why the pool is not ready: each node without a session and why, or that
    /// membership did not converge.
    pub fn missing(&self) -> String {
        let waiting: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| !self.sessions.contains_key(n))
            .map(|n| match self.refused.get(n) {
                Some(r) => format!("node {n} refused the control session ({r})"),
                None => format!("node {n} did not answer"),
            })
            .collect();
        if waiting.is_empty() {
            "membership did not converge".to_string()
        } else {
            waiting.join("; ")
        }
    }
}
