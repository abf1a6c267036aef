//! [`ModelFacts`]: what a GGUF header says about a model, checked for consistency.
//!
//! Pure: works on an already parsed [`Content`] and the file's length.

use candle_core::quantized::gguf_file::{Content, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

/// Rotary embedding settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RopeFacts {
    /// Frequency base (theta).
    pub freq_base: f32,
    /// Dimensions of each head that are rotated.
    pub dimension_count: u32,
}

/// Bytes the model's tensors take, grouped the way stages load them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelBytes {
    /// Bytes of each block's tensors, indexed by block.
    pub per_block: Vec<u64>,
    /// Bytes of the token embedding (loaded by stage 0).
    pub embedding: u64,
    /// Bytes of the final norm and output head (loaded by the last stage); with tied
    /// embeddings the head is the token embedding, counted again here.
    pub head: u64,
    /// Bytes of every tensor in the file.
    pub tensors: u64,
    /// Size of the file.
    pub file: u64,
}

/// What a GGUF header says about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// `general.architecture` (for example `llama`).
    pub architecture: String,
    /// `general.name`, if present.
    pub name: Option<String>,
    /// Transformer blocks.
    pub block_count: u32,
    /// Hidden size (`embedding_length`).
    pub hidden_size: u32,
    /// Feed-forward inner size, if present.
    pub feed_forward_length: Option<u32>,
    /// Attention heads.
    pub head_count: u32,
    /// Key/value heads (grouped-query attention).
    pub head_count_kv: u32,
    /// Dimensions per head.
    pub head_dim: u32,
    /// Trained context length.
    pub context_length: u32,
    /// Vocabulary size.
    pub vocab_size: u32,
    /// Beginning-of-sequence token id.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence token id.
    pub eos_token_id: Option<u32>,
    /// `tokenizer.ggml.model` (`gpt2`, `llama`, ...).
    pub tokenizer_model: Option<String>,
    /// `tokenizer.ggml.pre` (pre-tokenizer name).
    pub tokenizer_pre: Option<String>,
    /// Rotary embedding settings.
    pub rope: RopeFacts,
    /// RMSNorm epsilon.
    pub rms_norm_eps: f32,
    /// Whether the output head reuses the token embedding (no `output.weight`).
    pub tied_embeddings: bool,
    /// Tensor byte sizes.
    pub bytes: ModelBytes,
    /// Number of tensors of each GGML type (`q4_1`, `f32`, ...).
    pub tensor_types: BTreeMap<String, u32>,
}

impl ModelFacts {
    /// Bytes of one block's f32 KV cache at `seq_len` tokens.
    pub fn kv_bytes_per_block(&self, seq_len: u32) -> u64 {
        2 * u64::from(seq_len) * u64::from(self.head_count_kv) * u64::from(self.head_dim) * 4
    }
}

/// Why a file's model facts could not be read. [`ModelError::code`] is a stable reason.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The file does not start with the GGUF magic.
    #[error("not a GGUF file (starts with {found:02x?})")]
    NotGguf {
        /// The first bytes found.
        found: Vec<u8>,
    },
    /// The file ends before its header or tensor data does.
    #[error("truncated GGUF file: {detail}")]
    Truncated {
        /// What is missing.
        detail: String,
    },
    /// The header could not be parsed.
    #[error("malformed GGUF header: {detail}")]
    Malformed {
        /// The parser's message.
        detail: String,
    },
    /// A tensor has a type this build cannot read.
    #[error("unsupported tensor type: {detail}")]
    UnsupportedTensorType {
        /// The parser's message.
        detail: String,
    },
    /// A required metadata key is absent.
    #[error("missing GGUF metadata key `{key}`")]
    MissingKey {
        /// The key.
        key: String,
    },
    /// A metadata key has the wrong type or an out-of-range value.
    #[error("GGUF metadata key `{key}` is not {expected}")]
    WrongKeyType {
        /// The key.
        key: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The facts contradict each other or the tensors.
    #[error("inconsistent model: {detail}")]
    Inconsistent {
        /// What is inconsistent.
        detail: String,
    },
}

