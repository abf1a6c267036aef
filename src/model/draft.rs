//! Where `generate`'s drafts come from: the n-gram drafter over the sequence's own tokens,
//! or a draft model (same vocabulary) run greedily by the engine in this process, its own
//! cache rolled back to what the target accepted.

use std::path::Path;

use super::generate::LocalPipeline;
use super::llama::{ComputeDevice, StageError};
use crate::speculate::ngram::NgramDrafter;
use crate::wire::{ActivationDType, LayerRange};

/// A source of drafts for one sequence.
#[derive(Debug)]
pub enum Drafter {
    /// N-gram lookup over the sequence's prompt and output.
    Ngram(NgramDrafter),
    /// A smaller model with the same vocabulary.
    Model(Box<DraftModel>),
}

impl Drafter {
    /// Up to `k` tokens to follow `history`.
    pub fn draft(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, StageError> {
        match self {
            Drafter::Ngram(d) => Ok(d.draft(history, k)),
            Drafter::Model(m) => m.draft(history, k),
        }
    }

    /// The target kept the sequence's first `len` tokens: what the drafter holds past
    /// them is dropped.
    pub fn kept(&mut self, len: usize) -> Result<(), StageError> {
        match self {
            Drafter::Ngram(_) => Ok(()),
            Drafter::Model(m) => m.kept(len),
        }
    }

    /// One more drafted token's cost relative to a target step, beside its verifying row:
    /// a draft model's step costs its weights' share of the target's.
    pub fn step_cost(&self) -> f64 {
        match self {
            Drafter::Ngram(_) => 0.0,
            Drafter::Model(m) => m.cost,
        }
    }
}

/// A draft model: a whole model in one in-process stage and the positions its cache holds
/// of the sequence.
#[derive(Debug)]
pub struct DraftModel {
    pipeline: LocalPipeline,
    cached: usize,
    max_seq: usize,
    cost: f64,
}

impl DraftModel {
    /// Loads `path` as a draft for a target of `target_vocab` tokens and `target_bytes` of
    /// weights; a different vocabulary is refused.
    pub fn load(
        path: &Path,
        max_seq_len: u32,
        threads: u32,
        (target_vocab, target_bytes): (u32, u64),
    ) -> Result<DraftModel, StageError> {
        let facts = crate::model::read_facts(path)
            .map_err(|e| StageError::BadInput(format!("the draft model: {e}")))?;
        if facts.vocab_size != target_vocab {
            return Err(StageError::BadInput(format!(
                "the draft model has {} tokens, the model {target_vocab}: they must share a \
                 vocabulary",
                facts.vocab_size
            )));
        }
        let pipeline = LocalPipeline::load(
            path,
            &[LayerRange::new(0, facts.block_count)],
            max_seq_len,
            Default::default(),
            ActivationDType::F32,
            ComputeDevice::Cpu,
            threads,
        )?;
        let cost = facts.bytes.tensors as f64 / target_bytes.max(1) as f64;
        Ok(DraftModel { pipeline, cached: 0, max_seq: max_seq_len as usize, cost })
    }

    fn draft(&mut self, history: &[u32], k: usize) -> Result<Vec<u32>, StageError> {
        let len = history.len();
        if k == 0 || len == 0 {
            return Ok(Vec::new());
        }
        // Its cache must end one token short of the history, whose last token it reads.
        if self.cached >= len {
            self.pipeline.truncate(len - 1)?;
            self.cached = len - 1;
        }
        let mut logits = self.pipeline.step(&history[self.cached..])?;
        self.cached = len;
        let mut out = Vec::with_capacity(k);
        loop {
            let t = crate::model::sampling::argmax(&logits);
            out.push(t);
            if out.len() == k || self.cached + 1 > self.max_seq {
                return Ok(out);
            }
            logits = self.pipeline.step(&[t])?;
            self.cached += 1;
        }
    }

    fn kept(&mut self, len: usize) -> Result<(), StageError> {
        if self.cached > len {
            self.pipeline.truncate(len)?;
            self.cached = len;
        }
        Ok(())
    }
}
