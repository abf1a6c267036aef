//! Where each value, scale and min of a group's 16 rows goes in a cell (the layouts the
//! module documentation lists), and the offsets the kernels read them at.

use crate::format::WeightFormat;
use crate::formats::{q4_k, q5_0, q6_k};
use crate::isa::Isa;

use super::GROUP;

/// Q4_K cell: `d` at 0, `dmin` at 32, scales at 64, min pairs at 192, values at 320.
pub(super) mod q4k {
    /// The 16 f16 super-scales.
    pub const D: usize = 0;
    /// The 16 f16 super-mins.
    pub const DMIN: usize = 32;
    /// The 6-bit scales, `[16 j + l]`.
    pub const SCALES: usize = 64;
    /// The 6-bit mins in pairs, `[32 k + 2 l]`.
    pub const MINS: usize = 192;
    /// Per 32-value group `j`, 256 bytes of nibbles.
    pub const VALUES: usize = 320;
    /// The whole cell.
    pub const BYTES: usize = VALUES + 8 * 256;
}

/// Q5_K cell: Q4_K's, then per 32-value group `j` 64 bytes of fifth bits (`[4 l + i]`:
/// bit `v` for value `4 v + i` of the group, as Q5_0's).
pub(super) mod q5k {
    /// Per 32-value group `j`, 64 bytes of fifth bits.
    pub const HIGHS: usize = super::q4k::BYTES;
    /// The whole cell.
    pub const BYTES: usize = HIGHS + 8 * 64;
}

/// Q6_K cell: `d` at 0, scales at 32, then per 16-value group 192 bytes of values.
pub(super) mod q6k {
    /// The 16 f16 super-scales.
    pub const D: usize = 0;
    /// The signed 8-bit scales, `[16 g + l]`.
    pub const SCALES: usize = 32;
    /// Per 16-value group `g`: 128 bytes of low nibbles, then 64 of high bit pairs.
    pub const VALUES: usize = 288;
    /// Bytes per 16-value group.
    pub const GROUP_BYTES: usize = 192;
    /// The whole cell.
    pub const BYTES: usize = VALUES + 16 * GROUP_BYTES;
}

/// Bytes of one (group, block column) cell.
pub(super) fn cell_bytes(format: WeightFormat) -> usize {
    match format {
        WeightFormat::Q4_0 => 32 + 256,
        WeightFormat::Q4_1 => 64 + 256,
        WeightFormat::Q5_0 => 32 + 256 + 64,
        WeightFormat::Q5_1 => 64 + 256 + 64,
        WeightFormat::Q4K => q4k::BYTES,
        WeightFormat::Q5K => q5k::BYTES,
        WeightFormat::Q6K => q6k::BYTES,
        WeightFormat::MXFP4 => MXFP4_VALUES + 256,
        _ => 32 + 512,
    }
}

/// Puts 8 values of row `l` (each below 16) into a 64-byte chunk of nibbles: values 0..4
/// in the low nibbles of bytes `4 l..4 l + 4`, values 4..8 in their high nibbles.
fn put_nibbles(chunk: &mut [u8], l: usize, v: &[u8]) {
    for i in 0..4 {
        chunk[4 * l + i] = (v[i] & 0xF) | ((v[4 + i] & 0xF) << 4);
    }
}

/// Fills `cell` for `format` from the 16 rows' blocks of its column (`block(l)` is row
/// `l`'s block), in the layout `isa`'s kernels read.
pub(super) fn fill<'a>(
    format: WeightFormat,
    isa: Isa,
    cell: &mut [u8],
    block: impl Fn(usize) -> &'a [u8],
) {
    for l in 0..GROUP {
        let blk = block(l);
        match format {
            WeightFormat::Q4K => q4_k_row::<false>(cell, l, blk),
            WeightFormat::Q5K => q4_k_row::<true>(cell, l, blk),
            WeightFormat::Q6K => q6_k_row(cell, l, blk),
            WeightFormat::MXFP4 => mxfp4_row(cell, l, blk),
            _ => block32_row(format, isa, cell, l, blk),
        }
    }
}

