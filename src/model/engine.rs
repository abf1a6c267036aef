//! Binding a stage's tensors to the engine: the GGUF file is mapped once (read-only,
//! shared with every other stage on the host through the page cache: [`GgufFile`]) and
//! each weight matrix is a view of its own bytes in the mapping, used in place. Only the
//! small norm vectors are copied (decoded to f32).

use std::sync::Arc;

use swactor_core::model::arch::{GateActivation, RopeStyle};
use swactor_engine::matmul::Gate;
use swactor_engine::transformer::{
    Arch, Config, ExpertBiases, Experts, Extras, FeedForward, Layer, Routing, SharedExpert, Stage,
    Weights, Yarn,
};
use swactor_engine::{Bytes, Isa, Matrix, ThreadPool, WeightFormat};

use super::compute::{StageError, StageSpec, weights};
use super::facts::{ModelError, ModelFacts};
use super::gguf::{GgmlType, GgufFile, MappedFile};
use crate::wire::reason::WeightsFailure;

/// The kernel family stages use: the widest this CPU runs, or the one
/// `SWACTOR_ENGINE_ISA` (`scalar`, `avx2`, `avx512`, `neon`, `neon-dotprod`, `neon-i8mm`)
/// names, to compare paths on one machine (a family the CPU lacks falls back to one it
/// runs).
pub fn isa() -> Isa {
    std::env::var("SWACTOR_ENGINE_ISA")
        .ok()
        .and_then(|v| Isa::parse(&v))
        .unwrap_or_else(Isa::detect)
}

/// The engine's format of a GGML type (`None`: not a weight format, e.g. Q8_1 / Q8_K).
pub fn weight_format(t: GgmlType) -> Option<WeightFormat> {
    Some(match t {
        GgmlType::F32 => WeightFormat::F32,
        GgmlType::F16 => WeightFormat::F16,
        GgmlType::BF16 => WeightFormat::BF16,
        GgmlType::Q4_0 => WeightFormat::Q4_0,
        GgmlType::Q4_1 => WeightFormat::Q4_1,
        GgmlType::Q5_0 => WeightFormat::Q5_0,
        GgmlType::Q5_1 => WeightFormat::Q5_1,
        GgmlType::Q8_0 => WeightFormat::Q8_0,
        GgmlType::Q2K => WeightFormat::Q2K,
        GgmlType::Q3K => WeightFormat::Q3K,
        GgmlType::Q4K => WeightFormat::Q4K,
        GgmlType::Q5K => WeightFormat::Q5K,
        GgmlType::Q6K => WeightFormat::Q6K,
        GgmlType::MXFP4 => WeightFormat::MXFP4,
        GgmlType::Q8_1 | GgmlType::Q8K => return None,
    })
}

/// The names of the tensors a stage of `layers` (with the token embedding and / or the
/// head) binds, in binding order: exactly the tensors a node that downloads only its
/// stage's byte ranges needs (`crate::stage::ranges`). The loader refuses to have bound
/// any other.
pub fn stage_tensors(
    facts: &ModelFacts,
    layers: crate::wire::LayerRange,
    embedding: bool,
    head: bool,
) -> Vec<String> {
    let mut names = Vec::new();
    if embedding {
        names.push("token_embd.weight".to_string());
    }
    if !layers.is_empty() {
        names.extend(facts.arch.shared_block_tensors().iter().map(|s| s.to_string()));
    }
    let block = facts.arch.block_tensors();
    for i in layers.blocks() {
        names.extend(block.iter().map(|t| format!("blk.{i}.{t}")));
    }
    if head {
        names.push("output_norm.weight".to_string());
        let head = if facts.tied_embeddings { "token_embd.weight" } else { "output.weight" };
        names.push(head.to_string());
    }
    names
}

struct Binder<'a> {
    gguf: &'a GgufFile,
    file: Arc<MappedFile>,
    isa: Isa,
    bytes: u64,
    bound: Vec<String>,
}

