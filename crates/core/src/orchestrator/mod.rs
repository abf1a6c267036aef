//! The orchestrator's decisions (sans-IO): the run / session state machine, the
//! scheduler, the request book, the token endpoints, and when a server forms its next
//! session.

pub mod reform;
pub mod requests;
pub mod retry;
pub mod run;
pub mod scheduler;
pub mod session;
pub mod tokens;
