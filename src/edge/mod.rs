//! Edge ends: the plane and the establisher are the core crate's; [`executor`] drives them.

pub use swactor_core::edge::*;

pub mod executor;
