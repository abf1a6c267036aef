//! The orchestrator role: [`run`] is the run state machine, [`tokens`] the token endpoints,
//! [`scheduler`] the session scheduler (slots, groups, micro-batches), [`requests`] what a
//! session's clients ask and get,
//! [`sessions`] the control sessions to the pool's nodes, [`pool_phase`] the pool phase
//! (sessions, SWIM and the readiness gate) shared by [`driver`] (one run over a real pool)
//! and `pool watch` ([`watch`]), and [`local`] supervises a pool of
//! child nodes on this machine (`run local`).

pub use swactor_core::orchestrator::*;

pub mod driver;
pub mod local;
pub mod pool_phase;
pub mod sessions;
pub mod watch;
