//! Dot products of one weight row with up to four activation rows.
//!
//! A kernel has the shape of [`DotFn`]: it reads one weight row in its GGUF block layout
//! and `R` activation rows (1 to 4) of an [`Acts`], and returns `R` dot products. For a
//! given format and instruction set every width computes each of its `R` results with
//! the same instruction sequence as the 1-row kernel, so a row's value does not depend on
//! how many rows travel with it (the batch-invariance tests hold this).
//!
//! [`select`] picks the kernel for a format and an [`Isa`]; an instruction set this CPU
//! does not run falls back to the scalar reference, so a kernel is never run unchecked.

pub use crate::acts::Acts;
use crate::format::WeightFormat;
use crate::isa::Isa;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub mod packed;
pub mod scalar;
mod table;

pub use table::{DotFn, Kernels, RowsFn};

/// The kernels for `fmt` on `isa` (the scalar reference when this CPU lacks `isa`, or
/// when `isa` has no kernel of its own for `fmt`: then the next narrower one is used).
pub fn select(isa: Isa, fmt: WeightFormat) -> Kernels {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512
            && Isa::Avx512.is_available()
            && let Some(k) = avx512::select(fmt, true)
        {
            return k;
        }
        if matches!(isa, Isa::Avx2 | Isa::Avx512)
            && Isa::Avx2.is_available()
            && let Some(k) = avx2::select(fmt)
        {
            return k;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if matches!(isa, Isa::Neon | Isa::NeonDot | Isa::NeonI8mm) {
        // `i8mm` adds nothing to the row-at-a-time kernels: only the repacked ones use it.
        let dot = isa != Isa::Neon && Isa::NeonDot.is_available();
        if Isa::Neon.is_available()
            && let Some(k) = neon::select(fmt, dot)
        {
            return k;
        }
    }
    let _ = isa;
    scalar::select(fmt)
}

/// Which instruction set actually computes `fmt` when `isa` is asked for.
pub fn effective_isa(isa: Isa, fmt: WeightFormat) -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && Isa::Avx512.is_available() && avx512::select(fmt, true).is_some() {
            return Isa::Avx512;
        }
        if matches!(isa, Isa::Avx2 | Isa::Avx512)
            && Isa::Avx2.is_available()
            && avx2::select(fmt).is_some()
        {
            return Isa::Avx2;
        }
    }
    #[cfg(target_arch = "aarch64")]
    if matches!(isa, Isa::Neon | Isa::NeonDot | Isa::NeonI8mm) && Isa::Neon.is_available() {
        let dot = isa != Isa::Neon && Isa::NeonDot.is_available();
        if neon::select(fmt, dot).is_some() {
            // The i8mm tier differs from the dotprod one only in its repacked kernels.
            let mm = isa == Isa::NeonI8mm && Isa::NeonI8mm.is_available();
            return match (dot, mm && packed::supports(fmt)) {
                (true, true) => Isa::NeonI8mm,
                (true, false) => Isa::NeonDot,
                _ => Isa::Neon,
            };
        }
    }
    let _ = (isa, fmt);
    Isa::Scalar
}

/// Whether the BF16 kernel for `isa` (an effective one, [`effective_isa`]) reads its
/// activations widened back to f32 (`Bf16Rows::f32`): the reference and NEON; the x86
/// kernels (AVX2, AVX-512 with or without `vdpbf16ps`) read the 16-bit values as they are.
pub(crate) fn bf16_reads_f32(isa: Isa) -> bool {
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx2 | Isa::Avx512) {
        return false;
    }
    let _ = isa;
    true
}

/// The kernel that computes `fmt` when `isa` is asked for, by name: the
/// [`effective_isa`]'s name, with `+bf16` where the AVX-512 tier multiplies BF16 weights
/// with `vdpbf16ps`.
pub fn kernel_name(isa: Isa, fmt: WeightFormat) -> String {
    let eff = effective_isa(isa, fmt);
    #[cfg(target_arch = "x86_64")]
    if eff == Isa::Avx512 && fmt == WeightFormat::BF16 && avx512::has_bf16() {
        return format!("{}+bf16", eff.name());
    }
    eff.name().to_string()
}

/// Computes `out[i * stride + k] = dot(weight row i of w, activation row rows.start + k)`
/// for the first `n` rows of `w` (whole rows of `row_bytes`; later rows are prefetched)
/// and any number of activation rows, four at a time.
#[allow(clippy::too_many_arguments)]
pub fn dot_rows(
    k: &Kernels,
    w: &[u8],
    n: usize,
    row_bytes: usize,
    a: &Acts,
    rows: std::ops::Range<usize>,
    out: &mut [f32],
    stride: usize,
) {
    let mut i = rows.start;
    let mut o = 0;
    while i < rows.end {
        let left = rows.end - i;
        let out = &mut out[o..];
        match left {
            1 => (k.m1)(w, n, row_bytes, a, [i], out, stride),
            2 => (k.m2)(w, n, row_bytes, a, [i, i + 1], out, stride),
            3 => (k.m3)(w, n, row_bytes, a, [i, i + 1, i + 2], out, stride),
            _ => (k.m4)(w, n, row_bytes, a, [i, i + 1, i + 2, i + 3], out, stride),
        }
        i += left.min(4);
        o += left.min(4);
    }
}

/// Computes `out[k] = dot(w, activation row rows.start + k)` for any number of rows,
/// four at a time.
pub fn dot_many(k: &Kernels, w: &[u8], a: &Acts, rows: std::ops::Range<usize>, out: &mut [f32]) {
    let mut i = rows.start;
    let mut o = 0;
    while i < rows.end {
        let left = rows.end - i;
        match left {
            1 => out[o] = (k.r1)(w, a, [i])[0],
            2 => out[o..o + 2].copy_from_slice(&(k.r2)(w, a, [i, i + 1])),
            3 => out[o..o + 3].copy_from_slice(&(k.r3)(w, a, [i, i + 1, i + 2])),
            _ => out[o..o + 4].copy_from_slice(&(k.r4)(w, a, [i, i + 1, i + 2, i + 3])),
        }
        i += left.min(4);
        o += left.min(4);
    }
}

#[cfg(test)]
mod tests;
