//! Model execution: a stage computes exactly what the whole model computes for its range,
//! loading nothing outside it; every weights failure has its own reason.

use std::path::Path;

use crate::support::{GgufBuilder, scratch};
use swactor::model::GgufFile;
use swactor::model::draft::{DraftModel, DraftTarget};
use swactor::model::generate::{LocalPipeline, StopReason, even_split, generate};
use swactor::model::sampling::{Sampler, argmax};
use swactor::model::stage::{ComputeDevice, ModelStage, StageError, StageSpec};
use swactor::model::synth::{SynthSpec, write_model};
use swactor::model::tokenizer::tokenizer_from_gguf;
use swactor::speculate::Draft;
use swactor::wire::reason::WeightsFailure;
use swactor::wire::{ActivationDType, KvCacheDType, LayerRange, SamplingPolicy};

fn f32_model() -> std::path::PathBuf {
    let path = scratch().join("llama-f32-6.gguf");
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        write_model(
            &path,
            &SynthSpec {
                blocks: 6,
                hidden: 128,
                heads: 4,
                kv_heads: 2,
                ffn: 256,
                vocab: 300,
                seed: 3,
                ..SynthSpec::default()
            },
        )
        .expect("synth");
    });
    path
}

fn run(path: &Path, ranges: &[LayerRange], prompt: &[u32], tokens: u32) -> Vec<u32> {
    let mut p = LocalPipeline::load(
        &GgufFile::open(path).expect("model"),
        ranges,
        256,
        Default::default(),
        ActivationDType::F32,
        ComputeDevice::Cpu,
        1,
    )
    .expect("load");
    let mut out = Vec::new();
    let stop =
        generate(&mut p, prompt, tokens, &mut Sampler::new(SamplingPolicy::Greedy), &[], |t| {
            out.push(t)
        })
        .expect("generate");
    assert_eq!(stop, StopReason::MaxTokens);
    out
}

#[test]
fn splitting_into_one_to_four_stages_gives_the_one_process_tokens_exactly() {
    let path = f32_model();
    let prompt: Vec<u32> = (0..17).map(|i| (i * 37 + 5) % 290).collect();
    let reference = run(&path, &[LayerRange::new(0, 6)], &prompt, 64);
    assert_eq!(reference.len(), 64);
    assert!(
        reference.iter().collect::<std::collections::HashSet<_>>().len() > 1,
        "a degenerate model proves nothing"
    );
    for stages in 2..=4 {
        let ranges = even_split(6, stages);
        assert_eq!(run(&path, &ranges, &prompt, 64), reference, "{stages} stages: {ranges:?}");
    }
    let uneven = [LayerRange::new(0, 1), LayerRange::new(1, 5), LayerRange::new(5, 6)];
    assert_eq!(run(&path, &uneven, &prompt, 64), reference, "uneven split");
}

#[test]
fn a_stage_loads_only_its_own_tensors() {
    let path = f32_model();
    let facts = swactor::model::read_facts(&path).expect("facts");
    let middle = ModelStage::load(
        &GgufFile::open(&path).expect("model"),
        StageSpec {
            layers: LayerRange::new(2, 4),
            embedding: false,
            head: false,
            max_seq_len: 16,
            kv_cache: Default::default(),
            device: ComputeDevice::Cpu,
            threads: 1,
        },
    )
    .expect("load");
    assert_eq!(middle.loaded_bytes(), facts.bytes.per_block[2] + facts.bytes.per_block[3]);
    let first = ModelStage::load(
        &GgufFile::open(&path).expect("model"),
        StageSpec {
            layers: LayerRange::new(0, 1),
            embedding: true,
            head: false,
            max_seq_len: 16,
            kv_cache: Default::default(),
            device: ComputeDevice::Cpu,
            threads: 1,
        },
    )
    .expect("load");
    assert_eq!(first.loaded_bytes(), facts.bytes.per_block[0] + facts.bytes.embedding);
}

