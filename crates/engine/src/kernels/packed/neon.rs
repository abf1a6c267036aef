//! The ARM64 kernels of the repacked layouts, for NEON with `dotprod` and, where the CPU
//! has it, `i8mm`. Each group is four quarters of 4 rows: 16 bytes of a chunk
//! (`[row l: 4 values]` for 4 rows) meet four activation values broadcast in one `sdot`
//! (signed weights times signed activations, four pairs summed into each row's 32-bit
//! lane). With `i8mm` (`MM`), two such vectors of consecutive values are zipped into two
//! 2 x 8 matrices (rows 0-1 and 2-3 of the quarter, 8 values each) and `smmla` multiplies
//! each by 8 values of two activation rows at once: the work of four `sdot` in two
//! instructions for a pair of activation rows (a lone last row takes the `sdot` path).
//! Nothing is summed in 16 bits, and every integer sum is exact, so both paths give the
//! same bits; each row's scale is applied per block (or per group of a super-block) in the
//! quarter's lanes.
//!
//! The cells are the x86 tiers' (`layout`): nibbles and fifth bits are unsigned values
//! below 64, which `sdot` and `smmla` take as they are; Q8_0's values are stored signed;
//! MXFP4's nibbles look their signed E2M1 values up with one table lookup (`tbl`).
//!
//! `#[target_feature]` functions, reached only through a `Packed` made for the `dotprod`
//! tier (so only on a CPU with it), and with `MM` only through one made for the `i8mm`
//! tier; every load is a bounds-checked slice of the cell.
#![allow(unsafe_code)]

use std::arch::aarch64::*;

use super::layout::{MXFP4_VALUES, q4k, q5k, q6k};
use super::{GROUP, four, pair};
use crate::acts::Acts;
use crate::format::{QK, QK_K};
use crate::simd::neon::{f16x4, load16u, sdot, smmla};

/// Rows per quarter (one 32-bit lane each).
const QUARTER: usize = 4;

/// `acc + w · x` per row of a quarter: `w` holds 4 values of 4 rows, `x` 4 activation
/// values (as one little-endian i32) broadcast.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn dot4(acc: int32x4_t, w: uint8x16_t, x: i32) -> int32x4_t {
    sdot(acc, vreinterpretq_s8_u8(w), vreinterpretq_s8_s32(vdupq_n_s32(x)))
}

/// Eight consecutive values of a quarter's rows: `lo` holds values `at..at + 4` of its 4
/// rows (`[row l: 4 values]`), `hi` values `at + 4..at + 8`, `at` the activation offset.
type Unit = (uint8x16_t, uint8x16_t, usize);

/// `acc[r]` plus, per row of the quarter, its dot product with activation row `xq[r]` over
/// the `N` units. Without `MM` two `sdot` per unit and row; with `MM` (only on a CPU with
/// `i8mm`) two `smmla` per unit and pair of rows, unzipped into the rows' lanes at the end.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn dots<const R: usize, const N: usize, const MM: bool>(
    mut acc: [int32x4_t; R],
    units: [Unit; N],
    xq: [&[i8]; R],
) -> [int32x4_t; R] {
    let pairs = if MM { R / 2 } else { 0 };
    for p in 0..pairs {
        let (mut top, mut bottom) = (vdupq_n_s32(0), vdupq_n_s32(0));
        for &(lo, hi, at) in &units {
            let (lo, hi) = (vreinterpretq_u32_u8(lo), vreinterpretq_u32_u8(hi));
            // Rows 0 and 1 of the quarter, 8 values each; then rows 2 and 3.
            let a01 = vreinterpretq_s8_u32(vzip1q_u32(lo, hi));
            let a23 = vreinterpretq_s8_u32(vzip2q_u32(lo, hi));
            let (x0, x1) = (&xq[2 * p][at..at + 8], &xq[2 * p + 1][at..at + 8]);
            // SAFETY: `x0` and `x1` hold the 8 values each loads (bounds-checked above).
            let b = unsafe { vcombine_s8(vld1_s8(x0.as_ptr()), vld1_s8(x1.as_ptr())) };
            // SAFETY: `MM` is true only in kernels reached through a `Packed` made for the
            // i8mm tier, which exists only on a CPU with it.
            unsafe {
                top = smmla(top, a01, b);
                bottom = smmla(bottom, a23, b);
            }
        }
        // Lanes [w0 x0, w0 x1, w1 x0, w1 x1] and [w2 x0, w2 x1, w3 x0, w3 x1].
        acc[2 * p] = vaddq_s32(acc[2 * p], vuzp1q_s32(top, bottom));
        acc[2 * p + 1] = vaddq_s32(acc[2 * p + 1], vuzp2q_s32(top, bottom));
    }
    for r in 2 * pairs..R {
        for &(lo, hi, at) in &units {
            acc[r] = dot4(acc[r], lo, four(xq[r], at));
            acc[r] = dot4(acc[r], hi, four(xq[r], at + 4));
        }
    }
    acc
}

