//! Roles: what a worker computes in a step. The built-in `transform` test role exercises
//! the data plane without a model; the `llama_stage` role runs one stage of a model.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::protocol::RoleConfig;
use crate::model::gguf::GgufFile;
use crate::model::sampling::Sampler;
use crate::model::stage::ComputeDevice;
use crate::model::stage::{
    ModelStage, StageError, StageInput, StageOutput, StageSpec, decode_hidden, encode_hidden,
};
use crate::wire::PromptCachePlan;
use crate::wire::batch::{
    BatchLimits, BatchTable, CacheOpKind, EntryFlags, MAX_CAPACITY, NO_TOKEN,
};
use crate::wire::reason::{FaultReason, StepFailure};
use crate::wire::{ActivationDType, Sequence};
use swactor_engine::transformer::KvBlock;

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
    /// One stage of a llama-family model, computing micro-batches of several sequences.
    Model {
        /// The loaded stage (one KV cache per slot).
        stage: Box<ModelStage>,
        /// Activation dtype on the wire.
        dtype: ActivationDType,
        /// Each slot's sampler (last stage), made when the slot is reset.
        samplers: Vec<Option<Sampler>>,
        /// What every micro-batch table is checked against.
        limits: BatchLimits,
        /// The prompt-cache store: blocks of this stage's KV, written by cache operations.
        store: Store,
    },
}

/// A stage's prompt-cache store: `blocks` blocks of `block_tokens` positions, allocated
/// as they are first written (so it holds at most the plan's bytes).
#[derive(Debug, Default)]
pub struct Store {
    block_tokens: usize,
    blocks: Vec<Option<KvBlock>>,
}

impl Store {
    fn new(plan: PromptCachePlan) -> Store {
        let blocks = (0..plan.blocks).map(|_| None).collect();
        Store { block_tokens: plan.block_tokens as usize, blocks }
    }

