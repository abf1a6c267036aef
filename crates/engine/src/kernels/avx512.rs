//! AVX-512 kernels with VNNI (`vpdpbusd`): Q4_0, Q4_1 and Q8_0 two blocks (64 values) per
//! instruction, an odd last block through the 256-bit form. The other formats use the
//! AVX2 kernels on these CPUs.
//!
//! Signed weights meet `vpdpbusd`'s unsigned operand through an offset that is removed
//! exactly in the integer lanes (`sum((w + c) * a) - sum(c * a)`), so the integer part of
//! every block is exact, as in the reference.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::{Acts, Kernels};
use crate::quant::{QK, WeightFormat};
use crate::simd::avx2::{f16_at, hsum, load128, load256, prefetch};
use crate::simd::avx512::*;

/// [`Kernels`] from a tile function `$tile::<M, R>(w, row_bytes, a, rows)`, which returns
/// `[[f32; R]; M]` for weight rows `w[m * row_bytes..]`; only for a CPU with the
/// features of this module.
macro_rules! tiled_kernels {
    ($tile:ident) => {{
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            let mut i = 0;
            while i < n {
                let m = (n - i).min(TILE);
                // The next tile's rows (past `n` they are only prefetched).
                let ahead = ((i + TILE) * rb).min(w.len())..((i + 2 * TILE) * rb).min(w.len());
                prefetch(&w[ahead]);
                let wi = &w[i * rb..];
                macro_rules! put {
                    ($m:literal) => {{
                        let v = $tile::<$m, R>(wi, rb, a, rows);
                        for (k, v) in v.iter().enumerate() {
                            out[(i + k) * stride..(i + k) * stride + R].copy_from_slice(v);
                        }
                    }};
                }
                match m {
                    4 => put!(4),
                    3 => put!(3),
                    2 => put!(2),
                    _ => put!(1),
                }
                i += m;
            }
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn one<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
            $tile::<1, R>(w, w.len(), a, rows)[0]
        }
        super::simd_widths!(one, many)
    }};
}

#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn q4_1<const M: usize, const R: usize>(
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
            let (q0, q1) =
                unsafe { (load128(w.as_ptr().add(o + 4)), load128(w.as_ptr().add(o + BB + 4))) };
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
                acc[m][r] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(dp), _mm512_mul_ps(dw[m], da), acc[m][r]);
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
                tail[r] =
                    hsum(_mm256_mul_ps(_mm256_set1_ps(d * x[r].ds[2 * b]), _mm256_cvtepi32_ps(dp)))
                        + mn * x[r].ds[2 * b + 1];
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