/// Row `l` of a Q4_0, Q4_1, Q5_0, Q5_1 or Q8_0 cell.
fn block32_row(format: WeightFormat, isa: Isa, cell: &mut [u8], l: usize, blk: &[u8]) {
    use WeightFormat::*;
    let min = matches!(format, Q4_1 | Q5_1);
    let (scales, values) = cell.split_at_mut(if min { 64 } else { 32 });
    scales[2 * l..2 * l + 2].copy_from_slice(&blk[..2]);
    if min {
        scales[32 + 2 * l..32 + 2 * l + 2].copy_from_slice(&blk[2..4]);
    }
    let q = &blk[if min { 4 } else { 2 }..];
    match format {
        Q8_0 => {
            // Values 4 c..4 c + 4 of row l at 64 c + 4 l; plus 128 for VNNI's unsigned
            // operand.
            let flip = if isa == Isa::Avx512 { 0x80 } else { 0 };
            for c in 0..8 {
                for i in 0..4 {
                    values[64 * c + 4 * l + i] = q[4 * c + i] ^ flip;
                }
            }
        }
        Q4_0 | Q4_1 => {
            // GGUF keeps value e < 16 in byte e's low nibble, e >= 16 in byte e - 16's high.
            let v: [u8; 32] =
                std::array::from_fn(|e| if e < 16 { q[e] & 0xF } else { q[e - 16] >> 4 });
            for c in 0..4 {
                put_nibbles(&mut values[64 * c..64 * c + 64], l, &v[8 * c..8 * c + 8]);
            }
        }
        _ => {
            // Q5_0 / Q5_1: the low nibbles as Q4_0's, then 64 bytes of fifth bits: bit v of
            // byte 4 l + i is value 4 v + i's (the v-th value vector the kernels rebuild).
            let off = if min { 0 } else { 16 };
            let d = q5_0::decode5(blk, min);
            let u: [u8; 32] = std::array::from_fn(|e| (i16::from(d.q[e]) + off) as u8);
            for c in 0..4 {
                put_nibbles(&mut values[64 * c..64 * c + 64], l, &u[8 * c..8 * c + 8]);
            }
            for i in 0..4 {
                values[256 + 4 * l + i] =
                    (0..8).fold(0, |b, v| b | (((u[4 * v + i] >> 4) & 1) << v));
            }
        }
    }
}

/// Row `l` of a Q4_K cell, or with `HIGH` of a Q5_K cell (the same head and nibbles, then
/// the fifth bits).
fn q4_k_row<const HIGH: bool>(cell: &mut [u8], l: usize, blk: &[u8]) {
    cell[q4k::D + 2 * l..q4k::D + 2 * l + 2].copy_from_slice(&blk[0..2]);
    cell[q4k::DMIN + 2 * l..q4k::DMIN + 2 * l + 2].copy_from_slice(&blk[2..4]);
    for j in 0..8 {
        let (sc, m) = q4_k::scale_min_k4(j, &blk[4..16]);
        cell[q4k::SCALES + 16 * j + l] = sc;
        cell[q4k::MINS + 32 * (j / 2) + 2 * l + j % 2] = m;
    }
    let q = q4_k::decode_q4_5::<HIGH>(blk).q;
    for j in 0..8 {
        let at = q4k::VALUES + 256 * j;
        for c in 0..4 {
            let v: [u8; 8] = std::array::from_fn(|i| q[32 * j + 8 * c + i] as u8);
            put_nibbles(&mut cell[at + 64 * c..at + 64 * c + 64], l, &v);
        }
        if HIGH {
            for i in 0..4 {
                cell[q5k::HIGHS + 64 * j + 4 * l + i] =
                    (0..8).fold(0, |b, v| b | ((((q[32 * j + 4 * v + i] as u8) >> 4) & 1) << v));
            }
        }
    }
}

/// Where an MXFP4 cell's nibbles start: after the 16 rows' E8M0 exponent bytes.
pub(super) const MXFP4_VALUES: usize = 16;

/// Row `l` of an MXFP4 cell: its exponent byte at `l`, then its 32 nibbles (indices into
/// the E2M1 values, looked up by the kernels) as Q4_0's, 272 bytes as 16 x 17.
fn mxfp4_row(cell: &mut [u8], l: usize, blk: &[u8]) {
    cell[l] = blk[0];
    let q = &blk[1..17];
    let v: [u8; 32] = std::array::from_fn(|e| if e < 16 { q[e] & 0xF } else { q[e - 16] >> 4 });
    let values = &mut cell[MXFP4_VALUES..];
    for c in 0..4 {
        put_nibbles(&mut values[64 * c..64 * c + 64], l, &v[8 * c..8 * c + 8]);
    }
}

/// Row `l` of a Q6_K cell.
fn q6_k_row(cell: &mut [u8], l: usize, blk: &[u8]) {
    cell[q6k::D + 2 * l..q6k::D + 2 * l + 2].copy_from_slice(&blk[208..210]);
    for g in 0..16 {
        cell[q6k::SCALES + 16 * g + l] = blk[192 + g];
    }
    // The decoded values are q - 32; stored as q (0..63).
    let q = q6_k::decode(blk, 0).q.map(|v| (v + 32) as u8);
    for g in 0..16 {
        let at = q6k::VALUES + q6k::GROUP_BYTES * g;
        let v = &q[16 * g..16 * g + 16];
        for c in 0..2 {
            put_nibbles(&mut cell[at + 64 * c..at + 64 * c + 64], l, &v[8 * c..8 * c + 8]);
        }
        for i in 0..4 {
            let pairs = (0..4).fold(0u8, |b, k| b | (((v[4 * k + i] >> 4) & 3) << (2 * k)));
            cell[at + 128 + 4 * l + i] = pairs;
        }
    }
}
