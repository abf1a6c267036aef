//! The worker process (`swactor worker`, hidden): maps the node's arena, attaches to the
//! rings the node installs, loads objects from ingress rings into device memory, runs role
//! steps, and writes outputs into egress rings. It speaks only to its parent, over
//! stdin/stdout JSON lines ([`protocol`]).
//!
//! - [`protocol`]: commands, events, handles; no payload bytes by construction.
//! - [`device`]: the device bridge (CPU, fault-injecting) and, with the `cuda` feature,
//!   `cuda` (device buffers through cudarc).
//! - [`ingress`] / [`egress`]: the per-ring state machines.
//! - [`role`]: what a step computes.
//! - [`process`]: the process's event loop.

pub use swactor_core::worker::*;

#[cfg(feature = "gpu-bridge")]
pub mod cuda;
pub mod process;
pub mod role;
