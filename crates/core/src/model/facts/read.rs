//! [`facts_from_header`]: a decoded GGUF header's [`ModelFacts`], checked for
//! consistency. The family's own keys are read beside [`Family`]
//! ([`ArchFacts::read`](super::super::arch::ArchFacts)).

use std::collections::BTreeMap;

use super::super::arch::{ArchFacts, Family, MoeFacts};
use super::super::gguf::{GgufHeader, MetaValue};
use super::{
    MAX_HIDDEN_SIZE, MAX_RMS_NORM_EPS, Meta, ModelBytes, ModelError, ModelFacts, RopeFacts,
    inconsistent,
};

/// Builds and checks the facts of a decoded GGUF header (its `file_len` is used to check
/// that every tensor's data lies inside the file). Every size is computed with checked
/// arithmetic, and tensors are visited in order of their offsets, so the same file always
/// gives the same error.
pub fn facts_from_header(header: &GgufHeader) -> Result<ModelFacts, ModelError> {
    let file_len = header.file_len;
    let meta = Meta { header };
    let shape = read_shape(&meta, header.tensors.len())?;
    let arch = |suffix: &str| format!("{}.{suffix}", shape.architecture);
    let rope = read_rope(&meta, &arch, shape.head_dim)?;
    let rms_norm_eps = read_rms_norm_eps(&meta, &arch)?;
    let mut arch_facts = ArchFacts::read(&meta, &arch, shape.family)?;
    // llama.cpp's Gemma 3 27B (62 blocks) scales scores by hidden / heads, not the head size.
    if shape.family == Family::Gemma3 && shape.block_count == 62 {
        arch_facts.attention_scale =
            Some(1.0 / ((shape.hidden_size / shape.head_count) as f32).sqrt());
    }
    let (bos_token_id, eos_token_id) = read_token_ids(&meta, shape.vocab_size)?;
    let eot_token_id = read_eot(&meta, shape.vocab_size, eos_token_id)?;
    check_embedding_rows(header, shape.vocab_size)?;
    let tally = tally_tensors(header, &shape, arch_facts.moe.as_ref())?;
    let bytes = bytes_by_role(tally, file_len, arch_facts.moe.as_ref())?;
    Ok(ModelFacts {
        name: meta.string_opt("general.name")?,
        block_count: shape.block_count,
        hidden_size: shape.hidden_size,
        feed_forward_length: shape.feed_forward_length,
        head_count: shape.head_count,
        head_count_kv: shape.head_count_kv,
        head_dim: shape.head_dim,
        context_length: shape.context_length,
        vocab_size: shape.vocab_size,
        bos_token_id,
        eos_token_id,
        eot_token_id,
        tokenizer_model: meta.string_opt("tokenizer.ggml.model")?,
        tokenizer_pre: meta.string_opt("tokenizer.ggml.pre")?,
        rope,
        rms_norm_eps,
        tied_embeddings: bytes.tied_embeddings,
        bytes: bytes.bytes,
        tensor_types: bytes.tensor_types,
        architecture: shape.architecture,
        arch: arch_facts,
        vocab_digest: vocab_digest(header),
    })
}

