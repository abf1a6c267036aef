//! The portable reference kernels: block decoding from [`crate::quant`], integer dot
//! products per (sub)block, one float multiply-add per block.

use super::{Acts, Kernels, kernels};
use crate::quant::{QK, QK_K, WeightFormat, decode_k, decode32, dequantize_row};

/// The reference kernels of `fmt`.
pub fn select(fmt: WeightFormat) -> Kernels {
    use WeightFormat::*;
    match fmt {
        F32 => kernels!(dot_f32),
        F16 => kernels!(f16),
        BF16 => kernels!(bf16),
        Q4_0 => kernels!(q4_0),
        Q4_1 => kernels!(q4_1),
        Q5_0 => kernels!(q5_0),
        Q5_1 => kernels!(q5_1),
        Q8_0 => kernels!(q8_0),
        Q2K => kernels!(q2_k),
        Q3K => kernels!(q3_k),
        Q4K => kernels!(q4_k),
        Q5K => kernels!(q5_k),
        Q6K => kernels!(q6_k),
    }
}

macro_rules! per_format {
    ($($name:ident = $inner:ident($fmt:ident);)*) => {$(
        fn $name<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
            $inner(WeightFormat::$fmt, w, a, rows)
        }
    )*};
}

per_format! {
    f16 = dot_half_fmt(F16);
    bf16 = dot_half_fmt(BF16);
    q4_0 = dot_q8_fmt(Q4_0);
    q4_1 = dot_q8_fmt(Q4_1);
    q5_0 = dot_q8_fmt(Q5_0);
    q5_1 = dot_q8_fmt(Q5_1);
    q8_0 = dot_q8_fmt(Q8_0);
    q2_k = dot_k_fmt(Q2K);
    q3_k = dot_k_fmt(Q3K);
    q4_k = dot_k_fmt(Q4K);
    q5_k = dot_k_fmt(Q5K);
    q6_k = dot_k_fmt(Q6K);
}

fn dot_f32<const R: usize>(w: &[u8], a: &Acts, rows: [usize; R]) -> [f32; R] {
    let mut out = [0f32; R];
    for (r, o) in rows.iter().zip(out.iter_mut()) {
        let x = a.f32_row(*r);
        let mut acc = 0f32;
        for (c, &v) in w.chunks_exact(4).zip(x) {
            acc += f32::from_le_bytes([c[0], c[1], c[2], c[3]]) * v;
        }
        *o = acc;
    }
    out
}

/// The reference dot product of a 32-block format with Q8 activations.
pub fn dot_q8_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    let nb = a.cols / QK;
    let x = rows.map(|r| a.q8.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let blk = decode32(fmt, w, b);
        for r in 0..R {
            let qa = &x[r].qs[b * QK..(b + 1) * QK];
            let sumi: i32 = blk.q.iter().zip(qa).map(|(&p, &q)| i32::from(p) * i32::from(q)).sum();
            acc[r] += blk.d * x[r].d[b] * sumi as f32 + blk.m * x[r].s[b];
        }
    }
    acc
}

/// The reference dot product of a K-quant format with Q8_K activations.
pub fn dot_k_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    let nb = a.cols / QK_K;
    let x = rows.map(|r| a.q8k.row(r));
    let mut acc = [0f32; R];
    for b in 0..nb {
        let blk = decode_k(fmt, w, b);
        for r in 0..R {
            let qa = &x[r].qs[b * QK_K..(b + 1) * QK_K];
            let mut sum = 0f32;
            for g in 0..16 {
                let sumi: i32 = blk.q[16 * g..16 * g + 16]
                    .iter()
                    .zip(&qa[16 * g..16 * g + 16])
                    .map(|(&p, &q)| i32::from(p) * i32::from(q))
                    .sum();
                sum += blk.scale[g] * sumi as f32 - blk.min[g] * f32::from(x[r].bsums[b * 16 + g]);
            }
            acc[r] += x[r].d[b] * sum;
        }
    }
    acc
}

/// The reference dot product of an F16 / BF16 row with f32 activations.
pub fn dot_half_fmt<const R: usize>(
    fmt: WeightFormat,
    w: &[u8],
    a: &Acts,
    rows: [usize; R],
) -> [f32; R] {
    let mut buf = [0f32; 64];
    let mut acc = [0f32; R];
    for (k, c) in w.chunks(128).enumerate() {
        let n = c.len() / 2;
        dequantize_row(fmt, c, &mut buf[..n]);
        for r in 0..R {
            let x = &a.f32_row(rows[r])[64 * k..64 * k + n];
            for (p, q) in buf[..n].iter().zip(x) {
                acc[r] += p * q;
            }
        }
    }
    acc
}
