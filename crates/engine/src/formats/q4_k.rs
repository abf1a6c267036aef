//! Q4_K: super-blocks of 256 4-bit values in eight groups of 32, each with a 6-bit scale
//! and min packed into 12 bytes under an f16 super-scale and super-min (144 bytes). Also
//! the decoding and AVX2 kernel body Q5_K shares (Q4_K's layout plus a fifth bit per
//! value). Multiplies Q8_K activation blocks of 256.

use super::kquant::{self, DecodedK};
use crate::acts::Acts;
use crate::format::{QK_K, f16_at};

/// Bytes per super-block.
pub(crate) const BLOCK_BYTES: usize = 144;

/// The 6-bit scale and min `j` (0..8) of Q4_K / Q5_K's 12 packed bytes.
#[inline(always)]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// The eight 6-bit scales and mins of Q4_K / Q5_K's 12 packed bytes, as the SIMD kernels
/// use them.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub fn scales_mins(s: &[u8]) -> ([i16; 8], [i32; 8]) {
    let mut sc = [0i16; 8];
    let mut mn = [0i32; 8];
    for (j, (sc, mn)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
        let (a, b) = scale_min_k4(j, s);
        (*sc, *mn) = (i16::from(a), i32::from(b));
    }
    (sc, mn)
}

/// Decodes one Q4_K super-block `x`, or with `Q5` one Q5_K super-block.
pub(crate) fn decode_q4_5<const Q5: bool>(x: &[u8]) -> DecodedK {
    let mut out = DecodedK { q: [0; QK_K], scale: [0.0; 16], min: [0.0; 16] };
    let d = f16_at(x, 0);
    let dmin = f16_at(x, 2);
    let scales = &x[4..16];
    let (qh, qs) = if Q5 { (&x[16..48], &x[48..176]) } else { (&x[0..0], &x[16..144]) };
    for j in 0..4 {
        for half in 0..2 {
            let (sc, m) = scale_min_k4(2 * j + half, scales);
            let sub = 2 * j + half;
            out.scale[2 * sub] = d * f32::from(sc);
            out.scale[2 * sub + 1] = d * f32::from(sc);
            out.min[2 * sub] = dmin * f32::from(m);
            out.min[2 * sub + 1] = dmin * f32::from(m);
            for l in 0..32 {
                let nib = if half == 0 { qs[32 * j + l] & 0xF } else { qs[32 * j + l] >> 4 };
                let hi = if Q5 { ((qh[l] >> sub) & 1) << 4 } else { 0 };
                out.q[64 * j + 32 * half + l] = (nib | hi) as i8;
            }
        }
    }
    out
}

/// Decodes super-block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> DecodedK {
    decode_q4_5::<false>(&row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES])
}

/// The scalar reference dot product with Q8_K activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    kquant::dot_ref(decode, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK_K;
    use crate::simd::avx2::*;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        dot_q4_5::<R, false>(w, a, rows)
    }

    /// The unsigned values of group pair `j` from its 32 packed bytes `q`: the low
    /// nibbles (group `2 j`) and the high ones (`2 j + 1`), with `Q5` each with its fifth
    /// bit from `qh` (bit `2 j`, then `2 j + 1`, of every byte).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn values<const Q5: bool>(q: __m256i, qh: __m256i, j: usize) -> (__m256i, __m256i) {
        let m4 = _mm256_set1_epi8(0x0F);
        let mut lo = _mm256_and_si256(q, m4);
        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
        if Q5 {
            // Bit 2 j (then 2 j + 1) of every qh byte, moved to bit 4. A 16-bit shift may
            // bring in a neighbour byte's bits; the mask keeps this byte's one bit.
            let one = _mm256_set1_epi8(1);
            let shift = |n: i32| _mm256_srl_epi16(qh, _mm_cvtsi32_si128(n));
            let h_lo = _mm256_and_si256(shift(2 * j as i32), one);
            let h_hi = _mm256_and_si256(shift(2 * j as i32 + 1), one);
            lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(h_lo));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h_hi));
        }
        (lo, hi)
    }

    /// Q4_K, and with `Q5` Q5_K: Q4_K's layout with a fifth bit per value in `qh` (bit `2 j`
    /// for the low nibbles of group pair `j`, bit `2 j + 1` for the high ones); values (0..15,
    /// or 0..31) meet the activations through `maddubs`, a 6-bit scale and min per 32 values.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot_q4_5<const R: usize, const Q5: bool>(
        w: &[u8],
        a: &Acts,
        rows: [usize; R],
    ) -> [f32; R] {
        let (bb, qs_at) = if Q5 { (176, 48) } else { (144, 16) };
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * bb);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
        let mut acc = [_mm256_setzero_ps(); R];
        let mut accm = [0f32; R];
        for b in 0..nb {
            let blk = &w[b * bb..(b + 1) * bb];
            let d = f16_at(blk, 0);
            let dmin = f16_at(blk, 2);
            let (sc, mn) = super::scales_mins(&blk[4..16]);
            let qh = if Q5 {
                // SAFETY: Q5_K's qh is bytes 16..48 of its 176-byte block (unused for Q4_K).
                unsafe { load256(blk.as_ptr().add(16)) }
            } else {
                _mm256_setzero_si256()
            };
            let mut sumi = [_mm256_setzero_si256(); R];
            for j in 0..4 {
                // SAFETY: qs[32 j..32 j + 32] lies inside the block (qs_at + 128 bytes).
                let q = unsafe { load256(blk.as_ptr().add(qs_at + 32 * j)) };
                let (lo, hi) = values::<Q5>(q, qh, j);
                let (s_lo, s_hi) = (_mm256_set1_epi16(sc[2 * j]), _mm256_set1_epi16(sc[2 * j + 1]));
                for r in 0..R {
                    let base = b * QK_K + 64 * j;
                    // SAFETY: 64 values of block b inside the row (checked above).
                    let (y0, y1) = unsafe {
                        let p = x[r].qs.as_ptr().add(base).cast::<u8>();
                        (load256(p), load256(p.add(32)))
                    };
                    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s_lo);
                    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s_hi);
                    sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(p0, p1));
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let mins: i32 =
                    (0..8).map(|j| mn[j] * (i32::from(bs[2 * j]) + i32::from(bs[2 * j + 1]))).sum();
                let da = x[r].d[b];
                acc[r] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                accm[r] += dmin * da * mins as f32;
            }
        }
        std::array::from_fn(|r| hsum(acc[r]) - accm[r])
    }
}

