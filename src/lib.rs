//! swactor: a distributed, pipeline-parallel inference runtime for GGUF language models.
//!
//! The crate is one library shared by every role of the `swactor` binary. Its modules
//! follow the layers of the design (see `ARCHITECTURE.md`):
//!
//! 1. [`wire`] and [`events`]: identifiers, specs, the object header, plans, stable reason
//!    enums and the observability event stream. Pure data and validation.
//! 2. [`planner`]: the sans-IO run planner (pool inventory + model facts -> one `RunPlan`).
//! 3. [`model`]: GGUF model facts and the synthesized test model writer.
//! 4. [`cli`]: argument parsing, configuration, output formatting.
//!
//! Nothing under `wire`, `events` or `planner` performs IO or reads a clock.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod arena;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod control;
pub mod edge;
pub mod events;
pub mod membership;
pub mod model;
pub mod net;
pub mod node;
pub mod orchestrator;
pub mod planner;
pub mod ring;
pub mod stage;
pub mod wire;
pub mod worker;
pub mod workerctl;
