//! AVX2 + FMA + F16C helpers (256-bit) shared by every format's AVX2 kernels and by the
//! AVX-512 kernels' 256-bit tails: loads, horizontal sums, the F16C scalar conversion,
//! nibble and high-bit unpacking, `maddubs` products, prefetch, and the block-loop and
//! float-dot templates (macros, expanded inside each kernel).
//!
//! Every `#[target_feature]` helper here is reached only from kernels compiled for (and
//! selected on) a CPU with these features.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// Hints the CPU to bring `bytes` into the cache (one hint per 64-byte line).
#[inline]
pub(crate) fn prefetch(bytes: &[u8]) {
    for off in (0..bytes.len()).step_by(64) {
        // SAFETY: SSE is part of the x86_64 baseline; a prefetch reads nothing itself and
        // the address is inside `bytes`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(bytes[off..].as_ptr().cast()) };
    }
}

/// The horizontal sum of 8 lanes in a fixed order.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The f16 at `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_at(w: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([w[at], w[at + 1]]);
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
}

/// 16 bytes at `p`.
///
/// # Safety
/// `p..p + 16` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load128(p: *const u8) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// 32 bytes at `p`.
///
/// # Safety
/// `p..p + 32` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn load256(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// The 32 nibbles of a 16-byte block, low nibbles first: bytes 0..16 are elements 0..16.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn nibbles(q: __m128i) -> __m256i {
    let m4 = _mm256_set1_epi8(0x0F);
    _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), m4)
}

/// Sum of `u8 * i8` products, in 8 i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_u8_i8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// The 32 bits of `qh` as 32 bytes: 0x10 where the bit is set, 0 elsewhere.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn high_bits(qh: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0x0000_0000_0000_0000,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(qh as i32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    let set = _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
    _mm256_and_si256(set, _mm256_set1_epi8(0x10))
}

/// The sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

/// Runs `$block!(b, acc)` over every block, alternating two accumulator sets (the
/// pattern depends on the block count alone).
macro_rules! over_blocks {
    ($nb:expr, $acc0:ident, $acc1:ident, $block:ident) => {
        let mut b = 0;
        while b + 2 <= $nb {
            $block!(b, $acc0);
            $block!(b + 1, $acc1);
            b += 2;
        }
        if b < $nb {
            $block!(b, $acc0);
        }
    };
}

pub(crate) use over_blocks;

pub(crate) use super::tiles::float_kernels;

/// [`super::bf16_bits`] of every value: 16 at a time with [`super::bf16_bits`]'s integer
/// steps on 8 lanes (so the same bits), the rest one by one.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn round_bf16(x: &[f32], out: &mut [u16]) {
    let n = x.len().min(out.len());
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: 16 values from i lie inside both slices (n is the shorter length).
        unsafe {
            let (lo, hi) = (bf16_lanes(x.as_ptr().add(i)), bf16_lanes(x.as_ptr().add(i + 8)));
            // Each lane holds at most 0xFFFF: the unsigned saturating pack keeps it; the
            // pack interleaves 128-bit halves, the permute puts them back in order.
            let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(lo, hi));
            _mm256_storeu_si256(out.as_mut_ptr().add(i).cast(), packed);
        }
        i += 16;
    }
    for (o, &v) in out[i..n].iter_mut().zip(&x[i..n]) {
        *o = super::bf16_bits(v);
    }
}

/// [`super::bf16_bits`] of the 8 values at `p`, one per 32-bit lane.
///
/// # Safety
/// `p..p + 8` must be readable.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn bf16_lanes(p: *const f32) -> __m256i {
    // SAFETY: the caller guarantees 8 readable values.
    let v = unsafe { _mm256_loadu_ps(p) };
    let b = _mm256_castps_si256(v);
    let top = _mm256_srli_epi32::<16>(b);
    let lsb = _mm256_and_si256(top, _mm256_set1_epi32(1));
    let bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb);
    let rounded = _mm256_srli_epi32::<16>(_mm256_add_epi32(b, bias));
    let quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    let nan = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_UNORD_Q>(v, v));
    _mm256_blendv_epi8(rounded, quiet, nan)
}

/// Bfloat16 bits widened to the f32 values they are (exactly): 8 at a time, the rest one by
/// one.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn widen_bf16(bits: &[u16], out: &mut [f32]) {
    let n = bits.len().min(out.len());
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: 8 values from i lie inside both slices (n is the shorter length).
        unsafe {
            let h = _mm_loadu_si128(bits.as_ptr().add(i).cast());
            let w = _mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h));
            _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_castsi256_ps(w));
        }
        i += 8;
    }
    for (o, &b) in out[i..n].iter_mut().zip(&bits[i..n]) {
        *o = super::bf16_value(b);
    }
}

