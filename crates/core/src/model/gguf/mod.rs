//! The GGUF header as data: metadata values, tensor infos and the tensor data's place in
//! the file, decoded purely from bytes ([`decode_header`]) with typed errors
//! ([`GgufError`]) for every way a file can be wrong.
//!
//! Every length, count, dimension and offset in a header is untrusted, so each one is
//! checked against the bytes that are left in the file (and against fixed limits) before
//! anything is allocated, and all size arithmetic is checked. A header that decodes
//! guarantees that every tensor's data lies inside the file, at an aligned offset right
//! after the tensor before it (llama.cpp's layout rule, so no two tensors overlap), with an
//! element count and byte size that fit in 63 bits. Reading the file is the caller's (the
//! main crate maps it once and hands the bytes here).

mod decode;
mod types;

use std::collections::HashMap;
use thiserror::Error;

pub use decode::decode_header;
pub use types::{GgmlType, MetaValue, TensorInfo};

/// The four bytes every GGUF file starts with.
pub const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Tensor data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;

/// Most dimensions a tensor may have (GGML's `GGML_MAX_DIMS`).
pub const MAX_TENSOR_DIMS: u32 = 4;

/// Largest tensor dimension a file may declare. Real models stay below 2^20 (the largest
/// vocabularies); a larger one is a corrupt header, not a truncated file, even when its
/// element count fits in 63 bits.
pub const MAX_TENSOR_DIMENSION: u64 = 1 << 32;

/// Most bytes the header (metadata and tensor infos) may take; real headers take a few
/// tens of MiB at most (the vocabulary).
pub const MAX_HEADER_BYTES: u64 = 256 << 20;

/// Most metadata values (array elements included) a header may hold; a large vocabulary
/// has well under a million.
pub const MAX_METADATA_VALUES: u64 = 16 << 20;

/// A decoded GGUF header: what the file says before its tensor data.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    /// The GGUF version (1, 2 or 3).
    pub version: u32,
    /// The metadata, by key (a repeated key keeps its later value).
    pub metadata: HashMap<String, MetaValue>,
    /// The tensors, by name.
    pub tensors: HashMap<String, TensorInfo>,
    /// Where the tensor data starts in the file (aligned).
    pub tensor_data_offset: u64,
    /// The tensor data alignment (`general.alignment`, or [`DEFAULT_ALIGNMENT`]).
    pub alignment: u64,
    /// The length of the file the header was decoded against.
    pub file_len: u64,
}

impl GgufHeader {
    /// The metadata value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// The tensors in file order (by offset, then name), so the same file always names
    /// the same tensor first.
    pub fn tensors_in_order(&self) -> Vec<(&String, &TensorInfo)> {
        let mut order: Vec<(&String, &TensorInfo)> = self.tensors.iter().collect();
        order.sort_by(|a, b| a.1.offset.cmp(&b.1.offset).then_with(|| a.0.cmp(b.0)));
        order
    }

    /// The byte extent of tensor `name`'s data in the file, checked as
    /// [`tensor_extent`] checks it: `(start, bytes)`.
    pub fn extent(&self, name: &str, info: &TensorInfo) -> Result<(u128, u64), GgufError> {
        tensor_extent(name, info, self.tensor_data_offset, self.alignment)
    }

    /// Checks every tensor with [`tensor_extent`] and that its data lies inside the file,
    /// in file order.
    pub fn check_tensor_extents(&self) -> Result<(), GgufError> {
        for (name, info) in self.tensors_in_order() {
            let (start, bytes) = self.extent(name, info)?;
            check_inside(name, start, bytes, self.file_len)?;
        }
        Ok(())
    }
}

/// Why a GGUF header could not be decoded. [`GgufError::code`] is a stable reason, the
/// same as the model error each converts into.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GgufError {
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
    /// The header breaks GGUF's rules.
    #[error("malformed GGUF header: {detail}")]
    Malformed {
        /// What is wrong.
        detail: String,
    },
    /// A tensor has a GGML type this build cannot compute.
    #[error("unsupported tensor type: {detail}")]
    UnsupportedTensorType {
        /// Which tensor, and its type.
        detail: String,
    },
}

