//! One module per weight format: its block layout, its scalar decoding and reference dot
//! product, and its SIMD kernels (an `avx2` and, where it has one, an `avx512` submodule).
//!
//! Below the dispatch (`quant`, `kernels`), above the activations (`acts`) and the shared
//! SIMD helpers (`simd`). A format module may use
//! the shared pieces of its family ([`block32`], [`kquant`]) or a sibling whose code it
//! reuses (Q5_1 takes Q5_0's, Q5_K Q4_K's, BF16 F16's reference loop); nothing here uses
//! the dispatch, and this file only declares the modules.

pub(crate) mod bf16;
pub(crate) mod block32;
pub(crate) mod f16;
pub(crate) mod f32;
pub(crate) mod kquant;
pub(crate) mod mxfp4;
pub(crate) mod q2_k;
pub(crate) mod q3_k;
pub(crate) mod q4_0;
pub(crate) mod q4_1;
pub(crate) mod q4_k;
pub(crate) mod q5_0;
pub(crate) mod q5_1;
pub(crate) mod q5_k;
pub(crate) mod q6_k;
pub(crate) mod q8_0;
