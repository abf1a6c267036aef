//! F16 weights: IEEE half floats, multiplying the f32 activations as they are. Also the
//! chunked reference loop BF16 shares.

use half::f16;

use crate::acts::Acts;

/// Dequantizes a row into `out`.
pub(crate) fn dequantize(row: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
        *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
    }
}

/// The reference dot product of a 16-bit float row with f32 activation rows `x`: 64 weights at a
/// time dequantized by `dequantize`, then multiplied and added in order.
pub(crate) fn dot_chunks<const R: usize>(
    dequantize: impl Fn(&[u8], &mut [f32]),
    w: &[u8],
    x: [&[f32]; R],
) -> [f32; R] {
    let mut buf = [0f32; 64];
    let mut acc = [0f32; R];
    for (k, c) in w.chunks(128).enumerate() {
        let n = c.len() / 2;
        dequantize(c, &mut buf[..n]);
        for r in 0..R {
            let x = &x[r][64 * k..64 * k + n];
            for (p, q) in buf[..n].iter().zip(x) {
                acc[r] += p * q;
            }
        }
    }
    acc
}

/// The scalar reference dot product with f32 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    dot_chunks(dequantize, w, rows.map(|r| a.f32_row(r)))
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
        2,
        |w: &[u8], i: usize| {
            // SAFETY: 8 weights at element `i <= n - 8` lie inside w (the tile checks that
            // every weight row holds `n` weights first).
            _mm256_cvtph_ps(unsafe { load128(w.as_ptr().add(2 * i)) })
        },
        |w: &[u8], j: usize| half::f16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
    );
}

/// The AVX-512 kernel (`#[target_feature]`: selected only on a CPU with these features;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx2::load256;
    use crate::simd::avx512::float_kernels512;

    float_kernels512!(
        |a, r| a.f32_row(r),
        2,
        |w: &[u8], i: usize| {
            // SAFETY: 16 weights at element `i <= n - 16` lie inside w (the tile checks
            // that every weight row holds `n` weights first).
            _mm512_cvtph_ps(unsafe { load256(w.as_ptr().add(2 * i)) })
        },
        |w: &[u8], j: usize| half::f16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
    );
}
