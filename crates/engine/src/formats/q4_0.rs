//! Q4_0: blocks of 32 4-bit values and one f16 scale (`value = (q - 8) * d`), 18 bytes:
//! the scale, then 16 bytes whose low nibbles are values 0..16 and high nibbles 16..32.
//! Multiplies Q8 activation blocks of 32.

use super::block32::{self, Decoded32};
use crate::acts::Acts;
use crate::format::{QK, f16_at};

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 18;

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut q = [0i8; QK];
    let d = f16_at(x, 0);
    for j in 0..16 {
        q[j] = (x[2 + j] & 0x0F) as i8 - 8;
        q[j + 16] = (x[2 + j] >> 4) as i8 - 8;
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
        assert!(w.len() >= nb * 18);
        let x = rows.map(|r| a.q8.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.s.len() >= nb));
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        let eight = _mm256_set1_epi8(8);
        macro_rules! block {
            ($b:expr, $acc:ident) => {{
                let b = $b;
                let d = f16_at(w, b * 18);
                // SAFETY: block b spans w[b * 18..b * 18 + 18], inside w (checked above).
                let v = nibbles(unsafe { load128(w.as_ptr().add(b * 18 + 2)) });
                for r in 0..R {
                    // SAFETY: the 32 bytes of block b lie inside the row (checked above).
                    let y = unsafe { load256(x[r].qs.as_ptr().add(b * QK).cast()) };
                    let p = _mm256_sub_epi16(
                        _mm256_maddubs_epi16(v, y),
                        _mm256_maddubs_epi16(eight, y),
                    );
                    let p = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
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
    use crate::simd::avx2::{f16_at, hsum, load128, load256};
    use crate::simd::avx512::*;

    /// The 64 nibbles of the two blocks at byte `o` (`$bb` apart), unsigned (`q = w + 8`).
    macro_rules! q4_0_pair {
        ($w:ident, $o:expr, $bb:expr) => {{
            // SAFETY: the two blocks at $o lie inside w (checked at the kernel's entry).
            let (q0, q1) = unsafe {
                (load128($w.as_ptr().add($o + 2)), load128($w.as_ptr().add($o + $bb + 2)))
            };
            nibbles2(q0, q1)
        }};
    }

    /// The 32 nibbles of the block at byte `o`, unsigned (`q = w + 8`).
    macro_rules! q4_0_one {
        ($w:ident, $o:expr) => {{
            // SAFETY: the block at $o lies inside w (checked at the kernel's entry).
            nibbles1(unsafe { load128($w.as_ptr().add($o + 2)) })
        }};
    }

    symmetric!(tile, 18, neg8, q4_0_pair, q4_0_one);
}
