//! The AVX-512 kernels with VNNI: Q4_0, Q4_1, Q5_0 and Q8_0 as tiles of weight rows
//! (`vpdpbusd`), Q4_K, Q5_K and Q6_K one weight row at a time (512-bit `maddubs`, the
//! per-group scales through `vpdpwssd`), F16 and BF16 (512-bit FMA, or for BF16
//! `vdpbf16ps` on a CPU with AVX-512 BF16; F16 and `vdpbf16ps` in tiles of up to four
//! weight rows per activation load); their bodies live in the format
//! modules' `avx512` submodules; the other formats use the AVX2 kernels on these CPUs.
//! Here the loop that runs a format's tile over the weight rows, and the table.
//!
//! Signed weights meet `vpdpbusd`'s unsigned operand through an offset that is removed
//! exactly in the integer lanes (`sum((w + c) * a) - sum(c * a)`), so the integer part of
//! every block is exact, as in the reference.
#![allow(unsafe_code)]

use super::table::Kernels;
use crate::acts::Acts;
use crate::format::WeightFormat;
use crate::formats as fm;
use crate::simd::avx2::prefetch;
use crate::simd::avx512::TILE;

/// [`Kernels`] from a tile function `$tile::<M, R>(w, row_bytes, a, rows)`, which returns
/// `[[f32; R]; M]` for weight rows `w[m * row_bytes..]`; only for a CPU with the
/// features of this module.
macro_rules! tiled_kernels {
    ($($tile:ident)::+) => {{
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            let mut i = 0;
            while i < n {
                let m = (n - i).min(TILE);
                // The next tile's rows (past `n` they are only prefetched).
                let ahead = ((i + TILE) * rb).min(w.len())..((i + 2 * TILE) * rb).min(w.len());
                prefetch(&w[ahead]);
                let wi = &w[i * rb..];
                macro_rules! put {
                    ($m:literal) => {{
                        let v = $($tile)::+::<$m, R>(wi, rb, a, rows);
                        for (k, v) in v.iter().enumerate() {
                            out[(i + k) * stride..(i + k) * stride + R].copy_from_slice(v);
                        }
                    }};
                }
                match m {
                    4 => put!(4),
                    3 => put!(3),
                    2 => put!(2),
                    _ => put!(1),
                }
                i += m;
            }
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn one<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
            $($tile)::+::<1, R>(w, w.len(), a, rows)[0]
        }
        super::table::simd_widths!(one, many)
    }};
}

/// Whether this CPU has AVX-512 BF16 (`vdpbf16ps`), which BF16 weights use when it does.
pub(super) fn has_bf16() -> bool {
    std::arch::is_x86_feature_detected!("avx512bf16")
}

/// The AVX-512 kernels of `fmt`, if it has any; `bf16` picks `vdpbf16ps` for BF16 weights
/// (only where [`has_bf16`]).
pub(super) fn select(fmt: WeightFormat, bf16: bool) -> Option<Kernels> {
    macro_rules! k {
        ($($f:ident)::+) => {
            Some(tiled_kernels!($($f)::+))
        };
    }
    // One weight row at a time, 512 bits wide (the K-quants).
    macro_rules! wide {
        ($($f:ident)::+) => {
            Some(super::table::simd_kernels!(
                $($f)::+,
                "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"
            ))
        };
    }
    match fmt {
        WeightFormat::Q4_0 => k!(fm::q4_0::avx512::tile),
        WeightFormat::Q4_1 => k!(fm::q4_1::avx512::tile),
        WeightFormat::Q8_0 => k!(fm::q8_0::avx512::tile),
        WeightFormat::Q5_0 => k!(fm::q5_0::avx512::tile),
        WeightFormat::Q4K => wide!(fm::q4_k::avx512::dot),
        WeightFormat::Q5K => wide!(fm::q5_k::avx512::dot),
        WeightFormat::Q6K => wide!(fm::q6_k::avx512::dot),
        WeightFormat::MXFP4 => wide!(fm::mxfp4::avx512::dot),
        WeightFormat::F32 => {
            use fm::f32::avx512::rows;
            Some(super::table::simd_widths!(fm::f32::avx512::dot, rows))
        }
        WeightFormat::F16 => {
            use fm::f16::avx512::rows;
            Some(super::table::simd_widths!(fm::f16::avx512::dot, rows))
        }
        WeightFormat::BF16 if bf16 && has_bf16() => {
            use fm::bf16::avx512bf16::rows;
            Some(super::table::simd_widths!(fm::bf16::avx512bf16::dot, rows))
        }
        WeightFormat::BF16 => {
            use fm::bf16::avx512::rows;
            Some(super::table::simd_widths!(fm::bf16::avx512::dot, rows))
        }
        _ => None,
    }
}
