//! Model families: every synthesized family (Llama 3, Qwen 2.5, Qwen 3, Gemma 3, and the
//! mixtures of experts Qwen 3 MoE, Qwen 2 MoE, Mixtral and gpt-oss) splits
//! across one to four stages with exactly the one-process tokens and keeps its rows
//! batch-invariant, sliding window included; Gemma 3 270M continues a prompt through three
//! stages as `generate` does, through the library and through `run local`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::scratch;
use swactor::model::GgufFile;
use swactor::model::generate::{LocalPipeline, even_split, generate};
use swactor::model::sampling::Sampler;
use swactor::model::stage::ComputeDevice;
use swactor::model::synth::{SynthArch, SynthSpec, write_model};
use swactor::model::tokenizer::tokenizer_from_gguf;
use swactor::wire::{ActivationDType, KvCacheDType, LayerRange, SamplingPolicy};

/// A six-block model of `arch` (Gemma 3: blocks 0-4 slide over 16 positions, 5 is global).
pub(crate) fn family_model(arch: SynthArch) -> PathBuf {
    let path = scratch().join(format!("family-{}.gguf", arch.name()));
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let tmp = path.with_extension("part");
        write_model(
            &tmp,
            &SynthSpec {
                blocks: 6,
                hidden: 128,
                heads: 4,
                kv_heads: 2,
                ffn: 256,
                vocab: 300,
                seed: 5,
                arch,
                ..SynthSpec::default()
            },
        )
        .expect("synth");
        std::fs::rename(&tmp, &path).expect("rename");
    }
    path
}

/// Greedy tokens of `path` split at `ranges` (the KV caches hold 256 positions: a sliding
/// block's ring of 80 wraps around several times).
fn tokens(
    path: &Path,
    ranges: &[LayerRange],
    prompt: &[u32],
    n: u32,
    kv: KvCacheDType,
) -> Vec<u32> {
    let mut p = LocalPipeline::load(
        &GgufFile::open(path).expect("model"),
        ranges,
        256,
        kv,
        ActivationDType::F32,
        ComputeDevice::Cpu,
        1,
    )
    .expect("load");
    let mut out = Vec::new();
    generate(&mut p, prompt, n, &mut Sampler::new(SamplingPolicy::Greedy), &[], |t| out.push(t))
        .expect("generate");
    out
}

pub(crate) const FAMILIES: [SynthArch; 8] = [
    SynthArch::Llama3,
    SynthArch::Qwen2,
    SynthArch::Qwen3,
    SynthArch::Gemma3,
    SynthArch::Qwen3Moe,
    SynthArch::Qwen2Moe,
    SynthArch::Mixtral,
    SynthArch::GptOss,
];

#[test]
fn every_family_split_into_one_to_four_stages_gives_the_one_process_tokens_exactly() {
    // A 100-token prompt: the prefill is one chunk of more rows than a sliding pass takes.
    let prompt: Vec<u32> = (0..100).map(|i| (i * 37 + 5) % 290).collect();
    for arch in FAMILIES {
        let path = family_model(arch);
        let whole = tokens(&path, &[LayerRange::new(0, 6)], &prompt, 48, KvCacheDType::F32);
        assert_eq!(whole.len(), 48, "{arch:?}");
        for stages in 2..=4 {
            let ranges = even_split(6, stages);
            let split = tokens(&path, &ranges, &prompt, 48, KvCacheDType::F32);
            assert_eq!(split, whole, "{arch:?}: {stages} stages {ranges:?}");
        }
    }
}

#[test]
fn a_mixture_of_experts_in_mxfp4_splits_into_two_and_three_stages_with_the_one_process_tokens() {
    let path = scratch().join("family-qwen3moe-mxfp4.gguf");
    let spec = SynthSpec {
        blocks: 6,
        hidden: 128,
        heads: 4,
        kv_heads: 2,
        ffn: 256,
        vocab: 300,
        seed: 5,
        arch: SynthArch::Qwen3Moe,
        dtype: swactor::model::synth::SynthDType::Mxfp4,
        ..SynthSpec::default()
    };
    write_model(&path, &spec).expect("synth");
    let prompt: Vec<u32> = (0..40).map(|i| (i * 37 + 5) % 290).collect();
    let whole = tokens(&path, &[LayerRange::new(0, 6)], &prompt, 32, KvCacheDType::F32);
    assert_eq!(whole.len(), 32);
    for stages in [2, 3] {
        let split = tokens(&path, &even_split(6, stages), &prompt, 32, KvCacheDType::F32);
        assert_eq!(split, whole, "{stages} stages");
    }
}