/// Bit `k` of every byte of `hb`, moved to bit 4 (a fifth bit to or into a nibble).
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn fifth(hb: uint8x16_t, k: usize) -> uint8x16_t {
    let bit = vandq_u8(vshlq_u8(hb, vdupq_n_s8(-(k as i8))), vdupq_n_u8(1));
    vshlq_n_u8::<4>(bit)
}

/// Chunk `c`'s values from its 16 bytes `v`: the low nibbles and the high ones, with
/// `HIGH` each or-ed with its fifth bit from `hb` (bits `2 c` and `2 c + 1`).
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn nibbles<const HIGH: bool>(v: uint8x16_t, hb: uint8x16_t, c: usize) -> (uint8x16_t, uint8x16_t) {
    let (lo, hi) = (vandq_u8(v, vdupq_n_u8(0x0F)), vshrq_n_u8::<4>(v));
    if HIGH {
        (vorrq_u8(lo, fifth(hb, 2 * c)), vorrq_u8(hi, fifth(hb, 2 * c + 1)))
    } else {
        (lo, hi)
    }
}

/// Four unsigned bytes at `b[at..at + 4]` widened to i32 lanes.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn widen_u8(b: &[u8], at: usize) -> int32x4_t {
    let v: [u8; 4] = b[at..at + 4].try_into().expect("4 bytes");
    let w = vmovl_u8(vcreate_u8(u64::from(u32::from_le_bytes(v))));
    vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(w)))
}

/// Four signed bytes at `b[at..at + 4]` widened to i32 lanes.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn widen_i8(b: &[u8], at: usize) -> int32x4_t {
    let v: [u8; 4] = b[at..at + 4].try_into().expect("4 bytes");
    let w = vmovl_s8(vcreate_s8(u64::from(u32::from_le_bytes(v))));
    vmovl_s16(vget_low_s16(w))
}

/// The 16 rows' f16 scales at `cell[at..at + 32]`, a quarter per register.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn scales16(cell: &[u8], at: usize) -> [float32x4_t; 4] {
    std::array::from_fn(|q| f16x4(cell, at + 8 * q))
}

/// The results: quarter `q` of `acc[r]` into `out[r][4 q..4 q + 4]`.
#[inline]
#[target_feature(enable = "neon,dotprod")]
fn store<const R: usize>(acc: [[float32x4_t; 4]; R]) -> [[f32; GROUP]; R] {
    let mut out = [[0f32; GROUP]; R];
    for r in 0..R {
        for (q, v) in acc[r].iter().enumerate() {
            let dst = &mut out[r][QUARTER * q..QUARTER * q + QUARTER];
            // SAFETY: `dst` has room for the 4 floats stored.
            unsafe { vst1q_f32(dst.as_mut_ptr(), *v) };
        }
    }
    out
}

/// Q4_0 and, with `MIN`, Q4_1; with `HIGH` Q5_0 and Q5_1 (a fifth bit per value from the
/// 64 bytes after the nibbles). A chunk per [`dots`] unit; the offset (8 or 16) removed
/// through the activation block's integer sum.
#[target_feature(enable = "neon,dotprod")]
pub(super) fn q4<const R: usize, const MIN: bool, const HIGH: bool, const MM: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let heads = 32 * (1 + usize::from(MIN));
    let cb = heads + 256 + if HIGH { 64 } else { 0 };
    let off = match (MIN, HIGH) {
        (true, _) => None,
        (false, false) => Some(0),
        (false, true) => Some(1),
    };
    let x = rows.map(|r| a.q8.row(r));
    let m4 = vdupq_n_u8(0x0F);
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    for b in 0..blocks {
        let cell = &p[b * cb..(b + 1) * cb];
        let dw = scales16(cell, 0);
        let mw = if MIN { scales16(cell, 32) } else { [vdupq_n_f32(0.0); 4] };
        let xq = x.map(|x| &x.qs[b * QK..(b + 1) * QK]);
        for q in 0..4 {
            let hb = if HIGH { load16u(cell, heads + 256 + 16 * q) } else { m4 };
            let units = std::array::from_fn(|c| {
                let (lo, hi) = nibbles::<HIGH>(load16u(cell, heads + 64 * c + 16 * q), hb, c);
                (lo, hi, 8 * c)
            });
            let isum = dots::<R, 4, MM>([vdupq_n_s32(0); R], units, xq);
            for r in 0..R {
                let mut s = isum[r];
                if let Some(k) = off {
                    s = vaddq_s32(s, vdupq_n_s32(x[r].off[k][b]));
                }
                let scale = vmulq_n_f32(dw[q], x[r].d[b]);
                acc[r][q] = vfmaq_f32(acc[r][q], vcvtq_f32_s32(s), scale);
                if MIN {
                    acc[r][q] = vfmaq_n_f32(acc[r][q], mw[q], x[r].s[b]);
                }
            }
        }
    }
    store(acc)
}

