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

/// Elements in a K-quant super-block.
pub const QK_K: usize = 256;
/// Elements in a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 block.
pub const QK: usize = 32;

/// A weight storage format (GGML type) the engine computes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// 32-bit floats.
    F32,
    /// 16-bit IEEE floats.
    F16,
    /// bfloat16.
    BF16,
    /// 4-bit, blocks of 32, one f16 scale (value = (q - 8) * d).
    Q4_0,
    /// 4-bit, blocks of 32, f16 scale and min (value = q * d + m).
    Q4_1,
    /// 5-bit, blocks of 32, one scale.
    Q5_0,
    /// 5-bit, blocks of 32, scale and min.
    Q5_1,
    /// 8-bit, blocks of 32, one scale.
    Q8_0,
    /// 2-bit K-quant.
    Q2K,
    /// 3-bit K-quant.
    Q3K,
    /// 4-bit K-quant.
    Q4K,
    /// 5-bit K-quant.
    Q5K,
    /// 6-bit K-quant.
    Q6K,
}

/// Which activation form a weight format multiplies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActKind {
    /// The f32 rows as they are.
    F32,
    /// [`Q8Rows`]: 8-bit blocks of 32.
    Q8,
    /// [`Q8KRows`]: 8-bit blocks of 256.
    Q8K,
}

impl WeightFormat {
    /// Every format, in GGML order.
    pub const ALL: [WeightFormat; 13] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::BF16,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::Q8_0,
        WeightFormat::Q2K,
        WeightFormat::Q3K,
        WeightFormat::Q4K,
        WeightFormat::Q5K,
        WeightFormat::Q6K,
    ];

    /// Elements per block.
    pub fn block_elems(self) -> usize {
        use WeightFormat::*;
        match self {
            F32 | F16 | BF16 => 1,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => QK,
            Q2K | Q3K | Q4K | Q5K | Q6K => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        use WeightFormat::*;
        match self {
            F32 => 4,
            F16 | BF16 => 2,
            Q4_0 => 18,
            Q4_1 => 20,
            Q5_0 => 22,
            Q5_1 => 24,
            Q8_0 => 34,
            Q2K => 84,
            Q3K => 110,
            Q4K => 144,
            Q5K => 176,
            Q6K => 210,
        }
    }

    /// The activation form its products take.
    pub fn act_kind(self) -> ActKind {
        use WeightFormat::*;
        match self {
            F32 | F16 | BF16 => ActKind::F32,
            Q4_0 | Q4_1 | Q5_0 | Q5_1 | Q8_0 => ActKind::Q8,
            Q2K | Q3K | Q4K | Q5K | Q6K => ActKind::Q8K,
        }
    }

    /// Bytes of one row of `cols` elements (`None` when `cols` is not whole blocks).
    pub fn row_bytes(self, cols: usize) -> Option<usize> {
        cols.is_multiple_of(self.block_elems())
            .then(|| cols / self.block_elems() * self.block_bytes())
    }

    /// The lowercase GGML name (`q4_1`, `q6_k`, ...).
    pub fn name(self) -> &'static str {
        use WeightFormat::*;
        match self {
            F32 => "f32",
            F16 => "f16",
            BF16 => "bf16",
            Q4_0 => "q4_0",
            Q4_1 => "q4_1",
            Q5_0 => "q5_0",
            Q5_1 => "q5_1",
            Q8_0 => "q8_0",
            Q2K => "q2_k",
            Q3K => "q3_k",
            Q4K => "q4_k",
            Q5K => "q5_k",
            Q6K => "q6_k",
        }
    }
}

/// An f16 stored little-endian at `b[at..]`, as f32.
#[inline(always)]
pub fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f32()
}

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

/// `x` rounded to f16 precision, or `x` itself where f16 cannot hold it.
#[inline]
fn f16_precision(x: f32) -> f32 {
    let r = f16::from_f32(x).to_f32();
    if r.is_finite() { r } else { x }
}

/// `x.round() as i8` (half away from zero, saturating) without a libm call.
#[inline]
fn round_i8(x: f32) -> i8 {
    let t = x as i32;
    let f = x - t as f32;
    (t + i32::from(f >= 0.5) - i32::from(f <= -0.5)).clamp(-128, 127) as i8
}

