//! A llama-family pipeline stage on candle: the blocks of one contiguous layer range, plus
//! the token embedding on the first stage and the final norm, output head and logits on
//! the last. The whole model is the single stage that owns everything, so the one-process
//! reference and every pipeline stage run exactly the same code.
//!
//! Only the tensors of the stage's own range (and its embedding / head) are read from the
//! file. Activations cross stages as raw little-endian `f32` (or `f16`) `[tokens, hidden]`
//! bytes ([`encode_hidden`] / [`decode_hidden`]).

use std::fs::File;
use std::io::BufReader;
use std::path::Path;

use candle_core::quantized::gguf_file::Content;
use candle_core::quantized::{QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::ops::{rms_norm, silu, softmax_last_dim};
use candle_nn::rotary_emb::rope_i;

use super::facts::{ModelError, ModelFacts, facts_from_content};
use crate::wire::reason::WeightsFailure;
use crate::wire::{ActivationDType, LayerRange};

/// Where a stage computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ComputeDevice {
    /// The CPU (candle's CPU kernels; threads from `RAYON_NUM_THREADS`).
    #[default]
    Cpu,
    /// An NVIDIA GPU (needs a build with the `cuda` feature).
    Cuda(u32),
}

impl ComputeDevice {
    /// Parses `cpu` or `cuda:N` (`cuda` alone means `cuda:0`).
    pub fn parse(text: &str) -> Option<ComputeDevice> {
        match text {
            "cpu" => Some(ComputeDevice::Cpu),
            "cuda" => Some(ComputeDevice::Cuda(0)),
            _ => text.strip_prefix("cuda:").and_then(|n| n.parse().ok()).map(ComputeDevice::Cuda),
        }
    }

    fn open(self) -> Result<Device, StageError> {
        match self {
            ComputeDevice::Cpu => Ok(Device::Cpu),
            ComputeDevice::Cuda(n) => Device::new_cuda(n as usize).map_err(|e| {
                weights(WeightsFailure::AllocationFailed, format!("CUDA device {n}: {e}"))
            }),
        }
    }
}

/// What a stage loads and how long its KV cache is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageSpec {
    /// The blocks it runs.
    pub layers: LayerRange,
    /// Whether it owns the token embedding (first stage).
    pub embedding: bool,
    /// Whether it owns the final norm, head and logits (last stage).
    pub head: bool,
    /// Longest sequence its KV cache holds.
    pub max_seq_len: u32,
    /// Where it computes.
    pub device: ComputeDevice,
}

/// Why a stage could not load or compute.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The weights could not be made ready (the reason is a stable code).
    #[error("weights: {reason}: {detail}")]
    Weights {
        /// Stable reason.
        reason: WeightsFailure,
        /// What exactly.
        detail: String,
    },
    /// The input does not fit the stage (wrong kind, shape, or token id).
    #[error("bad input: {0}")]
    BadInput(String),
    /// The KV cache is full.
    #[error("context full: {used} + {more} tokens exceed max_seq_len {max}")]
    ContextFull {
        /// Tokens already cached.
        used: usize,
        /// Tokens offered.
        more: usize,
        /// The cache length.
        max: usize,
    },
    /// The computation failed.
    #[error("compute: {0}")]
    Compute(#[from] candle_core::Error),
    /// The forward pass was aborted between blocks (the stage is being stopped); the
    /// stage's caches must be reset before it computes again.
    #[error("aborted")]
    Aborted,
}

fn weights(reason: WeightsFailure, detail: impl Into<String>) -> StageError {
    StageError::Weights { reason, detail: detail.into() }
}

impl From<ModelError> for StageError {
    fn from(e: ModelError) -> Self {
        let reason = match e {
            ModelError::UnsupportedTensorType { .. } => WeightsFailure::UnsupportedTensorType,
            _ => WeightsFailure::ParseFailed,
        };
        weights(reason, e.to_string())
    }
}

struct Block {
    attn_norm: Tensor,
    wq: QMatMul,
    wk: QMatMul,
    wv: QMatMul,
    wo: QMatMul,
    ffn_norm: Tensor,
    w_gate: QMatMul,
    w_up: QMatMul,
    w_down: QMatMul,
}

/// What a stage consumes.
#[derive(Debug)]
pub enum StageInput<'a> {
    /// Token ids (first stage).
    Tokens(&'a [u32]),
    /// Hidden states `[tokens, hidden]` from the previous stage.
    Hidden(Tensor),
}

