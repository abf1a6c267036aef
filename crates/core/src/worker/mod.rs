//! The worker's protocol and its per-ring state machines (sans-IO).

pub mod device;
pub mod egress;
pub mod ingress;
pub mod posted;
pub mod protocol;
