//! The edge establisher (seed: edge_establisher_contract): one per node, one record per
//! edge end, turning a provisioned edge into an arena lease, an installed worker ring and
//! driver state, in that order, and taking all of it down again.
//!
//! Record states: `WaitingForLease -> WaitingForWorkerRing -> WaitingForDriver -> Ready`,
//! `Stopping` (waits for the pump-stopped and worker-quiet evidence, then releases the
//! lease with a quiescence proof), and the terminal `Stopped` / `Failed`.
//!
//! Guarantees:
//! - driver state is established only after the ring is installed; `EdgeReady` only after
//!   the driver reports the edge ready;
//! - a lease rejection fails the record; a ring or stream fault before readiness stops it;
//! - `StopEdge` cancels a queued lease, stops the pump if one was started, uninstalls the
//!   ring if it may be installed, and releases the lease only with a quiescence proof;
//! - stale events for stopped or unknown records install nothing, except that a lease
//!   granted after its cancellation is cancelled again (the arena releases it);
//! - the hot path never goes through the establisher: it sees coarse events only.

use std::collections::{BTreeMap, VecDeque};

use crate::arena::{LeaseRequest, LeaseRequestId, PumpStopped, QuiescenceProof, WorkerQuiet};
use crate::events::Direction;
use crate::wire::reason::{FaultReason, RingFault, StreamFault};
use crate::wire::{EdgeId, ObjectSpec, Peer, RingId, RingLayout, RingSpec, RunId};

/// Which end of an edge this node holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EdgeEnd {
    /// The producing end: the node sends to `consumer`.
    Send {
        /// The consuming node.
        consumer: Peer,
    },
    /// The consuming end: only `producer` may open the stream.
    Recv {
        /// The producing node.
        producer: Peer,
    },
}

impl EdgeEnd {
    fn direction(&self) -> Direction {
        match self {
            EdgeEnd::Send { .. } => Direction::Send,
            EdgeEnd::Recv { .. } => Direction::Recv,
        }
    }
}

/// A provisioned edge end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeProvision {
    /// The run the edge belongs to (its streams carry it, so no stream of another run of
    /// the same edge id is ever taken for this one).
    pub run_id: RunId,
    /// The edge.
    pub edge_id: EdgeId,
    /// This node's end.
    pub end: EdgeEnd,
    /// Its objects.
    pub object: ObjectSpec,
    /// Its ring.
    pub ring: RingSpec,
}

/// What the establisher asks of the arena manager, the worker and the driver.
#[derive(Debug, PartialEq)]
pub enum EstablisherCommand {
    /// Ask the arena manager for a ring.
    LeaseRing(LeaseRequest),
    /// Cancel a lease request (a granted one is released by the manager).
    CancelLease {
        /// The request.
        request_id: LeaseRequestId,
    },
    /// Install the ring in the worker (or the token endpoint).
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
    /// Set up the send pump.
    EstablishSend {
        /// The edge.
        edge_id: EdgeId,
        /// Where to send.
        consumer: Peer,
        /// The egress ring.
        layout: RingLayout,
    },
    /// Set up the receive rendezvous.
    EstablishRecv {
        /// The edge.
        edge_id: EdgeId,
        /// The only allowed producer.
        producer: Peer,
        /// The ingress ring.
        layout: RingLayout,
    },
    /// Stop the edge's pump.
    StopPump {
        /// The edge.
        edge_id: EdgeId,
    },
    /// Uninstall the ring from the worker.
    UninstallRing {
        /// The ring.
        ring_id: RingId,
    },
    /// Give the range back to the arena.
    ReleaseRing(QuiescenceProof),
}

/// What the establisher reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EstablisherEvent {
    /// The edge end is ready: lease, ring and driver state installed.
    EdgeReady {
        /// The edge.
        edge_id: EdgeId,
        /// Its ring.
        ring_id: RingId,
        /// Which end.
        direction: Direction,
    },
    /// The edge end failed.
    EdgeFailed {
        /// The edge.
        edge_id: EdgeId,
        /// Why.
        reason: FaultReason,
    },
    /// The edge end is fully torn down (its lease released or never granted).
    EdgeStopped {
        /// The edge.
        edge_id: EdgeId,
    },
}

/// Why a provisioning was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum EstablishError {
    /// The edge already has a record.
    #[error("edge {0} is already provisioned")]
    DuplicateEdge(EdgeId),
}

#[derive(Debug)]
enum State {
    WaitingForLease { request_id: LeaseRequestId },
    WaitingForWorkerRing { layout: RingLayout },
    WaitingForDriver { layout: RingLayout },
    Ready { layout: RingLayout },
    Stopping { layout: RingLayout, pump: Option<PumpStopped>, worker: Option<WorkerQuiet> },
    Stopped,
    Failed,
}

