//! The edge plane's executor (a driver): carries out every [`PlaneCommand`] with real IO —
//! ring mapping in the arena, the ring's local user (a node's worker, the orchestrator's
//! token endpoints, behind [`RingUser`]), the network pumps, the receive rendezvous and one
//! cache of edge connections — and hands every outcome back to the [`EdgePlane`]. It
//! decides nothing: which edge is ready, stopped or failed, and when a lease goes back, is
//! the plane's business. The node's stage host and the orchestrator both use it.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use iroh::endpoint::Connection;
use iroh::{Endpoint, EndpointId};

use super::plane::{EdgePlane, PlaneCommand};
use crate::arena::Arena;
use crate::arena::memfd::ArenaRegion;
use crate::events::Direction;
use crate::net::edge::{EdgeRouter, PumpEnd, PumpHandle, PumpStats, spawn_recv, spawn_send};
use crate::net::endpoint::EDGE_ALPN;
use crate::ring::{MappedRing, RingDrain, RingFeeder};
use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::{Component, RingFault, StreamFault};
use crate::wire::{EdgeId, ObjectSpec, Peer, RingId, RingLayout};

/// A ring in the arena, shared by the local user and the pump.
pub type Ring = Arc<MappedRing<ArenaRegion>>;

/// A wake-up the pump gives the ring's local user (after it freed space or committed
/// bytes).
pub type Hint = Box<dyn FnMut() + Send + 'static>;

/// Why a ring could not be attached, and who found out.
pub type AttachFault = (RingFault, Component);

/// The local user of the rings: whoever produces into egress rings and consumes from
/// ingress rings on this host.
pub trait RingUser {
    /// Attaches to a freshly initialized ring. `Ok(true)`: it holds the ring now;
    /// `Ok(false)`: it will report that it does (the worker's `RingInstalled`).
    fn attach(
        &mut self,
        edge_id: EdgeId,
        direction: Direction,
        layout: RingLayout,
        object: ObjectSpec,
        ring: Ring,
    ) -> impl std::future::Future<Output = Result<bool, AttachFault>>;

    /// Lets go of a ring. `Some(evidence)` when quiet at once; otherwise the evidence comes
    /// later from whoever observes it.
    fn detach(&mut self, ring_id: RingId) -> Option<WorkerQuiet>;

    /// What a send pump calls after it freed space in `ring_id` (egress).
    fn drained_hint(&self, ring_id: RingId) -> Hint;

    /// What a receive pump calls after it committed bytes into `ring_id` (ingress).
    fn filled_hint(&self, ring_id: RingId) -> Hint;

    /// The pump of `ring_id` started; `wake` wakes it. A user that wakes pumps itself (the
    /// worker's doorbell) keeps it until the ring is detached; by default the executor's
    /// [`PlaneExecutor::wake_ring`] serves.
    fn pump_started(&mut self, _ring_id: RingId, _wake: Arc<tokio::sync::Notify>) {}
}

/// What a pump reports to its driver, to be handed back with [`PlaneExecutor::notice`].
#[derive(Debug)]
pub enum PumpNotice {
    /// The send stream is open.
    Ready,
    /// The pump ended.
    Ended(PumpEnd),
}

type Notices = Arc<dyn Fn(EdgeId, PumpNotice) + Send + Sync>;

/// The executor. See the module docs.
pub struct PlaneExecutor {
    endpoint: Endpoint,
    router: EdgeRouter,
    arena: Arc<Arena>,
    rings: HashMap<RingId, (EdgeId, Ring)>,
    edge_rings: HashMap<EdgeId, RingId>,
    pumps: HashMap<EdgeId, PumpHandle>,
    conns: Arc<Mutex<HashMap<EndpointId, Connection>>>,
    notices: Notices,
}

