//! The portable reference kernels: each format's scalar decoding and integer dot products
//! per (sub)block, one float multiply-add per block (the bodies live in the format
//! modules, `formats/`; this is their table).

use super::table::{Kernels, kernels};
use crate::acts::Acts;
use crate::format::WeightFormat;
use crate::formats as fm;
use crate::quant::{decode_k, decode32, dequantize_row};

/// The reference kernels of `fmt`.
pub fn select(fmt: WeightFormat) -> Kernels {
    use WeightFormat::*;
    match fmt {
        F32 => kernels!(fm::f32::scalar),
        F16 => kernels!(fm::f16::scalar),
        BF16 => kernels!(fm::bf16::scalar),
        Q4_0 => kernels!(fm::q4_0::scalar),
        Q4_1 => kernels!(fm::q4_1::scalar),
        Q5_0 => kernels!(fm::q5_0::scalar),
        Q5_1 => kernels!(fm::q5_1::scalar),
        Q8_0 => kernels!(fm::q8_0::scalar),
        Q2K => kernels!(fm::q2_k::scalar),
        Q3K => kernels!(fm::q3_k::scalar),
        Q4K => kernels!(fm::q4_k::scalar),
        Q5K => kernels!(fm::q5_k::scalar),
        Q6K => kernels!(fm::q6_k::scalar),
    }
}

/// The reference dot product of a 32-block format with Q8 activations.
pub fn dot_q8_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    fm::block32::dot_ref(|w, b| decode32(fmt, w, b), w, a, rows)
}

/// The reference dot product of a K-quant format with Q8_K activations.
pub fn dot_k_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    fm::kquant::dot_ref(|w, b| decode_k(fmt, w, b), w, a, rows)
}

/// The reference dot product of an F16 / BF16 row with f32 activations.
pub fn dot_half_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    fm::f16::dot_chunks(|c, out| dequantize_row(fmt, c, out), w, a, rows)
}
