//! SIMD helpers shared by every format's kernels and by activation quantization: loads,
//! horizontal sums, f16 conversion, nibble unpacking, prefetch, and the loop templates
//! the AVX2 kernels share ([`avx2`]), and the 512-bit counterparts ([`avx512`]).
//!
//! The bottom of the kernel stack: nothing here uses a format module, the activations or
//! the dispatch (only [`crate::isa`] to ask what the CPU runs). The portable wrappers
//! below fall back to "not done here" (the caller's scalar path) off x86_64.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512;
#[cfg(target_arch = "aarch64")]
pub(crate) mod neon;
#[cfg(target_arch = "x86_64")]
pub(crate) mod tiles;

/// Blocks of 32 activations quantized as Q8_0 with SIMD where the CPU has it, bitwise as
/// the scalar path (values into `q`, each block's scale before f16 rounding into `d`, the
/// sum of every 4 values into `fours`): how many leading blocks it did (the next one, if
/// any, is the caller's to quantize).
#[inline]
pub(crate) fn quantize_q8_0_blocks(
    x: &[f32],
    q: &mut [i8],
    d: &mut [f32],
    fours: &mut [i32],
) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::quantize_q8_0_blocks(x, q, d, fours) };
    }
    let _ = (x, q, d, fours);
    0
}

/// The leading values of `xs` rounded to f16 precision in place with F16C where the CPU
/// has it (a value f16 cannot hold stays as it is): how many it did.
#[inline]
pub(crate) fn f16_round(xs: &mut [f32]) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::f16_round(xs) };
    }
    let _ = xs;
    0
}

/// One block of 256 activations quantized as Q8_K (values into `q`, the sums of every 16
/// into `bsums`) with SIMD where the CPU has it, bitwise as the scalar path; its scale, or
/// `None` (nothing written) where the caller must quantize it itself.
#[inline]
pub(crate) fn quantize_q8k_block(x: &[f32], q: &mut [i8], bsums: &mut [i16]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::quantize_q8k_block(x, q, bsums) };
    }
    let _ = (x, q, bsums);
    None
}

/// Hints the CPU to bring a weight row into the cache.
#[inline]
pub(crate) fn prefetch_row(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    avx2::prefetch(bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// `x` rounded to bfloat16, to nearest with ties to even; a NaN stays a (quiet) NaN.
#[inline(always)]
pub(crate) fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    // Both computed, one kept (a select, so that a loop of it vectorizes).
    let quiet = ((b >> 16) | 0x40) as u16;
    let rounded = (b.wrapping_add(0x7FFF + ((b >> 16) & 1)) >> 16) as u16;
    if x.is_nan() { quiet } else { rounded }
}

/// The f32 value of bfloat16 bits `b` (exact: a bfloat16 is an f32's upper half).
#[inline(always)]
pub(crate) fn bf16_value(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

/// `out[i] = bf16_bits(x[i])`, 256 bits at a time where the CPU has AVX2 (the same
/// integer steps, so the same bits).
pub(crate) fn round_bf16(x: &[f32], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::round_bf16(x, out) };
    }
    for (o, &v) in out.iter_mut().zip(x) {
        *o = bf16_bits(v);
    }
}

/// `out[i]` = the f32 value of bfloat16 `bits[i]` (exact), 256 bits at a time where the CPU
/// has AVX2.
pub(crate) fn widen_bf16(bits: &[u16], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return unsafe { avx2::widen_bf16(bits, out) };
    }
    for (o, &b) in out.iter_mut().zip(bits) {
        *o = bf16_value(b);
    }
}

/// `sum(a[i] * b[i])` with AVX2 FMA where the CPU has it; `None` where the caller must
/// compute it itself.
#[inline]
pub(crate) fn dot_f32(a: &[f32], b: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return Some(unsafe { avx2::dot_f32(a, b) });
    }
    let _ = (a, b);
    None
}

/// `y[i] += p * v[i]` with AVX2 FMA where the CPU has it; `false` (nothing done) where the
/// caller must do it itself.
#[inline]
pub(crate) fn axpy_f32(y: &mut [f32], p: f32, v: &[f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        unsafe {
            avx2::axpy_f32(y, p, v)
        };
        return true;
    }
    let _ = (y, p, v);
    false
}

/// `x[i] = e^(x[i] - shift)` in place with AVX2 where the CPU has it (within 2 ulp of
/// the exact value, every value computed the same way wherever it sits), returning their
/// sum; `None` (nothing done) where the caller must do it itself.
#[inline]
pub(crate) fn exp_shifted(x: &mut [f32], shift: f32) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    if crate::isa::Isa::Avx2.is_available() {
        // SAFETY: this CPU has AVX2, FMA and F16C (checked just above).
        #[allow(unsafe_code)]
        return Some(unsafe { avx2::exp_shifted(x, shift) });
    }
    let _ = (x, shift);
    None
}