/// What a stage produces.
#[derive(Debug)]
pub enum StageOutput {
    /// Hidden states `[tokens, hidden]` for the next stage.
    Hidden(Tensor),
    /// Logits of the last position (last stage).
    Logits(Vec<f32>),
}

/// One stage of a llama-family model.
pub struct LlamaStage {
    spec: StageSpec,
    facts: ModelFacts,
    device: Device,
    embedding: Option<Tensor>,
    blocks: Vec<Block>,
    norm: Option<Tensor>,
    output: Option<QMatMul>,
    cos: Tensor,
    sin: Tensor,
    cache: Vec<Option<(Tensor, Tensor)>>,
    pos: usize,
    loaded_bytes: u64,
}

impl std::fmt::Debug for LlamaStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaStage").field("spec", &self.spec).field("pos", &self.pos).finish()
    }
}

struct Loader<'a> {
    content: &'a Content,
    reader: BufReader<File>,
    device: &'a Device,
    bytes: u64,
}

impl Loader<'_> {
    fn qtensor(&mut self, name: &str) -> Result<QTensor, StageError> {
        let info = self.content.tensor_infos.get(name).ok_or_else(|| {
            weights(WeightsFailure::MissingTensor, format!("tensor `{name}` is missing"))
        })?;
        let t = info
            .read(&mut self.reader, self.content.tensor_data_offset, self.device)
            .map_err(|e| weights(WeightsFailure::ParseFailed, format!("tensor `{name}`: {e}")))?;
        self.bytes += t.storage_size_in_bytes() as u64;
        Ok(t)
    }

    fn matmul(&mut self, name: &str) -> Result<QMatMul, StageError> {
        let t = self.qtensor(name)?;
        QMatMul::from_qtensor(t)
            .map_err(|e| weights(WeightsFailure::BindFailed, format!("tensor `{name}`: {e}")))
    }

    fn dense(&mut self, name: &str) -> Result<Tensor, StageError> {
        let t = self.qtensor(name)?;
        t.dequantize(self.device)
            .map_err(|e| weights(WeightsFailure::BindFailed, format!("tensor `{name}`: {e}")))
    }
}

impl LlamaStage {
    /// Loads a stage from a GGUF file: validates the range against the file's blocks and
    /// reads only the stage's tensors. Each failure class has its own [`WeightsFailure`].
    pub fn load(path: &Path, spec: StageSpec) -> Result<LlamaStage, StageError> {
        let (content, len) = super::gguf::read_content(path)?;
        let facts = facts_from_content(&content, len)?;
        if spec.layers.is_empty() || spec.layers.end > facts.block_count {
            return Err(weights(
                WeightsFailure::InvalidRange,
                format!("layers {} outside the file's 0..{}", spec.layers, facts.block_count),
            ));
        }
        if facts.rope.dimension_count != facts.head_dim {
            return Err(weights(
                WeightsFailure::BindFailed,
                "partial rotary embeddings are not supported",
            ));
        }
        if spec.max_seq_len == 0 {
            return Err(weights(WeightsFailure::BindFailed, "max_seq_len is 0"));
        }
        let device = spec.device.open()?;
        let file =
            File::open(path).map_err(|e| weights(WeightsFailure::ParseFailed, e.to_string()))?;
        let mut l =
            Loader { content: &content, reader: BufReader::new(file), device: &device, bytes: 0 };
        let embedding = if spec.embedding { Some(l.dense("token_embd.weight")?) } else { None };
        let mut blocks = Vec::with_capacity(spec.layers.len() as usize);
        for b in spec.layers.blocks() {
            let n = |s: &str| format!("blk.{b}.{s}.weight");
            blocks.push(Block {
                attn_norm: l.dense(&n("attn_norm"))?,
                wq: l.matmul(&n("attn_q"))?,
                wk: l.matmul(&n("attn_k"))?,
                wv: l.matmul(&n("attn_v"))?,
                wo: l.matmul(&n("attn_output"))?,
                ffn_norm: l.dense(&n("ffn_norm"))?,
                w_gate: l.matmul(&n("ffn_gate"))?,
                w_up: l.matmul(&n("ffn_up"))?,
                w_down: l.matmul(&n("ffn_down"))?,
            });
        }
        let (norm, output) = if spec.head {
            let norm = l.dense("output_norm.weight")?;
            let head = if facts.tied_embeddings { "token_embd.weight" } else { "output.weight" };
            (Some(norm), Some(l.matmul(head)?))
        } else {
            (None, None)
        };
        let (cos, sin) = rope_tables(&facts, spec.max_seq_len as usize, &device)?;
        let loaded_bytes = l.bytes;
        Ok(LlamaStage {
            cache: (0..blocks.len()).map(|_| None).collect(),
            spec,
            facts,
            device,
            embedding,
            blocks,
            norm,
            output,
            cos,
            sin,
            pos: 0,
            loaded_bytes,
        })
    }