/// The AVX-512 kernel (512-bit `maddubs`, the per-32 scales through VNNI's `vpdpwssd`;
/// `#[target_feature]`: selected only on a CPU with these features). Q5_K shares it.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK_K;
    use crate::simd::avx2::{f16_at, load256};
    use crate::simd::avx512::{hsum512, load512};

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        dot_q4_5::<R, false>(w, a, rows)
    }

    /// Q4_K, and with `Q5` Q5_K: each pair of 32-value groups is one 512-bit vector of
    /// unsigned values (low nibbles then high nibbles, as the activations lie), multiplied
    /// by 64 activations with `maddubs` and scaled per group into 32-bit sums by
    /// `vpdpwssd`; mins through the activations' per-16 sums.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot_q4_5<const R: usize, const Q5: bool>(
        w: &[u8],
        a: &Acts,
        rows: [usize; R],
    ) -> [f32; R] {
        let (bb, qs_at) = if Q5 { (176, 48) } else { (144, 16) };
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * bb);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
        let mut acc = [_mm512_setzero_ps(); R];
        let mut accm = [0f32; R];
        for b in 0..nb {
            let blk = &w[b * bb..(b + 1) * bb];
            let d = f16_at(blk, 0);
            let dmin = f16_at(blk, 2);
            let (sc, mn) = super::scales_mins(&blk[4..16]);
            let qh = if Q5 {
                // SAFETY: Q5_K's qh is bytes 16..48 of its 176-byte block (unused for Q4_K).
                unsafe { load256(blk.as_ptr().add(16)) }
            } else {
                _mm256_setzero_si256()
            };
            let mut sumi = [_mm512_setzero_si512(); R];
            for j in 0..4 {
                // SAFETY: qs[32 j..32 j + 32] lies inside the block (qs_at + 128 bytes).
                let q = unsafe { load256(blk.as_ptr().add(qs_at + 32 * j)) };
                let (lo, hi) = super::avx2::values::<Q5>(q, qh, j);
                let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
                let s = _mm512_inserti64x4::<1>(
                    _mm512_castsi256_si512(_mm256_set1_epi16(sc[2 * j])),
                    _mm256_set1_epi16(sc[2 * j + 1]),
                );
                for r in 0..R {
                    // SAFETY: 64 values of block b inside the row (checked above).
                    let y = unsafe { load512(x[r].qs, b * QK_K + 64 * j) };
                    sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(v, y), s);
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let mins: i32 =
                    (0..8).map(|j| mn[j] * (i32::from(bs[2 * j]) + i32::from(bs[2 * j + 1]))).sum();
                let da = x[r].d[b];
                acc[r] =
                    _mm512_fmadd_ps(_mm512_set1_ps(d * da), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
                accm[r] += dmin * da * mins as f32;
            }
        }
        std::array::from_fn(|r| hsum512(acc[r]) - accm[r])
    }
}
