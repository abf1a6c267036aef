//! The plan's prompt-cache store: its size, or why a plan has none.

use serde::{Deserialize, Serialize};

/// The prompt cache's second level: every stage keeps the same number of blocks of its
/// own layers' KV in host memory, which the orchestrator fills and reads by cache
/// operations in the micro-batch tables (`specs/prefix-cache.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCachePlan {
    /// Positions per block.
    pub block_tokens: u32,
    /// Blocks every stage's store holds (0: no store).
    pub blocks: u32,
    /// Why there is no store, where there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off: Option<PromptCacheOff>,
}

/// Why a plan has no prompt-cache store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptCacheOff {
    /// The budget is 0 (`--prompt-cache-bytes 0`).
    Disabled,
    /// The model has sliding-window blocks whose rings are shorter than the context.
    SlidingWindow,
    /// A stage computes on a GPU, whose caches the store does not copy.
    Device,
    /// A stage's budget holds no block.
    TooSmall,
}