/// Activation rows quantized into 8-bit blocks of 32 (GGML's Q8_0 / Q8_1: scale and sum
/// at f16 precision), struct of arrays so that SIMD loads of consecutive blocks are
/// contiguous: `qs[row * cols + i]`, and per block `d` (scale), `s = d * sum(q)` (for the
/// formats with a min).
#[derive(Debug, Default, Clone)]
pub struct Q8Rows {
    /// Elements per row.
    pub cols: usize,
    /// The 8-bit values.
    pub qs: Vec<i8>,
    /// Scale per block.
    pub d: Vec<f32>,
    /// `d * sum(q)` per block.
    pub s: Vec<f32>,
    /// `d` and `s` interleaved (`[d0, s0, d1, s1, ...]`), for SIMD loads.
    pub ds: Vec<f32>,
    /// Each block's `d` repeated 8 times (one lane per 4 values), for 512-bit kernels.
    pub dv: Vec<f32>,
    /// `-8 *` the sum of each 4 values (the offset of Q4_0's unsigned nibbles).
    pub neg8: Vec<i32>,
    /// `-128 *` the sum of each 4 values (the offset of Q8_0's bytes made unsigned).
    pub neg128: Vec<i32>,
    /// The integer sum of each block's values (for the repacked kernels' offsets).
    pub isum: Vec<i32>,
}

/// One row of [`Q8Rows`].
#[derive(Debug, Clone, Copy)]
pub struct Q8Row<'a> {
    /// The 8-bit values.
    pub qs: &'a [i8],
    /// Scale per block.
    pub d: &'a [f32],
    /// `d * sum(q)` per block.
    pub s: &'a [f32],
    /// `d` and `s` interleaved.
    pub ds: &'a [f32],
    /// Each block's `d` repeated 8 times.
    pub dv: &'a [f32],
    /// `-8 *` the sum of each 4 values.
    pub neg8: &'a [i32],
    /// `-128 *` the sum of each 4 values.
    pub neg128: &'a [i32],
    /// The integer sum of each block's values.
    pub isum: &'a [i32],
}

impl Q8Rows {
    /// Quantizes `rows` rows of `cols` f32 values (`cols` a multiple of 32), reusing the
    /// buffers.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        let rows = x.len() / cols;
        let nb = rows * cols / QK;
        self.cols = cols;
        self.qs.resize(rows * cols, 0);
        self.d.resize(nb, 0.0);
        self.s.resize(nb, 0.0);
        self.ds.resize(2 * nb, 0.0);
        self.dv.resize(8 * nb, 0.0);
        self.neg8.resize(8 * nb, 0);
        self.neg128.resize(8 * nb, 0);
        self.isum.resize(nb, 0);
        for (b, (xb, qb)) in x.chunks_exact(QK).zip(self.qs.chunks_exact_mut(QK)).enumerate() {
            let amax = crate::kernels::amax_block(xb)
                .unwrap_or_else(|| xb.iter().fold(0f32, |m, v| m.max(v.abs())));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            if !crate::kernels::round_block(xb, id, qb) {
                for (q, &v) in qb.iter_mut().zip(xb.iter()) {
                    *q = round_i8(v * id);
                }
            }
            let sum: i32 = qb.iter().map(|&v| i32::from(v)).sum();
            // The scale and sum are kept at f16 precision, as GGML's Q8_0 / Q8_1 blocks
            // keep them, so that the products round as llama.cpp's do (beyond f16's range
            // they stay f32 rather than overflow).
            let s = f16_precision(d * sum as f32);
            let d = f16_precision(d);
            self.d[b] = d;
            self.s[b] = s;
            self.ds[2 * b] = d;
            self.ds[2 * b + 1] = s;
            self.dv[8 * b..8 * b + 8].fill(d);
            self.isum[b] = sum;
            for (g, q) in qb.chunks_exact(4).enumerate() {
                let sum: i32 = q.iter().map(|&v| i32::from(v)).sum();
                self.neg8[8 * b + g] = -8 * sum;
                self.neg128[8 * b + g] = -128 * sum;
            }
        }
    }

    /// Row `r`.
    #[inline(always)]
    pub fn row(&self, r: usize) -> Q8Row<'_> {
        let nb = self.cols / QK;
        Q8Row {
            qs: &self.qs[r * self.cols..(r + 1) * self.cols],
            d: &self.d[r * nb..(r + 1) * nb],
            s: &self.s[r * nb..(r + 1) * nb],
            ds: &self.ds[2 * r * nb..2 * (r + 1) * nb],
            dv: &self.dv[8 * r * nb..8 * (r + 1) * nb],
            neg8: &self.neg8[8 * r * nb..8 * (r + 1) * nb],
            neg128: &self.neg128[8 * r * nb..8 * (r + 1) * nb],
            isum: &self.isum[r * nb..(r + 1) * nb],
        }
    }
}