impl Binder<'_> {
    fn tensor(&mut self, name: &str) -> Result<(WeightFormat, Vec<usize>, Bytes), StageError> {
        let info = self.gguf.header().tensors.get(name).ok_or_else(|| {
            weights(WeightsFailure::MissingTensor, format!("tensor `{name}` is missing"))
        })?;
        let format = weight_format(info.dtype).ok_or_else(|| {
            weights(
                WeightsFailure::UnsupportedTensorType,
                format!("tensor `{name}` is {:?}, not a weight type", info.dtype),
            )
        })?;
        let (start, len) = self.gguf.header().extent(name, info).map_err(ModelError::from)?;
        let start = usize::try_from(start)
            .map_err(|_| weights(WeightsFailure::ParseFailed, "offset overflows"))?;
        let end = start.checked_add(len as usize).ok_or_else(|| {
            weights(WeightsFailure::ParseFailed, format!("tensor `{name}` overflows"))
        })?;
        let owner: Arc<dyn AsRef<[u8]> + Send + Sync> = self.file.clone();
        let bytes = Bytes::new(owner, start..end).ok_or_else(|| {
            weights(WeightsFailure::ParseFailed, format!("tensor `{name}` lies outside the file"))
        })?;
        self.bytes += len;
        self.bound.push(name.to_string());
        Ok((format, info.shape.clone(), bytes))
    }

    fn matrix(&mut self, name: &str) -> Result<Matrix, StageError> {
        let (format, dims, bytes) = self.tensor(name)?;
        let [rows, cols] = dims[..] else {
            return Err(weights(
                WeightsFailure::BindFailed,
                format!("tensor `{name}` has shape {dims:?}, not a matrix"),
            ));
        };
        Matrix::new(format, rows, cols, bytes, self.isa)
            .map_err(|e| weights(WeightsFailure::BindFailed, format!("tensor `{name}`: {e}")))
    }

    /// A stack of `[n, rows, cols]` matrices (one per expert), each a view of its rows.
    fn stack(&mut self, name: &str) -> Result<Vec<Matrix>, StageError> {
        let (format, dims, bytes) = self.tensor(name)?;
        let bad = |m: String| weights(WeightsFailure::BindFailed, format!("tensor `{name}`: {m}"));
        let [n, rows, cols] = dims[..] else {
            return Err(bad(format!("shape {dims:?} is not a stack of matrices")));
        };
        let each = format
            .row_bytes(cols)
            .and_then(|r| r.checked_mul(rows))
            .ok_or_else(|| bad("rows are not whole blocks".into()))?;
        (0..n)
            .map(|e| {
                let part = bytes
                    .sub(e * each..(e + 1) * each)
                    .ok_or_else(|| bad(format!("expert {e} lies outside the tensor")))?;
                Matrix::new(format, rows, cols, part, self.isa).map_err(bad)
            })
            .collect()
    }

    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, StageError> {
        let (format, dims, bytes) = self.tensor(name)?;
        if dims.iter().product::<usize>() != len || format.block_elems() != 1 {
            return Err(weights(
                WeightsFailure::BindFailed,
                format!("tensor `{name}` is {dims:?} {}, not {len} floats", format.name()),
            ));
        }
        let mut out = vec![0.0; len];
        swactor_engine::quant::dequantize_row(format, bytes.as_slice(), &mut out);
        Ok(out)
    }
}

