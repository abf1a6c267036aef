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

/// [`float_kernels`](crate::simd::tiles::float_kernels)'s tiles at 512 bits (16 lanes, so
/// two accumulators take 32 values a step), for weights that `$load(w, i)` widens 16 at a
/// time to f32 against the f32 activation rows `$row` (`|a, r|` of an [`Acts`](crate::acts::Acts)).
/// A pair's bits are the same at every width and tile, as there.
macro_rules! float_kernels512 {
    (|$a:ident, $r:ident| $row:expr, $width:expr, $load:expr, $scalar:expr) => {
        $crate::simd::tiles::float_kernels!(
            @tiles "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c", __m512, 16,
            _mm512_setzero_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_add_ps,
            $crate::simd::avx512::hsum512, |$a, $r| $row;
            $width, $load, $scalar
        );
    };
}

pub(crate) use float_kernels512;
