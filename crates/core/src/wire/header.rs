//! The object header: a fixed-size little-endian record that precedes every object's
//! payload on an edge stream and in a ring.
//!
//! Layout (40 bytes, all little-endian):
//!
//! | offset | size | field        |
//! |-------:|-----:|--------------|
//! | 0      | 4    | `magic` (`b"SWOB"`) |
//! | 4      | 2    | `version` (1) |
//! | 6      | 2    | `header_len` (40) |
//! | 8      | 8    | `object_id`  |
//! | 16     | 8    | `sequence`   |
//! | 24     | 8    | `extent` (payload bytes that follow) |
//! | 32     | 4    | `flags`      |
//! | 36     | 4    | `reserved` (0) |
//!
//! Decoding is total: any 40 bytes either decode into a header whose encoding is exactly
//! those bytes, or are rejected with a typed [`HeaderError`]. It never panics.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::reason::ObjectFailure;
use super::spec::ObjectSpec;
use super::{ObjectId, Sequence};

/// Magic number at the start of every object header (`b"SWOB"` read little-endian).
pub const OBJECT_MAGIC: u32 = u32::from_le_bytes(*b"SWOB");
/// The only header version this build reads and writes.
pub const OBJECT_VERSION: u16 = 1;
/// Encoded header length in bytes.
pub const HEADER_LEN: usize = 40;

/// Flag bits of an object header. Unknown bits are rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ObjectFlags(pub u32);

impl ObjectFlags {
    /// No flags.
    pub const NONE: ObjectFlags = ObjectFlags(0);
    /// The object is a prefill (sequence 0 carries the whole prompt).
    pub const PREFILL: ObjectFlags = ObjectFlags(1 << 0);
    /// The producer sends no further object on this edge (orderly end of stream).
    pub const LAST: ObjectFlags = ObjectFlags(1 << 1);
    /// Every flag bit this version defines.
    pub const KNOWN: ObjectFlags = ObjectFlags(Self::PREFILL.0 | Self::LAST.0);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: ObjectFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of both flag sets.
    pub const fn union(self, other: ObjectFlags) -> ObjectFlags {
        ObjectFlags(self.0 | other.0)
    }
}

/// The decoded object header. Construct with [`ObjectHeader::new`]; magic, version and
/// header length are implied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectHeader {
    /// The object's id, assigned by whoever asked for the object (never the worker).
    pub object_id: ObjectId,
    /// The object's sequence in its edge's stream.
    pub sequence: Sequence,
    /// Payload bytes that follow the header.
    pub extent: u64,
    /// Flag bits.
    pub flags: ObjectFlags,
}

impl ObjectHeader {
    /// A header for `extent` payload bytes.
    pub const fn new(
        object_id: ObjectId,
        sequence: Sequence,
        extent: u64,
        flags: ObjectFlags,
    ) -> ObjectHeader {
        ObjectHeader { object_id, sequence, extent, flags }
    }

    /// Encodes the header into its fixed 40-byte little-endian form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&OBJECT_MAGIC.to_le_bytes());
        out[4..6].copy_from_slice(&OBJECT_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out[8..16].copy_from_slice(&self.object_id.0.to_le_bytes());
        out[16..24].copy_from_slice(&self.sequence.0.to_le_bytes());
        out[24..32].copy_from_slice(&self.extent.to_le_bytes());
        out[32..36].copy_from_slice(&self.flags.0.to_le_bytes());
        // bytes 36..40 are reserved and stay zero
        out
    }

    /// Decodes a header. Checks magic, version, header length, reserved bytes and flags;
    /// does not check the extent or sequence (see [`ObjectHeader::validate`]).
    pub fn decode(bytes: &[u8; HEADER_LEN]) -> Result<ObjectHeader, HeaderError> {
        let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        let u32_at = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let magic = u32_at(0);
        if magic != OBJECT_MAGIC {
            return Err(HeaderError::BadMagic { found: magic });
        }
        let version = u16_at(4);
        if version != OBJECT_VERSION {
            return Err(HeaderError::UnsupportedVersion { found: version });
        }
        let header_len = u16_at(6);
        if usize::from(header_len) != HEADER_LEN {
            return Err(HeaderError::BadHeaderLength { found: header_len });
        }
        let reserved = u32_at(36);
        if reserved != 0 {
            return Err(HeaderError::ReservedNonZero { found: reserved });
        }
        let flags = u32_at(32);
        if flags & !ObjectFlags::KNOWN.0 != 0 {
            return Err(HeaderError::UnknownFlags { bits: flags & !ObjectFlags::KNOWN.0 });
        }
        Ok(ObjectHeader {
            object_id: ObjectId(u64_at(8)),
            sequence: Sequence(u64_at(16)),
            extent: u64_at(24),
            flags: ObjectFlags(flags),
        })
    }

