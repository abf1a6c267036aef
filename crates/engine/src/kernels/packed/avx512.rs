//! The AVX-512 VNNI kernels of the repacked layouts: 16 rows per register, four values
//! of each by `vpdpbusd`, scales for all 16 rows in one multiply.
//!
//! `#[target_feature]` functions, reached only through a `Packed` made for AVX-512 (so
//! only on a CPU with these features); raw loads read inside the cells, whose sizes are
//! checked at each kernel's entry.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::layout::{MXFP4_VALUES, q4k, q5k, q6k};
use super::{GROUP, four, pair, prefetch_ahead, prefetch_part};
use crate::acts::Acts;
use crate::format::{QK, QK_K};

/// The 16 rows' results, lane `l` of `acc[r]` into `out[r][l]`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn store<const R: usize>(acc: [__m512; R]) -> [[f32; GROUP]; R] {
    let mut out = [[0f32; GROUP]; R];
    for r in 0..R {
        // SAFETY: `out[r]` has room for 16 floats.
        unsafe { _mm512_storeu_ps(out[r].as_mut_ptr(), acc[r]) };
    }
    out
}

/// Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, specialized at compile time: `NIB` for 4-bit values
/// (two per byte), `MIN` for a per-row minimum (16 f16 mins after the scales: `w = q d +
/// m`), `HIGH` for a fifth bit per value (64 bytes after the nibbles), `OFFSET` the
/// constant added to each stored value (removed through the activation block's integer
/// sum, exactly).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
pub(super) fn block32<
    const R: usize,
    const NIB: bool,
    const MIN: bool,
    const HIGH: bool,
    const OFFSET: i32,
>(
    p: &[u8],
    blocks: usize,
    cb: usize,
    a: &Acts,
    rows: [usize; R],
) -> [[f32; GROUP]; R] {
    let values = if NIB { 256 + if HIGH { 64 } else { 0 } } else { 512 };
    assert!(p.len() >= blocks * cb && cb >= 32 * (1 + usize::from(MIN)) + values);
    let x = rows.map(|r| a.q8.row(r));
    assert!(x.iter().all(|x| {
        x.qs.len() >= blocks * QK
            && x.d.len() >= blocks
            && x.s.len() >= blocks
            && x.off.iter().all(|o| o.len() >= blocks)
    }));
    // The offset's term per block: none, or -8 / -16 / -128 times the block's sum.
    let off = match OFFSET {
        8 => Some(0),
        16 => Some(1),
        128 => Some(2),
        _ => None,
    };
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let at = b * cb;
        prefetch_ahead(&p[at..at + cb]);
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
            if HIGH {
                // SAFETY: the cell's 64 bytes of fifth bits lie inside `p` (checked above).
                let h = unsafe { _mm512_loadu_si512(p.as_ptr().add(vals + 256).cast()) };
                for (k, v) in v.iter_mut().enumerate() {
                    let bit = _mm512_srl_epi16(h, _mm_cvtsi32_si128(k as i32));
                    let bit = _mm512_and_si512(bit, _mm512_set1_epi8(1));
                    *v = _mm512_or_si512(*v, _mm512_slli_epi16::<4>(bit));
                }
            }
        } else {
            for k in 0..8 {
                // SAFETY: the cell's 512 value bytes lie inside `p` (checked above).
                v[k] = unsafe { _mm512_loadu_si512(p.as_ptr().add(vals + 64 * k).cast()) };
            }
        }
        for r in 0..R {
            let q = &x[r].qs[b * QK..(b + 1) * QK];
            let mut isum = match off {
                Some(k) => _mm512_set1_epi32(x[r].off[k][b]),
                None => _mm512_setzero_si512(),
            };
            for k in 0..8 {
                isum = _mm512_dpbusd_epi32(isum, v[k], _mm512_set1_epi32(four(q, 4 * k)));
            }
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(x[r].d[b]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[r]);
            if MIN {
                acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[r].s[b]), acc[r]);
            }
        }
    }
    store(acc)
}

