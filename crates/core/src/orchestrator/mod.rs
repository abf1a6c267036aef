//! The orchestrator's decisions (sans-IO): the run / session state machine, the
//! scheduler, the request book and the token endpoints.

pub mod reform;
pub mod requests;
pub mod run;
pub mod scheduler;
pub mod tokens;
