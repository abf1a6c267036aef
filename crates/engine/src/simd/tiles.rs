//! The float kernels' tiles as macros for every x86 vector width: F32 and F16 weights on
//! f32 activations ([`float_kernels`] at 256 bits for AVX2, and through
//! [`float_kernels512`](crate::simd::avx512::float_kernels512) at 512 bits), and BF16
//! weights on bfloat16 activations without `vdpbf16ps` ([`bf16_kernels`], both widths);
//! and a kernel's entry points over its tile ([`tile_fns`]).
//!
//! Expanded only inside the format modules' `avx2` / `avx512` submodules, whose
//! `#[target_feature]` functions it defines (selected only on a CPU with those features).

/// The float kernels of F32 and F16 weights on f32 activations: `$width` bytes a weight,
/// `$load(w, i)` weights `i..i + 8` of row `w` as f32, `$scalar(w, j)` weight `j` alone.
/// Expands to `dot` (a [`DotFn`](crate::kernels::DotFn): one weight row) and `rows` (a
/// [`RowsFn`](crate::kernels::RowsFn): many), both built on one tile of `P` weight rows
/// by `Q` activation rows.
///
/// A tile converts each weight vector once for its `Q` activation rows and loads each
/// activation vector once for its `P` weight rows. With one activation row (decode) a
/// tile takes four weight rows: on AMD Zen 3 the loads were the limit of one row at a time
/// (a C model of the loop: 21.5 GMAC/s for one row, 29.7 for four).
///
/// Every (weight row, activation row) pair has the same two accumulators whatever the
/// tile: the first takes values `2 L t..2 L t + L` (`L` the lanes, 8 here), the second
/// the next `L`, a last whole `L` goes to the first, then their sum's horizontal sum and
/// the tail of fewer than `L` values in order. So every width and tile gives a pair the
/// same bits. The same tiles at 512 bits are
/// [`float_kernels512`](crate::simd::avx512::float_kernels512).
macro_rules! float_kernels {
    ($width:expr, $load:expr, $scalar:expr) => {
        $crate::simd::tiles::float_kernels!(
            @tiles "avx2,fma,f16c", __m256, 8, _mm256_setzero_ps, _mm256_loadu_ps,
            _mm256_fmadd_ps, _mm256_add_ps, $crate::simd::avx2::hsum, |a, r| a.f32_row(r);
            $width, $load, $scalar
        );
    };
    (@tiles $feat:literal, $v:ty, $lanes:expr, $zero:ident, $loadu:ident, $fmadd:ident,
     $add:ident, $hsum:path, |$a:ident, $r:ident| $row:expr; $width:expr, $load:expr,
     $scalar:expr) => {
        /// Activation row `r` of `a` as the tiles read it.
        #[inline(always)]
        fn act_row(a: &Acts, r: usize) -> &[f32] {
            let ($a, $r) = (a, r);
            $row
        }

        /// `P` weight rows by `Q` activation rows (each row's first `x[0].len()` values).
        #[inline]
        #[target_feature(enable = $feat)]
        fn tile<const P: usize, const Q: usize>(w: [&[u8]; P], x: [&[f32]; Q]) -> [[f32; Q]; P] {
            const L: usize = $lanes;
            let n = x[0].len();
            assert!(x.iter().all(|x| x.len() >= n) && w.iter().all(|w| w.len() >= n * $width));
            let (load, scalar) = ($load, $scalar);
            let mut acc: [[[$v; 2]; Q]; P] = [[[$zero(); 2]; Q]; P];
            // Values `i + L k..i + L k + L` of every pair into accumulator `k` (a macro,
            // not a closure: the compiler left a closure's call in the loop).
            macro_rules! step {
                ($i:expr, $k:expr) => {
                    let at = $i + L * $k;
                    let xv: [$v; Q] = std::array::from_fn(|q| {
                        // SAFETY: `L` values from `at <= n - L` lie inside row `q` (its
                        // length is checked above).
                        unsafe { $loadu(x[q].as_ptr().add(at)) }
                    });
                    for p in 0..P {
                        let wv = load(w[p], at);
                        for q in 0..Q {
                            acc[p][q][$k] = $fmadd(wv, xv[q], acc[p][q][$k]);
                        }
                    }
                };
            }
            let mut i = 0;
            while i + 2 * L <= n {
                step!(i, 0);
                step!(i, 1);
                i += 2 * L;
            }
            if i + L <= n {
                step!(i, 0);
                i += L;
            }
            // Plain loops (closures holding `acc` kept it in memory through the loop).
            let mut out = [[0f32; Q]; P];
            for p in 0..P {
                for q in 0..Q {
                    let mut s = $hsum($add(acc[p][q][0], acc[p][q][1]));
                    for j in i..n {
                        s += scalar(w[p], j) * x[q][j];
                    }
                    out[p][q] = s;
                }
            }
            out
        }

        $crate::simd::tiles::tile_fns!($feat, |a, r| act_row(a, r));
    };
}

