//! Q4_0, Q4_1 and Q8_0 weights repacked at load time for the AVX-512 VNNI matrix kernels.
//!
//! The GGUF layout keeps a row's blocks together, so a dot product decodes and scales
//! every block of every row for every activation row. Repacked, sixteen rows travel
//! together: for each group of 16 rows and each block column, the 16 f16 scales, then the
//! values interleaved four at a time (`[row 0: 4 values][row 1: 4 values]...`), so that
//! one `vpdpbusd` multiplies four values of 16 rows at once by the same four activation
//! values (broadcast). A block's integer dot products of 16 rows land in the 16 lanes of
//! one register, exact, and are scaled with one multiply-add for the 16 rows.
//!
//! Q4_0 and Q4_1 keep their nibbles (64 bytes hold 16 rows x 8 values: the low nibbles are
//! values 0..4 of each row, the high nibbles values 4..8); Q8_0 keeps its bytes, stored
//! plus 128 (unsigned, as `vpdpbusd` wants). The activation block's sum times the offset
//! (8 or 128) starts each block's integer sum, so the offset cancels exactly. Q4_1's 16
//! mins follow its scales and add `min x (d_a sum(a))` per block, as the other kernels do.
//!
//! Every row of a group is computed by the same instructions whatever the number of
//! activation rows (1 to 4) or which rows of the group a caller keeps: results are
//! batch-invariant and thread-count-invariant.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::acts::Acts;
use crate::format::{QK, WeightFormat};

/// Rows per group.
pub const GROUP: usize = 16;

