//! In-process generation: a chain of [`ModelStage`]s fed exactly as the rings will feed
//! them (activations cross each boundary as raw wire bytes), a sampler and a tokenizer.
//! With one stage it is the one-process reference the pipeline is checked against.

use super::gguf::GgufFile;
use std::sync::Arc;

use swactor_engine::ThreadPool;

use super::sampling::Sampler;
use super::stage::ComputeDevice;
use super::stage::{
    ModelStage, StageError, StageInput, StageOutput, StageSpec, decode_hidden, encode_hidden,
};
use crate::wire::{ActivationDType, LayerRange};

/// Stages of one model in one process.
#[derive(Debug)]
pub struct LocalPipeline {
    stages: Vec<ModelStage>,
    dtype: ActivationDType,
}

/// Splits `blocks` into `stages` contiguous ranges of near-equal length.
pub fn even_split(blocks: u32, stages: u32) -> Vec<LayerRange> {
    let stages = stages.clamp(1, blocks.max(1));
    (0..stages).map(|s| LayerRange::new(s * blocks / stages, (s + 1) * blocks / stages)).collect()
}

impl LocalPipeline {
    /// Loads one stage per range (the first owns the embedding, the last the head).
    /// On the CPU the stages share one pool of `threads` compute threads (they run one
    /// at a time).
    pub fn load(
        file: &GgufFile,
        ranges: &[LayerRange],
        max_seq_len: u32,
        kv_cache: crate::wire::KvCacheDType,
        dtype: ActivationDType,
        device: ComputeDevice,
        threads: u32,
    ) -> Result<Self, StageError> {
        let n = ranges.len();
        let pool = Arc::new(ThreadPool::new(threads.max(1) as usize));
        let stages = ranges
            .iter()
            .enumerate()
            .map(|(i, r)| {
                ModelStage::load_in(
                    file,
                    StageSpec {
                        layers: *r,
                        embedding: i == 0,
                        head: i + 1 == n,
                        max_seq_len,
                        kv_cache,
                        device,
                        threads,
                    },
                    Some(pool.clone()),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        if stages.is_empty() {
            return Err(StageError::BadInput("no stages".into()));
        }
        Ok(LocalPipeline { stages, dtype })
    }

    /// The stages.
    pub fn stages(&self) -> &[ModelStage] {
        &self.stages
    }

    /// The stages, mutably (batched decoding drives the engine stages directly).
    pub fn stages_mut(&mut self) -> &mut [ModelStage] {
        &mut self.stages
    }

    /// Clears every KV cache.
    pub fn reset(&mut self) {
        self.stages.iter_mut().for_each(ModelStage::reset);
    }

    /// Runs `tokens` through every stage; returns the logits of the last position.
    pub fn step(&mut self, tokens: &[u32]) -> Result<Vec<f32>, StageError> {
        let hidden = self.stages[0].facts().hidden_size as usize;
        let mut out = self.stages[0].forward(StageInput::Tokens(tokens))?;
        for stage in &mut self.stages[1..] {
            let StageOutput::Hidden(h) = out else {
                return Err(StageError::BadInput("a middle stage produced logits".into()));
            };
            // Exactly the bytes an activation edge carries.
            let bytes = encode_hidden(&h, self.dtype);
            out = stage.forward(StageInput::Hidden(&decode_hidden(&bytes, hidden, self.dtype)?))?;
        }
        match out {
            StageOutput::Logits(l) => Ok(l),
            StageOutput::Hidden(_) => {
                Err(StageError::BadInput("the last stage produced hidden states".into()))
            }
        }
    }
}

impl LocalPipeline {
    /// Runs `tokens` (one sequence, slot 0) through every stage, the last returning the
    /// logits of every row: verifying a draft. Engine stages only.
    pub fn verify(&mut self, tokens: &[u32]) -> Result<Vec<f32>, StageError> {
        let hidden = self.stages[0].facts().hidden_size as usize;
        let no = std::sync::atomic::AtomicBool::new(false);
        let slots = vec![0usize; tokens.len()];
        let n = self.stages.len();
        let first = StageInput::Tokens(tokens);
        let mut out = if n == 1 {
            self.stages[0].verify_rows(&slots, first, &no)?
        } else {
            self.stages[0].forward_rows(&slots, first, &no)?
        };
        for (i, stage) in self.stages.iter_mut().enumerate().skip(1) {
            let StageOutput::Hidden(h) = out else {
                return Err(StageError::BadInput("a middle stage produced logits".into()));
            };
            let bytes = encode_hidden(&h, self.dtype);
            let h = decode_hidden(&bytes, hidden, self.dtype)?;
            out = if i + 1 == n {
                stage.verify_rows(&slots, StageInput::Hidden(&h), &no)?
            } else {
                stage.forward_rows(&slots, StageInput::Hidden(&h), &no)?
            };
        }
        match out {
            StageOutput::Logits(l) => Ok(l),
            StageOutput::Hidden(_) => {
                Err(StageError::BadInput("the last stage produced hidden states".into()))
            }
        }
    }

    /// Drops every stage's cached positions from `len` on (a rejected draft's rows).
    pub fn truncate(&mut self, len: usize) -> Result<(), StageError> {
        self.stages.iter_mut().try_for_each(|s| s.truncate_slot(0, len))
    }
}

/// What speculation did over one generation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct SpecCounts {
    /// Trips that carried a draft.
    pub drafts: u64,
    /// Tokens drafted.
    pub draft_tokens: u64,
    /// Drafted tokens accepted.
    pub accepted_tokens: u64,
    /// Trips through the model in all (prefill excluded).
    pub trips: u64,
}

/// As [`generate_until`], drafting with `drafter` and verifying each draft in one trip
/// (up to `max_k` drafted tokens, the length following the measured acceptance and what
/// one more row costs relative to a step: `row_cost`, or measured from the passes where
/// `None`, plus a draft model's own step). Every sampling policy stays exact:
/// the sampler is keyed by position, so a drafted token is kept only where it is the
/// token the model would have produced there; the output is the same tokens as without
/// speculation.
#[allow(clippy::too_many_arguments)]
pub fn generate_speculative(
    pipeline: &mut LocalPipeline,
    prompt: &[u32],
    max_tokens: u32,
    sampler: &mut Sampler,
    stops: &[u32],
    (drafter, max_k, row_cost): (&mut dyn crate::speculate::Draft, usize, Option<f64>),
    counts: &mut SpecCounts,
    mut on_token: impl FnMut(u32) -> bool,
) -> Result<StopReason, StageError> {
    use crate::speculate::adapt::{DraftLength, RowCost};
    use crate::speculate::verify::accept_greedy;
    use crate::speculate::{AskId, DraftAsk, DraftJob, DraftRequest};
    let max_seq = pipeline.stages[0].spec().max_seq_len as usize;
    let mut measured = RowCost::default();
    let mut length = DraftLength::new(max_k);
    let mut history = prompt.to_vec();
    let logits = pipeline.step(prompt)?;
    // The draft model reads the prompt now, as part of the prefill (the jobs and answers
    // a session's drafter takes, run here in order: this is one process, no reactor).
    let warm = DraftJob::Warm { slot: 0, history: prompt.to_vec() };
    crate::speculate::run_job(drafter, &warm);
    let mut pending = vec![sampler.sample(&logits, prompt.len() as u32)];
    let mut produced = 0u32;
    loop {
        // Emit what the last trip decided, stopping where one token ends the sequence.
        for &token in &pending {
            if stops.contains(&token) {
                return Ok(StopReason::Eos);
            }
            if !on_token(token) {
                return Ok(StopReason::Stopped);
            }
            history.push(token);
            produced += 1;
            if produced >= max_tokens {
                return Ok(StopReason::MaxTokens);
            }
            if history.len() > max_seq {
                return Ok(StopReason::ContextFull);
            }
        }
        let last = *history.last().unwrap_or(&0);
        let cached = history.len() - 1;
        // Room for the draft: the tokens still wanted and the context left.
        let room = (max_tokens - produced) as usize;
        let room = room.min(max_seq.saturating_sub(history.len()));
        let (step, per_token) = (drafter.step_cost(), drafter.seconds_per_token());
        let draft_cost = crate::speculate::draft_cost(step, per_token, measured.trip_seconds());
        let k = length.next(row_cost.unwrap_or(measured.relative()) + draft_cost).min(room);
        let id = AskId { run: crate::wire::RunId(0), number: counts.trips };
        let asks = vec![DraftAsk { slot: 0, history: history.clone(), k }];
        let request = DraftJob::Draft(DraftRequest { id, asks });
        let answer = crate::speculate::run_job(drafter, &request);
        let draft = answer.and_then(|mut a| a.drafts.pop()).unwrap_or_default();
        let mut rows = vec![last];
        rows.extend_from_slice(&draft);
        let logits = timed(&mut measured, draft.len(), || pipeline.verify(&rows))?;
        counts.trips += 1;
        let vocab = logits.len() / rows.len();
        let target: Vec<u32> = (0..rows.len())
            .map(|i| sampler.sample(&logits[i * vocab..(i + 1) * vocab], (cached + 1 + i) as u32))
            .collect();
        let verdict = accept_greedy(&draft, &target)
            .ok_or_else(|| StageError::BadInput("the verification lost a row".into()))?;
        if !draft.is_empty() {
            counts.drafts += 1;
            counts.draft_tokens += draft.len() as u64;
            counts.accepted_tokens += verdict.accepted as u64;
            length.observe(draft.len(), verdict.accepted);
        }
        // Row 0 and the accepted drafts stay cached; the rejected rows go (a draft model
        // finds its own from the next history).
        pipeline.truncate(cached + 1 + verdict.accepted)?;
        pending = verdict.tokens;
    }
}

/// Runs one verifying pass, teaching `cost` its time with `extra_rows` drafted rows.
#[allow(clippy::disallowed_methods)] // generate is its own driver: it measures its passes
fn timed<T>(
    cost: &mut crate::speculate::adapt::RowCost,
    extra_rows: usize,
    pass: impl FnOnce() -> T,
) -> T {
    let t0 = std::time::Instant::now();
    let out = pass();
    cost.observe(extra_rows, t0.elapsed());
    out
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The end-of-sequence token.
    Eos,
    /// `max_tokens` were generated.
    MaxTokens,
    /// The KV cache is full.
    ContextFull,
    /// The caller asked to stop (an operator's signal).
    Stopped,
}

/// Generates up to `max_tokens` after `prompt`, calling `on_token` for each new token;
/// a token of `stops` (eos, end of turn) ends it.
/// Returns the reason it stopped. Timing is the caller's business.
pub fn generate(
    pipeline: &mut LocalPipeline,
    prompt: &[u32],
    max_tokens: u32,
    sampler: &mut Sampler,
    stops: &[u32],
    mut on_token: impl FnMut(u32),
) -> Result<StopReason, StageError> {
    generate_until(pipeline, prompt, max_tokens, sampler, stops, |t| {
        on_token(t);
        true
    })
}

/// As [`generate`], but `on_token` returns whether to go on (`false` stops with
/// [`StopReason::Stopped`]).
pub fn generate_until(
    pipeline: &mut LocalPipeline,
    prompt: &[u32],
    max_tokens: u32,
    sampler: &mut Sampler,
    stops: &[u32],
    mut on_token: impl FnMut(u32) -> bool,
) -> Result<StopReason, StageError> {
    let max_seq = pipeline.stages[0].spec().max_seq_len as usize;
    let mut logits = pipeline.step(prompt)?;
    let mut produced = 0u32;
    loop {
        let token = sampler.sample(&logits, prompt.len() as u32 + produced);
        if stops.contains(&token) {
            return Ok(StopReason::Eos);
        }
        if !on_token(token) {
            return Ok(StopReason::Stopped);
        }
        produced += 1;
        if produced >= max_tokens {
            return Ok(StopReason::MaxTokens);
        }
        if pipeline.stages[0].position() + 1 > max_seq {
            return Ok(StopReason::ContextFull);
        }
        logits = pipeline.step(&[token])?;
    }
}
