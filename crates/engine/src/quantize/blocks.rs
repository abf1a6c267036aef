//! Quantizing rows into the formats of 32-element blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0),
//! exactly as GGML's reference quantizers (and candle's ports of them) do: the same
//! scale, the same rounding, the same bytes.

use half::f16;

use crate::format::QK;

/// The largest-magnitude value of `xs` (the first of equal magnitudes), and its
/// magnitude.
fn signed_max(xs: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0f32, 0f32);
    for &x in xs {
        if amax < x.abs() {
            amax = x.abs();
            max = x;
        }
    }
    (max, amax)
}

/// The minimum and maximum of `xs`.
fn min_max(xs: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::INFINITY, f32::NEG_INFINITY);
    for &x in xs {
        min = f32::min(x, min);
        max = f32::max(x, max);
    }
    (min, max)
}

fn inverse(d: f32) -> f32 {
    if d != 0f32 { 1. / d } else { 0. }
}

/// Q4_0: `d = max / -8`, nibbles `x / d + 8`.
pub(super) fn q4_0(xs: &[f32], out: &mut Vec<u8>) {
    for xs in xs.chunks_exact(QK) {
        let (max, _) = signed_max(xs);
        let d = max / -8.0;
        let id = inverse(d);
        out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        for j in 0..QK / 2 {
            let xi0 = u8::min(15, (xs[j] * id + 8.5) as u8);
            let xi1 = u8::min(15, (xs[QK / 2 + j] * id + 8.5) as u8);
            out.push(xi0 | (xi1 << 4));
        }
    }
}

/// Q4_1: `d = (max - min) / 15`, `m = min`, nibbles `(x - min) / d`.
pub(super) fn q4_1(xs: &[f32], out: &mut Vec<u8>) {
    for xs in xs.chunks_exact(QK) {
        let (min, max) = min_max(xs);
        let d = (max - min) / ((1 << 4) - 1) as f32;
        let id = inverse(d);
        out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
        for j in 0..QK / 2 {
            let xi0 = u8::min(15, ((xs[j] - min) * id + 0.5) as u8);
            let xi1 = u8::min(15, ((xs[QK / 2 + j] - min) * id + 0.5) as u8);
            out.push(xi0 | (xi1 << 4));
        }
    }
}

/// Q5_0: `d = max / -16`, five bits `x / d + 16` (the fifth in `qh`).
pub(super) fn q5_0(xs: &[f32], out: &mut Vec<u8>) {
    for xs in xs.chunks_exact(QK) {
        let (max, _) = signed_max(xs);
        let d = max / -16.;
        let id = inverse(d);
        out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        let mut qs = [0u8; QK / 2];
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let xi0 = ((xs[j] * id + 16.5) as i8).min(31) as u8;
            let xi1 = ((xs[j + QK / 2] * id + 16.5) as i8).min(31) as u8;
            qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
            qh |= ((xi0 as u32 & 0x10) >> 4) << j;
            qh |= ((xi1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        out.extend_from_slice(&qh.to_le_bytes());
        out.extend_from_slice(&qs);
    }
}

/// Q5_1: `d = (max - min) / 31`, `m = min`, five bits `(x - min) / d`.
pub(super) fn q5_1(xs: &[f32], out: &mut Vec<u8>) {
    for xs in xs.chunks_exact(QK) {
        let (min, max) = min_max(xs);
        let d = (max - min) / ((1 << 5) - 1) as f32;
        let id = inverse(d);
        out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
        let mut qs = [0u8; QK / 2];
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let xi0 = ((xs[j] - min) * id + 0.5) as u8;
            let xi1 = ((xs[QK / 2 + j] - min) * id + 0.5) as u8;
            qs[j] = (xi0 & 0x0F) | ((xi1 & 0x0F) << 4);
            qh |= ((xi0 as u32 & 0x10) >> 4) << j;
            qh |= ((xi1 as u32 & 0x10) >> 4) << (j + QK / 2);
        }
        out.extend_from_slice(&qh.to_le_bytes());
        out.extend_from_slice(&qs);
    }
}

/// Q8_0: `d = amax / 127`, bytes `round(x / d)`.
pub(super) fn q8_0(xs: &[f32], out: &mut Vec<u8>) {
    for xs in xs.chunks_exact(QK) {
        let amax = xs.iter().fold(0f32, |a, &x| a.max(x.abs()));
        let d = amax / ((1 << 7) - 1) as f32;
        let id = inverse(d);
        out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
        out.extend(xs.iter().map(|&x| f32::round(x * id) as i8 as u8));
    }
}

/// MXFP4, as GGML's `quantize_row_mxfp4_ref`: the exponent `e = floor(log2(amax)) - 2 +
/// 127` (0 for a block of zeros), and each value the first of the doubled E2M1 values
/// nearest to it at half the scale.
pub(super) fn mxfp4(xs: &[f32], out: &mut Vec<u8>) {
    use crate::formats::mxfp4::{VALUES, half_scale};
    let nearest = |x: f32, d: f32| {
        let mut best = 0;
        let mut err = (f32::from(VALUES[0]) * d - x).abs();
        for (i, &v) in VALUES.iter().enumerate().skip(1) {
            let e = (f32::from(v) * d - x).abs();
            if e < err {
                best = i as u8;
                err = e;
            }
        }
        best
    };
    for xs in xs.chunks_exact(QK) {
        let amax = xs.iter().fold(0f32, |a, &x| a.max(x.abs()));
        let e = if amax > 0.0 {
            (amax.log2().floor() - 2.0 + 127.0).clamp(0.0, 255.0) as u8
        } else {
            0
        };
        let d = half_scale(e);
        out.push(e);
        out.extend((0..QK / 2).map(|j| nearest(xs[j], d) | (nearest(xs[j + QK / 2], d) << 4)));
    }
}