/// Loads `spec`'s tensors from the mapped `gguf` (whose facts are `facts`) into an engine
/// stage computing on `pool`. Returns the stage and the bytes of tensors it uses.
pub fn load(
    gguf: &GgufFile,
    facts: &ModelFacts,
    spec: &StageSpec,
    pool: Arc<ThreadPool>,
) -> Result<(Stage, u64), StageError> {
    let mut b =
        Binder { gguf, file: gguf.mapping().clone(), isa: isa(), bytes: 0, bound: Vec::new() };
    let embedding = if spec.embedding { Some(b.matrix("token_embd.weight")?) } else { None };
    let rope_factors = match facts.arch.rope_freq_factors && !spec.layers.is_empty() {
        true => Some(b.vector("rope_freqs.weight", facts.head_dim as usize / 2)?),
        false => None,
    };
    let mut layers = Vec::with_capacity(spec.layers.len() as usize);
    for i in spec.layers.blocks() {
        layers.push(bind_block(&mut b, facts, i)?);
    }
    let (norm, head) = if spec.head {
        let norm = b.vector("output_norm.weight", facts.hidden_size as usize)?;
        let head = if facts.tied_embeddings { "token_embd.weight" } else { "output.weight" };
        (Some(norm), Some(b.matrix(head)?))
    } else {
        (None, None)
    };
    let cfg = engine_config(facts, spec, &layers);
    let (mut layers, mut head) = (layers, head);
    let mut mats: Vec<&mut Matrix> = layers
        .iter_mut()
        .flat_map(|l| {
            let mut v = vec![&mut l.wq, &mut l.wk, &mut l.wv, &mut l.wo];
            v.extend(l.ffn.matrices_mut());
            v
        })
        .chain(head.as_mut())
        .collect();
    // A repacked matrix's file pages are released as its copy grows: the stage's resident
    // weights are the copies, never the copies plus the file's pages (not even for the
    // length of one large matrix).
    let file = b.file.clone();
    swactor_engine::matmul::repack_all_then(&pool, &mut mats, &|r| file.release(r));
    let bytes = b.bytes;
    if b.bound != stage_tensors(facts, spec.layers, spec.embedding, spec.head) {
        // A node that downloaded only its stage's ranges would have read zeros.
        return Err(weights(
            WeightsFailure::BindFailed,
            "the stage bound tensors outside its weight ranges",
        ));
    }
    let w = Weights { embedding, layers, norm, head, rope_factors };
    let stage = Stage::new(cfg, w, pool, 1).map_err(|e| weights(WeightsFailure::BindFailed, e))?;
    Ok((stage, bytes))
}