impl GgufError {
    /// A stable `snake_case` code for this error class.
    pub const fn code(&self) -> &'static str {
        match self {
            GgufError::NotGguf { .. } => "not_gguf",
            GgufError::Truncated { .. } => "truncated",
            GgufError::Malformed { .. } => "malformed",
            GgufError::UnsupportedTensorType { .. } => "unsupported_tensor_type",
        }
    }
}

fn malformed(detail: String) -> GgufError {
    GgufError::Malformed { detail }
}

/// Checks that `bytes` at `start` lie inside a file of `file_len` bytes.
fn check_inside(name: &str, start: u128, bytes: u64, file_len: u64) -> Result<(), GgufError> {
    if start + u128::from(bytes) > u128::from(file_len) {
        return Err(GgufError::Truncated {
            detail: format!(
                "tensor `{name}` ({bytes} bytes at {start}) extends past the end of the file \
                 ({file_len} bytes)"
            ),
        });
    }
    Ok(())
}

/// The byte extent of one tensor's data, checked: element count and byte size fit in 63
/// bits, rows are whole blocks, the offset is aligned. Returns `(start, bytes)` with
/// `start` relative to the file (it may still lie past the end: see
/// [`GgufHeader::check_tensor_extents`]).
pub fn tensor_extent(
    name: &str,
    info: &TensorInfo,
    data_offset: u64,
    alignment: u64,
) -> Result<(u128, u64), GgufError> {
    let dims = &info.shape[..];
    let mut elems: u64 = 1;
    for &d in dims {
        let d = u64::try_from(d).ok().filter(|&d| d <= MAX_TENSOR_DIMENSION).ok_or_else(|| {
            malformed(format!(
                "tensor `{name}` has dimension {d}, more than {MAX_TENSOR_DIMENSION} (2^32; \
                 real models stay below 2^20): the file is corrupt"
            ))
        })?;
        elems = elems.checked_mul(d).filter(|&e| e <= i64::MAX as u64).ok_or_else(|| {
            malformed(format!(
                "tensor `{name}` has dimensions {dims:?} whose element count overflows: the \
                 file is corrupt"
            ))
        })?;
    }
    let block = info.dtype.block_size() as u64;
    let type_size = info.dtype.type_size() as u64;
    // The innermost dimension (the shape's last) must be whole blocks.
    let row = dims.last().copied().unwrap_or(1) as u64;
    if !row.is_multiple_of(block) || !elems.is_multiple_of(block) {
        return Err(malformed(format!(
            "tensor `{name}` of type {} has rows of {row} elements, not a multiple of its \
             block size {block}",
            info.dtype.name()
        )));
    }
    let bytes = (elems / block)
        .checked_mul(type_size)
        .filter(|&b| b <= i64::MAX as u64)
        .ok_or_else(|| {
            malformed(format!("tensor `{name}` has dimensions {dims:?} whose byte size overflows"))
        })?;
    if !info.offset.is_multiple_of(alignment) {
        return Err(malformed(format!(
            "tensor `{name}` starts at offset {} of the data section, not a multiple of the \
             alignment {alignment}",
            info.offset
        )));
    }
    Ok((u128::from(data_offset) + u128::from(info.offset), bytes))
}

/// The tensor data alignment `general.alignment` asks for (a power of two of at most
/// 2^30), or the default.
pub fn alignment(metadata: &HashMap<String, MetaValue>) -> Result<u64, GgufError> {
    let value = match metadata.get("general.alignment") {
        None => return Ok(DEFAULT_ALIGNMENT),
        Some(v) => v,
    };
    match value.as_integer().and_then(|n| u64::try_from(n).ok()) {
        Some(n) if n.is_power_of_two() && n <= 1 << 30 => Ok(n),
        _ => Err(malformed(format!(
            "general.alignment is {value:?}, not a power of two of at most 2^30"
        ))),
    }
}
