//! The AVX2 kernels of the repacked layouts: each group as two halves of 8 rows, four
//! values of each row by `maddubs` (unsigned weights times signed activations, pairs
//! summed into 16 bits), a block's 16-bit sums added while they cannot overflow, then
//! widened once by `madd` (with each row's scale where the format has one per group).
//!
//! `#[target_feature]` functions, reached only through a `Packed` made for AVX2 (so only
//! on a CPU with these features); raw loads read inside the cells, whose sizes are
//! checked at each kernel's entry.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::avx512::MXFP4_PLUS16;
use super::layout::{MXFP4_VALUES, q4k, q5k, q6k};
use super::{GROUP, four, pair, prefetch_ahead, prefetch_part};
use crate::acts::Acts;
use crate::format::{QK, QK_K};

/// Rows per half group.
const HALF: usize = 8;

/// Cell bytes a tile of [`tiles`] holds, at most: both halves of a tile read it, the
/// second from L1.
const TILE_BYTES: usize = 8 << 10;

/// The block columns in tiles of at most [`TILE_BYTES`] of cells of `cell` bytes (at least
/// one block a tile). Both halves of a group go over one tile before the next: every
/// row still adds its blocks in column order.
fn tiles(blocks: usize, cell: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let n = (TILE_BYTES / cell).max(1);
    (0..blocks).step_by(n).map(move |b| b..(b + n).min(blocks))
}

/// 8 f16 at `p` as f32.
///
/// # Safety
/// `p` must point at 16 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x8(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 16 bytes.
    unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
}

/// 32 bytes at `p`.
///
/// # Safety
/// `p` must point at 32 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn load(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 bytes.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Four activation values broadcast.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bcast(q: &[i8], at: usize) -> __m256i {
    _mm256_set1_epi32(four(q, at))
}

/// A half group's 8 scales (i16) each repeated in both halves of its 32-bit lane, for
/// `madd` against 16-bit pair sums.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn doubled(s: __m128i) -> __m256i {
    _mm256_set_m128i(_mm_unpackhi_epi16(s, s), _mm_unpacklo_epi16(s, s))
}

/// The 8-byte little-endian word at `b[at..]` as the low half of a register.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bytes8(b: &[u8], at: usize) -> __m128i {
    let w = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    _mm_cvtsi64_si128(w as i64)
}

/// Writes half `h`'s results (lane `l` of `acc[r]` is row `8 h + l`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store<const R: usize>(out: &mut [[f32; GROUP]; R], h: usize, acc: [__m256; R]) {
    for r in 0..R {
        // SAFETY: `out[r][8 h..8 h + 8]` has room for 8 floats.
        unsafe { _mm256_storeu_ps(out[r][HALF * h..].as_mut_ptr(), acc[r]) };
    }
}