/// Q4_0 and Q8_0: symmetric blocks, one f16 scale at the block's start; `$values!(w, o)`
/// gives the 64 unsigned bytes of the two blocks at byte `o` and `$one!(w, o)` the 32 of
/// the block at `o`, each offset by a constant c (so `w = byte - c`), and `$neg` names the
/// activations' precomputed `-c * sum` of each 4 values.
macro_rules! symmetric {
    ($name:ident, $bb:expr, $neg:ident, $values:ident, $one:ident) => {
        #[inline]
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        fn $name<const M: usize, const R: usize>(
            w: &[u8],
            rb: usize,
            a: &Acts,
            rows: [usize; R],
        ) -> [[f32; R]; M] {
            const BB: usize = $bb;
            let nb = a.cols / QK;
            assert!(tile_fits(w, M, rb, nb, BB));
            let x = rows.map(|r| a.q8.row(r));
            assert!(x.iter().all(|x| {
                x.qs.len() >= nb * QK
                    && x.ds.len() >= 2 * nb
                    && x.dv.len() >= 8 * nb
                    && x.$neg.len() >= 8 * nb
            }));
            let mut acc = [[_mm512_setzero_ps(); R]; M];
            let mut b = 0;
            while b + 2 <= nb {
                let mut v = [_mm512_setzero_si512(); M];
                let mut dw = [_mm512_setzero_ps(); M];
                for m in 0..M {
                    let o = m * rb + b * BB;
                    v[m] = $values!(w, o, BB);
                    // [d0, 0, d1, 0], spread to [d0 x 8, d1 x 8]
                    let dd = _mm_cvtph_ps(_mm_set_epi32(0, 0, u16_at(w, o + BB), u16_at(w, o)));
                    dw[m] = spread::<2>(dd);
                }
                for r in 0..R {
                    // SAFETY: values 32 b..32 b + 64, spread scales and offsets
                    // 8 b..8 b + 16 lie inside the row (checked above).
                    let (y, da, neg) = unsafe {
                        (
                            load512(x[r].qs, b * QK),
                            _mm512_loadu_ps(x[r].dv.as_ptr().add(8 * b)),
                            _mm512_loadu_si512(x[r].$neg.as_ptr().add(8 * b).cast()),
                        )
                    };
                    for m in 0..M {
                        // sum((w + c) a) - c sum(a), exactly, in one instruction.
                        let dp = _mm512_dpbusd_epi32(neg, v[m], y);
                        acc[m][r] = _mm512_fmadd_ps(
                            _mm512_cvtepi32_ps(dp),
                            _mm512_mul_ps(dw[m], da),
                            acc[m][r],
                        );
                    }
                }
                b += 2;
            }
            let mut out = [[0f32; R]; M];
            for m in 0..M {
                let mut tail = [0f32; R];
                if b < nb {
                    let o = m * rb + b * BB;
                    let d = f16_at(w, o);
                    let v = $one!(w, o);
                    for r in 0..R {
                        // SAFETY: values 32 b..32 b + 32 and offsets 8 b..8 b + 8 lie inside
                        // the row (checked above).
                        let (y, neg) = unsafe {
                            (
                                load256(x[r].qs.as_ptr().add(b * QK).cast()),
                                _mm256_loadu_si256(x[r].$neg.as_ptr().add(8 * b).cast()),
                            )
                        };
                        let dp = _mm256_dpbusd_epi32(neg, v, y);
                        tail[r] = hsum(_mm256_mul_ps(
                            _mm256_set1_ps(d * x[r].ds[2 * b]),
                            _mm256_cvtepi32_ps(dp),
                        ));
                    }
                }
                for r in 0..R {
                    out[m][r] = hsum512(acc[m][r]) + tail[r];
                }
            }
            out
        }
    };
}

macro_rules! q4_0_pair {
    ($w:ident, $o:expr, $bb:expr) => {{
        // SAFETY: the two blocks at $o lie inside w (checked at the kernel's entry).
        let (q0, q1) =
            unsafe { (load128($w.as_ptr().add($o + 2)), load128($w.as_ptr().add($o + $bb + 2))) };
        nibbles2(q0, q1)
    }};
}

macro_rules! q4_0_one {
    ($w:ident, $o:expr) => {{
        // SAFETY: the block at $o lies inside w (checked at the kernel's entry).
        nibbles1(unsafe { load128($w.as_ptr().add($o + 2)) })
    }};
}

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

macro_rules! q8_0_one {
    ($w:ident, $o:expr) => {{
        // SAFETY: the block at $o lies inside w (checked at the kernel's entry).
        let v = unsafe { load256($w.as_ptr().add($o + 2)) };
        _mm256_xor_si256(v, _mm256_set1_epi8(-128))
    }};
}

symmetric!(q4_0, 18, neg8, q4_0_pair, q4_0_one);
symmetric!(q8_0, 34, neg128, q8_0_pair, q8_0_one);

/// The AVX-512 kernels of `fmt`, if it has any.
pub(super) fn select(fmt: WeightFormat) -> Option<Kernels> {
    macro_rules! k {
        ($f:ident) => {
            Some(tiled_kernels!($f))
        };
    }
    match fmt {
        WeightFormat::Q4_0 => k!(q4_0),
        WeightFormat::Q4_1 => k!(q4_1),
        WeightFormat::Q8_0 => k!(q8_0),
        _ => None,
    }
}
