//! Model facts, the tokenizer and sampling: what the planner, the request book and the
//! last stage need of a model, without reading a file.

pub mod arch;
pub mod constraint;
pub mod facts;
pub mod gguf;
pub mod meta;
pub mod sampling;
pub mod tokenizer;

pub use arch::{ArchFacts, Family};
pub use facts::{
    FormatBytes, ModelBytes, ModelError, ModelFacts, RopeFacts, STAGE_PROCESS_BYTES,
    facts_from_header,
};
pub use gguf::{GgufHeader, decode_header};