/// Binds block `i`'s tensors, in the order [`Family::block_tensors`] lists them.
fn bind_block(b: &mut Binder<'_>, facts: &ModelFacts, i: u32) -> Result<Layer, StageError> {
    let f = facts.arch.family;
    let (d, hd) = (facts.hidden_size as usize, facts.head_dim as usize);
    let (qd, kd) = (facts.head_count as usize * hd, facts.head_count_kv as usize * hd);
    let n = |s: &str| format!("blk.{i}.{s}");
    let attn_norm = b.vector(&n("attn_norm.weight"), d)?;
    let (wq, wk, wv) = (
        b.matrix(&n("attn_q.weight"))?,
        b.matrix(&n("attn_k.weight"))?,
        b.matrix(&n("attn_v.weight"))?,
    );
    let mut extra = Extras::default();
    if f.qkv_bias() {
        extra.q_bias = Some(b.vector(&n("attn_q.bias"), qd)?);
        extra.k_bias = Some(b.vector(&n("attn_k.bias"), kd)?);
        extra.v_bias = Some(b.vector(&n("attn_v.bias"), kd)?);
    }
    if f.qk_norm() {
        extra.q_norm = Some(b.vector(&n("attn_q_norm.weight"), hd)?);
        extra.k_norm = Some(b.vector(&n("attn_k_norm.weight"), hd)?);
    }
    let wo = b.matrix(&n("attn_output.weight"))?;
    if f.post_norms() {
        extra.post_attn_norm = Some(b.vector(&n("post_attention_norm.weight"), d)?);
    }
    if f.o_bias_and_sinks() {
        extra.o_bias = Some(b.vector(&n("attn_output.bias"), d)?);
        extra.sinks = Some(b.vector(&n("attn_sinks.weight"), facts.head_count as usize)?);
    }
    let ffn_norm = b.vector(&n(f.ffn_norm()), d)?;
    let ffn = match &facts.arch.moe {
        None => FeedForward::Dense {
            gate: b.matrix(&n("ffn_gate.weight"))?,
            up: b.matrix(&n("ffn_up.weight"))?,
            down: b.matrix(&n("ffn_down.weight"))?,
        },
        Some(moe) => {
            let router = b.matrix(&n("ffn_gate_inp.weight"))?;
            let gate = b.stack(&n("ffn_gate_exps.weight"))?;
            let up = b.stack(&n("ffn_up_exps.weight"))?;
            let down = b.stack(&n("ffn_down_exps.weight"))?;
            let (e, ef) = (moe.experts as usize, moe.expert_ffn as usize);
            let biases = if moe.biases {
                Some(Box::new(ExpertBiases {
                    router: b.vector(&n("ffn_gate_inp.bias"), e)?,
                    gate: b.vector(&n("ffn_gate_exps.bias"), e * ef)?,
                    up: b.vector(&n("ffn_up_exps.bias"), e * ef)?,
                    down: b.vector(&n("ffn_down_exps.bias"), e * d)?,
                }))
            } else {
                None
            };
            let shared = if moe.shared_ffn > 0 {
                Some(Box::new(SharedExpert {
                    gate_inp: b.vector(&n("ffn_gate_inp_shexp.weight"), d)?,
                    gate: b.matrix(&n("ffn_gate_shexp.weight"))?,
                    up: b.matrix(&n("ffn_up_shexp.weight"))?,
                    down: b.matrix(&n("ffn_down_shexp.weight"))?,
                }))
            } else {
                None
            };
            FeedForward::Experts(Experts {
                router,
                gate,
                up,
                down,
                used: moe.used as usize,
                normalize: moe.normalize,
                shared,
                routing: match moe.routing {
                    swactor_core::model::arch::Routing::Softmax => Routing::Softmax,
                    swactor_core::model::arch::Routing::SoftmaxOfChosen => Routing::SoftmaxOfChosen,
                },
                biases,
            })
        }
    };
    if f.post_norms() {
        extra.post_ffn_norm = Some(b.vector(&n("post_ffw_norm.weight"), d)?);
    }
    Ok(Layer { attn_norm, wq, wk, wv, wo, ffn_norm, ffn, sliding: facts.arch.is_sliding(i), extra })
}

/// The engine's shape and family settings for a stage of `spec` over `layers`.
fn engine_config(facts: &ModelFacts, spec: &StageSpec, layers: &[Layer]) -> Config {
    let family = facts.arch.family;
    let ffn = match (facts.feed_forward_length, layers.first().map(|l| &l.ffn)) {
        (Some(f), _) => f as usize,
        (None, Some(FeedForward::Dense { gate, .. })) => gate.rows(),
        (None, _) => 0,
    };
    let window = facts.arch.sliding_window.unwrap_or(0) as usize;
    // The positions a sliding block's ring holds: the core's figure, which the planner
    // also counts.
    let window_cap = facts.arch.window_positions(spec.max_seq_len).unwrap_or(0) as usize;
    Config {
        hidden: facts.hidden_size as usize,
        heads: facts.head_count as usize,
        kv_heads: facts.head_count_kv as usize,
        head_dim: facts.head_dim as usize,
        ffn,
        vocab: facts.vocab_size as usize,
        eps: facts.rms_norm_eps,
        rope_base: facts.rope.freq_base,
        max_seq_len: spec.max_seq_len as usize,
        kv: match spec.kv_cache {
            crate::wire::KvCacheDType::F32 => swactor_engine::transformer::KvFormat::F32,
            crate::wire::KvCacheDType::F16 => swactor_engine::transformer::KvFormat::F16,
        },
        arch: Arch {
            rope: match family.rope_style() {
                RopeStyle::Interleaved => swactor_engine::transformer::RopeStyle::Interleaved,
                RopeStyle::Halves => swactor_engine::transformer::RopeStyle::Halves,
            },
            gate: match family.gate_activation() {
                GateActivation::Silu => Gate::Silu,
                GateActivation::GeluTanh => Gate::GeluTanh,
                GateActivation::SwigluOai => Gate::SwigluOai,
            },
            embed_scale: if family.scales_embedding() {
                (facts.hidden_size as f32).sqrt()
            } else {
                1.0
            },
            rope_scale: facts.arch.rope_scale,
            window,
            window_cap,
            local_rope_base: facts.arch.local_rope_base,
            attention_scale: facts.arch.attention_scale.unwrap_or(0.0),
            yarn: facts.arch.yarn.map(|y| {
                // llama.cpp's context: its magnitude factor over YaRN's own (1 + 0.1 ln s),
                // which the rope multiplies back in, times the file's.
                let mscale = 0.1 * y.factor.ln() + 1.0;
                Yarn {
                    factor: y.factor,
                    original_context: y.original_context,
                    attn_factor: mscale * (1.0 / (1.0 + 0.1 * y.factor.ln())) * y.attn_factor,
                    beta_fast: 32.0,
                    beta_slow: 1.0,
                }
            }),
        },
    }
}