#[test]
fn sampling_is_deterministic_for_a_seed_and_greedy_picks_the_maximum() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 7919) % 101) as f32 / 10.0).collect();
    assert_eq!(Sampler::new(SamplingPolicy::Greedy).sample(&logits, 0), argmax(&logits));
    let policy =
        SamplingPolicy::Sample { temperature: 0.9, top_k: Some(10), top_p: Some(0.9), seed: 42 };
    let draw = |p| {
        let s = Sampler::new(p);
        (0..20).map(|at| s.sample(&logits, at)).collect::<Vec<_>>()
    };
    assert_eq!(draw(policy), draw(policy));
    let top10: Vec<u32> = {
        let mut idx: Vec<u32> = (0..50).collect();
        idx.sort_by(|a, b| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b)));
        idx.truncate(10);
        idx
    };
    assert!(draw(policy).iter().all(|t| top10.contains(t)), "top-k restricts the draw");
    let other =
        SamplingPolicy::Sample { temperature: 0.9, top_k: Some(10), top_p: Some(0.9), seed: 43 };
    assert_ne!(draw(policy), draw(other), "another seed draws another stream");
}

/// Why a stage of `path` fails to load (opening the file is part of a stage's load, as the
/// worker's role does it).
fn weights_reason(path: &Path, spec: StageSpec) -> WeightsFailure {
    let loaded =
        GgufFile::open(path).map_err(StageError::from).and_then(|f| ModelStage::load(&f, spec));
    match loaded {
        Err(StageError::Weights { reason, .. }) => reason,
        Err(e) => panic!("expected a weights failure, got {e}"),
        Ok(_) => panic!("expected a weights failure, the stage loaded"),
    }
}

fn spec(start: u32, end: u32) -> StageSpec {
    StageSpec {
        layers: LayerRange::new(start, end),
        embedding: true,
        head: true,
        max_seq_len: 16,
        kv_cache: Default::default(),
        device: ComputeDevice::Cpu,
        threads: 1,
    }
}

#[test]
fn each_weights_failure_has_its_own_reason() {
    let path = f32_model();
    let bytes = std::fs::read(&path).expect("read");
    let truncated = scratch().join("llama-truncated.gguf");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).expect("write");
    assert_eq!(weights_reason(&truncated, spec(0, 6)), WeightsFailure::ParseFailed);
    assert_eq!(weights_reason(&path, spec(4, 8)), WeightsFailure::InvalidRange);
    let missing = GgufBuilder::llama(2).write("llama-missing-tensors.gguf");
    assert_eq!(weights_reason(&missing, spec(0, 2)), WeightsFailure::MissingTensor);
    // 16 is GGML's iq2_xxs, which this build cannot compute.
    let iq = GgufBuilder::llama(1)
        .tensor("blk.0.attn_k.weight", &[256, 32], 16, 2112)
        .write("llama-iq.gguf");
    assert_eq!(weights_reason(&iq, spec(0, 1)), WeightsFailure::UnsupportedTensorType);
}

#[test]
fn smollm2_continues_the_lily_prompt_through_a_three_stage_split_with_either_kv_cache() {
    let Some(model) = crate::cli::smollm2() else { return };
    let file = GgufFile::open(&model).expect("header");
    let tok = tokenizer_from_gguf(file.header()).expect("tokenizer");
    let prompt = tok.encode("Once upon a time there was a little girl named Lily.", true, false);
    let ranges = even_split(30, 3);
    for kv in [KvCacheDType::F32, KvCacheDType::F16] {
        let mut p = LocalPipeline::load(
            &GgufFile::open(&model).expect("model"),
            &ranges,
            128,
            kv,
            ActivationDType::F32,
            ComputeDevice::Cpu,
            2,
        )
        .expect("load");
        let mut ids = Vec::new();
        generate(
            &mut p,
            &prompt,
            17,
            &mut Sampler::new(SamplingPolicy::Greedy),
            tok.eos.as_slice(),
            |t| ids.push(t),
        )
        .expect("generate");
        let text = tok.decode(&ids);
        // The f16 cache rounds every key and value: the first clause must survive it; the
        // f32 cache gives the sentence up to step 13, a near-tie (" new" against "." by
        // 0.12 logits in llama.cpp, by less in ours) that rounding may settle either way.
        let want = match kv {
            KvCacheDType::F32 => {
                " She was a curious and adventurous girl who loved to explore and learn"
            }
            KvCacheDType::F16 => " She was a curious and adventurous girl who loved to explore",
        };
        assert!(text.starts_with(want), "{kv:?}: {text:?}");
    }
}

