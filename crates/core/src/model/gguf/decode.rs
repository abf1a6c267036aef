//! [`decode_header`]: a GGUF header from the bytes of a file, every claim checked before
//! anything is allocated.

use std::collections::{HashMap, HashSet};

use super::types::{GgmlType, MetaValue, TensorInfo};
use super::{
    GGUF_MAGIC, GgufError, GgufHeader, MAX_HEADER_BYTES, MAX_METADATA_VALUES, MAX_TENSOR_DIMS,
    alignment, check_inside, malformed, tensor_extent,
};

/// Deepest nesting of metadata arrays.
const MAX_VALUE_DEPTH: usize = 8;

/// Decodes the GGUF header at the start of `bytes`, the first bytes of a file of
/// `file_len` bytes (all of it, or at least its header). Never panics and never allocates
/// more than the file could justify: a count or length the rest of the file cannot hold
/// is `truncated`, a value outside GGUF's rules (a bad alignment, a misaligned or
/// overflowing tensor, an unknown value type) is `malformed`, a GGML tensor type this build
/// cannot compute is `unsupported_tensor_type`. Every tensor's data is checked to lie
/// inside the file, and to follow the tensor before it in file order (each padded to the
/// alignment), so no two tensors overlap.
pub fn decode_header(bytes: &[u8], file_len: u64) -> Result<GgufHeader, GgufError> {
    let mut r = Reader { bytes, pos: 0, len: file_len, values: 0 };
    let mut magic = [0u8; 4];
    let got = r.read_up_to(&mut magic);
    if got < 4 {
        return Err(GgufError::Truncated {
            detail: format!("file has {file_len} bytes, fewer than the 4-byte magic"),
        });
    }
    if &magic != GGUF_MAGIC {
        return Err(GgufError::NotGguf { found: magic.to_vec() });
    }
    let version = r.u32("the version")?;
    if !(1..=3).contains(&version) {
        return Err(malformed(format!("unsupported GGUF version {version}")));
    }
    let v1 = version == 1;
    let tensor_count = r.length(v1, "the tensor count")?;
    let kv_count = r.length(v1, "the metadata count")?;
    // The smallest possible entries: a key (length prefix, one byte), a type and a 1-byte
    // value; a tensor name (length prefix, one byte), a dimension count, a type, an offset.
    let prefix: u128 = if v1 { 4 } else { 8 };
    let needed = u128::from(kv_count) * (prefix + 1 + 4 + 1)
        + u128::from(tensor_count) * (prefix + 1 + 4 + 4 + 8);
    if needed > u128::from(r.remaining()) {
        return Err(GgufError::Truncated {
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
    let tensors = read_tensor_infos(&mut r, v1, tensor_count)?;

    let alignment = alignment(&metadata)?;
    let tensor_data_offset =
        u64::try_from(u128::from(r.pos).div_ceil(u128::from(alignment)) * u128::from(alignment))
            .map_err(|_| malformed("the tensor data offset overflows".to_string()))?;
    if tensor_data_offset > file_len && !tensors.is_empty() {
        return Err(GgufError::Truncated {
            detail: format!(
                "tensor data would start at {tensor_data_offset} past the end ({file_len})"
            ),
        });
    }
    let mut tensor_infos = HashMap::with_capacity(tensors.len());
    // Tensors in file order: their data must follow one another in that order, each
    // padded to the alignment (llama.cpp's rule), and lie inside the file.
    let mut expected: u128 = 0;
    for (name, dims, dtype, offset) in tensors {
        // GGUF lists dimensions innermost first; shapes here are outermost first.
        let shape: Vec<usize> =
            dims.iter().rev().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(
                |_| {
                    malformed(format!(
                        "tensor `{name}` has a dimension beyond this machine's address space"
                    ))
                },
            )?;
        let info = TensorInfo { dtype, shape, offset };
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
    Ok(GgufHeader {
        version,
        metadata,
        tensors: tensor_infos,
        tensor_data_offset,
        alignment,
        file_len,
    })
}

/// A tensor info as the file lists it: name, dimensions (innermost first), type, offset.
type RawTensor = (String, Vec<u64>, GgmlType, u64);

/// Reads `count` tensor infos, in file order; names must be non-empty and distinct.
fn read_tensor_infos(
    r: &mut Reader<'_>,
    v1: bool,
    count: u64,
) -> Result<Vec<RawTensor>, GgufError> {
    let mut tensors: Vec<RawTensor> = Vec::new();
    let mut names = HashSet::new();
    for i in 0..count {
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
        let dtype = ggml_type(type_id, &name)?;
        let offset = r.u64(&format!("the offset of tensor `{name}`"))?;
        if name.is_empty() {
            return Err(malformed(format!("tensor {i} has an empty name")));
        }
        if !names.insert(name.clone()) {
            return Err(malformed(format!("tensor `{name}` appears twice")));
        }
        tensors.push((name, dims, dtype, offset));
    }
    Ok(tensors)
}

/// The GGML type of id `id`: a type GGML defines but this build cannot compute is
/// unsupported; an id GGML does not define is corruption.
fn ggml_type(id: u32, tensor: &str) -> Result<GgmlType, GgufError> {
    if let Some(t) = GgmlType::from_id(id) {
        return Ok(t);
    }
    const KNOWN: [(u32, &str); 25] = [
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
    Err(match KNOWN.iter().find(|(k, _)| *k == id) {
        Some((_, type_name)) => GgufError::UnsupportedTensorType {
            detail: format!("tensor `{tensor}` is {type_name} (GGML type {id})"),
        },
        None => malformed(format!(
            "tensor `{tensor}` has type id {id}, which is not a GGML type: the file is corrupt"
        )),
    })
}

/// A reader over the file's first bytes that knows its position and how many bytes the
/// file has left.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: u64,
    len: u64,
    values: u64,
}

impl Reader<'_> {
    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.pos)
    }

    /// Copies as many bytes as are there (up to `buf`'s length) and moves past them.
    fn read_up_to(&mut self, buf: &mut [u8]) -> usize {
        let at = usize::try_from(self.pos).unwrap_or(usize::MAX).min(self.bytes.len());
        let n = buf.len().min(self.bytes.len() - at);
        buf[..n].copy_from_slice(&self.bytes[at..at + n]);
        self.pos += n as u64;
        n
    }

    /// Checks that `n` more bytes are in the file and within the header limit.
    fn reserve(&self, n: u64, what: &str) -> Result<(), GgufError> {
        if n > self.remaining() {
            return Err(GgufError::Truncated {
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

    fn exact<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        self.reserve(N as u64, what)?;
        let mut buf = [0u8; N];
        if self.read_up_to(&mut buf) < N {
            return Err(GgufError::Truncated { detail: format!("the file ends inside {what}") });
        }
        Ok(buf)
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        self.exact(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        self.exact(what).map(u64::from_le_bytes)
    }

    fn length(&mut self, v1: bool, what: &str) -> Result<u64, GgufError> {
        if v1 { self.u32(what).map(u64::from) } else { self.u64(what) }
    }

    fn string(&mut self, v1: bool, what: &str) -> Result<String, GgufError> {
        let len = self.length(v1, what)?;
        self.reserve(len, what)?;
        let mut buf = vec![0u8; len as usize];
        if self.read_up_to(&mut buf) < buf.len() {
            return Err(GgufError::Truncated { detail: format!("the file ends inside {what}") });
        }
        // GGUF strings are not NUL-terminated, but some writers add one.
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn count_values(&mut self, n: u64, key: &str) -> Result<(), GgufError> {
        self.values = self.values.saturating_add(n);
        if self.values > MAX_METADATA_VALUES {
            return Err(malformed(format!(
                "metadata `{key}` takes the header past {MAX_METADATA_VALUES} values: the file \
                 is corrupt"
            )));
        }
        Ok(())
    }

    fn value(
        &mut self,
        v1: bool,
        ty: u32,
        key: &str,
        depth: usize,
    ) -> Result<MetaValue, GgufError> {
        let what = format!("the value of metadata `{key}`");
        if depth == 0 {
            self.count_values(1, key)?;
        }
        Ok(match ty {
            0 => MetaValue::U8(self.exact::<1>(&what)?[0]),
            1 => MetaValue::I8(i8::from_le_bytes(self.exact(&what)?)),
            2 => MetaValue::U16(u16::from_le_bytes(self.exact(&what)?)),
            3 => MetaValue::I16(i16::from_le_bytes(self.exact(&what)?)),
            4 => MetaValue::U32(u32::from_le_bytes(self.exact(&what)?)),
            5 => MetaValue::I32(i32::from_le_bytes(self.exact(&what)?)),
            6 => MetaValue::F32(f32::from_le_bytes(self.exact(&what)?)),
            7 => match self.exact::<1>(&what)?[0] {
                0 => MetaValue::Bool(false),
                1 => MetaValue::Bool(true),
                b => return Err(malformed(format!("metadata `{key}` is a bool of value {b}"))),
            },
            8 => MetaValue::String(self.string(v1, &what)?),
            9 => MetaValue::Array(self.array(v1, key, depth)?),
            10 => MetaValue::U64(u64::from_le_bytes(self.exact(&what)?)),
            11 => MetaValue::I64(i64::from_le_bytes(self.exact(&what)?)),
            12 => MetaValue::F64(f64::from_le_bytes(self.exact(&what)?)),
            t => return Err(malformed(format!("metadata `{key}` has unknown value type {t}"))),
        })
    }

    /// An array value's elements, its length checked against the bytes left.
    fn array(&mut self, v1: bool, key: &str, depth: usize) -> Result<Vec<MetaValue>, GgufError> {
        if depth >= MAX_VALUE_DEPTH {
            return Err(malformed(format!(
                "metadata `{key}` nests arrays deeper than {MAX_VALUE_DEPTH}"
            )));
        }
        let elem = self.u32(&format!("the element type of metadata `{key}`"))?;
        let len = self.length(v1, &format!("the length of metadata `{key}`"))?;
        let prefix = if v1 { 4 } else { 8 };
        let min = match elem {
            0 | 1 | 7 => 1,
            2 | 3 => 2,
            4..=6 => 4,
            10..=12 => 8,
            8 => prefix,
            9 => 4 + prefix,
            t => {
                return Err(malformed(format!(
                    "metadata `{key}` is an array of unknown value type {t}"
                )));
            }
        };
        let needed = u128::from(len) * min;
        if needed > u128::from(self.remaining()) {
            return Err(GgufError::Truncated {
                detail: format!(
                    "metadata `{key}` declares {len} elements, which need at least {needed} \
                     bytes, but only {} remain: the file is corrupt or truncated",
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
        Ok(items)
    }
}
