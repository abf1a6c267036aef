//! Synthesized models: a deterministic tiny GGUF of any supported family with random
//! weights and a real byte-level BPE vocabulary, for tests and for trying a cluster
//! without a download.
//!
//! The file carries the metadata llama.cpp needs to load it (`tokenizer.ggml.model =
//! "gpt2"`, the family's pre-tokenizer, tokens, token types, merges, bos/eos ids and the
//! family's tensor names and keys). [`SynthArch`] picks the family as files of it are
//! written: Llama 2 (`llama`), Llama 3 (`llama` with rope base 500 000, the "llama3" rope
//! frequency factors, tied embeddings and the `llama-bpe` pre-tokenizer), Qwen 2.5 (Q / K /
//! V biases), Qwen 3 (Q / K norms, a head size of twice hidden / heads) and Gemma 3 (four
//! norms a block, Q / K norms, GeGLU, a 16-token sliding window on five blocks of six).
//! The same options and seed always give the same bytes.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use swactor_core::model::Family;

use super::gguf::{GgmlType, GgufFile, MetaValue as Value};
use super::write::{TensorData, write_gguf};
use thiserror::Error;

pub use super::tokenizer::byte_to_unicode;
pub use vocab::{BpeVocab, bpe_vocab};

mod vocab;

/// Weight storage type of a synthesized model's matrices (norms are always f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthDType {
    /// 32-bit floats: bit-exact everywhere.
    F32,
    /// 16-bit floats.
    F16,
    /// 8-bit blocks of 32.
    #[serde(rename = "q8_0")]
    Q8_0,
    /// 4-bit blocks of 32.
    #[serde(rename = "q4_0")]
    Q4_0,
    /// MXFP4 routed experts (and a dense model's feed-forward), every other matrix Q8_0
    /// (llama.cpp's MXFP4_MOE).
    Mxfp4,
}

impl SynthDType {
    fn ggml(self) -> GgmlType {
        match self {
            SynthDType::F32 => GgmlType::F32,
            SynthDType::F16 => GgmlType::F16,
            SynthDType::Q8_0 => GgmlType::Q8_0,
            SynthDType::Q4_0 => GgmlType::Q4_0,
            SynthDType::Mxfp4 => GgmlType::MXFP4,
        }
    }

    /// The type of matrices other than the feed-forward's.
    fn others(self) -> GgmlType {
        match self {
            SynthDType::Mxfp4 => GgmlType::Q8_0,
            other => other.ggml(),
        }
    }
}

/// The family a synthesized model is written as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthArch {
    /// Llama 2 style `llama`.
    #[default]
    Llama,
    /// Llama 3.x style `llama`.
    Llama3,
    /// `qwen2`.
    Qwen2,
    /// `qwen3`.
    Qwen3,
    /// `gemma3`.
    Gemma3,
    /// `qwen3moe`: Qwen 3's attention, routed experts (renormalized).
    Qwen3Moe,
    /// `qwen2moe`: Qwen 2's attention, routed experts and a shared expert.
    Qwen2Moe,
    /// Mixtral: a `llama` file with routed experts.
    Mixtral,
    /// `gpt-oss`: biases, attention sinks, alternating sliding blocks, YaRN, routed experts
    /// with biases and the clamped SwiGLU.
    GptOss,
}

impl SynthArch {
    /// Every family, in the order the docs list them.
    pub const ALL: [SynthArch; 9] = [
        SynthArch::Llama,
        SynthArch::Llama3,
        SynthArch::Qwen2,
        SynthArch::Qwen3,
        SynthArch::Gemma3,
        SynthArch::Qwen3Moe,
        SynthArch::Qwen2Moe,
        SynthArch::Mixtral,
        SynthArch::GptOss,
    ];

