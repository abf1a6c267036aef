//! The orchestrator's pool phase, one component for `orchestrate pool` and `pool watch`:
//! a control session to every node of the pool (retried while nodes boot) and the
//! [`PoolGate`] fed with what they and membership report. Its driver asks for the next
//! input with [`PoolPhase::next`] and gets back what it changed as [`PoolNotice`]s; what to
//! do with them (print them, plan a run, fault one) is the driver's business.
//!
//! It takes part in one of two [`Role`]s. The orchestrator's sessions carry runs (each
//! `Hello` names the pool's SWIM roster) and it runs its own SWIM participant (announcing
//! to every node that names its SWIM address, so nodes need no seeds of their own: a
//! relay-only node has none it could reach); it keeps running during a run, and the gate
//! reports a required node it lost. An observer (`pool watch`) holds its own key, opens
//! read-only sessions with the orchestrator's delegation and joins no membership: it sees
//! the pool as the lowest-numbered node that answers sees it (each node sends its view), so
//! it can never disturb a run.
#![allow(clippy::disallowed_methods)] // a driver: it owns the clock

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::sessions::{self, SessionEvent};
use crate::control::ControlMessage;
use crate::membership::auth::RejectRecord;
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::membership::swim::{self, MembershipEvent, RosterHandle, SwimAddr, SwimIdentity};
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
        /// Where its stage computes, if it reported it.
        device: Option<String>,
        /// Its prompt-cache budget, if its operator set one.
        prompt_cache_bytes: Option<u64>,
        /// What it measured of its speed at boot.
        speed: Option<crate::wire::NodeSpeed>,
        /// The round trip of its control session, microseconds.
        rtt_us: Option<u64>,
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

/// How the pool phase takes part in the pool.
#[derive(Debug, Clone)]
pub enum Role {
    /// The orchestrator (its endpoint's key is the pool's orchestrator key): sessions that
    /// carry runs, and its own SWIM participant bound at `swim.0` (advertising `swim.1`, or
    /// the route toward the pool's nodes, when that is an unspecified address).
    Orchestrator {
        /// SWIM bind address and the address to advertise instead of an unspecified one.
        swim: (SocketAddr, Option<std::net::IpAddr>),
        /// Seed of SWIM's random choices.
        seed_rng: u64,
        /// The home relay when the orchestrator exposes no port (`--relay-only`): it is
        /// addressed there, and its SWIM datagrams come through the carrier.
        relayed: Option<String>,
        /// The longest round trip between members SWIM's timings allow for.
        max_rtt: Duration,
    },
    /// A read-only observer: its endpoint holds its own key, and `delegation` is the
    /// orchestrator's signature over it (`net::identity::delegate_observer`).
    Observer {
        /// The orchestrator's delegation.
        delegation: String,
        /// The orchestrator's endpoint id (the pool's orchestrator member).
        orchestrator: String,
    },
}

/// The membership state an observer last gave the gate for a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Up,
    Suspect,
    Down,
}

/// A node's membership view: members up, members suspect.
type View = (BTreeSet<NodeId>, BTreeSet<NodeId>);

/// The orchestrator's own SWIM participant: running from the start, alone until a node
/// names its SWIM address (it announces to each).
struct OwnSwim {
    swim: swim::Swim,
    events: mpsc::UnboundedReceiver<MembershipEvent>,
    /// Carries the datagrams of members reached through a relay; the endpoint's accept
    /// loop hands it their connections ([`PoolPhase::swim_carrier`]).
    carrier: crate::membership::carrier::Carrier,
}

/// The pool phase. See the module docs.
pub struct PoolPhase {
    nodes: Vec<NodeId>,
    gate: PoolGate,
    roster: RosterHandle,
    sessions: HashMap<NodeId, mpsc::UnboundedSender<ControlMessage>>,
    refused: BTreeMap<NodeId, String>,
    session_rx: mpsc::UnboundedReceiver<(NodeId, SessionEvent)>,
    /// The sessions' tasks, ended with the pool phase.
    _session_tasks: sessions::SessionTasks,
    /// The orchestrator's SWIM participant (`None` for an observer).
    swim: Option<OwnSwim>,
    /// An observer's latest view from each node with a session, `(up, suspect)`.
    views: BTreeMap<NodeId, View>,
    /// What an observer last gave the gate for each node.
    seen: BTreeMap<NodeId, Seen>,
}

