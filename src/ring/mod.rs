//! The ring ABI's shared-memory side: the ring protocol itself ([`Producer`],
//! [`Consumer`], the header, the ring ends) is the core crate's; this module maps rings in
//! memory ([`mapped`]) and rings the doorbells between a node and its worker
//! ([`doorbell`]).
#![allow(unsafe_code)]

pub use swactor_core::ring::*;

pub mod doorbell;
pub mod mapped;

pub use doorbell::{Doorbell, Doorbells};
pub use mapped::{HeapRegion, MappedRing};

#[cfg(test)]
mod tests;