/// Q8_0 (signed values, stored as they are): two chunks per [`dots`] unit.
#[target_feature(enable = "neon,dotprod")]
pub(super) fn q8_0<const R: usize, const MM: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = 32 + 512;
    let x = rows.map(|r| a.q8.row(r));
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    for b in 0..blocks {
        let cell = &p[b * cb..(b + 1) * cb];
        let dw = scales16(cell, 0);
        let xq = x.map(|x| &x.qs[b * QK..(b + 1) * QK]);
        for q in 0..4 {
            let units = std::array::from_fn(|k| {
                let at = 32 + 128 * k + 16 * q;
                (load16u(cell, at), load16u(cell, at + 64), 8 * k)
            });
            let isum = dots::<R, 4, MM>([vdupq_n_s32(0); R], units, xq);
            for r in 0..R {
                let scale = vmulq_n_f32(dw[q], x[r].d[b]);
                acc[r][q] = vfmaq_f32(acc[r][q], vcvtq_f32_s32(isum[r]), scale);
            }
        }
    }
    store(acc)
}

/// Q4_K and, with `HIGH`, Q5_K: per 32-value group, four [`dots`] units per quarter,
/// times the rows' 6-bit scales; the mins against the activations' per-32 sums in pairs;
/// `d` and `dmin` once per super-block.
#[target_feature(enable = "neon,dotprod")]
pub(super) fn q4_k<const R: usize, const HIGH: bool, const MM: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = if HIGH { q5k::BYTES } else { q4k::BYTES };
    let x = rows.map(|r| a.q8k.row(r));
    let m4 = vdupq_n_u8(0x0F);
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    for b in 0..blocks {
        let cell = &p[b * cb..(b + 1) * cb];
        let (d, dmin) = (scales16(cell, q4k::D), scales16(cell, q4k::DMIN));
        let xq = x.map(|x| &x.qs[b * QK_K..(b + 1) * QK_K]);
        for q in 0..4 {
            let mut sumi = [vdupq_n_s32(0); R];
            for j in 0..8 {
                let sc = widen_u8(cell, q4k::SCALES + 16 * j + QUARTER * q);
                let hb = if HIGH { load16u(cell, q5k::HIGHS + 64 * j + 16 * q) } else { m4 };
                let units = std::array::from_fn(|c| {
                    let v = load16u(cell, q4k::VALUES + 256 * j + 64 * c + 16 * q);
                    let (lo, hi) = nibbles::<HIGH>(v, hb, c);
                    (lo, hi, 32 * j + 8 * c)
                });
                let t = dots::<R, 4, MM>([vdupq_n_s32(0); R], units, xq);
                for r in 0..R {
                    sumi[r] = vmlaq_s32(sumi[r], t[r], sc);
                }
            }
            // Mins 2 k and 2 k + 1 of the quarter's rows, as i16 pairs, against the
            // activations' sums of groups 2 k and 2 k + 1.
            let mins: [int16x8_t; 4] = std::array::from_fn(|k| {
                let at = q4k::MINS + 32 * k + 2 * QUARTER * q;
                let v: [u8; 8] = cell[at..at + 8].try_into().expect("8 bytes");
                vreinterpretq_s16_u16(vmovl_u8(vcreate_u8(u64::from_le_bytes(v))))
            });
            for r in 0..R {
                let mut m = vdupq_n_s32(0);
                for (k, mins) in mins.iter().enumerate() {
                    let s = vreinterpretq_s16_s32(vdupq_n_s32(pair(x[r].sums32, 8 * b + 2 * k)));
                    let lo = vmull_s16(vget_low_s16(*mins), vget_low_s16(s));
                    let hi = vmull_high_s16(*mins, s);
                    m = vaddq_s32(m, vpaddq_s32(lo, hi));
                }
                let (sd, sm) = (vmulq_n_f32(d[q], x[r].d[b]), vmulq_n_f32(dmin[q], x[r].d[b]));
                acc[r][q] = vfmaq_f32(acc[r][q], vcvtq_f32_s32(sumi[r]), sd);
                acc[r][q] = vfmsq_f32(acc[r][q], vcvtq_f32_s32(m), sm);
            }
        }
    }
    store(acc)
}

