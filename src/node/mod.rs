//! The node role: [`boot`] decides when a node is available, [`driver`] drives the boot and
//! serves the node (`swactor node boot`), [`inbox`] takes control sessions and edge streams,
//! [`host`] runs a provisioned stage, [`admin`] keeps the admin socket, and [`inspect`]
//! holds what `edge inspect` shows.

pub use swactor_core::node::*;

pub mod admin;
pub mod calibrate;
pub mod driver;
mod facts;
pub(crate) use facts::host_memory_available;
pub mod host;
pub mod inbox;
pub mod inspect;
