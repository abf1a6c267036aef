//! The stage's weights, resolved off the loop (downloaded or found, then checked against
//! the plan) and reported back as host inputs.

use std::path::PathBuf;

use tokio::sync::mpsc;

use super::HostInput;
use crate::stage::weights::{WeightsError, resolve};
use crate::wire::ProvisionStage;
use crate::wire::reason::WeightsFailure;

/// Resolves `p`'s weights into `cache` on a blocking thread; progress and the result come
/// back on `inputs`.
pub(super) fn fetch_weights(
    p: &ProvisionStage,
    cache: PathBuf,
    inputs: mpsc::UnboundedSender<HostInput>,
) {
    let (source, run) = (p.weights.clone(), p.run_id);
    let (layers, embedding, head, blocks) = (p.layers, p.embedding, p.head, p.block_count);
    tokio::task::spawn_blocking(move || {
        let progress = inputs.clone();
        let result = resolve(&source, &cache, |e| {
            let _ = progress.send(HostInput::Weights(run, e));
        })
        .and_then(|path| {
            let facts = crate::model::gguf::read_facts(&path).map_err(|e| WeightsError {
                reason: WeightsFailure::ParseFailed,
                detail: e.to_string(),
            })?;
            if facts.block_count != blocks {
                return Err(WeightsError {
                    reason: WeightsFailure::InvalidRange,
                    detail: format!("the plan has {blocks} blocks, the file {}", facts.block_count),
                });
            }
            let bytes = crate::planner::stage_weight_bytes(&facts, layers, embedding, head);
            Ok((path, bytes))
        });
        let _ = inputs.send(HostInput::WeightsResolved(run, result));
    });
}
