//! The node role's state machines. [`boot`] decides when a node is available.

pub mod boot;
pub mod run;

pub use boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
