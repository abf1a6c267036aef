//! Quantizing rows into the K-quants (super-blocks of 256: Q2_K to Q6_K), exactly as
//! GGML's reference quantizers (and candle's ports of them) do.

use half::f16;

use super::fit::{make_q3_quants, make_qkx1_quants, make_qx_quants, nearest_int};
use crate::format::QK_K;
use crate::formats::q4_k::scale_min_k4;

/// Q2_K: 16 groups of 16 with a 4-bit scale and min each, 2-bit levels.
pub(super) fn q2_k(xs: &[f32], out: &mut Vec<u8>) {
    const Q4SCALE: f32 = 15.0;
    for x in xs.chunks_exact(QK_K) {
        let (mut mins, mut scales) = ([0f32; QK_K / 16], [0f32; QK_K / 16]);
        for (j, x) in x.chunks(16).enumerate() {
            (scales[j], mins[j]) = make_qkx1_quants(3, 5, x);
        }
        let max_scale = scales.iter().fold(0.0, |max, &val| val.max(max));
        let max_min = mins.iter().fold(0.0, |max, &val| val.max(max));
        let mut sc = [0u8; QK_K / 16];
        let mut d = f16::from_f32(0.0);
        if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for (s, scale) in sc.iter_mut().zip(&scales) {
                *s = nearest_int(iscale * scale) as u8;
            }
            d = f16::from_f32(max_scale / Q4SCALE);
        }
        let mut dmin = f16::from_f32(0.0);
        if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for (s, min) in sc.iter_mut().zip(&mins) {
                *s |= (nearest_int(iscale * min) as u8) << 4;
            }
            dmin = f16::from_f32(max_min / Q4SCALE);
        }
        let mut big_l = [0u8; QK_K];
        for j in 0..QK_K / 16 {
            let dj = d.to_f32() * (sc[j] & 0xF) as f32;
            if dj == 0.0 {
                continue;
            }
            let dm = dmin.to_f32() * (sc[j] >> 4) as f32;
            for ii in 0..16 {
                big_l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / dj).clamp(0, 3) as u8;
            }
        }
        let mut qs = [0u8; QK_K / 4];
        for j in (0..QK_K).step_by(128) {
            for ll in 0..32 {
                qs[j / 4 + ll] = big_l[j + ll]
                    | (big_l[j + ll + 32] << 2)
                    | (big_l[j + ll + 64] << 4)
                    | (big_l[j + ll + 96] << 6);
            }
        }
        out.extend_from_slice(&sc);
        out.extend_from_slice(&qs);
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&dmin.to_le_bytes());
    }
}

/// Q3_K: 16 groups of 16 with a 6-bit signed scale each, 3-bit levels (the third bit in
/// `hmask`).
pub(super) fn q3_k(xs: &[f32], out: &mut Vec<u8>) {
    for x in xs.chunks_exact(QK_K) {
        let mut scales = [0f32; QK_K / 16];
        for (j, x) in x.chunks_exact(16).enumerate() {
            scales[j] = make_q3_quants(x, 4, true);
        }
        let mut max_scale: f32 = 0.0;
        for &scale in &scales {
            if scale.abs() > max_scale.abs() {
                max_scale = scale;
            }
        }
        let mut sc = [0u8; 12];
        let mut d = f16::from_f32(0.0);
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, scale) in scales.iter().enumerate() {
                let l_val = nearest_int(iscale * scale).clamp(-32, 31) + 32;
                if j < 8 {
                    sc[j] = (l_val & 0xF) as u8;
                } else {
                    sc[j - 8] |= ((l_val & 0xF) << 4) as u8;
                }
                sc[j % 4 + 8] |= ((l_val >> 4) << (2 * (j / 4))) as u8;
            }
            d = f16::from_f32(1.0 / iscale);
        }
        let mut l = [0i8; QK_K];
        for j in 0..QK_K / 16 {
            let s = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
            let s = (s | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) as i8 - 32;
            let dj = d.to_f32() * s as f32;
            if dj != 0.0 {
                for ii in 0..16 {
                    let l_val = nearest_int(x[16 * j + ii] / dj);
                    l[16 * j + ii] = (l_val.clamp(-4, 3) + 4) as i8;
                }
            }
        }
        let mut hmask = [0u8; QK_K / 8];
        let (mut m, mut hm) = (0, 1u8);
        for ll in l.iter_mut() {
            if *ll > 3 {
                hmask[m] |= hm;
                *ll -= 4;
            }
            m += 1;
            if m == QK_K / 8 {
                m = 0;
                hm <<= 1;
            }
        }
        let mut qs = [0u8; QK_K / 4];
        for j in (0..QK_K).step_by(128) {
            for i in 0..32 {
                qs[j / 4 + i] =
                    (l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6))
                        as u8;
            }
        }
        out.extend_from_slice(&hmask);
        out.extend_from_slice(&qs);
        out.extend_from_slice(&sc);
        out.extend_from_slice(&d.to_le_bytes());
    }
}

