//! AVX-512 (F/BW/VL with VNNI) helpers shared by the formats' 512-bit kernels: nibble
//! unpacking of block pairs, scale spreading, 512-bit loads and sums, tile bounds; and the
//! 512-bit rounding and magnitude of activation blocks used by activation quantization.
//!
//! Every `#[target_feature]` helper here is reached only from kernels compiled for (and
//! selected on) a CPU with these features, or behind a run-time check.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::avx2::hsum;

/// The nibbles of two 16-byte blocks as 64 values in element order: block 0's low and
/// high nibbles, then block 1's.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn nibbles2(q0: __m128i, q1: __m128i) -> __m512i {
    let m4 = _mm256_set1_epi8(0x0F);
    let q = _mm256_set_m128i(q1, q0);
    let lo = _mm256_and_si256(q, m4);
    let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
    let t = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
    // 128-bit lanes [lo0, lo1, hi0, hi1] -> [lo0, hi0, lo1, hi1].
    _mm512_shuffle_i64x2::<0xD8>(t, t)
}

/// The nibbles of one block as 32 values in element order.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn nibbles1(q: __m128i) -> __m256i {
    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), _mm256_set1_epi8(0x0F))
}

/// Lanes 0..8 get lane 0 of `p`, lanes 8..16 lane `HI` of `p`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn spread<const HI: i32>(p: __m128) -> __m512 {
    let idx = _mm512_set_epi32(HI, HI, HI, HI, HI, HI, HI, HI, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(p))
}

/// 64 activation bytes of row `qs` starting at value `at`.
///
/// # Safety
/// `qs[at..at + 64]` must exist.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) unsafe fn load512(qs: &[i8], at: usize) -> __m512i {
    // SAFETY: the caller guarantees 64 values from `at`.
    unsafe { _mm512_loadu_si512(qs.as_ptr().add(at).cast()) }
}

/// The little-endian 32 bits at `w[at..]`, as an i32.
#[inline]
pub(crate) fn u32_at(w: &[u8], at: usize) -> i32 {
    i32::from_le_bytes([w[at], w[at + 1], w[at + 2], w[at + 3]])
}

/// The little-endian 16 bits at `w[at..]`, as an i32.
#[inline]
pub(crate) fn u16_at(w: &[u8], at: usize) -> i32 {
    i32::from(u16::from_le_bytes([w[at], w[at + 1]]))
}

/// Weight rows per tile: each activation block loaded serves this many weight rows.
pub(crate) const TILE: usize = 4;

/// The sum of 16 lanes in a fixed order (halves, then [`hsum`]'s order).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(crate) fn hsum512(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi))
}

/// Checks a tile's bounds: `M` rows of `nb` blocks of `bb` bytes, `rb` apart.
#[inline]
pub(crate) fn tile_fits(w: &[u8], m: usize, rb: usize, nb: usize, bb: usize) -> bool {
    m >= 1 && nb * bb <= rb && (m - 1) * rb + nb * bb <= w.len()
}

/// The 512-bit dot products of a 16-bit float weight row (`$width` bytes a weight, 16
/// weights loaded as f32 by `$load(i)`) with `R` f32 activation rows: two accumulators a
/// row, a tail of fewer than 16 values in order through `scalar_weight`.
macro_rules! float_dot512 {
    ($w:ident, $a:ident, $rows:ident, $width:expr, $load:expr) => {{
        let n = $a.cols;
        assert!($w.len() >= n * $width);
        let x = $rows.map(|r| $a.f32_row(r));
        assert!(x.iter().all(|x| x.len() >= n));
        let mut acc = [[_mm512_setzero_ps(); R]; 2];
        let mut i = 0;
        while i + 32 <= n {
            for k in 0..2 {
                let wv = $load(i + 16 * k);
                for r in 0..R {
                    // SAFETY: 16 values inside the row (checked above).
                    let xv = unsafe { _mm512_loadu_ps(x[r].as_ptr().add(i + 16 * k)) };
                    acc[k][r] = _mm512_fmadd_ps(wv, xv, acc[k][r]);
                }
            }
            i += 32;
        }
        while i + 16 <= n {
            let wv = $load(i);
            for r in 0..R {
                // SAFETY: 16 values inside the row (checked above).
                let xv = unsafe { _mm512_loadu_ps(x[r].as_ptr().add(i)) };
                acc[0][r] = _mm512_fmadd_ps(wv, xv, acc[0][r]);
            }
            i += 16;
        }
        let tail = i;
        std::array::from_fn(|r| {
            let mut s = $crate::simd::avx512::hsum512(_mm512_add_ps(acc[0][r], acc[1][r]));
            for j in tail..n {
                s += scalar_weight($w, j) * x[r][j];
            }
            s
        })
    }};
}

pub(crate) use float_dot512;
