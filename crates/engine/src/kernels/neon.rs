//! The ARM64 NEON kernels of every format, in two tiers: `Neon` (baseline ARMv8 NEON,
//! every ARM64 core) and `NeonDot` (with the `dotprod` extension's `sdot`, chosen at run
//! time). Integer formats multiply 8-bit weights by the 8-bit activation blocks the x86
//! tiers use, 16 pairs per instruction, and scale per block in f32 as the reference
//! does; F32 / F16 / BF16 multiply f32 lanes.
//!
//! These are the kernels of rows read in place (the baseline tier's, the formats without
//! repacked cells, and row counts that are not whole groups of 16); with `dotprod`, the
//! repacked formats use `packed::neon`'s kernels instead. Q8_0 and Q4_0 read their blocks
//! straight from the row (Q4_0's nibbles split in registers); the other formats decode
//! one block or super-block with their reference decoder, then take its integer products
//! in NEON. `i8mm`'s `smmla` for several activation rows is the next step once an ARM
//! host can measure it.
//!
//! Every kernel is a safe `#[target_feature]` function (or plain NEON, which every ARM64
//! core has); [`select`] is reached only when the CPU has the tier's features (see
//! `kernels::select`), which is what each call's `// SAFETY:` relies on.
#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::table::Kernels;
use crate::acts::Acts;
use crate::format::{QK, QK_K, WeightFormat, f16_at};
use crate::formats as fm;
use crate::formats::block32::Decoded32;
use crate::formats::kquant::DecodedK;
use crate::simd::neon::{bf16x4, dot16, dot32, f16x4, f32x4, load4f, load16, load16u};

/// The kernels of `fmt` for the baseline tier (`dot: false`) or the `dotprod` one.
pub(super) fn select(fmt: WeightFormat, dot: bool) -> Option<Kernels> {
    use WeightFormat::*;
    macro_rules! k {
        ($f:ident) => {{
            if dot {
                #[inline]
                #[target_feature(enable = "neon,dotprod")]
                fn one<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
                    $f::<true, R>(w, a, rows)
                }
                Some(super::table::simd_kernels!(one, "neon,dotprod"))
            } else {
                #[inline]
                #[target_feature(enable = "neon")]
                fn one<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
                    $f::<false, R>(w, a, rows)
                }
                Some(super::table::simd_kernels!(one, "neon"))
            }
        }};
    }
    match fmt {
        F32 => k!(float_f32),
        F16 => k!(float_f16),
        BF16 => k!(float_bf16),
        Q8_0 => k!(q8_0),
        Q4_0 => k!(q4_0),
        Q4_1 => k!(q4_1),
        Q5_0 => k!(q5_0),
        Q5_1 => k!(q5_1),
        MXFP4 => k!(mxfp4),
        Q2K => k!(q2_k),
        Q3K => k!(q3_k),
        Q4K => k!(q4_k),
        Q5K => k!(q5_k),
        Q6K => k!(q6_k),
    }
}

/// A 32-block's integer product with each row's activations, then the reference's
/// `d * dx * sumi + m * sx` per block.
#[inline]
#[target_feature(enable = "neon")]
fn blocks32<const DOT: bool, const R: usize>(
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
    block: impl Fn(&[u8], usize) -> ([int8x16_t; 2], f32, f32),
) -> [f32; R] {
    let nb = a.cols / QK;
    let x = rows.map(|r| a.q8.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let (q, d, m) = block(w, b);
        for r in 0..R {
            let y = [load16(x[r].qs, b * QK), load16(x[r].qs, b * QK + 16)];
            let sumi = dot32::<DOT>(q, y);
            acc[r] += d * x[r].d[b] * sumi as f32 + m * x[r].s[b];
        }
    }
    acc
}

/// A decoded 32-block in registers.
#[inline]
#[target_feature(enable = "neon")]
fn decoded32(blk: &Decoded32) -> ([int8x16_t; 2], f32, f32) {
    (([load16(&blk.q, 0), load16(&blk.q, 16)]), blk.d, blk.m)
}

/// A kernel `$name` of a format whose blocks `$body` (`blocks32` or `superblocks`) reads
/// through `$decode`.
macro_rules! decoded_kernel {
    ($name:ident, $body:ident, $decode:expr) => {
        #[inline]
        #[target_feature(enable = "neon")]
        fn $name<const DOT: bool, const R: usize>(
            w: &[u8],
            a: &Acts,
            rows: [usize; R],
        ) -> [f32; R] {
            $body::<DOT, R>(w, a, rows, $decode)
        }
    };
}

