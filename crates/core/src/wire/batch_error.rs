//! Why a micro-batch table was refused: [`BatchError`], one variant per broken rule of
//! `super::batch`, each with a stable code.

use thiserror::Error;

/// Why a table was rejected (each with a stable code, [`BatchError::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BatchError {
    /// Fewer bytes than the table takes.
    #[error("{found} bytes cannot hold a table of {capacity} entries ({need} bytes)")]
    Truncated {
        /// Bytes there.
        found: u64,
        /// Bytes needed.
        need: u64,
        /// The capacity expected.
        capacity: u16,
    },
    /// The magic is not `SWMB`.
    #[error("bad micro-batch magic {0:#x}")]
    BadMagic(u32),
    /// Another table version.
    #[error("unsupported micro-batch version {0}")]
    UnsupportedVersion(u16),
    /// The capacity differs from the edge's.
    #[error("table capacity {found}, the session has {expected}")]
    CapacityMismatch {
        /// In the table.
        found: u16,
        /// The session's.
        expected: u16,
    },
    /// More entries than the capacity, or none.
    #[error("{count} entries in a table of {capacity}")]
    BadCount {
        /// Entries claimed.
        count: u16,
        /// Capacity.
        capacity: u16,
    },
    /// A reserved field or an unused entry is not zero.
    #[error("reserved micro-batch bytes are not zero")]
    ReservedNonZero,
    /// Undefined flag bits.
    #[error("unknown entry flags {0:#x}")]
    UnknownFlags(u32),
    /// A slot at or above the capacity.
    #[error("slot {slot} outside 0..{capacity}")]
    SlotOutOfRange {
        /// The slot.
        slot: u32,
        /// Capacity.
        capacity: u16,
    },
    /// Two entries name one slot.
    #[error("slot {0} appears twice")]
    DuplicateSlot(u32),
    /// An entry of no rows.
    #[error("an entry of slot {0} has no rows")]
    EmptyEntry(u32),
    /// An entry's positions pass the context.
    #[error("slot {slot}: positions {first}..{end} pass max_seq_len {max}")]
    PastContext {
        /// The slot.
        slot: u32,
        /// First position.
        first: u32,
        /// One past the last.
        end: u64,
        /// The context.
        max: u32,
    },
    /// Sampling parameters out of range.
    #[error("slot {0} has invalid sampling parameters")]
    BadSampling(u32),
    /// A `VERIFY` entry that does not sample, asks for log-probabilities or has more than
    /// [`MAX_VERIFY_ROWS`] rows.
    #[error(
        "slot {0}: a verifying entry must sample, ask no log-probabilities and have at most 16 rows"
    )]
    BadVerify(u32),
    /// An entry with both `ROLLBACK` and `RESET`.
    #[error("slot {0} is both reset and rolled back")]
    RollbackWithReset(u32),
    /// A `RESUME` entry that also resets, rolls back or verifies.
    #[error("slot {0}: a resuming entry never resets, rolls back or verifies")]
    BadResume(u32),
    /// The token-mask section is malformed or names an entry row that does not sample.
    #[error("bad token-mask section: {0:?}")]
    BadMask(super::mask::MaskError),
    /// The header's total is not the sum of the entries' rows.
    #[error("total {total} is not the entries' {sum} rows")]
    TotalMismatch {
        /// Claimed.
        total: u32,
        /// Summed.
        sum: u64,
    },
    /// An unknown cache-operation kind.
    #[error("unknown cache operation kind {0}")]
    BadCacheOp(u32),
    /// More cache operations than the section holds.
    #[error("{0} cache operations, at most 64 fit")]
    TooManyCacheOps(usize),
    /// A cache operation naming a slot or store block out of range.
    #[error("a cache operation names slot {slot} or store block {block} out of range")]
    CacheOpOutOfRange {
        /// The slot.
        slot: u32,
        /// The store block.
        block: u32,
    },
    /// The rows after the table are not the table's.
    #[error("{found} payload bytes after the table, {expected} expected")]
    PayloadMismatch {
        /// Bytes there.
        found: u64,
        /// Bytes the table implies.
        expected: u64,
    },
}

impl BatchError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            BatchError::Truncated { .. } => "truncated",
            BatchError::BadMagic(_) => "bad_magic",
            BatchError::UnsupportedVersion(_) => "unsupported_version",
            BatchError::CapacityMismatch { .. } => "capacity_mismatch",
            BatchError::BadCount { .. } => "bad_count",
            BatchError::ReservedNonZero => "reserved_nonzero",
            BatchError::UnknownFlags(_) => "unknown_flags",
            BatchError::SlotOutOfRange { .. } => "slot_out_of_range",
            BatchError::DuplicateSlot(_) => "duplicate_slot",
            BatchError::EmptyEntry(_) => "empty_entry",
            BatchError::PastContext { .. } => "past_context",
            BatchError::BadSampling(_) => "bad_sampling",
            BatchError::BadVerify(_) => "bad_verify",
            BatchError::RollbackWithReset(_) => "rollback_with_reset",
            BatchError::BadResume(_) => "bad_resume",
            BatchError::BadMask(_) => "bad_mask",
            BatchError::TotalMismatch { .. } => "total_mismatch",
            BatchError::BadCacheOp(_) => "bad_cache_op",
            BatchError::TooManyCacheOps(_) => "too_many_cache_ops",
            BatchError::CacheOpOutOfRange { .. } => "cache_op_out_of_range",
            BatchError::PayloadMismatch { .. } => "payload_mismatch",
        }
    }
}
