//! A llama stage on candle's ops (the `candle` feature): the path for CUDA devices, and on
//! the CPU the reference the engine is tested against (`--device candle`). It reads only
//! its own tensors, copying them out of the mapped file.

use candle_core::quantized::ggml_file::qtensor_from_ggml;
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Device, Module, Tensor};
use candle_nn::ops::{rms_norm, silu, softmax_last_dim};
use candle_nn::rotary_emb::rope_i;

use super::compute::{ComputeDevice, StageError, StageInput, StageOutput, StageSpec, weights};
use super::facts::{ModelError, ModelFacts};
use super::gguf::{GgmlType, GgufFile};
use crate::wire::reason::WeightsFailure;

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

/// One stage on candle.
pub(crate) struct CandleStage {
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

impl std::fmt::Debug for CandleStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CandleStage").field("spec", &self.spec).field("pos", &self.pos).finish()
    }
}

impl From<candle_core::Error> for StageError {
    fn from(e: candle_core::Error) -> Self {
        StageError::Compute(e.to_string())
    }
}

/// candle's type of a GGML type (`None`: candle has no such type, MXFP4).
pub(crate) fn candle_dtype(t: GgmlType) -> Option<GgmlDType> {
    Some(match t {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2K => GgmlDType::Q2K,
        GgmlType::Q3K => GgmlDType::Q3K,
        GgmlType::Q4K => GgmlDType::Q4K,
        GgmlType::Q5K => GgmlDType::Q5K,
        GgmlType::Q6K => GgmlDType::Q6K,
        GgmlType::Q8K => GgmlDType::Q8K,
        GgmlType::MXFP4 => return None,
    })
}

struct Loader<'a> {
    file: &'a GgufFile,
    device: &'a Device,
    bytes: u64,
}

impl Loader<'_> {
    fn qtensor(&mut self, name: &str) -> Result<QTensor, StageError> {
        let header = self.file.header();
        let info = header.tensors.get(name).ok_or_else(|| {
            weights(WeightsFailure::MissingTensor, format!("tensor `{name}` is missing"))
        })?;
        // The header checked the extent inside the file.
        let (start, len) = header.extent(name, info).map_err(ModelError::from)?;
        let start = start as usize;
        let data = &(**self.file.mapping()).as_ref()[start..start + len as usize];
        let dtype = candle_dtype(info.dtype).ok_or_else(|| {
            weights(
                WeightsFailure::UnsupportedTensorType,
                format!(
                    "tensor `{name}` is {}: the candle path has no such type",
                    info.dtype.name()
                ),
            )
        })?;
        let t = qtensor_from_ggml(dtype, data, info.shape.clone(), self.device)
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

impl CandleStage {
    /// Loads a stage whose range and shape [`super::stage::ModelStage::load`] checked.
    pub(crate) fn load(
        file: &GgufFile,
        spec: StageSpec,
        facts: ModelFacts,
    ) -> Result<CandleStage, StageError> {
        let device = match spec.device {
            ComputeDevice::Cuda(n) => Device::new_cuda(n as usize).map_err(|e| {
                weights(WeightsFailure::AllocationFailed, format!("CUDA device {n}: {e}"))
            })?,
            _ => Device::Cpu,
        };
        let mut l = Loader { file, device: &device, bytes: 0 };
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
        Ok(CandleStage {
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

    /// Bytes of tensors read from the file.
    pub(crate) fn loaded_bytes(&self) -> u64 {
        self.loaded_bytes
    }

    /// Tokens in the KV cache.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// Clears the KV cache (a new sequence starts).
    pub(crate) fn reset(&mut self) {
        self.pos = 0;
        self.cache.iter_mut().for_each(|c| *c = None);
    }

    /// Drops the cached positions from `len` on (a new sequence that shares the first
    /// `len`, or a rejected draft's rows): the next row continues at `len`.
    pub(crate) fn truncate(&mut self, len: usize) -> Result<(), StageError> {
        if len >= self.pos {
            return Ok(());
        }
        for c in self.cache.iter_mut() {
            if let Some((k, v)) = c.take() {
                *c = if len == 0 {
                    None
                } else {
                    Some((k.narrow(2, 0, len)?, v.narrow(2, 0, len)?))
                };
            }
        }
        self.pos = len;
        Ok(())
    }

    /// Runs the stage, polling `abort` between blocks.
    pub(crate) fn forward_abortable(
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
                let hidden = self.facts.hidden_size as usize;
                if h.is_empty() || !h.len().is_multiple_of(hidden) {
                    return Err(StageError::BadInput(format!(
                        "{} hidden values are not whole rows of {hidden}",
                        h.len()
                    )));
                }
                Tensor::from_slice(h, (h.len() / hidden, hidden), &self.device)?
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
            _ => Ok(StageOutput::Hidden(x.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?)),
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
