//! The arena manager: leases of the node's shared-memory arena (sans-IO).

pub mod manager;

pub use manager::{
    ArenaEvent, ArenaManager, LeaseRejection, LeaseRequest, LeaseRequestId, PumpStopped,
    QuiescenceProof, ReleaseError, WorkerQuiet,
};