    /// The name `--arch` takes.
    pub const fn name(self) -> &'static str {
        match self {
            SynthArch::Llama => "llama",
            SynthArch::Llama3 => "llama3",
            SynthArch::Qwen2 => "qwen2",
            SynthArch::Qwen3 => "qwen3",
            SynthArch::Gemma3 => "gemma3",
            SynthArch::Qwen3Moe => "qwen3moe",
            SynthArch::Qwen2Moe => "qwen2moe",
            SynthArch::Mixtral => "mixtral",
            SynthArch::GptOss => "gpt-oss",
        }
    }

    /// The `general.architecture` it writes.
    pub const fn family(self) -> Family {
        match self {
            SynthArch::Llama | SynthArch::Llama3 | SynthArch::Mixtral => Family::Llama,
            SynthArch::Qwen3Moe => Family::Qwen3Moe,
            SynthArch::Qwen2Moe => Family::Qwen2Moe,
            SynthArch::GptOss => Family::GptOss,
            SynthArch::Qwen2 => Family::Qwen2,
            SynthArch::Qwen3 => Family::Qwen3,
            SynthArch::Gemma3 => Family::Gemma3,
        }
    }

    /// The head size for `hidden / heads` (Qwen 3 and Gemma 3 write wider heads, as the
    /// real ones do where the key length differs from hidden / heads).
    fn head_dim(self, hidden: u32, heads: u32) -> u32 {
        let base = hidden / heads;
        match self {
            SynthArch::Qwen3 | SynthArch::Gemma3 | SynthArch::Qwen3Moe | SynthArch::GptOss => {
                2 * base
            }
            _ => base,
        }
    }

    fn rope_base(self) -> f32 {
        match self {
            SynthArch::Llama => 10_000.0,
            SynthArch::Llama3 => 500_000.0,
            SynthArch::Qwen2
            | SynthArch::Qwen3
            | SynthArch::Gemma3
            | SynthArch::Qwen3Moe
            | SynthArch::Qwen2Moe
            | SynthArch::Mixtral => 1_000_000.0,
            SynthArch::GptOss => 150_000.0,
        }
    }

    fn pre_tokenizer(self) -> &'static str {
        match self {
            SynthArch::Llama | SynthArch::Gemma3 | SynthArch::Mixtral => "default",
            SynthArch::GptOss => "gpt-4o",
            SynthArch::Llama3 => "llama-bpe",
            SynthArch::Qwen2 | SynthArch::Qwen3 | SynthArch::Qwen3Moe | SynthArch::Qwen2Moe => {
                "qwen2"
            }
        }
    }
}

/// The sliding window of a synthesized Gemma 3 (short, so tests cross it).
pub const SYNTH_SLIDING_WINDOW: u32 = 16;

/// Shape and seed of a synthesized model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SynthSpec {
    /// Transformer blocks.
    pub blocks: u32,
    /// Hidden size.
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Feed-forward inner size.
    pub ffn: u32,
    /// Vocabulary size (256 byte tokens + merges + 1 end-of-text token).
    pub vocab: u32,
    /// Context length recorded in the file.
    pub context: u32,
    /// Matrix storage type.
    pub dtype: SynthDType,
    /// Whether the output head reuses the token embedding (no `output.weight`).
    pub tied_embeddings: bool,
    /// Seed of every random weight.
    pub seed: u64,
    /// The family written.
    #[serde(default)]
    pub arch: SynthArch,
    /// Experts per block of a mixture-of-experts family (0: 8); `ffn` is each expert's
    /// inner size.
    #[serde(default)]
    pub experts: u32,
    /// Experts each token runs (0: 2).
    #[serde(default)]
    pub experts_used: u32,
    /// Each head's size (0: the family's, from hidden / heads).
    #[serde(default)]
    pub head_dim: u32,
}

impl Default for SynthSpec {
    fn default() -> Self {
        SynthSpec {
            blocks: 4,
            hidden: 256,
            heads: 8,
            kv_heads: 4,
            ffn: 512,
            vocab: 512,
            context: 2048,
            dtype: SynthDType::F32,
            tied_embeddings: false,
            seed: 0,
            arch: SynthArch::Llama,
            experts: 0,
            experts_used: 0,
            head_dim: 0,
        }
    }
}