#[test]
fn every_familys_rows_are_bitwise_the_same_alone_batched_and_in_a_prefill_chunk() {
    for arch in FAMILIES {
        let path = family_model(arch);
        for kv in [KvCacheDType::F32, KvCacheDType::F16] {
            // Prompts of 100 tokens cross Gemma's 16-token window and its 80-position ring.
            let beside = |others, threads, chunked| {
                crate::execution::logits_beside_with(&path, others, threads, chunked, kv, 100, 6)
            };
            let alone = beside(0, 1, false);
            for others in [2, 7] {
                assert_eq!(
                    beside(others, 1, false),
                    alone,
                    "{arch:?} {kv:?}: batch {}",
                    others + 1
                );
            }
            assert_eq!(beside(0, 1, true), alone, "{arch:?} {kv:?}: one prefill chunk");
            assert_eq!(beside(7, 2, true), alone, "{arch:?} {kv:?}: batch 8 on 2 threads");
        }
    }
}

#[test]
fn a_sliding_window_block_forgets_what_lies_outside_its_window() {
    // Two prompts that differ only in their first token: on a model whose every block
    // slides (one block of Gemma 3), the next token's logits cannot tell them apart once
    // the difference is more than a window behind; with a global block they can.
    let path = family_model(SynthArch::Gemma3);
    let logits = |layers: LayerRange, first: u32| {
        let spec = swactor::model::stage::StageSpec {
            layers,
            embedding: true,
            head: true,
            max_seq_len: 64,
            kv_cache: KvCacheDType::F32,
            device: ComputeDevice::Cpu,
            threads: 1,
        };
        let mut stage =
            swactor::model::stage::ModelStage::load(&GgufFile::open(&path).expect("model"), spec)
                .expect("load");
        let prompt: Vec<u32> =
            std::iter::once(first).chain((1..40).map(|i| (i * 13 + 7) % 290)).collect();
        match stage.forward(swactor::model::stage::StageInput::Tokens(&prompt)).expect("fwd") {
            swactor::model::stage::StageOutput::Logits(l) => l,
            other => panic!("{other:?}"),
        }
    };
    let sliding = LayerRange::new(0, 1);
    assert_eq!(logits(sliding, 3), logits(sliding, 200), "block 0 slides over 16 positions");
    let global = LayerRange::new(0, 6);
    assert_ne!(logits(global, 3), logits(global, 200), "block 5 sees every position");
}

/// Gemma 3 270M (Q4_K_M), fetched by `.ci/fetch-models --tests`. Required under CI.
pub fn gemma3() -> Option<PathBuf> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cache/models/gemma-3-270m-q4_k_m.gguf");
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("CI").is_none(), "CI must provide Gemma 3 at {}", path.display());
    eprintln!("note: {} not fetched; run .ci/fetch-models --tests", path.display());
    None
}

const LILY: &str = "Once upon a time there was a little girl named Lily.";

#[test]
fn gemma3_270m_continues_the_readme_prompt_through_three_stages_as_generate_does() {
    let Some(model) = gemma3() else { return };
    let file = GgufFile::open(&model).expect("header");
    let tok = tokenizer_from_gguf(file.header()).expect("tokenizer");
    let prompt = tok.encode(LILY, true, false);
    assert_eq!(prompt[0], 2, "Gemma prompts start with <bos>");
    let whole = tokens(&model, &[LayerRange::new(0, 18)], &prompt, 24, KvCacheDType::F32);
    let text = tok.decode(&whole);
    assert!(text.starts_with(" She was a very"), "{text:?}");
    assert_eq!(tokens(&model, &even_split(18, 3), &prompt, 24, KvCacheDType::F32), whole);
}