/// Q6_K: per 16-value group, the 6-bit values rebuilt from nibbles and high bit pairs,
/// two [`dots`] units per quarter, less 32 times the activations' per-16 sum, times the
/// rows' signed scales; `d` once per super-block.
#[target_feature(enable = "neon,dotprod")]
pub(super) fn q6_k<const R: usize, const MM: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let x = rows.map(|r| a.q8k.row(r));
    let (m4, m2) = (vdupq_n_u8(0x0F), vdupq_n_u8(3));
    let high = |bits: uint8x16_t| vshlq_n_u8::<4>(vandq_u8(bits, m2));
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    for b in 0..blocks {
        let cell = &p[b * q6k::BYTES..(b + 1) * q6k::BYTES];
        let d = scales16(cell, q6k::D);
        let xq = x.map(|x| &x.qs[b * QK_K..(b + 1) * QK_K]);
        for q in 0..4 {
            let mut sumi = [vdupq_n_s32(0); R];
            for g in 0..16 {
                let sc = widen_i8(cell, q6k::SCALES + 16 * g + QUARTER * q);
                let base = q6k::VALUES + q6k::GROUP_BYTES * g + 16 * q;
                let (q0, q1, hb) =
                    (load16u(cell, base), load16u(cell, base + 64), load16u(cell, base + 128));
                let v = [
                    vorrq_u8(vandq_u8(q0, m4), high(hb)),
                    vorrq_u8(vshrq_n_u8::<4>(q0), high(vshrq_n_u8::<2>(hb))),
                    vorrq_u8(vandq_u8(q1, m4), high(vshrq_n_u8::<4>(hb))),
                    vorrq_u8(vshrq_n_u8::<4>(q1), high(vshrq_n_u8::<6>(hb))),
                ];
                let init =
                    std::array::from_fn(|r| vdupq_n_s32(-32 * i32::from(x[r].bsums[16 * b + g])));
                let units = [(v[0], v[1], 16 * g), (v[2], v[3], 16 * g + 8)];
                let t = dots::<R, 2, MM>(init, units, xq);
                for r in 0..R {
                    sumi[r] = vmlaq_s32(sumi[r], t[r], sc);
                }
            }
            for r in 0..R {
                let sd = vmulq_n_f32(d[q], x[r].d[b]);
                acc[r][q] = vfmaq_f32(acc[r][q], vcvtq_f32_s32(sumi[r]), sd);
            }
        }
    }
    store(acc)
}

/// MXFP4: the nibbles look their signed values up with one `tbl`, a chunk per [`dots`]
/// unit; each row's E8M0 half scale and the activations' scale once per block.
#[target_feature(enable = "neon,dotprod")]
pub(super) fn mxfp4<const R: usize, const MM: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = MXFP4_VALUES + 256;
    let x = rows.map(|r| a.q8.row(r));
    let table = load16u(&crate::formats::mxfp4::VALUES.map(|v| v as u8), 0);
    let m4 = vdupq_n_u8(0x0F);
    let mut acc = [[vdupq_n_f32(0.0); 4]; R];
    for b in 0..blocks {
        let cell = &p[b * cb..(b + 1) * cb];
        let xq = x.map(|x| &x.qs[b * QK..(b + 1) * QK]);
        for q in 0..4 {
            let e: [f32; 4] =
                std::array::from_fn(|l| crate::formats::mxfp4::half_scale(cell[QUARTER * q + l]));
            // SAFETY: `e` holds the 4 floats loaded.
            let dw = unsafe { vld1q_f32(e.as_ptr()) };
            let units = std::array::from_fn(|c| {
                let v = load16u(cell, MXFP4_VALUES + 64 * c + 16 * q);
                let lo = vqtbl1q_u8(table, vandq_u8(v, m4));
                (lo, vqtbl1q_u8(table, vshrq_n_u8::<4>(v)), 8 * c)
            });
            let isum = dots::<R, 4, MM>([vdupq_n_s32(0); R], units, xq);
            for r in 0..R {
                let scale = vmulq_n_f32(dw, x[r].d[b]);
                acc[r][q] = vfmaq_f32(acc[r][q], vcvtq_f32_s32(isum[r]), scale);
            }
        }
    }
    store(acc)
}
