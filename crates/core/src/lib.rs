//! swactor's core: the data the system exchanges and every decision it makes, as sans-IO
//! state machines with explicit time.
//!
//! This crate depends on no async runtime, network, OS or clock crate (its `Cargo.toml`
//! says so and the compiler holds it): time comes in as arguments, randomness as seeds.
//! The `swactor` crate keeps the drivers that carry IO for these machines and decide
//! nothing. Layers, each importing only those below it:
//!
//! 1. Wire: [`wire`] (ids, specs, the object header, plans, reasons, evidence),
//!    [`events`], the worker's and the control protocol's formats ([`worker::protocol`],
//!    [`control`]), the ring protocol over an abstract memory ([`ring`]); model facts, the
//!    tokenizer and sampling ([`model`]).
//! 2. State machines: [`planner`], the arena manager ([`arena`]), the edge establisher
//!    and plane ([`edge`]), the pool gate and SWIM authentication ([`membership`]), node
//!    boot ([`node`]), the stage controller ([`stage`]), the worker controller
//!    ([`workerctl`]), the worker's per-ring machines ([`worker`]), the run / session FSM,
//!    scheduler and request book ([`orchestrator`]); the OpenAI-compatible API's requests,
//!    responses and the server's lifecycle ([`serve`]); a wide-area link's delay and loss
//!    for the tests' forwarder ([`wan`]).
//! 3. [`sim`]: the seeded simulation of whole sessions over the real machines above.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod arena;
pub mod chat;
pub mod control;
pub mod edge;
pub mod events;
pub mod membership;
pub mod model;
pub mod node;
pub mod orchestrator;
pub mod planner;
pub mod ring;
pub mod serve;
pub mod sim;
pub mod speculate;
pub mod stage;
pub mod wan;
pub mod wire;
pub mod worker;
pub mod workerctl;