#[derive(Debug)]
struct Record {
    prov: EdgeProvision,
    request_id: LeaseRequestId,
    state: State,
}

/// The node's edge establisher.
#[derive(Debug, Default)]
pub struct EdgeEstablisher {
    records: BTreeMap<EdgeId, Record>,
    next_request: u64,
    commands: VecDeque<EstablisherCommand>,
    events: VecDeque<EstablisherEvent>,
}

impl EdgeEstablisher {
    /// An establisher with no edges.
    pub fn new() -> EdgeEstablisher {
        EdgeEstablisher::default()
    }

    /// Provisions one edge end: asks for its lease. An edge id whose earlier record is
    /// stopped or failed (a previous run's) starts a fresh record.
    pub fn provision(&mut self, prov: EdgeProvision) -> Result<(), EstablishError> {
        if !self.is_settled(prov.edge_id) {
            return Err(EstablishError::DuplicateEdge(prov.edge_id));
        }
        self.next_request += 1;
        let request_id = LeaseRequestId(self.next_request);
        self.commands.push_back(EstablisherCommand::LeaseRing(LeaseRequest {
            request_id,
            edge_id: prov.edge_id,
            direction: prov.end.direction(),
            ring: prov.ring,
        }));
        self.records.insert(
            prov.edge_id,
            Record { prov, request_id, state: State::WaitingForLease { request_id } },
        );
        Ok(())
    }

    fn by_request(&mut self, request_id: LeaseRequestId) -> Option<&mut Record> {
        self.records.values_mut().find(|r| r.request_id == request_id)
    }

    fn by_ring(&mut self, ring_id: RingId) -> Option<&mut Record> {
        self.records.values_mut().find(|r| match &r.state {
            State::WaitingForWorkerRing { layout }
            | State::WaitingForDriver { layout }
            | State::Ready { layout }
            | State::Stopping { layout, .. } => layout.ring_id == ring_id,
            _ => false,
        })
    }

    /// The arena granted a lease.
    pub fn ring_leased(&mut self, request_id: LeaseRequestId, layout: RingLayout) {
        let mut cmds = Vec::new();
        match self.by_request(request_id) {
            Some(rec) if matches!(rec.state, State::WaitingForLease { .. }) => {
                rec.state = State::WaitingForWorkerRing { layout };
                cmds.push(EstablisherCommand::InstallRing {
                    edge_id: rec.prov.edge_id,
                    direction: rec.prov.end.direction(),
                    layout,
                    object: rec.prov.object,
                });
            }
            // A grant for a request nobody waits for (cancelled, stopped, unknown): cancel
            // it again so the arena releases the range. It never becomes hot-path state.
            _ => cmds.push(EstablisherCommand::CancelLease { request_id }),
        }
        self.commands.extend(cmds);
    }

    /// The arena refused a lease for good.
    pub fn lease_rejected(&mut self, request_id: LeaseRequestId) {
        if let Some(rec) = self.by_request(request_id)
            && matches!(rec.state, State::WaitingForLease { .. })
        {
            rec.state = State::Failed;
            let edge_id = rec.prov.edge_id;
            self.events.push_back(EstablisherEvent::EdgeFailed {
                edge_id,
                reason: FaultReason::Ring(RingFault::LayoutInvalid),
            });
        }
    }

    /// The worker (or token endpoint) installed the ring.
    pub fn ring_installed(&mut self, ring_id: RingId) {
        let mut cmds = Vec::new();
        if let Some(rec) = self.by_ring(ring_id)
            && let State::WaitingForWorkerRing { layout } = rec.state
        {
            rec.state = State::WaitingForDriver { layout };
            cmds.push(match &rec.prov.end {
                EdgeEnd::Send { consumer } => EstablisherCommand::EstablishSend {
                    edge_id: rec.prov.edge_id,
                    consumer: consumer.clone(),
                    layout,
                },
                EdgeEnd::Recv { producer } => EstablisherCommand::EstablishRecv {
                    edge_id: rec.prov.edge_id,
                    producer: producer.clone(),
                    layout,
                },
            });
        }
        self.commands.extend(cmds);
    }

    /// The driver reports the edge's pump side ready.
    pub fn driver_ready(&mut self, edge_id: EdgeId) {
        if let Some(rec) = self.records.get_mut(&edge_id)
            && let State::WaitingForDriver { layout } = rec.state
        {
            rec.state = State::Ready { layout };
            self.events.push_back(EstablisherEvent::EdgeReady {
                edge_id,
                ring_id: layout.ring_id,
                direction: rec.prov.end.direction(),
            });
        }
    }

    /// A ring fault (worker side) for one of the records' rings.
    pub fn ring_fault(&mut self, ring_id: RingId, reason: RingFault) {
        let edge = self.by_ring(ring_id).map(|r| r.prov.edge_id);
        if let Some(edge_id) = edge {
            self.fault(edge_id, FaultReason::Ring(reason));
        }
    }