/// Smallest vocabulary: 256 byte tokens and the end-of-text token.
pub const MIN_VOCAB: u32 = 257;
/// Largest vocabulary a synthesized model may have.
pub const MAX_VOCAB: u32 = 65_536;

/// Why a model could not be synthesized.
#[derive(Debug, Error)]
pub enum SynthError {
    /// The requested shape is invalid.
    #[error("invalid model shape: {0}")]
    InvalidShape(String),
    /// Writing the file failed.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The output path.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Building or quantizing a tensor failed.
    #[error("cannot build tensors: {0}")]
    Tensor(String),
}

impl SynthSpec {
    /// Whether the head is the token embedding (no `output.weight`). Random weights
    /// with a tied head mostly repeat the last token, so the families' tests tie it
    /// only where that is what they check.
    pub fn tied_embeddings(&self) -> bool {
        self.tied_embeddings
    }

    /// Each head's size: as given, else the family's (hidden / heads, doubled for Qwen 3,
    /// Gemma 3 and gpt-oss as their real files have it).
    pub fn head_dim(&self) -> u32 {
        if self.head_dim > 0 { self.head_dim } else { self.arch.head_dim(self.hidden, self.heads) }
    }

    /// The experts written, and how many a token uses (`None` for a dense family).
    pub fn moe(&self) -> Option<(u32, u32)> {
        let moe = matches!(
            self.arch,
            SynthArch::Qwen3Moe | SynthArch::Qwen2Moe | SynthArch::Mixtral | SynthArch::GptOss
        );
        let or = |v: u32, d: u32| if v == 0 { d } else { v };
        moe.then(|| (or(self.experts, 8), or(self.experts_used, 2)))
    }

    /// The shared expert's inner size (Qwen 2 MoE: twice an expert's), else 0.
    fn shared_ffn(&self) -> u32 {
        if self.arch == SynthArch::Qwen2Moe { 2 * self.ffn } else { 0 }
    }

