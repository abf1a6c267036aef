//! The control protocol: the codec is the core crate's ([`swactor_core::control`]); [`io`]
//! reads and writes its frames on async streams.

pub use swactor_core::control::*;

pub mod io;
pub use io::{read_message, write_message};
