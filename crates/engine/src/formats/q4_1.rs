//! Q4_1: blocks of 32 4-bit values with an f16 scale and min (`value = q * d + m`), 20
//! bytes: scale, min, then the nibbles as Q4_0 keeps them. Multiplies Q8 activation blocks
//! of 32 (the min meets each block's `d * sum(q)`).

use super::block32::{self, Decoded32};
use crate::acts::Acts;
use crate::format::{QK, f16_at};

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 20;

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    let x = &row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES];
    let mut q = [0i8; QK];
    let d = f16_at(x, 0);
    let m = f16_at(x, 2);
    for j in 0..16 {
        q[j] = (x[4 + j] & 0x0F) as i8;
        q[j + 16] = (x[4 + j] >> 4) as i8;
    }
    Decoded32 { q, d, m }
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
        assert!(w.len() >= nb * 20);
        let x = rows.map(|r| a.q8.row(r));
        assert!(x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.s.len() >= nb));
        let mut acc0 = [_mm256_setzero_ps(); R];
        let mut acc1 = [_mm256_setzero_ps(); R];
        let mut accm = [0f32; R];
        macro_rules! block {
            ($b:expr, $acc:ident) => {{
                let b = $b;
                let d = f16_at(w, b * 20);
                let m = f16_at(w, b * 20 + 2);
                // SAFETY: block b spans w[b * 20..b * 20 + 20], inside w (checked above).
                let v = nibbles(unsafe { load128(w.as_ptr().add(b * 20 + 4)) });
                for r in 0..R {
                    // SAFETY: the 32 bytes of block b lie inside the row (checked above).
                    let y = unsafe { load256(x[r].qs.as_ptr().add(b * QK).cast()) };
                    let s = _mm256_set1_ps(d * x[r].d[b]);
                    $acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(dot_u8_i8(v, y)), $acc[r]);
                    accm[r] += m * x[r].s[b];
                }
            }};
        }
        over_blocks!(nb, acc0, acc1, block);
        std::array::from_fn(|r| hsum(_mm256_add_ps(acc0[r], acc1[r])) + accm[r])
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
    use crate::simd::avx2::{f16_at, hsum, load128, load256};
    use crate::simd::avx512::*;

    /// The tile kernel.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn tile<const M: usize, const R: usize>(
        w: &[u8],
        rb: usize,
        a: &Acts,
        rows: [usize; R],
    ) -> [[f32; R]; M] {
        const BB: usize = 20;
        let nb = a.cols / QK;
        assert!(tile_fits(w, M, rb, nb, BB));
        let x = rows.map(|r| a.q8.row(r));
        assert!(x.iter().all(|x| {
            x.qs.len() >= nb * QK && x.ds.len() >= 2 * nb && x.dv.len() >= 8 * nb && x.s.len() >= nb
        }));
        let zero = _mm512_setzero_si512();
        let mut acc = [[_mm512_setzero_ps(); R]; M];
        let mut accm = [[_mm_setzero_ps(); R]; M];
        let mut b = 0;
        while b + 2 <= nb {
            let mut v = [zero; M];
            let mut dw = [_mm512_setzero_ps(); M];
            let mut mw = [_mm_setzero_ps(); M];
            for m in 0..M {
                let o = m * rb + b * BB;
                // SAFETY: blocks b and b + 1 of row m lie inside w (checked above).
                let (q0, q1) = unsafe {
                    (load128(w.as_ptr().add(o + 4)), load128(w.as_ptr().add(o + BB + 4)))
                };
                v[m] = nibbles2(q0, q1);
                // [d0, m0, d1, m1]
                let dm = _mm_cvtph_ps(_mm_set_epi32(0, 0, u32_at(w, o + BB), u32_at(w, o)));
                dw[m] = spread::<2>(dm);
                // [m0, m1, m0, m1]
                mw[m] = _mm_shuffle_ps::<0b11_01_11_01>(dm, dm);
            }
            for r in 0..R {
                // SAFETY: values 32 b..32 b + 64, spread scales 8 b..8 b + 16 and sums
                // b..b + 2 lie inside the row (checked above).
                let (y, da, sa) = unsafe {
                    (
                        load512(x[r].qs, b * QK),
                        _mm512_loadu_ps(x[r].dv.as_ptr().add(8 * b)),
                        _mm_castpd_ps(_mm_load_sd(x[r].s.as_ptr().add(b).cast())),
                    )
                };
                for m in 0..M {
                    let dp = _mm512_dpbusd_epi32(zero, v[m], y);
                    acc[m][r] = _mm512_fmadd_ps(
                        _mm512_cvtepi32_ps(dp),
                        _mm512_mul_ps(dw[m], da),
                        acc[m][r],
                    );
                    accm[m][r] = _mm_add_ps(accm[m][r], _mm_mul_ps(mw[m], sa));
                }
            }
            b += 2;
        }
        let mut out = [[0f32; R]; M];
        for m in 0..M {
            let mut tail = [0f32; R];
            if b < nb {
                let o = m * rb + b * BB;
                let (d, mn) = (f16_at(w, o), f16_at(w, o + 2));
                // SAFETY: block b of row m lies inside w (checked above).
                let v = nibbles1(unsafe { load128(w.as_ptr().add(o + 4)) });
                for r in 0..R {
                    // SAFETY: values 32 b..32 b + 32 lie inside the row (checked above).
                    let y = unsafe { load256(x[r].qs.as_ptr().add(b * QK).cast()) };
                    let dp = _mm256_dpbusd_epi32(_mm256_setzero_si256(), v, y);
                    tail[r] = hsum(_mm256_mul_ps(
                        _mm256_set1_ps(d * x[r].ds[2 * b]),
                        _mm256_cvtepi32_ps(dp),
                    )) + mn * x[r].ds[2 * b + 1];
                }
            }
            for r in 0..R {
                let mut s = [0f32; 4];
                // SAFETY: `s` has room for 4 floats.
                unsafe { _mm_storeu_ps(s.as_mut_ptr(), accm[m][r]) };
                out[m][r] = hsum512(acc[m][r]) + (s[0] + s[1]) + tail[r];
            }
        }
        out
    }
}
