//! The node role: [`boot`] decides when a node is available, [`run`] drives the boot and
//! serves the node, [`host`] runs a provisioned stage, [`admin`] keeps the admin socket.

pub mod admin;
pub mod boot;
pub mod host;
pub mod run;

pub use boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