/// Whether [`scores_f32`] and [`mix_f32`] run here for rows of `hd` values.
#[inline]
pub(crate) fn has_runs(hd: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return hd.is_multiple_of(8) && crate::isa::Isa::Avx2.is_available();
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = hd;
        false
    }
}

/// Attention scores of `q` against a run of keys (see `avx2::scores_f32`); only where
/// [`has_runs`] says so.
#[inline]
pub(crate) fn scores_f32(q: &[f32], keys: &[f32], scale: f32, out: &mut [f32]) {
    assert!(has_runs(q.len()));
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (keys, scale, out);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: this CPU has AVX2, FMA and F16C (`has_runs`, asserted above).
    #[allow(unsafe_code)]
    unsafe {
        avx2::scores_f32(q, keys, scale, out)
    }
}

/// `y += sum_k p[k] * values[k]` over a run of value rows (see `avx2::mix_f32`); only
/// where [`has_runs`] says so.
#[inline]
pub(crate) fn mix_f32(y: &mut [f32], p: &[f32], values: &[f32]) {
    assert!(has_runs(y.len()));
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, values);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        avx2::mix_f32(y, p, values)
    }
}

/// `n` pseudo-random values in [-0.5, 0.5] for tests, a different run for each `seed`.
#[cfg(test)]
pub(crate) fn test_values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use test_values as values;

    #[test]
    fn a_keys_score_is_the_same_bits_wherever_its_run_starts_and_matches_the_dot_product() {
        for hd in [8, 64, 256] {
            if !has_runs(hd) {
                eprintln!("no AVX2 on this CPU: the runs are not used here");
                return;
            }
            let (q, keys) = (values(hd, 1), values(11 * hd, 2));
            let mut all = vec![0f32; 11];
            scores_f32(&q, &keys, 0.125, &mut all);
            for (k, s) in all.iter().enumerate() {
                let want: f32 =
                    q.iter().zip(&keys[k * hd..]).map(|(a, b)| a * b).sum::<f32>() * 0.125;
                assert!((s - want).abs() <= 1e-5 * hd as f32, "hd {hd} key {k}: {s} vs {want}");
            }
            for start in 1..8 {
                for len in 1..=11 - start {
                    let mut part = vec![0f32; len];
                    scores_f32(&q, &keys[start * hd..], 0.125, &mut part);
                    let whole: Vec<u32> =
                        all[start..start + len].iter().map(|v| v.to_bits()).collect();
                    let part: Vec<u32> = part.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(part, whole, "hd {hd} keys {start}..{}", start + len);
                }
            }
        }
    }

    #[test]
    fn the_vector_exponential_is_within_two_ulp_and_gives_zero_below_the_normal_range() {
        let mut xs: Vec<f32> = (0..19_000).map(|i| -90.0 + i as f32 * 0.009_2).collect();
        xs.extend([0.0, -0.0, 1e-30, -1e-30, f32::NEG_INFINITY, -87.0, -87.5, 88.0]);
        let mut got = xs.clone();
        let Some(sum) = exp_shifted(&mut got, 0.0) else {
            eprintln!("no AVX2 on this CPU: the scalar exponential is used");
            return;
        };
        for (x, e) in xs.iter().zip(&got) {
            let want = f64::from(*x).exp();
            if *x < -87.33 {
                assert_eq!(*e, 0.0, "e^{x}");
            } else {
                let ulp = f64::from(f32::EPSILON) * want;
                assert!((f64::from(*e) - want).abs() <= 2.0 * ulp, "e^{x}: {e} vs {want}");
            }
        }
        let _ = sum;
        // The sum it returns is the values' (a softmax row: every exponent at most 0).
        let mut row: Vec<f32> = (0..1001).map(|i| -(i as f32) * 0.03).collect();
        let sum = exp_shifted(&mut row, 0.0).expect("AVX2");
        let total: f32 = row.iter().sum();
        assert!((sum - total).abs() <= 1e-5 * total, "{sum} vs {total}");
        // A value's result does not depend on where it sits (a full group or the tail).
        for len in 1..20 {
            let mut part = xs[3..3 + len].to_vec();
            exp_shifted(&mut part, 0.0);
            let mut shifted = xs[3..3 + len].to_vec();
            shifted.insert(0, 0.5);
            exp_shifted(&mut shifted, 0.0);
            assert_eq!(part, shifted[1..], "len {len}");
        }
    }

    #[test]
    fn mixing_a_run_of_values_gives_the_bits_of_one_multiply_add_per_key() {
        for hd in [8, 64, 72, 256] {
            if !has_runs(hd) {
                return;
            }
            let (p, vals) = (values(9, 3), values(9 * hd, 4));
            let mut run = values(hd, 5);
            let mut one = run.clone();
            mix_f32(&mut run, &p, &vals);
            for (k, &pk) in p.iter().enumerate() {
                assert!(axpy_f32(&mut one, pk, &vals[k * hd..(k + 1) * hd]));
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&run), bits(&one), "hd {hd}");
        }
    }
}
