//! The node's shared-memory arena: the memfd itself ([`memfd`]); its lease bookkeeping is
//! the core crate's arena manager.

pub use swactor_core::arena::*;

pub mod memfd;

pub use memfd::{ARENA_BYTES_ENV, ARENA_FD_ENV, Arena, ArenaError};
