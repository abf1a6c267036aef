//! ArenaManager: the sans-IO state machine that leases ring ranges of the arena.
//!
//! States: `Booting -> Ready | Failed`, then `Ready -> ShuttingDown -> Closed`.
//! Inputs are method calls; outputs are drained with [`ArenaManager::poll_event`].
//!
//! Guarantees:
//! - live leases never overlap, lie inside the ceiling, honour their alignment and keep
//!   their offsets until released;
//! - a request that can never fit in the ceiling is rejected at once; one that could fit
//!   later is queued and retried, strictly in arrival order, after every release;
//! - a range is released only with a [`QuiescenceProof`], which can only be built from the
//!   evidence the teardown path observes (pump stopped, worker ring quiesced or worker
//!   reaped); the manager never infers quiescence;
//! - ring ids are never reused, even when their ranges are.

use std::collections::{BTreeMap, VecDeque};

use crate::events::Direction;
pub use crate::wire::evidence::{PumpStopped, QuiescenceProof, WorkerQuiet};
use crate::wire::reason::BootFault;
use crate::wire::spec::RING_HEADER_BYTES;
use crate::wire::{EdgeId, RingId, RingLayout, RingSpec};

/// Page size every lease is aligned to at least (so the data area is page-aligned).
pub const LEASE_PAGE: u64 = 4096;

/// Identifies one lease request of its requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeaseRequestId(pub u64);

/// A request for one ring's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRequest {
    /// The requester's id for this request.
    pub request_id: LeaseRequestId,
    /// The edge the ring serves.
    pub edge_id: EdgeId,
    /// Which end of the edge.
    pub direction: Direction,
    /// Capacity and alignment.
    pub ring: RingSpec,
}

/// Why a lease request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseRejection {
    /// The ring can never fit in the arena's ceiling.
    NeverFits,
    /// The ring spec is invalid (alignment not a power of two, bad capacity).
    InvalidSpec,
    /// The arena is not ready (still booting, or failed).
    NotReady,
    /// The arena is shutting down.
    ShuttingDown,
    /// A request with this id is already queued or leased.
    DuplicateRequest,
}

/// What the manager tells its driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArenaEvent {
    /// The arena is mapped and leases can be granted.
    Ready,
    /// The arena could not be created; every request is refused.
    Failed {
        /// Which boot resource failed.
        reason: BootFault,
    },
    /// A range was leased.
    RingLeased {
        /// The request.
        request_id: LeaseRequestId,
        /// The edge.
        edge_id: EdgeId,
        /// Where the ring lives.
        layout: RingLayout,
    },
    /// The request could fit later and waits in the queue.
    LeaseQueued {
        /// The request.
        request_id: LeaseRequestId,
    },
    /// The request is refused for good.
    RingLeaseRejected {
        /// The request.
        request_id: LeaseRequestId,
        /// Why.
        reason: LeaseRejection,
    },
    /// A queued request was dropped on cancellation.
    LeaseCancelled {
        /// The request.
        request_id: LeaseRequestId,
    },
    /// A range was returned to the arena.
    RingReleased {
        /// The ring whose range is free again.
        ring_id: RingId,
    },
    /// Shutdown finished: no live lease remains.
    Closed,
}

/// Why a release was refused (no state changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    /// No live lease has this ring id.
    #[error("no live lease for this ring")]
    UnknownRing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Booting,
    Ready,
    Failed,
    ShuttingDown,
    Closed,
}

#[derive(Debug, Clone, Copy)]
struct Live {
    request_id: LeaseRequestId,
    layout: RingLayout,
}

/// The arena manager. See the module docs for its guarantees.
#[derive(Debug)]
pub struct ArenaManager {
    state: State,
    ceiling: u64,
    /// Live leases by arena offset.
    live: BTreeMap<u64, Live>,
    queue: VecDeque<LeaseRequest>,
    next_ring: u64,
    events: VecDeque<ArenaEvent>,
}

impl ArenaManager {
    /// A manager for an arena of `ceiling` bytes, booting until the arena is mapped.
    pub fn new(ceiling: u64) -> ArenaManager {
        ArenaManager {
            state: State::Booting,
            ceiling,
            live: BTreeMap::new(),
            queue: VecDeque::new(),
            next_ring: 1,
            events: VecDeque::new(),
        }
    }

    /// The arena is created and mapped.
    pub fn arena_ready(&mut self) {
        if self.state == State::Booting {
            self.state = State::Ready;
            self.events.push_back(ArenaEvent::Ready);
        }
    }

    /// The arena could not be created or mapped.
    pub fn arena_failed(&mut self, reason: BootFault) {
        if self.state == State::Booting {
            self.state = State::Failed;
            self.events.push_back(ArenaEvent::Failed { reason });
        }
    }

    /// Asks for a ring range. Answers with `RingLeased`, `LeaseQueued` or
    /// `RingLeaseRejected`.
    pub fn lease(&mut self, req: LeaseRequest) {
        let reject = |reason| ArenaEvent::RingLeaseRejected { request_id: req.request_id, reason };
        let refusal = match self.state {
            State::Booting | State::Failed => Some(LeaseRejection::NotReady),
            State::ShuttingDown | State::Closed => Some(LeaseRejection::ShuttingDown),
            State::Ready => None,
        };
        if let Some(reason) = refusal {
            self.events.push_back(reject(reason));
            return;
        }
        if req.ring.validate().is_err() {
            self.events.push_back(reject(LeaseRejection::InvalidSpec));
            return;
        }
        let duplicate = self.queue.iter().any(|q| q.request_id == req.request_id)
            || self.live.values().any(|l| l.request_id == req.request_id);
        if duplicate {
            self.events.push_back(reject(LeaseRejection::DuplicateRequest));
            return;
        }
        let Some((_, total)) = lease_shape(&req.ring) else {
            self.events.push_back(reject(LeaseRejection::NeverFits));
            return;
        };
        if total > self.ceiling {
            self.events.push_back(reject(LeaseRejection::NeverFits));
            return;
        }
        // Strict arrival order: nothing overtakes a queued request.
        if self.queue.is_empty() && self.try_grant(&req) {
            return;
        }
        self.queue.push_back(req);
        self.events.push_back(ArenaEvent::LeaseQueued { request_id: req.request_id });
    }

