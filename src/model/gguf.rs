//! Reading GGUF headers, with typed errors for every way a file can be wrong.
//!
//! The header is decoded here, not by candle's reader: every length, count, dimension and
//! offset in it is untrusted, so each one is checked against the bytes that are left in the
//! file (and against fixed limits) before anything is allocated, and all size arithmetic is
//! checked. A header that decodes guarantees that every tensor's data lies inside the file,
//! at an aligned offset right after the tensor before it (llama.cpp's layout rule, so no
//! two tensors overlap), with an element count and byte size that fit in 63 bits, so
//! candle's [`TensorInfo::read`] can load any of them. The result is candle's [`Content`].

use candle_core::quantized::GgmlDType;
use candle_core::quantized::gguf_file::{Content, TensorInfo, Value, VersionedMagic};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::facts::{ModelError, ModelFacts, facts_from_content};

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

/// Deepest nesting of metadata arrays.
const MAX_VALUE_DEPTH: usize = 8;

/// Reads a GGUF header (metadata and tensor infos, no tensor data) from `path`.
/// Returns the parsed content and the file's length.
pub fn read_content(path: &Path) -> Result<(Content, u64), ModelError> {
    let io = |source| ModelError::Io { path: path.display().to_string(), source };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let content = decode_header(BufReader::new(file), len).map_err(|e| match e {
        ModelError::Io { source, .. } => io(source),
        other => other,
    })?;
    Ok((content, len))
}

/// Reads and checks the model facts of the GGUF file at `path`.
pub fn read_facts(path: &Path) -> Result<ModelFacts, ModelError> {
    let (content, len) = read_content(path)?;
    facts_from_content(&content, len)
}

