//! The byte ranges of a GGUF file that one stage needs (the header, and the data of the
//! tensors its blocks, embedding and head bind: [`crate::model::engine::stage_tensors`]),
//! and their digests, computed by the orchestrator from its own copy of the file and put
//! in the plan, so each node downloads only its ranges and checks each one.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::model::gguf::{alignment, read_content, tensor_extent};
use crate::stage::weights::WeightsError;
use crate::wire::reason::WeightsFailure;
use crate::wire::{LayerRange, RunPlan, WeightRange, WeightSource};

fn fail(reason: WeightsFailure, detail: impl Into<String>) -> WeightsError {
    WeightsError { reason, detail: detail.into() }
}

/// A GGUF file's header, as the ranges need it.
pub struct ModelLayout {
    content: candle_core::quantized::gguf_file::Content,
    len: u64,
    facts: crate::model::ModelFacts,
}

impl ModelLayout {
    /// Reads the header of the GGUF file at `path` (`weights.parse_failed` if it is not one).
    pub fn read(path: &Path) -> Result<ModelLayout, WeightsError> {
        let parse = |e: crate::model::ModelError| fail(WeightsFailure::ParseFailed, e.to_string());
        let (content, len) = read_content(path).map_err(parse)?;
        let facts = crate::model::facts::facts_from_content(&content, len).map_err(parse)?;
        Ok(ModelLayout { content, len, facts })
    }

    /// The file's length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file is empty (never, for a parsed GGUF).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `(offset, len)` extents a stage of `layers` needs, sorted and merged where they
    /// touch: the header (everything before the tensor data) and each bound tensor's data.
    pub fn stage_extents(
        &self,
        layers: LayerRange,
        embedding: bool,
        head: bool,
    ) -> Result<Vec<(u64, u64)>, WeightsError> {
        let c = &self.content;
        let align =
            alignment(&c.metadata).map_err(|e| fail(WeightsFailure::ParseFailed, e.to_string()))?;
        let mut extents = vec![(0, c.tensor_data_offset)];
        let names = crate::model::engine::stage_tensors(&self.facts, layers, embedding, head);
        for name in names {
            let info = c.tensor_infos.get(&name).ok_or_else(|| {
                fail(WeightsFailure::MissingTensor, format!("tensor `{name}` is missing"))
            })?;
            let (start, len) = tensor_extent(&name, info, c.tensor_data_offset, align)
                .map_err(|e| fail(WeightsFailure::ParseFailed, e.to_string()))?;
            let start = u64::try_from(start)
                .ok()
                .filter(|s| s.checked_add(len).is_some_and(|end| end <= self.len))
                .ok_or_else(|| {
                    fail(WeightsFailure::ParseFailed, format!("tensor `{name}` lies outside"))
                })?;
            extents.push((start, len));
        }
        Ok(merge(extents))
    }
}

/// Sorts `extents` and merges those that overlap or touch; drops empty ones.
fn merge(mut extents: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    extents.retain(|e| e.1 > 0);
    extents.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(extents.len());
    for (start, len) in extents {
        match out.last_mut() {
            Some(last) if start <= last.0 + last.1 => {
                last.1 = last.1.max(start + len - last.0);
            }
            _ => out.push((start, len)),
        }
    }
    out
}

/// The sha256 of each extent of the file at `path`.
pub fn digest_extents(
    path: &Path,
    extents: &[(u64, u64)],
) -> Result<Vec<WeightRange>, WeightsError> {
    let io = |e: std::io::Error| {
        fail(WeightsFailure::DownloadFailed, format!("{}: {e}", path.display()))
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut out = Vec::with_capacity(extents.len());
    for &(offset, len) in extents {
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        let mut h = Sha256::new();
        let mut take = (&mut file).take(len);
        let mut seen = 0u64;
        loop {
            let n = take.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            seen += n as u64;
        }
        if seen != len {
            return Err(fail(
                WeightsFailure::SizeMismatch,
                format!("{} is truncated", path.display()),
            ));
        }
        let sha256 = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
        out.push(WeightRange { offset, len, sha256 });
    }
    Ok(out)
}

/// For a plan whose weights come from a URL, computes each stage's ranges and their
/// digests from `model` (the orchestrator's copy of the file) and puts them in the plan,
/// so each node downloads only what its stage loads. A local source is left as it is.
pub fn attach_stage_ranges(plan: &mut RunPlan, model: &Path) -> Result<(), WeightsError> {
    let WeightSource::Url { size, .. } = &plan.model.source else {
        return Ok(());
    };
    let layout = ModelLayout::read(model)?;
    if layout.len() != *size {
        return Err(fail(
            WeightsFailure::SizeMismatch,
            format!("{} has {} bytes, the plan says {size}", model.display(), layout.len()),
        ));
    }
    let mut per_stage = Vec::with_capacity(plan.stages.len());
    for s in &plan.stages {
        let extents = layout.stage_extents(s.layers, s.embedding, s.head)?;
        per_stage.push(digest_extents(model, &extents)?);
    }
    plan.model.stage_ranges = per_stage;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::merge;

    #[test]
    fn touching_and_overlapping_extents_merge_and_empty_ones_vanish() {
        let got = merge(vec![(10, 5), (0, 10), (20, 0), (30, 4), (32, 10), (50, 1)]);
        assert_eq!(got, vec![(0, 15), (30, 12), (50, 1)]);
    }
}
