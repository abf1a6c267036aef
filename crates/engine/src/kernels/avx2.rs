//! AVX2 + FMA + F16C kernels (256-bit): Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and every K-quant on 8-bit
//! activations with `maddubs` integer products, and F32 / F16 / BF16 on f32 activations.
//!
//! Every kernel is a safe `#[target_feature]` function; [`select`] is only reached when
//! the CPU has these features (see `kernels::select`), which is what each call's
//! `// SAFETY:` relies on. Raw loads read inside ranges checked at the kernel's entry.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::{Acts, Kernels};
use crate::quant::{Q8KRow, QK, QK_K, WeightFormat, scale_min_k4};
use crate::simd::avx2::*;

/// The AVX2 kernels of `fmt` (every format has them; `Option` as the other families').
pub(super) fn select(fmt: WeightFormat) -> Option<Kernels> {
    use WeightFormat::*;
    macro_rules! k {
        ($f:ident) => {
            Some(super::simd_kernels!($f, "avx2,fma,f16c"))
        };
    }
    match fmt {
        F32 => k!(f32_dot),
        F16 => k!(f16_dot),
        BF16 => k!(bf16_dot),
        Q4_0 => k!(q4_0),
        Q4_1 => k!(q4_1),
        Q8_0 => k!(q8_0),
        Q5_0 => k!(q5_0),
        Q5_1 => k!(q5_1),
        Q2K => k!(q2_k),
        Q3K => k!(q3_k),
        Q4K => k!(q4_k),
        Q5K => k!(q5_k),
        Q6K => k!(q6_k),
    }
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_0<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
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
                let p =
                    _mm256_sub_epi16(_mm256_maddubs_epi16(v, y), _mm256_maddubs_epi16(eight, y));
                let p = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
                let s = _mm256_set1_ps(d * x[r].d[b]);
                $acc[r] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(p), $acc[r]);
            }
        }};
    }
    over_blocks!(nb, acc0, acc1, block);
    std::array::from_fn(|r| hsum(_mm256_add_ps(acc0[r], acc1[r])))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_1<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
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

