//! [`ModelFacts`]: what a GGUF header says about a model, and why a file's facts could not
//! be read ([`ModelError`]). [`facts_from_header`] reads them from a decoded header
//! (`facts/read.rs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(crate) use super::meta::{Meta, inconsistent};
pub use super::meta::{ModelError, SUPPORTED_ARCHITECTURES};

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
    /// Bytes of each block's tensors, indexed by block (every expert: all are resident).
    pub per_block: Vec<u64>,
    /// Bytes of each block one token reads: its bytes with only the share of its routed
    /// experts that a token runs (`used / experts`); the same as `per_block` for a dense
    /// model (and where absent, as in plans written before it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_per_block: Vec<u64>,
    /// Bytes of the token embedding (loaded by stage 0).
    pub embedding: u64,
    /// Bytes of the final norm and output head (loaded by the last stage); with tied
    /// embeddings the head is the token embedding, counted again here.
    pub head: u64,
    /// Bytes of every tensor in the file.
    pub tensors: u64,
    /// Size of the file.
    pub file: u64,
    /// The blocks' and the head's tensors by weight format (`q8_0`, `q4_k`, ...): bytes and
    /// weights, for the cost model's rates (empty where unknown).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub formats: BTreeMap<String, FormatBytes>,
}

/// The bytes and weights (multiply-adds per row) of the tensors of one format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatBytes {
    /// Bytes.
    pub bytes: u64,
    /// Weights: one multiply-add each per activation row.
    pub weights: u64,
}

impl ModelBytes {
    /// Weight bytes one decode step reads: every block and the head (of the embedding,
    /// one row): what one token costs where decoding is bound by reading the weights.
    pub fn step_bytes(&self) -> u64 {
        (0..self.per_block.len()).map(|b| self.active_of_block(b)).sum::<u64>() + self.head
    }

    /// Bytes one token reads of block `block` (its active experts only).
    pub fn active_of_block(&self, block: usize) -> u64 {
        self.active_per_block.get(block).or_else(|| self.per_block.get(block)).copied().unwrap_or(0)
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
/// a node and 6-10 MiB for its worker in a release build, 37-40 MiB for a node in a debug
/// build, its SWIM thread included), with room to spare.
pub const STAGE_PROCESS_BYTES: u64 = 80 << 20;

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
        4 * floats + quantized + self.moe_compute_bytes(rows)
    }

    /// The expert product's scratch for `rows` rows (0 for a dense model): the normalized
    /// rows, router scores, each (row, pick)'s selection and output, every pick's gathered
    /// row (f32 and quantized, as wide as the widest inner size), the products, and the
    /// tasks of the grouped products (one per 16 output rows of each selected expert).
    fn moe_compute_bytes(&self, rows: u32) -> u64 {
        let Some(m) = &self.arch.moe else { return 0 };
        let (n, d) = (u64::from(rows), u64::from(self.hidden_size));
        let (e, k) = (u64::from(m.experts), u64::from(m.used));
        let inner = u64::from(m.expert_ffn).max(u64::from(m.shared_ffn)).max(d);
        let floats = n * (d + e + k * d + 2 * k * inner) + e;
        let tasks = e.min(n * k) * (inner / 16 + 2);
        4 * floats + n * k * inner * (1 + 5 + 2) + 24 * n * k + 24 * tasks
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

/// Largest hidden size a model may declare (the largest models today use 16384); it also
/// keeps every KV-cache size computed from the facts inside 64 bits.
pub const MAX_HIDDEN_SIZE: u32 = 1 << 20;

/// Largest RMSNorm epsilon a model may declare (real models use 1e-6 to 1e-5).
pub const MAX_RMS_NORM_EPS: f32 = 0.1;
