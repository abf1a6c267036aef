//! What the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) share: the decoded super-block, the
//! scalar reference dot product over decoded super-blocks, and the AVX2 step that adds a
//! pair of scaled 16-value groups.

use crate::acts::Acts;
use crate::format::QK_K;

/// One 256-element K-quant super-block decoded: integers and, per 16-element group,
/// `value = scale[g] * q - min[g]`.
#[derive(Debug, Clone, Copy)]
pub struct DecodedK {
    /// The integers.
    pub q: [i8; QK_K],
    /// Scale per 16 elements.
    pub scale: [f32; 16],
    /// Subtracted offset per 16 elements.
    pub min: [f32; 16],
}

/// The reference dot product of a row of super-blocks (each decoded by `decode(row, b)`)
/// with Q8_K activation rows.
pub(crate) fn dot_ref<const R: usize>(
    decode: impl Fn(&[u8], usize) -> DecodedK,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    let nb = a.cols / QK_K;
    let x = rows.map(|r| a.q8k.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let blk = decode(w, b);
        for r in 0..R {
            let qa = &x[r].qs[b * QK_K..(b + 1) * QK_K];
            let mut sum = 0f32;
            for g in 0..16 {
                let sumi: i32 = blk.q[16 * g..16 * g + 16]
                    .iter()
                    .zip(&qa[16 * g..16 * g + 16])
                    .map(|(&p, &q)| i32::from(p) * i32::from(q))
                    .sum();
                sum += blk.scale[g] * sumi as f32 - blk.min[g] * f32::from(x[r].bsums[b * 16 + g]);
            }
            acc[r] += x[r].d[b] * sum;
        }
    }
    acc
}

/// The AVX2 step the K-quant kernels share.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Q8KRow;
    use crate::simd::avx2::load256;

    /// Adds 32 unsigned weight values `v` (0..127) times activation values `at..at + 32` of
    /// each row to `sumi`, the first 16 products scaled by `sc.0`, the last 16 by `sc.1` (the
    /// K-quants' per-16 scales), in 32-bit integers.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn add_groups<const R: usize>(
        sumi: &mut [__m256i; R],
        v: __m256i,
        sc: (i16, i16),
        x: &[Q8KRow<'_>; R],
        at: usize,
    ) {
        let s = _mm256_set_m128i(_mm_set1_epi16(sc.1), _mm_set1_epi16(sc.0));
        for (sumi, x) in sumi.iter_mut().zip(x) {
            let y = &x.qs[at..at + 32];
            // SAFETY: `y` holds 32 values.
            let y = unsafe { load256(y.as_ptr().cast()) };
            *sumi = _mm256_add_epi32(*sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(v, y), s));
        }
    }
}