/// Q5_0 (`$min` false: value `(q - 16) d`) and Q5_1 (`$min` true: `q d + m`).
macro_rules! q5 {
    ($name:ident, $bb:expr, $min:expr) => {
        #[inline]
        #[target_feature(enable = "avx2,fma,f16c")]
        fn $name<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
            const BB: usize = $bb;
            let (qh_at, qs_at) = if $min { (4, 8) } else { (2, 6) };
            let nb = a.cols / QK;
            assert!(w.len() >= nb * BB);
            let x = rows.map(|r| a.q8.row(r));
            assert!(x.iter().all(|x| x.qs.len() >= nb * QK && x.d.len() >= nb && x.s.len() >= nb));
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

q5!(q5_0, 22, false);
q5!(q5_1, 24, true);

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q8_0<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
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

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_k<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    q4_5_k::<R, false>(w, a, rows)
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q5_k<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    q4_5_k::<R, true>(w, a, rows)
}

/// Q4_K, and with `Q5` Q5_K: Q4_K's layout with a fifth bit per value in `qh` (bit `2 j`
/// for the low nibbles of group pair `j`, bit `2 j + 1` for the high ones); values (0..15,
/// or 0..31) meet the activations through `maddubs`, a 6-bit scale and min per 32 values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q4_5_k<const R: usize, const Q5: bool>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    let (bb, qs_at) = if Q5 { (176, 48) } else { (144, 16) };
    let nb = a.cols / QK_K;
    assert!(w.len() >= nb * bb);
    let x = rows.map(|r| a.q8k.row(r));
    assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
    let mut acc = [_mm256_setzero_ps(); R];
    let mut accm = [0f32; R];
    let m4 = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    for b in 0..nb {
        let blk = &w[b * bb..(b + 1) * bb];
        let d = f16_at(blk, 0);
        let dmin = f16_at(blk, 2);
        let mut sc = [0i16; 8];
        let mut mn = [0i32; 8];
        for (j, (s, m)) in sc.iter_mut().zip(mn.iter_mut()).enumerate() {
            let (a, b) = scale_min_k4(j, &blk[4..16]);
            (*s, *m) = (i16::from(a), i32::from(b));
        }
        // SAFETY: Q5_K's qh is bytes 16..48 of its 176-byte block (unused for Q4_K).
        let qh = if Q5 { unsafe { load256(blk.as_ptr().add(16)) } } else { _mm256_setzero_si256() };
        let mut sumi = [_mm256_setzero_si256(); R];
        for j in 0..4 {
            // SAFETY: qs[32 j..32 j + 32] lies inside the block (qs_at + 128 bytes).
            let q = unsafe { load256(blk.as_ptr().add(qs_at + 32 * j)) };
            let mut lo = _mm256_and_si256(q, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            if Q5 {
                // Bit 2 j (then 2 j + 1) of every qh byte, moved to bit 4. A 16-bit shift
                // may bring in a neighbour byte's bits; the mask keeps this byte's one bit.
                let shift = |n: i32| _mm256_srl_epi16(qh, _mm_cvtsi32_si128(n));
                let h_lo = _mm256_and_si256(shift(2 * j as i32), one);
                let h_hi = _mm256_and_si256(shift(2 * j as i32 + 1), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16::<4>(h_lo));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16::<4>(h_hi));
            }
            let (s_lo, s_hi) = (_mm256_set1_epi16(sc[2 * j]), _mm256_set1_epi16(sc[2 * j + 1]));
            for r in 0..R {
                let base = b * QK_K + 64 * j;
                // SAFETY: 64 values of block b inside the row (checked above).
                let (y0, y1) = unsafe {
                    let p = x[r].qs.as_ptr().add(base).cast::<u8>();
                    (load256(p), load256(p.add(32)))
                };
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y0), s_lo);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y1), s_hi);
                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(p0, p1));
            }
        }
        for r in 0..R {
            let bs = &x[r].bsums[b * 16..b * 16 + 16];
            let mins: i32 =
                (0..8).map(|j| mn[j] * (i32::from(bs[2 * j]) + i32::from(bs[2 * j + 1]))).sum();
            let da = x[r].d[b];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            accm[r] += dmin * da * mins as f32;
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) - accm[r])
}

/// Adds 32 unsigned weight values `v` (0..127) times activation values `at..at + 32` of
/// each row to `sumi`, the first 16 products scaled by `sc.0`, the last 16 by `sc.1` (the
/// K-quants' per-16 scales), in 32-bit integers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn add_groups<const R: usize>(
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

/// Q2_K: 2-bit values in four planes per 32 bytes, a 4-bit scale and min per 16 values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q2_k<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
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
                let v = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * j as i32)), m2);
                let g = 8 * n + 2 * j;
                add_groups(&mut sumi, v, (sc[g], sc[g + 1]), &x, b * QK_K + 128 * n + 32 * j);
            }
        }
        for r in 0..R {
            let bs = &x[r].bsums[b * 16..b * 16 + 16];
            let mins: i32 = (0..16).map(|g| i32::from(blk[g] >> 4) * i32::from(bs[g])).sum();
            let da = x[r].d[b];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * da), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            accm[r] += dmin * da * mins as f32;
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) - accm[r])
}