impl PoolPhase {
    /// Opens a session to every node of `pool` on `endpoint` (whose key is `key`) in
    /// `role`; `window` is the gate's convergence window.
    pub async fn start(
        endpoint: &Endpoint,
        key: &NodeKey,
        pool: &Pool,
        role: Role,
        window: Duration,
    ) -> Result<PoolPhase, String> {
        let me = pool.orchestrator.node_id;
        let nodes: Vec<NodeId> = pool.nodes.iter().map(|n| n.node_id).collect();
        // The pool's nodes and its orchestrator (for an observer: the one its delegation
        // speaks for, the roster the nodes may take if nobody named one yet).
        let orchestrator = match &role {
            Role::Orchestrator { .. } => key.endpoint_id_hex(),
            Role::Observer { orchestrator, .. } => orchestrator.clone(),
        };
        let members = swim::pool_members(pool, &orchestrator);
        let roster = RosterHandle::new(swim::roster_of(&members));
        let (hello, swim) = match role {
            Role::Orchestrator { swim: (swim_bind, advertise), seed_rng, relayed, max_rtt } => {
                let hello = ControlMessage::Hello { orchestrator: me, members: members.clone() };
                let socket = UdpSocket::bind(swim_bind)
                    .await
                    .map_err(|e| format!("SWIM bind {swim_bind}: {e}"))?;
                let bound = socket.local_addr().map_err(|e| format!("SWIM: {e}"))?;
                let toward: Vec<SocketAddr> =
                    pool.nodes.iter().flat_map(|n| n.addrs.clone()).collect();
                let addr = match relayed {
                    Some(relay) => SwimAddr::Relayed { endpoint: key.endpoint_id_hex(), relay },
                    None => crate::net::advertise::advertised(bound, advertise, &toward)
                        .map(SwimAddr::Udp)
                        .map_err(|e| format!("SWIM: {e}"))?,
                };
                let config = swim::SwimConfig {
                    identity: SwimIdentity {
                        node_id: me,
                        addr,
                        endpoint_id: key.endpoint_id_hex(),
                        bump: 0,
                    },
                    key: key.secret().clone(),
                    roster: roster.clone(),
                    seeds: Vec::new(),
                    cluster_size: nodes.len() as u32 + 1,
                    max_rtt,
                    seed_rng,
                };
                let (carrier, link) =
                    crate::membership::carrier::start(endpoint.clone(), roster.clone());
                let (swim, events) = swim::spawn(config, socket, Some(link))
                    .map_err(|e| format!("SWIM: cannot start: {e}"))?;
                let own = OwnSwim { swim, events, carrier };
                (hello, Some(own))
            }
            Role::Observer { delegation, .. } => {
                (ControlMessage::Observe { delegation, members }, None)
            }
        };
        let (session_rx, session_tasks) = sessions::open_all(endpoint, &pool.nodes, &hello)?;
        Ok(PoolPhase {
            gate: PoolGate::new(Instant::now(), nodes.clone(), window),
            nodes,
            roster,
            sessions: HashMap::new(),
            refused: BTreeMap::new(),
            session_rx,
            _session_tasks: session_tasks,
            swim,
            views: BTreeMap::new(),
            seen: BTreeMap::new(),
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
                    Some(own) => own.events.recv().await,
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
            SessionEvent::Available { hello, tx, rtt_us } => {
                let ControlMessage::NodeAvailable {
                    node_id,
                    endpoint_id,
                    addrs,
                    swim_addr,
                    memory_bytes,
                    arena_bytes,
                    device,
                    prompt_cache_bytes,
                    speed,
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
                    device,
                    prompt_cache_bytes,
                    speed,
                    rtt_us,
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
                if self.views.remove(&node).is_some() {
                    self.apply_views(None, out);
                }
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
            SessionEvent::Message(ControlMessage::MemberView { up, suspect })
                if self.swim.is_none() =>
            {
                let view = (up.into_iter().collect(), suspect.into_iter().collect());
                let before = self.views.insert(node, view).map(|b| (node, b));
                self.apply_views(before, out);
            }
            SessionEvent::Message(msg) => out.push(PoolNotice::Message(node, msg)),
        }
    }

    /// An observer's membership: the view of the lowest-numbered node with a session, as
    /// changes to what the gate was last given. A member missing from that view is down
    /// only if it was in the same node's previous view (`before`: the node that just sent
    /// a new view, and its previous one): a node whose view is new (its session just
    /// opened, or the lower one's ended) may not have heard of every member yet.
    fn apply_views(&mut self, before: Option<(NodeId, View)>, out: &mut Vec<PoolNotice>) {
        let Some((&reporter, (up, suspect))) = self.views.iter().next() else { return };
        let known = before.filter(|(from, _)| *from == reporter).map(|(_, (u, s))| &u | &s);
        let now = Instant::now();
        for &node in &self.nodes {
            let state = if suspect.contains(&node) {
                Seen::Suspect
            } else if up.contains(&node) {
                Seen::Up
            } else if known.as_ref().is_some_and(|k| k.contains(&node)) {
                Seen::Down
            } else {
                continue;
            };
            let before = self.seen.get(&node).copied();
            if before == Some(state) {
                continue;
            }
            self.seen.insert(node, state);
            match state {
                Seen::Up => {
                    self.gate.member_up(now, node);
                    out.push(PoolNotice::MemberUp(node));
                }
                Seen::Suspect => {
                    self.gate.member_suspect(now, node);
                    out.push(PoolNotice::MemberSuspect(node));
                }
                Seen::Down => {
                    self.gate.member_down(now, node);
                    out.push(PoolNotice::MemberDown(node));
                }
            }
        }
    }

    /// The orchestrator announces itself to every node that names its SWIM address (the
    /// participant keeps announcing to one that is not a member).
    fn join_swim(&mut self, seed: Option<&str>) {
        let Some(seed) = seed.and_then(|s| s.parse::<SwimAddr>().ok()) else { return };
        if let Some(own) = self.swim.as_ref() {
            own.swim.join(seed);
        }
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

    /// The carrier of relayed members' SWIM datagrams (an observer has none): the
    /// endpoint's accept loop hands it their connections.
    pub fn swim_carrier(&self) -> Option<crate::membership::carrier::Carrier> {
        self.swim.as_ref().map(|own| own.carrier.clone())
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
