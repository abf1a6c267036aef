//! BF16 weights: bfloat16, multiplying activations rounded to bfloat16 (`Acts::bf16`, as
//! llama.cpp's BF16 products do). Every weight-times-activation product is then exact in
//! f32, so the tiers differ only in the order of their additions: the f32 kernels widen
//! both operands, and the AVX-512 BF16 kernel multiplies the 16-bit pairs as they are
//! (`vdpbf16ps`, 32 products an instruction). The reference runs through F16's chunked loop.

use half::bf16;

use crate::acts::Acts;

/// Dequantizes a row into `out`.
pub(crate) fn dequantize(row: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
        *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
    }
}

/// Weight `j` of a row, as f32.
#[inline]
pub(crate) fn weight(w: &[u8], j: usize) -> f32 {
    crate::simd::bf16_value(u16::from_le_bytes([w[2 * j], w[2 * j + 1]]))
}

/// The scalar reference dot product with the bfloat16 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    super::f16::dot_chunks(dequantize, w, rows.map(|r| a.bf16.f32_row(r)))
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry). Both operands are read as
/// bfloat16 (the activations' f32 copy is not read), pairs, 16 values per 256-bit load, and widened without a shuffle: a pair's
/// even value is its 32-bit lane shifted left by 16, its odd value the lane with the low
/// half masked off. Evens and odds go to separate accumulators, 8 in all.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx2::{CHAINS, hsum};

    /// The dot products of one weight row with `R` activation rows, one row per pass.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        rows.map(|r| pass(w, a.bf16.bits_row(r)))
    }

    /// One weight row against one activation row of bfloat16 values (the tail of fewer
    /// than 16 values added in order, in f32).
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    fn pass(w: &[u8], x: &[u16]) -> f32 {
        let n = x.len();
        assert!(w.len() >= 2 * n);
        let odd = _mm256_set1_epi32(0xFFFF_0000_u32 as i32);
        let mut acc = [_mm256_setzero_ps(); CHAINS];
        // 16 values from `i` into accumulators `2 k` (evens) and `2 k + 1` (odds).
        let step = |acc: &mut [__m256; CHAINS], i: usize, k: usize| {
            // SAFETY: 16 weights and 16 activations from i lie inside the rows (checked
            // above, and by the loops' bounds); unaligned loads.
            let (wv, xv) = unsafe {
                (
                    _mm256_loadu_si256(w.as_ptr().add(2 * i).cast()),
                    _mm256_loadu_si256(x.as_ptr().add(i).cast()),
                )
            };
            let even = |v| _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v));
            let high = |v| _mm256_castsi256_ps(_mm256_and_si256(v, odd));
            acc[2 * k] = _mm256_fmadd_ps(even(wv), even(xv), acc[2 * k]);
            acc[2 * k + 1] = _mm256_fmadd_ps(high(wv), high(xv), acc[2 * k + 1]);
        };
        let mut i = 0;
        while i + 8 * CHAINS <= n {
            for k in 0..CHAINS / 2 {
                step(&mut acc, i + 16 * k, k);
            }
            i += 8 * CHAINS;
        }
        while i + 16 <= n {
            step(&mut acc, i, 0);
            i += 16;
        }
        let a = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let b = _mm256_add_ps(_mm256_add_ps(acc[4], acc[5]), _mm256_add_ps(acc[6], acc[7]));
        let mut s = hsum(_mm256_add_ps(a, b));
        for j in i..n {
            s += super::weight(w, j) * crate::simd::bf16_value(x[j]);
        }
        s
    }
}