/// `sum(a[i] * b[i])` over the shorter length: 16 values per step in two 8-wide FMA
/// accumulators, then 8, then the rest one by one (a fixed order for a given length).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: `i + 16 <= n`, the length of both slices.
        unsafe {
            let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), acc[0]);
            acc[1] =
                _mm256_fmadd_ps(_mm256_loadu_ps(pa.add(8)), _mm256_loadu_ps(pb.add(8)), acc[1]);
        }
        i += 16;
    }
    if i + 8 <= n {
        // SAFETY: `i + 8 <= n`.
        unsafe {
            let (pa, pb) = (a.as_ptr().add(i), b.as_ptr().add(i));
            acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb), acc[0]);
        }
        i += 8;
    }
    let mut s = hsum(_mm256_add_ps(acc[0], acc[1]));
    for j in i..n {
        s += a[j] * b[j];
    }
    s
}

/// `y[i] += p * v[i]` over the shorter length, 8 values per FMA.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn axpy_f32(y: &mut [f32], p: f32, v: &[f32]) {
    let n = y.len().min(v.len());
    let pv = _mm256_set1_ps(p);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: `i + 8 <= n`, the length of both slices.
        unsafe {
            let py = y.as_mut_ptr().add(i);
            let r = _mm256_fmadd_ps(pv, _mm256_loadu_ps(v.as_ptr().add(i)), _mm256_loadu_ps(py));
            _mm256_storeu_ps(py, r);
        }
        i += 8;
    }
    for j in i..n {
        y[j] += p * v[j];
    }
}

/// Scores of query `q` (`hd = q.len()` values, a multiple of 8) against the `out.len()`
/// keys laid one after another in `keys`, times `scale`, into `out`: eight keys at a time
/// (eight independent chains of multiply-adds keep both FMA units busy), each key's
/// products in its own accumulator and reduced in the same order whichever of the eight it
/// is (a short last group repeats its last key), so a key's score does not depend on where
/// its run starts.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn scores_f32(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) {
    let (hd, n) = (q.len(), out.len());
    assert!(hd.is_multiple_of(8) && keys.len() >= n * hd);
    let mut k = 0;
    while k < n {
        let key: [usize; 8] = std::array::from_fn(|j| (k + j).min(n - 1) * hd);
        let mut acc = [_mm256_setzero_ps(); 8];
        for c in (0..hd).step_by(8) {
            // SAFETY: `c + 8 <= hd` values of `q`, and of each key (`key[j] + hd <= n hd`).
            unsafe {
                let qv = _mm256_loadu_ps(q.as_ptr().add(c));
                for j in 0..8 {
                    let kv = _mm256_loadu_ps(keys.as_ptr().add(key[j] + c));
                    acc[j] = _mm256_fmadd_ps(qv, kv, acc[j]);
                }
            }
        }
        let mut eight = [0f32; 8];
        for (half, acc) in acc.chunks_exact(4).enumerate() {
            let h = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
            let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
            // SAFETY: `eight` holds 8 floats.
            unsafe {
                _mm_storeu_ps(eight[4 * half..].as_mut_ptr(), _mm_mul_ps(s, _mm_set1_ps(scale)))
            };
        }
        let take = (n - k).min(8);
        out[k..k + take].copy_from_slice(&eight[..take]);
        k += 8;
    }
}

/// `y[i] += p[k] * values[k hd + i]` for every key `k` in order (`hd = y.len()`, a
/// multiple of 8): the same sums, bit for bit, as one [`axpy_f32`] per key. Up to 64 values
/// of `y` stay in registers while every value row passes once.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn mix_f32(y: &mut [f32], p: &[f32], values: &[f32]) {
    let hd = y.len();
    assert!(hd.is_multiple_of(8) && values.len() >= p.len() * hd);
    for c0 in (0..hd).step_by(64) {
        let w = (hd - c0).min(64) / 8;
        let mut acc = [_mm256_setzero_ps(); 8];
        for (j, acc) in acc.iter_mut().enumerate().take(w) {
            // SAFETY: `c0 + 8 j + 8 <= hd` values of `y`.
            *acc = unsafe { _mm256_loadu_ps(y.as_ptr().add(c0 + 8 * j)) };
        }
        for (k, &pk) in p.iter().enumerate() {
            let pv = _mm256_set1_ps(pk);
            for (j, acc) in acc.iter_mut().enumerate().take(w) {
                // SAFETY: `k hd + c0 + 8 j + 8 <= p.len() hd <= values.len()`.
                let v = unsafe { _mm256_loadu_ps(values.as_ptr().add(k * hd + c0 + 8 * j)) };
                *acc = _mm256_fmadd_ps(pv, v, *acc);
            }
        }
        for (j, acc) in acc.iter().enumerate().take(w) {
            // SAFETY: as the loads above.
            unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(c0 + 8 * j), *acc) };
        }
    }
}

