//! The model's mechanisms: reading a GGUF file, running a stage, synthesized models.
//!
//! [`gguf`] maps a file once and has the core decode its header; the core reads the
//! header's [`ModelFacts`] ([`facts`]) and tokenizer ([`tokenizer`]) without IO; [`stage`]
//! runs a stage of any family (on the CPU through [`engine`], which binds the mapped file
//! to the `swactor-engine` crate; with the `candle` feature on CUDA or as the reference
//! through `candle_stage`); [`synth`] writes a deterministic tiny model of any family.

pub use swactor_core::model::{
    FormatBytes, ModelBytes, ModelError, ModelFacts, RopeFacts, sampling,
};
pub use swactor_core::model::{constraint, facts, tokenizer};

#[cfg(feature = "candle")]
pub mod candle_stage;
pub mod compute;
pub mod draft;
pub mod engine;
pub mod generate;
pub mod gguf;
pub mod grammar;
pub mod quantize;
pub mod stage;
pub mod synth;
pub mod write;

pub use gguf::{GgufFile, read_facts};
