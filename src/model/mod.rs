//! The model: GGUF facts the planner needs and the synthesized test model writer.
//!
//! [`facts`] turns a parsed GGUF header into [`ModelFacts`] without IO; [`gguf`] reads a
//! header from a file with typed errors; [`synth`] writes a deterministic tiny llama model;
//! [`llama`] runs a stage (on the CPU through [`engine`], which binds the mapped file to
//! the `swactor-engine` crate; on CUDA or as the reference through [`candle_stage`]).

pub use swactor_core::model::{ModelBytes, ModelError, ModelFacts, RopeFacts, sampling};

pub mod candle_stage;
pub mod draft;
pub mod engine;
pub mod facts;
pub mod generate;
pub mod gguf;
pub mod stage;
pub mod quantize;
pub mod synth;
pub mod tokenizer;

pub use gguf::read_facts;