decoded_kernel!(q4_1, blocks32, |w, b| decoded32(&fm::q4_1::decode(w, b)));
decoded_kernel!(q5_0, blocks32, |w, b| decoded32(&fm::q5_0::decode(w, b)));
decoded_kernel!(q5_1, blocks32, |w, b| decoded32(&fm::q5_1::decode(w, b)));
decoded_kernel!(mxfp4, blocks32, |w, b| decoded32(&fm::mxfp4::decode(w, b)));

/// Q8_0: the 32 signed bytes after each block's f16 scale, loaded as they are.
#[inline]
#[target_feature(enable = "neon")]
fn q8_0<const DOT: bool, const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    const BB: usize = 34;
    blocks32::<DOT, R>(w, a, rows, |w, b| {
        let o = b * BB;
        let q = [load16u(w, o + 2), load16u(w, o + 18)].map(|v| vreinterpretq_s8_u8(v));
        (q, f16_at(w, o), 0.0)
    })
}

/// Q4_0: the 16 bytes after each block's scale; low nibbles are values 0..16, high ones
/// 16..32, each less 8.
#[inline]
#[target_feature(enable = "neon")]
fn q4_0<const DOT: bool, const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    const BB: usize = 18;
    blocks32::<DOT, R>(w, a, rows, |w, b| {
        let o = b * BB;
        let v = load16u(w, o + 2);
        let eight = vdupq_n_s8(8);
        let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0F))), eight);
        let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(v)), eight);
        ([lo, hi], f16_at(w, o), 0.0)
    })
}

/// A K-quant super-block's products, decoded by `decode`: per 16-value group an integer
/// product, then the reference's `scale * sumi - min * bsum`, times the row's scale.
#[inline]
#[target_feature(enable = "neon")]
fn superblocks<const DOT: bool, const R: usize>(
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
    decode: impl Fn(&[u8], usize) -> DecodedK,
) -> [f32; R] {
    let nb = a.cols / QK_K;
    let x = rows.map(|r| a.q8k.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let blk = decode(w, b);
        let q: [int8x16_t; 16] = std::array::from_fn(|g| load16(&blk.q, 16 * g));
        for r in 0..R {
            let mut sum = 0f32;
            for (g, &q) in q.iter().enumerate() {
                let sumi = dot16::<DOT>(q, load16(x[r].qs, b * QK_K + 16 * g));
                sum += blk.scale[g] * sumi as f32 - blk.min[g] * f32::from(x[r].bsums[b * 16 + g]);
            }
            acc[r] += x[r].d[b] * sum;
        }
    }
    acc
}

decoded_kernel!(q2_k, superblocks, fm::q2_k::decode);
decoded_kernel!(q3_k, superblocks, fm::q3_k::decode);
decoded_kernel!(q4_k, superblocks, fm::q4_k::decode);
decoded_kernel!(q5_k, superblocks, fm::q5_k::decode);
decoded_kernel!(q6_k, superblocks, fm::q6_k::decode);

/// A float row (`BYTES` per value, four widened by `load(w, at)`) with f32 activation
/// rows `x`: four lanes of fused multiply-adds, the tail in scalar.
#[inline]
#[target_feature(enable = "neon")]
fn floats<const BYTES: usize, const R: usize>(
    w: &[u8],
    x: [&[f32]; R],
    load: impl Fn(&[u8], usize) -> float32x4_t,
    one: impl Fn(&[u8], usize) -> f32,
) -> [f32; R] {
    let n = x[0].len();
    let mut acc = [vdupq_n_f32(0.0); R];
    let mut i = 0;
    while i + 4 <= n {
        let v = load(w, i * BYTES);
        for r in 0..R {
            acc[r] = vfmaq_f32(acc[r], v, load4f(x[r], i));
        }
        i += 4;
    }
    std::array::from_fn(|r| {
        let mut s = vaddvq_f32(acc[r]);
        for j in i..n {
            s += one(w, j * BYTES) * x[r][j];
        }
        s
    })
}

#[inline]
#[target_feature(enable = "neon")]
fn float_f32<const DOT: bool, const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    floats::<4, R>(
        w,
        rows.map(|r| a.f32_row(r)),
        |w, at| f32x4(w, at),
        |w, at| f32::from_le_bytes([w[at], w[at + 1], w[at + 2], w[at + 3]]),
    )
}

#[inline]
#[target_feature(enable = "neon")]
fn float_f16<const DOT: bool, const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    floats::<2, R>(w, rows.map(|r| a.f32_row(r)), |w, at| f16x4(w, at), f16_at)
}

#[inline]
#[target_feature(enable = "neon")]
fn float_bf16<const DOT: bool, const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    floats::<2, R>(
        w,
        rows.map(|r| a.bf16.f32_row(r)),
        |w, at| bf16x4(w, at),
        |w, at| fm::bf16::weight(w, at / 2),
    )
}
