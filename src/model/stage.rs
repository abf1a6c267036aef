//! A pipeline stage of any supported family: the blocks of one contiguous layer range,
//! plus the token embedding on the first stage and the final norm, output head and logits
//! on the last. The whole model is the single stage that owns everything, so the
//! one-process reference and every pipeline stage run exactly the same code.
//!
//! On the CPU a stage runs on our engine ([`swactor_engine`], bound by [`super::engine`]
//! to the mapped file); in a build with the `candle` feature, on CUDA or on the CPU with
//! `--device candle`, on candle's ops (`candle_stage`, the reference the engine is tested
//! against). Only the
//! tensors of the stage's own range (and its embedding / head) are used. Activations
//! cross stages as raw little-endian `f32` (or `f16`) `[tokens, hidden]` bytes
//! ([`encode_hidden`] / [`decode_hidden`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use swactor_engine::ThreadPool;

#[cfg(feature = "candle")]
use super::candle_stage::CandleStage;
pub(crate) use super::compute::weights;
pub use super::compute::{ComputeDevice, StageError, StageInput, StageOutput, StageSpec};
use super::facts::ModelFacts;
use super::gguf::GgufFile;
use crate::wire::ActivationDType;
use crate::wire::reason::WeightsFailure;

enum Backend {
    Engine(Box<swactor_engine::transformer::Stage>),
    #[cfg(feature = "candle")]
    Candle(Box<CandleStage>),
}

/// Why a stage without the CPU engine refuses a cache operation.
fn no_store() -> StageError {
    StageError::BadInput("the prompt-cache store needs the CPU engine".into())
}

/// One stage of a model of any supported family.
pub struct ModelStage {
    spec: StageSpec,
    facts: ModelFacts,
    loaded_bytes: u64,
    backend: Backend,
}

impl std::fmt::Debug for ModelStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelStage")
            .field("spec", &self.spec)
            .field("pos", &self.position())
            .finish()
    }
}

impl ModelStage {
    /// Loads a stage from a mapped GGUF file: validates the range against the file's
    /// blocks and binds only the stage's tensors. Each failure class has its own
    /// [`WeightsFailure`]. On the CPU the stage gets its own pool of `spec.threads` compute
    /// threads.
    pub fn load(file: &GgufFile, spec: StageSpec) -> Result<ModelStage, StageError> {
        ModelStage::load_in(file, spec, None)
    }

    /// As [`ModelStage::load`], computing on `pool` (stages of one process that run one
    /// at a time share one pool) instead of a pool of its own.
    pub fn load_in(
        file: &GgufFile,
        spec: StageSpec,
        pool: Option<Arc<ThreadPool>>,
    ) -> Result<ModelStage, StageError> {
        let facts = file.facts()?;
        if spec.layers.is_empty() || spec.layers.end > facts.block_count {
            return Err(weights(
                WeightsFailure::InvalidRange,
                format!("layers {} outside the file's 0..{}", spec.layers, facts.block_count),
            ));
        }
        if facts.rope.dimension_count != facts.head_dim {
            return Err(weights(
                WeightsFailure::BindFailed,
                "partial rotary embeddings are not supported",
            ));
        }
        if spec.max_seq_len == 0 {
            return Err(weights(WeightsFailure::BindFailed, "max_seq_len is 0"));
        }
        let (backend, loaded_bytes) = match spec.device {
            ComputeDevice::Cpu => {
                let pool =
                    pool.unwrap_or_else(|| Arc::new(ThreadPool::new(spec.threads.max(1) as usize)));
                let (stage, bytes) = super::engine::load(file, &facts, &spec, pool)?;
                (Backend::Engine(Box::new(stage)), bytes)
            }
            #[cfg(not(feature = "candle"))]
            ComputeDevice::Candle | ComputeDevice::Cuda(_) => {
                return Err(weights(
                    WeightsFailure::AllocationFailed,
                    format!(
                        "{:?} needs a build with the `candle` feature (CUDA: the `cuda` \
                         feature); this build computes on the CPU engine (--device cpu)",
                        spec.device
                    ),
                ));
            }
            #[cfg(feature = "candle")]
            ComputeDevice::Candle | ComputeDevice::Cuda(_) => {
                if facts.arch
                    != swactor_core::model::ArchFacts::of(swactor_core::model::Family::Llama)
                {
                    return Err(weights(
                        WeightsFailure::UnsupportedTensorType,
                        format!(
                            "the candle / CUDA path runs Llama-2 style `llama` files only; this \
                             `{}` file runs on the CPU engine (--device cpu)",
                            facts.architecture
                        ),
                    ));
                }
                if spec.kv_cache != crate::wire::KvCacheDType::F32 {
                    return Err(StageError::BadInput(
                        "an f16 KV cache needs the CPU engine (--device cpu)".into(),
                    ));
                }
                let stage = CandleStage::load(file, spec, facts.clone())?;
                let bytes = stage.loaded_bytes();
                (Backend::Candle(Box::new(stage)), bytes)
            }
        };
        Ok(ModelStage { spec, facts, loaded_bytes, backend })
    }