/// Activation rows quantized into 8-bit blocks of 256 (GGML's Q8_K): values, one scale
/// per block and the sum of every 16 values.
#[derive(Debug, Default, Clone)]
pub struct Q8KRows {
    /// Elements per row.
    pub cols: usize,
    /// The 8-bit values.
    pub qs: Vec<i8>,
    /// Scale per block.
    pub d: Vec<f32>,
    /// Sum of each 16 values.
    pub bsums: Vec<i16>,
}

/// One row of [`Q8KRows`].
#[derive(Debug, Clone, Copy)]
pub struct Q8KRow<'a> {
    /// The 8-bit values.
    pub qs: &'a [i8],
    /// Scale per block.
    pub d: &'a [f32],
    /// Sum of each 16 values.
    pub bsums: &'a [i16],
}

impl Q8KRows {
    /// Quantizes rows of `cols` values (`cols` a multiple of 256), reusing the buffers.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        let rows = x.len() / cols;
        let nb = rows * cols / QK_K;
        self.cols = cols;
        self.qs.resize(rows * cols, 0);
        self.d.resize(nb, 0.0);
        self.bsums.resize(nb * 16, 0);
        for (b, (xb, qb)) in x.chunks_exact(QK_K).zip(self.qs.chunks_exact_mut(QK_K)).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            for (q, &v) in qb.iter_mut().zip(xb) {
                *q = round_i8(v * id);
            }
            for g in 0..16 {
                self.bsums[b * 16 + g] =
                    qb[16 * g..16 * g + 16].iter().map(|&q| i16::from(q)).sum();
            }
            self.d[b] = d;
        }
    }

    /// Row `r`.
    #[inline(always)]
    pub fn row(&self, r: usize) -> Q8KRow<'_> {
        let nb = self.cols / QK_K;
        Q8KRow {
            qs: &self.qs[r * self.cols..(r + 1) * self.cols],
            d: &self.d[r * nb..(r + 1) * nb],
            bsums: &self.bsums[r * nb * 16..(r + 1) * nb * 16],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activation_rounding_is_half_away_from_zero() {
        for i in -1275..=1275 {
            let x = i as f32 / 10.0;
            assert_eq!(round_i8(x), x.round() as i8, "{x}");
        }
        for x in [0.5f32, -0.5, 1.5, -1.5, 126.5, -126.5, 0.49999997, -0.49999997, 127.0] {
            assert_eq!(round_i8(x), x.round() as i8, "{x}");
        }
    }

    #[test]
    fn simd_block_rounding_gives_the_scalar_rounding_bits() {
        // Blocks whose largest value is 127 steps: every tie, near-tie and sign, plus
        // random values, zeros and a block holding NaN or an infinity (those take the
        // scalar path and must still quantize).
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let mut x: Vec<f32> = Vec::new();
        for i in -1275..=1275 {
            x.push(i as f32 / 10.0);
        }
        x.extend([0.49999997f32, -0.49999997, 126.49999, -126.50001, 127.0, -127.0]);
        while !x.len().is_multiple_of(QK) {
            x.push(0.0);
        }
        x.extend((0..64 * QK).map(|_| next() * 3.0));
        x.extend([0.0; QK]);
        let mut nan = vec![1.0f32; QK];
        nan[3] = f32::NAN;
        let mut inf = vec![1.0f32; QK];
        inf[9] = f32::INFINITY;
        x.extend(nan);
        x.extend(inf);
        let mut q = Q8Rows::default();
        q.quantize(&x, QK);
        for (b, xb) in x.chunks_exact(QK).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            assert_eq!(q.d[b], f16_precision(d), "block {b} scale");
            for (i, &v) in xb.iter().enumerate() {
                assert_eq!(q.qs[b * QK + i], round_i8(v * id), "block {b} value {i}: {v}");
            }
            let sum: i32 = xb.iter().map(|&v| i32::from(round_i8(v * id))).sum();
            assert_eq!(q.isum[b], sum, "block {b}");
        }
    }
}
