//! The stage role's control path. [`controller`] is the sans-IO StageController.

pub use swactor_core::stage::*;

pub mod cache;
pub mod ranges;
pub mod weights;