pub(crate) use float_kernels;

/// The BF16 kernels that read both operands as bfloat16 pairs (the activations' 16-bit
/// rows, `Acts::bf16`), for every x86 vector width: `$lanes` f32 lanes, so `2 $lanes`
/// values a load, widened without a shuffle (a pair's even value is its 32-bit lane
/// shifted left by 16, its odd value the lane with the low half masked off). Expands to
/// `dot` and `rows` as [`float_kernels`] does, on tiles of `P` weight rows by `Q`
/// activation rows; only inside a submodule of `formats/bf16.rs` (its tail reads
/// `super::weight`).
///
/// Every (weight row, activation row) pair has the same `2 $k` accumulators whatever the
/// tile: of each run of `$k` loads, load `k` adds its evens to accumulator `2 k` and its
/// odds to `2 k + 1`; a last whole load goes to the first two; then the sums of each
/// two, added in order, their lanes, and the tail of fewer than `2 $lanes` values in
/// order. So every width and tile gives a pair the same bits. `$k` is 1 or 2: AVX2 has
/// 16 registers, which four weight rows' eight accumulators leave room in.
macro_rules! bf16_kernels {
    ($feat:literal, $v:ty, $lanes:expr, $k:expr, $zero:ident, $loadu:ident, $and:ident,
     $set1:ident, $slli:ident, $cast:ident, $fmadd:ident, $add:ident, $hsum:path) => {
        /// `2 L` bfloat16 values at `p` as two f32 vectors: the evens, then the odds.
        ///
        /// # Safety
        /// `p..p + 2 L` must be readable.
        #[inline]
        #[target_feature(enable = $feat)]
        unsafe fn widen(p: *const u16) -> [$v; 2] {
            // SAFETY: the caller guarantees `2 L` readable values; unaligned load.
            let v = unsafe { $loadu(p.cast()) };
            let odd = $and(v, $set1(0xFFFF_0000_u32 as i32));
            [$cast($slli::<16>(v)), $cast(odd)]
        }

        /// `P` weight rows by `Q` activation rows (each row's first `x[0].len()` values).
        #[inline]
        #[target_feature(enable = $feat)]
        fn tile<const P: usize, const Q: usize>(w: [&[u8]; P], x: [&[u16]; Q]) -> [[f32; Q]; P] {
            const L2: usize = 2 * $lanes;
            const K: usize = $k;
            let n = x[0].len();
            assert!(x.iter().all(|x| x.len() >= n) && w.iter().all(|w| w.len() >= 2 * n));
            let wp = w.map(|w| w.as_ptr().cast::<u16>());
            let mut acc = [[[$zero(); 2 * K]; Q]; P];
            // Load `k` of a run from `i` into accumulators `2 k` and `2 k + 1` (a macro:
            // a closure kept the accumulators in memory).
            macro_rules! step {
                ($i:expr, $kk:expr) => {
                    let at = $i + L2 * $kk;
                    let xv: [[$v; 2]; Q] = std::array::from_fn(|q| {
                        // SAFETY: `2 L` values from `at <= n - 2 L` lie inside every
                        // activation row (their lengths are checked above).
                        unsafe { widen(x[q].as_ptr().add(at)) }
                    });
                    for p in 0..P {
                        // SAFETY: and inside every weight row (checked above too).
                        let [we, wo] = unsafe { widen(wp[p].add(at)) };
                        for q in 0..Q {
                            let a = &mut acc[p][q];
                            a[2 * $kk] = $fmadd(we, xv[q][0], a[2 * $kk]);
                            a[2 * $kk + 1] = $fmadd(wo, xv[q][1], a[2 * $kk + 1]);
                        }
                    }
                };
            }
            let mut i = 0;
            while i + K * L2 <= n {
                for k in 0..K {
                    step!(i, k);
                }
                i += K * L2;
            }
            if i + L2 <= n {
                step!(i, 0);
                i += L2;
            }
            let mut out = [[0f32; Q]; P];
            for p in 0..P {
                for q in 0..Q {
                    let a = &acc[p][q];
                    let mut v = $add(a[0], a[1]);
                    for more in a[2..].chunks_exact(2) {
                        v = $add(v, $add(more[0], more[1]));
                    }
                    let mut s = $hsum(v);
                    for j in i..n {
                        s += super::weight(w[p], j) * $crate::simd::bf16_value(x[q][j]);
                    }
                    out[p][q] = s;
                }
            }
            out
        }

        $crate::simd::tiles::tile_fns!($feat, |a, r| a.bf16.bits_row(r));
    };
}

