//! Object specs (what an edge carries), ring specs (how big its rings are) and ring layouts
//! (where a leased ring lives in an arena).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::RingId;

/// Bytes of a micro-batch table's header (the table itself: `wire/batch.rs`).
pub const TABLE_HEADER_BYTES: u64 = 16;
/// Bytes of one micro-batch table entry.
pub const ENTRY_BYTES: u64 = 40;
/// Bytes of one cache operation (`wire/cache_ops.rs`).
pub const CACHE_OP_BYTES: u64 = 16;
/// Cache operations every micro-batch table has room for.
pub const MAX_CACHE_OPS: u16 = 64;
/// The most entries a micro-batch table may have (the plan's `max_sequences` is at most
/// this).
pub const MAX_CAPACITY: u16 = 256;

/// Bytes of a micro-batch table with `capacity` entries and its cache-operation section:
/// the prefix of every object that carries one.
pub const fn table_bytes(capacity: u16) -> u64 {
    TABLE_HEADER_BYTES + ENTRY_BYTES * capacity as u64 + CACHE_OP_BYTES * MAX_CACHE_OPS as u64
}

/// Element type of an object payload on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireDType {
    /// Little-endian `u32` (token ids).
    U32,
    /// Little-endian IEEE `f32` (activations, exact).
    F32,
    /// Little-endian IEEE `f16` (activations, half the bytes).
    F16,
}

impl WireDType {
    /// Bytes per element.
    pub const fn width(self) -> u32 {
        match self {
            WireDType::U32 | WireDType::F32 => 4,
            WireDType::F16 => 2,
        }
    }
}

/// Activation dtype chosen for a run's hidden states between stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivationDType {
    /// `f32`: bit-exact with the one-process model (the default).
    #[default]
    F32,
    /// `f16`: half the bytes per hop; tokens may diverge from the one-process model.
    F16,
}

impl ActivationDType {
    /// The wire dtype carrying these activations.
    pub const fn wire(self) -> WireDType {
        match self {
            ActivationDType::F32 => WireDType::F32,
            ActivationDType::F16 => WireDType::F16,
        }
    }
}

/// What an edge's objects hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PayloadKind {
    /// Token ids, one `u32` per row.
    TokenIds,
    /// Hidden states `[tokens, hidden]`.
    Activations,
}

/// The contract for every object on one edge: payload kind, element type, row shape and
/// the largest extent a consumer must accept.
///
/// An object's extent is a fixed prefix (a session's micro-batch entry table,
/// [`crate::wire::batch`]; none on other edges) followed by a whole number of rows:
/// `(extent - prefix_bytes) % row_bytes() == 0`, `extent > prefix_bytes` and
/// `extent <= max_extent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectSpec {
    /// What the payload holds.
    pub payload: PayloadKind,
    /// Element type of the payload.
    pub dtype: WireDType,
    /// Elements per row: the hidden size for activations, 1 for token ids.
    pub row_elems: u32,
    /// Largest accepted payload in bytes (`prefix_bytes + max_rows * row_bytes`).
    pub max_extent: u64,
    /// Bytes in front of the rows of every object (the micro-batch table); 0 when the
    /// edge carries plain rows.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefix_bytes: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl ObjectSpec {
    /// A spec for token-id objects of at most `max_tokens` ids.
    pub fn token_ids(max_tokens: u32) -> ObjectSpec {
        ObjectSpec {
            payload: PayloadKind::TokenIds,
            dtype: WireDType::U32,
            row_elems: 1,
            max_extent: u64::from(max_tokens) * 4,
            prefix_bytes: 0,
        }
    }

    /// The same spec for objects that begin with a micro-batch table of `capacity`
    /// entries ([`table_bytes`]) and a token-mask section of `mask_bytes`.
    pub fn with_table(self, capacity: u16, mask_bytes: u32) -> ObjectSpec {
        let prefix = table_bytes(capacity) + u64::from(mask_bytes);
        ObjectSpec {
            max_extent: self.max_extent - self.prefix_bytes + prefix,
            prefix_bytes: prefix,
            ..self
        }
    }

    /// Whole rows of an object of `extent` bytes (after the prefix), if it is one.
    pub fn rows_of(&self, extent: u64) -> Option<u64> {
        let row = self.row_bytes();
        let body = extent.checked_sub(self.prefix_bytes)?;
        (row > 0 && body > 0 && body.is_multiple_of(row)).then(|| body / row)
    }

    /// A spec for activation objects `[tokens <= max_seq_len, hidden]`.
    pub fn activations(max_seq_len: u32, hidden: u32, dtype: ActivationDType) -> ObjectSpec {
        let dtype = dtype.wire();
        ObjectSpec {
            payload: PayloadKind::Activations,
            dtype,
            row_elems: hidden,
            max_extent: u64::from(max_seq_len) * u64::from(hidden) * u64::from(dtype.width()),
            prefix_bytes: 0,
        }
    }

    /// Bytes per row (one token's worth of payload).
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.row_elems) * u64::from(self.dtype.width())
    }

    /// Checks the spec is internally consistent. Returns the first violation.
    pub fn validate(&self) -> Result<(), SpecError> {
        match (self.payload, self.dtype) {
            (PayloadKind::TokenIds, WireDType::U32) => {}
            (PayloadKind::Activations, WireDType::F32 | WireDType::F16) => {}
            (payload, dtype) => return Err(SpecError::DTypeMismatch { payload, dtype }),
        }
        if self.row_elems == 0 {
            return Err(SpecError::ZeroRowElems);
        }
        if self.payload == PayloadKind::TokenIds && self.row_elems != 1 {
            return Err(SpecError::TokenRowNotOne { row_elems: self.row_elems });
        }
        if self.max_extent == 0 {
            return Err(SpecError::ZeroExtent);
        }
        if self.max_extent <= self.prefix_bytes
            || !(self.max_extent - self.prefix_bytes).is_multiple_of(self.row_bytes())
        {
            return Err(SpecError::ExtentNotWholeRows {
                max_extent: self.max_extent,
                row_bytes: self.row_bytes(),
            });
        }
        Ok(())
    }
}