    /// Validates a decoded header against its edge's spec and the sequence the consumer
    /// expects next.
    pub fn validate(&self, spec: &ObjectSpec, expected: Sequence) -> Result<(), HeaderError> {
        if self.extent > spec.max_extent {
            return Err(HeaderError::ExtentOverMax { extent: self.extent, max: spec.max_extent });
        }
        if self.extent == 0 {
            return Err(HeaderError::EmptyObject);
        }
        let row = spec.row_bytes();
        if spec.rows_of(self.extent).is_none() {
            return Err(HeaderError::ExtentMisaligned { extent: self.extent, row_bytes: row });
        }
        if self.sequence != expected {
            return Err(HeaderError::SequenceViolation { expected, found: self.sequence });
        }
        Ok(())
    }
}

/// Why a header was rejected. [`HeaderError::reason`] gives the stable reason code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum HeaderError {
    /// The first four bytes are not the object magic.
    #[error("bad object magic 0x{found:08x}")]
    BadMagic {
        /// What was found.
        found: u32,
    },
    /// The header version is not one this build reads.
    #[error("unsupported object header version {found}")]
    UnsupportedVersion {
        /// What was found.
        found: u16,
    },
    /// The header declares a length other than 40 bytes.
    #[error("bad object header length {found}")]
    BadHeaderLength {
        /// What was found.
        found: u16,
    },
    /// The reserved field is not zero.
    #[error("reserved header bytes are not zero (0x{found:08x})")]
    ReservedNonZero {
        /// What was found.
        found: u32,
    },
    /// Flag bits this version does not define are set.
    #[error("unknown object flags 0x{bits:08x}")]
    UnknownFlags {
        /// The unknown bits.
        bits: u32,
    },
    /// The extent exceeds the edge's maximum.
    #[error("object extent {extent} exceeds the edge maximum {max}")]
    ExtentOverMax {
        /// Declared extent.
        extent: u64,
        /// The spec's maximum.
        max: u64,
    },
    /// The extent is not a whole number of rows.
    #[error("object extent {extent} is not a multiple of the row size {row_bytes}")]
    ExtentMisaligned {
        /// Declared extent.
        extent: u64,
        /// Bytes per row.
        row_bytes: u64,
    },
    /// The extent is zero.
    #[error("object has an empty payload")]
    EmptyObject,
    /// The sequence is not the one expected next.
    #[error("sequence {found} where {expected} was expected")]
    SequenceViolation {
        /// The sequence the consumer expected.
        expected: Sequence,
        /// The sequence found in the header.
        found: Sequence,
    },
}

impl HeaderError {
    /// The stable reason code of this rejection.
    pub const fn reason(&self) -> ObjectFailure {
        match self {
            HeaderError::BadMagic { .. } => ObjectFailure::BadMagic,
            HeaderError::UnsupportedVersion { .. } => ObjectFailure::UnsupportedVersion,
            HeaderError::BadHeaderLength { .. } => ObjectFailure::BadHeaderLength,
            HeaderError::ReservedNonZero { .. } => ObjectFailure::ReservedNonZero,
            HeaderError::UnknownFlags { .. } => ObjectFailure::UnknownFlags,
            HeaderError::ExtentOverMax { .. } => ObjectFailure::ExtentOverMax,
            HeaderError::ExtentMisaligned { .. } => ObjectFailure::ExtentMisaligned,
            HeaderError::EmptyObject => ObjectFailure::EmptyObject,
            HeaderError::SequenceViolation { .. } => ObjectFailure::SequenceViolation,
        }
    }
}