/// Q4_K and, with `HIGH`, Q5_K (each value's fifth bit from the 64 bytes per group after
/// Q4_K's cell): per 32-value group, eight `vpdpbusd` of the values give each row's
/// integer sum, multiplied by its 6-bit scale; the mins meet the activations' per-32 sums
/// in pairs (`vpdpwssd`); `d` and `dmin` scale the two sums once per super-block.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
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
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let cell = &p[b * cb..(b + 1) * cb];
        let at = |o: usize| cell[o..].as_ptr();
        // SAFETY: the offsets lie inside the cell (so for every load of this block)'s BYTES.
        let (d, dmin) = unsafe {
            (
                _mm512_cvtph_ps(_mm256_loadu_si256(at(q4k::D).cast())),
                _mm512_cvtph_ps(_mm256_loadu_si256(at(q4k::DMIN).cast())),
            )
        };
        let mut sumi = [_mm512_setzero_si512(); R];
        for j in 0..8 {
            prefetch_part(cell, j, 8);
            // SAFETY: as above.
            let sc =
                unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(at(q4k::SCALES + 16 * j).cast())) };
            let mut v = [_mm512_setzero_si512(); 8];
            for c in 0..4 {
                // SAFETY: as above.
                let q = unsafe { _mm512_loadu_si512(at(q4k::VALUES + 256 * j + 64 * c).cast()) };
                v[2 * c] = _mm512_and_si512(q, m4);
                v[2 * c + 1] = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
            }
            if HIGH {
                // SAFETY: as above.
                let h = unsafe { _mm512_loadu_si512(at(q5k::HIGHS + 64 * j).cast()) };
                for (k, v) in v.iter_mut().enumerate() {
                    let bit = _mm512_srl_epi16(h, _mm_cvtsi32_si128(k as i32));
                    let bit = _mm512_and_si512(bit, _mm512_set1_epi8(1));
                    *v = _mm512_or_si512(*v, _mm512_slli_epi16::<4>(bit));
                }
            }
            for r in 0..R {
                let q = &x[r].qs[b * QK_K + 32 * j..b * QK_K + 32 * j + 32];
                let mut isum = _mm512_setzero_si512();
                for k in 0..8 {
                    isum = _mm512_dpbusd_epi32(isum, v[k], _mm512_set1_epi32(four(q, 4 * k)));
                }
                sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(isum, sc));
            }
        }
        // SAFETY: as above.
        let mins: [__m512i; 4] = std::array::from_fn(|k| unsafe {
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(at(q4k::MINS + 32 * k).cast()))
        });
        for r in 0..R {
            let mut m = _mm512_setzero_si512();
            for (k, mins) in mins.iter().enumerate() {
                let s = _mm512_set1_epi32(pair(x[r].sums32, 8 * b + 2 * k));
                m = _mm512_dpwssd_epi32(m, *mins, s);
            }
            let da = _mm512_set1_ps(x[r].d[b]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sumi[r]), _mm512_mul_ps(d, da), acc[r]);
            acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, da), acc[r]);
        }
    }
    store(acc)
}

