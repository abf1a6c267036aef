//! The node's decisions (sans-IO): boot, and the stage it runs ([`stage_node`]).

pub mod boot;
pub mod stage_node;

pub use boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
pub use stage_node::{EdgeRecord, EdgeState, HostSnapshot, NodeAction, STAGE_ROLE, StageNode};
