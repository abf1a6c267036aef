//! Membership's decisions (sans-IO): the pool gate and SWIM authentication.

pub mod auth;
pub mod pool_gate;

pub use pool_gate::{GateEvent, PoolGate};