fn synth(name: &str, dtype: swactor::model::synth::SynthDType) -> std::path::PathBuf {
    let path = scratch().join(name);
    if !path.exists() {
        let tmp = scratch().join(format!("{name}.{}.tmp", std::process::id()));
        write_model(
            &tmp,
            &SynthSpec {
                blocks: 3,
                hidden: 256,
                heads: 4,
                kv_heads: 2,
                ffn: 512,
                vocab: 300,
                seed: 11,
                dtype,
                ..SynthSpec::default()
            },
        )
        .expect("synth");
        std::fs::rename(&tmp, &path).expect("rename");
    }
    path
}

#[cfg(feature = "candle")]
#[test]
fn the_engine_generates_candles_greedy_tokens_on_the_f32_model() {
    let path = f32_model();
    let prompt: Vec<u32> = (0..17).map(|i| (i * 37 + 5) % 290).collect();
    let tokens = |device| {
        let mut p = LocalPipeline::load(
            &GgufFile::open(&path).expect("model"),
            &[LayerRange::new(0, 6)],
            256,
            Default::default(),
            ActivationDType::F32,
            device,
            1,
        )
        .expect("load");
        let mut out = Vec::new();
        generate(&mut p, &prompt, 64, &mut Sampler::new(SamplingPolicy::Greedy), &[], |t| {
            out.push(t)
        })
        .expect("generate");
        out
    };
    let candle = tokens(ComputeDevice::Candle);
    assert_eq!(candle.len(), 64);
    assert_eq!(tokens(ComputeDevice::Cpu), candle);
}

/// Logits of sequence 0's last row after `steps` decode steps, run beside `others` other
/// sequences (each with its own prompt), on a stage with `threads` threads.
fn logits_beside(
    path: &Path,
    others: usize,
    threads: u32,
    chunked_prompt: bool,
    kv_cache: KvCacheDType,
) -> Vec<u32> {
    logits_beside_with(path, others, threads, chunked_prompt, kv_cache, 9, 3)
}

/// [`logits_beside`] with prompts of `prompt_len` tokens over blocks `0..blocks` (the KV
/// caches hold 128 positions when the prompts are longer than 32).
pub fn logits_beside_with(
    path: &Path,
    others: usize,
    threads: u32,
    chunked_prompt: bool,
    kv_cache: KvCacheDType,
    prompt_len: usize,
    blocks: u32,
) -> Vec<u32> {
    use std::sync::atomic::AtomicBool;
    use swactor_engine::transformer::{Input, Output};
    let spec = StageSpec {
        layers: LayerRange::new(0, blocks),
        embedding: true,
        head: true,
        max_seq_len: if prompt_len > 32 { 128 } else { 64 },
        kv_cache,
        device: ComputeDevice::Cpu,
        threads,
    };
    let mut stage = ModelStage::load(&GgufFile::open(path).expect("model"), spec).expect("load");
    let prompt = |s: usize| -> Vec<u32> {
        (0..prompt_len).map(|i| ((i * 31 + s * 7 + 3) % 290) as u32).collect()
    };
    let e = stage.engine_mut().expect("engine");
    e.set_slots(others + 1);
    let no = AtomicBool::new(false);
    let last = |o: Output| match o {
        Output::Logits(l) => l,
        Output::Hidden(_) => panic!("hidden"),
    };
    // Prompts: sequence 0 as one prefill chunk, or one token at a time.
    let mut logits = Vec::new();
    for s in 0..=others {
        let p = prompt(s);
        if chunked_prompt || s > 0 {
            logits
                .push(last(e.forward(&vec![s; p.len()], Input::Tokens(&p), &no).expect("prefill")));
        } else {
            let mut l = Vec::new();
            for t in &p {
                l = last(e.forward(&[0], Input::Tokens(&[*t]), &no).expect("step"));
            }
            logits.push(l);
        }
    }
    let mut next: Vec<u32> = logits.iter().map(|l| argmax(l)).collect();
    let mut mine = Vec::new();
    for _ in 0..4 {
        let slots: Vec<usize> = (0..=others).collect();
        let l = last(e.forward(&slots, Input::Tokens(&next), &no).expect("decode"));
        let vocab = l.len() / (others + 1);
        for (i, n) in next.iter_mut().enumerate() {
            *n = argmax(&l[i * vocab..(i + 1) * vocab]);
        }
        mine.extend(l[..vocab].iter().map(|v| v.to_bits()));
    }
    mine
}

