//! F32 weights: 4 little-endian bytes a value, multiplying the f32 activations as they are.

use crate::acts::Acts;

/// Dequantizes (copies) a row into `out`.
pub(crate) fn dequantize(row: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(row.chunks_exact(4)) {
        *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
}

/// The scalar reference dot product with f32 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    let mut out = [0f32; R];
    for (r, o) in rows.iter().zip(out.iter_mut()) {
        let x = a.f32_row(*r);
        let mut acc = 0f32;
        for (c, &v) in w.chunks_exact(4).zip(x) {
            acc += f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * v;
        }
        *o = acc;
    }
    out
}

/// Weight `j` of a row (the x86 kernels' tails).
#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn weight(w: &[u8], j: usize) -> f32 {
    f32::from_le_bytes([w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]])
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx2::*;

    float_kernels!(
        4,
        |w: &[u8], i: usize| {
            // SAFETY: 8 weights at element `i <= n - 8` lie inside w (the tile checks that
            // every weight row holds `n` weights first).
            unsafe { _mm256_loadu_ps(w.as_ptr().add(4 * i).cast()) }
        },
        |w: &[u8], j: usize| super::weight(w, j)
    );
}

/// The AVX-512 kernel (`#[target_feature]`: selected only on a CPU with these features;
/// raw loads read inside ranges checked at the kernel's entry): the AVX2 kernel's tiles
/// 16 lanes wide (`float_kernels512!`).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx512::float_kernels512;

    float_kernels512!(
        |a, r| a.f32_row(r),
        4,
        |w: &[u8], i: usize| {
            // SAFETY: 16 weights at element `i <= n - 16` lie inside w (the tile checks
            // that every weight row holds `n` weights first).
            unsafe { _mm512_loadu_ps(w.as_ptr().add(4 * i).cast()) }
        },
        |w: &[u8], j: usize| super::weight(w, j)
    );
}