    /// Bytes its blocks hold now.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().flatten().map(KvBlock::bytes).sum()
    }

    /// Runs a table's cache operations in order: saves copy a slot's block out, loads
    /// copy a stored block into the slot at the same positions.
    fn run(&mut self, stage: &mut ModelStage, table: &BatchTable) -> Result<(), String> {
        let b = self.block_tokens;
        for op in table.ops() {
            let (slot, start) = (op.slot as usize, op.slot_block as usize * b);
            let at = self
                .blocks
                .get_mut(op.store_block as usize)
                .ok_or_else(|| format!("store block {} does not exist", op.store_block))?;
            match op.kind {
                CacheOpKind::Save => {
                    // The old block is freed first: the store never holds more than its
                    // blocks.
                    *at = None;
                    *at = Some(stage.save_block(slot, start, b).map_err(|e| e.to_string())?);
                }
                CacheOpKind::Load => {
                    let block = at
                        .as_ref()
                        .filter(|k| k.positions() == b)
                        .ok_or_else(|| format!("store block {} is empty", op.store_block))?;
                    stage.load_block(slot, block).map_err(|e| e.to_string())?;
                    if stage.slot_position(slot) != start + b {
                        return Err(format!(
                            "store block {} is not slot block {}",
                            op.store_block, op.slot_block
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Role {
    /// Builds a role; a model role loads its weights now (`WeightsReady` follows success).
    pub fn configure(config: RoleConfig, device: ComputeDevice) -> Result<Role, FaultReason> {
        match config {
            RoleConfig::Transform { xor, delay_ms, fail_on_sequence } => {
                Ok(Role::Transform { xor, delay_ms, fail_on_sequence })
            }
            RoleConfig::ModelStage {
                weights,
                layers,
                embedding,
                head,
                max_seq_len,
                kv_cache,
                activation_dtype,
                sampling: _,
                max_sequences,
                prompt_cache,
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
                let capacity = max_sequences.clamp(1, u32::from(MAX_CAPACITY)) as u16;
                let loaded = GgufFile::open(std::path::Path::new(&weights))
                    .map_err(StageError::from)
                    .and_then(|file| ModelStage::load(&file, spec))
                    .and_then(|mut stage| stage.set_slots(usize::from(capacity)).map(|()| stage));
                match loaded {
                    Ok(stage) => Ok(Role::Model {
                        stage: Box::new(stage),
                        dtype: activation_dtype,
                        samplers: vec![None; usize::from(capacity)],
                        limits: BatchLimits {
                            capacity,
                            max_seq_len,
                            cache_blocks: prompt_cache.blocks,
                        },
                        store: Store::new(prompt_cache),
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
            Role::Model { stage, dtype, samplers, limits, store } => {
                let input = input.ok_or(StepFailure::MissingInput)?;
                if sequence == Sequence(0) {
                    stage.reset();
                    samplers.iter_mut().for_each(|s| *s = None);
                    store.blocks.iter_mut().for_each(|b| *b = None);
                }
                let mut bytes = llama_step(stage, *dtype, samplers, *limits, store, input, abort)
                    .map_err(|e| match e {
                    StepError::Aborted => StepFailure::Aborted,
                    StepError::Failed(m) => {
                        eprintln!("swactor worker: step {}: {m}", sequence.0);
                        StepFailure::ComputeFailed
                    }
                })?;
                // The token-out object has one size (the plan's), whatever its entries ask:
                // zeros after the log-probabilities they asked for.
                if stage.spec().head && (bytes.len() as u64) < extent {
                    bytes.resize(extent as usize, 0);
                }
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

enum StepError {
    Aborted,
    Failed(String),
}

/// One micro-batch through a llama stage: the table is checked (slots, positions that
/// continue each slot's cache), reset slots are emptied, one batched forward runs over
/// every row, and the output is the same table followed by the hidden rows or, on the
/// last stage, one token per table entry (sampled with the entry's own sampler).
fn llama_step(
    stage: &mut ModelStage,
    dtype: ActivationDType,
    samplers: &mut [Option<Sampler>],
    limits: BatchLimits,
    store: &mut Store,
    input: &[u8],
    abort: &AtomicBool,
) -> Result<Vec<u8>, StepError> {
    let fail = |m: String| StepError::Failed(m);
    let hidden = stage.facts().hidden_size as usize;
    let embedding = stage.spec().embedding;
    let row_bytes = if embedding { 4 } else { (hidden * dtype.wire().width() as usize) as u64 };
    let (table, rows) = BatchTable::split_rows(input, limits, row_bytes)
        .map_err(|e| fail(format!("micro-batch {}: {e}", e.code())))?;
    // Cache operations run first, in order: they name the slots as the previous
    // micro-batches left them.
    store.run(stage, &table).map_err(|e| fail(format!("cache operation: {e}")))?;
    for e in table.entries() {
        let slot = e.slot as usize;
        if e.flags.contains(EntryFlags::RESET) {
            // A new sequence: it keeps the slot's first `first_position` positions (a
            // prefix it shares with what the slot held), or none.
            let keep = e.first_position as usize;
            if keep == 0 {
                stage.reset_slot(slot);
            } else if keep < stage.slot_position(slot) {
                stage.truncate_slot(slot, keep).map_err(|e| fail(format!("slot {slot}: {e}")))?;
            }
            samplers[slot] = Some(Sampler::new(e.sampling.policy()));
        }
        let mut at = stage.slot_position(slot);
        if e.flags.contains(EntryFlags::ROLLBACK) && (e.first_position as usize) < at {
            stage
                .truncate_slot(slot, e.first_position as usize)
                .map_err(|e| fail(format!("slot {slot}: {e}")))?;
            at = stage.slot_position(slot);
        }
        if e.first_position as usize != at {
            return Err(fail(format!(
                "slot {slot} holds {at} positions, the micro-batch continues at {}",
                e.first_position
            )));
        }
    }
    let slots: Vec<usize> = table
        .entries()
        .iter()
        .flat_map(|e| std::iter::repeat_n(e.slot as usize, e.tokens as usize))
        .collect();
    // A verifying entry needs the logits after every row: the last stage then returns
    // every row's, and each entry's last row is found by its offset.
    let every =
        stage.spec().head && table.entries().iter().any(|e| e.flags.contains(EntryFlags::VERIFY));
    let forward = |stage: &mut ModelStage, input: StageInput<'_>| {
        if every {
            stage.verify_rows(&slots, input, abort)
        } else {
            stage.forward_rows(&slots, input, abort)
        }
    };
    let out = if embedding {
        let ids: Vec<u32> =
            rows.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        forward(stage, StageInput::Tokens(&ids))
    } else {
        decode_hidden(rows, hidden, dtype).and_then(|h| forward(stage, StageInput::Hidden(&h)))
    };
    let mut bytes = table.encode();
    match out {
        Ok(StageOutput::Logits(logits)) => {
            let n = if every { slots.len() } else { table.entries().len() };
            let vocab = logits.len() / n.max(1);
            let mut tokens = vec![NO_TOKEN; usize::from(limits.capacity)];
            let mut logprobs = vec![None; table.entries().len()];
            let mut verified = vec![Vec::new(); table.entries().len()];
            let mut row0 = 0usize;
            for (i, e) in table.entries().iter().enumerate() {
                // This entry's last row among the logits returned.
                let last = if every { row0 + e.tokens as usize - 1 } else { i };
                row0 += e.tokens as usize;
                if !e.flags.contains(EntryFlags::SAMPLE) {
                    continue;
                }
                let sampler = samplers[e.slot as usize]
                    .get_or_insert_with(|| Sampler::new(e.sampling.policy()));
                let row = &logits[last * vocab..(last + 1) * vocab];
                // The token stands right after the entry's rows.
                tokens[i] = sampler.sample(row, e.first_position + e.tokens);
                if e.flags.contains(EntryFlags::VERIFY) {
                    let first = last + 1 - e.tokens as usize;
                    verified[i] = (0..e.tokens as usize - 1)
                        .map(|j| {
                            let r = &logits[(first + j) * vocab..(first + j + 1) * vocab];
                            sampler.sample(r, e.first_position + j as u32 + 1)
                        })
                        .collect();
                }
                if e.flags.contains(EntryFlags::LOGPROBS) {
                    let k = e.sampling.top_logprobs as usize;
                    logprobs[i] = Some(crate::wire::logprobs::of_logits(row, tokens[i], k));
                }
            }
            bytes.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
            crate::wire::logprobs::encode(&table, &logprobs, &mut bytes);
            crate::wire::batch::encode_verify_section(&table, &verified, &mut bytes);
        }
        Ok(StageOutput::Hidden(h)) => bytes.extend_from_slice(&encode_hidden(&h, dtype)),
        Err(StageError::Aborted) => return Err(StepError::Aborted),
        Err(e) => return Err(fail(e.to_string())),
    }
    Ok(bytes)
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