/// Q4_0 and, with `MIN`, Q4_1; with `HIGH` Q5_0 and Q5_1 (a fifth bit per value from the
/// 64 bytes after the nibbles). Eight `maddubs` per block and row, summed in 16 bits while
/// they cannot overflow (all eight for 4-bit values: 8 x 2 x 15 x 128; four at a time for
/// 5-bit ones: 4 x 2 x 31 x 128), widened once; the offset (8 or 16) removed through the
/// activation block's integer sum.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4<const R: usize, const MIN: bool, const HIGH: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let heads = 32 * (1 + usize::from(MIN));
    let cb = heads + 256 + if HIGH { 64 } else { 0 };
    // The offset's term per block (-8 or -16 times the block's sum), none with a min.
    let off = match (MIN, HIGH) {
        (true, _) => None,
        (false, false) => Some(0),
        (false, true) => Some(1),
    };
    assert!(p.len() >= blocks * cb);
    let x = rows.map(|r| a.q8.row(r));
    assert!(x.iter().all(|x| {
        x.qs.len() >= blocks * QK
            && x.d.len() >= blocks
            && x.s.len() >= blocks
            && x.off.iter().all(|o| o.len() >= blocks)
    }));
    let (m4, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi16(1));
    let mut out = [[0f32; GROUP]; R];
    // Tile by tile (a few KiB of cells, which stay in L1 for the second half): the
    // group's bytes stream from memory while both halves compute, not in the first alone.
    let mut accs = [[_mm256_setzero_ps(); R]; 2];
    for tile in tiles(blocks, cb) {
        for h in 0..2 {
            let mut acc = accs[h];
            for b in tile.clone() {
                let cell = &p[b * cb..(b + 1) * cb];
                if h == 0 {
                    prefetch_ahead(cell);
                }
                // SAFETY: the offsets lie inside the cell (so for every load of this block).
                let (dw, mw) = unsafe {
                    let mw =
                        if MIN { f16x8(cell[32 + 16 * h..].as_ptr()) } else { _mm256_setzero_ps() };
                    (f16x8(cell[16 * h..].as_ptr()), mw)
                };
                // A chunk at a time (its two value vectors), every activation row taking it
                // into 16-bit sums: few registers live. 5-bit values widen every two chunks.
                let hb = if HIGH {
                    // SAFETY: as above.
                    unsafe { load(cell[heads + 256 + 32 * h..].as_ptr()) }
                } else {
                    m4
                };
                let mut s16 = [_mm256_setzero_si256(); R];
                let mut isum = [_mm256_setzero_si256(); R];
                for c in 0..4 {
                    // SAFETY: as above.
                    let q = unsafe { load(cell[heads + 64 * c + 32 * h..].as_ptr()) };
                    let mut v =
                        [_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4)];
                    if HIGH {
                        for (i, v) in v.iter_mut().enumerate() {
                            let bit = _mm256_srl_epi16(hb, _mm_cvtsi32_si128((2 * c + i) as i32));
                            let bit = _mm256_and_si256(bit, _mm256_set1_epi8(1));
                            *v = _mm256_or_si256(*v, _mm256_slli_epi16::<4>(bit));
                        }
                    }
                    for r in 0..R {
                        let q = &x[r].qs[b * QK..(b + 1) * QK];
                        let lo = _mm256_maddubs_epi16(v[0], bcast(q, 8 * c));
                        let hi = _mm256_maddubs_epi16(v[1], bcast(q, 8 * c + 4));
                        s16[r] = _mm256_add_epi16(s16[r], _mm256_add_epi16(lo, hi));
                        if HIGH && c % 2 == 1 {
                            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16[r], ones));
                            s16[r] = _mm256_setzero_si256();
                        }
                    }
                }
                for r in 0..R {
                    let mut isum = if HIGH { isum[r] } else { _mm256_madd_epi16(s16[r], ones) };
                    if let Some(k) = off {
                        isum = _mm256_add_epi32(isum, _mm256_set1_epi32(x[r].off[k][b]));
                    }
                    let scale = _mm256_mul_ps(dw, _mm256_set1_ps(x[r].d[b]));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[r]);
                    if MIN {
                        acc[r] = _mm256_fmadd_ps(mw, _mm256_set1_ps(x[r].s[b]), acc[r]);
                    }
                }
            }
            accs[h] = acc;
        }
    }
    store(&mut out, 0, accs[0]);
    store(&mut out, 1, accs[1]);
    out
}

/// Q8_0 (signed values): `maddubs` of the values' magnitudes with the activations
/// carrying the values' signs (at most 2 x 128 x 127 per 16-bit lane), widened at once.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q8_0<const R: usize>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = 32 + 512;
    assert!(p.len() >= blocks * cb);
    let x = rows.map(|r| a.q8.row(r));
    assert!(x.iter().all(|x| x.qs.len() >= blocks * QK && x.d.len() >= blocks));
    let ones = _mm256_set1_epi16(1);
    let mut out = [[0f32; GROUP]; R];
    // Tile by tile (a few KiB of cells, which stay in L1 for the second half): the
    // group's bytes stream from memory while both halves compute, not in the first alone.
    let mut accs = [[_mm256_setzero_ps(); R]; 2];
    for tile in tiles(blocks, cb) {
        for h in 0..2 {
            let mut acc = accs[h];
            for b in tile.clone() {
                let cell = &p[b * cb..(b + 1) * cb];
                if h == 0 {
                    prefetch_ahead(cell);
                }
                // SAFETY: the offsets lie inside the cell (so for every load of this block).
                let dw = unsafe { f16x8(cell[16 * h..].as_ptr()) };
                let mut isum = [_mm256_setzero_si256(); R];
                for c in 0..8 {
                    // SAFETY: as above.
                    let w = unsafe { load(cell[32 + 64 * c + 32 * h..].as_ptr()) };
                    let mag = _mm256_abs_epi8(w);
                    for r in 0..R {
                        let y = _mm256_sign_epi8(bcast(&x[r].qs[b * QK..(b + 1) * QK], 4 * c), w);
                        let t = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, y), ones);
                        isum[r] = _mm256_add_epi32(isum[r], t);
                    }
                }
                for r in 0..R {
                    let scale = _mm256_mul_ps(dw, _mm256_set1_ps(x[r].d[b]));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), scale, acc[r]);
                }
            }
            accs[h] = acc;
        }
    }
    store(&mut out, 0, accs[0]);
    store(&mut out, 1, accs[1]);
    out
}