    /// Cancels a request. A queued request is dropped (`LeaseCancelled`). A request that
    /// was already granted is released at once (`RingReleased`): the caller vouches that
    /// the ring never became hot-path state (it cancels only leases whose grant arrived
    /// after it stopped wanting them). Unknown requests change nothing.
    pub fn cancel(&mut self, request_id: LeaseRequestId) {
        if let Some(pos) = self.queue.iter().position(|q| q.request_id == request_id) {
            self.queue.remove(pos);
            self.events.push_back(ArenaEvent::LeaseCancelled { request_id });
            self.retry_queue();
            return;
        }
        let granted = self.live.iter().find(|(_, l)| l.request_id == request_id).map(|(&o, _)| o);
        if let Some(offset) = granted
            && let Some(l) = self.live.remove(&offset)
        {
            self.after_release(l.layout.ring_id);
        }
    }

    /// Returns a ring's range with proof that nothing touches it any more. On error
    /// nothing changed.
    pub fn release(&mut self, proof: QuiescenceProof) -> Result<(), ReleaseError> {
        let offset = self
            .live
            .iter()
            .find(|(_, l)| l.layout.ring_id == proof.ring_id())
            .map(|(&o, _)| o)
            .ok_or(ReleaseError::UnknownRing)?;
        self.live.remove(&offset);
        self.after_release(proof.ring_id());
        Ok(())
    }

    /// Starts shutdown: queued requests are rejected, new ones too; live leases stay until
    /// released with proof, then `Closed`.
    pub fn shutdown(&mut self) {
        if !matches!(self.state, State::Ready | State::Booting | State::Failed) {
            return;
        }
        self.state = State::ShuttingDown;
        while let Some(q) = self.queue.pop_front() {
            self.events.push_back(ArenaEvent::RingLeaseRejected {
                request_id: q.request_id,
                reason: LeaseRejection::ShuttingDown,
            });
        }
        self.maybe_close();
    }

    /// The next output, if any. Drain after every input.
    pub fn poll_event(&mut self) -> Option<ArenaEvent> {
        self.events.pop_front()
    }

    /// Layouts of every live lease, in offset order.
    pub fn live_leases(&self) -> impl Iterator<Item = &RingLayout> {
        self.live.values().map(|l| &l.layout)
    }

    /// Number of live leases.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// Number of queued requests.
    pub fn queued_count(&self) -> usize {
        self.queue.len()
    }

    /// The arena ceiling in bytes.
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    fn after_release(&mut self, ring_id: RingId) {
        self.events.push_back(ArenaEvent::RingReleased { ring_id });
        self.retry_queue();
        self.maybe_close();
    }

    fn maybe_close(&mut self) {
        if self.state == State::ShuttingDown && self.live.is_empty() {
            self.state = State::Closed;
            self.events.push_back(ArenaEvent::Closed);
        }
    }

    fn retry_queue(&mut self) {
        if self.state != State::Ready {
            return;
        }
        while let Some(front) = self.queue.front().copied() {
            if !self.try_grant(&front) {
                break;
            }
            self.queue.pop_front();
        }
    }

    /// Grants `req` if a gap fits it; returns whether it did.
    fn try_grant(&mut self, req: &LeaseRequest) -> bool {
        let Some((align, total)) = lease_shape(&req.ring) else { return false };
        let Some(offset) = self.find_gap(align, total) else { return false };
        let ring_id = RingId(self.next_ring);
        self.next_ring += 1;
        let header_len = total - req.ring.capacity;
        let layout = RingLayout {
            ring_id,
            arena_offset: offset,
            total_len: total,
            header_offset: offset,
            data_offset: offset + header_len,
            data_capacity: req.ring.capacity,
            alignment: align,
        };
        self.live.insert(offset, Live { request_id: req.request_id, layout });
        self.events.push_back(ArenaEvent::RingLeased {
            request_id: req.request_id,
            edge_id: req.edge_id,
            layout,
        });
        true
    }

    /// First-fit: the lowest aligned offset where `total` bytes fit between live leases.
    fn find_gap(&self, align: u64, total: u64) -> Option<u64> {
        let mut cursor = 0u64;
        for (&offset, l) in &self.live {
            let start = align_up(cursor, align)?;
            if start.checked_add(total)? <= offset {
                return Some(start);
            }
            cursor = offset + l.layout.total_len;
        }
        let start = align_up(cursor, align)?;
        (start.checked_add(total)? <= self.ceiling).then_some(start)
    }
}

/// Alignment and total length of a lease for `ring`: a header area of at least
/// [`RING_HEADER_BYTES`] then the data, aligned to the page or the ring's alignment.
fn lease_shape(ring: &RingSpec) -> Option<(u64, u64)> {
    let align = ring.alignment.max(LEASE_PAGE);
    let header = align_up(RING_HEADER_BYTES, align)?;
    Some((align, header.checked_add(ring.capacity)?))
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    Some(v.checked_add(align - 1)? & !(align - 1))
}

#[cfg(test)]
mod tests;