/// `e^x` of eight lanes (Cephes' `expf`: `2^n` times a degree-6 polynomial of the rest
/// after `n ln 2`, within 2 ulp of the exact value up to 88; above 88.37 it saturates);
/// lanes under -87.3 (where `e^x` is no longer a normal f32), `-inf` among them, give 0.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn exp8(x: __m256) -> __m256 {
    const LO: f32 = -87.33;
    let under = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_set1_ps(LO));
    let x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.37)), _mm256_set1_ps(LO));
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        x,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693_359_4), x);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm256_set1_ps(1.987_569_1e-4);
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 0.166_666_65, 0.5] {
        p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    }
    let y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0));
    let two_n =
        _mm256_slli_epi32::<23>(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)));
    let e = _mm256_mul_ps(y, _mm256_castsi256_ps(two_n));
    _mm256_andnot_ps(under, e)
}

/// `x[i] = e^(x[i] - shift)` in place, eight at a time (the last few through a padded
/// lane group, so every value is computed the same way wherever it sits); returns their
/// sum.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn exp_shifted(x: &mut [f32], shift: f32) -> f32 {
    let s = _mm256_set1_ps(shift);
    let mut acc = _mm256_setzero_ps();
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        // SAFETY: `c` holds eight values.
        unsafe {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(c.as_ptr()), s));
            _mm256_storeu_ps(c.as_mut_ptr(), e);
            acc = _mm256_add_ps(acc, e);
        }
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let mut pad = [f32::NEG_INFINITY; 8];
        pad[..tail.len()].copy_from_slice(tail);
        // SAFETY: `pad` holds eight values.
        unsafe {
            let e = exp8(_mm256_sub_ps(_mm256_loadu_ps(pad.as_ptr()), s));
            _mm256_storeu_ps(pad.as_mut_ptr(), e);
            acc = _mm256_add_ps(acc, e);
        }
        tail.copy_from_slice(&pad[..tail.len()]);
    }
    hsum(acc)
}