    /// The stage's spec.
    pub fn spec(&self) -> &StageSpec {
        &self.spec
    }

    /// The model's facts.
    pub fn facts(&self) -> &ModelFacts {
        &self.facts
    }

    /// Bytes of tensors the stage uses from the file.
    pub fn loaded_bytes(&self) -> u64 {
        self.loaded_bytes
    }

    /// Tokens in the KV cache.
    pub fn position(&self) -> usize {
        match &self.backend {
            Backend::Engine(s) => s.len(0),
            #[cfg(feature = "candle")]
            Backend::Candle(s) => s.position(),
        }
    }

    /// Clears the KV cache (a new sequence starts).
    pub fn reset(&mut self) {
        match &mut self.backend {
            Backend::Engine(s) => (0..s.slots()).for_each(|i| s.reset(i)),
            #[cfg(feature = "candle")]
            Backend::Candle(s) => s.reset(),
        }
    }

    /// The engine stage (CPU only): several sequences at once, for batched decoding.
    pub fn engine_mut(&mut self) -> Option<&mut swactor_engine::transformer::Stage> {
        match &mut self.backend {
            Backend::Engine(s) => Some(s),
            #[cfg(feature = "candle")]
            Backend::Candle(_) => None,
        }
    }

    /// Sets the number of sequence slots (KV caches), each starting empty. The candle
    /// backend holds one sequence only.
    pub fn set_slots(&mut self, n: usize) -> Result<(), StageError> {
        match &mut self.backend {
            Backend::Engine(s) => {
                s.set_slots(n);
                Ok(())
            }
            #[cfg(feature = "candle")]
            Backend::Candle(_) if n <= 1 => Ok(()),
            #[cfg(feature = "candle")]
            Backend::Candle(_) => Err(StageError::BadInput(format!(
                "{n} sequence slots need the CPU engine (candle stages hold one sequence)"
            ))),
        }
    }

    /// Copies `slot`'s positions `start .. start + len` out of its KV caches (the CPU
    /// engine only).
    pub fn save_block(
        &mut self,
        slot: usize,
        start: usize,
        len: usize,
    ) -> Result<swactor_engine::transformer::KvBlock, StageError> {
        let engine = self.engine_mut().ok_or_else(no_store)?;
        engine.save_block(slot, start, len).map_err(StageError::BadInput)
    }

    /// Copies a saved block back into `slot` at its positions (the CPU engine only).
    pub fn load_block(
        &mut self,
        slot: usize,
        block: &swactor_engine::transformer::KvBlock,
    ) -> Result<(), StageError> {
        let engine = self.engine_mut().ok_or_else(no_store)?;
        engine.load_block(slot, block).map_err(StageError::BadInput)
    }

    /// Sequence slots.
    pub fn slots(&self) -> usize {
        match &self.backend {
            Backend::Engine(s) => s.slots(),
            #[cfg(feature = "candle")]
            Backend::Candle(_) => 1,
        }
    }

    /// Tokens cached in `slot` (0 for a slot that does not exist).
    pub fn slot_position(&self, slot: usize) -> usize {
        match &self.backend {
            Backend::Engine(s) if slot < s.slots() => s.len(slot),
            #[cfg(feature = "candle")]
            Backend::Candle(s) if slot == 0 => s.position(),
            _ => 0,
        }
    }

    /// Empties one slot's KV cache (a new sequence starts in it).
    pub fn reset_slot(&mut self, slot: usize) {
        match &mut self.backend {
            Backend::Engine(s) if slot < s.slots() => s.reset(slot),
            #[cfg(feature = "candle")]
            Backend::Candle(s) if slot == 0 => s.reset(),
            _ => {}
        }
    }

    /// Runs the stage over rows of several sequences at once: `slots[i]` is row `i`'s
    /// slot, each slot's rows contiguous and continuing its cache. The last stage returns
    /// the logits of each slot's last row, in row order (`[slots in the batch, vocab]`).
    /// A row's values never depend on the other rows of the batch.
    pub fn forward_rows(
        &mut self,
        slots: &[usize],
        input: StageInput<'_>,
        abort: &AtomicBool,
    ) -> Result<StageOutput, StageError> {
        match &mut self.backend {
            #[cfg(feature = "candle")]
            Backend::Candle(_) => {
                if slots.iter().any(|&s| s != 0) {
                    return Err(StageError::BadInput(
                        "candle stages hold one sequence (slot 0)".into(),
                    ));
                }
                self.forward_abortable(input, abort)
            }
            Backend::Engine(s) => {
                let input = match input {
                    StageInput::Tokens(ids) => swactor_engine::transformer::Input::Tokens(ids),
                    StageInput::Hidden(h) => swactor_engine::transformer::Input::Hidden(h),
                };
                Ok(match s.forward(slots, input, abort)? {
                    swactor_engine::transformer::Output::Hidden(h) => StageOutput::Hidden(h),
                    swactor_engine::transformer::Output::Logits(l) => StageOutput::Logits(l),
                })
            }
        }
    }

