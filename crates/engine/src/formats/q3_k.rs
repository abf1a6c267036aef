//! Q3_K: super-blocks of 256 3-bit values (2 low bits in four planes, the third in a
//! 32-byte `hmask`, clear meaning -4), a signed 6-bit scale per 16 values packed into 12
//! bytes and an f16 super-scale (110 bytes). Multiplies Q8_K activation blocks of 256.

use super::kquant::{self, DecodedK};
use crate::acts::Acts;
use crate::format::{QK_K, f16_at};

/// Bytes per super-block.
pub(crate) const BLOCK_BYTES: usize = 110;

/// The 16 signed 6-bit group scales of a Q3_K super-block (its 12 packed scale bytes).
pub fn scales_q3k(sc: &[u8]) -> [i8; 16] {
    let mut aux = [0u32; 4];
    for i in 0..3 {
        aux[i] = u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    }
    let (k1, k2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
    let tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
    aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
    aux[0] = (aux[0] & k2) | ((tmp & k1) << 4);
    aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
    std::array::from_fn(|g| ((aux[g / 4] >> (8 * (g % 4))) as u8 as i8) - 32)
}

/// Decodes super-block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> DecodedK {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut out = DecodedK { q: [0; QK_K], scale: [0.0; 16], min: [0.0; 16] };
    let (hm, qs, sc) = (&x[0..32], &x[32..96], &x[96..108]);
    let d = f16_at(x, 108);
    for (g, s) in scales_q3k(sc).into_iter().enumerate() {
        out.scale[g] = d * f32::from(s);
    }
    for n in 0..2 {
        for j in 0..4 {
            let bit = 1u8 << (4 * n + j);
            for l in 0..32 {
                let low = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
                let high = if hm[l] & bit != 0 { 0 } else { 4 };
                out.q[128 * n + 32 * j + l] = low - high;
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

    /// Q3_K: 2 low bits in four planes, a third bit in `hmask` (set: +0, clear: -4), a signed
    /// 6-bit scale per 16 values. The values meet the activations as `v + 4` (0..7, unsigned
    /// for `maddubs`), and `4 * sum(a)` per group comes off with the scale.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK_K;
        assert!(w.len() >= nb * 110);
        let x = rows.map(|r| a.q8k.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K && x.bsums.len() >= nb * 16));
        let mut acc = [0f32; R];
        let (m2, one) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
        for b in 0..nb {
            let blk = &w[b * 110..(b + 1) * 110];
            let d = f16_at(blk, 108);
            let sc = super::scales_q3k(&blk[96..108]).map(i16::from);
            // SAFETY: hmask is bytes 0..32 of the block.
            let hm = unsafe { load256(blk.as_ptr()) };
            let mut sumi = [_mm256_setzero_si256(); R];
            for n in 0..2 {
                // SAFETY: qs[32 n..32 n + 32] is bytes 32 + 32 n.. of the block.
                let q = unsafe { load256(blk.as_ptr().add(32 + 32 * n)) };
                for j in 0..4 {
                    let low =
                        _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j as i32)), m2);
                    let bit = (4 * n + j) as i32;
                    let h = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(bit)), one);
                    let v = _mm256_or_si256(low, _mm256_slli_epi16::<2>(h));
                    let g = 8 * n + 2 * j;
                    add_groups(&mut sumi, v, (sc[g], sc[g + 1]), &x, b * QK_K + 128 * n + 32 * j);
                }
            }
            for r in 0..R {
                let bs = &x[r].bsums[b * 16..b * 16 + 16];
                let off: i32 =
                    (0..16).map(|g| i32::from(sc[g]) * i32::from(bs[g])).sum::<i32>() * 4;
                // The block's integer sum is exact (|t| < 2^24): no float cancellation between
                // the shifted product and its offset.
                let t = hsum_i32(sumi[r]) - off;
                acc[r] += x[r].d[b] * (d * t as f32);
            }
        }
        acc
    }
}