impl PlaneExecutor {
    /// An executor over `arena`, dialing and accepting edge streams on `endpoint` (whose
    /// incoming edge connections `router` serves); pump notices go to `notices`, to be
    /// handed back with [`PlaneExecutor::notice`].
    pub fn new(
        endpoint: Endpoint,
        router: EdgeRouter,
        arena: Arc<Arena>,
        notices: impl Fn(EdgeId, PumpNotice) + Send + Sync + 'static,
    ) -> PlaneExecutor {
        PlaneExecutor {
            endpoint,
            router,
            arena,
            rings: HashMap::new(),
            edge_rings: HashMap::new(),
            pumps: HashMap::new(),
            conns: Arc::default(),
            notices: Arc::new(notices),
        }
    }

    /// Executes every command the plane has (and those its outcomes lead to); returns
    /// whether there was any.
    pub async fn drive<U: RingUser>(&mut self, plane: &mut EdgePlane, user: &mut U) -> bool {
        let mut any = false;
        while let Some(cmd) = plane.poll_command() {
            any = true;
            self.execute(cmd, plane, user).await;
        }
        any
    }

    async fn execute<U: RingUser>(
        &mut self,
        cmd: PlaneCommand,
        plane: &mut EdgePlane,
        user: &mut U,
    ) {
        match cmd {
            PlaneCommand::InstallRing { edge_id, direction, layout, object } => {
                let ring = self
                    .arena
                    .region(&layout)
                    .ok()
                    .and_then(|region| MappedRing::init(region, &layout).ok())
                    .map(Arc::new);
                let Some(ring) = ring else {
                    plane.ring_fault(
                        layout.ring_id,
                        RingFault::LayoutInvalid,
                        Component::ArenaManager,
                    );
                    return;
                };
                self.rings.insert(layout.ring_id, (edge_id, Arc::clone(&ring)));
                self.edge_rings.insert(edge_id, layout.ring_id);
                match user.attach(edge_id, direction, layout, object, ring).await {
                    Ok(true) => plane.ring_installed(layout.ring_id),
                    Ok(false) => {}
                    Err((reason, component)) => plane.ring_fault(layout.ring_id, reason, component),
                }
            }
            PlaneCommand::StartSend { run_id, edge_id, consumer, ring_id } => {
                let Some((_, ring)) = self.rings.get(&ring_id) else { return };
                let drain = RingDrain::new(ring_id, Arc::clone(ring));
                let (endpoint, conns) = (self.endpoint.clone(), Arc::clone(&self.conns));
                let paths = self.router.paths().clone();
                let (ready, ended) = (Arc::clone(&self.notices), Arc::clone(&self.notices));
                let pump = spawn_send(
                    run_id,
                    edge_id,
                    drain,
                    async move {
                        let conn = connect(&endpoint, &conns, &consumer).await?;
                        paths.track(&conn);
                        Ok(conn)
                    },
                    user.drained_hint(ring_id),
                    move || ready(edge_id, PumpNotice::Ready),
                    move |end| ended(edge_id, PumpNotice::Ended(end)),
                );
                user.pump_started(ring_id, Arc::clone(&pump.hint));
                self.pumps.insert(edge_id, pump);
            }
            PlaneCommand::StartRecv { run_id, edge_id, producer, ring_id } => {
                let Some((_, ring)) = self.rings.get(&ring_id) else { return };
                let Some(peer) =
                    producer.endpoint_id.as_deref().and_then(|e| EndpointId::from_str(e).ok())
                else {
                    plane.stream_fault(edge_id, StreamFault::UnauthorizedPeer, Component::RxEdge);
                    return;
                };
                let feeder = RingFeeder::new(ring_id, Arc::clone(ring));
                self.router.expect(run_id, edge_id, peer);
                let ended = Arc::clone(&self.notices);
                let pump = spawn_recv(
                    self.router.stream_for(edge_id),
                    feeder,
                    user.filled_hint(ring_id),
                    move |end| ended(edge_id, PumpNotice::Ended(end)),
                );
                user.pump_started(ring_id, Arc::clone(&pump.hint));
                self.pumps.insert(edge_id, pump);
                // The rendezvous is registered: the stream is routed whenever it arrives.
                plane.pump_ready(edge_id);
            }
            PlaneCommand::StopPump { edge_id } => {
                if let Some(p) = self.pumps.get(&edge_id) {
                    p.stop.notify_one();
                }
            }
            PlaneCommand::DetachRing { ring_id } => {
                if let Some(evidence) = user.detach(ring_id) {
                    plane.local_quiet(evidence);
                }
            }
            PlaneCommand::ForgetRing { edge_id, ring_id } => {
                self.rings.remove(&ring_id);
                self.edge_rings.remove(&edge_id);
                self.router.forget(edge_id);
            }
        }
    }

