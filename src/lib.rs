//! swactor: a distributed, pipeline-parallel inference runtime for GGUF language models.
//!
//! The crate is one library shared by every role of the `swactor` binary. Its modules
//! follow the layers of `ARCHITECTURE.md`, each importing only those below it (checked by
//! `tests/it/tidy.rs`):
//!
//! 1. Wire: [`wire`] (ids, specs, the object header, plans, reasons, ring evidence) and
//!    [`events`]; the worker's and the control protocol's wire formats
//!    ([`worker::protocol`], [`control`]). Pure data and validation.
//! 2. Mechanisms: [`ring`], the memfd arena ([`arena::memfd`]), [`model`], [`net`],
//!    [`clock`], device bridges, weights.
//! 3. State machines (sans-IO, time passed in): [`planner`], the arena manager, the edge
//!    establisher and [`edge::plane`], the pool gate and SWIM authentication
//!    ([`membership`]), node boot, the stage controller ([`stage`]), the run FSM and
//!    token endpoints ([`orchestrator`]), the worker controller ([`workerctl`]).
//! 4. Drivers and roles: the worker process, the node ([`node`]), the orchestrator's
//!    driver and pool phase, `pool watch`, the edge executor, the benchmarks (`bench`),
//!    the tests' WAN forwarder ([`wan`]).
//! 5. [`cli`]: argument parsing, configuration, output formatting, exit codes.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub use swactor_core::{chat, events, planner, serve, sim, speculate, wire};

pub mod arena;
pub mod bench;
pub mod cli;
pub mod clock;
pub mod control;
pub mod edge;
pub mod fuzz;
pub mod membership;
pub mod model;
pub mod net;
pub mod node;
pub mod orchestrator;
pub mod ring;
pub mod server;
pub mod stage;
pub mod wan;
pub mod worker;
pub mod workerctl;
