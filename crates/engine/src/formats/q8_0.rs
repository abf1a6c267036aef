//! Q8_0: blocks of 32 signed bytes and one f16 scale (`value = q * d`), 34 bytes.
//! Multiplies Q8 activation blocks of 32.

use super::block32::{self, Decoded32};
use crate::acts::Acts;
use crate::format::{QK, f16_at};

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 34;

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut q = [0i8; QK];
    let d = f16_at(x, 0);
    for j in 0..QK {
        q[j] = x[2 + j] as i8;
    }
    Decoded32 { q, d, m: 0.0 }
}

/// The scalar reference dot product with Q8 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    block32::dot_ref(decode, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK;
    use crate::simd::avx2::*;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        let nb = a.cols / QK;
        assert!(w.len() >= nb * 34);
        let x = rows.map(|r| a.q8.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.s.len() >= nb));
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        macro_rules! block {
            ($b:expr, $acc:ident) => {{
                let b = $b;
                let d = f16_at(w, b * 34);
                // SAFETY: block b spans w[b * 34..b * 34 + 34], inside w (checked above).
                let q = unsafe { load256(w.as_ptr().add(b * 34 + 2)) };
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

/// The AVX-512 VNNI tile kernel: `M` weight rows (`row_bytes` apart) times `R` activation
/// rows, two blocks per `vpdpbusd`, an odd last block through the 256-bit form
/// (`#[target_feature]`: selected only on a CPU with these features).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK;
    use crate::formats::block32::avx512::symmetric;
    use crate::simd::avx2::{f16_at, hsum, load256};
    use crate::simd::avx512::*;

    /// The 64 bytes of the two blocks at byte `o` (`$bb` apart), plus 128 (unsigned).
    macro_rules! q8_0_pair {
        ($w:ident, $o:expr, $bb:expr) => {{
            // SAFETY: the two blocks at $o lie inside w (checked at the kernel's entry).
            let v = unsafe {
                let p = $w.as_ptr().add($o + 2);
                _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load256(p)), load256(p.add($bb)))
            };
            // w + 128 as unsigned bytes.
            _mm512_xor_si512(v, _mm512_set1_epi8(-128))
        }};
    }

    /// The 32 bytes of the block at byte `o`, plus 128 (unsigned).
    macro_rules! q8_0_one {
        ($w:ident, $o:expr) => {{
            // SAFETY: the block at $o lies inside w (checked at the kernel's entry).
            let v = unsafe { load256($w.as_ptr().add($o + 2)) };
            _mm256_xor_si256(v, _mm256_set1_epi8(-128))
        }};
    }

    symmetric!(tile, 34, neg128, q8_0_pair, q8_0_one);
}
