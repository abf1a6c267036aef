//! Model facts, the tokenizer and sampling: what the planner, the request book and the
//! last stage need of a model, without reading a file.

pub mod facts;
pub mod sampling;
pub mod tokenizer;

pub use facts::{ModelBytes, ModelError, ModelFacts, RopeFacts};