/// How much arena a ring of an edge takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RingSpec {
    /// Data capacity in bytes (the header is extra). Objects may be larger than this.
    pub capacity: u64,
    /// Alignment of the ring's arena offset and data area; a power of two.
    pub alignment: u64,
}

impl RingSpec {
    /// Checks capacity and alignment.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !self.alignment.is_power_of_two() {
            return Err(SpecError::AlignmentNotPowerOfTwo { alignment: self.alignment });
        }
        if self.capacity == 0 || !self.capacity.is_multiple_of(self.alignment) {
            return Err(SpecError::BadRingCapacity {
                capacity: self.capacity,
                alignment: self.alignment,
            });
        }
        Ok(())
    }
}

/// Where a leased ring lives inside an arena: offsets only, never pointers, so it can be
/// sent to another process that maps the same arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RingLayout {
    /// The ring's id (unique for the node's lifetime).
    pub ring_id: RingId,
    /// Offset of the whole lease in the arena.
    pub arena_offset: u64,
    /// Length of the whole lease (header + data).
    pub total_len: u64,
    /// Offset of the ring header in the arena.
    pub header_offset: u64,
    /// Offset of the data area in the arena.
    pub data_offset: u64,
    /// Data capacity in bytes.
    pub data_capacity: u64,
    /// Alignment honoured by the offsets; a power of two.
    pub alignment: u64,
}

impl RingLayout {
    /// Checks that header and data lie inside the lease, aligned and non-overlapping, and
    /// the lease inside an arena of `arena_bytes`.
    pub fn validate(&self, arena_bytes: u64) -> Result<(), SpecError> {
        let bad = |what: &'static str| Err(SpecError::BadLayout { what });
        if !self.alignment.is_power_of_two() {
            return Err(SpecError::AlignmentNotPowerOfTwo { alignment: self.alignment });
        }
        let Some(end) = self.arena_offset.checked_add(self.total_len) else {
            return bad("lease end overflows");
        };
        if end > arena_bytes {
            return bad("lease extends past the arena ceiling");
        }
        if !self.arena_offset.is_multiple_of(self.alignment)
            || !self.data_offset.is_multiple_of(self.alignment)
        {
            return bad("offsets not aligned");
        }
        if self.header_offset < self.arena_offset || self.data_offset <= self.header_offset {
            return bad("header must start the lease and precede the data");
        }
        match self.data_offset.checked_add(self.data_capacity) {
            Some(data_end) if data_end <= end && self.data_capacity > 0 => Ok(()),
            _ => bad("data area outside the lease"),
        }
    }
}

/// Why a spec or layout is invalid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// The payload kind and element type do not go together.
    #[error("payload {payload:?} cannot use dtype {dtype:?}")]
    DTypeMismatch {
        /// Payload kind.
        payload: PayloadKind,
        /// Element type.
        dtype: WireDType,
    },
    /// A row has no elements (hidden size 0).
    #[error("row has zero elements")]
    ZeroRowElems,
    /// Token objects carry exactly one id per row.
    #[error("token-id rows must hold one element, not {row_elems}")]
    TokenRowNotOne {
        /// The offending row width.
        row_elems: u32,
    },
    /// The maximum extent is zero.
    #[error("max extent is zero")]
    ZeroExtent,
    /// The maximum extent is not a whole number of rows.
    #[error("max extent {max_extent} is not a multiple of the row size {row_bytes}")]
    ExtentNotWholeRows {
        /// The maximum extent.
        max_extent: u64,
        /// Bytes per row.
        row_bytes: u64,
    },
    /// An alignment is not a power of two.
    #[error("alignment {alignment} is not a power of two")]
    AlignmentNotPowerOfTwo {
        /// The offending alignment.
        alignment: u64,
    },
    /// A ring capacity is zero or not a multiple of its alignment.
    #[error("ring capacity {capacity} is zero or not a multiple of its alignment {alignment}")]
    BadRingCapacity {
        /// Capacity in bytes.
        capacity: u64,
        /// Alignment in bytes.
        alignment: u64,
    },
    /// A ring layout is inconsistent.
    #[error("bad ring layout: {what}")]
    BadLayout {
        /// What is wrong.
        what: &'static str,
    },
}

/// Bytes reserved at the start of every ring lease for the ring header (one page, so the
/// data area starts page-aligned).
pub const RING_HEADER_BYTES: u64 = 4096;

/// The ring ABI version node and worker must agree on.
pub const RING_ABI_VERSION: u64 = 1;
