//! GGUF block formats and activation quantization.
//!
//! Weights stay in GGUF's own block layout (read in place from the mapped file). Each
//! format decodes here, in plain Rust, into small integers and per-(sub)block scales: that
//! decoding is the scalar reference for every kernel and the dequantizer of embedding rows.
//!
//! Activations are quantized once per product into the 8-bit blocks the weight format
//! pairs with: [`Q8Rows`] (blocks of 32, for Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0) or
//! [`Q8KRows`] (blocks of 256 with 16-element sums, for the K-quants). F32, F16 and BF16
//! weights take the f32 activations as they are.

use half::{bf16, f16};

pub use crate::acts::{Q8KRow, Q8KRows, Q8Row, Q8Rows};
pub use crate::format::{ActKind, QK, QK_K, WeightFormat, f16_at};

/// One 32-element block decoded: integers and `value = d * q + m`.
#[derive(Debug, Clone, Copy)]
pub struct Decoded32 {
    /// The integers (signed for the symmetric formats).
    pub q: [i8; QK],
    /// Scale.
    pub d: f32,
    /// Offset (0 for the symmetric formats).
    pub m: f32,
}

/// Decodes block `b` of a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 row.
pub fn decode32(fmt: WeightFormat, row: &[u8], b: usize) -> Decoded32 {
    let x = &row[b * fmt.block_bytes()..(b + 1) * fmt.block_bytes()];
    let mut q = [0i8; QK];
    let d = f16_at(x, 0);
    let mut m = 0.0;
    match fmt {
        WeightFormat::Q4_0 => {
            for j in 0..16 {
                q[j] = (x[2 + j] & 0x0F) as i8 - 8;
                q[j + 16] = (x[2 + j] >> 4) as i8 - 8;
            }
        }
        WeightFormat::Q4_1 => {
            m = f16_at(x, 2);
            for j in 0..16 {
                q[j] = (x[4 + j] & 0x0F) as i8;
                q[j + 16] = (x[4 + j] >> 4) as i8;
            }
        }
        WeightFormat::Q5_0 | WeightFormat::Q5_1 => {
            let (qh_at, qs_at, off) =
                if fmt == WeightFormat::Q5_0 { (2, 6, 16) } else { (4, 8, 0) };
            if fmt == WeightFormat::Q5_1 {
                m = f16_at(x, 2);
            }
            let qh = u32::from_le_bytes([x[qh_at], x[qh_at + 1], x[qh_at + 2], x[qh_at + 3]]);
            for j in 0..16 {
                let h0 = (((qh >> j) << 4) & 0x10) as u8;
                let h1 = ((qh >> (j + 12)) & 0x10) as u8;
                q[j] = ((x[qs_at + j] & 0x0F) | h0) as i8 - off;
                q[j + 16] = ((x[qs_at + j] >> 4) | h1) as i8 - off;
            }
        }
        WeightFormat::Q8_0 => {
            for j in 0..QK {
                q[j] = x[2 + j] as i8;
            }
        }
        other => panic!("decode32 of {other:?}"),
    }
    Decoded32 { q, d, m }
}

/// One 256-element K-quant super-block decoded: integers and, per 16-element group,
/// `value = scale[g] * q - min[g]`.
#[derive(Debug, Clone, Copy)]
pub struct DecodedK {
    /// The integers.
    pub q: [i8; QK_K],
    /// Scale per 16 elements.
    pub scale: [f32; 16],
    /// Subtracted offset per 16 elements.
    pub min: [f32; 16],
}

/// The 6-bit scale and min `j` (0..8) of Q4_K / Q5_K's 12 packed bytes.
#[inline(always)]
pub fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        ((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4), (s[j + 4] >> 4) | ((s[j] >> 6) << 4))
    }
}

/// The 16 signed 6-bit group scales of a Q3_K super-block (its 12 packed scale bytes).
pub fn scales_q3k(sc: &[u8]) -> [i8; 16] {
    let mut aux = [0u32; 4];
    for i in 0..3 {
        aux[i] = u32::from_le_bytes([sc[4 * i], sc[4 * i + 1], sc[4 * i + 2], sc[4 * i + 3]]);
    }
    let (k1, k2) = (0x0303_0303u32, 0x0f0f_0f0fu32);
    let tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & k2) | (((tmp >> 4) & k1) << 4);
    aux[3] = ((aux[1] >> 4) & k2) | (((tmp >> 6) & k1) << 4);
    aux[0] = (aux[0] & k2) | ((tmp & k1) << 4);
    aux[1] = (aux[1] & k2) | (((tmp >> 2) & k1) << 4);
    std::array::from_fn(|g| ((aux[g / 4] >> (8 * (g % 4))) as u8 as i8) - 32)
}

