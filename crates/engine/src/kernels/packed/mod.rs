//! Weights repacked at load time for the matrix kernels: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
//! Q5_K, Q6_K and MXFP4, for AVX-512 VNNI, for AVX2 and for ARM64 NEON with `dotprod`
//! (whose `sdot` by a broadcast word multiplies 4 values of 4 rows, a quarter of a chunk)
//! and with `i8mm` (the same cells; `smmla` takes two activation rows at once).
//!
//! The GGUF layout keeps a row's blocks together, so a dot product decodes and scales
//! every block of every row for every activation row. Repacked, sixteen rows travel
//! together: for each group of 16 rows and each block column, one *cell* holds the 16
//! rows' scales, then their values interleaved four at a time (`[row 0: 4 values][row 1:
//! 4 values]...`), so that one integer dot product instruction multiplies four values of
//! 16 rows (AVX-512 `vpdpbusd`), 8 rows (AVX2 `maddubs`) or 4 rows (NEON `sdot`) by the
//! same four activation values (broadcast). A block's integer dot products of the rows land in the lanes of one
//! register, exact, and are scaled with one multiply-add for all of them: no horizontal
//! sums, no per-row scale work.
//!
//! Cells (a block column is 32 values for Q4_0 / Q4_1 / Q8_0, a 256-value super-block for
//! the K-quants; "16 x" is one per row, `l` the row within the group):
//! - Q4_0: 16 f16 scales, then 4 chunks of 64 bytes of nibbles (`[4 l + i]` of chunk `c`:
//!   value `8 c + i` in the low nibble, `8 c + 4 + i` in the high one).
//! - Q4_1: as Q4_0 with 16 f16 mins after the scales.
//! - Q5_0, Q5_1: as Q4_0, Q4_1, then 64 bytes of fifth bits (`[4 l + i]`: bit `v` for
//!   value `4 v + i`, the `v`-th value vector a kernel rebuilds).
//! - Q8_0: 16 f16 scales, then 8 chunks of 64 bytes (`[4 l + i]` of chunk `c`: value
//!   `4 c + i`), stored plus 128 for AVX-512 (`vpdpbusd` wants unsigned weights) and as
//!   they are for AVX2 (which takes signs apart) and NEON (whose `sdot` is signed).
//! - Q4_K: 16 f16 `d`, 16 f16 `dmin`, the 8 x 16 6-bit scales (`[16 j + l]`), the 8 x 16
//!   mins as pairs (`[32 k + 2 l]`: mins `2 k`, `2 k + 1`), then per 32-value group `j`
//!   four Q4_0-style chunks of nibbles (2 368 bytes for 16 x 144).
//! - Q5_K: Q4_K's cell, then per 32-value group 64 bytes of fifth bits as Q5_0's (2 880
//!   bytes for 16 x 176).
//! - MXFP4: the 16 E8M0 exponent bytes, then 4 chunks of 64 bytes of nibbles as Q4_0's
//!   (indices into the E2M1 values, which the kernels look up with one byte shuffle: 272
//!   bytes, as 16 x 17).
//! - Q6_K: 16 f16 `d`, the 16 x 16 signed scales (`[16 g + l]`), then per 16-value group
//!   `g` two chunks of low nibbles (as Q4_0's) and 64 bytes of high bit pairs (`[4 l + i]`:
//!   bits `2 v..2 v + 2` for value `4 v + i` of the group) (3 360 bytes, as 16 x 210).
//!
//! Every row of a group is computed by the same instructions whatever the number of
//! activation rows (1 to 4) or which rows of the group a caller keeps: results are
//! batch-invariant and thread-count-invariant.
#![allow(unsafe_code)]

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod layout;
#[cfg(target_arch = "aarch64")]
mod neon;

use crate::acts::Acts;
use crate::format::WeightFormat;
use crate::isa::Isa;

/// Rows per group.
pub const GROUP: usize = 16;

/// How far ahead of the cell a kernel reads it asks for the group's bytes (the x86 32-block
/// kernels): past the next AVX2 tile, so a tile's lines are on their way while the tile
/// before computes.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 8 << 10;

/// Asks for the cache lines [`PREFETCH`] bytes past each line of `cell` into L2 (a hint:
/// lines past the matrix are never read, and a prefetch never faults; SSE's, so every
/// x86-64 tier has it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_ahead(cell: &[u8]) {
    prefetch_part(cell, 0, 1);
}

