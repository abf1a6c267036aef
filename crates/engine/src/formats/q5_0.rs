//! Q5_0: blocks of 32 5-bit values and one f16 scale (`value = (q - 16) * d`), 22 bytes:
//! the scale, 32 high bits, then the low nibbles as Q4_0 keeps them. Also the 5-bit
//! decoding and AVX2 kernel body Q5_1 shares (its blocks add a min). Multiplies Q8
//! activation blocks of 32.

use super::block32::{self, Decoded32};
use crate::acts::Acts;
use crate::format::{QK, f16_at};

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 22;

/// Decodes one Q5_0 block `x` (`min` false) or Q5_1 block (`min` true: `value = q d + m`).
pub(crate) fn decode5(x: &[u8], min: bool) -> Decoded32 {
    let mut q = [0i8; QK];
    let d = f16_at(x, 0);
    let (qh_at, qs_at, off) = if min { (4, 8, 0) } else { (2, 6, 16) };
    let m = if min { f16_at(x, 2) } else { 0.0 };
    let qh = u32::from_le_bytes([x[qh_at], x[qh_at + 1], x[qh_at + 2], x[qh_at + 3]]);
    for j in 0..16 {
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        q[j] = ((x[qs_at + j] & 0x0F) | h0) as i8 - off;
        q[j + 16] = ((x[qs_at + j] >> 4) | h1) as i8 - off;
    }
    Decoded32 { q, d, m }
}

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    decode5(&row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES], false)
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

    /// Q5_0 (`$min` false: value `(q - 16) d`) and Q5_1 (`$min` true: `q d + m`).
    macro_rules! q5 {
        ($name:ident, $bb:expr, $min:expr) => {
            #[inline]
            #[target_feature(enable = "avx2,fma,f16c")]
            pub(crate) fn $name<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
                const BB: usize = $bb;
                let (qh_at, qs_at) = if $min { (4, 8) } else { (2, 6) };
                let nb = a.cols / QK;
                assert!(w.len() >= nb * BB);
                let x = rows.map(|r| a.q8.row(r));
                assert!(
                    x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.s.len() >= nb)
                );
                let mut acc0 = [_mm256_setzero_ps(); R];
                let mut acc1 = [_mm256_setzero_ps(); R];
                let mut accm = [0f32; R];
                let sixteen = _mm256_set1_epi8(16);
                macro_rules! block {
                    ($b:expr, $acc:ident) => {{
                        let b = $b;
                        let at = b * BB;
                        let d = f16_at(w, at);
                        let m = if $min { f16_at(w, at + 2) } else { 0.0 };
                        let qh = u32::from_le_bytes([
                            w[at + qh_at],
                            w[at + qh_at + 1],
                            w[at + qh_at + 2],
                            w[at + qh_at + 3],
                        ]);
                        // SAFETY: block b spans w[at..at + BB], inside w (checked above).
                        let lo = nibbles(unsafe { load128(w.as_ptr().add(at + qs_at)) });
                        let v = _mm256_or_si256(lo, high_bits(qh));
                        for r in 0..R {
                            // SAFETY: the 32 bytes of block b lie inside the row (checked above).
                            let y = unsafe { load256(x[r].qs.as_ptr().add(b * QK).cast()) };
                            let p = if $min {
                                _mm256_maddubs_epi16(v, y)
                            } else {
                                _mm256_sub_epi16(
                                    _mm256_maddubs_epi16(v, y),
                                    _mm256_maddubs_epi16(sixteen, y),
                                )
                            };
                            let p = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
                            let s = _mm256_set1_ps(d * x[r].d[b]);
                            $acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), $acc[r]);
                            if $min {
                                accm[r] += m * x[r].s[b];
                            }
                        }
                    }};
                }
                over_blocks!(nb, acc0, acc1, block);
                std::array::from_fn(|r| hsum(_mm256_add_ps(acc0[r], acc1[r])) + accm[r])
            }
        };
    }
    pub(crate) use q5;

    q5!(dot, 22, false);
}

/// The AVX-512 VNNI tile kernel: `M` weight rows (`row_bytes` apart) times `R` activation
/// rows, two blocks per `vpdpbusd`, an odd last block through the 256-bit form; the fifth
/// bits come from `qh` through a byte mask (`#[target_feature]`: selected only on a CPU
/// with these features).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK;
    use crate::formats::block32::avx512::symmetric;
    use crate::simd::avx2::{f16_at, hsum, load128, load256};
    use crate::simd::avx512::*;

    /// The 64 5-bit values of the two blocks at byte `o` (`$bb` apart), unsigned
    /// (`q = w + 16`): nibbles in element order, bit `k` of the blocks' `qh` words as 16.
    macro_rules! q5_0_pair {
        ($w:ident, $o:expr, $bb:expr) => {{
            // SAFETY: the two blocks at $o lie inside w (checked at the kernel's entry).
            let (q0, q1) = unsafe {
                (load128($w.as_ptr().add($o + 6)), load128($w.as_ptr().add($o + $bb + 6)))
            };
            let high = (u32_at($w, $o + 2) as u32 as u64)
                | ((u32_at($w, $o + $bb + 2) as u32 as u64) << 32);
            _mm512_or_si512(nibbles2(q0, q1), _mm512_maskz_mov_epi8(high, _mm512_set1_epi8(16)))
        }};
    }

    /// The 32 5-bit values of the block at byte `o`, unsigned (`q = w + 16`).
    macro_rules! q5_0_one {
        ($w:ident, $o:expr) => {{
            // SAFETY: the block at $o lies inside w (checked at the kernel's entry).
            let q = nibbles1(unsafe { load128($w.as_ptr().add($o + 6)) });
            let high = u32_at($w, $o + 2) as u32;
            _mm256_or_si256(q, _mm256_maskz_mov_epi8(high, _mm256_set1_epi8(16)))
        }};
    }

    symmetric!(tile, 22, neg16, q5_0_pair, q5_0_one);
}
