//! BF16 weights: bfloat16, multiplying activations rounded to bfloat16 (`Acts::bf16`, as
//! llama.cpp's BF16 products do). Every weight-times-activation product is then exact in
//! f32, so the tiers differ only in the order of their additions: the AVX2 and AVX-512
//! kernels widen both operands' pairs to f32, the AVX-512 BF16 kernel multiplies the
//! 16-bit pairs as they are (`vdpbf16ps`, 32 products an instruction), and NEON widens
//! the weights against the activations' f32 copy. The reference runs through F16's
//! chunked loop.

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
/// raw loads read inside ranges checked at the kernel's entry): both operands read as
/// bfloat16 pairs, 16 values a 256-bit load, in tiles of weight rows by activation rows
/// (`simd::tiles::bf16_kernels!`: four weight rows per activation load at decode, an
/// even and an odd accumulator per pair).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    crate::simd::tiles::bf16_kernels!(
        "avx2,fma,f16c",
        __m256,
        8,
        1,
        _mm256_setzero_ps,
        _mm256_loadu_si256,
        _mm256_and_si256,
        _mm256_set1_epi32,
        _mm256_slli_epi32,
        _mm256_castsi256_ps,
        _mm256_fmadd_ps,
        _mm256_add_ps,
        crate::simd::avx2::hsum
    );
}

/// The AVX-512 kernel for CPUs without `avx512bf16` (`#[target_feature]`: selected only on
/// a CPU with these features; raw loads read inside ranges checked at the kernel's
/// entry): the AVX2 kernel's tiles 512 bits wide (32 values a load of each operand, half
/// the activation bytes of the f32 copy), two loads a run, so four accumulators per pair.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    crate::simd::tiles::bf16_kernels!(
        "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c",
        __m512,
        16,
        2,
        _mm512_setzero_ps,
        _mm512_loadu_si512,
        _mm512_and_si512,
        _mm512_set1_epi32,
        _mm512_slli_epi32,
        _mm512_castsi512_ps,
        _mm512_fmadd_ps,
        _mm512_add_ps,
        crate::simd::avx512::hsum512
    );
}

/// The AVX-512 BF16 kernel: `vdpbf16ps` multiplies 32 weight and activation pairs into 16
/// f32 lanes per instruction (each lane adds the odd pair's product, then the even's; a
/// subnormal input or result counts as zero). Selected only on a CPU with `avx512bf16`;
/// raw loads read inside ranges checked at the kernel's entry.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512bf16 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

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

    crate::simd::tiles::tile_fns!(
        "avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,avx2,fma,f16c",
        |a, r| a.bf16.bits_row(r)
    );
}