/// A matrix's weights in the repacked layout.
pub struct Packed {
    format: WeightFormat,
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
            .field("rows", &self.rows)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// Bytes of one (group, block) cell: 16 f16 scales (and 16 f16 mins for Q4_1), then
/// 16 x 32 values.
fn cell_bytes(format: WeightFormat) -> usize {
    match format {
        WeightFormat::Q4_0 => 32 + 256,
        WeightFormat::Q4_1 => 64 + 256,
        _ => 32 + 512,
    }
}

impl Packed {
    /// Repacks `rows` rows of `data` (GGUF blocks, `row_bytes` per row). `None` for a
    /// format without a packed kernel, rows that are not whole groups, or a CPU without
    /// AVX-512 VNNI.
    pub fn new(format: WeightFormat, rows: usize, cols: usize, data: &[u8]) -> Option<Packed> {
        if !matches!(format, WeightFormat::Q4_0 | WeightFormat::Q4_1 | WeightFormat::Q8_0)
            || !rows.is_multiple_of(GROUP)
            || rows == 0
            || !cols.is_multiple_of(QK)
            || !crate::Isa::Avx512.is_available()
        {
            return None;
        }
        let (bb, blocks) = (format.block_bytes(), cols / QK);
        let row_bytes = blocks * bb;
        if data.len() != rows * row_bytes {
            return None;
        }
        let cb = cell_bytes(format);
        let mut bytes = Buffer::zeroed(rows / GROUP * blocks * cb);
        for (g, group) in bytes.chunks_exact_mut(blocks * cb).enumerate() {
            for (b, cell) in group.chunks_exact_mut(cb).enumerate() {
                let min = format == WeightFormat::Q4_1;
                let (scales, values) = cell.split_at_mut(if min { 64 } else { 32 });
                // Where a block's values start (after its f16 scale, and min for Q4_1).
                let vals = if min { 4 } else { 2 };
                for l in 0..GROUP {
                    let blk = &data[(g * GROUP + l) * row_bytes + b * bb..][..bb];
                    scales[2 * l..2 * l + 2].copy_from_slice(&blk[..2]);
                    if min {
                        scales[32 + 2 * l..32 + 2 * l + 2].copy_from_slice(&blk[2..4]);
                    }
                    let q = &blk[vals..];
                    let word = |i: usize| u32::from_le_bytes([q[i], q[i + 1], q[i + 2], q[i + 3]]);
                    let mut put = |chunk: usize, v: u32| {
                        values[64 * chunk + 4 * l..64 * chunk + 4 * l + 4]
                            .copy_from_slice(&v.to_le_bytes());
                    };
                    if format == WeightFormat::Q8_0 {
                        // Values 4 k..4 k + 4 of row l at 64 k + 4 l, plus 128.
                        for k in 0..8 {
                            put(k, word(4 * k) ^ 0x8080_8080);
                        }
                    } else {
                        // Chunk c holds values 8 c..8 c + 8 of row l at 64 c + 4 l: the low
                        // nibbles values 8 c + j, the high nibbles 8 c + 4 + j. GGUF keeps
                        // value e < 16 in byte e's low nibble, e >= 16 in byte e - 16's high.
                        const LO: u32 = 0x0F0F_0F0F;
                        let w: [u32; 4] = std::array::from_fn(|i| word(4 * i));
                        put(0, (w[0] & LO) | ((w[1] & LO) << 4));
                        put(1, (w[2] & LO) | ((w[3] & LO) << 4));
                        put(2, ((w[0] >> 4) & LO) | (w[1] & !LO));
                        put(3, ((w[2] >> 4) & LO) | (w[3] & !LO));
                    }
                }
            }
        }
        Some(Packed { format, rows, blocks, bytes })
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Group `g`'s 16 rows dotted with activation rows `rows`: `out[r][l]` is row
    /// `16 g + l` with activation row `rows[r]`.
    pub fn group<const R: usize>(&self, g: usize, a: &Acts, rows: [usize; R]) -> [[f32; GROUP]; R] {
        let len = self.blocks * cell_bytes(self.format);
        let p = &self.bytes[g * len..(g + 1) * len];
        assert_eq!(a.cols, self.blocks * QK, "activation width");
        // SAFETY: `Packed` exists only on a CPU with AVX-512 VNNI (checked in `new`).
        unsafe {
            let (nb, cb) = (self.blocks, cell_bytes(self.format));
            match self.format {
                WeightFormat::Q4_0 => group_kernel::<R, true, false, 8>(p, nb, cb, a, rows),
                WeightFormat::Q4_1 => group_kernel::<R, true, true, 0>(p, nb, cb, a, rows),
                _ => group_kernel::<R, false, false, 128>(p, nb, cb, a, rows),
            }
        }
    }
}

/// The kernel of every packed format, specialized at compile time: `NIB` for 4-bit values
/// (two per byte, as laid out by [`Packed::new`]), `MIN` for a per-row minimum (16 f16
/// mins after the scales: `w = q d + m`), `OFFSET` the constant added to each stored value.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn group_kernel<const R: usize, const NIB: bool, const MIN: bool, const OFFSET: i32>(
    p: &[u8],
    blocks: usize,
    cb: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    assert!(
        p.len() >= blocks * cb && cb >= 32 * (1 + usize::from(MIN)) + if NIB { 256 } else { 512 }
    );
    let x = rows.map(|r| a.q8.row(r));
    assert!(x.iter().all(|x| {
        x.qs.len() >= blocks * QK
            && x.d.len() >= blocks
            && x.s.len() >= blocks
            && x.isum.len() >= blocks
    }));
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let at = b * cb;
        // SAFETY: the cell's scales (and mins) lie inside `p` (checked above).
        let (dw, mw) = unsafe {
            let ptr = p.as_ptr().add(at);
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(ptr.cast()));
            let mw = if MIN {
                _mm512_cvtph_ps(_mm256_loadu_si256(ptr.add(32).cast()))
            } else {
                _mm512_setzero_ps()
            };
            (dw, mw)
        };
        let vals = at + 32 * (1 + usize::from(MIN));
        let mut v = [_mm512_setzero_si512(); 8];
        if NIB {
            for c in 0..4 {
                // SAFETY: the cell's 256 value bytes lie inside `p` (checked above).
                let q = unsafe { _mm512_loadu_si512(p.as_ptr().add(vals + 64 * c).cast()) };
                v[2 * c] = _mm512_and_si512(q, m4);
                v[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
            }
        } else {
            for k in 0..8 {
                // SAFETY: the cell's 512 value bytes lie inside `p` (checked above).
                v[k] = unsafe { _mm512_loadu_si512(p.as_ptr().add(vals + 64 * k).cast()) };
            }
        }
        for r in 0..R {
            let q = x[r].qs[b * QK..(b + 1) * QK].as_ptr();
            let mut isum = _mm512_set1_epi32(-OFFSET * x[r].isum[b]);
            for k in 0..8 {
                // SAFETY: values 4 k..4 k + 4 of the block's 32 lie inside the row.
                let four = unsafe { q.add(4 * k).cast::<i32>().read_unaligned() };
                isum = _mm512_dpbusd_epi32(isum, v[k], _mm512_set1_epi32(four));
            }
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(x[r].d[b]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[r]);
            if MIN {
                acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[r].s[b]), acc[r]);
            }
        }
    }
    let mut out = [[0f32; GROUP]; R];
    for r in 0..R {
        // SAFETY: `out[r]` has room for 16 floats.
        unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), acc[r]) };
    }
    out
}
