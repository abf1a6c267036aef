//! Evidence that nobody touches a ring any more: the values the arena manager needs before
//! it takes a ring's range back. They live at the bottom so every layer can carry them.
//! Every type is opaque and its constructors are private to this crate, so no code outside
//! the core can make a proof without the observation (a type rule); inside it, a tidy test
//! holds the minting sites: the ring ends' `stop`, the worker controller's view of what the
//! worker reported or of its reaping, the orchestrator's token endpoints' `stop`, the
//! establisher for a pump it never started.

use super::{RingId, WorkerGeneration};

/// Evidence that the network pump of a ring stopped and will not touch it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PumpStopped {
    ring_id: RingId,
}

impl PumpStopped {
    /// Records that the pump serving `ring_id` has stopped and will not touch the ring.
    pub(crate) fn observed(ring_id: RingId) -> PumpStopped {
        PumpStopped { ring_id }
    }

    /// The ring.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }
}

/// How the local user of a ring was seen to be quiet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuietCause {
    /// The worker reported `RingQuiesced` for the ring.
    RingQuiesced,
    /// The worker reported a fault of the ring (it detaches a faulted ring).
    RingFaulted,
    /// The worker process that had the ring installed was reaped.
    WorkerReaped {
        /// The reaped worker's generation.
        generation: WorkerGeneration,
    },
    /// The orchestrator's token endpoint on the ring was stopped (consumed).
    EndpointStopped,
}

/// Evidence that the local user of a ring (the worker, or the orchestrator's token
/// endpoint) is quiet. Opaque: only the code that observes the fact can make one (the
/// worker controller, the token endpoints' `stop`); everyone else can only read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerQuiet {
    ring_id: RingId,
    cause: QuietCause,
}

impl WorkerQuiet {
    /// The ring.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }

    /// How the quiet was observed.
    pub fn cause(&self) -> QuietCause {
        self.cause
    }

    /// The worker said so (`RingQuiesced`, or `RingFault` when `faulted`).
    pub(crate) fn reported(ring_id: RingId, faulted: bool) -> WorkerQuiet {
        let cause = if faulted { QuietCause::RingFaulted } else { QuietCause::RingQuiesced };
        WorkerQuiet { ring_id, cause }
    }

    /// The worker that had the ring was reaped.
    pub(crate) fn reaped(ring_id: RingId, generation: WorkerGeneration) -> WorkerQuiet {
        WorkerQuiet { ring_id, cause: QuietCause::WorkerReaped { generation } }
    }

    /// The token endpoint on the ring was consumed by its `stop`.
    pub(crate) fn endpoint_stopped(ring_id: RingId) -> WorkerQuiet {
        WorkerQuiet { ring_id, cause: QuietCause::EndpointStopped }
    }

    /// Test evidence: the worker quiesced the ring.
    #[cfg(test)]
    pub(crate) fn quiesced(ring_id: RingId) -> WorkerQuiet {
        WorkerQuiet { ring_id, cause: QuietCause::RingQuiesced }
    }
}

/// The two halves of the evidence name different rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the quiescence evidence names two different rings")]
pub struct EvidenceMismatch;

/// Proof that nobody touches a ring any more: its pump stopped and its local user is
/// quiet. Consumed by the arena manager's `release`.
#[derive(Debug, PartialEq, Eq)]
pub struct QuiescenceProof {
    ring_id: RingId,
}

impl QuiescenceProof {
    /// Combines both halves of the evidence; they must name the same ring.
    pub fn new(
        pump: PumpStopped,
        worker: WorkerQuiet,
    ) -> Result<QuiescenceProof, EvidenceMismatch> {
        if pump.ring_id != worker.ring_id() {
            return Err(EvidenceMismatch);
        }
        Ok(QuiescenceProof { ring_id: pump.ring_id })
    }

    /// The ring this proof is about.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }
}