/// The sha256 of `tokenizer.ggml.tokens` (each token's length as a little-endian `u64`,
/// then its bytes), lowercase hex; `None` without a token list of strings.
fn vocab_digest(header: &GgufHeader) -> Option<String> {
    use sha2::Digest;
    let Some(MetaValue::Array(tokens)) = header.get("tokenizer.ggml.tokens") else {
        return None;
    };
    let mut hash = sha2::Sha256::new();
    for t in tokens {
        let MetaValue::String(t) = t else { return None };
        hash.update((t.len() as u64).to_le_bytes());
        hash.update(t.as_bytes());
    }
    Some(hash.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// The model's shape: architecture, blocks, hidden size, heads, context and vocabulary.
struct Shape {
    architecture: String,
    family: Family,
    block_count: u32,
    hidden_size: u32,
    head_count: u32,
    head_count_kv: u32,
    head_dim: u32,
    context_length: u32,
    feed_forward_length: Option<u32>,
    vocab_size: u32,
}

/// Reads the shape and heads, checks them ([`check_shape`]), then reads the vocabulary
/// size. `tensor_count` bounds the block count.
fn read_shape(meta: &Meta<'_>, tensor_count: usize) -> Result<Shape, ModelError> {
    let architecture = meta
        .string_opt("general.architecture")?
        .ok_or_else(|| ModelError::MissingKey { key: "general.architecture".into() })?;
    // Refused by name before its keys are read: another architecture's tensors would
    // otherwise fail a llama shape check with a misleading message.
    let Some(family) = Family::parse(&architecture) else {
        return Err(ModelError::UnsupportedArchitecture { architecture });
    };
    let arch = |suffix: &str| format!("{architecture}.{suffix}");
    let block_count = meta.u32_req(&arch("block_count"))?;
    let hidden_size = meta.u32_req(&arch("embedding_length"))?;
    let head_count = meta.u32_req(&arch("attention.head_count"))?;
    let head_count_kv = meta.u32_opt(&arch("attention.head_count_kv"))?.unwrap_or(head_count);
    let context_length = meta.u32_req(&arch("context_length"))?;
    let feed_forward_length = meta.u32_opt(&arch("feed_forward_length"))?;
    let key_length = meta.u32_opt(&arch("attention.key_length"))?;
    let value_length = meta.u32_opt(&arch("attention.value_length"))?;
    if let (Some(k), Some(v)) = (key_length, value_length)
        && k != v
    {
        return inconsistent(format!(
            "key length {k} and value length {v} differ (this build needs them equal)"
        ));
    }
    let mut shape = Shape {
        family,
        block_count,
        hidden_size,
        head_count,
        head_count_kv,
        head_dim: key_length.or(value_length).unwrap_or(0),
        context_length,
        feed_forward_length,
        vocab_size: 0,
        architecture: architecture.clone(),
    };
    shape.head_dim = check_shape(&shape, tensor_count)?;
    let tokens = match meta.array_len("tokenizer.ggml.tokens")? {
        Some(n) => Some(u32::try_from(n).map_err(|_| ModelError::WrongKeyType {
            key: "tokenizer.ggml.tokens".into(),
            expected: "an array of at most 2^32 tokens",
        })?),
        None => None,
    };
    shape.vocab_size = match (meta.u32_opt(&arch("vocab_size"))?, tokens) {
        (Some(v), Some(n)) if v != n => {
            return inconsistent(format!(
                "{} is {v} but the tokenizer has {n} tokens",
                arch("vocab_size")
            ));
        }
        (Some(v), _) => v,
        (None, Some(n)) => n,
        (None, None) => return Err(ModelError::MissingKey { key: arch("vocab_size") }),
    };
    if shape.vocab_size == 0 {
        return inconsistent("the vocabulary is empty".into());
    }
    Ok(shape)
}

/// Checks that the token embedding has one row per token (before the general shape
/// check, so the error says what is wrong): a token id past the rows would index outside
/// the embedding, and a row past the tokens could be sampled but never printed.
fn check_embedding_rows(header: &GgufHeader, vocab_size: u32) -> Result<(), ModelError> {
    let Some(info) = header.tensors.get("token_embd.weight") else { return Ok(()) };
    // Outermost first: the rows (GGUF's second dimension) come first.
    match &info.shape[..] {
        [rows, _] if *rows as u64 != u64::from(vocab_size) => inconsistent(format!(
            "the vocabulary has {vocab_size} tokens but `token_embd.weight` has {rows} rows"
        )),
        _ => Ok(()),
    }
}

/// Checks the shape read so far (everything but the vocabulary) and returns the head
/// dimension.
fn check_shape(shape: &Shape, tensor_count: usize) -> Result<u32, ModelError> {
    let Shape { block_count, hidden_size, head_count, head_count_kv, .. } = *shape;
    if block_count == 0 {
        return inconsistent("block_count is 0".into());
    }
    // Every block has tensors of its own, so there cannot be more blocks than tensors
    // (checked before anything is sized by the block count).
    if block_count as usize > tensor_count {
        return inconsistent(format!(
            "block_count {block_count} but the file has only {tensor_count} tensors"
        ));
    }
    if hidden_size == 0 || head_count == 0 || head_count_kv == 0 {
        return inconsistent("hidden size and head counts must be non-zero".into());
    }
    if hidden_size > MAX_HIDDEN_SIZE {
        return inconsistent(format!(
            "hidden size {hidden_size} is beyond the limit of {MAX_HIDDEN_SIZE}"
        ));
    }
    // The head size is the key length where the file gives one (Gemma 3, Qwen 3,
    // Mistral Nemo), else the hidden size shared by the heads.
    if shape.head_dim == 0 && hidden_size % head_count != 0 {
        return inconsistent(format!(
            "hidden size {hidden_size} is not a multiple of the head count {head_count}"
        ));
    }
    if head_count % head_count_kv != 0 {
        return inconsistent(format!(
            "head count {head_count} is not a multiple of the KV head count {head_count_kv}"
        ));
    }
    let head_dim = if shape.head_dim == 0 { hidden_size / head_count } else { shape.head_dim };
    if head_dim > MAX_HIDDEN_SIZE {
        return inconsistent(format!("head size {head_dim} is beyond {MAX_HIDDEN_SIZE}"));
    }
    if !head_dim.is_multiple_of(2) {
        return inconsistent(format!(
            "head dimension {head_dim} is odd (rotary pairs need it even)"
        ));
    }
    if shape.context_length == 0 {
        return inconsistent("context_length is 0".into());
    }
    if shape.feed_forward_length == Some(0) {
        return inconsistent("feed_forward_length is 0".into());
    }
    Ok(head_dim)
}

/// Reads and checks the rotary embedding's base and dimension count.
fn read_rope(
    meta: &Meta<'_>,
    arch: &dyn Fn(&str) -> String,
    head_dim: u32,
) -> Result<RopeFacts, ModelError> {
    let rope = RopeFacts {
        freq_base: meta.f32_opt(&arch("rope.freq_base"))?.unwrap_or(10_000.0),
        dimension_count: meta.u32_opt(&arch("rope.dimension_count"))?.unwrap_or(head_dim),
    };
    if !(rope.freq_base.is_finite() && rope.freq_base > 0.0) {
        return inconsistent(format!("rope freq_base {} must be finite and > 0", rope.freq_base));
    }
    if rope.dimension_count == 0
        || rope.dimension_count > head_dim
        || !rope.dimension_count.is_multiple_of(2)
    {
        return inconsistent(format!(
            "rope dimension_count {} must be even and lie in 1..={head_dim} (the head dimension)",
            rope.dimension_count
        ));
    }
    Ok(rope)
}

/// Reads and checks the RMSNorm epsilon.
fn read_rms_norm_eps(meta: &Meta<'_>, arch: &dyn Fn(&str) -> String) -> Result<f32, ModelError> {
    let rms_norm_eps = meta.f32_opt(&arch("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5);
    if !(rms_norm_eps.is_finite() && rms_norm_eps > 0.0 && rms_norm_eps <= MAX_RMS_NORM_EPS) {
        return inconsistent(format!(
            "RMSNorm epsilon {rms_norm_eps} must be finite and lie in (0, {MAX_RMS_NORM_EPS}]"
        ));
    }
    Ok(rms_norm_eps)
}

/// Reads the tokenizer's bos and eos ids, each inside the vocabulary.
fn read_token_ids(
    meta: &Meta<'_>,
    vocab_size: u32,
) -> Result<(Option<u32>, Option<u32>), ModelError> {
    let bos_token_id = meta.u32_opt("tokenizer.ggml.bos_token_id")?;
    let eos_token_id = meta.u32_opt("tokenizer.ggml.eos_token_id")?;
    for (what, id) in [("bos", bos_token_id), ("eos", eos_token_id)] {
        if let Some(id) = id
            && id >= vocab_size
        {
            return inconsistent(format!(
                "the {what} token id {id} lies outside the vocabulary of {vocab_size} tokens"
            ));
        }
    }
    Ok((bos_token_id, eos_token_id))
}

/// Every tensor's bytes, summed per block, per type and in all.
struct Tally<'a> {
    per_block: Vec<u64>,
    /// Bytes of each block's routed experts (`ffn_*_exps`).
    experts_per_block: Vec<u64>,
    tensors_total: u64,
    tensor_types: BTreeMap<String, u32>,
    tensor_bytes: BTreeMap<&'a str, u64>,
    /// The blocks' and the output head's tensors by format.
    formats: BTreeMap<String, super::FormatBytes>,
}

/// Tensor bytes, grouped the way stages load them, each tensor's shape checked against the
/// model's constants. Extents first (in offset order), so a truncated file always names
/// the same tensor.
fn tally_tensors<'a>(
    header: &'a GgufHeader,
    shape: &Shape,
    moe: Option<&MoeFacts>,
) -> Result<Tally<'a>, ModelError> {
    header.check_tensor_extents()?;
    let shapes = ExpectedShapes {
        moe: moe.copied(),
        heads: shape.head_count as usize,
        hidden: shape.hidden_size as usize,
        q: (shape.head_count * shape.head_dim) as usize,
        head_dim: shape.head_dim as usize,
        kv: (shape.head_count_kv * shape.head_dim) as usize,
        vocab: shape.vocab_size as usize,
        ffn: shape.feed_forward_length.map(|f| f as usize),
    };
    let block_count = shape.block_count;
    let mut tally = Tally {
        per_block: vec![0u64; block_count as usize],
        experts_per_block: vec![0u64; block_count as usize],
        tensors_total: 0,
        tensor_types: BTreeMap::new(),
        tensor_bytes: BTreeMap::new(),
        formats: BTreeMap::new(),
    };
    for (name, info) in header.tensors_in_order() {
        let (_, bytes) = header.extent(name, info)?;
        if let Some(expected) = shapes.of(name)
            && info.shape != expected
        {
            return inconsistent(format!(
                "tensor `{name}` has shape {:?}, but the model's constants ask for {expected:?}",
                info.shape
            ));
        }
        // Each tensor lies inside the file, so the sum of their sizes cannot overflow.
        tally.tensors_total = tally.tensors_total.saturating_add(bytes);
        *tally.tensor_types.entry(info.dtype.name().to_string()).or_insert(0u32) += 1;
        tally.tensor_bytes.insert(name.as_str(), bytes);
        if name.starts_with("blk.") || name == "output.weight" {
            let weights = info.shape.iter().map(|&d| d as u64).fold(1u64, u64::saturating_mul);
            let f = tally.formats.entry(info.dtype.name().to_string()).or_default();
            f.bytes = f.bytes.saturating_add(bytes);
            f.weights = f.weights.saturating_add(weights);
        }
        if let Some(rest) = name.strip_prefix("blk.") {
            let idx = rest.split('.').next().and_then(|i| i.parse::<u32>().ok());
            match idx {
                Some(i) if i < block_count => {
                    let block = &mut tally.per_block[i as usize];
                    *block = block.saturating_add(bytes);
                    if name.ends_with("_exps.weight") {
                        let e = &mut tally.experts_per_block[i as usize];
                        *e = e.saturating_add(bytes);
                    }
                }
                _ => {
                    return inconsistent(format!(
                        "tensor `{name}` names a block outside 0..{block_count}"
                    ));
                }
            }
        }
    }
    Ok(tally)
}

/// The end-of-turn token: `tokenizer.ggml.eot_token_id`, else a control token whose text
/// is a known end-of-turn marker (llama.cpp looks them up the same way); never eos itself.
fn read_eot(meta: &Meta<'_>, vocab_size: u32, eos: Option<u32>) -> Result<Option<u32>, ModelError> {
    if let Some(id) = meta.u32_opt("tokenizer.ggml.eot_token_id")? {
        if id >= vocab_size {
            return inconsistent(format!(
                "the eot token id {id} lies outside the vocabulary of {vocab_size} tokens"
            ));
        }
        return Ok(Some(id).filter(|&id| Some(id) != eos));
    }
    const MARKERS: [&str; 5] =
        ["<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>"];
    let Some(MetaValue::Array(tokens)) = meta.get("tokenizer.ggml.tokens") else { return Ok(None) };
    let Some(MetaValue::Array(types)) = meta.get("tokenizer.ggml.token_type") else {
        return Ok(None);
    };
    // gpt-oss's harmony vocabulary (as llama.cpp reads it): a turn ends at `<|return|>` or
    // at `<|call|>` (a tool call), never at `<|end|>`, which closes a message inside it.
    let control = |text: &str| {
        tokens.iter().zip(types).position(
            |(t, ty)| matches!((t, ty), (MetaValue::String(s), MetaValue::I32(3)) if s == text),
        )
    };
    if let (Some(ret), Some(call)) = (control("<|return|>"), control("<|call|>")) {
        let other = if eos == u32::try_from(ret).ok() { call } else { ret };
        return Ok(u32::try_from(other).ok().filter(|&id| Some(id) != eos));
    }
    // One pass over the vocabulary: the control token of the earliest marker wins.
    let mut best: Option<(usize, u32)> = None;
    for (i, (t, ty)) in tokens.iter().zip(types).enumerate() {
        let (MetaValue::String(text), MetaValue::I32(3)) = (t, ty) else { continue };
        let Some(rank) = MARKERS.iter().position(|m| m == text) else { continue };
        let Ok(id) = u32::try_from(i) else { break };
        if Some(id) != eos && best.is_none_or(|(r, _)| rank < r) {
            best = Some((rank, id));
        }
    }
    Ok(best.map(|(_, id)| id))
}

/// The bytes of each block, the embedding and the head, and whether the head reuses the
/// embedding.
struct RoleBytes {
    bytes: ModelBytes,
    tensor_types: BTreeMap<String, u32>,
    tied_embeddings: bool,
}

/// Checks that every block has tensors and that the embedding exists, and sizes the head.
fn bytes_by_role(
    tally: Tally<'_>,
    file_len: u64,
    moe: Option<&MoeFacts>,
) -> Result<RoleBytes, ModelError> {
    if let Some(empty) = tally.per_block.iter().position(|&b| b == 0) {
        return inconsistent(format!("block {empty} has no tensors"));
    }
    let Some(&embedding) = tally.tensor_bytes.get("token_embd.weight") else {
        return inconsistent("no `token_embd.weight` tensor".into());
    };
    let norm = tally.tensor_bytes.get("output_norm.weight").copied().unwrap_or(0);
    let (tied_embeddings, head) = match tally.tensor_bytes.get("output.weight") {
        Some(&out) => (false, norm.saturating_add(out)),
        None => (true, norm.saturating_add(embedding)),
    };
    // A token reads the `used` experts' share of a block's experts (rounded up).
    let active_per_block = match moe {
        Some(m) => tally
            .per_block
            .iter()
            .zip(&tally.experts_per_block)
            .map(|(&all, &exps)| {
                let active = u128::from(exps) * u128::from(m.used) / u128::from(m.experts.max(1));
                all - exps + active as u64
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(RoleBytes {
        bytes: ModelBytes {
            per_block: tally.per_block,
            active_per_block,
            embedding,
            head,
            tensors: tally.tensors_total,
            file: file_len,
            formats: tally.formats,
        },
        tensor_types: tally.tensor_types,
        tied_embeddings,
    })
}

/// The shapes (outermost first) the family's tensor names must have, given the
/// model's constants.
struct ExpectedShapes {
    moe: Option<MoeFacts>,
    heads: usize,
    hidden: usize,
    q: usize,
    head_dim: usize,
    kv: usize,
    vocab: usize,
    ffn: Option<usize>,
}

impl ExpectedShapes {
    fn of(&self, name: &str) -> Option<Vec<usize>> {
        let h = self.hidden;
        let suffix = match name.strip_prefix("blk.") {
            Some(rest) => rest.split_once('.').map_or(rest, |(_, s)| s),
            None => name,
        };
        Some(match suffix {
            "token_embd.weight" | "output.weight" => vec![self.vocab, h],
            "output_norm.weight" | "attn_norm.weight" | "ffn_norm.weight" => vec![h],
            "post_attention_norm.weight" | "post_ffw_norm.weight" => vec![h],
            "attn_q.weight" => vec![self.q, h],
            "attn_output.weight" => vec![h, self.q],
            "attn_k.weight" | "attn_v.weight" => vec![self.kv, h],
            "attn_q.bias" => vec![self.q],
            "attn_k.bias" | "attn_v.bias" => vec![self.kv],
            "attn_q_norm.weight" | "attn_k_norm.weight" => vec![self.head_dim],
            "rope_freqs.weight" => vec![self.head_dim / 2],
            "ffn_gate.weight" | "ffn_up.weight" => vec![self.ffn?, h],
            "ffn_down.weight" => vec![h, self.ffn?],
            "ffn_gate_inp.weight" => vec![self.moe?.experts as usize, h],
            "ffn_gate_exps.weight" | "ffn_up_exps.weight" => {
                let m = self.moe?;
                vec![m.experts as usize, m.expert_ffn as usize, h]
            }
            "ffn_down_exps.weight" => {
                let m = self.moe?;
                vec![m.experts as usize, h, m.expert_ffn as usize]
            }
            "ffn_gate_inp_shexp.weight" | "attn_output.bias" => vec![h],
            "attn_sinks.weight" => vec![self.heads],
            "ffn_gate_inp.bias" => vec![self.moe?.experts as usize],
            "ffn_gate_exps.bias" | "ffn_up_exps.bias" => {
                let m = self.moe?;
                vec![m.experts as usize, m.expert_ffn as usize]
            }
            "ffn_down_exps.bias" => vec![self.moe?.experts as usize, h],
            "ffn_gate_shexp.weight" | "ffn_up_shexp.weight" => {
                vec![self.moe?.shared_ffn as usize, h]
            }
            "ffn_down_shexp.weight" => vec![h, self.moe?.shared_ffn as usize],
            _ => return None,
        })
    }
}