/// The AVX-512 kernel for CPUs without `avx512bf16` (`#[target_feature]`: selected only on
/// a CPU with these features; raw loads read inside ranges checked at the kernel's
/// entry). As the AVX2 kernel, both operands are read as bfloat16 pairs, 32 values a
/// 512-bit load (half the activation bytes of the f32 copy), widened without a shuffle:
/// a pair's even value is its lane shifted left by 16, its odd value the lane with the low
/// half masked off. In tiles of weight rows by activation rows, as the other float
/// kernels: four weight rows per activation load at decode.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx512::hsum512;

    /// 32 bfloat16 values at `p` as two f32 vectors: the evens, then the odds.
    ///
    /// # Safety
    /// `p..p + 32` must be readable.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn widen32(p: *const u16) -> [__m512; 2] {
        // SAFETY: the caller guarantees 64 readable bytes; unaligned load.
        let v = unsafe { _mm512_loadu_si512(p.cast()) };
        let odd = _mm512_and_si512(v, _mm512_set1_epi32(0xFFFF_0000_u32 as i32));
        [_mm512_castsi512_ps(_mm512_slli_epi32::<16>(v)), _mm512_castsi512_ps(odd)]
    }

    /// `P` weight rows by `Q` activation rows. Every (weight row, activation row) pair
    /// has the same four accumulators whatever the tile: the evens and the odds of values
    /// `64 t..64 t + 32` in the first two, of the next 32 in the other two, a last whole
    /// 32 in the first two; then their sum's lanes and the tail of fewer than 32 values in
    /// order, in f32. So every width and tile gives a pair the same bits.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    fn tile<const P: usize, const Q: usize>(w: [&[u8]; P], x: [&[u16]; Q]) -> [[f32; Q]; P] {
        let n = x[0].len();
        assert!(x.iter().all(|x| x.len() >= n) && w.iter().all(|w| w.len() >= 2 * n));
        let wp = w.map(|w| w.as_ptr().cast::<u16>());
        let mut acc = [[[_mm512_setzero_ps(); 4]; Q]; P];
        // Values `i + 32 k..i + 32 k + 32` of every pair into accumulators `2 k` (evens)
        // and `2 k + 1` (odds) (a macro: a closure kept the accumulators in memory).
        macro_rules! step {
            ($i:expr, $k:expr) => {
                let at = $i + 32 * $k;
                let xv: [[__m512; 2]; Q] = std::array::from_fn(|q| {
                    // SAFETY: 32 values from `at <= n - 32` lie inside every activation
                    // row (their lengths are checked above).
                    unsafe { widen32(x[q].as_ptr().add(at)) }
                });
                for p in 0..P {
                    // SAFETY: and inside every weight row (checked above too).
                    let [we, wo] = unsafe { widen32(wp[p].add(at)) };
                    for q in 0..Q {
                        let a = &mut acc[p][q];
                        a[2 * $k] = _mm512_fmadd_ps(we, xv[q][0], a[2 * $k]);
                        a[2 * $k + 1] = _mm512_fmadd_ps(wo, xv[q][1], a[2 * $k + 1]);
                    }
                }
            };
        }
        let mut i = 0;
        while i + 64 <= n {
            step!(i, 0);
            step!(i, 1);
            i += 64;
        }
        if i + 32 <= n {
            step!(i, 0);
            i += 32;
        }
        let mut out = [[0f32; Q]; P];
        for p in 0..P {
            for q in 0..Q {
                let [a0, a1, a2, a3] = acc[p][q];
                let mut s = hsum512(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
                for j in i..n {
                    s += super::weight(w[p], j) * crate::simd::bf16_value(x[q][j]);
                }
                out[p][q] = s;
            }
        }
        out
    }

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        tile::<1, R>([w], rows.map(|r| a.bf16.bits_row(r)))[0]
    }

    /// `out[i * stride + j]` = weight row `i < n` of `w` (rows of `rb` bytes) dotted with
    /// activation row `rows[j]`: four weight rows a tile for one activation row, two for
    /// two, one for more.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn rows<const R: usize>(
        w: &[u8],
        n: usize,
        rb: usize,
        a: &Acts,
        rows: [usize; R],
        out: &mut [f32],
        stride: usize,
    ) {
        let x = rows.map(|r| a.bf16.bits_row(r));
        crate::simd::tiles::tile_rows!(tile, w, n, rb, x, out, stride);
    }
}

