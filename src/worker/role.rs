//! Roles: what a worker computes in a step. The built-in `transform` test role exercises
//! the data plane without a model; the `llama_stage` role runs one stage of a model.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::protocol::RoleConfig;
use crate::model::gguf::GgufFile;
use crate::model::sampling::Sampler;
use crate::model::stage::ComputeDevice;
use crate::model::stage::{
    ModelStage, StageError, StageInput, StageOutput, StageSpec, decode_hidden, encode_hidden,
};
use crate::wire::batch::{BatchLimits, BatchTable, EntryFlags, MAX_CAPACITY, NO_TOKEN};
use crate::wire::cache_ops::resume_skip;
use crate::wire::reason::{FaultReason, StepFailure};
use crate::wire::{ActivationDType, Sequence};

mod log;
mod store;

pub use log::RowLog;
pub use store::Store;

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
    Model(Box<ModelRole>),
}

/// A model stage's role: its weights and caches, and what it was configured with.
#[derive(Debug)]
pub struct ModelRole {
    /// Its configuration (what a parked role is matched by).
    config: RoleConfig,
    /// The loaded stage (one KV cache per slot).
    stage: ModelStage,
    /// Activation dtype on the wire.
    dtype: ActivationDType,
    /// Each slot's sampler (last stage), made when the slot is reset.
    samplers: Vec<Option<Sampler>>,
    /// What every micro-batch table is checked against.
    limits: BatchLimits,
    /// The prompt-cache store: blocks of this stage's KV, written by cache operations.
    store: Store,
    /// The rows it sent on, per slot (not on the last stage).
    log: RowLog,
    /// Taken over from a faulted run: its first step keeps the caches.
    taken_over: bool,
}