pub(crate) use bf16_kernels;

/// A kernel's entry points over the tile function `tile::<P, Q>(weight rows, activation
/// rows)` in scope, with activation row `r` of `a` read as `$row`: `dot` (a
/// [`DotFn`](crate::kernels::DotFn): one weight row) and `rows` (a
/// [`RowsFn`](crate::kernels::RowsFn): `out[i * stride + j]` = weight row `i < n` of `w`,
/// rows of `rb` bytes, dotted with activation row `rows[j]`; four weight rows a tile for
/// one activation row, two for two, one for more). A macro, so that each kernel's tiles
/// are called from inside its own `#[target_feature]` functions.
macro_rules! tile_fns {
    ($feat:literal, |$a:ident, $r:ident| $row:expr) => {
        /// The dot products of one weight row with `R` activation rows.
        #[inline]
        #[target_feature(enable = $feat)]
        pub(crate) fn dot<const R: usize>(
            w: &[u8],
            $a: &$crate::acts::Acts,
            rows: [usize; R],
        ) -> [f32; R] {
            tile::<1, R>([w], rows.map(|$r| $row))[0]
        }

        /// `out[i * stride + j]` = weight row `i < n` of `w` (rows of `rb` bytes) dotted
        /// with activation row `rows[j]`: four weight rows a tile for one activation row,
        /// two for two, one for more.
        #[inline]
        #[target_feature(enable = $feat)]
        pub(crate) fn rows<const R: usize>(
            w: &[u8],
            n: usize,
            rb: usize,
            $a: &$crate::acts::Acts,
            rows: [usize; R],
            out: &mut [f32],
            stride: usize,
        ) {
            let x = rows.map(|$r| $row);
            let r = x.len();
            let row = |i: usize| &w[i * rb..(i + 1) * rb];
            let mut put = |i: usize, v: &[f32]| out[i * stride..i * stride + r].copy_from_slice(v);
            let mut i = 0;
            if r == 1 {
                while i + 4 <= n {
                    let t = tile::<4, _>([row(i), row(i + 1), row(i + 2), row(i + 3)], x);
                    for (p, v) in t.iter().enumerate() {
                        put(i + p, v);
                    }
                    i += 4;
                }
            } else if r == 2 {
                while i + 2 <= n {
                    let t = tile::<2, _>([row(i), row(i + 1)], x);
                    put(i, &t[0]);
                    put(i + 1, &t[1]);
                    i += 2;
                }
            }
            while i < n {
                put(i, &tile::<1, _>([row(i)], x)[0]);
                i += 1;
            }
        }
    };
}

pub(crate) use tile_fns;