impl ModelError {
    /// A stable `snake_case` code for this error class.
    pub const fn code(&self) -> &'static str {
        match self {
            ModelError::Io { .. } => "io",
            ModelError::NotGguf { .. } => "not_gguf",
            ModelError::Truncated { .. } => "truncated",
            ModelError::Malformed { .. } => "malformed",
            ModelError::UnsupportedTensorType { .. } => "unsupported_tensor_type",
            ModelError::MissingKey { .. } => "missing_key",
            ModelError::WrongKeyType { .. } => "wrong_key_type",
            ModelError::Inconsistent { .. } => "inconsistent",
        }
    }
}

/// Typed access to GGUF metadata.
struct Meta<'a> {
    content: &'a Content,
}

impl Meta<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.content.metadata.get(key)
    }

    fn uint(&self, key: &str) -> Result<Option<u64>, ModelError> {
        let wrong =
            || ModelError::WrongKeyType { key: key.to_string(), expected: "an unsigned integer" };
        let Some(v) = self.get(key) else { return Ok(None) };
        let n: i128 = match *v {
            Value::U8(x) => x.into(),
            Value::I8(x) => x.into(),
            Value::U16(x) => x.into(),
            Value::I16(x) => x.into(),
            Value::U32(x) => x.into(),
            Value::I32(x) => x.into(),
            Value::U64(x) => x.into(),
            Value::I64(x) => x.into(),
            _ => return Err(wrong()),
        };
        u64::try_from(n).map(Some).map_err(|_| wrong())
    }

    fn u32_opt(&self, key: &str) -> Result<Option<u32>, ModelError> {
        match self.uint(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n).map(Some).map_err(|_| ModelError::WrongKeyType {
                key: key.to_string(),
                expected: "a 32-bit unsigned integer",
            }),
        }
    }

    fn u32_req(&self, key: &str) -> Result<u32, ModelError> {
        self.u32_opt(key)?.ok_or_else(|| ModelError::MissingKey { key: key.to_string() })
    }

    fn f32_opt(&self, key: &str) -> Result<Option<f32>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) => Ok(Some(*x)),
            Some(Value::F64(x)) => Ok(Some(*x as f32)),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a float" }),
        }
    }

    fn string_opt(&self, key: &str) -> Result<Option<String>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a string" }),
        }
    }

    fn array_len(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a.len())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "an array" }),
        }
    }
}

/// The lowercase GGML type name of a tensor type (`q4_0`, `q4k`, ...).
pub fn dtype_name(dtype: candle_core::quantized::GgmlDType) -> String {
    format!("{dtype:?}").to_lowercase()
}