/// Q4_K and, with `HIGH`, Q5_K (each value's fifth bit from the 64 bytes per group after
/// Q4_K's cell): per 32-value group, eight `maddubs` per row summed in 16 bits (all eight
/// for 4-bit values: 8 x 2 x 15 x 128; four at a time for 5-bit ones: 4 x 2 x 31 x 128),
/// widened by `madd` with the row's 6-bit scale; mins against the activations' per-32
/// sums in pairs; `d` and `dmin` once per super-block.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q4_k<const R: usize, const HIGH: bool>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = if HIGH { q5k::BYTES } else { q4k::BYTES };
    assert!(p.len() >= blocks * cb);
    let x = rows.map(|r| a.q8k.row(r));
    assert!(x.iter().all(|x| {
        x.qs.len() >= blocks * QK_K && x.d.len() >= blocks && x.sums32.len() >= 8 * blocks
    }));
    let m4 = _mm256_set1_epi8(0x0F);
    let mut out = [[0f32; GROUP]; R];
    // Tile by tile (a few KiB of cells, which stay in L1 for the second half): the
    // group's bytes stream from memory while both halves compute, not in the first alone.
    let mut accs = [[_mm256_setzero_ps(); R]; 2];
    for tile in tiles(blocks, cb) {
        for h in 0..2 {
            let mut acc = accs[h];
            for b in tile.clone() {
                let cell = &p[b * cb..(b + 1) * cb];
                // SAFETY: the offsets lie inside the cell (so for every load of this block).
                let (d, dmin) = unsafe {
                    (
                        f16x8(cell[q4k::D + 16 * h..].as_ptr()),
                        f16x8(cell[q4k::DMIN + 16 * h..].as_ptr()),
                    )
                };
                let mut sumi = [_mm256_setzero_si256(); R];
                for j in 0..8 {
                    if h == 0 {
                        prefetch_part(cell, j, 8);
                    }
                    let sc = doubled(_mm_cvtepu8_epi16(bytes8(cell, q4k::SCALES + 16 * j + 8 * h)));
                    let hb = if HIGH {
                        // SAFETY: as above.
                        unsafe { load(cell[q5k::HIGHS + 64 * j + 32 * h..].as_ptr()) }
                    } else {
                        m4
                    };
                    let fifth = |k: i32| {
                        let bit = _mm256_srl_epi16(hb, _mm_cvtsi32_si128(k));
                        _mm256_slli_epi16::<4>(_mm256_and_si256(bit, _mm256_set1_epi8(1)))
                    };
                    // A chunk at a time, every activation row taking it into 16-bit sums.
                    let mut s16 = [_mm256_setzero_si256(); R];
                    for c in 0..4 {
                        let at = q4k::VALUES + 256 * j + 64 * c + 32 * h;
                        // SAFETY: as above.
                        let q = unsafe { load(cell[at..].as_ptr()) };
                        let mut lo = _mm256_and_si256(q, m4);
                        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                        if HIGH {
                            lo = _mm256_or_si256(lo, fifth(2 * c as i32));
                            hi = _mm256_or_si256(hi, fifth(2 * c as i32 + 1));
                        }
                        for r in 0..R {
                            let q = &x[r].qs[b * QK_K + 32 * j..b * QK_K + 32 * j + 32];
                            let pl = _mm256_maddubs_epi16(lo, bcast(q, 8 * c));
                            let ph = _mm256_maddubs_epi16(hi, bcast(q, 8 * c + 4));
                            s16[r] = _mm256_add_epi16(s16[r], _mm256_add_epi16(pl, ph));
                            // 5-bit values widen every two chunks, 4-bit ones once.
                            if (HIGH && c % 2 == 1) || c == 3 {
                                sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(s16[r], sc));
                                s16[r] = _mm256_setzero_si256();
                            }
                        }
                    }
                }
                // SAFETY: as above.
                let mins: [__m256i; 4] = std::array::from_fn(|k| unsafe {
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(
                        cell[q4k::MINS + 32 * k + 16 * h..].as_ptr().cast(),
                    ))
                });
                for r in 0..R {
                    let mut m = _mm256_setzero_si256();
                    for (k, mins) in mins.iter().enumerate() {
                        let s = _mm256_set1_epi32(pair(x[r].sums32, 8 * b + 2 * k));
                        m = _mm256_add_epi32(m, _mm256_madd_epi16(*mins, s));
                    }
                    let da = _mm256_set1_ps(x[r].d[b]);
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi[r]), _mm256_mul_ps(d, da), acc[r]);
                    acc[r] =
                        _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, da), acc[r]);
                }
            }
            accs[h] = acc;
        }
    }
    store(&mut out, 0, accs[0]);
    store(&mut out, 1, accs[1]);
    out
}

