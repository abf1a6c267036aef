//! swactor's integration tests, in one binary so they link once.
#![allow(clippy::disallowed_methods)] // tests are drivers: they own the clock

mod cli;
mod compose;
mod dataplane;
mod defaults;
mod events;
mod execution;
mod families;
mod faults;
mod fuzz;
mod generated;
mod header;
mod membership;
mod memory;
mod model;
mod multihost;
mod net;
mod page;
mod planner;
mod pool;
mod regrow;
mod resume;
mod run;
mod scripts;
mod serve;
mod serve_http;
mod session;
mod stage_worker;
mod support;
mod synth;
mod text;
mod tidy;
mod tokenizer;
mod weights;
mod worker;
mod worker_posted;
