//! Decoder fuzzing by generated and mutated inputs (no coverage-guided fuzzer runs on
//! stable Rust here): every decoder of untrusted bytes — the object header, control
//! frames, worker JSON lines, the GGUF header and model facts, the pool file and the plan
//! JSON — is fed valid encodings with seeded random bit flips, truncations, extensions,
//! splices and length-like words written over them. Each input must decode or be refused
//! with a typed error: a panic is a finding (caught and reported with the seed and
//! iteration that replays it), and so is an input that takes longer than [`SLOW`].
//! `cargo test` runs a short pass; `swactor util fuzz` runs any number of iterations.
#![allow(clippy::disallowed_methods)] // measures its own time per input

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use crate::control::{ControlMessage, FrameDecoder};
use crate::planner::Pool;
use crate::wire::{HEADER_LEN, ObjectFlags, ObjectHeader, ObjectId, RunPlan, Sequence};
use crate::worker::protocol::{Command, Event, decode_line, encode_line};

/// An input slower than this is a finding (a decoder must not hang on any input).
pub const SLOW: Duration = Duration::from_millis(500);

/// A decoder under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The 40-byte object header.
    Header,
    /// Control frames (length-prefixed, versioned JSON).
    Control,
    /// Worker JSON lines, both directions.
    WorkerLine,
    /// The GGUF header and the model facts read from it.
    Gguf,
    /// The pool file (TOML) and the planner's pool checks.
    Pool,
    /// A run plan (JSON) and its validation.
    Plan,
    /// A micro-batch: its entry table and the rows or tokens after it.
    MicroBatch,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 7] = [
        Target::Header,
        Target::Control,
        Target::WorkerLine,
        Target::Gguf,
        Target::Pool,
        Target::Plan,
        Target::MicroBatch,
    ];
}

/// What one target's run found.
#[derive(Debug, Clone, Serialize)]
pub struct FuzzReport {
    /// The decoder.
    pub target: Target,
    /// The seed of the run.
    pub seed: u64,
    /// Inputs tried.
    pub inputs: u64,
    /// Inputs that decoded.
    pub decoded: u64,
    /// Inputs refused with a typed error.
    pub rejected: u64,
    /// Panics: (iteration, message). Replay with the same seed.
    pub panics: Vec<(u64, String)>,
    /// Inputs slower than [`SLOW`]: (iteration, microseconds).
    pub slow: Vec<(u64, u64)>,
    /// The slowest input, in microseconds.
    pub slowest_us: u64,
}

impl FuzzReport {
    /// Whether nothing was found.
    pub fn clean(&self) -> bool {
        self.panics.is_empty() && self.slow.is_empty()
    }
}

/// Runs `iterations` mutated inputs through `target`'s decoder.
pub fn run(target: Target, seed: u64, iterations: u64) -> FuzzReport {
    run_with(target, &corpus(target), |input| decode(target, input), seed, iterations)
}

/// Runs `iterations` mutations of `corpus` through `decode` (`true`: decoded).
fn run_with(
    target: Target,
    corpus: &[Vec<u8>],
    decode: impl Fn(&[u8]) -> bool,
    seed: u64,
    iterations: u64,
) -> FuzzReport {
    let mut rng = StdRng::seed_from_u64(seed ^ (target as u64).wrapping_mul(0x9e37_79b9));
    let mut report = FuzzReport {
        target,
        seed,
        inputs: 0,
        decoded: 0,
        rejected: 0,
        panics: Vec::new(),
        slow: Vec::new(),
        slowest_us: 0,
    };
    for i in 0..iterations {
        let base = &corpus[rng.random_range(0..corpus.len())];
        let other = &corpus[rng.random_range(0..corpus.len())];
        // One in eight inputs is a valid one, unchanged: the decoders must accept those.
        let input = if i % 8 == 0 { base.clone() } else { mutate(&mut rng, base, other) };
        let t0 = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| decode(&input)));
        let took = t0.elapsed();
        report.inputs += 1;
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        report.slowest_us = report.slowest_us.max(us);
        if took > SLOW {
            report.slow.push((i, us));
        }
        match outcome {
            Ok(true) => report.decoded += 1,
            Ok(false) => report.rejected += 1,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                report.panics.push((i, message));
            }
        }
    }
    report
}