/// One block of 256 activations quantized as GGML's Q8_K, bitwise as the scalar path
/// (`acts::Q8KRows::quantize`): the scale from the first value of largest magnitude with
/// its sign (`-127 / max`), each value rounded half to even (`vroundps`' nearest mode),
/// clamped to [-128, 127], and the sum of every 16 values. Returns the block's scale
/// (`1 / iscale`, 0 for an all-zero block), or `None` (nothing written) when a value is
/// NaN or infinite: the caller's scalar path takes such a block.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn quantize_q8k_block(x: &[f32], q: &mut [i8], bsums: &mut [i16]) -> Option<f32> {
    assert!(x.len() == 256 && q.len() == 256 && bsums.len() == 16);
    let p = x.as_ptr();
    let at = |i: usize| {
        assert!(i < 32);
        // SAFETY: 8 floats at `8 i` for `i < 32`, inside `x`'s 256 values (checked above).
        unsafe { _mm256_loadu_ps(p.add(8 * i)) }
    };
    let (sign, inf) = (_mm256_set1_ps(-0.0), _mm256_set1_ps(f32::INFINITY));
    let (mut m0, mut m1, mut bad) = (_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps());
    for i in (0..32).step_by(2) {
        let (a, b) = (_mm256_andnot_ps(sign, at(i)), _mm256_andnot_ps(sign, at(i + 1)));
        // NaN and infinity are not for this path (the scalar fold skips NaN).
        let nf = _mm256_or_ps(
            _mm256_cmp_ps::<_CMP_NLT_UQ>(a, inf),
            _mm256_cmp_ps::<_CMP_NLT_UQ>(b, inf),
        );
        bad = _mm256_or_ps(bad, nf);
        m0 = _mm256_max_ps(m0, a);
        m1 = _mm256_max_ps(m1, b);
    }
    if _mm256_movemask_ps(bad) != 0 {
        return None;
    }
    let amax = hmax(_mm256_max_ps(m0, m1));
    if amax == 0.0 {
        q.fill(0);
        bsums.fill(0);
        return Some(0.0);
    }
    // The first value whose magnitude is the largest, as the scalar fold keeps it.
    let target = _mm256_set1_ps(amax);
    let mut first = None;
    for i in 0..32 {
        let hit =
            _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_andnot_ps(sign, at(i)), target));
        if hit != 0 {
            first = Some(8 * i + hit.trailing_zeros() as usize);
            break;
        }
    }
    let iscale = -127.0 / x[first?];
    // A block whose largest magnitude is under 127 / f32::MAX has no finite scale: the
    // scalar path's saturating conversions take it.
    if !iscale.is_finite() {
        return None;
    }
    let s = _mm256_set1_ps(iscale);
    let ones = _mm256_set1_epi16(1);
    // Each value rounded to nearest, ties to even (the conversion's rounding under the
    // default MXCSR, which Rust code never changes). No clamp: `|x iscale| <= 127` up to
    // a rounding of the product, so it rounds into -127..=127 and the packs' saturation
    // never acts.
    let values = |i: usize| _mm256_cvtps_epi32(_mm256_mul_ps(at(i), s));
    for quad in 0..4 {
        // Four groups of 16: their values, and their sums (pairs by `madd`, then two
        // rounds of pairwise adds leave each group's two halves' sums, added last).
        let mut m = [_mm256_setzero_si256(); 4];
        for (k, m) in m.iter_mut().enumerate() {
            let g = 4 * quad + k;
            let (r0, r1) = (values(2 * g), values(2 * g + 1));
            // 16 i32 -> 16 i16 in order (the packs work within 128-bit lanes), then i8.
            let w = _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packs_epi32(r0, r1));
            *m = _mm256_madd_epi16(w, ones);
            let b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256::<1>(w));
            // SAFETY: 16 bytes at `16 g` inside `q` (256 bytes, checked above).
            unsafe { _mm_storeu_si128(q.as_mut_ptr().add(16 * g).cast(), b) };
        }
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
        let sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        // Each sum is at most 16 x 128 in magnitude: the pack keeps it.
        let sums = _mm_packs_epi32(sums, sums);
        // SAFETY: 4 i16 at `4 quad` inside `bsums` (16 values, checked above).
        unsafe { _mm_storel_epi64(bsums.as_mut_ptr().add(4 * quad).cast(), sums) };
    }
    Some(1.0 / iscale)
}

/// The largest of 8 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hmax(v: __m256) -> f32 {
    let s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_max_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Blocks of 32 activations quantized as GGML's Q8_0, bitwise as the scalar path
