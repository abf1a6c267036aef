//! GGUF block formats and activation quantization: the public face of the per-format
//! modules, and the dispatch of block decoding by [`WeightFormat`].
//!
//! Weights stay in GGUF's own block layout (read in place from the mapped file). Each
//! format decodes in plain Rust (in its own module) into small integers and per-(sub)block
//! scales: that decoding is the scalar reference for every kernel and the dequantizer of
//! embedding rows. [`decode32`], [`decode_k`] and [`dequantize_row`] pick the format's.
//!
//! Activations are quantized once per product into the 8-bit blocks the weight format
//! pairs with: [`Q8Rows`] (blocks of 32, for Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0) or
//! [`Q8KRows`] (blocks of 256 with 16-element sums, for the K-quants). F32, F16 and BF16
//! weights take the f32 activations as they are.

pub use crate::acts::{ActNeed, Q8KRow, Q8KRows, Q8Row, Q8Rows};
pub use crate::format::{ActKind, QK, QK_K, WeightFormat, f16_at};
use crate::formats as fm;
pub use crate::formats::block32::Decoded32;
pub use crate::formats::kquant::DecodedK;
pub use crate::formats::q3_k::scales_q3k;
pub use crate::formats::q4_k::scale_min_k4;

/// Decodes block `b` of a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / MXFP4 row.
pub fn decode32(fmt: WeightFormat, row: &[u8], b: usize) -> Decoded32 {
    match fmt {
        WeightFormat::Q4_0 => fm::q4_0::decode(row, b),
        WeightFormat::Q4_1 => fm::q4_1::decode(row, b),
        WeightFormat::Q5_0 => fm::q5_0::decode(row, b),
        WeightFormat::Q5_1 => fm::q5_1::decode(row, b),
        WeightFormat::Q8_0 => fm::q8_0::decode(row, b),
        WeightFormat::MXFP4 => fm::mxfp4::decode(row, b),
        other => panic!("decode32 of {other:?}"),
    }
}

/// Decodes super-block `b` of a K-quant row.
pub fn decode_k(fmt: WeightFormat, row: &[u8], b: usize) -> DecodedK {
    match fmt {
        WeightFormat::Q2K => fm::q2_k::decode(row, b),
        WeightFormat::Q3K => fm::q3_k::decode(row, b),
        WeightFormat::Q4K => fm::q4_k::decode(row, b),
        WeightFormat::Q5K => fm::q5_k::decode(row, b),
        WeightFormat::Q6K => fm::q6_k::decode(row, b),
        other => panic!("decode_k of {other:?}"),
    }
}

/// Dequantizes a whole row of `out.len()` elements (the embedding lookup and the tests'
/// reference).
pub fn dequantize_row(fmt: WeightFormat, row: &[u8], out: &mut [f32]) {
    match fmt {
        WeightFormat::F32 => fm::f32::dequantize(row, out),
        WeightFormat::F16 => fm::f16::dequantize(row, out),
        WeightFormat::BF16 => fm::bf16::dequantize(row, out),
        f if f.act_kind() == ActKind::Q8 => {
            for (b, o) in out.chunks_exact_mut(QK).enumerate() {
                let x = decode32(f, row, b);
                for (o, &q) in o.iter_mut().zip(&x.q) {
                    *o = x.d * f32::from(q) + x.m;
                }
            }
        }
        f => {
            for (b, o) in out.chunks_exact_mut(QK_K).enumerate() {
                let x = decode_k(f, row, b);
                for (i, (o, &q)) in o.iter_mut().zip(&x.q).enumerate() {
                    *o = x.scale[i / 16] * f32::from(q) - x.min[i / 16];
                }
            }
        }
    }
}
