//! What the formats with blocks of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) share: the decoded
//! block, the scalar reference dot product over decoded blocks, and the AVX-512 tile
//! kernel body of the symmetric ones (Q4_0, Q8_0).

use crate::acts::Acts;
use crate::format::QK;

/// One 32-element block decoded: integers and `value = d * q + m`.
#[derive(Debug, Clone, Copy)]
pub struct Decoded32 {
    /// The integers (signed for the symmetric formats).
    pub q: [i8; QK],
    /// Scale.
    pub d: f32,
    /// Offset (0 for the symmetric formats).
    pub m: f32,
}

/// The reference dot product of a row of 32-blocks (each decoded by `decode(row, b)`)
/// with Q8 activation rows: an integer dot product per block, one float multiply-add.
pub(crate) fn dot_ref<const R: usize>(
    decode: impl Fn(&[u8], usize) -> Decoded32,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    let nb = a.cols / QK;
    let x = rows.map(|r| a.q8.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let blk = decode(w, b);
        for r in 0..R {
            let qa = &x[r].qs[b * QK..(b + 1) * QK];
            let sumi: i32 = blk.q.iter().zip(qa).map(|(&p, &q)| i32::from(p) * i32::from(q)).sum();
            acc[r] += blk.d * x[r].d[b] * sumi as f32 + blk.m * x[r].s[b];
        }
    }
    acc
}

/// The AVX-512 tile body of the symmetric 32-block formats (a macro: each format expands
/// it with its own block size, value loads and activation offsets).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    /// Q4_0 and Q8_0: symmetric blocks, one f16 scale at the block's start; `$values!(w, o)`
    /// gives the 64 unsigned bytes of the two blocks at byte `o` and `$one!(w, o)` the 32 of
    /// the block at `o`, each offset by a constant c (so `w = byte - c`), and `$neg` names the
    /// activations' precomputed `-c * sum` of each 4 values.
    macro_rules! symmetric {
        ($name:ident, $bb:expr, $neg:ident, $values:ident, $one:ident) => {
            /// The dot products of `M` weight rows (`rb` bytes apart) with `R` activation
            /// rows.
            #[inline]
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
            pub(crate) fn $name<const M: usize, const R: usize>(
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
    pub(crate) use symmetric;
}
