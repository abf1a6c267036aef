//! The stage role's control path. [`controller`] is the sans-IO StageController.

pub mod controller;
pub mod weights;

pub use controller::{StageCommand, StageController, StageEvent};