/// [`prefetch_ahead`] for part `k` of `n` of `cell`'s lines: the K-quants' cells (2-3 KiB)
/// ask for theirs a part per step of their loop, since a cell's worth of requests at once
/// fills the core's queue of misses and stalls the loads the kernel is waiting on.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_part(cell: &[u8], k: usize, n: usize) {
    use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
    let lines = cell.len().div_ceil(64);
    for line in lines * k / n..lines * (k + 1) / n {
        // SAFETY: SSE is part of every x86-64 CPU; a prefetch reads nothing and never
        // faults, so any address, inside the matrix or past it, is sound.
        unsafe {
            _mm_prefetch::<_MM_HINT_T1>(cell.as_ptr().wrapping_add(PREFETCH + 64 * line).cast())
        };
    }
}

/// Two consecutive i16 sums as one i32 (the low one first), for a broadcast pair.
#[inline(always)]
fn pair(s: &[i16], at: usize) -> i32 {
    (u32::from(s[at] as u16) | (u32::from(s[at + 1] as u16) << 16)) as i32
}

/// Four activation values at `q[at..at + 4]` as one i32, to broadcast.
#[inline(always)]
fn four(q: &[i8], at: usize) -> i32 {
    i32::from_le_bytes([q[at] as u8, q[at + 1] as u8, q[at + 2] as u8, q[at + 3] as u8])
}

/// A matrix's weights in the repacked layout.
pub struct Packed {
    format: WeightFormat,
    isa: Isa,
    rows: usize,
    blocks: usize,
    bytes: Buffer,
}

/// Zeroed bytes for a repacked matrix: an anonymous mapping populated when it is made, or
/// a vector where the mapping fails.
enum Buffer {
    Map(memmap2::MmapMut),
    Vec(Vec<u8>),
}

impl Buffer {
    fn zeroed(len: usize) -> Buffer {
        // Populated at once: one call maps every page (the kernel zeroes them in bulk)
        // instead of one fault per page while repacking.
        match memmap2::MmapOptions::new().len(len).populate().map_anon() {
            Ok(m) => Buffer::Map(m),
            Err(_) => Buffer::Vec(vec![0; len]),
        }
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Buffer::Map(m) => m,
            Buffer::Vec(v) => v,
        }
    }
}

impl std::ops::DerefMut for Buffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match self {
            Buffer::Map(m) => m,
            Buffer::Vec(v) => v,
        }
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("format", &self.format)
            .field("isa", &self.isa)
            .field("rows", &self.rows)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// Groups of rows repacked between two reports of [`Packed::new_then`] (4096 rows).
pub const RELEASE_GROUPS: usize = 256;

/// Whether `format` has a repacked kernel.
pub fn supports(format: WeightFormat) -> bool {
    use WeightFormat::*;
    matches!(format, Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 | Q4K | Q5K | Q6K | MXFP4)
}

impl Packed {
    /// Repacks `rows` rows of `data` (GGUF blocks of `cols` values per row) for `isa`'s
    /// kernels. `None` for a format without a packed kernel, rows that are not whole
    /// groups, the scalar reference, or an instruction set this CPU lacks.
    pub fn new(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        data: &[u8],
        isa: Isa,
    ) -> Option<Packed> {
        Packed::new_then(format, rows, cols, data, isa, &mut |_| {})
    }