/// The 6-bit scales and mins of Q4_K / Q5_K (eight groups of 32 fitted into `0..=nmax`),
/// packed into 12 bytes, with the super-block's `d` and `dmin`.
fn scales_k(x: &[f32], nmax: i32) -> ([u8; 12], f16, f16) {
    let (mut mins, mut scales) = ([0f32; QK_K / 32], [0f32; QK_K / 32]);
    for (j, x) in x.chunks_exact(32).enumerate() {
        (scales[j], mins[j]) = make_qkx1_quants(nmax, 5, x);
    }
    let max_scale = scales.iter().fold(0.0, |max, &val| val.max(max));
    let max_min = mins.iter().fold(0.0, |max, &val| val.max(max));
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut sc = [0u8; 12];
    for j in 0..QK_K / 32 {
        let ls = nearest_int(inv_scale * scales[j]).min(63) as u8;
        let lm = nearest_int(inv_min * mins[j]).min(63) as u8;
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    (sc, f16::from_f32(max_scale / 63.0), f16::from_f32(max_min / 63.0))
}

/// The levels of Q4_K / Q5_K (`0..=nmax`) under the packed scales.
fn levels_k(x: &[f32], sc: &[u8; 12], d: f16, dmin: f16, nmax: i32) -> [u8; QK_K] {
    let mut l = [0u8; QK_K];
    for j in 0..QK_K / 32 {
        let (s, m) = scale_min_k4(j, sc);
        let dj = d.to_f32() * s as f32;
        if dj == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    l
}

/// Q4_K: eight groups of 32 with 6-bit scales and mins, 4-bit levels.
pub(super) fn q4_k(xs: &[f32], out: &mut Vec<u8>) {
    for x in xs.chunks_exact(QK_K) {
        let (sc, d, dmin) = scales_k(x, 15);
        let l = levels_k(x, &sc, d, dmin, 15);
        let mut qs = [0u8; QK_K / 2];
        for j in (0..QK_K).step_by(64) {
            for i in 0..32 {
                qs[(j / 64) * 32 + i] = l[j + i] | (l[j + i + 32] << 4);
            }
        }
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&dmin.to_le_bytes());
        out.extend_from_slice(&sc);
        out.extend_from_slice(&qs);
    }
}

/// Q5_K: eight groups of 32 with 6-bit scales and mins, 5-bit levels (the fifth bit in
/// `qh`).
pub(super) fn q5_k(xs: &[f32], out: &mut Vec<u8>) {
    for x in xs.chunks_exact(QK_K) {
        let (sc, d, dmin) = scales_k(x, 31);
        let l = levels_k(x, &sc, d, dmin, 31);
        let (mut qh, mut ql) = ([0u8; QK_K / 8], [0u8; QK_K / 2]);
        let (mut m1, mut m2) = (1u8, 2u8);
        for n in (0..QK_K).step_by(64) {
            let offset = (n / 64) * 32;
            for j in 0..32 {
                let mut l1 = l[n + j];
                if l1 > 15 {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                let mut l2 = l[n + j + 32];
                if l2 > 15 {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[offset + j] = l1 | (l2 << 4);
            }
            m1 <<= 2;
            m2 <<= 2;
        }
        out.extend_from_slice(&d.to_le_bytes());
        out.extend_from_slice(&dmin.to_le_bytes());
        out.extend_from_slice(&sc);
        out.extend_from_slice(&qh);
        out.extend_from_slice(&ql);
    }
}

/// Q6_K: 16 groups of 16 with an 8-bit signed scale each, 6-bit levels.
pub(super) fn q6_k(xs: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; QK_K];
    for x in xs.chunks_exact(QK_K) {
        let mut scales = [0f32; QK_K / 16];
        let (mut max_scale, mut max_abs_scale) = (0f32, 0f32);
        for (ib, scale_) in scales.iter_mut().enumerate() {
            let scale = make_qx_quants(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..], 1);
            *scale_ = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        let iscale = -128f32 / max_scale;
        let d = f16::from_f32(1.0 / iscale);
        let mut sc = [0i8; QK_K / 16];
        for (s, scale) in sc.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale).min(127) as i8;
        }
        for (j, &s) in sc.iter().enumerate() {
            let dj = d.to_f32() * s as f32;
            if dj == 0. {
                continue;
            }
            for ii in 0..16 {
                let ll = nearest_int(x[16 * j + ii] / dj).clamp(-32, 31);
                l[16 * j + ii] = (ll + 32) as i8;
            }
        }
        let (mut ql, mut qh) = ([0u8; QK_K / 2], [0u8; QK_K / 4]);
        for (k, j) in (0..QK_K).step_by(128).enumerate() {
            let (ql, qh) = (&mut ql[64 * k..], &mut qh[32 * k..]);
            for i in 0..32 {
                let (q1, q2) = (l[j + i] & 0xF, l[j + i + 32] & 0xF);
                let (q3, q4) = (l[j + i + 64] & 0xF, l[j + i + 96] & 0xF);
                ql[i] = (q1 | (q3 << 4)) as u8;
                ql[i + 32] = (q2 | (q4 << 4)) as u8;
                qh[i] = ((l[j + i] >> 4)
                    | ((l[j + i + 32] >> 4) << 2)
                    | ((l[j + i + 64] >> 4) << 4)
                    | ((l[j + i + 96] >> 4) << 6)) as u8;
            }
        }
        out.extend_from_slice(&ql);
        out.extend_from_slice(&qh);
        out.extend(sc.iter().map(|&s| s as u8));
        out.extend_from_slice(&d.to_le_bytes());
    }
}
