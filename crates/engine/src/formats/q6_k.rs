//! Q6_K: super-blocks of 256 6-bit values (low 4 bits in `ql`, high 2 in `qh`), a signed
//! 8-bit scale per 16 values and an f16 super-scale (210 bytes; `value = (q - 32) * s`).
//! Multiplies Q8_K activation blocks of 256.

use super::kquant::{self, DecodedK};
use crate::acts::Acts;
use crate::format::{QK_K, f16_at};

/// Bytes per super-block.
pub(crate) const BLOCK_BYTES: usize = 210;

/// Decodes super-block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> DecodedK {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut out = DecodedK { q: [0; QK_K], scale: [0.0; 16], min: [0.0; 16] };
    let (ql, qh, sc) = (&x[0..128], &x[128..192], &x[192..208]);
    let d = f16_at(x, 208);
    for n in 0..2 {
        let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
        for l in 0..32 {
            let y = &mut out.q[128 * n..];
            y[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    for g in 0..16 {
        out.scale[g] = d * f32::from(sc[g] as i8);
    }
    out
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
    use crate::formats::kquant::avx2::add_groups;
    use crate::simd::avx2::*;

    /// The 6-bit values (0..63) of the four 32-value quarters of one half of a block, in
    /// order, from its low nibbles `ql0`, `ql1` and its high bit pairs `qh`.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn unpack(ql0: __m256i, ql1: __m256i, qh: __m256i) -> [__m256i; 4] {
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(0x03);
        [
            _mm256_or_si256(
                _mm256_and_si256(ql0, m4),
                _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
            ),
            _mm256_or_si256(
                _mm256_and_si256(ql1, m4),
                _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<2>(m2))),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                _mm256_and_si256(qh, _mm256_slli_epi16::<4>(m2)),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                _mm256_srli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<6>(m2))),
            ),
        ]
    }

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * 210);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
        let mut acc = [_mm256_setzero_ps(); R];
        let mut accm = [0f32; R];
        for b in 0..nb {
            let blk = &w[b * 210..(b + 1) * 210];
            let d = f16_at(blk, 208);
            let sc: [i16; 16] = std::array::from_fn(|g| i16::from(blk[192 + g] as i8));
            let mut sumi = [_mm256_setzero_si256(); R];
            for n in 0..2 {
                // SAFETY: ql[64 n..64 n + 64] and qh[32 n..32 n + 32] lie inside the block.
                let (ql0, ql1, qh) = unsafe {
                    let p = blk.as_ptr();
                    (
                        load256(p.add(64 * n)),
                        load256(p.add(64 * n + 32)),
                        load256(p.add(128 + 32 * n)),
                    )
                };
                let q = unpack(ql0, ql1, qh);
                for (k, q) in q.iter().enumerate() {
                    let g = 8 * n + 2 * k;
                    add_groups(&mut sumi, *q, (sc[g], sc[g + 1]), &x, b * QK_K + 128 * n + 32 * k);
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let off: i32 =
                    (0..16).map(|g| i32::from(sc[g]) * i32::from(bs[g])).sum::<i32>() * 32;
                let s = d * x[r].d[b];
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                accm[r] += s * off as f32;
            }
        }
        std::array::from_fn(|r| hsum(acc[r]) - accm[r])
    }
}

/// The AVX-512 kernel: two 32-value quarters (four 16-value groups) per 512-bit
/// `maddubs`, their scales through VNNI's `vpdpwssd` (`#[target_feature]`: selected only
/// on a CPU with these features).
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
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * 210);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
        let mut acc = [_mm512_setzero_ps(); R];
        let mut accm = [0f32; R];
        for b in 0..nb {
            let blk = &w[b * 210..(b + 1) * 210];
            let d = f16_at(blk, 208);
            let sc: [i16; 16] = std::array::from_fn(|g| i16::from(blk[192 + g] as i8));
            let mut sumi = [_mm512_setzero_si512(); R];
            for n in 0..2 {
                // SAFETY: ql[64 n..64 n + 64] and qh[32 n..32 n + 32] lie inside the block.
                let (ql0, ql1, qh) = unsafe {
                    let p = blk.as_ptr();
                    (
                        load256(p.add(64 * n)),
                        load256(p.add(64 * n + 32)),
                        load256(p.add(128 + 32 * n)),
                    )
                };
                let q = super::avx2::unpack(ql0, ql1, qh);
                for k in [0, 2] {
                    let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(q[k]), q[k + 1]);
                    let g = 8 * n + 2 * k;
                    // One scale per 8 products' pairs: groups g .. g + 3, 16 values each.
                    let s = _mm512_set_epi16(
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 3],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 2],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g + 1],
                        sc[g],
                        sc[g],
                        sc[g],
                        sc[g],
                        sc[g],
                        sc[g],
                        sc[g],
                        sc[g],
                    );
                    for r in 0..R {
                        // SAFETY: 64 values of block b inside the row (checked above).
                        let y = unsafe { load512(x[r].qs, b * QK_K + 128 * n + 32 * k) };
                        sumi[r] = _mm512_dpwssd_epi32(sumi[r], _mm512_maddubs_epi16(v, y), s);
                    }
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let off: i32 =
                    (0..16).map(|g| i32::from(sc[g]) * i32::from(bs[g])).sum::<i32>() * 32;
                let s = d * x[r].d[b];
                acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(s), _mm512_cvtepi32_ps(sumi[r]), acc[r]);
                accm[r] += s * off as f32;
            }
        }
        std::array::from_fn(|r| hsum512(acc[r]) - accm[r])
    }
}
