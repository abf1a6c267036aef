//! Q2_K: super-blocks of 256 2-bit values in four planes per 32 bytes, a 4-bit scale and
//! min per 16 values, an f16 super-scale and super-min (84 bytes). Multiplies Q8_K
//! activation blocks of 256.

use super::kquant::{self, DecodedK};
use crate::acts::Acts;
use crate::format::{QK_K, f16_at};

/// Bytes per super-block.
pub(crate) const BLOCK_BYTES: usize = 84;

/// Decodes super-block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> DecodedK {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut out = DecodedK { q: [0; QK_K], scale: [0.0; 16], min: [0.0; 16] };
    let (scales, qs) = (&x[0..16], &x[16..80]);
    let d = f16_at(x, 80);
    let dmin = f16_at(x, 82);
    for g in 0..16 {
        out.scale[g] = d * f32::from(scales[g] & 0xF);
        out.min[g] = dmin * f32::from(scales[g] >> 4);
    }
    for n in 0..2 {
        for j in 0..4 {
            for l in 0..32 {
                out.q[128 * n + 32 * j + l] = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
            }
        }
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

    /// Q2_K: 2-bit values in four planes per 32 bytes, a 4-bit scale and min per 16 values.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * 84);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K && x.bsums.len() >= nb * 16));
        let mut acc = [_mm256_setzero_ps(); R];
        let mut accm = [0f32; R];
        let m2 = _mm256_set1_epi8(3);
        for b in 0..nb {
            let blk = &w[b * 84..(b + 1) * 84];
            let (d, dmin) = (f16_at(blk, 80), f16_at(blk, 82));
            let sc: [i16; 16] = std::array::from_fn(|g| i16::from(blk[g] & 0xF));
            let mut sumi = [_mm256_setzero_si256(); R];
            for n in 0..2 {
                // SAFETY: qs[32 n..32 n + 32] is bytes 16 + 32 n.. of the block.
                let q = unsafe { load256(blk.as_ptr().add(16 + 32 * n)) };
                for j in 0..4 {
                    // A 16-bit shift may bring in a neighbour byte's bits; the mask drops them.
                    let v =
                        _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j as i32)), m2);
                    let g = 8 * n + 2 * j;
                    add_groups(&mut sumi, v, (sc[g], sc[g + 1]), &x, b * QK_K + 128 * n + 32 * j);
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let mins: i32 = (0..16).map(|g| i32::from(blk[g] >> 4) * i32::from(bs[g])).sum();
                let da = x[r].d[b];
                acc[r] =
                    _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
                accm[r] += dmin * da * mins as f32;
            }
        }
        std::array::from_fn(|r| hsum(acc[r]) - accm[r])
    }
}
