//! Membership: SWIM liveness facts and the orchestrator's pool readiness gate.
//!
//! [`pool_gate`] is the sans-IO gate of the membership / pool readiness contract. SWIM
//! ([`swim`], authenticated by [`auth`]) is only an input to it: it reports liveness; the
//! gate decides readiness. [`watch`] is `swactor pool watch`: the orchestrator's pool
//! phase alone, printing what it observes.

pub mod auth;
pub mod impostor;
pub mod pool_gate;
mod suspicion;
pub mod swim;
pub mod watch;

pub use pool_gate::{GateEvent, PoolGate};
