//! `swactor model inspect` and `swactor model synth`.

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::args::{InspectArgs, QuantizeArgs, SynthArgs, TokenizeArgs};
use super::exit::{CliError, ExitCode, model_error};
use super::output::{Output, human_bytes, table};
use crate::model::quantize::{parse_recipe, quantize_file};
use crate::model::synth::{SynthError, SynthSpec, write_model_with};
use crate::model::{ModelFacts, read_facts};

#[derive(Serialize)]
struct FactsRecord<'a> {
    path: String,
    #[serde(flatten)]
    facts: &'a ModelFacts,
    /// What each of `--stages` stages would load.
    stages: Vec<StageBytes>,
}

/// The layers and weight bytes of one stage of an even split.
#[derive(Serialize)]
struct StageBytes {
    layers: String,
    bytes: u64,
}

/// The even split `model inspect` shows, or a typed error for an impossible stage count.
fn stage_bytes(facts: &ModelFacts, stages: Option<u32>) -> Result<Vec<StageBytes>, CliError> {
    let n = stages.unwrap_or(facts.block_count.clamp(1, 2));
    let ranges = crate::planner::split_evenly(facts, n).ok_or_else(|| {
        CliError::new(
            ExitCode::Usage,
            "too_many_stages",
            eyre!("--stages {n}: the model has {} blocks", facts.block_count),
        )
        .with_suggestion("give --stages at most the model's block count")
    })?;
    let last = ranges.len() - 1;
    Ok(ranges
        .iter()
        .enumerate()
        .map(|(i, &r)| StageBytes {
            layers: r.to_string(),
            bytes: crate::planner::stage_weight_bytes(facts, r, i == 0, i == last),
        })
        .collect())
}

/// `swactor model inspect FILE`.
pub fn inspect(args: &InspectArgs, out: &mut Output) -> Result<(), CliError> {
    let facts = read_facts(&args.file).map_err(|e| model_error(&args.file, e))?;
    let stages = stage_bytes(&facts, args.stages)?;
    if args.output.json {
        let path = args.file.display().to_string();
        out.json("model_facts", &FactsRecord { path, facts: &facts, stages })?;
        return Ok(());
    }
    for line in render_facts(&args.file.display().to_string(), &facts) {
        out.line(line)?;
    }
    let count = stages.len();
    let split: Vec<String> =
        stages.iter().map(|s| format!("{} {}", s.layers, human_bytes(s.bytes))).collect();
    out.line(format!("{count} stages would load {} (--stages N)", split.join(", ")))?;
    Ok(())
}

/// Human rendering of model facts.
pub fn render_facts(path: &str, f: &ModelFacts) -> Vec<String> {
    let opt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    let blocks_total: u64 = f.bytes.per_block.iter().sum();
    let (min_block, max_block) = (
        f.bytes.per_block.iter().min().copied().unwrap_or(0),
        f.bytes.per_block.iter().max().copied().unwrap_or(0),
    );
    let per_block = if min_block == max_block {
        format!("{} each", human_bytes(min_block))
    } else {
        format!("{} to {} each", human_bytes(min_block), human_bytes(max_block))
    };
    let types =
        f.tensor_types.iter().map(|(t, n)| format!("{t} x{n}")).collect::<Vec<_>>().join(", ");
    let rows = vec![
        vec!["file".into(), format!("{path} ({})", human_bytes(f.bytes.file))],
        vec!["name".into(), f.name.clone().unwrap_or_else(|| "-".into())],
        vec!["architecture".into(), f.architecture.clone()],
        vec!["blocks".into(), f.block_count.to_string()],
        vec!["hidden size".into(), f.hidden_size.to_string()],
        vec!["feed-forward".into(), opt(f.feed_forward_length)],
        vec![
            "heads".into(),
            format!("{} ({} KV, head dim {})", f.head_count, f.head_count_kv, f.head_dim),
        ],
        vec!["context".into(), f.context_length.to_string()],
        vec![
            "vocabulary".into(),
            format!(
                "{} ({}, pre-tokenizer {})",
                f.vocab_size,
                f.tokenizer_model.as_deref().unwrap_or("-"),
                f.tokenizer_pre.as_deref().unwrap_or("-")
            ),
        ],
        vec![
            "bos / eos / eot".into(),
            format!("{} / {} / {}", opt(f.bos_token_id), opt(f.eos_token_id), opt(f.eot_token_id)),
        ],
        vec!["rope".into(), rope_row(f)],
        vec!["attention".into(), attention_row(f)],
        vec!["rms norm eps".into(), format!("{:e}", f.rms_norm_eps)],
        vec![
            "output head".into(),
            if f.tied_embeddings {
                "tied to the token embedding".into()
            } else {
                "own weights".into()
            },
        ],
        vec!["tensor types".into(), types],
        vec!["blocks bytes".into(), format!("{} ({per_block})", human_bytes(blocks_total))],
        vec!["embedding bytes".into(), human_bytes(f.bytes.embedding)],
        vec!["head bytes".into(), human_bytes(f.bytes.head)],
    ];
    table(&rows)
}

/// Rope: base, dimensions, pairing, and the family's scaling where it has one.
fn rope_row(f: &ModelFacts) -> String {
    use swactor_core::model::arch::RopeStyle;
    let pairs = match f.arch.family.rope_style() {
        RopeStyle::Interleaved => "interleaved pairs",
        RopeStyle::Halves => "neox halves",
    };
    let mut row = format!("base {}, {} dims, {pairs}", f.rope.freq_base, f.rope.dimension_count);
    if f.arch.rope_scale != 1.0 {
        row += &format!(", linear scaling {}", f.arch.rope_scale);
    }
    if f.arch.rope_freq_factors {
        row += ", frequency factors (rope_freqs)";
    }
    row
}