/// Q6_K: per 16-value group, the 6-bit values rebuilt from nibbles and high bit pairs,
/// four `maddubs` per row summed two by two in 16 bits (at most 2 x 2 x 63 x 128), widened
/// by `madd` with the row's signed scale; the offset of 32 removed once per super-block
/// through the scales and the activations' per-16 sums.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn q6_k<const R: usize>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    assert!(p.len() >= blocks * q6k::BYTES);
    let x = rows.map(|r| a.q8k.row(r));
    assert!(x.iter().all(|x| {
        x.qs.len() >= blocks * QK_K && x.d.len() >= blocks && x.bsums.len() >= 16 * blocks
    }));
    let (m4, m2) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(3));
    let mut out = [[0f32; GROUP]; R];
    // Tile by tile (a few KiB of cells, which stay in L1 for the second half): the
    // group's bytes stream from memory while both halves compute, not in the first alone.
    let mut accs = [[_mm256_setzero_ps(); R]; 2];
    for tile in tiles(blocks, q6k::BYTES) {
        for h in 0..2 {
            let mut acc = accs[h];
            for b in tile.clone() {
                let cell = &p[b * q6k::BYTES..(b + 1) * q6k::BYTES];
                // SAFETY: the offsets lie inside the cell (so for every load of this block).
                let d = unsafe { f16x8(cell[q6k::D + 16 * h..].as_ptr()) };
                let mut sumi = [_mm256_setzero_si256(); R];
                for g in 0..16 {
                    if h == 0 {
                        prefetch_part(cell, g, 16);
                    }
                    let sc = doubled(_mm_cvtepi8_epi16(bytes8(cell, q6k::SCALES + 16 * g + 8 * h)));
                    let base = q6k::VALUES + q6k::GROUP_BYTES * g + 32 * h;
                    // SAFETY: as above.
                    let (q0, q1, hb) = unsafe {
                        (
                            load(cell[base..].as_ptr()),
                            load(cell[base + 64..].as_ptr()),
                            load(cell[base + 128..].as_ptr()),
                        )
                    };
                    let high = |bits: __m256i| _mm256_slli_epi16::<4>(_mm256_and_si256(bits, m2));
                    let v = [
                        _mm256_or_si256(_mm256_and_si256(q0, m4), high(hb)),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(q0), m4),
                            high(_mm256_srli_epi16::<2>(hb)),
                        ),
                        _mm256_or_si256(_mm256_and_si256(q1, m4), high(_mm256_srli_epi16::<4>(hb))),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(q1), m4),
                            high(_mm256_srli_epi16::<6>(hb)),
                        ),
                    ];
                    for r in 0..R {
                        let q = &x[r].qs[b * QK_K + 16 * g..b * QK_K + 16 * g + 16];
                        let s01 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(v[0], bcast(q, 0)),
                            _mm256_maddubs_epi16(v[1], bcast(q, 4)),
                        );
                        let s23 = _mm256_add_epi16(
                            _mm256_maddubs_epi16(v[2], bcast(q, 8)),
                            _mm256_maddubs_epi16(v[3], bcast(q, 12)),
                        );
                        let t = _mm256_add_epi32(
                            _mm256_madd_epi16(s01, sc),
                            _mm256_madd_epi16(s23, sc),
                        );
                        sumi[r] = _mm256_add_epi32(sumi[r], t);
                    }
                }
                let mut off = [_mm256_setzero_si256(); R];
                for pg in 0..8 {
                    // The scales of groups 2 pg and 2 pg + 1, row by row, as i16 pairs.
                    let s0 = bytes8(cell, q6k::SCALES + 32 * pg + 8 * h);
                    let s1 = bytes8(cell, q6k::SCALES + 32 * pg + 16 + 8 * h);
                    let pairs = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(s0, s1));
                    for r in 0..R {
                        let s = _mm256_set1_epi32(pair(x[r].bsums, 16 * b + 2 * pg));
                        off[r] = _mm256_add_epi32(off[r], _mm256_madd_epi16(pairs, s));
                    }
                }
                for r in 0..R {
                    let total = _mm256_sub_epi32(sumi[r], _mm256_slli_epi32::<5>(off[r]));
                    let da = _mm256_set1_ps(x[r].d[b]);
                    acc[r] =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(d, da), acc[r]);
                }
            }
            accs[h] = acc;
        }
    }
    store(&mut out, 0, accs[0]);
    store(&mut out, 1, accs[1]);
    out
}

