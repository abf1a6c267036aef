//! The orchestrator role: [`run`] is the run state machine, [`tokens`] the token endpoints,
//! [`sessions`] the control sessions to the pool's nodes, [`driver`] drives one run over
//! a real pool, [`local`] supervises a pool of child nodes on this machine (`run local`),
//! and [`watch`] drives the pool readiness gate alone (`pool watch`).

pub mod driver;
pub mod local;
pub mod run;
pub mod sessions;
pub mod tokens;
pub mod watch;