fn swactor(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_swactor")).args(args).output().expect("swactor");
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn run_local_streams_gemma3_chat_through_three_stages_with_generates_text() {
    let Some(model) = gemma3() else { return };
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let m = model.to_str().expect("path");
    let ask = ["--model", m, "--chat", "--prompt", "Name three colors.", "--max-tokens", "24"];
    let generated = swactor(&[&["generate"][..], &ask].concat());
    let piped = swactor(&[&["run", "local", "--stages", "3"][..], &ask].concat());
    assert_eq!(piped.trim_end(), generated.trim_end());
    assert!(generated.split_whitespace().count() >= 3, "{generated:?}");
}

#[test]
fn a_batch_of_requests_on_every_family_through_three_stages_gets_generates_tokens() {
    use crate::session::{PROMPTS, reference, requests_file, results, run_local_batch, streamed};
    use serde_json::json;
    let _serial = crate::run::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for arch in FAMILIES {
        let model = family_model(arch);
        let lines: Vec<serde_json::Value> = PROMPTS[..4]
            .iter()
            .enumerate()
            .map(|(i, p)| json!({"id": format!("r{i}"), "prompt": p, "max_tokens": 8 + 4 * i}))
            .collect();
        let file = requests_file(&format!("family-{}", arch.name()), &lines);
        let (code, out, err) = run_local_batch(&model, 3, &file, &["--max-sequences", "4"]);
        assert_eq!(code, 0, "{arch:?}: {err}");
        let (got, done) = (streamed(&out), results(&out));
        assert_eq!(done.len(), 4, "{arch:?}: {done:?}");
        for (i, p) in PROMPTS[..4].iter().enumerate() {
            let (ids, _) = reference(&model, p, 8 + 4 * i as u32);
            let streamed = got.get(&format!("r{i}")).cloned().unwrap_or_default();
            assert_eq!(streamed, ids, "{arch:?}: request r{i}");
        }
    }
}

#[test]
fn every_command_that_reads_a_model_refuses_an_unsupported_architecture_by_name() {
    use crate::support::{GgufBuilder, Meta};
    let mut b = GgufBuilder::llama(2).meta("general.architecture", Meta::Str("mamba".into()));
    for (key, value) in [("block_count", 2), ("embedding_length", 64), ("context_length", 256)] {
        b = b.meta(&format!("mamba.{key}"), Meta::U32(value));
    }
    let path = b.write("family-mamba.gguf");
    let p = path.to_str().expect("path");
    for args in [
        vec!["model", "inspect", p],
        vec!["generate", "--model", p, "--prompt", "hi"],
        vec!["run", "local", "--model", p, "--prompt", "hi"],
        vec!["bench", "engine", "--model", p],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_swactor")).args(&args).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        for name in ["`mamba`", "llama", "qwen2", "qwen3", "gemma3"] {
            assert!(err.contains(name), "{args:?} names {name}: {err}");
        }
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_harmony_vocabulary_ends_a_turn_at_return_or_call_and_never_at_end() {
    use crate::support::{GgufBuilder, Meta};
    // 300 tokens: the builder's `t0..t299` with gpt-oss's control tokens at 200..203.
    let mut tokens: Vec<String> = (0..300).map(|i| format!("t{i}")).collect();
    let mut types = vec![1i32; 300];
    for (i, t) in ["<|end|>", "<|return|>", "<|call|>", "<|start|>"].iter().enumerate() {
        tokens[200 + i] = t.to_string();
        types[200 + i] = 3;
    }
    let eot = |eos: u32, types: &[i32]| {
        let path = GgufBuilder::llama(2)
            .meta("tokenizer.ggml.tokens", Meta::StrArray(tokens.clone()))
            .meta("tokenizer.ggml.token_type", Meta::I32Array(types.to_vec()))
            .meta("tokenizer.ggml.eos_token_id", Meta::U32(eos))
            .write(&format!("family-harmony-eos{eos}.gguf"));
        swactor::model::read_facts(&path).expect("facts").eot_token_id
    };
    assert_eq!(eot(201, &types), Some(202), "eos <|return|>: a call ends the turn too");
    assert_eq!(eot(202, &types), Some(201), "eos <|call|>: so does <|return|>");
    // Without the harmony pair, <|end|> is an end of turn as llama.cpp finds one.
    types[201] = 1;
    assert_eq!(eot(0, &types), Some(200));
}

#[test]
fn a_mixture_of_experts_file_with_impossible_experts_or_scaling_is_refused_by_name() {
    use crate::support::{GgufBuilder, Meta};
    let file = |arch: &str, extra: &[(&str, Meta)]| {
        let mut b = GgufBuilder::llama(2).meta("general.architecture", Meta::Str(arch.into()));
        for (key, value) in [
            ("block_count", 2),
            ("embedding_length", 64),
            ("attention.head_count", 4),
            ("context_length", 256),
            ("expert_feed_forward_length", 32),
        ] {
            b = b.meta(&format!("{arch}.{key}"), Meta::U32(value));
        }
        for (key, value) in extra {
            b = b.meta(&format!("{arch}.{key}"), value.clone());
        }
        let path = b.write(&format!("family-refused-{arch}-{}.gguf", extra.len()));
        swactor::model::read_facts(&path).expect_err("refused")
    };
    let missing = file("qwen3moe", &[]);
    assert_eq!(missing.code(), "missing_key", "{missing}");
    assert!(missing.to_string().contains("qwen3moe.expert_count"), "{missing}");
    let too_many =
        file("qwen3moe", &[("expert_count", Meta::U32(4)), ("expert_used_count", Meta::U32(5))]);
    assert!(too_many.to_string().contains("5 experts used of 4"), "{too_many}");
    let yarn = file(
        "gpt-oss",
        &[
            ("expert_count", Meta::U32(4)),
            ("expert_used_count", Meta::U32(2)),
            ("rope.scaling.type", Meta::Str("yarn".into())),
            ("rope.scaling.factor", Meta::F32(32.0)),
            ("rope.scaling.attn_factor", Meta::F32(-1.0)),
        ],
    );
    assert!(yarn.to_string().contains("YaRN attention factor -1"), "{yarn}");
    let scaling = file("gpt-oss", &[("rope.scaling.type", Meta::Str("longrope".into()))]);
    assert!(scaling.to_string().contains("`longrope` is not supported"), "{scaling}");
}