    /// Drops one slot's cached positions from `len` on (a rejected draft's rows, or what a
    /// new sequence does not share with the slot's last one): the next row continues at
    /// `len`.
    pub fn truncate_slot(&mut self, slot: usize, len: usize) -> Result<(), StageError> {
        match &mut self.backend {
            Backend::Engine(s) if slot < s.slots() => {
                s.truncate(slot, len);
                Ok(())
            }
            Backend::Engine(_) => Err(StageError::BadInput(format!("slot {slot} does not exist"))),
            #[cfg(feature = "candle")]
            Backend::Candle(s) if slot == 0 => s.truncate(len),
            #[cfg(feature = "candle")]
            Backend::Candle(_) => Err(StageError::BadInput(format!("slot {slot} does not exist"))),
        }
    }

    /// As [`ModelStage::forward_rows`] on one slot, but the last stage returns the logits
    /// of every row (`[rows, vocab]`): verifying a draft. Engine stages only.
    pub fn verify_rows(
        &mut self,
        slots: &[usize],
        input: StageInput<'_>,
        abort: &AtomicBool,
    ) -> Result<StageOutput, StageError> {
        // A single pattern in a build without candle.
        #[allow(clippy::infallible_destructuring_match)]
        let s = match &mut self.backend {
            Backend::Engine(s) => s,
            #[cfg(feature = "candle")]
            Backend::Candle(_) => {
                return Err(StageError::BadInput("candle stages cannot verify drafts".into()));
            }
        };
        let input = match input {
            StageInput::Tokens(ids) => swactor_engine::transformer::Input::Tokens(ids),
            StageInput::Hidden(h) => swactor_engine::transformer::Input::Hidden(h),
        };
        Ok(match s.forward_every_row(slots, input, abort)? {
            swactor_engine::transformer::Output::Hidden(h) => StageOutput::Hidden(h),
            swactor_engine::transformer::Output::Logits(l) => StageOutput::Logits(l),
        })
    }

    /// Runs the stage over `n` new tokens (prefill when `n > 1`, decode when 1).
    pub fn forward(&mut self, input: StageInput<'_>) -> Result<StageOutput, StageError> {
        self.forward_abortable(input, &AtomicBool::new(false))
    }

    /// As [`ModelStage::forward`], polling `abort` between blocks: a long prefill stops
    /// within one block's time of a stop ([`StageError::Aborted`]).
    pub fn forward_abortable(
        &mut self,
        input: StageInput<'_>,
        abort: &AtomicBool,
    ) -> Result<StageOutput, StageError> {
        match &mut self.backend {
            #[cfg(feature = "candle")]
            Backend::Candle(s) => s.forward_abortable(input, abort),
            Backend::Engine(s) => {
                let hidden = self.facts.hidden_size as usize;
                let n = match input {
                    StageInput::Tokens(ids) => ids.len(),
                    StageInput::Hidden(h) => {
                        if h.is_empty() || !h.len().is_multiple_of(hidden) {
                            return Err(StageError::BadInput(format!(
                                "{} hidden values are not whole rows of {hidden}",
                                h.len()
                            )));
                        }
                        h.len() / hidden
                    }
                };
                if n == 0 {
                    return Err(StageError::BadInput("no tokens".into()));
                }
                let max = self.spec.max_seq_len as usize;
                let used = s.len(0);
                if used + n > max {
                    return Err(StageError::ContextFull { used, more: n, max });
                }
                let slots = vec![0usize; n];
                let input = match input {
                    StageInput::Tokens(ids) => swactor_engine::transformer::Input::Tokens(ids),
                    StageInput::Hidden(h) => swactor_engine::transformer::Input::Hidden(h),
                };
                Ok(match s.forward(&slots, input, abort)? {
                    swactor_engine::transformer::Output::Hidden(h) => StageOutput::Hidden(h),
                    swactor_engine::transformer::Output::Logits(l) => StageOutput::Logits(l),
                })
            }
        }
    }
}

/// Hidden states as wire bytes (`[tokens, hidden]`, little-endian).
pub fn encode_hidden(h: &[f32], dtype: ActivationDType) -> Vec<u8> {
    match dtype {
        ActivationDType::F32 => h.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ActivationDType::F16 => {
            h.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect()
        }
    }
}

/// Wire bytes back into hidden states `[tokens, hidden]`, row-major.
pub fn decode_hidden(
    bytes: &[u8],
    hidden: usize,
    dtype: ActivationDType,
) -> Result<Vec<f32>, StageError> {
    let width = match dtype {
        ActivationDType::F32 => 4,
        ActivationDType::F16 => 2,
    };
    if hidden == 0 || bytes.is_empty() || !bytes.len().is_multiple_of(hidden * width) {
        return Err(StageError::BadInput(format!(
            "{} bytes are not whole rows of {hidden} values",
            bytes.len()
        )));
    }
    Ok(match dtype {
        ActivationDType::F32 => {
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        ActivationDType::F16 => {
            bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        }
    })
}
