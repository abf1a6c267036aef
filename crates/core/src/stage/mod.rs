//! The stage controller (sans-IO).

pub mod controller;

pub use controller::{StageCommand, StageController, StageEvent};
