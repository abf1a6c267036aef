//! How a session's scheduler is sized beyond what its plan fixes.

/// How a session's scheduler is sized beyond what the plan fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Requests waiting for a slot at most (a full queue refuses with `busy`).
    pub queue_capacity: usize,
    /// Rows per micro-batch at most (prompt chunks fill what decoding leaves).
    pub batch_tokens: u32,
    /// Micro-batches in flight at most (`0`: one per stage, at most the slots).
    pub groups: u16,
    /// A micro-batch carrying prompt rows while other sequences decode should come back
    /// within this (`None`: chunks follow `batch_tokens` alone).
    pub prefill_budget: Option<std::time::Duration>,
    /// Speculative decoding: the most tokens drafted per trip for one sequence (0: off),
    /// by the n-gram lookup or the drafter the session sets.
    pub draft_max: u8,
    /// With speculation: tokens drafted per trip at least, whatever the measured
    /// acceptance and row cost (0: the length follows them alone; cut to `draft_max`).
    pub draft_min: u8,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            queue_capacity: 64,
            batch_tokens: DEFAULT_BATCH_TOKENS,
            groups: 0,
            prefill_budget: Some(crate::orchestrator::scheduler::pacer::DEFAULT_BUDGET),
            draft_max: 0,
            draft_min: 0,
        }
    }
}

/// Rows per micro-batch by default.
pub const DEFAULT_BATCH_TOKENS: u32 = 512;