#[test]
fn a_rows_results_are_bitwise_the_same_at_batch_1_3_8_and_16_and_in_a_prefill_chunk() {
    use swactor::model::synth::SynthDType;
    for (name, dtype, kv) in [
        ("inv-f32.gguf", SynthDType::F32, KvCacheDType::F32),
        ("inv-q4_0.gguf", SynthDType::Q4_0, KvCacheDType::F32),
        ("inv-q8_0.gguf", SynthDType::Q8_0, KvCacheDType::F32),
        ("inv-q8_0.gguf", SynthDType::Q8_0, KvCacheDType::F16),
    ] {
        let path = synth(name, dtype);
        let beside = |others, threads, chunked| logits_beside(&path, others, threads, chunked, kv);
        let alone = beside(0, 1, false);
        for others in [2, 7, 15] {
            assert_eq!(beside(others, 1, false), alone, "{dtype:?} {kv:?}: batch {}", others + 1);
        }
        assert_eq!(beside(0, 1, true), alone, "{dtype:?} {kv:?}: prompt as one prefill chunk");
        assert_eq!(beside(7, 3, true), alone, "{dtype:?} {kv:?}: batch 8 on 3 threads");
    }
}

/// The tokens of `generate_speculative` at `max_k`, beside its counters.
fn run_speculative(
    path: &Path,
    ranges: &[LayerRange],
    prompt: &[u32],
    tokens: u32,
    policy: SamplingPolicy,
    max_k: usize,
    draft: Option<&Path>,
) -> (Vec<u32>, swactor::model::generate::SpecCounts) {
    let mut p = LocalPipeline::load(
        &GgufFile::open(path).expect("model"),
        ranges,
        256,
        Default::default(),
        ActivationDType::F32,
        ComputeDevice::Cpu,
        1,
    )
    .expect("load");
    let mut out = Vec::new();
    let mut counts = Default::default();
    let mut drafter: Box<dyn Draft> = match draft {
        None => Box::new(swactor::speculate::ngram::NgramDrafter::default()),
        // Its steps counted as free, so that drafts are always tried.
        Some(d) => Box::new(DraftModel::load(d, 256, 1, &free_target(path)).expect("draft")),
    };
    let stop = swactor::model::generate::generate_speculative(
        &mut p,
        prompt,
        tokens,
        &mut Sampler::new(policy),
        &[],
        (drafter.as_mut(), max_k, Some(0.0)),
        &mut counts,
        |t| {
            out.push(t);
            true
        },
    )
    .expect("generate");
    assert_eq!(stop, StopReason::MaxTokens);
    (out, counts)
}

#[test]
fn speculation_gives_the_same_tokens_at_every_draft_length_stage_count_and_policy() {
    let path = f32_model();
    // A prompt that repeats itself, so that the n-gram drafter proposes often.
    let base: Vec<u32> = (0..12).map(|i| 20 + (i * 7) % 50).collect();
    let prompt: Vec<u32> = base.iter().chain(&base).chain(&base[..6]).copied().collect();
    let sampled =
        SamplingPolicy::Sample { temperature: 0.9, top_k: Some(40), top_p: None, seed: 5 };
    let mut drafted = 0;
    for policy in [SamplingPolicy::Greedy, sampled] {
        let plain = {
            let mut p = LocalPipeline::load(
                &GgufFile::open(&path).expect("model"),
                &even_split(6, 1),
                256,
                Default::default(),
                ActivationDType::F32,
                ComputeDevice::Cpu,
                1,
            )
            .expect("load");
            let mut out = Vec::new();
            generate(&mut p, &prompt, 48, &mut Sampler::new(policy), &[], |t| out.push(t))
                .expect("generate");
            out
        };
        for stages in 1..=4 {
            for max_k in [1, 3, 8] {
                let ranges = even_split(6, stages);
                let (out, counts) =
                    run_speculative(&path, &ranges, &prompt, 48, policy, max_k, None);
                assert_eq!(out, plain, "{policy:?}, {stages} stages, k <= {max_k}");
                assert!(counts.accepted_tokens <= counts.draft_tokens);
                drafted += counts.draft_tokens;
            }
        }
    }
    assert!(drafted > 0, "the drafter never proposed: the test proves nothing");
}