impl Role {
    /// Builds a role; a model role loads its weights now (`WeightsReady` follows success).
    pub fn configure(config: RoleConfig, device: ComputeDevice) -> Result<Role, FaultReason> {
        match config {
            RoleConfig::Transform { xor, delay_ms, fail_on_sequence } => {
                Ok(Role::Transform { xor, delay_ms, fail_on_sequence })
            }
            RoleConfig::ModelStage {
                ref weights,
                layers,
                embedding,
                head,
                max_seq_len,
                kv_cache,
                activation_dtype,
                sampling: _,
                max_sequences,
                prompt_cache,
                mask_bytes,
                ..
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
                let loaded = GgufFile::open(std::path::Path::new(weights))
                    .map_err(StageError::from)
                    .and_then(|file| ModelStage::load(&file, spec))
                    .and_then(|mut stage| stage.set_slots(usize::from(capacity)).map(|()| stage));
                match loaded {
                    Ok(stage) => {
                        // Every stage but the last logs the rows it sends on.
                        let width = activation_dtype.wire().width() as usize;
                        let row_bytes = stage.facts().hidden_size as usize * width;
                        let log = RowLog::new(usize::from(capacity), (!head).then_some(row_bytes));
                        Ok(Role::Model(Box::new(ModelRole {
                            stage,
                            dtype: activation_dtype,
                            samplers: vec![None; usize::from(capacity)],
                            limits: BatchLimits {
                                capacity,
                                max_seq_len,
                                cache_blocks: prompt_cache.blocks,
                                mask_bytes,
                            },
                            store: Store::new(prompt_cache),
                            log,
                            taken_over: false,
                            config,
                        })))
                    }
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

    /// Takes over this parked role for a run that re-forms its faulted one with the very
    /// same stage (`config` takes it over, [`RoleConfig::takes_over`]): its caches are kept
    /// through the new run's first step. `Err` gives the role back when it does not match.
    pub fn take_over(self, config: &RoleConfig) -> Result<Role, Role> {
        match self {
            Role::Model(mut m) if config.takes_over(&m.config) => {
                m.config = config.clone();
                m.taken_over = true;
                Ok(Role::Model(m))
            }
            other => Err(other),
        }
    }

    /// The model role, if this is one.
    pub fn model(&self) -> Option<&ModelRole> {
        match self {
            Role::Model(m) => Some(m),
            Role::Transform { .. } => None,
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
            Role::Model(m) => {
                let input = input.ok_or(StepFailure::MissingInput)?;
                if sequence == Sequence(0) {
                    // A new run: its slots start empty, unless it took the role over from
                    // the run it re-forms (then the sequences it resumes say what to keep).
                    if !std::mem::take(&mut m.taken_over) {
                        m.stage.reset();
                        m.log.clear();
                    }
                    m.samplers.iter_mut().for_each(|s| *s = None);
                    m.store.clear();
                }
                let mut bytes = llama_step(m, input, abort).map_err(|e| match e {
                    StepError::Aborted => StepFailure::Aborted,
                    StepError::Failed(msg) => {
                        eprintln!("swactor worker: step {}: {msg}", sequence.0);
                        StepFailure::ComputeFailed
                    }
                })?;
                // The token-out object has one size (the plan's), whatever its entries ask:
                // zeros after the log-probabilities they asked for.
                if m.stage.spec().head && (bytes.len() as u64) < extent {
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
/// continue each slot's cache), its cache operations run, reset slots are emptied, one
/// batched forward runs over every row a stage does not hold already, and the output is
/// the same table followed by the hidden rows (a resumed entry's kept rows from the log)
/// or, on the last stage, one token per table entry (sampled with the entry's own
/// sampler).
fn llama_step(m: &mut ModelRole, input: &[u8], abort: &AtomicBool) -> Result<Vec<u8>, StepError> {
    let fail = |m: String| StepError::Failed(m);
    let hidden = m.stage.facts().hidden_size as usize;
    let embedding = m.stage.spec().embedding;
    let in_row = if embedding { 4 } else { hidden * m.dtype.wire().width() as usize };
    let (table, rows) = BatchTable::split_rows(input, m.limits, in_row as u64)
        .map_err(|e| fail(format!("micro-batch {}: {e}", e.code())))?;
    // Cache operations run first, in order: they name the slots as the previous
    // micro-batches left them.
    m.store
        .run(&mut m.stage, &mut m.log, &mut m.samplers, &table)
        .map_err(|e| fail(format!("cache operation: {e}")))?;
    // Each entry's rows this stage holds already (a resumed sequence's kept positions).
    let mut skips = Vec::with_capacity(table.entries().len());
    for e in table.entries() {
        skips.push(continue_slot(m, e).map_err(fail)?);
    }
    let computed: Vec<usize> =
        table.entries().iter().zip(&skips).map(|(e, &k)| e.tokens as usize - k).collect();
    let slots: Vec<usize> = table
        .entries()
        .iter()
        .zip(&computed)
        .flat_map(|(e, &n)| std::iter::repeat_n(e.slot as usize, n))
        .collect();
    // The rows to compute: every row but the skipped ones.
    let rows: std::borrow::Cow<'_, [u8]> = if skips.iter().all(|&k| k == 0) {
        rows.into()
    } else {
        let mut kept = Vec::with_capacity(slots.len() * in_row);
        let mut at = 0;
        for (e, &k) in table.entries().iter().zip(&skips) {
            let n = e.tokens as usize;
            kept.extend_from_slice(&rows[(at + k) * in_row..(at + n) * in_row]);
            at += n;
        }
        kept.into()
    };
    // A verifying entry needs the logits after every row: the last stage then returns
    // every row's, and each entry's last row is found by its offset.
    let head = m.stage.spec().head;
    let every = head && table.entries().iter().any(|e| e.flags.contains(EntryFlags::VERIFY));
    let forward = |stage: &mut ModelStage, input: StageInput<'_>| {
        if every {
            stage.verify_rows(&slots, input, abort)
        } else {
            stage.forward_rows(&slots, input, abort)
        }
    };
    let out = if slots.is_empty() {
        // Every row was held: nothing to compute.
        Ok(if head { StageOutput::Logits(Vec::new()) } else { StageOutput::Hidden(Vec::new()) })
    } else if embedding {
        let ids: Vec<u32> =
            rows.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        forward(&mut m.stage, StageInput::Tokens(&ids))
    } else {
        decode_hidden(&rows, hidden, m.dtype)
            .and_then(|h| forward(&mut m.stage, StageInput::Hidden(&h)))
    };
    let mut bytes = table.encode();
    match out {
        Ok(StageOutput::Logits(logits)) => {
            sample_tokens(m, &table, &computed, every, &logits, &mut bytes);
        }
        Ok(StageOutput::Hidden(h)) => {
            let encoded = encode_hidden(&h, m.dtype);
            let out_row = encoded.len() / slots.len().max(1);
            let mut at = 0;
            for ((e, &k), &n) in table.entries().iter().zip(&skips).zip(&computed) {
                let (slot, first) = (e.slot as usize, e.first_position as usize);
                let logged = m.log.rows(slot, first, k).ok_or_else(|| {
                    fail(format!("slot {slot} has no logged rows for positions {first}.."))
                })?;
                bytes.extend_from_slice(logged);
                let fresh = &encoded[at * out_row..(at + n) * out_row];
                m.log.record(slot, first + k, fresh);
                bytes.extend_from_slice(fresh);
                at += n;
            }
        }
        Err(StageError::Aborted) => return Err(StepError::Aborted),
        Err(e) => return Err(fail(e.to_string())),
    }
    Ok(bytes)
}

/// Sets entry `e`'s slot up for its rows (a reset, a rollback, a resume) and checks they
/// continue it. Returns how many of its first rows the slot holds already (a resumed
/// sequence's kept positions: sent from the log, not computed).
fn continue_slot(m: &mut ModelRole, e: &crate::wire::batch::BatchEntry) -> Result<usize, String> {
    let slot = e.slot as usize;
    if e.flags.contains(EntryFlags::RESET) {
        // A new sequence: it keeps the slot's first `first_position` positions (a prefix
        // it shares with what the slot held), or none.
        let keep = e.first_position as usize;
        if keep == 0 {
            m.stage.reset_slot(slot);
        } else if keep < m.stage.slot_position(slot) {
            m.stage.truncate_slot(slot, keep).map_err(|e| format!("slot {slot}: {e}"))?;
        }
        m.log.truncate(slot, keep);
        m.samplers[slot] = Some(Sampler::new(e.sampling.policy()));
    }
    let mut at = m.stage.slot_position(slot);
    if e.flags.contains(EntryFlags::ROLLBACK) && (e.first_position as usize) < at {
        m.stage
            .truncate_slot(slot, e.first_position as usize)
            .map_err(|e| format!("slot {slot}: {e}"))?;
        m.log.truncate(slot, e.first_position as usize);
        at = m.stage.slot_position(slot);
    }
    let mut skip = 0;
    if e.flags.contains(EntryFlags::RESUME) {
        let samples = e.flags.contains(EntryFlags::SAMPLE);
        let held =
            resume_skip(at as u32, e.first_position, e.tokens, samples).ok_or_else(|| {
                format!(
                    "slot {slot} holds {at} positions, the resumed entry starts at {}",
                    e.first_position
                )
            })?;
        skip = held as usize;
        let end = e.first_position as usize + skip;
        if end < at {
            m.stage.truncate_slot(slot, end).map_err(|e| format!("slot {slot}: {e}"))?;
            m.log.truncate(slot, end);
            at = end;
        }
    }
    if e.first_position as usize + skip != at {
        return Err(format!(
            "slot {slot} holds {at} positions, the micro-batch continues at {}",
            e.first_position
        ));
    }
    Ok(skip)
}

/// The last stage's token-out payload: a token for every sampling entry (from its last
/// row's logits; a verifying entry's after every row), its log-probabilities and verified
/// tokens. `computed[i]`: entry `i`'s rows that have logits (those the slot did not hold).
fn sample_tokens(
    m: &mut ModelRole,
    table: &BatchTable,
    computed: &[usize],
    every: bool,
    logits: &[f32],
    bytes: &mut Vec<u8>,
) {
    let n = if every { computed.iter().sum() } else { computed.iter().filter(|&&c| c > 0).count() };
    let vocab = logits.len() / n.max(1);
    let mut tokens = vec![NO_TOKEN; usize::from(m.limits.capacity)];
    let mut logprobs = vec![None; table.entries().len()];
    let mut verified = vec![Vec::new(); table.entries().len()];
    // Logit rows up to and including entry i's.
    let mut row0 = 0usize;
    for (i, e) in table.entries().iter().enumerate() {
        let c = computed[i];
        row0 += if every { c } else { usize::from(c > 0) };
        if !e.flags.contains(EntryFlags::SAMPLE) || c == 0 {
            continue;
        }
        let last = row0 - 1;
        let sampler =
            m.samplers[e.slot as usize].get_or_insert_with(|| Sampler::new(e.sampling.policy()));
        let masked = |j: usize, r| masked(table, i, j, r);
        let row = masked(e.tokens as usize - 1, &logits[last * vocab..(last + 1) * vocab]);
        // The token stands right after the entry's rows.
        tokens[i] = sampler.sample(&row, e.first_position + e.tokens);
        if e.flags.contains(EntryFlags::VERIFY) {
            let first = last + 1 - e.tokens as usize;
            verified[i] = (0..e.tokens as usize - 1)
                .map(|j| {
                    let r = masked(j, &logits[(first + j) * vocab..(first + j + 1) * vocab]);
                    sampler.sample(&r, e.first_position + j as u32 + 1)
                })
                .collect();
        }
        if e.flags.contains(EntryFlags::LOGPROBS) {
            let k = e.sampling.top_logprobs as usize;
            logprobs[i] = Some(crate::wire::logprobs::of_logits(&row, tokens[i], k));
        }
    }
    bytes.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    crate::wire::logprobs::encode(table, &logprobs, bytes);
    crate::wire::batch::encode_verify_section(table, &verified, bytes);
}

/// Row `j` of entry `i`'s logits as it samples: among the tokens its mask allows when the
/// entry is constrained (a grammar's set, computed by the orchestrator), else as it is.
fn masked<'a>(table: &BatchTable, i: usize, j: usize, row: &'a [f32]) -> Cow<'a, [f32]> {
    match table.mask(i, j) {
        Some(m) => {
            let mut r = row.to_vec();
            m.set.apply(&mut r);
            Cow::Owned(r)
        }
        None => Cow::Borrowed(row),
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