/// Q6_K: per 16-value group, the 6-bit values rebuilt from a chunk of nibbles and the
/// high bit pairs, four `vpdpbusd` per row, times its signed scale; the values' offset of
/// 32 is removed once per super-block through the scales and the activations' per-16
/// sums (`vpdpwssd` over pairs of groups).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
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
    let (m4, m2) = (_mm512_set1_epi8(0x0F), _mm512_set1_epi8(3));
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let cell = &p[b * q6k::BYTES..(b + 1) * q6k::BYTES];
        let at = |o: usize| cell[o..].as_ptr();
        // SAFETY: the offsets lie inside the cell (so for every load of this block)'s BYTES.
        let d = unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(at(q6k::D).cast())) };
        let mut sumi = [_mm512_setzero_si512(); R];
        for g in 0..16 {
            prefetch_part(cell, g, 16);
            let base = q6k::VALUES + q6k::GROUP_BYTES * g;
            // SAFETY: as above.
            let (sc, q0, q1, h) = unsafe {
                (
                    _mm512_cvtepi8_epi32(_mm_loadu_si128(at(q6k::SCALES + 16 * g).cast())),
                    _mm512_loadu_si512(at(base).cast()),
                    _mm512_loadu_si512(at(base + 64).cast()),
                    _mm512_loadu_si512(at(base + 128).cast()),
                )
            };
            let high = |bits: __m512i| _mm512_slli_epi16::<4>(_mm512_and_si512(bits, m2));
            let v = [
                _mm512_or_si512(_mm512_and_si512(q0, m4), high(h)),
                _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16::<4>(q0), m4),
                    high(_mm512_srli_epi16::<2>(h)),
                ),
                _mm512_or_si512(_mm512_and_si512(q1, m4), high(_mm512_srli_epi16::<4>(h))),
                _mm512_or_si512(
                    _mm512_and_si512(_mm512_srli_epi16::<4>(q1), m4),
                    high(_mm512_srli_epi16::<6>(h)),
                ),
            ];
            for r in 0..R {
                let q = &x[r].qs[b * QK_K + 16 * g..b * QK_K + 16 * g + 16];
                let mut isum = _mm512_setzero_si512();
                for (k, v) in v.iter().enumerate() {
                    isum = _mm512_dpbusd_epi32(isum, *v, _mm512_set1_epi32(four(q, 4 * k)));
                }
                sumi[r] = _mm512_add_epi32(sumi[r], _mm512_mullo_epi32(isum, sc));
            }
        }
        let mut off = [_mm512_setzero_si512(); R];
        for pg in 0..8 {
            // The scales of groups 2 pg and 2 pg + 1, row by row, as i16 pairs.
            // SAFETY: as above.
            let pairs = unsafe {
                let s0 = _mm_loadu_si128(at(q6k::SCALES + 32 * pg).cast());
                let s1 = _mm_loadu_si128(at(q6k::SCALES + 32 * pg + 16).cast());
                let lo = _mm_unpacklo_epi8(s0, s1);
                let hi = _mm_unpackhi_epi8(s0, s1);
                _mm512_cvtepi8_epi16(_mm256_set_m128i(hi, lo))
            };
            for r in 0..R {
                let s = _mm512_set1_epi32(pair(x[r].bsums, 16 * b + 2 * pg));
                off[r] = _mm512_dpwssd_epi32(off[r], pairs, s);
            }
        }
        for r in 0..R {
            let total = _mm512_sub_epi32(sumi[r], _mm512_slli_epi32::<5>(off[r]));
            let da = _mm512_set1_ps(x[r].d[b]);
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(d, da), acc[r]);
        }
    }
    store(acc)
}

/// The E2M1 values an MXFP4 nibble indexes, doubled, plus 16: unsigned for `vpdpbusd`'s
/// first operand; the activations' `-16 x` block sums take the offset out exactly.
pub(super) const MXFP4_PLUS16: [u8; 16] = {
    let mut t = [0u8; 16];
    let mut i = 0;
    while i < 16 {
        t[i] = (crate::formats::mxfp4::VALUES[i] + 16) as u8;
        i += 1;
    }
    t
};

/// 16 E8M0 exponent bytes as their half scales (`formats::mxfp4::half_scale`, exactly:
/// `(e - 1) << 23`, the two smallest subnormal).
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
fn half_scales(e: __m128i) -> __m512 {
    let e = _mm512_cvtepu8_epi32(e);
    let normal = _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, _mm512_set1_epi32(1)));
    let small = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
    let is_small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    _mm512_castsi512_ps(_mm512_mask_blend_epi32(is_small, normal, small))
}

/// MXFP4: each block's nibbles look their values (plus 16) up with one byte shuffle, eight
/// `vpdpbusd` starting from the activations' `-16 x` sum give each row's exact integer
/// sum, scaled by the row's E8M0 half scale and the activations' scale.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
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
    let table = _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(MXFP4_PLUS16.as_ptr().cast()) });
    let m4 = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); R];
    for b in 0..blocks {
        let at = b * cb;
        prefetch_ahead(&p[at..at + cb]);
        // SAFETY: the cell's 16 exponents and 256 bytes of nibbles lie inside `p` (checked
        // above).
        let dw = half_scales(unsafe { _mm_loadu_si128(p.as_ptr().add(at).cast()) });
        let mut v = [_mm512_setzero_si512(); 8];
        for c in 0..4 {
            // SAFETY: as above.
            let q =
                unsafe { _mm512_loadu_si512(p.as_ptr().add(at + MXFP4_VALUES + 64 * c).cast()) };
            v[2 * c] = _mm512_shuffle_epi8(table, _mm512_and_si512(q, m4));
            v[2 * c + 1] =
                _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4));
        }
        for r in 0..R {
            let q = &x[r].qs[b * QK..(b + 1) * QK];
            let mut isum = _mm512_set1_epi32(x[r].off[1][b]);
            for (k, v) in v.iter().enumerate() {
                isum = _mm512_dpbusd_epi32(isum, *v, _mm512_set1_epi32(four(q, 4 * k)));
            }
            let scale = _mm512_mul_ps(dw, _mm512_set1_ps(x[r].d[b]));
            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), scale, acc[r]);
        }
    }
    store(acc)
}
