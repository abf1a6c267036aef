//! Q5_K: Q4_K's super-block with a fifth bit per value (32 bytes of high bits after the
//! scales, 176 bytes in all); decoded and multiplied by Q4_K's code with the fifth bit
//! switched on. Multiplies Q8_K activation blocks of 256.

use super::kquant::{self, DecodedK};
use crate::acts::Acts;

/// Bytes per super-block.
pub(crate) const BLOCK_BYTES: usize = 176;

/// Decodes super-block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> DecodedK {
    super::q4_k::decode_q4_5::<true>(&row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES])
}

/// The scalar reference dot product with Q8_K activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    kquant::dot_ref(decode, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use crate::acts::Acts;
    use crate::formats::q4_k::avx2::dot_q4_5;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        dot_q4_5::<R, true>(w, a, rows)
    }
}

/// The AVX-512 kernel: Q4_K's with the fifth bit.
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use crate::acts::Acts;
    use crate::formats::q4_k::avx512::dot_q4_5;

    /// The dot products of one weight row with `R` activation rows.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(crate) fn dot<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
        dot_q4_5::<R, true>(w, a, rows)
    }
}
