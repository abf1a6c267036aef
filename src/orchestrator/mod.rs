//! The orchestrator role. [`watch`] drives the pool readiness gate over real nodes:
//! control sessions to every node of the pool file, and SWIM membership.

pub mod run;
pub mod tokens;
pub mod watch;