/// Decodes super-block `b` of a K-quant row.
pub fn decode_k(fmt: WeightFormat, row: &[u8], b: usize) -> DecodedK {
    let x = &row[b * fmt.block_bytes()..(b + 1) * fmt.block_bytes()];
    let mut out = DecodedK { q: [0; QK_K], scale: [0.0; 16], min: [0.0; 16] };
    match fmt {
        WeightFormat::Q4K | WeightFormat::Q5K => {
            let d = f16_at(x, 0);
            let dmin = f16_at(x, 2);
            let scales = &x[4..16];
            let (qh, qs) = if fmt == WeightFormat::Q5K {
                (&x[16..48], &x[48..176])
            } else {
                (&x[0..0], &x[16..144])
            };
            for j in 0..4 {
                for half in 0..2 {
                    let (sc, m) = scale_min_k4(2 * j + half, scales);
                    let sub = 2 * j + half;
                    out.scale[2 * sub] = d * f32::from(sc);
                    out.scale[2 * sub + 1] = d * f32::from(sc);
                    out.min[2 * sub] = dmin * f32::from(m);
                    out.min[2 * sub + 1] = dmin * f32::from(m);
                    for l in 0..32 {
                        let nib =
                            if half == 0 { qs[32 * j + l] & 0xF } else { qs[32 * j + l] >> 4 };
                        let hi =
                            if fmt == WeightFormat::Q5K { ((qh[l] >> sub) & 1) << 4 } else { 0 };
                        out.q[64 * j + 32 * half + l] = (nib | hi) as i8;
                    }
                }
            }
        }
        WeightFormat::Q6K => {
            let (ql, qh, sc) = (&x[0..128], &x[128..192], &x[192..208]);
            let d = f16_at(x, 208);
            for n in 0..2 {
                let (ql, qh) = (&ql[64 * n..], &qh[32 * n..]);
                for l in 0..32 {
                    let y = &mut out.q[128 * n..];
                    y[l] = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) as i8 - 32;
                    y[l + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
                    y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
                    y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
                }
            }
            for g in 0..16 {
                out.scale[g] = d * f32::from(sc[g] as i8);
            }
        }
        WeightFormat::Q2K => {
            let (scales, qs) = (&x[0..16], &x[16..80]);
            let d = f16_at(x, 80);
            let dmin = f16_at(x, 82);
            for g in 0..16 {
                out.scale[g] = d * f32::from(scales[g] & 0xF);
                out.min[g] = dmin * f32::from(scales[g] >> 4);
            }
            for n in 0..2 {
                for j in 0..4 {
                    for l in 0..32 {
                        out.q[128 * n + 32 * j + l] = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
                    }
                }
            }
        }
        WeightFormat::Q3K => {
            let (hm, qs, sc) = (&x[0..32], &x[32..96], &x[96..108]);
            let d = f16_at(x, 108);
            for (g, s) in scales_q3k(sc).into_iter().enumerate() {
                out.scale[g] = d * f32::from(s);
            }
            for n in 0..2 {
                for j in 0..4 {
                    let bit = 1u8 << (4 * n + j);
                    for l in 0..32 {
                        let low = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
                        let high = if hm[l] & bit != 0 { 0 } else { 4 };
                        out.q[128 * n + 32 * j + l] = low - high;
                    }
                }
            }
        }
        other => panic!("decode_k of {other:?}"),
    }
    out
}

/// Dequantizes a whole row of `out.len()` elements (the embedding lookup and the tests'
/// reference).
pub fn dequantize_row(fmt: WeightFormat, row: &[u8], out: &mut [f32]) {
    match fmt {
        WeightFormat::F32 => {
            for (o, c) in out.iter_mut().zip(row.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        WeightFormat::F16 => {
            for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        WeightFormat::BF16 => {
            for (o, c) in out.iter_mut().zip(row.chunks_exact(2)) {
                *o = bf16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        f if f.act_kind() == ActKind::Q8 => {
            for (b, o) in out.chunks_exact_mut(QK).enumerate() {
                let x = decode32(f, row, b);
                for (o, &q) in o.iter_mut().zip(&x.q) {
                    *o = x.d * f32::from(q) + x.m;
                }
            }
        }
        f => {
            for (b, o) in out.chunks_exact_mut(QK_K).enumerate() {
                let x = decode_k(f, row, b);
                for (i, (o, &q)) in o.iter_mut().zip(&x.q).enumerate() {
                    *o = x.scale[i / 16] * f32::from(q) - x.min[i / 16];
                }
            }
        }
    }
}
