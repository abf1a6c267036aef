//! The node's shared-memory arena.
//!
//! [`manager`] is the sans-IO ArenaManager: it hands out non-overlapping, aligned ranges of
//! the arena as ring leases, queues requests that could fit later, and takes ranges back
//! only with a [`manager::QuiescenceProof`]. [`memfd`] is the mechanism: one sparse memfd,
//! mapped once, inherited by the worker process.

pub mod manager;
pub mod memfd;

pub use manager::{
    ArenaEvent, ArenaManager, LeaseRejection, LeaseRequest, LeaseRequestId, PumpStopped,
    QuiescenceProof, ReleaseError, WorkerQuiet,
};
pub use memfd::{ARENA_BYTES_ENV, ARENA_FD_ENV, Arena, ArenaError};