/// Decodes one input; `true` when it decoded, `false` when it was refused.
fn decode(target: Target, input: &[u8]) -> bool {
    match target {
        Target::Header => match <&[u8; HEADER_LEN]>::try_from(input) {
            Ok(bytes) => ObjectHeader::decode(bytes).is_ok(),
            Err(_) => false,
        },
        Target::Control => {
            let mut decoder = FrameDecoder::new();
            decoder.push(input);
            let mut any = false;
            while let Some(m) = decoder.next_message() {
                any |= m.is_ok();
                if m.is_err() {
                    break;
                }
            }
            any
        }
        Target::WorkerLine => {
            let text = String::from_utf8_lossy(input);
            let command = decode_line::<Command>(&text).is_ok();
            decode_line::<Event>(&text).is_ok() || command
        }
        Target::Gguf => {
            // The input is the header; the tensor data that follows it is never read, only
            // its length counts (extents are checked against the file's length).
            let len = input.len() as u64 + gguf_sample().1;
            crate::model::gguf::decode_header(input, len)
                .map_err(crate::model::ModelError::from)
                .and_then(|h| crate::model::facts::facts_from_header(&h))
                .is_ok()
        }
        Target::Pool => {
            let text = String::from_utf8_lossy(input);
            Pool::from_toml(&text).is_ok_and(|p| crate::planner::check_pool(&p).is_ok())
        }
        Target::Plan => serde_json::from_slice::<RunPlan>(input)
            .is_ok_and(|p| crate::planner::validate_plan(&p).is_ok()),
        Target::MicroBatch => {
            use crate::wire::batch::BatchTable;
            let rows = BatchTable::split_rows(input, BATCH_LIMITS, 4).is_ok();
            let out = crate::wire::logprobs::split_token_out(input, BATCH_LIMITS, 1000).is_ok();
            BatchTable::split_tokens(input, BATCH_LIMITS).is_ok() || rows || out
        }
    }
}

/// The session the micro-batch target decodes for: 4 slots, a context of 64.
const BATCH_LIMITS: crate::wire::batch::BatchLimits = crate::wire::batch::BatchLimits {
    capacity: 4,
    max_seq_len: 64,
    cache_blocks: 0,
    mask_bytes: 0,
};

/// A token-in micro-batch and a token-out one.
fn batch_corpus() -> Vec<Vec<u8>> {
    use crate::wire::batch::{BatchEntry, BatchTable, EntryFlags, EntrySampling, NO_TOKEN};
    let entry = |slot, first, tokens, flags| BatchEntry {
        slot,
        first_position: first,
        tokens,
        flags,
        sampling: EntrySampling {
            temperature: 0.7,
            top_p: 0.9,
            top_k: 40,
            seed: 3,
            top_logprobs: 0,
        },
    };
    let table = BatchTable::new(
        BATCH_LIMITS.capacity,
        vec![
            entry(2, 0, 3, EntryFlags::RESET | EntryFlags::SAMPLE),
            entry(0, 9, 1, EntryFlags::SAMPLE),
        ],
    );
    let mut token_in = table.encode();
    token_in.extend([5u32, 6, 7, 8].iter().flat_map(|t| t.to_le_bytes()));
    let mut token_out = table.encode();
    token_out.extend([11u32, 12, NO_TOKEN, NO_TOKEN].iter().flat_map(|t| t.to_le_bytes()));
    // A verifying entry (its last token and a draft of 3, after a rollback) beside a reset.
    let verifying = BatchTable::new(
        BATCH_LIMITS.capacity,
        vec![
            entry(1, 7, 4, EntryFlags::SAMPLE | EntryFlags::VERIFY | EntryFlags::ROLLBACK),
            entry(3, 0, 2, EntryFlags::RESET | EntryFlags::SAMPLE),
        ],
    );
    let mut verify_in = verifying.encode();
    verify_in.extend([5u32, 6, 7, 8, 9, 10].iter().flat_map(|t| t.to_le_bytes()));
    let mut verify_out = verifying.encode();
    verify_out.extend([21u32, 22, NO_TOKEN, NO_TOKEN].iter().flat_map(|t| t.to_le_bytes()));
    crate::wire::batch::encode_verify_section(
        &verifying,
        &[vec![1, 2, 3], vec![]],
        &mut verify_out,
    );
    vec![token_in, token_out, verify_in, verify_out]
}