    /// [`Packed::new`], telling `done` how many leading bytes of `data` it will not read
    /// again, every [`RELEASE_GROUPS`] groups and at the end: the owner of a mapping can
    /// drop those pages while the rest is copied, so a big matrix is never held twice.
    pub fn new_then(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        data: &[u8],
        isa: Isa,
        done: &mut dyn FnMut(usize),
    ) -> Option<Packed> {
        let qk = format.block_elems();
        if !supports(format)
            || !rows.is_multiple_of(GROUP)
            || rows == 0
            || !cols.is_multiple_of(qk)
            || matches!(isa, Isa::Scalar | Isa::Neon)
            || !isa.is_available()
        {
            return None;
        }
        let (bb, blocks) = (format.block_bytes(), cols / qk);
        let row_bytes = blocks * bb;
        if data.len() != rows * row_bytes {
            return None;
        }
        let cb = layout::cell_bytes(format);
        let mut bytes = Buffer::zeroed(rows / GROUP * blocks * cb);
        for (g, group) in bytes.chunks_exact_mut(blocks * cb).enumerate() {
            for (b, cell) in group.chunks_exact_mut(cb).enumerate() {
                let block = |l: usize| &data[(g * GROUP + l) * row_bytes + b * bb..][..bb];
                layout::fill(format, isa, cell, block);
            }
            if (g + 1) % RELEASE_GROUPS == 0 {
                done((g + 1) * GROUP * row_bytes);
            }
        }
        done(data.len());
        Some(Packed { format, isa, rows, blocks, bytes })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The instruction set its kernels use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Group `g`'s 16 rows dotted with activation rows `rows`: `out[r][l]` is row
    /// `16 g + l` with activation row `rows[r]`.
    pub fn group<const R: usize>(&self, g: usize, a: &Acts, rows: [usize; R]) -> [[f32; GROUP]; R] {
        let cb = layout::cell_bytes(self.format);
        let len = self.blocks * cb;
        let p = &self.bytes[g * len..(g + 1) * len];
        assert_eq!(a.cols, self.blocks * self.format.block_elems(), "activation width");
        let nb = self.blocks;
        // SAFETY: a `Packed` exists only on a CPU with its instruction set (checked in
        // `new`), and `isa` is never the scalar one (nor, on ARM64, NEON without dotprod).
        #[cfg(target_arch = "aarch64")]
        {
            use WeightFormat::*;
            macro_rules! neon {
                ($mm:literal) => {
                    // SAFETY: as above; `$mm` (smmla) only for a `Packed` of the i8mm tier.
                    unsafe {
                        match self.format {
                            Q4_0 => neon::q4::<R, false, false, $mm>(p, nb, a, rows),
                            Q4_1 => neon::q4::<R, true, false, $mm>(p, nb, a, rows),
                            Q5_0 => neon::q4::<R, false, true, $mm>(p, nb, a, rows),
                            Q5_1 => neon::q4::<R, true, true, $mm>(p, nb, a, rows),
                            Q8_0 => neon::q8_0::<R, $mm>(p, nb, a, rows),
                            Q4K => neon::q4_k::<R, false, $mm>(p, nb, a, rows),
                            Q5K => neon::q4_k::<R, true, $mm>(p, nb, a, rows),
                            MXFP4 => neon::mxfp4::<R, $mm>(p, nb, a, rows),
                            _ => neon::q6_k::<R, $mm>(p, nb, a, rows),
                        }
                    }
                };
            }
            if self.isa == Isa::NeonI8mm { neon!(true) } else { neon!(false) }
        }
        // SAFETY: as above.
        #[cfg(target_arch = "x86_64")]
        unsafe {
            use WeightFormat::*;
            if self.isa == Isa::Avx512 {
                match self.format {
                    Q4_0 => avx512::block32::<R, true, false, false, 8>(p, nb, cb, a, rows),
                    Q4_1 => avx512::block32::<R, true, true, false, 0>(p, nb, cb, a, rows),
                    Q5_0 => avx512::block32::<R, true, false, true, 16>(p, nb, cb, a, rows),
                    Q5_1 => avx512::block32::<R, true, true, true, 0>(p, nb, cb, a, rows),
                    Q8_0 => avx512::block32::<R, false, false, false, 128>(p, nb, cb, a, rows),
                    Q4K => avx512::q4_k::<R, false>(p, nb, a, rows),
                    Q5K => avx512::q4_k::<R, true>(p, nb, a, rows),
                    MXFP4 => avx512::mxfp4::<R>(p, nb, a, rows),
                    _ => avx512::q6_k::<R>(p, nb, a, rows),
                }
            } else {
                match self.format {
                    Q4_0 => avx2::q4::<R, false, false>(p, nb, a, rows),
                    Q4_1 => avx2::q4::<R, true, false>(p, nb, a, rows),
                    Q5_0 => avx2::q4::<R, false, true>(p, nb, a, rows),
                    Q5_1 => avx2::q4::<R, true, true>(p, nb, a, rows),
                    Q8_0 => avx2::q8_0::<R>(p, nb, a, rows),
                    Q4K => avx2::q4_k::<R, false>(p, nb, a, rows),
                    Q5K => avx2::q4_k::<R, true>(p, nb, a, rows),
                    MXFP4 => avx2::mxfp4::<R>(p, nb, a, rows),
                    _ => avx2::q6_k::<R>(p, nb, a, rows),
                }
            }
        }
    }
}
