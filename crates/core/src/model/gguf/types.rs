//! The values a GGUF header holds: metadata values, GGML tensor types and tensor infos.

/// One metadata value, as GGUF types it.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    /// `uint8` (type 0).
    U8(u8),
    /// `int8` (type 1).
    I8(i8),
    /// `uint16` (type 2).
    U16(u16),
    /// `int16` (type 3).
    I16(i16),
    /// `uint32` (type 4).
    U32(u32),
    /// `int32` (type 5).
    I32(i32),
    /// `float32` (type 6).
    F32(f32),
    /// `bool` (type 7).
    Bool(bool),
    /// `string` (type 8).
    String(String),
    /// `array` (type 9) of values of one type.
    Array(Vec<MetaValue>),
    /// `uint64` (type 10).
    U64(u64),
    /// `int64` (type 11).
    I64(i64),
    /// `float64` (type 12).
    F64(f64),
}

impl MetaValue {
    /// GGUF's id of this value's type.
    pub fn type_id(&self) -> u32 {
        match self {
            MetaValue::U8(_) => 0,
            MetaValue::I8(_) => 1,
            MetaValue::U16(_) => 2,
            MetaValue::I16(_) => 3,
            MetaValue::U32(_) => 4,
            MetaValue::I32(_) => 5,
            MetaValue::F32(_) => 6,
            MetaValue::Bool(_) => 7,
            MetaValue::String(_) => 8,
            MetaValue::Array(_) => 9,
            MetaValue::U64(_) => 10,
            MetaValue::I64(_) => 11,
            MetaValue::F64(_) => 12,
        }
    }

    /// The value of any integer type, widened; `None` for the others.
    pub fn as_integer(&self) -> Option<i128> {
        Some(match *self {
            MetaValue::U8(x) => x.into(),
            MetaValue::I8(x) => x.into(),
            MetaValue::U16(x) => x.into(),
            MetaValue::I16(x) => x.into(),
            MetaValue::U32(x) => x.into(),
            MetaValue::I32(x) => x.into(),
            MetaValue::U64(x) => x.into(),
            MetaValue::I64(x) => x.into(),
            _ => return None,
        })
    }

    /// The string of a `string` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an `array` value.
    pub fn as_array(&self) -> Option<&[MetaValue]> {
        match self {
            MetaValue::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// A GGML tensor type a header may name and this build can compute or convert.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// 32-bit floats.
    F32,
    /// 16-bit floats.
    F16,
    /// 4-bit blocks of 32 with a scale.
    Q4_0,
    /// 4-bit blocks of 32 with a scale and a minimum.
    Q4_1,
    /// 5-bit blocks of 32 with a scale.
    Q5_0,
    /// 5-bit blocks of 32 with a scale and a minimum.
    Q5_1,
    /// 8-bit blocks of 32 with a scale.
    Q8_0,
    /// 8-bit blocks of 32 with a scale and a sum (activations only).
    Q8_1,
    /// 2-bit super-blocks of 256.
    Q2K,
    /// 3-bit super-blocks of 256.
    Q3K,
    /// 4-bit super-blocks of 256.
    Q4K,
    /// 5-bit super-blocks of 256.
    Q5K,
    /// 6-bit super-blocks of 256.
    Q6K,
    /// 8-bit super-blocks of 256 (activations only).
    Q8K,
    /// bfloat16.
    BF16,
    /// OCP microscaling FP4: blocks of 32 E2M1 values and one E8M0 (power of two) scale.
    MXFP4,
}

impl GgmlType {
    /// Every type, in GGML id order.
    pub const ALL: [GgmlType; 16] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q2K,
        GgmlType::Q3K,
        GgmlType::Q4K,
        GgmlType::Q5K,
        GgmlType::Q6K,
        GgmlType::Q8K,
        GgmlType::BF16,
        GgmlType::MXFP4,
    ];

    /// GGML's id of this type.
    pub const fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q8_1 => 9,
            GgmlType::Q2K => 10,
            GgmlType::Q3K => 11,
            GgmlType::Q4K => 12,
            GgmlType::Q5K => 13,
            GgmlType::Q6K => 14,
            GgmlType::Q8K => 15,
            GgmlType::BF16 => 30,
            GgmlType::MXFP4 => 39,
        }
    }

    /// The type of GGML id `id`, if it is one of [`GgmlType::ALL`].
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Elements per block (1 for the float types).
    pub const fn block_size(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => 32,
            GgmlType::Q8_0 | GgmlType::Q8_1 | GgmlType::MXFP4 => 32,
            GgmlType::Q2K | GgmlType::Q3K | GgmlType::Q4K | GgmlType::Q5K => 256,
            GgmlType::Q6K | GgmlType::Q8K => 256,
        }
    }

    /// Bytes per block.
    pub const fn type_size(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => 18,
            GgmlType::Q4_1 => 20,
            GgmlType::Q5_0 => 22,
            GgmlType::Q5_1 => 24,
            GgmlType::Q8_0 => 34,
            GgmlType::Q8_1 => 36,
            GgmlType::Q2K => 84,
            GgmlType::Q3K => 110,
            GgmlType::Q4K => 144,
            GgmlType::Q5K => 176,
            GgmlType::Q6K => 210,
            GgmlType::Q8K => 292,
            GgmlType::MXFP4 => 17,
        }
    }

    /// The lowercase name facts and messages use (`f32`, `q4_0`, `q4k`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q8_1 => "q8_1",
            GgmlType::Q2K => "q2k",
            GgmlType::Q3K => "q3k",
            GgmlType::Q4K => "q4k",
            GgmlType::Q5K => "q5k",
            GgmlType::Q6K => "q6k",
            GgmlType::Q8K => "q8k",
            GgmlType::BF16 => "bf16",
            GgmlType::MXFP4 => "mxfp4",
        }
    }
}

/// One tensor of a header: its type, shape and where its data starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The GGML type of its elements.
    pub dtype: GgmlType,
    /// Its dimensions, outermost first (rows, then columns: GGUF lists them the other way
    /// round).
    pub shape: Vec<usize>,
    /// Its data's offset from the start of the tensor data (aligned).
    pub offset: u64,
}
