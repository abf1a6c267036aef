//! MXFP4 (OCP microscaling FP4): blocks of 32 E2M1 values sharing one E8M0 scale, 17
//! bytes: the scale's exponent byte `e`, then 16 bytes whose low nibbles are values
//! 0..16 and high nibbles 16..32. A nibble indexes the E2M1 values doubled to integers
//! ([`VALUES`]: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives), and the scale is halved to
//! match: `value = VALUES[nibble] * 2^(e - 128)` ([`half_scale`], GGML's
//! `ggml_e8m0_to_fp32_half`). Multiplies Q8 activation blocks of 32.

use super::block32::{self, Decoded32};
use crate::acts::Acts;
use crate::format::QK;

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 17;

/// The E2M1 values a nibble encodes, doubled (GGML's `kvalues_mxfp4`).
pub(crate) const VALUES: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// Half the E8M0 scale `2^(e - 127)`, exactly (the two smallest are subnormal).
#[inline]
pub(crate) fn half_scale(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { u32::from(e - 1) << 23 };
    f32::from_bits(bits)
}

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut q = [0i8; QK];
    for j in 0..16 {
        q[j] = VALUES[usize::from(x[1 + j] & 0x0F)];
        q[j + 16] = VALUES[usize::from(x[1 + j] >> 4)];
    }
    Decoded32 { q, d: half_scale(x[0]), m: 0.0 }
}

/// The scalar reference dot product with Q8 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    block32::dot_ref(decode, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry): the nibbles look their
/// values up with one byte shuffle, then multiply as Q8_0's signed bytes do.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use super::{BLOCK_BYTES as BB, VALUES, half_scale};
    use crate::acts::Acts;
    use crate::format::QK;
    use crate::simd::avx2::*;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK;
        assert!(w.len() >= nb * BB);
        let x = rows.map(|r| a.q8.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb));
        // SAFETY: VALUES is 16 bytes.
        let table = unsafe { load128(VALUES.as_ptr().cast()) };
        let table = _mm256_set_m128i(table, table);
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        macro_rules! block {
            ($b:expr, $acc:ident) => {{
                let b = $b;
                let d = half_scale(w[b * BB]);
                // SAFETY: block b spans w[b * 17..b * 17 + 17], inside w (checked above).
                let packed = unsafe { load128(w.as_ptr().add(b * BB + 1)) };
                let q = _mm256_shuffle_epi8(table, nibbles(packed));
                let aq = _mm256_sign_epi8(q, q);
                for r in 0..R {
                    // SAFETY: the 32 bytes of block b lie inside the row (checked above).
                    let y = unsafe { load256(x[r].qs.as_ptr().add(b * QK).cast()) };
                    let p = dot_u8_i8(aq, _mm256_sign_epi8(y, q));
                    let s = _mm256_set1_ps(d * x[r].d[b]);
                    $acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), $acc[r]);
                }
            }};
        }
        over_blocks!(nb, acc0, acc1, block);
        std::array::from_fn(|r| hsum(_mm256_add_ps(acc0[r], acc1[r])))
    }
}

/// The AVX-512 VNNI kernel (`#[target_feature]`: selected only on a CPU with these
/// features): the nibbles look up their values plus 16 (unsigned), one `vpdpbusd` per
/// block starting from the activations' precomputed `-16 * sum`, which removes the offset
/// exactly.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use super::{BLOCK_BYTES as BB, VALUES, half_scale};
    use crate::acts::Acts;
    use crate::format::QK;
    use crate::simd::avx2::{hsum, load128, load256, nibbles, over_blocks};

    /// [`VALUES`] plus 16.
    const OFFSET: [u8; 16] = {
        let mut t = [0u8; 16];
        let mut i = 0;
        while i < 16 {
            t[i] = (VALUES[i] + 16) as u8;
            i += 1;
        }
        t
    };

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK;
        assert!(w.len() >= nb * BB);
        let x = rows.map(|r| a.q8.row(r));
        assert!(
            x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.neg16.len() >= 8 * nb)
        );
        // SAFETY: OFFSET is 16 bytes.
        let table = unsafe { load128(OFFSET.as_ptr().cast()) };
        let table = _mm256_set_m128i(table, table);
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        macro_rules! block {
            ($b:expr, $acc:ident) => {{
                let b = $b;
                let d = half_scale(w[b * BB]);
                // SAFETY: block b spans w[b * 17..b * 17 + 17], inside w (checked above).
                let packed = unsafe { load128(w.as_ptr().add(b * BB + 1)) };
                let u = _mm256_shuffle_epi8(table, nibbles(packed));
                for r in 0..R {
                    // SAFETY: the 32 values and 8 offsets of block b lie inside the row
                    // (checked above).
                    let (y, neg) = unsafe {
                        (
                            load256(x[r].qs.as_ptr().add(b * QK).cast()),
                            _mm256_loadu_si256(x[r].neg16.as_ptr().add(8 * b).cast()),
                        )
                    };
                    let p = _mm256_dpbusd_epi32(neg, u, y);
                    let s = _mm256_set1_ps(d * x[r].d[b]);
                    $acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), $acc[r]);
                }
            }};
        }
        over_blocks!(nb, acc0, acc1, block);
        std::array::from_fn(|r| hsum(_mm256_add_ps(acc0[r], acc1[r])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_half_scale_is_two_to_the_exponent_minus_128_even_where_it_is_subnormal() {
        for e in 0..=254u8 {
            assert_eq!(half_scale(e), 2f64.powi(i32::from(e) - 128) as f32, "e = {e}");
        }
    }
}