    /// Checks the shape; returns the first problem.
    pub fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: String| Err(SynthError::InvalidShape(m));
        if self.blocks == 0
            || self.hidden == 0
            || self.heads == 0
            || self.kv_heads == 0
            || self.ffn == 0
        {
            return bad("blocks, hidden, heads, kv-heads and ffn must be at least 1".into());
        }
        if !self.hidden.is_multiple_of(self.heads) {
            return bad(format!(
                "hidden {} is not a multiple of heads {}",
                self.hidden, self.heads
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return bad(format!(
                "heads {} is not a multiple of kv-heads {}",
                self.heads, self.kv_heads
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return bad("the head dimension must be even for rotary embeddings".into());
        }
        if !(MIN_VOCAB..=MAX_VOCAB).contains(&self.vocab) {
            return bad(format!("vocab {} must lie in {MIN_VOCAB}..={MAX_VOCAB}", self.vocab));
        }
        if self.context == 0 {
            return bad("context must be at least 1".into());
        }
        let block = self.dtype.ggml().block_size() as u32;
        if !self.hidden.is_multiple_of(block) || !self.ffn.is_multiple_of(block) {
            return bad(format!(
                "{:?} needs hidden and ffn to be multiples of {block}",
                self.dtype
            ));
        }
        if let Some((experts, used)) = self.moe()
            && (experts > swactor_core::model::arch::MAX_EXPERTS || used > experts)
        {
            return bad(format!(
                "{used} experts used of {experts} (need used <= experts <= {})",
                swactor_core::model::arch::MAX_EXPERTS
            ));
        }
        let experts = u64::from(self.moe().map_or(1, |(e, _)| e));
        if u64::from(self.blocks) * u64::from(self.hidden) * u64::from(self.ffn) * experts > 1 << 36
        {
            return bad("model too large to synthesize".into());
        }
        Ok(())
    }
}

/// splitmix64: a tiny deterministic generator, good enough for random weights.
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    fn next_unit(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

fn name_seed(seed: u64, name: &str) -> u64 {
    // FNV-1a over the name, mixed with the seed: tensors do not depend on write order.
    let mut h = 0xCBF2_9CE4_8422_2325u64 ^ seed;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// `rows * cols` seeded values in `[-scale, scale)`, row-major.
fn random_matrix(seed: u64, name: &str, rows: u32, cols: u32, scale: f32) -> Vec<f32> {
    let mut rng = SplitMix(name_seed(seed, name));
    (0..u64::from(rows) * u64::from(cols)).map(|_| rng.next_unit() * scale).collect()
}

/// `values` (of `shape`, outermost first) quantized as `dtype`.
pub(crate) fn tensor(
    values: &[f32],
    shape: Vec<usize>,
    dtype: GgmlType,
) -> Result<TensorData, SynthError> {
    let format = super::engine::weight_format(dtype)
        .ok_or_else(|| SynthError::Tensor(format!("{} is not a weight type", dtype.name())))?;
    // Each row is whole blocks, so the rows quantize as one run.
    let row = shape.last().copied().unwrap_or(1);
    let data = swactor_engine::quantize::quantize(format, values)
        .filter(|_| row.is_multiple_of(dtype.block_size()))
        .ok_or_else(|| {
            SynthError::Tensor(format!(
                "rows of {row} values are not whole {} blocks of {}",
                dtype.name(),
                dtype.block_size()
            ))
        })?;
    Ok(TensorData { dtype, shape, data })
}

/// Builds every tensor of the model, in file order, as `(name, tensor)`.
pub fn build_tensors(spec: &SynthSpec) -> Result<Vec<(String, TensorData)>, SynthError> {
    spec.validate()?;
    // The feed-forward's type, and the other matrices' (they differ for MXFP4).
    let (dt, ot) = (spec.dtype.ggml(), spec.dtype.others());
    let family = spec.arch.family();
    let h = spec.hidden;
    let hd = spec.head_dim();
    let (q, kv) = (spec.heads * hd, spec.kv_heads * hd);
    let inv = |n: u32| 1.0 / (n as f32).sqrt();
    let mut out = Vec::new();
    // `n` stacked matrices (one per expert; `n = 1`: a plain matrix) of `dt`.
    let mut stack = |name: String, n: u32, rows: u32, cols: u32, scale: f32, dt: GgmlType| {
        let t = random_matrix(spec.seed, &name, n * rows, cols, scale);
        let shape = match n {
            1 => vec![rows as usize, cols as usize],
            _ => vec![n as usize, rows as usize, cols as usize],
        };
        out.push((name, tensor(&t, shape, dt)?));
        Ok::<(), SynthError>(())
    };
    stack("token_embd.weight".into(), 1, spec.vocab, h, 1.0, ot)?;
    let f = spec.ffn;
    for b in 0..spec.blocks {
        let n = |t: &str| format!("blk.{b}.{t}.weight");
        stack(n("attn_q"), 1, q, h, inv(h), ot)?;
        stack(n("attn_k"), 1, kv, h, inv(h), ot)?;
        stack(n("attn_v"), 1, kv, h, inv(h), ot)?;
        stack(n("attn_output"), 1, h, q, inv(q), ot)?;
        match spec.moe() {
            None => {
                stack(n("ffn_gate"), 1, f, h, inv(h), dt)?;
                stack(n("ffn_up"), 1, f, h, inv(h), dt)?;
                stack(n("ffn_down"), 1, h, f, inv(f), dt)?;
            }
            Some((e, _)) => {
                // The router stays f32, as llama.cpp's quantizer keeps it; its scores
                // spread wide enough that the experts a token picks differ.
                stack(n("ffn_gate_inp"), 1, e, h, 4.0 * inv(h), GgmlType::F32)?;
                stack(n("ffn_gate_exps"), e, f, h, inv(h), dt)?;
                stack(n("ffn_up_exps"), e, f, h, inv(h), dt)?;
                stack(n("ffn_down_exps"), e, h, f, inv(f), dt)?;
                let sf = spec.shared_ffn();
                if sf > 0 {
                    stack(n("ffn_gate_shexp"), 1, sf, h, inv(h), ot)?;
                    stack(n("ffn_up_shexp"), 1, sf, h, inv(h), ot)?;
                    stack(n("ffn_down_shexp"), 1, h, sf, inv(sf), ot)?;
                }
            }
        }
    }
    if !spec.tied_embeddings() {
        stack("output.weight".into(), 1, spec.vocab, h, 4.0 * inv(h), ot)?;
    }
    // Norms, biases and rope factors stay f32, as in llama.cpp's own files. A Llama 2
    // model's norms are ones (the bytes of earlier versions); the other families' norms
    // and biases are random around their neutral value, so a wrong one shows.
    let vector = |name: &str, len: u32, center: f32, spread: f32| -> Vec<f32> {
        random_matrix(spec.seed, name, 1, len, spread).into_iter().map(|v| v + center).collect()
    };
    let norm = |name: String, len: u32| -> (String, Vec<f32>) {
        let t = if spec.arch == SynthArch::Llama {
            vec![1.0; len as usize]
        } else {
            vector(&name, len, 1.0, 0.2)
        };
        (name, t)
    };
    let mut small = vec![norm("output_norm.weight".to_string(), h)];
    for b in 0..spec.blocks {
        small.push(norm(format!("blk.{b}.attn_norm.weight"), h));
        small.push(norm(format!("blk.{b}.{}", family.ffn_norm()), h));
        if family.o_bias_and_sinks() {
            let name = format!("blk.{b}.attn_output.bias");
            small.push((name.clone(), vector(&name, h, 0.0, 0.5)));
            let name = format!("blk.{b}.attn_sinks.weight");
            small.push((name.clone(), vector(&name, spec.heads, 0.0, 2.0)));
        }

        if family.qkv_bias() {
            for (t, len) in [("attn_q", q), ("attn_k", kv), ("attn_v", kv)] {
                let name = format!("blk.{b}.{t}.bias");
                small.push((name.clone(), vector(&name, len, 0.0, 0.5)));
            }
        }
        if family.qk_norm() {
            small.push(norm(format!("blk.{b}.attn_q_norm.weight"), hd));
            small.push(norm(format!("blk.{b}.attn_k_norm.weight"), hd));
        }
        if family.post_norms() {
            small.push(norm(format!("blk.{b}.post_attention_norm.weight"), h));
            small.push(norm(format!("blk.{b}.post_ffw_norm.weight"), h));
        }
        if spec.shared_ffn() > 0 {
            let name = format!("blk.{b}.ffn_gate_inp_shexp.weight");
            small.push((name.clone(), vector(&name, h, 0.0, 2.0 * (h as f32).sqrt().recip())));
        }
    }
    if spec.arch == SynthArch::Llama3 {
        small.push(("rope_freqs.weight".into(), llama3_rope_factors(spec.arch.rope_base(), hd)));
    }
    for (name, t) in small {
        let len = t.len();
        out.push((name, tensor(&t, vec![len], GgmlType::F32)?));
    }
    gpt_oss_biases(spec, &mut out)?;
    Ok(out)
}

/// gpt-oss's router and expert biases (per expert: a row each), f32.
fn gpt_oss_biases(spec: &SynthSpec, out: &mut Vec<(String, TensorData)>) -> Result<(), SynthError> {
    let (Some((e, _)), Family::GptOss) = (spec.moe(), spec.arch.family()) else { return Ok(()) };
    for b in 0..spec.blocks {
        for (t, rows, cols) in [
            ("ffn_gate_inp", 1, e),
            ("ffn_gate_exps", e, spec.ffn),
            ("ffn_up_exps", e, spec.ffn),
            ("ffn_down_exps", e, spec.hidden),
        ] {
            let name = format!("blk.{b}.{t}.bias");
            let v = random_matrix(spec.seed, &name, 1, rows * cols, 0.5);
            let shape =
                if rows == 1 { vec![cols as usize] } else { vec![rows as usize, cols as usize] };
            out.push((name, tensor(&v, shape, GgmlType::F32)?));
        }
    }
    Ok(())
}

/// Llama 3.1's "llama3" rope frequency factors (scaling 8, low / high frequency factors
/// 1 and 4, original context 8192), as llama.cpp's converter writes `rope_freqs`.
pub fn llama3_rope_factors(base: f32, head_dim: u32) -> Vec<f32> {
    let (factor, low, high, context) = (8.0f64, 1.0f64, 4.0f64, 8192.0f64);
    let (low_wavelen, high_wavelen) = (context / low, context / high);
    (0..head_dim / 2)
        .map(|i| {
            let freq = 1.0 / f64::from(base).powf(f64::from(2 * i) / f64::from(head_dim));
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor
            } else {
                let smooth = (context / wavelen - low) / (high - low);
                1.0 / ((1.0 - smooth) / factor + smooth)
            };
            f as f32
        })
        .collect()
}

/// The metadata of a synthesized model, as `(key, value)` in file order.
pub fn build_metadata(spec: &SynthSpec, vocab: &BpeVocab) -> Vec<(String, Value)> {
    let family = spec.arch.family();
    let head_dim = spec.head_dim();
    let file_type = match spec.dtype {
        SynthDType::F32 => 0,
        SynthDType::F16 => 1,
        SynthDType::Q4_0 => 2,
        SynthDType::Mxfp4 => 38,
        SynthDType::Q8_0 => 7,
    };
    let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let a = |k: &str| format!("{}.{k}", family.name());
    let mut md: Vec<(String, Value)> = vec![
        ("general.architecture".into(), Value::String(family.name().into())),
        ("general.name".into(), Value::String("swactor-synth".into())),
        ("general.file_type".into(), Value::U32(file_type)),
        (a("block_count"), Value::U32(spec.blocks)),
        (a("context_length"), Value::U32(spec.context)),
        (a("embedding_length"), Value::U32(spec.hidden)),
        (a("feed_forward_length"), Value::U32(spec.ffn)),
        (a("attention.head_count"), Value::U32(spec.heads)),
        (a("attention.head_count_kv"), Value::U32(spec.kv_heads)),
        (a("attention.layer_norm_rms_epsilon"), Value::F32(1e-5)),
        (a("rope.freq_base"), Value::F32(spec.arch.rope_base())),
        (a("rope.dimension_count"), Value::U32(head_dim)),
        (a("vocab_size"), Value::U32(spec.vocab)),
    ];
    if head_dim != spec.hidden / spec.heads {
        md.push((a("attention.key_length"), Value::U32(head_dim)));
        md.push((a("attention.value_length"), Value::U32(head_dim)));
    }
    if matches!(family, Family::Gemma3 | Family::GptOss) {
        md.push((a("attention.sliding_window"), Value::U32(SYNTH_SLIDING_WINDOW)));
    }
    if family == Family::GptOss {
        // gpt-oss's YaRN: 32 times its original 4096 positions.
        md.push((a("rope.scaling.type"), Value::String("yarn".into())));
        md.push((a("rope.scaling.factor"), Value::F32(32.0)));
        md.push((a("rope.scaling.original_context_length"), Value::U32(4096)));
    }
    if let Some((experts, used)) = spec.moe() {
        md.push((a("expert_count"), Value::U32(experts)));
        md.push((a("expert_used_count"), Value::U32(used)));
        if family != Family::Llama {
            md.push((a("expert_feed_forward_length"), Value::U32(spec.ffn)));
        }
        if spec.shared_ffn() > 0 {
            md.push((a("expert_shared_feed_forward_length"), Value::U32(spec.shared_ffn())));
        }
    }
    md.extend([
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        ("tokenizer.ggml.pre".into(), Value::String(spec.arch.pre_tokenizer().into())),
        ("tokenizer.ggml.tokens".into(), strings(&vocab.tokens)),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(vocab.token_types.iter().map(|&t| Value::I32(t)).collect()),
        ),
        ("tokenizer.ggml.merges".into(), strings(&vocab.merges)),
        ("tokenizer.ggml.bos_token_id".into(), Value::U32(vocab.eot_id)),
        ("tokenizer.ggml.eos_token_id".into(), Value::U32(vocab.eot_id)),
        ("tokenizer.ggml.add_bos_token".into(), Value::Bool(false)),
    ]);
    md
}

/// Writes a synthesized model to `path`, replacing any file there.
pub fn write_model(path: &Path, spec: &SynthSpec) -> Result<(), SynthError> {
    write_model_with(path, spec, None)
}

/// Another model's tokenizer (every `tokenizer.*` key of its file, in key order) and its
/// token count: a model synthesized with it shares that model's vocabulary (a draft
/// model for it, say).
#[derive(Debug, Clone)]
pub struct BorrowedVocab {
    /// The `tokenizer.*` metadata.
    pub metadata: Vec<(String, Value)>,
    /// Tokens in `tokenizer.ggml.tokens`.
    pub tokens: u32,
}

/// The tokenizer of the GGUF file at `path` ([`BorrowedVocab`]).
pub fn borrow_vocab(path: &Path) -> Result<BorrowedVocab, SynthError> {
    let bad = |m: String| SynthError::InvalidShape(format!("{}: {m}", path.display()));
    let file = GgufFile::open(path).map_err(|e| bad(e.to_string()))?;
    let header = file.header();
    let tokens = match header.get("tokenizer.ggml.tokens") {
        Some(Value::Array(t)) => t.len() as u32,
        _ => return Err(bad("the file has no tokenizer.ggml.tokens".into())),
    };
    let mut metadata: Vec<(String, Value)> = header
        .metadata
        .iter()
        .filter(|(k, _)| k.starts_with("tokenizer."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    metadata.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(BorrowedVocab { metadata, tokens })
}

/// [`write_model`], with `vocab`'s tokenizer in place of the synthesized one (`spec`'s
/// vocabulary size must be its token count).
pub fn write_model_with(
    path: &Path,
    spec: &SynthSpec,
    vocab: Option<&BorrowedVocab>,
) -> Result<(), SynthError> {
    spec.validate()?;
    let mut metadata = match vocab {
        None => build_metadata(spec, &bpe_vocab(spec.vocab)),
        Some(v) => {
            if v.tokens != spec.vocab {
                return Err(SynthError::InvalidShape(format!(
                    "vocab {} is not the borrowed vocabulary's {} tokens",
                    spec.vocab, v.tokens
                )));
            }
            let mut md = build_metadata(spec, &bpe_vocab(MIN_VOCAB));
            md.retain(|(k, _)| !k.starts_with("tokenizer."));
            md
        }
    };
    metadata.extend(vocab.into_iter().flat_map(|v| v.metadata.iter().cloned()));
    let tensors = build_tensors(spec)?;
    let io = |source| SynthError::Io { path: path.display().to_string(), source };
    let mut file = BufWriter::new(File::create(path).map_err(io)?);
    let md: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let ts: Vec<(&str, &TensorData)> = tensors.iter().map(|(k, t)| (k.as_str(), t)).collect();
    write_gguf(&mut file, &md, &ts).map_err(io)?;
    file.into_inner().map_err(|e| io(e.into_error()))?.sync_all().map_err(io)?;
    Ok(())
}
