//! The weight formats the engine computes on: their names, block geometry and the
//! activation form each pairs with. A leaf: every other module may use it, it uses none.

use half::f16;

/// Elements in a K-quant super-block.
pub const QK_K: usize = 256;
/// Elements in a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 block.
pub const QK: usize = 32;

/// A weight storage format (GGML type) the engine computes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// 32-bit floats.
    F32,
    /// 16-bit IEEE floats.
    F16,
    /// bfloat16.
    BF16,
    /// 4-bit, blocks of 32, one f16 scale (value = (q - 8) * d).
    Q4_0,
    /// 4-bit, blocks of 32, f16 scale and min (value = q * d + m).
    Q4_1,
    /// 5-bit, blocks of 32, one scale.
    Q5_0,
    /// 5-bit, blocks of 32, scale and min.
    Q5_1,
    /// 8-bit, blocks of 32, one scale.
    Q8_0,
    /// 2-bit K-quant.
    Q2K,
    /// 3-bit K-quant.
    Q3K,
    /// 4-bit K-quant.
    Q4K,
    /// 5-bit K-quant.
    Q5K,
    /// 6-bit K-quant.
    Q6K,
    /// OCP microscaling FP4: blocks of 32 E2M1 values and one E8M0 scale (gpt-oss's
    /// experts).
    MXFP4,
}

/// Which activation form a weight format multiplies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActKind {
    /// The f32 rows as they are.
    F32,
    /// `Q8Rows`: 8-bit blocks of 32.
    Q8,
    /// `Q8KRows`: 8-bit blocks of 256.
    Q8K,
    /// `Bf16Rows`: the f32 rows rounded to bfloat16 (BF16 weights, as llama.cpp's BF16
    /// products take them, so that `vdpbf16ps` can multiply both operands as they are).
    Bf16,
}

impl WeightFormat {
    /// Every format, in GGML order.
    pub const ALL: [WeightFormat; 14] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::BF16,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q8_0,
        WeightFormat::Q2K,
        WeightFormat::Q3K,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
        WeightFormat::MXFP4,
    ];

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        use WeightFormat::*;
        match self {
            F32 | F16 | BF16 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | MXFP4 => QK,
            Q2K | Q3K | Q4K | Q5K | Q6K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        use WeightFormat::*;
        match self {
            F32 => 4,
            F16 | BF16 => 2,
            Q4_0 => 18,
            Q4_1 => 20,
            Q5_0 => 22,
            Q5_1 => 24,
            Q8_0 => 34,
            Q2K => 84,
            Q3K => 110,
            Q4K => 144,
            Q5K => 176,
            Q6K => 210,
            MXFP4 => 17,
        }
    }

    /// The activation form its products take.
    pub fn act_kind(self) -> ActKind {
        use WeightFormat::*;
        match self {
            F32 | F16 => ActKind::F32,
            BF16 => ActKind::Bf16,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | MXFP4 => ActKind::Q8,
            Q2K | Q3K | Q4K | Q5K | Q6K => ActKind::Q8K,
        }
    }

    /// Bytes of one row of `cols` elements (`None` when `cols` is not whole blocks).
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        cols.is_multiple_of(self.block_elems())
            .then(|| cols / self.block_elems() * self.block_bytes())
    }

    /// The lowercase GGML name (`q4_1`, `q6_k`, ...).
    pub fn name(self) -> &'static str {
        use WeightFormat::*;
        match self {
            F32 => "f32",
            F16 => "f16",
            BF16 => "bf16",
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q2K => "q2_k",
            Q3K => "q3_k",
            Q4K => "q4_k",
            Q5K => "q5_k",
            Q6K => "q6_k",
            MXFP4 => "mxfp4",
        }
    }
}

/// An f16 stored little-endian at `b[at..]`, as f32.
#[inline(always)]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}
