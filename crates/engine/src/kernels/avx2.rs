//! The AVX2 + FMA + F16C kernels (256-bit) of every format: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
//! and every K-quant on 8-bit activations with `maddubs` integer products, and F32 / F16 /
//! BF16 on f32 activations. The bodies live in the format modules (`formats/`,
//! each one's `avx2` submodule); this is their table.
//!
//! Every kernel is a safe `#[target_feature]` function; [`select`] is only reached when
//! the CPU has these features (see `kernels::select`), which is what each call's
//! `// SAFETY:` relies on.
#![allow(unsafe_code)]

use super::table::Kernels;
use crate::format::WeightFormat;
use crate::formats as fm;

/// The AVX2 kernels of `fmt` (every format has them; `Option` as the other families').
pub(super) fn select(fmt: WeightFormat) -> Option<Kernels> {
    use WeightFormat::*;
    macro_rules! k {
        ($($f:ident)::+) => {
            Some(super::table::simd_kernels!($($f)::+, "avx2,fma,f16c"))
        };
    }
    match fmt {
        F32 => {
            use fm::f32::avx2::rows;
            Some(super::table::simd_widths!(fm::f32::avx2::dot, rows))
        }
        F16 => {
            use fm::f16::avx2::rows;
            Some(super::table::simd_widths!(fm::f16::avx2::dot, rows))
        }
        BF16 => {
            use fm::bf16::avx2::rows;
            Some(super::table::simd_widths!(fm::bf16::avx2::dot, rows))
        }
        Q4_0 => k!(fm::q4_0::avx2::dot),
        Q4_1 => k!(fm::q4_1::avx2::dot),
        Q8_0 => k!(fm::q8_0::avx2::dot),
        Q5_0 => k!(fm::q5_0::avx2::dot),
        Q5_1 => k!(fm::q5_1::avx2::dot),
        Q2K => k!(fm::q2_k::avx2::dot),
        Q3K => k!(fm::q3_k::avx2::dot),
        Q4K => k!(fm::q4_k::avx2::dot),
        Q5K => k!(fm::q5_k::avx2::dot),
        Q6K => k!(fm::q6_k::avx2::dot),
        MXFP4 => k!(fm::mxfp4::avx2::dot),
    }
}
