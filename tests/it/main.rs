//! swactor's integration tests, in one binary so they link once.

mod cli;
mod dataplane;
mod events;
mod generated;
mod header;
mod model;
mod planner;
mod support;
mod synth;
mod worker;
