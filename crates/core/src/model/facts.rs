//! [`ModelFacts`]: what a GGUF header says about a model, and why a file's facts could not
//! be read ([`ModelError`]). [`facts_from_header`] reads them from a decoded header
//! (`facts/read.rs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use thiserror::Error;

use super::gguf::{GgufError, GgufHeader, MetaValue};

mod read;

pub use read::facts_from_header;

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

impl ModelBytes {
    /// Weight bytes one decode step reads: every block and the head (of the embedding,
    /// one row): what one token costs where decoding is bound by reading the weights.
    pub fn step_bytes(&self) -> u64 {
        self.per_block.iter().sum::<u64>() + self.head
    }
}

/// What a GGUF header says about a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFacts {
    /// `general.architecture` (for example `llama`).
    pub architecture: String,
    /// The family's settings as the file gives them.
    #[serde(default)]
    pub arch: super::arch::ArchFacts,
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
    /// End-of-turn token id, where the vocabulary has one besides eos (`<end_of_turn>`,
    /// `<|eot_id|>`, `<|im_end|>`): generation stops at either.
    #[serde(default)]
    pub eot_token_id: Option<u32>,
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
    /// The sha256 of the vocabulary's tokens in order (lowercase hex; `None` for a file
    /// without `tokenizer.ggml.tokens`): two models share a vocabulary when they are equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vocab_digest: Option<String>,
}

/// Resident bytes of a stage's processes besides its weights, caches, rings and scratch:
/// the node's and its worker's code, runtime, threads and heap (measured about 24 MiB for
/// a node and 6-10 MiB for its worker in a release build, 33-34 MiB for a node in a debug
/// build), with room to spare.
pub const STAGE_PROCESS_BYTES: u64 = 64 << 20;

impl ModelFacts {
    /// Bytes the engine's scratch may take for one forward pass of `rows` rows attending
    /// over at most `seq_len` positions: the hidden states and every product's output,
    /// the activations in f32 and quantized with their per-block sums, the attention
    /// scores of every (row, head), rope tables, and with the head (`sampled` rows) the
    /// logits twice (transposed and gathered). An upper bound of what the engine
    /// allocates (tested against it).
    pub fn compute_bytes(&self, rows: u32, seq_len: u32, head: bool, sampled: u32) -> u64 {
        let (n, hd) = (u64::from(rows), u64::from(self.head_dim));
        let d = u64::from(self.hidden_size);
        let f = u64::from(self.feed_forward_length.unwrap_or(4 * self.hidden_size));
        let (qd, kd) = (u64::from(self.head_count) * hd, u64::from(self.head_count_kv) * hd);
        let wide = d.max(f).max(qd);
        let out = (qd + 2 * kd).max(d).max(f);
        let floats = n * (d + 2 * qd + out + wide)
            + n * u64::from(self.head_count) * (3 * hd + u64::from(seq_len))
            + 4 * u64::from(seq_len) * hd
            + if head { 2 * u64::from(self.vocab_size) * u64::from(sampled) } else { 0 };
        // Quantized activations: a byte per value, 160 bytes of scales and sums per 32
        // values, and the 256-value blocks' besides.
        let quantized = n * wide * (1 + 5 + 2);
        4 * floats + quantized
    }

    /// Bytes of block `block`'s KV cache for one sequence of at most `seq_len` tokens, its
    /// values kept as `kv` (a sliding-window block holds only its window).
    pub fn kv_bytes_of_block(
        &self,
        block: u32,
        seq_len: u32,
        kv: crate::wire::KvCacheDType,
    ) -> u64 {
        2 * u64::from(self.arch.kv_positions(block, seq_len))
            * u64::from(self.head_count_kv)
            * u64::from(self.head_dim)
            * kv.bytes()
    }

    /// Bytes of the KV caches of `blocks` for one sequence of at most `seq_len` tokens.
    pub fn kv_bytes_of_blocks(
        &self,
        blocks: std::ops::Range<u32>,
        seq_len: u32,
        kv: crate::wire::KvCacheDType,
    ) -> u64 {
        blocks.map(|b| self.kv_bytes_of_block(b, seq_len, kv)).sum()
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
    /// `general.architecture` names an architecture this build does not run.
    #[error(
        "unsupported architecture `{architecture}` (this build runs {})",
        SUPPORTED_ARCHITECTURES.join(", ")
    )]
    UnsupportedArchitecture {
        /// The architecture the file names.
        architecture: String,
    },
    /// The tokenizer's vocabulary is malformed (a merge that is not two tokens).
    #[error("invalid vocabulary: {detail}")]
    InvalidVocabulary {
        /// What is wrong.
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
            ModelError::UnsupportedArchitecture { .. } => "unsupported_architecture",
            ModelError::InvalidVocabulary { .. } => "invalid_vocabulary",
        }
    }
}

/// The values of `general.architecture` this build runs.
pub const SUPPORTED_ARCHITECTURES: &[&str] = &["llama", "qwen2", "qwen3", "gemma3"];

/// Largest hidden size a model may declare (the largest models today use 16384); it also
/// keeps every KV-cache size computed from the facts inside 64 bits.
pub const MAX_HIDDEN_SIZE: u32 = 1 << 20;

/// Largest RMSNorm epsilon a model may declare (real models use 1e-6 to 1e-5).
pub const MAX_RMS_NORM_EPS: f32 = 0.1;

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        match e {
            GgufError::NotGguf { found } => ModelError::NotGguf { found },
            GgufError::Truncated { detail } => ModelError::Truncated { detail },
            GgufError::Malformed { detail } => ModelError::Malformed { detail },
            GgufError::UnsupportedTensorType { detail } => {
                ModelError::UnsupportedTensorType { detail }
            }
        }
    }
}

/// Typed access to a header's metadata, each wrong type a [`ModelError::WrongKeyType`].
pub(crate) struct Meta<'a> {
    pub(crate) header: &'a GgufHeader,
}

impl Meta<'_> {
    pub(crate) fn get(&self, key: &str) -> Option<&MetaValue> {
        self.header.metadata.get(key)
    }

    fn uint(&self, key: &str) -> Result<Option<u64>, ModelError> {
        let wrong =
            || ModelError::WrongKeyType { key: key.to_string(), expected: "an unsigned integer" };
        let Some(v) = self.get(key) else { return Ok(None) };
        let n = v.as_integer().ok_or_else(wrong)?;
        u64::try_from(n).map(Some).map_err(|_| wrong())
    }

    pub(crate) fn u32_opt(&self, key: &str) -> Result<Option<u32>, ModelError> {
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

    pub(crate) fn f32_opt(&self, key: &str) -> Result<Option<f32>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::F32(x)) => Ok(Some(*x)),
            Some(MetaValue::F64(x)) => Ok(Some(*x as f32)),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a float" }),
        }
    }

    pub(crate) fn string_opt(&self, key: &str) -> Result<Option<String>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "a string" }),
        }
    }

    fn array_len(&self, key: &str) -> Result<Option<usize>, ModelError> {
        match self.get(key) {
            None => Ok(None),
            Some(MetaValue::Array(a)) => Ok(Some(a.len())),
            Some(_) => Err(ModelError::WrongKeyType { key: key.to_string(), expected: "an array" }),
        }
    }
}

/// The error of a header whose facts contradict each other.
pub(crate) fn inconsistent<T>(detail: String) -> Result<T, ModelError> {
    Err(ModelError::Inconsistent { detail })
}
