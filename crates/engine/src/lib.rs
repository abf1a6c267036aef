//! swactor's CPU compute engine for decoder-only transformer stages (llama, qwen2, qwen3, gemma3).
//!
//! Everything a stage computes on the CPU lives here, apart from reading the GGUF file
//! (the `swactor` crate maps the file and hands the engine byte views of its tensors):
//!
//! - [`quant`]: the GGUF block formats, their scalar decoding, and activation
//!   quantization into 8-bit blocks (once per product, shared by every matrix that reads
//!   the same input). Behind it, one module per format (`formats/`: block layout, scalar
//!   reference, AVX2 and AVX-512 kernels), the activation rows (`acts`), the format table
//!   (`format`) and the SIMD helpers every format shares (`simd/`).
//! - [`kernels`]: dot products of one weight row with up to four activation rows, a
//!   scalar reference for every format and SIMD versions (AVX2+FMA, AVX-512 with VNNI)
//!   chosen at run time ([`Isa`]): the per-instruction-set tables over the format modules.
//! - [`matmul`]: weight matrices as views over the mapped file and the matrix products,
//!   split across output rows on a [`ThreadPool`].
//! - [`quantize`]: f32 values into a weight format, as GGML's reference quantizers do
//!   (for writing models; never on a stage's path).
//! - [`pool`]: the persistent thread pool (no spawn and no allocation per product).
//! - [`transformer`]: RMSNorm, rotary embedding, attention over a KV cache, SwiGLU and the head:
//!   the blocks of one stage, for any number of sequences at once.
//!
//! Modules depend downwards only: `isa` and `format`, then `simd`, then `acts`, then
//! `formats`, then the dispatch (`quant`, then `kernels`), then `matmul`, then `transformer`.
//!
//! **Batch invariance.** A row's result never depends on what else is in the batch or on
//! the thread count: every output element is one dot product computed by the same
//! instruction sequence whichever kernel width (1 to 4 activation rows) carries it, and
//! work is split only across output rows, never along the reduction.

#![warn(missing_docs)]
#![deny(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]
// Block decoding and kernels index several arrays by the same position, as GGML's block
// layouts are written; iterator chains would hide that correspondence.
#![allow(clippy::needless_range_loop)]

mod acts;
pub mod copy;
mod format;
mod formats;
pub mod isa;
pub mod kernels;
pub mod matmul;
pub mod pool;
pub mod quant;
pub mod quantize;
mod simd;
pub mod transformer;

pub use isa::Isa;
pub use matmul::{Bytes, Matrix};
pub use pool::ThreadPool;
pub use quant::WeightFormat;