/// Q3_K: 2 low bits in four planes, a third bit in `hmask` (set: +0, clear: -4), a signed
/// 6-bit scale per 16 values. The values meet the activations as `v + 4` (0..7, unsigned
/// for `maddubs`), and `4 * sum(a)` per group comes off with the scale.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q3_k<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    let nb = a.cols / QK_K;
    assert!(w.len() >= nb * 110);
    let x = rows.map(|r| a.q8k.row(r));
    assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K && x.bsums.len() >= nb * 16));
    let mut acc = [0f32; R];
    let (m2, one) = (_mm256_set1_epi8(3), _mm256_set1_epi8(1));
    for b in 0..nb {
        let blk = &w[b * 110..(b + 1) * 110];
        let d = f16_at(blk, 108);
        let sc = crate::quant::scales_q3k(&blk[96..108]).map(i16::from);
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
            let off: i32 = (0..16).map(|g| i32::from(sc[g]) * i32::from(bs[g])).sum::<i32>() * 4;
            // The block's integer sum is exact (|t| < 2^24): no float cancellation between
            // the shifted product and its offset.
            let t = hsum_i32(sumi[r]) - off;
            acc[r] += x[r].d[b] * (d * t as f32);
        }
    }
    acc
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn q6_k<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    let nb = a.cols / QK_K;
    assert!(w.len() >= nb * 210);
    let x = rows.map(|r| a.q8k.row(r));
    assert!(x.iter().all(|x| x.qs.len() >= nb * QK_K));
    let mut acc = [_mm256_setzero_ps(); R];
    let mut accm = [0f32; R];
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    for b in 0..nb {
        let blk = &w[b * 210..(b + 1) * 210];
        let d = f16_at(blk, 208);
        let sc: [i16; 16] = std::array::from_fn(|g| i16::from(blk[192 + g] as i8));
        let mut sumi = [_mm256_setzero_si256(); R];
        for n in 0..2 {
            // SAFETY: ql[64 n..64 n + 64] and qh[32 n..32 n + 32] lie inside the block.
            let (ql0, ql1, qh) = unsafe {
                let p = blk.as_ptr();
                (load256(p.add(64 * n)), load256(p.add(64 * n + 32)), load256(p.add(128 + 32 * n)))
            };
            let q = [
                _mm256_or_si256(
                    _mm256_and_si256(ql0, m4),
                    _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_slli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<2>(m2))),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                    _mm256_and_si256(qh, _mm256_slli_epi16::<4>(m2)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                    _mm256_srli_epi16::<2>(_mm256_and_si256(qh, _mm256_slli_epi16::<6>(m2))),
                ),
            ];
            for (k, q) in q.iter().enumerate() {
                let g = 8 * n + 2 * k;
                add_groups(&mut sumi, *q, (sc[g], sc[g + 1]), &x, b * QK_K + 128 * n + 32 * k);
            }
        }
        for r in 0..R {
            let bs = &x[r].bsums[b * 16..b * 16 + 16];
            let off: i32 = (0..16).map(|g| i32::from(sc[g]) * i32::from(bs[g])).sum::<i32>() * 32;
            let s = d * x[r].d[b];
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(s), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
            accm[r] += s * off as f32;
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) - accm[r])
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f32_dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    fn scalar_weight(w: &[u8], j: usize) -> f32 {
        f32::from_le_bytes([w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]])
    }
    // SAFETY: 8 weights at element i lie inside w (its length is checked first).
    float_dot!(w, a, rows, 4, |i: usize| unsafe { _mm256_loadu_ps(w.as_ptr().add(4 * i).cast()) })
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16_dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    fn scalar_weight(w: &[u8], j: usize) -> f32 {
        half::f16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
    }
    // SAFETY: 8 weights at element i lie inside w (its length is checked first).
    float_dot!(w, a, rows, 2, |i: usize| _mm256_cvtph_ps(unsafe { load128(w.as_ptr().add(2 * i)) }))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bf16_dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    fn scalar_weight(w: &[u8], j: usize) -> f32 {
        half::bf16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
    }
    float_dot!(w, a, rows, 2, |i: usize| {
        // SAFETY: 8 weights at element i lie inside w (its length is checked first).
        let h = unsafe { load128(w.as_ptr().add(2 * i)) };
        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
    })
}
