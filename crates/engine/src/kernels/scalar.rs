//! The portable reference kernels: each format's scalar decoding and integer dot products
//! per (sub)block, one float multiply-add per block (the bodies live in the format
//! modules, `formats/`; this is their table).

use super::table::{Kernels, kernels};
use crate::format::WeightFormat;
use crate::formats as fm;

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
        MXFP4 => kernels!(fm::mxfp4::scalar),
    }
}
