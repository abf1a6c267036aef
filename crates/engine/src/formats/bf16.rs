//! BF16 weights: bfloat16, multiplying the f32 activations as they are (the reference
//! through F16's chunked loop).

use half::bf16;

use crate::acts::Acts;

/// Dequantizes a row into `out`.
pub(crate) fn dequantize(row: &[u8], out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
        *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
    }
}

/// The scalar reference dot product with f32 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    super::f16::dot_chunks(dequantize, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx2::*;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        fn scalar_weight(w: &[u8], j: usize) -> f32 {
            half::bf16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
        }
        float_dot!(w, a, rows, 2, |i: usize| {
            // SAFETY: 8 weights at element i lie inside w (its length is checked first).
            let h = unsafe { load128(w.as_ptr().add(2 * i)) };
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
        })
    }
}

/// The AVX-512 kernel (`#[target_feature]`: selected only on a CPU with these features;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::simd::avx2::load256;
    use crate::simd::avx512::float_dot512;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        fn scalar_weight(w: &[u8], j: usize) -> f32 {
            half::bf16::from_le_bytes([w[2 * j], w[2 * j + 1]]).to_f32()
        }
        float_dot512!(w, a, rows, 2, |i: usize| {
            // SAFETY: 16 weights at element i lie inside w (its length is checked first).
            let h = unsafe { load256(w.as_ptr().add(2 * i)) };
            _mm512_castsi512_ps(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(h)))
        })
    }
}