    /// The stage's spec.
    pub fn spec(&self) -> &StageSpec {
        &self.spec
    }

    /// The model's facts.
    pub fn facts(&self) -> &ModelFacts {
        &self.facts
    }

    /// Bytes of tensors read from the file.
    pub fn loaded_bytes(&self) -> u64 {
        self.loaded_bytes
    }

    /// Tokens in the KV cache.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Clears the KV cache (a new sequence starts).
    pub fn reset(&mut self) {
        self.pos = 0;
        self.cache.iter_mut().for_each(|c| *c = None);
    }

    /// Runs the stage over `n` new tokens (prefill when `n > 1`, decode when 1).
    pub fn forward(&mut self, input: StageInput<'_>) -> Result<StageOutput, StageError> {
        self.forward_abortable(input, &std::sync::atomic::AtomicBool::new(false))
    }

    /// As [`LlamaStage::forward`], polling `abort` between blocks: a long prefill stops
    /// within one block's time of a stop ([`StageError::Aborted`]).
    pub fn forward_abortable(
        &mut self,
        input: StageInput<'_>,
        abort: &std::sync::atomic::AtomicBool,
    ) -> Result<StageOutput, StageError> {
        let x = match (input, &self.embedding) {
            (StageInput::Tokens(ids), Some(emb)) => {
                if ids.is_empty() {
                    return Err(StageError::BadInput("no tokens".into()));
                }
                if let Some(bad) = ids.iter().find(|&&id| id >= self.facts.vocab_size) {
                    return Err(StageError::BadInput(format!(
                        "token {bad} outside the vocabulary"
                    )));
                }
                let ids = Tensor::new(ids, &self.device)?;
                emb.index_select(&ids, 0)?
            }
            (StageInput::Hidden(h), None) => {
                let h = h.to_device(&self.device)?;
                let (n, hidden) = h.dims2()?;
                if n == 0 || hidden != self.facts.hidden_size as usize {
                    return Err(StageError::BadInput(format!(
                        "hidden states of shape [{n}, {hidden}]"
                    )));
                }
                h
            }
            (StageInput::Tokens(_), None) => {
                return Err(StageError::BadInput(
                    "token ids for a stage without the embedding".into(),
                ));
            }
            (StageInput::Hidden(_), Some(_)) => {
                return Err(StageError::BadInput("hidden states for the first stage".into()));
            }
        };
        let n = x.dim(0)?;
        let max = self.spec.max_seq_len as usize;
        if self.pos + n > max {
            return Err(StageError::ContextFull { used: self.pos, more: n, max });
        }
        let mut x = x.unsqueeze(0)?;
        for i in 0..self.blocks.len() {
            if abort.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(StageError::Aborted);
            }
            x = self.block(i, &x)?;
        }
        self.pos += n;
        let x = x.squeeze(0)?;
        match (&self.norm, &self.output) {
            (Some(norm), Some(output)) => {
                let last = x.narrow(0, n - 1, 1)?;
                let last = rms_norm(&last, norm, self.facts.rms_norm_eps)?;
                let logits = output.forward(&last)?.squeeze(0)?.to_dtype(DType::F32)?;
                Ok(StageOutput::Logits(logits.to_vec1()?))
            }
            _ => Ok(StageOutput::Hidden(x)),
        }
    }

    fn block(&mut self, i: usize, x: &Tensor) -> Result<Tensor, StageError> {
        let f = &self.facts;
        let (heads, kv_heads, hd) =
            (f.head_count as usize, f.head_count_kv as usize, f.head_dim as usize);
        let eps = f.rms_norm_eps;
        let blk = &self.blocks[i];
        let (b, n, _) = x.dims3()?;
        let h = rms_norm(x, &blk.attn_norm, eps)?;
        let q = blk.wq.forward(&h)?.reshape((b, n, heads, hd))?.transpose(1, 2)?.contiguous()?;
        let k = blk.wk.forward(&h)?.reshape((b, n, kv_heads, hd))?.transpose(1, 2)?.contiguous()?;
        let v = blk.wv.forward(&h)?.reshape((b, n, kv_heads, hd))?.transpose(1, 2)?.contiguous()?;
        let cos = self.cos.narrow(0, self.pos, n)?;
        let sin = self.sin.narrow(0, self.pos, n)?;
        let q = rope_i(&q, &cos, &sin)?;
        let k = rope_i(&k, &cos, &sin)?;
        let (k, v) = match &self.cache[i] {
            Some((pk, pv)) => (Tensor::cat(&[pk, &k], 2)?, Tensor::cat(&[pv, &v], 2)?),
            None => (k, v),
        };
        self.cache[i] = Some((k.clone(), v.clone()));
        let k = repeat_kv(k, heads / kv_heads)?;
        let v = repeat_kv(v, heads / kv_heads)?;
        let att = (q.matmul(&k.t()?.contiguous()?)? * (1.0 / (hd as f64).sqrt()))?;
        let att =
            if n > 1 { att.broadcast_add(&causal_mask(n, self.pos, &self.device)?)? } else { att };
        let att = softmax_last_dim(&att)?;
        let y = att.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((b, n, heads * hd))?;
        let x = (x + blk.wo.forward(&y)?)?;
        let h = rms_norm(&x, &blk.ffn_norm, eps)?;
        let ffn =
            blk.w_down.forward(&(silu(&blk.w_gate.forward(&h)?)? * blk.w_up.forward(&h)?)?)?;
        Ok((x + ffn)?)
    }
}