    /// A stream fault (driver side).
    pub fn stream_fault(&mut self, edge_id: EdgeId, reason: StreamFault) {
        self.fault(edge_id, FaultReason::Stream(reason));
    }

    fn fault(&mut self, edge_id: EdgeId, reason: FaultReason) {
        let live = self.records.get(&edge_id).is_some_and(|r| {
            matches!(
                r.state,
                State::WaitingForLease { .. }
                    | State::WaitingForWorkerRing { .. }
                    | State::WaitingForDriver { .. }
                    | State::Ready { .. }
            )
        });
        if live {
            self.events.push_back(EstablisherEvent::EdgeFailed { edge_id, reason });
            self.stop_edge(edge_id);
        }
    }

    /// Stops an edge end: cancel, stop the pump, uninstall, then release with proof.
    pub fn stop_edge(&mut self, edge_id: EdgeId) {
        let Some(rec) = self.records.get_mut(&edge_id) else { return };
        let state = std::mem::replace(&mut rec.state, State::Stopped);
        match state {
            State::WaitingForLease { request_id } => {
                self.commands.push_back(EstablisherCommand::CancelLease { request_id });
                self.events.push_back(EstablisherEvent::EdgeStopped { edge_id });
            }
            State::WaitingForWorkerRing { layout } => {
                // No pump was ever started: that half of the evidence is ours to give.
                rec.state = State::Stopping {
                    layout,
                    pump: Some(PumpStopped::observed(layout.ring_id)),
                    worker: None,
                };
                self.commands
                    .push_back(EstablisherCommand::UninstallRing { ring_id: layout.ring_id });
            }
            State::WaitingForDriver { layout } | State::Ready { layout } => {
                rec.state = State::Stopping { layout, pump: None, worker: None };
                self.commands.push_back(EstablisherCommand::StopPump { edge_id });
                self.commands
                    .push_back(EstablisherCommand::UninstallRing { ring_id: layout.ring_id });
            }
            other => rec.state = other,
        }
    }

    /// The driver stopped the edge's pump.
    pub fn pump_stopped(&mut self, edge_id: EdgeId, evidence: PumpStopped) {
        if let Some(rec) = self.records.get_mut(&edge_id)
            && let State::Stopping { pump, .. } = &mut rec.state
        {
            *pump = Some(evidence);
        }
        self.try_release(edge_id);
    }

    /// The worker side of a ring is quiet (quiesced, faulted, or the worker reaped).
    pub fn worker_quiet(&mut self, ring_id: RingId, evidence: WorkerQuiet) {
        let edge = self.by_ring(ring_id).map(|r| r.prov.edge_id);
        let Some(edge_id) = edge else { return };
        if let Some(rec) = self.records.get_mut(&edge_id)
            && let State::Stopping { worker, .. } = &mut rec.state
        {
            *worker = Some(evidence);
        }
        self.try_release(edge_id);
    }

    fn try_release(&mut self, edge_id: EdgeId) {
        let Some(rec) = self.records.get_mut(&edge_id) else { return };
        if let State::Stopping { pump: Some(pump), worker: Some(worker), .. } = rec.state {
            match QuiescenceProof::new(pump, worker) {
                Ok(proof) => {
                    rec.state = State::Stopped;
                    self.commands.push_back(EstablisherCommand::ReleaseRing(proof));
                    self.events.push_back(EstablisherEvent::EdgeStopped { edge_id });
                }
                Err(_) => {
                    // Evidence about another ring: keep waiting for the right one.
                    if let State::Stopping { worker, .. } = &mut rec.state {
                        *worker = None;
                    }
                }
            }
        }
    }

    /// Whether the edge end is ready.
    pub fn is_ready(&self, edge_id: EdgeId) -> bool {
        self.records.get(&edge_id).is_some_and(|r| matches!(r.state, State::Ready { .. }))
    }

    /// Whether the edge has no record, or its record is stopped or failed (nothing of it is
    /// held any more).
    pub fn is_settled(&self, edge_id: EdgeId) -> bool {
        self.records.get(&edge_id).is_none_or(|r| matches!(r.state, State::Stopped | State::Failed))
    }

    /// Whether the edge is stopping (waiting for its pump and worker evidence).
    pub fn is_stopping(&self, edge_id: EdgeId) -> bool {
        self.records.get(&edge_id).is_some_and(|r| matches!(r.state, State::Stopping { .. }))
    }

    /// Number of records not yet stopped or failed.
    pub fn live_records(&self) -> usize {
        self.records.values().filter(|r| !matches!(r.state, State::Stopped | State::Failed)).count()
    }

    /// The next command, if any.
    pub fn poll_command(&mut self) -> Option<EstablisherCommand> {
        self.commands.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<EstablisherEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
