//! The node role: [`boot`] decides when a node is available, [`driver`] drives the boot and
//! serves the node (`swactor node boot`), [`host`] runs a provisioned stage, [`admin`] keeps
//! the admin socket.

pub mod admin;
pub mod boot;
pub mod driver;
pub mod host;

pub use boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