fn rope_tables(
    f: &ModelFacts,
    max: usize,
    device: &Device,
) -> Result<(Tensor, Tensor), StageError> {
    let hd = f.head_dim as usize;
    let inv: Vec<f32> =
        (0..hd / 2).map(|i| 1.0 / f.rope.freq_base.powf(2.0 * i as f32 / hd as f32)).collect();
    let inv = Tensor::from_vec(inv, (1, hd / 2), device)?;
    let pos = Tensor::arange(0u32, max as u32, device)?.to_dtype(DType::F32)?.reshape((max, 1))?;
    let freqs = pos.broadcast_mul(&inv)?;
    Ok((freqs.cos()?, freqs.sin()?))
}

fn repeat_kv(x: Tensor, n_rep: usize) -> Result<Tensor, candle_core::Error> {
    if n_rep == 1 {
        return Ok(x);
    }
    let (b, kvh, t, d) = x.dims4()?;
    x.unsqueeze(2)?.expand((b, kvh, n_rep, t, d))?.reshape((b, kvh * n_rep, t, d))
}

/// `[n, pos + n]` additive mask: query `i` (at `pos + i`) sees keys `0..=pos + i`.
fn causal_mask(n: usize, pos: usize, device: &Device) -> Result<Tensor, candle_core::Error> {
    let total = pos + n;
    let mask: Vec<f32> = (0..n)
        .flat_map(|i| (0..total).map(move |j| if j > pos + i { f32::NEG_INFINITY } else { 0.0 }))
        .collect();
    Tensor::from_vec(mask, (n, total), device)
}

/// Hidden states as wire bytes (`[tokens, hidden]`, little-endian).
pub fn encode_hidden(h: &Tensor, dtype: ActivationDType) -> Result<Vec<u8>, StageError> {
    let values: Vec<f32> = h.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
    Ok(match dtype {
        ActivationDType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ActivationDType::F16 => {
            values.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect()
        }
    })
}

/// Wire bytes back into hidden states `[tokens, hidden]`.
pub fn decode_hidden(
    bytes: &[u8],
    hidden: usize,
    dtype: ActivationDType,
) -> Result<Tensor, StageError> {
    let width = match dtype {
        ActivationDType::F32 => 4,
        ActivationDType::F16 => 2,
    };
    if hidden == 0 || bytes.is_empty() || !bytes.len().is_multiple_of(hidden * width) {
        return Err(StageError::BadInput(format!(
            "{} bytes are not whole rows of {hidden} values",
            bytes.len()
        )));
    }
    let values: Vec<f32> = match dtype {
        ActivationDType::F32 => {
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        ActivationDType::F16 => {
            bytes.chunks_exact(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
        }
    };
    let n = values.len() / hidden;
    Ok(Tensor::from_vec(values, (n, hidden), &Device::Cpu)?)
}
