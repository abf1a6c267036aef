//! Roles: what a worker computes in a step. The built-in `transform` test role exercises
//! the data plane without a model; the `llama_stage` role runs one stage of a model.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::protocol::RoleConfig;
use crate::model::llama::ComputeDevice;
use crate::model::llama::{
    LlamaStage, StageError, StageInput, StageOutput, StageSpec, decode_hidden, encode_hidden,
};
use crate::model::sampling::Sampler;
use crate::wire::reason::{FaultReason, StepFailure};
use crate::wire::{ActivationDType, Sequence};

/// A configured role.
#[derive(Debug)]
pub enum Role {
    /// The data-plane test role.
    Transform {
        /// Byte mask.
        xor: u8,
        /// Time per step.
        delay_ms: u64,
        /// Sequence whose step fails.
        fail_on_sequence: Option<Sequence>,
    },
    /// One stage of a llama-family model.
    Llama {
        /// The loaded stage.
        stage: Box<LlamaStage>,
        /// Activation dtype on the wire.
        dtype: ActivationDType,
        /// The sampler (last stage).
        sampler: Sampler,
    },
}

impl Role {
    /// Builds a role; a model role loads its weights now (`WeightsReady` follows success).
    pub fn configure(config: RoleConfig, device: ComputeDevice) -> Result<Role, FaultReason> {
        match config {
            RoleConfig::Transform { xor, delay_ms, fail_on_sequence } => {
                Ok(Role::Transform { xor, delay_ms, fail_on_sequence })
            }
            RoleConfig::LlamaStage {
                weights,
                layers,
                embedding,
                head,
                max_seq_len,
                kv_cache,
                activation_dtype,
                sampling,
            } => {
                let spec = StageSpec {
                    layers,
                    embedding,
                    head,
                    max_seq_len,
                    kv_cache,
                    device,
                    threads: compute_threads(),
                };
                match LlamaStage::load(std::path::Path::new(&weights), spec) {
                    Ok(stage) => Ok(Role::Llama {
                        stage: Box::new(stage),
                        dtype: activation_dtype,
                        sampler: Sampler::new(sampling),
                    }),
                    Err(StageError::Weights { reason, detail }) => {
                        eprintln!("swactor worker: weights: {detail}");
                        Err(reason.into())
                    }
                    Err(e) => {
                        eprintln!("swactor worker: weights: {e}");
                        Err(crate::wire::reason::WeightsFailure::BindFailed.into())
                    }
                }
            }
        }
    }

    /// Computes one output of `extent` bytes from the step's input. `abort` is polled
    /// during long computations; when set the step fails with `aborted`.
    pub fn compute(
        &mut self,
        sequence: Sequence,
        input: Option<&[u8]>,
        extent: u64,
        abort: &AtomicBool,
    ) -> Result<Vec<u8>, StepFailure> {
        match self {
            Role::Transform { xor, delay_ms, fail_on_sequence } => {
                let mut left = *delay_ms;
                while left > 0 {
                    if abort.load(Ordering::SeqCst) {
                        return Err(StepFailure::Aborted);
                    }
                    let slice = left.min(5);
                    std::thread::sleep(Duration::from_millis(slice));
                    left -= slice;
                }
                if abort.load(Ordering::SeqCst) {
                    return Err(StepFailure::Aborted);
                }
                if *fail_on_sequence == Some(sequence) {
                    return Err(StepFailure::ComputeFailed);
                }
                let len = usize::try_from(extent).map_err(|_| StepFailure::ComputeFailed)?;
                Ok(transform(input.unwrap_or(&[]), *xor, len))
            }
            Role::Llama { stage, dtype, sampler } => {
                let input = input.ok_or(StepFailure::MissingInput)?;
                if sequence == Sequence(0) {
                    stage.reset();
                }
                let hidden = stage.facts().hidden_size as usize;
                let out = if stage.spec().embedding {
                    if !input.len().is_multiple_of(4) {
                        return Err(StepFailure::ComputeFailed);
                    }
                    let ids: Vec<u32> = input
                        .chunks_exact(4)
                        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    stage.forward_abortable(StageInput::Tokens(&ids), abort)
                } else {
                    decode_hidden(input, hidden, *dtype)
                        .and_then(|h| stage.forward_abortable(StageInput::Hidden(&h), abort))
                };
                let bytes = match out {
                    Ok(StageOutput::Logits(logits)) => {
                        sampler.sample(&logits).to_le_bytes().to_vec()
                    }
                    Ok(StageOutput::Hidden(h)) => encode_hidden(&h, *dtype),
                    Err(StageError::Aborted) => return Err(StepFailure::Aborted),
                    Err(e) => {
                        eprintln!("swactor worker: step {}: {e}", sequence.0);
                        return Err(StepFailure::ComputeFailed);
                    }
                };
                if bytes.len() as u64 != extent {
                    eprintln!(
                        "swactor worker: step {} produced {} bytes, {extent} declared",
                        sequence.0,
                        bytes.len()
                    );
                    return Err(StepFailure::ComputeFailed);
                }
                Ok(bytes)
            }
        }
    }
}

/// The worker's compute thread count: `SWACTOR_WORKER_THREADS`, which the node's worker
/// driver sets from `--threads` (1 when unset: stages often share a host).
fn compute_threads() -> u32 {
    std::env::var("SWACTOR_WORKER_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1)
}

/// `out[i] = input[i % input.len()] ^ xor` (zeros ^ xor for an empty input).
pub fn transform(input: &[u8], xor: u8, len: usize) -> Vec<u8> {
    if input.is_empty() {
        return vec![xor; len];
    }
    (0..len).map(|i| input[i % input.len()] ^ xor).collect()
}
