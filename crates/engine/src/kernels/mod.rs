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
#[cfg(target_arch = "x86_64")]
pub mod packed;
pub mod scalar;

/// A kernel: `w` is one weight row, `rows` the activation rows it meets.
pub type DotFn<const R: usize> = fn(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R];

/// A kernel over consecutive weight rows: `w` holds whole rows of `row_bytes` (at least
/// `n`; the rows after the first `n` are only prefetched), and `out[i * stride + j]`
/// receives row `i < n` dotted with activation row `rows[j]`. The same computation as
/// [`DotFn`] per row (inlined into one loop that prefetches ahead).
pub type RowsFn<const R: usize> = fn(
    w: &[u8],
    n: usize,
    row_bytes: usize,
    a: &Acts,
    rows: [usize; R],
    out: &mut [f32],
    stride: usize,
);

/// The four widths of one format's kernel, per row and over many rows.
#[derive(Clone, Copy)]
pub struct Kernels {
    /// One activation row.
    pub r1: DotFn<1>,
    /// Two.
    pub r2: DotFn<2>,
    /// Three.
    pub r3: DotFn<3>,
    /// Four.
    pub r4: DotFn<4>,
    /// One activation row, many weight rows.
    pub m1: RowsFn<1>,
    /// Two.
    pub m2: RowsFn<2>,
    /// Three.
    pub m3: RowsFn<3>,
    /// Four.
    pub m4: RowsFn<4>,
}

/// The loop of a [`RowsFn`] around a [`DotFn`] body `$f`.
macro_rules! rows_loop {
    ($f:ident, $w:ident, $n:ident, $rb:ident, $a:ident, $rows:ident, $out:ident, $stride:ident) => {{
        let n = $n;
        for i in 0..n {
            if (i + 4) * $rb <= $w.len() {
                $crate::simd::prefetch_row(&$w[(i + 3) * $rb..(i + 4) * $rb]);
            }
            let v = $f::<R>(&$w[i * $rb..(i + 1) * $rb], $a, $rows);
            $out[i * $stride..i * $stride + R].copy_from_slice(&v);
        }
    }};
}
pub(crate) use rows_loop;

/// [`Kernels`] for a portable kernel body.
macro_rules! kernels {
    ($f:ident) => {{
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            super::rows_loop!($f, w, n, rb, a, rows, out, stride)
        }
        Kernels {
            r1: $f::<1>,
            r2: $f::<2>,
            r3: $f::<3>,
            r4: $f::<4>,
            m1: many::<1>,
            m2: many::<2>,
            m3: many::<3>,
            m4: many::<4>,
        }
    }};
}
pub(crate) use kernels;

/// [`Kernels`] for a `#[target_feature]` kernel body; only for a CPU with `$feat`.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_kernels {
    ($f:ident, $feat:literal) => {{
        #[target_feature(enable = $feat)]
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            super::rows_loop!($f, w, n, rb, a, rows, out, stride)
        }
        super::simd_widths!($f, many)
    }};
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_kernels;

/// [`Kernels`] from a `#[target_feature]` kernel `$one::<R>` (one weight row, `DotFn`'s
/// shape) and its rows loop `$many::<R>` (`RowsFn`'s shape); only for a CPU with the
/// features they were compiled for.
#[cfg(target_arch = "x86_64")]
macro_rules! simd_widths {
    ($one:ident, $many:ident) => {{
        macro_rules! width {
            ($r1:ident, $m:ident, $r:literal) => {
                fn $r1(w: &[u8], a: &Acts, r: [usize; $r]) -> [f32; $r] {
                    // SAFETY: these kernels are selected only on a CPU with the features
                    // `$one` was compiled for.
                    unsafe { $one::<$r>(w, a, r) }
                }
                fn $m(
                    w: &[u8],
                    n: usize,
                    rb: usize,
                    a: &Acts,
                    r: [usize; $r],
                    o: &mut [f32],
                    s: usize,
                ) {
                    // SAFETY: as above.
                    unsafe { $many::<$r>(w, n, rb, a, r, o, s) }
                }
            };
        }
        width!(r1, m1, 1);
        width!(r2, m2, 2);
        width!(r3, m3, 3);
        width!(r4, m4, 4);
        Kernels { r1, r2, r3, r4, m1, m2, m3, m4 }
    }};
}
#[cfg(target_arch = "x86_64")]
pub(crate) use simd_widths;

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kernels")
    }
}

/// The kernels for `fmt` on `isa` (the scalar reference when this CPU lacks `isa`, or
/// when `isa` has no kernel of its own for `fmt`: then the next narrower one is used).
pub fn select(isa: Isa, fmt: WeightFormat) -> Kernels {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512
            && Isa::Avx512.is_available()
            && let Some(k) = avx512::select(fmt)
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
    let _ = isa;
    scalar::select(fmt)
}

/// Which instruction set actually computes `fmt` when `isa` is asked for.
pub fn effective_isa(isa: Isa, fmt: WeightFormat) -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        if isa == Isa::Avx512 && Isa::Avx512.is_available() && avx512::select(fmt).is_some() {
            return Isa::Avx512;
        }
        if matches!(isa, Isa::Avx2 | Isa::Avx512)
            && Isa::Avx2.is_available()
            && avx2::select(fmt).is_some()
        {
            return Isa::Avx2;
        }
    }
    let _ = (isa, fmt);
    Isa::Scalar
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