/// Decodes a GGUF header from `reader`, positioned at the start of a file of `file_len`
/// bytes. Never panics and never allocates more than the file could justify: a count or
/// length the rest of the file cannot hold is `truncated`, a value outside GGUF's rules
/// (a bad alignment, a misaligned or overflowing tensor, an unknown value type) is
/// `malformed`, a GGML tensor type this build cannot compute is `unsupported_tensor_type`.
/// Every tensor's data is checked to lie inside the file, and to follow the tensor before
/// it in file order (each padded to the alignment), so no two tensors overlap.
pub fn decode_header(reader: impl Read, file_len: u64) -> Result<Content, ModelError> {
    let mut r = Reader { inner: reader, pos: 0, len: file_len, values: 0 };
    let mut magic = [0u8; 4];
    let got = r.read_up_to(&mut magic)?;
    if got < 4 {
        return Err(ModelError::Truncated {
            detail: format!("file has {file_len} bytes, fewer than the 4-byte magic"),
        });
    }
    if &magic != GGUF_MAGIC {
        return Err(ModelError::NotGguf { found: magic.to_vec() });
    }
    let version = r.u32("the version")?;
    let magic = match version {
        1 => VersionedMagic::GgufV1,
        2 => VersionedMagic::GgufV2,
        3 => VersionedMagic::GgufV3,
        v => return Err(malformed(format!("unsupported GGUF version {v}"))),
    };
    let v1 = matches!(magic, VersionedMagic::GgufV1);
    let tensor_count = r.length(v1, "the tensor count")?;
    let kv_count = r.length(v1, "the metadata count")?;
    // The smallest possible entries: a key (length prefix, one byte), a type and a 1-byte
    // value; a tensor name (length prefix, one byte), a dimension count, a type, an offset.
    let prefix: u128 = if v1 { 4 } else { 8 };
    let needed = u128::from(kv_count) * (prefix + 1 + 4 + 1)
        + u128::from(tensor_count) * (prefix + 1 + 4 + 4 + 8);
    if needed > u128::from(r.remaining()) {
        return Err(ModelError::Truncated {
            detail: format!(
                "the header declares {kv_count} metadata entries and {tensor_count} tensors, \
                 which need at least {needed} bytes, but only {} remain: the file is corrupt \
                 or truncated",
                r.remaining()
            ),
        });
    }

    let mut metadata = HashMap::new();
    for i in 0..kv_count {
        let key = r.string(v1, &format!("metadata key {i}"))?;
        let ty = r.u32(&format!("the type of metadata `{key}`"))?;
        let value = r.value(v1, ty, &key, 0)?;
        // A repeated key: the later one wins (as llama.cpp's older readers and candle do).
        metadata.insert(key, value);
    }

    let mut tensors: Vec<(String, Vec<u64>, GgmlDType, u64)> = Vec::new();
    let mut names = std::collections::HashSet::new();
    for i in 0..tensor_count {
        let name = r.string(v1, &format!("the name of tensor {i}"))?;
        let n_dims = r.u32(&format!("the dimension count of tensor `{name}`"))?;
        if n_dims > MAX_TENSOR_DIMS {
            return Err(malformed(format!(
                "tensor `{name}` has {n_dims} dimensions; GGUF allows at most {MAX_TENSOR_DIMS}"
            )));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for _ in 0..n_dims {
            let what = format!("the dimensions of tensor `{name}`");
            dims.push(if v1 { u64::from(r.u32(&what)?) } else { r.u64(&what)? });
        }
        let type_id = r.u32(&format!("the type of tensor `{name}`"))?;
        let dtype = ggml_dtype(type_id, &name)?;
        let offset = r.u64(&format!("the offset of tensor `{name}`"))?;
        if name.is_empty() {
            return Err(malformed(format!("tensor {i} has an empty name")));
        }
        if !names.insert(name.clone()) {
            return Err(malformed(format!("tensor `{name}` appears twice")));
        }
        tensors.push((name, dims, dtype, offset));
    }

    let alignment = alignment(&metadata)?;
    let tensor_data_offset =
        u64::try_from(u128::from(r.pos).div_ceil(u128::from(alignment)) * u128::from(alignment))
            .map_err(|_| malformed("the tensor data offset overflows".to_string()))?;
    if tensor_data_offset > file_len && !tensors.is_empty() {
        return Err(ModelError::Truncated {
            detail: format!(
                "tensor data would start at {tensor_data_offset} past the end ({file_len})"
            ),
        });
    }
    let mut tensor_infos = HashMap::with_capacity(tensors.len());
    // Tensors in file order: their data must follow one another in that order, each
    // padded to the alignment (llama.cpp's rule), and lie inside the file.
    let mut expected: u128 = 0;
    for (name, dims, ggml_dtype, offset) in tensors {
        // GGUF lists dimensions innermost first; candle's shapes are outermost first.
        let shape: Vec<usize> =
            dims.iter().rev().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(
                |_| {
                    malformed(format!(
                        "tensor `{name}` has a dimension beyond this machine's address space"
                    ))
                },
            )?;
        let info = TensorInfo { ggml_dtype, shape: shape.into(), offset };
        let (start, bytes) = tensor_extent(&name, &info, tensor_data_offset, alignment)?;
        check_inside(&name, start, bytes, file_len)?;
        if u128::from(offset) != expected {
            return Err(malformed(format!(
                "tensor `{name}` starts at offset {offset} of the data section, but the \
                 tensors before it end at {expected}: the file is corrupt"
            )));
        }
        expected += u128::from(bytes).div_ceil(u128::from(alignment)) * u128::from(alignment);
        tensor_infos.insert(name, info);
    }
    Ok(Content { magic, metadata, tensor_infos, tensor_data_offset })
}

fn check_inside(name: &str, start: u128, bytes: u64, file_len: u64) -> Result<(), ModelError> {
    if start + u128::from(bytes) > u128::from(file_len) {
        return Err(ModelError::Truncated {
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
/// [`check_tensor_extents`]).
pub fn tensor_extent(
    name: &str,
    info: &TensorInfo,
    data_offset: u64,
    alignment: u64,
) -> Result<(u128, u64), ModelError> {
    let dims = info.shape.dims();
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
    let block = info.ggml_dtype.block_size() as u64;
    let type_size = info.ggml_dtype.type_size() as u64;
    // The innermost dimension (candle's last) must be whole blocks.
    let row = dims.last().copied().unwrap_or(1) as u64;
    if !row.is_multiple_of(block) || !elems.is_multiple_of(block) {
        return Err(malformed(format!(
            "tensor `{name}` of type {} has rows of {row} elements, not a multiple of its \
             block size {block}",
            super::facts::dtype_name(info.ggml_dtype)
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

/// Checks every tensor of `content` with [`tensor_extent`] and that its data lies inside a
/// file of `file_len` bytes. Tensors are checked in order of their offsets (then names),
/// so the same file always names the same tensor.
pub fn check_tensor_extents(content: &Content, file_len: u64) -> Result<(), ModelError> {
    let alignment = alignment(&content.metadata)?;
    let mut order: Vec<(&String, &TensorInfo)> = content.tensor_infos.iter().collect();
    order.sort_by(|a, b| a.1.offset.cmp(&b.1.offset).then_with(|| a.0.cmp(b.0)));
    for (name, info) in order {
        let (start, bytes) = tensor_extent(name, info, content.tensor_data_offset, alignment)?;
        check_inside(name, start, bytes, file_len)?;
    }
    Ok(())
}

/// The tensor data alignment `general.alignment` asks for (a power of two), or the default.
pub fn alignment(metadata: &HashMap<String, Value>) -> Result<u64, ModelError> {
    let value = match metadata.get("general.alignment") {
        None => return Ok(DEFAULT_ALIGNMENT),
        Some(v) => v,
    };
    let n: Option<u64> = match *value {
        Value::U8(x) => Some(x.into()),
        Value::U16(x) => Some(x.into()),
        Value::U32(x) => Some(x.into()),
        Value::U64(x) => Some(x),
        Value::I8(x) => u64::try_from(x).ok(),
        Value::I16(x) => u64::try_from(x).ok(),
        Value::I32(x) => u64::try_from(x).ok(),
        Value::I64(x) => u64::try_from(x).ok(),
        _ => None,
    };
    match n {
        Some(n) if n.is_power_of_two() && n <= 1 << 30 => Ok(n),
        _ => Err(malformed(format!(
            "general.alignment is {value:?}, not a power of two of at most 2^30"
        ))),
    }
}

fn malformed(detail: String) -> ModelError {
    ModelError::Malformed { detail }
}

/// Maps a GGML type id onto candle's type: a type GGML defines but this build cannot
/// compute is unsupported; an id GGML does not define is corruption.
fn ggml_dtype(id: u32, tensor: &str) -> Result<GgmlDType, ModelError> {
    Ok(match id {
        0 => GgmlDType::F32,
        1 => GgmlDType::F16,
        2 => GgmlDType::Q4_0,
        3 => GgmlDType::Q4_1,
        6 => GgmlDType::Q5_0,
        7 => GgmlDType::Q5_1,
        8 => GgmlDType::Q8_0,
        9 => GgmlDType::Q8_1,
        10 => GgmlDType::Q2K,
        11 => GgmlDType::Q3K,
        12 => GgmlDType::Q4K,
        13 => GgmlDType::Q5K,
        14 => GgmlDType::Q6K,
        15 => GgmlDType::Q8K,
        30 => GgmlDType::BF16,
        _ => {
            let known = [
                (4, "q4_2"),
                (5, "q4_3"),
                (16, "iq2_xxs"),
                (17, "iq2_xs"),
                (18, "iq3_xxs"),
                (19, "iq1_s"),
                (20, "iq4_nl"),
                (21, "iq3_s"),
                (22, "iq2_s"),
                (23, "iq4_xs"),
                (24, "i8"),
                (25, "i16"),
                (26, "i32"),
                (27, "i64"),
                (28, "f64"),
                (29, "iq1_m"),
                (31, "q4_0_4_4"),
                (32, "q4_0_4_8"),
                (33, "q4_0_8_8"),
                (34, "tq1_0"),
                (35, "tq2_0"),
                (36, "iq4_nl_4_4"),
                (37, "iq4_nl_4_8"),
                (38, "iq4_nl_8_8"),
                (39, "mxfp4"),
            ];
            return Err(match known.iter().find(|(k, _)| *k == id) {
                Some((_, type_name)) => ModelError::UnsupportedTensorType {
                    detail: format!("tensor `{tensor}` is {type_name} (GGML type {id})"),
                },
                None => malformed(format!(
                    "tensor `{tensor}` has type id {id}, which is not a GGML type: the file is \
                     corrupt"
                )),
            });
        }
    })
}

/// A reader that knows its position and how many bytes the file has left.
struct Reader<R> {
    inner: R,
    pos: u64,
    len: u64,
    values: u64,
}

impl<R: Read> Reader<R> {
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, ModelError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(ModelError::Io { path: String::new(), source }),
            }
        }
        self.pos += filled as u64;
        Ok(filled)
    }

    /// Checks that `n` more bytes are in the file and within the header limit.
    fn reserve(&self, n: u64, what: &str) -> Result<(), ModelError> {
        if n > self.remaining() {
            return Err(ModelError::Truncated {
                detail: format!(
                    "{what} needs {n} bytes at offset {}, but the file ends at {}: the file is \
                     corrupt or truncated",
                    self.pos, self.len
                ),
            });
        }
        if self.pos.saturating_add(n) > MAX_HEADER_BYTES {
            return Err(malformed(format!(
                "{what} at offset {} takes the header past {MAX_HEADER_BYTES} bytes: the file \
                 is corrupt",
                self.pos
            )));
        }
        Ok(())
    }

    fn exact<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ModelError> {
        self.reserve(N as u64, what)?;
        let mut buf = [0u8; N];
        if self.read_up_to(&mut buf)? < N {
            return Err(ModelError::Truncated { detail: format!("the file ends inside {what}") });
        }
        Ok(buf)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        self.exact(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        self.exact(what).map(u64::from_le_bytes)
    }

    fn length(&mut self, v1: bool, what: &str) -> Result<u64, ModelError> {
        if v1 { self.u32(what).map(u64::from) } else { self.u64(what) }
    }

    fn string(&mut self, v1: bool, what: &str) -> Result<String, ModelError> {
        let len = self.length(v1, what)?;
        self.reserve(len, what)?;
        let mut buf = vec![0u8; len as usize];
        if self.read_up_to(&mut buf)? < buf.len() {
            return Err(ModelError::Truncated { detail: format!("the file ends inside {what}") });
        }
        // GGUF strings are not NUL-terminated, but some writers add one.
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn count_values(&mut self, n: u64, key: &str) -> Result<(), ModelError> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_METADATA_VALUES {
            return Err(malformed(format!(
                "metadata `{key}` takes the header past {MAX_METADATA_VALUES} values: the file \
                 is corrupt"
            )));
        }
        Ok(())
    }

    fn value(&mut self, v1: bool, ty: u32, key: &str, depth: usize) -> Result<Value, ModelError> {
        let what = format!("the value of metadata `{key}`");
        if depth == 0 {
            self.count_values(1, key)?;
        }
        Ok(match ty {
            0 => Value::U8(self.exact::<1>(&what)?[0]),
            1 => Value::I8(i8::from_le_bytes(self.exact(&what)?)),
            2 => Value::U16(u16::from_le_bytes(self.exact(&what)?)),
            3 => Value::I16(i16::from_le_bytes(self.exact(&what)?)),
            4 => Value::U32(u32::from_le_bytes(self.exact(&what)?)),
            5 => Value::I32(i32::from_le_bytes(self.exact(&what)?)),
            6 => Value::F32(f32::from_le_bytes(self.exact(&what)?)),
            7 => match self.exact::<1>(&what)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(malformed(format!("metadata `{key}` is a bool of value {b}"))),
            },
            8 => Value::String(self.string(v1, &what)?),
            9 => {
                if depth >= MAX_VALUE_DEPTH {
                    return Err(malformed(format!(
                        "metadata `{key}` nests arrays deeper than {MAX_VALUE_DEPTH}"
                    )));
                }
                let elem = self.u32(&format!("the element type of metadata `{key}`"))?;
                let len = self.length(v1, &format!("the length of metadata `{key}`"))?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    10..=12 => 8,
                    8 => {
                        if v1 {
                            4
                        } else {
                            8
                        }
                    }
                    9 => 4 + if v1 { 4 } else { 8 },
                    t => {
                        return Err(malformed(format!(
                            "metadata `{key}` is an array of unknown value type {t}"
                        )));
                    }
                };
                let needed = u128::from(len) * min;
                if needed > u128::from(self.remaining()) {
                    return Err(ModelError::Truncated {
                        detail: format!(
                            "metadata `{key}` declares {len} elements, which need at least \
                             {needed} bytes, but only {} remain: the file is corrupt or \
                             truncated",
                            self.remaining()
                        ),
                    });
                }
                self.count_values(len, key)?;
                // Grown as elements arrive: the length is only a claim until they do.
                let mut items = Vec::with_capacity(len.min(1 << 12) as usize);
                for _ in 0..len {
                    items.push(self.value(v1, elem, key, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(u64::from_le_bytes(self.exact(&what)?)),
            11 => Value::I64(i64::from_le_bytes(self.exact(&what)?)),
            12 => Value::F64(f64::from_le_bytes(self.exact(&what)?)),
            t => return Err(malformed(format!("metadata `{key}` has unknown value type {t}"))),
        })
    }
}
