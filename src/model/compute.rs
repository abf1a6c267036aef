//! What a stage is asked and answers, whatever it computes on: the device
//! ([`ComputeDevice`]), its spec, its inputs and outputs, and why it fails
//! ([`StageError`]). The stage (`stage.rs`) and its backends (`engine.rs`, the CPU engine;
//! `candle_stage.rs`, candle) share them.

use super::facts::ModelError;
use crate::wire::LayerRange;
use crate::wire::reason::WeightsFailure;

/// Where a stage computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComputeDevice {
    /// The CPU, on swactor's engine (SIMD kernels on the GGUF blocks, mapped weights).
    #[default]
    Cpu,
    /// The CPU on candle's ops: the reference the engine is checked against (needs a
    /// build with the `candle` feature).
    Candle,
    /// An NVIDIA GPU (needs a build with the `cuda` feature).
    Cuda(u32),
}

impl ComputeDevice {
    /// Parses `cpu`, `candle` or `cuda:N` (`cuda` alone means `cuda:0`).
    pub fn parse(text: &str) -> Option<ComputeDevice> {
        match text {
            "cpu" => Some(ComputeDevice::Cpu),
            "candle" => Some(ComputeDevice::Candle),
            "cuda" => Some(ComputeDevice::Cuda(0)),
            _ => text.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(ComputeDevice::Cuda),
        }
    }
}

/// What a stage loads and how long its KV cache is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSpec {
    /// The blocks it runs.
    pub layers: LayerRange,
    /// Whether it owns the token embedding (first stage).
    pub embedding: bool,
    /// Whether it owns the final norm, head and logits (last stage).
    pub head: bool,
    /// Longest sequence its KV cache holds.
    pub max_seq_len: u32,
    /// How its KV cache keeps values (f16 on the CPU engine only).
    pub kv_cache: crate::wire::KvCacheDType,
    /// Where it computes.
    pub device: ComputeDevice,
    /// Compute threads on the CPU (the caller's thread counts; 0 means 1).
    pub threads: u32,
}

/// Why a stage could not load or compute.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The weights could not be made ready (the reason is a stable code).
    #[error("weights: {reason}: {detail}")]
    Weights {
        /// Stable reason.
        reason: WeightsFailure,
        /// What exactly.
        detail: String,
    },
    /// The input does not fit the stage (wrong kind, shape, or token id).
    #[error("bad input: {0}")]
    BadInput(String),
    /// The KV cache is full.
    #[error("context full: {used} + {more} tokens exceed max_seq_len {max}")]
    ContextFull {
        /// Tokens already cached.
        used: usize,
        /// Tokens offered.
        more: usize,
        /// The cache length.
        max: usize,
    },
    /// The computation failed (candle's message).
    #[error("compute: {0}")]
    Compute(String),
    /// The forward pass was aborted between blocks (the stage is being stopped); the
    /// stage's caches must be reset before it computes again.
    #[error("aborted")]
    Aborted,
}

pub(crate) fn weights(reason: WeightsFailure, detail: impl Into<String>) -> StageError {
    StageError::Weights { reason, detail: detail.into() }
}

impl From<ModelError> for StageError {
    fn from(e: ModelError) -> Self {
        let reason = match e {
            ModelError::UnsupportedTensorType { .. } => WeightsFailure::UnsupportedTensorType,
            _ => WeightsFailure::ParseFailed,
        };
        weights(reason, e.to_string())
    }
}

impl From<swactor_engine::transformer::ForwardError> for StageError {
    fn from(e: swactor_engine::transformer::ForwardError) -> Self {
        use swactor_engine::transformer::ForwardError as F;
        match e {
            F::BadInput(m) => StageError::BadInput(m),
            F::ContextFull { used, more, max } => StageError::ContextFull { used, more, max },
            F::Aborted => StageError::Aborted,
        }
    }
}

/// What a stage consumes.
#[derive(Debug, Clone, Copy)]
pub enum StageInput<'a> {
    /// Token ids (first stage).
    Tokens(&'a [u32]),
    /// Hidden states `[tokens, hidden]`, row-major, from the previous stage.
    Hidden(&'a [f32]),
}

/// What a stage produces.
#[derive(Debug, Clone, PartialEq)]
pub enum StageOutput {
    /// Hidden states `[tokens, hidden]`, row-major, for the next stage.
    Hidden(Vec<f32>),
    /// Logits of the last position (last stage).
    Logits(Vec<f32>),
}