/// Builds and checks the facts of a parsed GGUF header. `file_len` is the file's size,
/// used to check that every tensor's data lies inside the file.
pub fn facts_from_content(content: &Content, file_len: u64) -> Result<ModelFacts, ModelError> {
    let meta = Meta { content };
    let architecture = meta
        .string_opt("general.architecture")?
        .ok_or_else(|| ModelError::MissingKey { key: "general.architecture".into() })?;
    let arch = |suffix: &str| format!("{architecture}.{suffix}");

    let block_count = meta.u32_req(&arch("block_count"))?;
    let hidden_size = meta.u32_req(&arch("embedding_length"))?;
    let head_count = meta.u32_req(&arch("attention.head_count"))?;
    let head_count_kv = meta.u32_opt(&arch("attention.head_count_kv"))?.unwrap_or(head_count);
    let context_length = meta.u32_req(&arch("context_length"))?;
    let feed_forward_length = meta.u32_opt(&arch("feed_forward_length"))?;
    let inconsistent = |detail: String| Err(ModelError::Inconsistent { detail });
    if block_count == 0 {
        return inconsistent("block_count is 0".into());
    }
    if hidden_size == 0 || head_count == 0 || head_count_kv == 0 {
        return inconsistent("hidden size and head counts must be non-zero".into());
    }
    if hidden_size % head_count != 0 {
        return inconsistent(format!(
            "hidden size {hidden_size} is not a multiple of the head count {head_count}"
        ));
    }
    if head_count % head_count_kv != 0 {
        return inconsistent(format!(
            "head count {head_count} is not a multiple of the KV head count {head_count_kv}"
        ));
    }
    let head_dim = hidden_size / head_count;
    let vocab_size = match meta.u32_opt(&arch("vocab_size"))? {
        Some(v) => v,
        None => match meta.array_len("tokenizer.ggml.tokens")? {
            Some(n) => u32::try_from(n).map_err(|_| ModelError::WrongKeyType {
                key: "tokenizer.ggml.tokens".into(),
                expected: "an array of at most 2^32 tokens",
            })?,
            None => return Err(ModelError::MissingKey { key: arch("vocab_size") }),
        },
    };
    let rope = RopeFacts {
        freq_base: meta.f32_opt(&arch("rope.freq_base"))?.unwrap_or(10_000.0),
        dimension_count: meta.u32_opt(&arch("rope.dimension_count"))?.unwrap_or(head_dim),
    };
    let rms_norm_eps = meta.f32_opt(&arch("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-5);

    // Tensor bytes, grouped the way stages load them.
    let mut per_block = vec![0u64; block_count as usize];
    let mut tensors_total = 0u64;
    let mut tensor_types = BTreeMap::new();
    let mut tensor_bytes = BTreeMap::new();
    for (name, info) in &content.tensor_infos {
        let elems = info.shape.elem_count() as u64;
        let block = info.ggml_dtype.block_size() as u64;
        if !elems.is_multiple_of(block) {
            return inconsistent(format!(
                "tensor `{name}` has {elems} elements, not a multiple of its block size {block}"
            ));
        }
        let bytes = elems / block * info.ggml_dtype.type_size() as u64;
        let end =
            content.tensor_data_offset.checked_add(info.offset).and_then(|s| s.checked_add(bytes));
        match end {
            Some(end) if end <= file_len => {}
            _ => {
                return Err(ModelError::Truncated {
                    detail: format!(
                        "tensor `{name}` extends past the end of the file ({file_len} bytes)"
                    ),
                });
            }
        }
        tensors_total += bytes;
        *tensor_types.entry(dtype_name(info.ggml_dtype)).or_insert(0u32) += 1;
        tensor_bytes.insert(name.as_str(), bytes);
        if let Some(rest) = name.strip_prefix("blk.") {
            let idx = rest.split('.').next().and_then(|i| i.parse::<u32>().ok());
            match idx {
                Some(i) if i < block_count => per_block[i as usize] += bytes,
                _ => {
                    return inconsistent(format!(
                        "tensor `{name}` names a block outside 0..{block_count}"
                    ));
                }
            }
        }
    }
    if let Some(empty) = per_block.iter().position(|&b| b == 0) {
        return inconsistent(format!("block {empty} has no tensors"));
    }
    let Some(&embedding) = tensor_bytes.get("token_embd.weight") else {
        return inconsistent("no `token_embd.weight` tensor".into());
    };
    let norm = tensor_bytes.get("output_norm.weight").copied().unwrap_or(0);
    let (tied_embeddings, head) = match tensor_bytes.get("output.weight") {
        Some(&out) => (false, norm + out),
        None => (true, norm + embedding),
    };

    Ok(ModelFacts {
        name: meta.string_opt("general.name")?,
        block_count,
        hidden_size,
        feed_forward_length,
        head_count,
        head_count_kv,
        head_dim,
        context_length,
        vocab_size,
        bos_token_id: meta.u32_opt("tokenizer.ggml.bos_token_id")?,
        eos_token_id: meta.u32_opt("tokenizer.ggml.eos_token_id")?,
        tokenizer_model: meta.string_opt("tokenizer.ggml.model")?,
        tokenizer_pre: meta.string_opt("tokenizer.ggml.pre")?,
        rope,
        rms_norm_eps,
        tied_embeddings,
        bytes: ModelBytes { per_block, embedding, head, tensors: tensors_total, file: file_len },
        tensor_types,
        architecture,
    })
}