#[cfg(all(test, feature = "candle"))]
mod tests {
    use super::*;
    use candle_core::quantized::QTensor;
    use candle_core::{Device, Tensor};

    #[test]
    fn every_format_dequantizes_as_candle_does() {
        // Random weights quantized by candle's own quantizers; our block decoding must give
        // candle's values exactly.
        let cols = 512;
        let values: Vec<f32> =
            (0..4 * cols).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0).collect();
        let t = Tensor::from_vec(values, (4, cols), &Device::Cpu).expect("tensor");
        for dtype in GgmlType::ALL
            .into_iter()
            .filter(|&t| weight_format(t).is_some() && t != GgmlType::MXFP4)
        {
            let q = QTensor::quantize(
                &t,
                super::super::candle_stage::candle_dtype(dtype).expect("a candle type"),
            )
            .expect("quantize");
            let want: Vec<f32> = q
                .dequantize(&Device::Cpu)
                .expect("dequantize")
                .flatten_all()
                .expect("flatten")
                .to_vec1()
                .expect("vec");
            let data = q.data().expect("data");
            let fmt = weight_format(dtype).expect("a weight format");
            let mut got = vec![0f32; 4 * cols];
            let rb = fmt.row_bytes(cols).expect("whole blocks");
            for r in 0..4 {
                swactor_engine::quant::dequantize_row(
                    fmt,
                    &data[r * rb..(r + 1) * rb],
                    &mut got[r * cols..(r + 1) * cols],
                );
            }
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-6 * w.abs().max(1.0),
                    "{dtype:?} value {i}: {g} vs candle's {w}"
                );
            }
        }
    }

    #[test]
    fn every_format_quantizes_to_candles_bytes() {
        // The synthesizer and `model quantize` write with the engine's quantizers; candle's
        // wrote the same models before: the bytes must be the same.
        let cols = 512;
        let values: Vec<f32> =
            (0..4 * cols).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 3.0).collect();
        let t = Tensor::from_vec(values.clone(), (4, cols), &Device::Cpu).expect("tensor");
        for dtype in GgmlType::ALL
            .into_iter()
            .filter(|&t| weight_format(t).is_some() && t != GgmlType::MXFP4)
        {
            let q = QTensor::quantize(
                &t,
                super::super::candle_stage::candle_dtype(dtype).expect("a candle type"),
            )
            .expect("quantize");
            let fmt = weight_format(dtype).expect("a weight format");
            let ours = swactor_engine::quantize::quantize(fmt, &values).expect("whole blocks");
            assert!(q.data().expect("data").as_ref() == ours.as_slice(), "{dtype:?}");
        }
    }
}
