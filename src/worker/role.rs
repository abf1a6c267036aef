//! Roles: what a worker computes in a step. The built-in `transform` test role exercises
//! the data plane without a model; the llama stage role comes with model execution.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::protocol::RoleConfig;
use crate::wire::Sequence;
use crate::wire::reason::StepFailure;

/// Computes one output of `extent` bytes from the step's inputs. `abort` is polled during
/// long computations; when it is set the step fails with `aborted`.
pub fn compute(
    config: &RoleConfig,
    sequence: Sequence,
    inputs: &[&[u8]],
    extent: u64,
    abort: &AtomicBool,
) -> Result<Vec<u8>, StepFailure> {
    match *config {
        RoleConfig::Transform { xor, delay_ms, fail_on_sequence } => {
            let mut left = delay_ms;
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
            if fail_on_sequence == Some(sequence) {
                return Err(StepFailure::ComputeFailed);
            }
            let len = usize::try_from(extent).map_err(|_| StepFailure::ComputeFailed)?;
            let input = inputs.first().copied().unwrap_or(&[]);
            Ok(transform(input, xor, len))
        }
    }
}

/// `out[i] = input[i % input.len()] ^ xor` (zeros ^ xor for an empty input).
pub fn transform(input: &[u8], xor: u8, len: usize) -> Vec<u8> {
    if input.is_empty() {
        return vec![xor; len];
    }
    (0..len).map(|i| input[i % input.len()] ^ xor).collect()
}
