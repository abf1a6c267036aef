//! Membership: SWIM liveness facts and the orchestrator's pool readiness gate.
//!
//! [`pool_gate`] is the sans-IO gate of the membership / pool readiness contract (the
//! core crate's). SWIM ([`swim`], authenticated by [`auth`]) is only an input to it: it
//! reports liveness; the gate decides readiness. Members that expose no port get their SWIM
//! datagrams through their relay ([`carrier`]). `pool watch` is the orchestrator's
//! (`crate::orchestrator::watch`).

pub use swactor_core::membership::*;

pub mod carrier;
mod identity;
pub mod impostor;
mod suspicion;
pub mod swim;
