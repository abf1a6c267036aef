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