    /// Hands a pump's notice to the plane; returns the ended pump's statistics.
    pub fn notice(
        &mut self,
        plane: &mut EdgePlane,
        edge_id: EdgeId,
        notice: PumpNotice,
    ) -> Option<PumpStats> {
        match notice {
            PumpNotice::Ready => {
                plane.pump_ready(edge_id);
                None
            }
            PumpNotice::Ended(end) => {
                self.pumps.remove(&edge_id);
                let (evidence, fault, stats) = match end {
                    PumpEnd::Stopped(evidence, stats) => (evidence, None, stats),
                    PumpEnd::Faulted(reason, evidence, stats) => (evidence, Some(reason), stats),
                };
                plane.pump_ended(edge_id, evidence, fault);
                Some(stats)
            }
        }
    }

    /// Wakes the pump of `edge_id` (its ring's local user committed or freed bytes).
    pub fn wake(&self, edge_id: EdgeId) {
        if let Some(p) = self.pumps.get(&edge_id) {
            p.hint.notify_one();
        }
    }

    /// Wakes the pump of the edge `ring_id` serves.
    pub fn wake_ring(&self, ring_id: RingId) {
        if let Some((edge, _)) = self.rings.get(&ring_id) {
            self.wake(*edge);
        }
    }

    /// The pumps stopped from now on skip the wait for their peers (the run faulted).
    pub fn abort_pumps(&self) {
        for p in self.pumps.values() {
            p.abort.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Stops the pump of the edge `ring_id` serves (its local user is gone).
    pub fn stop_ring_pump(&self, ring_id: RingId) {
        if let Some((edge, _)) = self.rings.get(&ring_id)
            && let Some(p) = self.pumps.get(edge)
        {
            p.stop.notify_one();
        }
    }

    /// Forgets the receive routing of every edge (a stage stopped).
    pub fn forget_routes(&self, edges: impl IntoIterator<Item = EdgeId>) {
        for e in edges {
            self.router.forget(e);
        }
    }

    /// Drops the cached edge connections (a stage stopped): the next run dials its peers
    /// afresh, so a peer that restarted with the same key and address since is never
    /// sent to over a connection to its dead predecessor (which would look open until
    /// its idle timeout).
    pub fn forget_connections(&self) {
        self.conns.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// The cached connection to `peer` on the edge ALPN, or a new one.
async fn connect(
    endpoint: &Endpoint,
    conns: &Mutex<HashMap<EndpointId, Connection>>,
    peer: &Peer,
) -> Result<Connection, StreamFault> {
    let addr = crate::net::endpoint::peer_addr(peer).ok_or(StreamFault::ConnectFailed)?;
    let id = addr.id;
    let cached = conns.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned();
    if let Some(c) = cached
        && c.close_reason().is_none()
    {
        return Ok(c);
    }
    let conn = endpoint.connect(addr, EDGE_ALPN).await.map_err(|_| StreamFault::ConnectFailed)?;
    conns.lock().unwrap_or_else(|e| e.into_inner()).insert(id, conn.clone());
    Ok(conn)
}