#[test]
fn a_rejected_draft_leaves_no_row_behind_in_any_stage() {
    // Truncating to the accepted length and continuing gives the same logits as never
    // having run the rejected rows.
    let path = f32_model();
    let load = || {
        LocalPipeline::load(
            &GgufFile::open(&path).expect("model"),
            &even_split(6, 2),
            256,
            Default::default(),
            ActivationDType::F32,
            ComputeDevice::Cpu,
            1,
        )
        .expect("load")
    };
    let prompt: Vec<u32> = (1..20).collect();
    let mut a = load();
    a.step(&prompt).expect("prefill");
    let verified = a.verify(&[7, 8, 9, 10]).expect("verify");
    assert_eq!(verified.len() % 4, 0, "logits for every row");
    a.truncate(prompt.len() + 1).expect("truncate");
    let after = a.step(&[11]).expect("continue");
    let mut b = load();
    b.step(&prompt).expect("prefill");
    b.step(&[7]).expect("step");
    let want = b.step(&[11]).expect("continue");
    assert_eq!(after, want);
}

#[test]
fn a_draft_model_gives_the_same_tokens_and_the_model_itself_as_draft_is_always_accepted() {
    let path = f32_model();
    let other = scratch().join("llama-f32-6-other.gguf");
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let spec = SynthSpec {
            blocks: 2,
            hidden: 64,
            heads: 2,
            kv_heads: 1,
            ffn: 128,
            vocab: 300,
            seed: 11,
            ..SynthSpec::default()
        };
        write_model(&other, &spec).expect("synth");
    });
    let prompt: Vec<u32> = (1..15).collect();
    let plain = run(&path, &even_split(6, 1), &prompt, 40);
    for stages in [1, 3] {
        let ranges = even_split(6, stages);
        let greedy = SamplingPolicy::Greedy;
        let (same, counts) = run_speculative(&path, &ranges, &prompt, 40, greedy, 4, Some(&path));
        assert_eq!(same, plain, "{stages} stages, the model as its own draft");
        assert!(counts.draft_tokens > 0);
        assert_eq!(counts.accepted_tokens, counts.draft_tokens, "its own greedy drafts all hold");
        let (out, _) = run_speculative(&path, &ranges, &prompt, 40, greedy, 4, Some(&other));
        assert_eq!(out, plain, "{stages} stages, another model as draft");
    }
    // A draft model with another vocabulary is refused.
    let small = scratch().join("llama-f32-vocab-400.gguf");
    write_model(
        &small,
        &SynthSpec {
            blocks: 1,
            hidden: 64,
            heads: 2,
            kv_heads: 1,
            ffn: 128,
            vocab: 400,
            ..SynthSpec::default()
        },
    )
    .expect("synth");
    assert!(DraftModel::load(&small, 256, 1, &free_target(&path)).is_err());
}

/// `path` as a draft's target whose steps cost nothing (so that drafts are always tried).
fn free_target(path: &Path) -> DraftTarget {
    let facts = swactor::model::read_facts(path).expect("facts");
    DraftTarget { step_bytes: u64::MAX, ..DraftTarget::of(&facts) }
}

