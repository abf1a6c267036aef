//! The shape of a kernel ([`DotFn`], [`RowsFn`]), the table of one format's kernels at
//! the four widths ([`Kernels`]), and the macros that build a table from a format's
//! kernel body. Below the per-instruction-set selections (`scalar`, `avx2`, `avx512`, `neon`)
//! that use it.

use crate::acts::Acts;

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
    ($($f:ident)::+, $w:ident, $n:ident, $rb:ident, $a:ident, $rows:ident, $out:ident, $stride:ident) => {
        $crate::kernels::table::rows_loop!($($f)::+, $w, $n, $rb, $a, $rows, $out, $stride, true)
    };
    ($($f:ident)::+, $w:ident, $n:ident, $rb:ident, $a:ident, $rows:ident, $out:ident, $stride:ident, $prefetch:literal) => {{
        let n = $n;
        for i in 0..n {
            if $prefetch && (i + 4) * $rb <= $w.len() {
                $crate::simd::prefetch_row(&$w[(i + 3) * $rb..(i + 4) * $rb]);
            }
            let v = $($f)::+::<R>(&$w[i * $rb..(i + 1) * $rb], $a, $rows);
            $out[i * $stride..i * $stride + R].copy_from_slice(&v);
        }
    }};
}
pub(crate) use rows_loop;

/// [`Kernels`] for a portable kernel body.
macro_rules! kernels {
    ($($f:ident)::+) => {{
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &$crate::acts::Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            $crate::kernels::table::rows_loop!($($f)::+, w, n, rb, a, rows, out, stride)
        }
        $crate::kernels::table::Kernels {
            r1: $($f)::+::<1>,
            r2: $($f)::+::<2>,
            r3: $($f)::+::<3>,
            r4: $($f)::+::<4>,
            m1: many::<1>,
            m2: many::<2>,
            m3: many::<3>,
            m4: many::<4>,
        }
    }};
}
pub(crate) use kernels;

/// [`Kernels`] for a `#[target_feature]` kernel body; only for a CPU with `$feat`.
///
/// (`$prefetch: false` would leave the prefetching to the hardware, as the float tiles
/// do: their rows are sequential streams it follows, and a hint per 64-byte line cost a
/// fifth of a product whose weights are in cache.)
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! simd_kernels {
    ($($f:ident)::+, $feat:literal) => {
        $crate::kernels::table::simd_kernels!($($f)::+, $feat, true)
    };
    ($($f:ident)::+, $feat:literal, $prefetch:literal) => {{
        #[target_feature(enable = $feat)]
        fn many<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            a: &$crate::acts::Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            $crate::kernels::table::rows_loop!($($f)::+, w, n, rb, a, rows, out, stride, $prefetch)
        }
        $crate::kernels::table::simd_widths!($($f)::+, many)
    }};
}
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use simd_kernels;

/// [`Kernels`] from a `#[target_feature]` kernel `$one::<R>` (one weight row, `DotFn`'s
/// shape) and its rows loop `$many::<R>` (`RowsFn`'s shape); only for a CPU with the
/// features they were compiled for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
macro_rules! simd_widths {
    ($($one:ident)::+, $many:ident) => {{
        macro_rules! width {
            ($r1:ident, $m:ident, $r:literal) => {
                fn $r1(w: &[u8], a: &$crate::acts::Acts, r: [usize; $r]) -> [f32; $r] {
                    // SAFETY: these kernels are selected only on a CPU with the features
                    // `$one` was compiled for.
                    unsafe { $($one)::+::<$r>(w, a, r) }
                }
                fn $m(
                    w: &[u8],
                    n: usize,
                    rb: usize,
                    a: &$crate::acts::Acts,
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
        $crate::kernels::table::Kernels { r1, r2, r3, r4, m1, m2, m3, m4 }
    }};
}
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
pub(crate) use simd_widths;

impl std::fmt::Debug for Kernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Kernels")
    }
}
