//! The args-to-config step: what was typed ([`super::args`]) becomes one checked config
//! per role, each built in one function, before a command calls the library. Commands
//! only parse, configure, call and print.
//!
//! - [`runtime`]: runtime and sampling flags -> [`crate::wire::RuntimeConfig`];
//! - [`source`]: pool file, placement and weight source, shared by planning and running;
//! - [`plan`]: `run plan` -> [`plan::PlanConfig`];
//! - [`run`]: what every run needs from its prompt flags (model, requests, printing);
//! - [`session`]: the session flags (and a pool's) -> the session's settings;
//! - [`orchestrate`]: `orchestrate pool` -> [`orchestrate::PoolRun`];
//! - [`local`]: `run local` -> [`local::LocalRun`];
//! - [`serve`]: `orchestrate serve` and `run local --serve` -> the server's config.

pub mod local;
pub mod orchestrate;
pub mod plan;
pub mod run;
pub mod runtime;
pub mod serve;
pub mod session;
pub mod source;