#[test]
fn a_draft_model_with_other_tokens_of_the_same_count_is_refused() {
    let path = f32_model();
    let mut bytes = std::fs::read(&path).expect("read");
    let eot = b"<|endoftext|>";
    let at = bytes.windows(eot.len()).position(|w| w == eot).expect("the end-of-text token");
    bytes[at + 2] = b'E';
    let other = scratch().join("llama-f32-6-other-tokens.gguf");
    std::fs::write(&other, &bytes).expect("write");
    let (a, b) = (swactor::model::read_facts(&path), swactor::model::read_facts(&other));
    let (a, b) = (a.expect("facts"), b.expect("facts"));
    assert_eq!(a.vocab_size, b.vocab_size, "the same count of tokens");
    assert_ne!(a.vocab_digest, b.vocab_digest);
    let e = DraftModel::load(&other, 256, 1, &free_target(&path)).expect_err("other tokens");
    assert!(e.to_string().contains("vocabulary"), "{e}");
    DraftModel::load(&path, 256, 1, &free_target(&path)).expect("the same vocabulary");
    // `model synth --vocab-from` writes a tiny model with the model's own tokens.
    let tiny = scratch().join("llama-f32-6-tiny-draft.gguf");
    let synth = std::process::Command::new(env!("CARGO_BIN_EXE_swactor"))
        .args(["model", "synth", "--blocks", "1", "--hidden", "64", "--heads", "2"])
        .args(["--kv-heads", "1", "--ffn", "128", "--vocab-from"])
        .arg(&path)
        .arg("--out")
        .arg(&tiny)
        .output()
        .expect("synth");
    assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
    let t = swactor::model::read_facts(&tiny).expect("facts");
    assert_eq!((t.vocab_size, &t.vocab_digest), (a.vocab_size, &a.vocab_digest));
    DraftModel::load(&tiny, 256, 1, &free_target(&path)).expect("a draft of the model");
    // `generate` refuses it as a usage error, `bad_draft_model`.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swactor"))
        .args(["generate", "--json", "--prompt", "hi", "--max-tokens", "2", "--model"])
        .arg(&path)
        .arg("--draft-model")
        .arg(&other)
        .output()
        .expect("generate");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("an error line");
    assert_eq!(line["reason"], "bad_draft_model");
    // So does `run local`, checking the draft's header before its session loads it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_swactor"))
        .args(["run", "local", "--stages", "1", "--json", "--prompt", "hi", "--model"])
        .arg(&path)
        .arg("--draft-model")
        .arg(&other)
        .output()
        .expect("run local");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let last = String::from_utf8_lossy(&out.stdout).lines().last().map(str::to_owned);
    let line: serde_json::Value = serde_json::from_str(&last.unwrap_or_default()).expect("a line");
    assert_eq!(line["reason"], "bad_draft_model", "{line}");
    assert!(line.to_string().contains("vocabulary"), "{line}");
}

#[test]
fn a_draft_model_drafts_several_slots_at_once_as_each_alone_and_follows_a_changed_history() {
    use swactor::speculate::DraftAsk;
    let path = f32_model();
    let load = || DraftModel::load(&path, 256, 1, &free_target(&path)).expect("draft");
    fn ask(slot: u16, history: &[u32], k: usize) -> DraftAsk {
        DraftAsk { slot, history: history.to_vec(), k }
    }
    let alone = |history: &[u32], k| load().draft(&[ask(0, history, k)]).pop().expect("a draft");
    let a: Vec<u32> = (1..15).collect();
    let b: Vec<u32> = (40..47).collect();
    let (alone_a, alone_b) = (alone(&a, 5), alone(&b, 3));
    assert_eq!((alone_a.len(), alone_b.len()), (5, 3));
    // Two sequences in one call, in slots 2 and 0: each as if it were alone.
    let mut m = load();
    let both = m.draft(&[ask(2, &a, 5), ask(0, &b, 3)]);
    assert_eq!(both, vec![alone_a.clone(), alone_b]);
    // The target kept two drafted tokens and said another: the slot's cache drops the
    // rest, and the next draft is a fresh model's for that history.
    let mut h = a.clone();
    h.extend_from_slice(&alone_a[..2]);
    h.push((alone_a[2] + 1) % 300);
    assert_eq!(m.draft(&[ask(2, &h, 4)]), vec![alone(&h, 4)]);
    // Everything accepted and one more: it continues.
    let mut h2 = h.clone();
    h2.extend_from_slice(&m.draft(&[ask(2, &h, 4)])[0]);
    h2.push(7);
    assert_eq!(m.draft(&[ask(2, &h2, 4)]), vec![alone(&h2, 4)]);
    // Another sequence takes slot 0: it starts over.
    let c: Vec<u32> = (100..130).collect();
    assert_eq!(m.draft(&[ask(0, &c, 4)]), vec![alone(&c, 4)]);
    // Asks it cannot serve get nothing: k 0, an empty history, a slot asked twice.
    let got = m.draft(&[ask(1, &c, 0), ask(1, &[], 3), ask(3, &c, 2), ask(3, &a, 2)]);
    assert_eq!(got, vec![vec![], vec![], alone(&c, 2), vec![]]);
}
