//! The edge plane (sans-IO): everything a node — or the orchestrator, for its token
//! endpoints — needs to turn provisioned edge ends into leased, installed, pumped rings and
//! take them down again, composed in one owner the way quinn-proto's `Endpoint` owns its
//! connections.
//!
//! It owns the [`ArenaManager`] and the [`EdgeEstablisher`], routes their commands and
//! events to each other (leases, cancellations and releases never leave the plane), keeps
//! the evidence of pumps that ended before their edge stopped, mints quiescence proofs
//! only from the evidence it is handed (a pump's own `PumpStopped`, the local user's
//! `WorkerQuiet`), and remembers which component detected each edge's first fault. Its
//! driver only carries out [`PlaneCommand`]s (map and initialize a ring, attach or detach
//! the ring's local user, start or stop a pump) and reports what happened.

use std::collections::{HashMap, VecDeque};

use crate::arena::{ArenaEvent, ArenaManager};
use crate::edge::establisher::{
    EdgeEnd, EdgeEstablisher, EdgeProvision, EstablishError, EstablisherCommand, EstablisherEvent,
};
use crate::events::Direction;
use crate::wire::evidence::{PumpStopped, WorkerQuiet};
use crate::wire::reason::{Component, FaultReason, RingFault, StreamFault};
use crate::wire::{EdgeId, ObjectSpec, Peer, RingId, RingLayout, RunId};

/// What the plane asks of its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaneCommand {
    /// Map the leased range, initialize a ring there and attach the ring's local user (the
    /// worker, or a token endpoint). Report `ring_installed` once the user holds it, or
    /// `ring_fault`.
    InstallRing {
        /// The edge.
        edge_id: EdgeId,
        /// Which end.
        direction: Direction,
        /// Where the ring lives.
        layout: RingLayout,
        /// Its objects.
        object: ObjectSpec,
    },
    /// Start the send pump (ring -> stream to `consumer`); report `pump_ready` once the
    /// stream is open, `pump_ended` when it ends.
    StartSend {
        /// The edge's run (its stream's preamble names it).
        run_id: RunId,
        /// The edge.
        edge_id: EdgeId,
        /// Where to send.
        consumer: Peer,
        /// The egress ring.
        ring_id: RingId,
    },
    /// Register the receive rendezvous and its pump (stream from `producer` -> ring);
    /// report `pump_ready` once registered (the stream is routed whenever it arrives).
    StartRecv {
        /// The edge's run (only a stream naming it is taken).
        run_id: RunId,
        /// The edge.
        edge_id: EdgeId,
        /// The only allowed producer.
        producer: Peer,
        /// The ingress ring.
        ring_id: RingId,
    },
    /// Stop the edge's pump; it reports `pump_ended` with its evidence.
    StopPump {
        /// The edge.
        edge_id: EdgeId,
    },
    /// Tell the ring's local user to let go of it; report its evidence with
    /// `local_quiet`.
    DetachRing {
        /// The ring.
        ring_id: RingId,
    },
    /// The ring's range went back to the arena: drop the mapping and the edge's routing.
    ForgetRing {
        /// The edge.
        edge_id: EdgeId,
        /// The ring.
        ring_id: RingId,
    },
}

/// What the plane reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlaneEvent {
    /// The edge end is ready: lease, ring, local user and pump in place.
    EdgeReady {
        /// The edge.
        edge_id: EdgeId,
        /// Its ring.
        ring_id: RingId,
        /// Which end.
        direction: Direction,
    },
    /// The edge end failed (its first fault, and the component that detected it).
    EdgeFailed {
        /// The edge.
        edge_id: EdgeId,
        /// Why.
        reason: FaultReason,
        /// Who detected it.
        component: Component,
    },
    /// The edge end is torn down; its lease went back with a proof (or it never had one).
    EdgeStopped {
        /// The edge.
        edge_id: EdgeId,
    },
}