/// The AVX-512 BF16 kernel: `vdpbf16ps` multiplies 32 weight and activation pairs into 16
/// f32 lanes per instruction (each lane adds the odd pair's product, then the even's; a
/// subnormal input or result counts as zero). Selected only on a CPU with `avx512bf16`;
/// raw loads read inside ranges checked at the kernel's entry.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512bf16 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx512::hsum512;

    /// 32 bfloat16 values at `p` as the operand `vdpbf16ps` takes.
    ///
    /// # Safety
    /// `p..p + 32` must be readable.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")]
    unsafe fn load32(p: *const u16) -> __m512bh {
        // SAFETY: the caller guarantees 64 readable bytes; a 512-bit vector of sixteen-bit
        // lanes reinterpreted as 32 bfloat16 lanes (same size, any bits valid).
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(p.cast())) }
    }

    /// `P` weight rows by `Q` activation rows. Every (weight row, activation row) pair
    /// has the same two accumulators whatever the tile: the first takes values
    /// `64 t..64 t + 32`, the second the next 32, a last whole 32 goes to the first, then
    /// their sum's lanes and the tail of fewer than 32 values in order, in f32. So every
    /// width and tile gives a pair the same bits. Four weight rows a tile at decode load
    /// each activation vector once for four `vdpbf16ps`.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")]
    fn tile<const P: usize, const Q: usize>(w: [&[u8]; P], x: [&[u16]; Q]) -> [[f32; Q]; P] {
        let n = x[0].len();
        assert!(x.iter().all(|x| x.len() >= n) && w.iter().all(|w| w.len() >= 2 * n));
        let wp = w.map(|w| w.as_ptr().cast::<u16>());
        let mut acc = [[[_mm512_setzero_ps(); 2]; Q]; P];
        // Values `i + 32 k..i + 32 k + 32` of every pair into accumulator `k` (a macro:
        // a closure kept the accumulators in memory).
        macro_rules! step {
            ($i:expr, $k:expr) => {
                let at = $i + 32 * $k;
                let xv: [__m512bh; Q] = std::array::from_fn(|q| {
                    // SAFETY: 32 values from `at <= n - 32` lie inside every activation
                    // row and weight row (their lengths are checked above).
                    unsafe { load32(x[q].as_ptr().add(at)) }
                });
                for p in 0..P {
                    // SAFETY: as above.
                    let wv = unsafe { load32(wp[p].add(at)) };
                    for q in 0..Q {
                        acc[p][q][$k] = _mm512_dpbf16_ps(acc[p][q][$k], wv, xv[q]);
                    }
                }
            };
        }
        let mut i = 0;
        while i + 64 <= n {
            step!(i, 0);
            step!(i, 1);
            i += 64;
        }
        if i + 32 <= n {
            step!(i, 0);
            i += 32;
        }
        let mut out = [[0f32; Q]; P];
        for p in 0..P {
            for q in 0..Q {
                let mut s = hsum512(_mm512_add_ps(acc[p][q][0], acc[p][q][1]));
                for j in i..n {
                    s += super::weight(w[p], j) * crate::simd::bf16_value(x[q][j]);
                }
                out[p][q] = s;
            }
        }
        out
    }

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        tile::<1, R>([w], rows.map(|r| a.bf16.bits_row(r)))[0]
    }

    /// `out[i * stride + j]` = weight row `i < n` of `w` (rows of `rb` bytes) dotted with
    /// activation row `rows[j]`: four weight rows a tile for one activation row, two for
    /// two, one for more.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c")]
    pub(crate) fn rows<const R: usize>(
        w: &[u8],
        n: usize,
        rb: usize,
        a: &Acts,
        rows: [usize; R],
        out: &mut [f32],
        stride: usize,
    ) {
        let x = rows.map(|r| a.bf16.bits_row(r));
        crate::simd::tiles::tile_rows!(tile, w, n, rb, x, out, stride);
    }
}