/// (`acts::quantize_q8_0_block`): per block `d = amax / 127` into `d[b]` (before f16
/// rounding), each value `x * (1 / d)` rounded half away from zero into `q`, and the sum
/// of every 4 values into `fours[8 b..8 b + 8]`. Stops at the first block holding NaN or
/// an infinity (or a product leaving the 8-bit range), which the caller's scalar path
/// takes; returns how many blocks it did.
///
/// Three passes over up to 64 blocks at a time, so that no block waits on another's
/// divisions: each block's largest magnitude; the scales of 8 blocks per vector division;
/// then the values, rounded as `trunc(y + copysign(0.5 - 2^-25, y))`, which is half away
/// from zero for every `|y| < 2^23`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn quantize_q8_0_blocks(
    x: &[f32],
    q: &mut [i8],
    d: &mut [f32],
    fours: &mut [i32],
) -> usize {
    const CHUNK: usize = 64;
    let nb = (x.len() / 32).min(q.len() / 32).min(d.len()).min(fours.len() / 8);
    let sign = _mm256_set1_ps(-0.0);
    let inf = _mm256_set1_ps(f32::INFINITY);
    let below_half = _mm256_set1_ps(0.5 - f32::EPSILON / 4.0);
    let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    let (ones8, ones16) = (_mm256_set1_epi8(1), _mm256_set1_epi16(1));
    let mut b0 = 0;
    while b0 < nb {
        let n = (nb - b0).min(CHUNK);
        // Pass 1: each block's largest magnitude; stop before a block with NaN or inf.
        let mut amax = [0f32; CHUNK];
        let mut ok = n;
        for (j, m) in amax.iter_mut().enumerate().take(n) {
            let at = 32 * (b0 + j);
            let a: [__m256; 4] = std::array::from_fn(|i| {
                // SAFETY: 8 floats at `at + 8 i`, inside `x` (`b0 + j < nb`, `i < 4`).
                let v = unsafe { _mm256_loadu_ps(x.as_ptr().add(at + 8 * i)) };
                _mm256_andnot_ps(sign, v)
            });
            let bad = a.iter().fold(_mm256_setzero_ps(), |m, a| {
                _mm256_or_ps(m, _mm256_cmp_ps::<_CMP_NLT_UQ>(*a, inf))
            });
            if _mm256_movemask_ps(bad) != 0 {
                ok = j;
                break;
            }
            *m = hmax(_mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3])));
        }
        // Pass 2: `d = amax / 127` and `id = 1 / d` (0 for an all-zero block), 8 blocks a
        // division; stop before a block whose largest value would leave the 8-bit range
        // (`d` subnormal): `|x| id <= amax id`, as rounding keeps order.
        let mut ids = [0f32; CHUNK];
        for g in (0..ok).step_by(8) {
            // SAFETY: 8 floats at `g < CHUNK` (a multiple of 8) of each array.
            unsafe {
                let m = _mm256_loadu_ps(amax.as_ptr().add(g));
                let dv = _mm256_div_ps(m, _mm256_set1_ps(127.0));
                let zero = _mm256_cmp_ps::<_CMP_EQ_OQ>(dv, _mm256_setzero_ps());
                let id = _mm256_andnot_ps(zero, _mm256_div_ps(_mm256_set1_ps(1.0), dv));
                let big = _mm256_cmp_ps::<_CMP_NLT_UQ>(_mm256_mul_ps(m, id), _mm256_set1_ps(127.5));
                let big = _mm256_movemask_ps(big) as u32 & (u32::MAX >> (32 - (ok - g).min(8)));
                _mm256_storeu_ps(ids.as_mut_ptr().add(g), id);
                let mut ds = [0f32; 8];
                _mm256_storeu_ps(ds.as_mut_ptr(), dv);
                let take = if big != 0 { big.trailing_zeros() as usize } else { (ok - g).min(8) };
                d[b0 + g..b0 + g + take].copy_from_slice(&ds[..take]);
                if big != 0 {
                    ok = g + take;
                    break;
                }
            }
        }
        // Pass 3: the values and the sums of their fours.
        for (j, &id) in ids.iter().enumerate().take(ok) {
            let b = b0 + j;
            let s = _mm256_set1_ps(id);
            let r: [__m256i; 4] = std::array::from_fn(|i| {
                // SAFETY: 8 floats at `32 b + 8 i`, inside `x` (`b < nb`).
                let y =
                    _mm256_mul_ps(unsafe { _mm256_loadu_ps(x.as_ptr().add(32 * b + 8 * i)) }, s);
                let h = _mm256_or_ps(_mm256_and_ps(y, sign), below_half);
                _mm256_cvttps_epi32(_mm256_add_ps(y, h))
            });
            // 32 i32 -> 32 i8 in order (the packs work within 128-bit lanes: dwords of 4
            // bytes come out as r0 r1 r2 r3 of the low halves, then of the high halves).
            let w =
                _mm256_packs_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
            let w = _mm256_permutevar8x32_epi32(w, order);
            // Each 4 values' sum: bytes times one in pairs, then the pairs.
            let sums = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, w), ones16);
            // SAFETY: 32 bytes at `32 b` inside `q` and 8 i32 at `8 b` inside `fours`.
            unsafe {
                _mm256_storeu_si256(q.as_mut_ptr().add(32 * b).cast(), w);
                _mm256_storeu_si256(fours.as_mut_ptr().add(8 * b).cast(), sums);
            }
        }
        b0 += ok;
        if ok < n {
            break;
        }
    }
    b0
}

/// Each value rounded to f16 precision in place, 8 at a time, where the rounded value is
/// finite (as `acts::f16_precision`: beyond f16's range a value stays as it is); returns
/// how many leading values it did (a multiple of 8; the caller rounds the rest).
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f16_round(xs: &mut [f32]) -> usize {
    let (sign, inf) = (_mm256_set1_ps(-0.0), _mm256_set1_ps(f32::INFINITY));
    let n = xs.len() / 8 * 8;
    for i in (0..n).step_by(8) {
        // SAFETY: 8 floats at `i` inside `xs` (`i + 8 <= n`).
        unsafe {
            let p = xs.as_mut_ptr().add(i);
            let v = _mm256_loadu_ps(p);
            let r = _mm256_cvtph_ps(_mm256_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(v));
            let finite = _mm256_cmp_ps::<_CMP_LT_OQ>(_mm256_andnot_ps(sign, r), inf);
            _mm256_storeu_ps(p, _mm256_blendv_ps(v, r, finite));
        }
    }
    n
}
