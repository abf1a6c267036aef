//! Q5_1: blocks of 32 5-bit values with an f16 scale and min (`value = q * d + m`), 24
//! bytes: scale, min, 32 high bits, then the low nibbles. Decoded and multiplied by
//! Q5_0's 5-bit code with the min switched on. Multiplies Q8 activation blocks of 32.

use super::block32::{self, Decoded32};
use super::q5_0::decode5;
use crate::acts::Acts;

/// Bytes per block.
pub(crate) const BLOCK_BYTES: usize = 24;

/// Decodes block `b` of a row.
pub(crate) fn decode(row: &[u8], b: usize) -> Decoded32 {
    decode5(&row[b * BLOCK_BYTES..(b + 1) * BLOCK_BYTES], true)
}

/// The scalar reference dot product with Q8 activation rows.
pub(crate) fn scalar<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    block32::dot_ref(decode, w, a, rows)
}

/// The AVX2 + FMA + F16C kernel (`#[target_feature]`: selected only on a CPU with them;
/// raw loads read inside ranges checked at the kernel's entry).
#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    #![allow(unsafe_code)]

    use std::arch::x86_64::*;

    use crate::acts::Acts;
    use crate::format::QK;
    use crate::formats::q5_0::avx2::q5;
    use crate::simd::avx2::*;

    q5!(dot, 24, true);
}