/// Applies one to three random mutations to `base` (`other` for splices).
fn mutate(rng: &mut StdRng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = base.to_vec();
    for _ in 0..rng.random_range(1..=3) {
        let len = out.len();
        match rng.random_range(0..7u8) {
            // Bit flips.
            0 if len > 0 => {
                for _ in 0..rng.random_range(1..=8) {
                    let i = rng.random_range(0..len);
                    out[i] ^= 1 << rng.random_range(0..8);
                }
            }
            // Truncation.
            1 if len > 0 => out.truncate(rng.random_range(0..len)),
            // Extension with random bytes.
            2 => {
                for _ in 0..rng.random_range(1..=64) {
                    out.push(rng.random());
                }
            }
            // A length-like word written over 4 or 8 bytes.
            3 if len >= 8 => {
                let words: [u64; 6] =
                    [0, 1, u64::from(u32::MAX), u64::MAX, 1 << 63, rng.random::<u64>()];
                let w = words[rng.random_range(0..words.len())].to_le_bytes();
                let width = if rng.random() { 4 } else { 8 };
                let i = rng.random_range(0..=len - width);
                out[i..i + width].copy_from_slice(&w[..width]);
            }
            // A slice of the input duplicated in place.
            4 if len > 1 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..len.min(a + 256));
                let slice = out[a..=b.min(len - 1)].to_vec();
                let at = rng.random_range(0..=out.len());
                out.splice(at..at, slice);
            }
            // A splice with another valid input.
            5 if !other.is_empty() && len > 0 => {
                let cut = rng.random_range(0..len);
                let from = rng.random_range(0..other.len());
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            // A byte set to an interesting value.
            _ if len > 0 => {
                let i = rng.random_range(0..len);
                out[i] = [0u8, 0xff, b'"', b'{', b'}', b'\n', b'[', b'9'][rng.random_range(0..8)];
            }
            _ => {}
        }
    }
    out
}

/// Valid encodings of each target, the starting points of every mutation.
fn corpus(target: Target) -> Vec<Vec<u8>> {
    match target {
        Target::Header => {
            [(1u64, 0u64, 4u64, ObjectFlags::PREFILL), (7, 6, 2304, ObjectFlags::NONE)]
                .iter()
                .map(|&(id, seq, extent, flags)| {
                    ObjectHeader::new(ObjectId(id), Sequence(seq), extent, flags).encode().to_vec()
                })
                .collect()
        }
        Target::Control => control_corpus(),
        Target::WorkerLine => worker_corpus(),
        Target::Gguf => vec![gguf_sample().0.clone()],
        Target::Pool => vec![pool_text().into_bytes()],
        Target::Plan => plan_corpus(),
        Target::MicroBatch => batch_corpus(),
    }
}

fn control_corpus() -> Vec<Vec<u8>> {
    use crate::control::PoolMember;
    use crate::wire::{NodeId, RunId, StageIndex};
    let messages = [
        ControlMessage::Hello {
            orchestrator: NodeId(100),
            members: vec![PoolMember { node_id: NodeId(1), endpoint_id: format!("{:064x}", 1) }],
        },
        ControlMessage::NodeAvailable {
            node_id: NodeId(1),
            endpoint_id: format!("{:064x}", 1),
            addrs: vec!["127.0.0.1:7000".into()],
            swim_addr: Some("127.0.0.1:7001".into()),
            memory_bytes: Some(8 << 30),
            arena_bytes: Some(256 << 20),
            device: Some("cpu".into()),
            prompt_cache_bytes: None,
            speed: None,
        },
        ControlMessage::Observe { delegation: "00".repeat(64), members: vec![] },
        ControlMessage::MemberView { up: vec![NodeId(1)], suspect: vec![NodeId(2)] },
        ControlMessage::StageReady { run_id: RunId(1), stage_index: StageIndex(0) },
        ControlMessage::StopRun { run_id: RunId(1), faulted: false, park: false },
    ];
    let mut out: Vec<Vec<u8>> =
        messages.iter().filter_map(|m| crate::control::encode(m).ok()).collect();
    // Two frames back to back.
    let both = [out[0].clone(), out[2].clone()].concat();
    out.push(both);
    if let Some(plan) = sample_plan()
        && let Some(p) = plan.provision(StageIndex(0))
        && let Ok(frame) =
            crate::control::encode(&ControlMessage::ProvisionStage { provision: Box::new(p) })
    {
        out.push(frame);
    }
    out
}

fn worker_corpus() -> Vec<Vec<u8>> {
    use crate::wire::{RingId, RoleId};
    use crate::worker::protocol::ShutdownMode;
    vec![
        encode_line(&Command::ShutdownWorker { mode: ShutdownMode::Graceful }).into_bytes(),
        encode_line(&Command::ReleaseRole { role_id: RoleId(1), park: false }).into_bytes(),
        encode_line(&Command::RingReadable { ring_id: RingId(3) }).into_bytes(),
        encode_line(&Command::AbortStep).into_bytes(),
        encode_line(&Event::RingQuiesced { ring_id: RingId(3) }).into_bytes(),
        encode_line(&Event::RoleReleased { role_id: RoleId(1) }).into_bytes(),
    ]
}