/// 8 E8M0 exponent bytes (the low half of `e`) as their half scales, as
/// `formats::mxfp4::half_scale` computes them.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn half_scales(e: __m128i) -> __m256 {
    let e = _mm256_cvtepu8_epi32(e);
    let normal = _mm256_slli_epi32::<23>(_mm256_sub_epi32(e, _mm256_set1_epi32(1)));
    let small = _mm256_sllv_epi32(_mm256_set1_epi32(0x0020_0000), e);
    let is_small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    _mm256_castsi256_ps(_mm256_blendv_epi8(normal, small, is_small))
}

/// MXFP4: the nibbles look their values (plus 16) up with one byte shuffle, `maddubs`
/// with the activations summed in 16 bits two chunks at a time (4 x 2 x 28 x 128), the
/// offset removed through the activation block's `-16 x` sum; each row's E8M0 half scale
/// and the activations' scale applied once per block.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn mxfp4<const R: usize>(
    p: &[u8],
    blocks: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let cb = MXFP4_VALUES + 256;
    assert!(p.len() >= blocks * cb);
    let x = rows.map(|r| a.q8.row(r));
    assert!(
        x.iter().all(|x| {
            x.qs.len() >= blocks * QK && x.d.len() >= blocks && x.off[1].len() >= blocks
        })
    );
    // SAFETY: the table is 16 bytes.
    let table = unsafe { _mm_loadu_si128(MXFP4_PLUS16.as_ptr().cast()) };
    let table = _mm256_set_m128i(table, table);
    let (m4, ones) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi16(1));
    let mut out = [[0f32; GROUP]; R];
    // Tile by tile (a few KiB of cells, which stay in L1 for the second half): the
    // group's bytes stream from memory while both halves compute, not in the first alone.
    let mut accs = [[_mm256_setzero_ps(); R]; 2];
    for tile in tiles(blocks, cb) {
        for h in 0..2 {
            let mut acc = accs[h];
            for b in tile.clone() {
                let cell = &p[b * cb..(b + 1) * cb];
                if h == 0 {
                    prefetch_ahead(cell);
                }
                let dw = half_scales(bytes8(cell, 8 * h));
                let mut s16 = [_mm256_setzero_si256(); R];
                let mut isum = x.map(|x| _mm256_set1_epi32(x.off[1][b]));
                for c in 0..4 {
                    // SAFETY: the chunk's 32 bytes of this half lie inside the cell.
                    let q = unsafe { load(cell[MXFP4_VALUES + 64 * c + 32 * h..].as_ptr()) };
                    let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                    let hi =
                        _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4));
                    for r in 0..R {
                        let q = &x[r].qs[b * QK..(b + 1) * QK];
                        let pl = _mm256_maddubs_epi16(lo, bcast(q, 8 * c));
                        let ph = _mm256_maddubs_epi16(hi, bcast(q, 8 * c + 4));
                        s16[r] = _mm256_add_epi16(s16[r], _mm256_add_epi16(pl, ph));
                        if c % 2 == 1 {
                            isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(s16[r], ones));
                            s16[r] = _mm256_setzero_si256();
                        }
                    }
                }
                for r in 0..R {
                    let scale = _mm256_mul_ps(dw, _mm256_set1_ps(x[r].d[b]));
                    acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), scale, acc[r]);
                }
            }
            accs[h] = acc;
        }
    }
    store(&mut out, 0, accs[0]);
    store(&mut out, 1, accs[1]);
    out
}
