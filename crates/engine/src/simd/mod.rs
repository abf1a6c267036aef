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

/// Rounds one activation block of 32 values, `x[i] * id`, into `q` with SIMD where the
/// CPU has it, bitwise as the scalar rounding does; `false` (nothing written) where the
/// caller must round it itself.
#[inline]
pub(crate) fn round_block(x: &[f32], id: f32, q: &mut [i8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    return avx512::round_block(x, id, q);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, id, q);
        false
    }
}

/// The largest magnitude of one activation block of 32 values with SIMD where the CPU
/// has it (the same value as the scalar fold); `None` where the caller must fold it.
#[inline]
pub(crate) fn amax_block(x: &[f32]) -> Option<f32> {
    #[cfg(target_arch = "x86_64")]
    return avx512::amax_block(x);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = x;
        None
    }
}

/// Hints the CPU to bring a weight row into the cache.
#[inline]
pub(crate) fn prefetch_row(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    avx2::prefetch(bytes);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
            .collect()
    }

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