/// Attention and block differences of the family: biases, norms, window, gate.
fn attention_row(f: &ModelFacts) -> String {
    let family = f.arch.family;
    let mut parts = Vec::new();
    if family.qkv_bias() {
        parts.push("Q/K/V biases".to_string());
    }
    if family.qk_norm() {
        parts.push("Q/K norms".to_string());
    }
    if family.post_norms() {
        parts.push("post-norms".to_string());
    }
    if let Some(w) = f.arch.sliding_window {
        let sliding = (0..f.block_count).filter(|&b| f.arch.is_sliding(b)).count();
        parts.push(format!(
            "sliding window {w} on {sliding} of {} blocks (rope base {})",
            f.block_count, f.arch.local_rope_base
        ));
    }
    parts.push(match family.gate_activation() {
        swactor_core::model::arch::GateActivation::Silu => "SwiGLU".to_string(),
        swactor_core::model::arch::GateActivation::GeluTanh => "GeGLU".to_string(),
        swactor_core::model::arch::GateActivation::SwigluOai => "clamped SwiGLU".to_string(),
    });
    parts.join(", ")
}

#[derive(Serialize)]
struct SynthRecord<'a> {
    path: String,
    bytes: u64,
    #[serde(flatten)]
    spec: &'a SynthSpec,
}

/// `swactor model synth --out FILE ...`.
pub fn synth(args: &SynthArgs, out: &mut Output) -> Result<(), CliError> {
    let vocab = args
        .vocab_from
        .as_deref()
        .map(crate::model::synth::borrow_vocab)
        .transpose()
        .map_err(|e| CliError::new(ExitCode::Input, "bad_vocab_source", eyre!(e)))?;
    let spec = SynthSpec {
        blocks: args.blocks,
        hidden: args.hidden,
        heads: args.heads,
        kv_heads: args.kv_heads,
        ffn: args.ffn,
        vocab: vocab.as_ref().map_or(args.vocab, |v| v.tokens),
        context: args.context,
        dtype: args.dtype.into(),
        tied_embeddings: args.tied_embeddings,
        seed: args.seed,
        arch: args.arch.into(),
        experts: args.experts,
        experts_used: args.experts_used,
        head_dim: args.head_dim.unwrap_or(0),
    };
    write_model_with(&args.out, &spec, vocab.as_ref()).map_err(|e| match e {
        SynthError::InvalidShape(_) => CliError::new(ExitCode::Usage, "invalid_shape", eyre!(e)),
        SynthError::Io { .. } => CliError::new(ExitCode::Input, "io", eyre!(e)),
        SynthError::Tensor(_) => CliError::internal(eyre!(e)),
    })?;
    let bytes = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    let path = args.out.display().to_string();
    if args.output.json {
        out.json("model_synthesized", &SynthRecord { path, bytes, spec: &spec })?;
    } else {
        eprintln!(
            "wrote {path} ({}): {}, {} blocks, hidden {}, {} heads / {} KV, ffn {}, vocab {}, {:?}, seed {}",
            human_bytes(bytes),
            spec.arch.name(),
            spec.blocks,
            spec.hidden,
            spec.heads,
            spec.kv_heads,
            spec.ffn,
            spec.vocab,
            spec.dtype,
            spec.seed
        );
    }
    Ok(())
}

/// `swactor model quantize`.
pub fn quantize(args: &QuantizeArgs, out: &mut Output) -> Result<(), CliError> {
    let target = parse_recipe(&args.dtype).ok_or_else(|| {
        CliError::new(ExitCode::Usage, "usage", eyre!("unknown type `{}`", args.dtype))
            .with_suggestion(
                "use one of f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, q4_k_m, q5_k_m",
            )
    })?;
    let facts = read_facts(&args.input).map_err(|e| model_error(&args.input, e))?;
    let changed = quantize_file(&args.input, &args.out, target).map_err(|e| match e {
        SynthError::Io { .. } => CliError::new(ExitCode::Input, "io", eyre!(e)),
        SynthError::InvalidShape(_) => CliError::new(ExitCode::Input, "invalid_model", eyre!(e)),
        SynthError::Tensor(_) => CliError::internal(eyre!(e)),
    })?;
    let bytes = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    if args.output.json {
        let record = serde_json::json!({
            "path": args.out.display().to_string(),
            "dtype": args.dtype,
            "tensors_requantized": changed,
            "bytes": bytes,
        });
        out.json("model_quantized", &record)?;
    } else {
        eprintln!(
            "wrote {} ({}): {changed} of {} tensors re-quantized to {}",
            args.out.display(),
            human_bytes(bytes),
            facts.tensor_types.values().sum::<u32>(),
            args.dtype
        );
    }
    Ok(())
}

/// `swactor model tokenize`.
pub fn tokenize(args: &TokenizeArgs, out: &mut Output) -> Result<(), CliError> {
    // Only the vocabulary is read: a vocabulary-only file (llama.cpp's test vocabularies)
    // tokenizes too.
    let file =
        crate::model::gguf::GgufFile::open(&args.model).map_err(|e| model_error(&args.model, e))?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header())
        .map_err(|e| model_error(&args.model, e))?;
    for text in &args.text {
        let ids = tokenizer.encode(text, args.add_special, args.parse_special);
        if args.output.json {
            let pieces: Vec<String> = ids
                .iter()
                .map(|&id| String::from_utf8_lossy(&tokenizer.token_bytes(id)).into_owned())
                .collect();
            out.json("tokens", &serde_json::json!({ "ids": ids, "pieces": pieces }))?;
        } else {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            out.write_str(&format!("{}\n", ids.join(",")))?;
        }
    }
    Ok(())
}