/// The edge plane. See the module docs.
#[derive(Debug)]
pub struct EdgePlane {
    manager: ArenaManager,
    establisher: EdgeEstablisher,
    /// Each provisioned edge end's direction.
    directions: HashMap<EdgeId, Direction>,
    /// The run of each edge provisioned (its pumps' streams name it).
    runs: HashMap<EdgeId, RunId>,
    /// Evidence of pumps that ended before their edge was stopped (a producer finished
    /// its stream): handed over when the edge stops.
    parked: HashMap<EdgeId, PumpStopped>,
    /// The component that detected each edge's first fault.
    components: HashMap<EdgeId, Component>,
    /// Which edge each installed ring serves.
    ring_edges: HashMap<RingId, EdgeId>,
    /// Who a fault is attributed to when no component reported it first.
    owner: Component,
    commands: VecDeque<PlaneCommand>,
    events: VecDeque<PlaneEvent>,
}

impl EdgePlane {
    /// A plane over an arena manager (booted or not); faults no other component reported
    /// first are attributed to `owner` (a node's `edge_establisher`, the orchestrator's
    /// `token_endpoint`).
    pub fn new(manager: ArenaManager, owner: Component) -> EdgePlane {
        EdgePlane {
            manager,
            establisher: EdgeEstablisher::new(),
            directions: HashMap::new(),
            runs: HashMap::new(),
            parked: HashMap::new(),
            components: HashMap::new(),
            ring_edges: HashMap::new(),
            owner,
            commands: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// Provisions one edge end. Refused (nothing changes) for an edge already live.
    pub fn provision(&mut self, prov: EdgeProvision) -> Result<(), EstablishError> {
        let (edge_id, direction, run_id) = (prov.edge_id, prov.end_direction(), prov.run_id);
        self.establisher.provision(prov)?;
        self.directions.insert(edge_id, direction);
        self.runs.insert(edge_id, run_id);
        self.components.remove(&edge_id);
        self.parked.remove(&edge_id);
        self.settle();
        Ok(())
    }

    /// Tears an edge end down (idempotent).
    pub fn stop_edge(&mut self, edge_id: EdgeId) {
        self.establisher.stop_edge(edge_id);
        self.settle();
    }

    /// The local user holds the ring.
    pub fn ring_installed(&mut self, ring_id: RingId) {
        self.establisher.ring_installed(ring_id);
        self.settle();
    }

    /// A ring failed (`component` detected it).
    pub fn ring_fault(&mut self, ring_id: RingId, reason: RingFault, component: Component) {
        if let Some(edge) = self.ring_edges.get(&ring_id) {
            self.components.entry(*edge).or_insert(component);
        }
        self.establisher.ring_fault(ring_id, reason);
        self.settle();
    }

    /// The ring's local user let go of it (its own evidence).
    pub fn local_quiet(&mut self, evidence: WorkerQuiet) {
        self.establisher.worker_quiet(evidence.ring_id(), evidence);
        self.settle();
    }

    /// The send pump opened its stream, or the receive rendezvous is registered.
    pub fn pump_ready(&mut self, edge_id: EdgeId) {
        self.establisher.driver_ready(edge_id);
        self.settle();
    }

    /// A pump ended, with its evidence and, if it failed, why.
    pub fn pump_ended(
        &mut self,
        edge_id: EdgeId,
        evidence: PumpStopped,
        fault: Option<StreamFault>,
    ) {
        // Kept until the edge stops (a producer may finish its stream long before).
        self.parked.insert(edge_id, evidence);
        if let Some(reason) = fault {
            let component = match self.directions.get(&edge_id) {
                Some(Direction::Send) => Component::TxEdge,
                _ => Component::RxEdge,
            };
            self.components.entry(edge_id).or_insert(component);
            self.establisher.stream_fault(edge_id, reason);
            self.settle();
        }
        // Already stopping (the stop asked for this pump to end): the evidence goes now.
        if self.establisher.is_stopping(edge_id)
            && let Some(evidence) = self.parked.remove(&edge_id)
        {
            self.establisher.pump_stopped(edge_id, evidence);
        }
        self.settle();
    }

    /// A stream fault found outside a pump (e.g. a producer id that cannot be parsed).
    pub fn stream_fault(&mut self, edge_id: EdgeId, reason: StreamFault, component: Component) {
        self.components.entry(edge_id).or_insert(component);
        self.establisher.stream_fault(edge_id, reason);
        self.settle();
    }

    /// The next command for the driver.
    pub fn poll_command(&mut self) -> Option<PlaneCommand> {
        self.commands.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<PlaneEvent> {
        self.events.pop_front()
    }

    /// Whether the edge end is torn down (or was never provisioned).
    pub fn is_settled(&self, edge_id: EdgeId) -> bool {
        self.establisher.is_settled(edge_id)
    }

    /// Edge ends not yet torn down.
    pub fn live_edges(&self) -> usize {
        self.establisher.live_records()
    }

    /// Live arena leases.
    pub fn live_leases(&self) -> usize {
        self.manager.live_count()
    }

    /// Routes everything the manager and the establisher produced until both are quiet.
    fn settle(&mut self) {
        loop {
            let mut any = false;
            while let Some(ev) = self.manager.poll_event() {
                any = true;
                match ev {
                    ArenaEvent::RingLeased { request_id, layout, .. } => {
                        self.establisher.ring_leased(request_id, layout)
                    }
                    ArenaEvent::RingLeaseRejected { request_id, .. } => {
                        self.establisher.lease_rejected(request_id)
                    }
                    _ => {}
                }
            }
            while let Some(cmd) = self.establisher.poll_command() {
                any = true;
                self.route(cmd);
            }
            while let Some(ev) = self.establisher.poll_event() {
                any = true;
                self.events.push_back(match ev {
                    EstablisherEvent::EdgeReady { edge_id, ring_id, direction } => {
                        PlaneEvent::EdgeReady { edge_id, ring_id, direction }
                    }
                    EstablisherEvent::EdgeFailed { edge_id, reason } => PlaneEvent::EdgeFailed {
                        edge_id,
                        reason,
                        component: self.components.get(&edge_id).copied().unwrap_or(self.owner),
                    },
                    EstablisherEvent::EdgeStopped { edge_id } => {
                        PlaneEvent::EdgeStopped { edge_id }
                    }
                });
            }
            if !any {
                return;
            }
        }
    }

    fn route(&mut self, cmd: EstablisherCommand) {
        match cmd {
            EstablisherCommand::LeaseRing(req) => self.manager.lease(req),
            EstablisherCommand::CancelLease { request_id } => self.manager.cancel(request_id),
            EstablisherCommand::InstallRing { edge_id, direction, layout, object } => {
                self.ring_edges.insert(layout.ring_id, edge_id);
                self.commands.push_back(PlaneCommand::InstallRing {
                    edge_id,
                    direction,
                    layout,
                    object,
                });
            }
            EstablisherCommand::EstablishSend { edge_id, consumer, layout } => {
                let run_id = self.runs.get(&edge_id).copied().unwrap_or_default();
                self.commands.push_back(PlaneCommand::StartSend {
                    run_id,
                    edge_id,
                    consumer,
                    ring_id: layout.ring_id,
                });
            }
            EstablisherCommand::EstablishRecv { edge_id, producer, layout } => {
                let run_id = self.runs.get(&edge_id).copied().unwrap_or_default();
                self.commands.push_back(PlaneCommand::StartRecv {
                    run_id,
                    edge_id,
                    producer,
                    ring_id: layout.ring_id,
                });
            }
            EstablisherCommand::StopPump { edge_id } => match self.parked.remove(&edge_id) {
                // The pump already ended: its own evidence stands.
                Some(evidence) => self.establisher.pump_stopped(edge_id, evidence),
                None => self.commands.push_back(PlaneCommand::StopPump { edge_id }),
            },
            EstablisherCommand::UninstallRing { ring_id } => {
                self.commands.push_back(PlaneCommand::DetachRing { ring_id });
            }
            EstablisherCommand::ReleaseRing(proof) => {
                let ring_id = proof.ring_id();
                if let Some(edge_id) = self.ring_edges.remove(&ring_id) {
                    self.commands.push_back(PlaneCommand::ForgetRing { edge_id, ring_id });
                }
                // A proof for a lease the manager does not know is a bug upstream; the
                // manager refuses it and nothing changes.
                let _ = self.manager.release(proof);
            }
        }
    }
}

impl EdgeProvision {
    fn end_direction(&self) -> Direction {
        match self.end {
            EdgeEnd::Send { .. } => Direction::Send,
            EdgeEnd::Recv { .. } => Direction::Recv,
        }
    }
}

#[cfg(test)]
mod tests;