/// The header of a small synthesized model and the length of its tensor data (never read
/// by the decoder: the file length is what it checks extents against), made once.
fn gguf_sample() -> &'static (Vec<u8>, u64) {
    static SAMPLE: std::sync::OnceLock<(Vec<u8>, u64)> = std::sync::OnceLock::new();
    SAMPLE.get_or_init(|| {
        let file = gguf_file();
        let len = file.len() as u64;
        let offset = crate::model::gguf::decode_header(&file, len)
            .map_or(file.len(), |c| usize::try_from(c.tensor_data_offset).unwrap_or(file.len()));
        let offset = offset.min(file.len());
        (file[..offset].to_vec(), len - offset as u64)
    })
}

/// A small synthesized model's bytes.
fn gguf_file() -> Vec<u8> {
    use crate::model::synth::{SynthSpec, write_model};
    let spec = SynthSpec {
        blocks: 2,
        hidden: 64,
        heads: 4,
        kv_heads: 2,
        ffn: 128,
        vocab: 300,
        context: 128,
        ..SynthSpec::default()
    };
    let path = std::env::temp_dir().join(format!(
        "swactor-fuzz-{}-{:?}.gguf",
        std::process::id(),
        std::thread::current().id()
    ));
    let bytes = write_model(&path, &spec).ok().and_then(|()| std::fs::read(&path).ok());
    let _ = std::fs::remove_file(&path);
    bytes.unwrap_or_default()
}

fn pool_text() -> String {
    format!(
        "[orchestrator]\nnode_id = 100\n\n[[nodes]]\nnode_id = 1\nendpoint_id = \"{:064x}\"\n\
         addrs = [\"127.0.0.1:7400\"]\nmemory_bytes = 8589934592\n\n[[nodes]]\nnode_id = 2\n\
         endpoint_id = \"{:064x}\"\naddrs = [\"127.0.0.1:7401\"]\nmemory_bytes = 4294967296\n\n\
         [placement]\nlayers = [\"0..1\", \"1..2\"]\n",
        1, 2
    )
}

fn plan_corpus() -> Vec<Vec<u8>> {
    sample_plan().and_then(|p| serde_json::to_vec(&p).ok()).into_iter().collect()
}

/// A real plan over the sample pool and a synthesized model's facts.
fn sample_plan() -> Option<RunPlan> {
    use crate::planner::{Placement, PlanRequest, plan};
    use crate::wire::{ActivationDType, RunId, RuntimeConfig, SamplingPolicy, WeightSource};
    let gguf = gguf_file();
    let len = gguf.len() as u64;
    let header = crate::model::gguf::decode_header(&gguf, len).ok()?;
    let facts = crate::model::facts::facts_from_header(&header).ok()?;
    let pool = Pool::from_toml(&pool_text()).ok()?;
    plan(&PlanRequest {
        run_id: RunId(1),
        model: &facts,
        source: WeightSource::Local { path: "/m.gguf".into() },
        pool: &pool,
        stages: Some(2),
        placement: Placement::default(),
        runtime: RuntimeConfig {
            max_seq_len: 64,
            kv_cache: Default::default(),
            activation_dtype: ActivationDType::F32,
            max_tokens: 8,
            sampling: SamplingPolicy::Greedy,
            max_sequences: 1,
            max_top_logprobs: None,
            mask_bytes: 0,
        },
        fit_context: false,
        prompt_cache_bytes: None,
        min_speedup: None,
        prompt_tokens: 4,
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_panic_is_found_and_replays_with_its_seed() {
        // A "decoder" that panics when a length-like word lands on its first 4 bytes.
        let corpus = vec![vec![1u8; 16]];
        let planted = |input: &[u8]| {
            assert!(input.len() < 4 || input[..4] != [0xff; 4], "planted overflow");
            true
        };
        std::panic::set_hook(Box::new(|_| {}));
        let first = run_with(Target::Header, &corpus, planted, 3, 20_000);
        let again = run_with(Target::Header, &corpus, planted, 3, 20_000);
        let _ = std::panic::take_hook();
        assert!(!first.panics.is_empty(), "the planted panic was not found");
        assert_eq!(first.panics, again.panics, "a seed replays the same findings");
        assert!(first.panics.iter().all(|(_, m)| m.contains("planted overflow")));
    }

    #[test]
    fn unchanged_valid_inputs_decode() {
        for target in Target::ALL {
            for input in corpus(target) {
                assert!(decode(target, &input), "{target:?}: a valid input was refused");
            }
        }
    }
}
