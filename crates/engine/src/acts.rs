//! Activation quantization: the rows a product reads, once as f32 and once quantized into
//! the 8-bit blocks the weight formats pair with: [`Q8Rows`] (blocks of 32, for Q4_0 /
//! Q4_1 / Q5_0 / Q5_1 / Q8_0) or [`Q8KRows`] (blocks of 256 with 16-element sums, for the
//! K-quants) or rounded to bfloat16 ([`Bf16Rows`], for BF16). F32 and F16 weights take the
//! f32 rows as they are. Quantized once per
//! product and shared by every matrix that reads the same input ([`Acts`]).
//!
//! Below the formats: every format's kernels read an [`Acts`]; this module uses only the
//! format table ([`crate::format`]) and the shared SIMD helpers ([`crate::simd`]).

use half::f16;

use crate::format::{ActKind, QK, QK_K, WeightFormat};
use crate::pool::ThreadPool;

/// What one matrix's products read of its activation rows: the form, and whether also the
/// forms only some kernels read. A [`WeightFormat`] converts into the need of every kernel
/// of that format (the extras included); a [`crate::Matrix`] knows its own
/// ([`crate::Matrix::act_need`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActNeed {
    /// The form the format's kernels read.
    pub kind: ActKind,
    /// Whether the kernels also read the extra forms: for blocks of 32, the per-four
    /// offset sums and the interleaved and repeated scales of the kernels over unrepacked
    /// rows ([`Q8Rows::ds`], `dv`, `neg8`, `neg16`, `neg128`); for bfloat16, the values
    /// widened back to f32 ([`Bf16Rows::f32`]). Without them a row's extras read as empty,
    /// so a kernel that needs them fails its length check instead of reading stale values.
    pub extras: bool,
}

impl From<WeightFormat> for ActNeed {
    fn from(f: WeightFormat) -> ActNeed {
        ActNeed { kind: f.act_kind(), extras: true }
    }
}

/// Whether any of `needs` reads the form `kind`, and if so whether any reads its extras.
fn wants<N: Copy + Into<ActNeed>>(needs: &[N], kind: ActKind) -> Option<bool> {
    let of_kind = needs.iter().map(|&n| n.into()).filter(|n| n.kind == kind);
    of_kind.map(|n| n.extras).reduce(|a, b| a || b)
}

/// Activation rows in every form a product may need, all quantized from the same f32 rows.
#[derive(Debug, Default, Clone)]
pub struct Acts {
    /// Elements per row.
    pub cols: usize,
    /// Rows.
    pub rows: usize,
    /// The f32 values, row-major.
    pub f32: Vec<f32>,
    /// 8-bit blocks of 32 (filled when a Q4/Q5/Q8 matrix reads these rows).
    pub q8: Q8Rows,
    /// 8-bit blocks of 256 (filled when a K-quant matrix reads these rows).
    pub q8k: Q8KRows,
    /// Bfloat16 values (filled when a BF16 matrix reads these rows).
    pub bf16: Bf16Rows,
}

impl Acts {
    /// Takes `rows` rows of `cols` values from `x` (reusing the buffers) and quantizes them
    /// for each of `needs` (weight formats, or matrices' [`ActNeed`]s).
    pub fn load<N: Copy + Into<ActNeed>>(&mut self, x: &[f32], cols: usize, needs: &[N]) {
        self.cols = cols;
        self.rows = x.len() / cols;
        crate::copy::replace_values(&mut self.f32, x);
        self.quantize_for(needs);
    }

    /// [`Acts::quantize_for`] with a share of the rows on each of `pool`'s threads (the
    /// same values).
    pub fn quantize_for_on<N: Copy + Into<ActNeed>>(&mut self, pool: &ThreadPool, needs: &[N]) {
        if let Some(extras) = wants(needs, ActKind::Q8) {
            self.q8.quantize_on(pool, &self.f32, self.cols, extras);
        }
        if wants(needs, ActKind::Q8K).is_some() {
            self.q8k.quantize_on(pool, &self.f32, self.cols);
        }
        if let Some(extras) = wants(needs, ActKind::Bf16) {
            self.bf16.round_with(&self.f32, self.cols, extras);
        }
    }

    /// Quantizes the current f32 rows for each of `needs` (weight formats, or matrices'
    /// [`ActNeed`]s).
    pub fn quantize_for<N: Copy + Into<ActNeed>>(&mut self, needs: &[N]) {
        if let Some(extras) = wants(needs, ActKind::Q8) {
            self.q8.quantize_with(&self.f32, self.cols, extras);
        }
        if wants(needs, ActKind::Q8K).is_some() {
            self.q8k.quantize(&self.f32, self.cols);
        }
        if let Some(extras) = wants(needs, ActKind::Bf16) {
            self.bf16.round_with(&self.f32, self.cols, extras);
        }
    }

    /// Bytes its buffers hold (their capacities).
    pub fn bytes(&self) -> usize {
        fn cap<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        let q = &self.q8;
        let k = &self.q8k;
        cap(&self.f32)
            + cap(&q.qs)
            + cap(&q.d)
            + cap(&q.s)
            + cap(&q.ds)
            + cap(&q.dv)
            + cap(&q.neg8)
            + cap(&q.neg16)
            + cap(&q.neg128)
            + q.off.iter().map(cap).sum::<usize>()
            + cap(&k.qs)
            + cap(&k.d)
            + cap(&k.bsums)
            + cap(&k.sums32)
            + cap(&self.bf16.bits)
            + cap(&self.bf16.f32)
    }

    /// Row `r` of the f32 values.
    #[inline(always)]
    pub fn f32_row(&self, r: usize) -> &[f32] {
        &self.f32[r * self.cols..(r + 1) * self.cols]
    }
}

/// `x` rounded to f16 precision, or `x` itself where f16 cannot hold it.
#[inline]
fn f16_precision(x: f32) -> f32 {
    let r = f16::from_f32(x).to_f32();
    if r.is_finite() { r } else { x }
}

/// `y.round_ties_even()` without a libm call (which the baseline x86-64 target makes of
/// it, one call per value), so that loops of it vectorize: below 2^23, adding and taking
/// away 2^23 leaves a magnitude rounded to the nearest integer, ties to even, in the
/// default rounding mode (the sum lies where f32's step is 1); from 2^23 on every f32 is
/// an integer already. Infinities and NaN come back as they are.
#[inline(always)]
fn round_half_even(y: f32) -> f32 {
    const MAGIC: f32 = 8_388_608.0; // 2^23
    // On the magnitude, then the sign put back (so -0.5 gives -0.0, as libm's does).
    if y.abs() < MAGIC { ((y.abs() + MAGIC) - MAGIC).copysign(y) } else { y }
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
/// formats with a min) and the offsets the repacked kernels add (`off`). The extras
/// (`ds`, `dv`, `neg8`, `neg16`, `neg128`, read only by the kernels over unrepacked rows)
/// are filled only when asked for ([`ActNeed::extras`]).
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
    /// `-16 *` the sum of each 4 values (the offset of Q5_0's unsigned 5-bit values).
    pub neg16: Vec<i32>,
    /// `-128 *` the sum of each 4 values (the offset of Q8_0's bytes made unsigned).
    pub neg128: Vec<i32>,
    /// Each block's offset terms `-8`, `-16` and `-128` times the sum of its values (Q4_0's,
    /// Q5_0's and unsigned Q8_0's), so that a kernel adds one from memory per block.
    pub off: [Vec<i32>; 3],
    /// Whether the extras (`ds`, `dv`, `neg8`, `neg16`, `neg128`) hold the last
    /// quantization's values; where not, [`Q8Rows::row`] gives them empty.
    pub extras: bool,
}

/// One row of [`Q8Rows`] (its extras empty where they were not filled).
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
    /// `-16 *` the sum of each 4 values.
    pub neg16: &'a [i32],
    /// `-128 *` the sum of each 4 values.
    pub neg128: &'a [i32],
    /// Each block's `-8 *`, `-16 *` and `-128 *` its integer sum.
    pub off: [&'a [i32]; 3],
}

impl Q8Rows {
    /// Quantizes `rows` rows of `cols` f32 values (`cols` a multiple of 32), reusing the
    /// buffers, extras included.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        self.quantize_with(x, cols, true);
    }

    /// [`Q8Rows::quantize`], filling the extras only if `extras`.
    pub fn quantize_with(&mut self, x: &[f32], cols: usize, extras: bool) {
        let nb = self.resize(x.len() / cols, cols);
        self.extras = extras;
        quantize_q8_part(x, self.parts(nb).pop().unwrap_or_default(), extras);
    }

    /// [`Q8Rows::quantize_with`] with a share of the rows on each of `pool`'s threads: the
    /// same values, block by block.
    pub fn quantize_on(&mut self, pool: &ThreadPool, x: &[f32], cols: usize, extras: bool) {
        let rows = x.len() / cols;
        self.resize(rows, cols);
        self.extras = extras;
        let per = (pool.batch_rows_per_task(rows, cols, 1) * (cols / QK)).max(1);
        let mut parts = self.parts(per);
        pool.for_each_chunk(&mut parts, 1, &|i, part| {
            for part in part.iter_mut() {
                quantize_q8_part(&x[i * per * QK..], std::mem::take(part), extras);
            }
        });
    }

    /// Sizes the buffers for `rows` rows of `cols`; the number of blocks.
    fn resize(&mut self, rows: usize, cols: usize) -> usize {
        let nb = rows * cols / QK;
        self.cols = cols;
        self.qs.resize(rows * cols, 0);
        self.d.resize(nb, 0.0);
        self.s.resize(nb, 0.0);
        self.ds.resize(2 * nb, 0.0);
        self.dv.resize(8 * nb, 0.0);
        self.neg8.resize(8 * nb, 0);
        self.neg16.resize(8 * nb, 0);
        self.neg128.resize(8 * nb, 0);
        for o in &mut self.off {
            o.resize(nb, 0);
        }
        nb
    }

    /// Every buffer cut into runs of `per` blocks, one [`Q8Part`] per run.
    fn parts(&mut self, per: usize) -> Vec<Q8Part<'_>> {
        let per = per.max(1);
        let [o8, o16, o128] = &mut self.off;
        let mut qs = self.qs.chunks_mut(per * QK);
        let d = self.d.chunks_mut(per);
        let mut s = self.s.chunks_mut(per);
        let mut ds = self.ds.chunks_mut(2 * per);
        let mut dv = self.dv.chunks_mut(8 * per);
        let mut neg8 = self.neg8.chunks_mut(8 * per);
        let mut neg16 = self.neg16.chunks_mut(8 * per);
        let mut neg128 = self.neg128.chunks_mut(8 * per);
        let (mut o8, mut o16, mut o128) =
            (o8.chunks_mut(per), o16.chunks_mut(per), o128.chunks_mut(per));
        let mut parts = Vec::new();
        for d in d {
            let has = "every buffer has as many blocks";
            parts.push(Q8Part {
                qs: qs.next().expect(has),
                d,
                s: s.next().expect(has),
                ds: ds.next().expect(has),
                dv: dv.next().expect(has),
                neg8: neg8.next().expect(has),
                neg16: neg16.next().expect(has),
                neg128: neg128.next().expect(has),
                off: [o8.next().expect(has), o16.next().expect(has), o128.next().expect(has)],
            });
        }
        if parts.is_empty() {
            parts.push(Q8Part::default());
        }
        parts
    }

    /// Row `r` (its extras empty where they were not filled).
    #[inline(always)]
    pub fn row(&self, r: usize) -> Q8Row<'_> {
        let nb = self.cols / QK;
        // Per block, `k` values of an extra (none where the extras were not filled).
        fn extra<T>(on: bool, v: &[T], k: usize, r: usize, nb: usize) -> &[T] {
            if on { &v[k * r * nb..k * (r + 1) * nb] } else { &[] }
        }
        let on = self.extras;
        Q8Row {
            qs: &self.qs[r * self.cols..(r + 1) * self.cols],
            d: &self.d[r * nb..(r + 1) * nb],
            s: &self.s[r * nb..(r + 1) * nb],
            ds: extra(on, &self.ds, 2, r, nb),
            dv: extra(on, &self.dv, 8, r, nb),
            neg8: extra(on, &self.neg8, 8, r, nb),
            neg16: extra(on, &self.neg16, 8, r, nb),
            neg128: extra(on, &self.neg128, 8, r, nb),
            off: [0, 1, 2].map(|k| &self.off[k][r * nb..(r + 1) * nb]),
        }
    }
}

/// Mutable views of one run of blocks of every [`Q8Rows`] buffer.
#[derive(Default)]
struct Q8Part<'a> {
    qs: &'a mut [i8],
    d: &'a mut [f32],
    s: &'a mut [f32],
    ds: &'a mut [f32],
    dv: &'a mut [f32],
    neg8: &'a mut [i32],
    neg16: &'a mut [i32],
    neg128: &'a mut [i32],
    off: [&'a mut [i32]; 3],
}

/// Quantizes the blocks of `p` from the values at the start of `x`, the extras only if
/// `extras` (`neg8` then holds the plain sums of each four).
fn quantize_q8_part(x: &[f32], p: Q8Part<'_>, extras: bool) {
    let nb = p.d.len();
    // Each block's values, its scale before f16 rounding (in `d`) and the sums of its
    // fours (staged in `neg8`): SIMD while it can, the scalar reference for a block it
    // leaves (NaN, infinity).
    let mut b = 0;
    while b < nb {
        b += crate::simd::quantize_q8_0_blocks(
            &x[b * QK..nb * QK],
            &mut p.qs[b * QK..],
            &mut p.d[b..],
            &mut p.neg8[8 * b..],
        );
        if b < nb {
            let (xb, qb) = (&x[b * QK..(b + 1) * QK], &mut p.qs[b * QK..(b + 1) * QK]);
            let (d, fours) = quantize_q8_0_block(xb, qb);
            p.d[b] = d;
            p.neg8[8 * b..8 * b + 8].copy_from_slice(&fours);
            b += 1;
        }
    }
    // Per block: the scaled sum and the offsets' sums (one pass of zipped chunks, free
    // of index checks).
    let [o8, o16, o128] = p.off;
    let per_block = p.neg8.chunks_exact(8).zip(p.d.iter()).zip(p.s.iter_mut());
    for (((fours, &d), s), ((o8, o16), o128)) in
        per_block.zip(o8.iter_mut().zip(o16.iter_mut()).zip(o128.iter_mut()))
    {
        let sum: i32 = fours.iter().sum();
        *s = d * sum as f32;
        (*o8, *o16, *o128) = (-8 * sum, -16 * sum, -128 * sum);
    }
    // The scale and sum are kept at f16 precision, as GGML's Q8_0 / Q8_1 blocks keep
    // them, so that the products round as llama.cpp's do (beyond f16's range they stay
    // f32 rather than overflow).
    for v in [&mut *p.s, &mut *p.d] {
        let done = crate::simd::f16_round(v);
        v[done..].iter_mut().for_each(|x| *x = f16_precision(*x));
    }
    if !extras {
        return;
    }
    let negs = p.neg8.chunks_exact_mut(8).zip(p.neg16.chunks_exact_mut(8));
    let negs = negs.zip(p.neg128.chunks_exact_mut(8));
    let scales = p.ds.chunks_exact_mut(2).zip(p.dv.chunks_exact_mut(8));
    let scales = scales.zip(p.d.iter().zip(p.s.iter()));
    for (((ds, dv), (&d, &s)), ((n8, n16), n128)) in scales.zip(negs) {
        ds.copy_from_slice(&[d, s]);
        dv.fill(d);
        for k in 0..8 {
            let sum = n8[k];
            (n8[k], n16[k], n128[k]) = (-8 * sum, -16 * sum, -128 * sum);
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
    /// Sum of each 32 values (the K-quants with a scale and min per 32).
    pub sums32: Vec<i16>,
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
    /// Sum of each 32 values.
    pub sums32: &'a [i16],
}

impl Q8KRows {
    /// Quantizes rows of `cols` values (`cols` a multiple of 256), reusing the buffers.
    pub fn quantize(&mut self, x: &[f32], cols: usize) {
        self.resize(x.len() / cols, cols);
        quantize_q8k_part(x, &mut self.qs, &mut self.d, &mut self.bsums, &mut self.sums32);
    }

    /// [`Q8KRows::quantize`] with a share of the rows on each of `pool`'s threads: the
    /// same values, block by block.
    pub fn quantize_on(&mut self, pool: &ThreadPool, x: &[f32], cols: usize) {
        let rows = x.len() / cols;
        self.resize(rows, cols);
        let per = (pool.batch_rows_per_task(rows, cols, 1) * (cols / QK_K)).max(1);
        let parts = self.qs.chunks_mut(per * QK_K).zip(self.d.chunks_mut(per));
        let parts = parts.zip(self.bsums.chunks_mut(16 * per).zip(self.sums32.chunks_mut(8 * per)));
        let mut parts: Vec<_> = parts.collect();
        pool.for_each_chunk(&mut parts, 1, &|i, part| {
            for ((qs, d), (bsums, sums32)) in part.iter_mut() {
                quantize_q8k_part(&x[i * per * QK_K..], qs, d, bsums, sums32);
            }
        });
    }

    /// Sizes the buffers for `rows` rows of `cols`.
    fn resize(&mut self, rows: usize, cols: usize) {
        let nb = rows * cols / QK_K;
        self.cols = cols;
        self.qs.resize(rows * cols, 0);
        self.d.resize(nb, 0.0);
        self.bsums.resize(nb * 16, 0);
        self.sums32.resize(nb * 8, 0);
    }

    /// Row `r`.
    #[inline(always)]
    pub fn row(&self, r: usize) -> Q8KRow<'_> {
        let nb = self.cols / QK_K;
        Q8KRow {
            qs: &self.qs[r * self.cols..(r + 1) * self.cols],
            d: &self.d[r * nb..(r + 1) * nb],
            bsums: &self.bsums[r * nb * 16..(r + 1) * nb * 16],
            sums32: &self.sums32[r * nb * 8..(r + 1) * nb * 8],
        }
    }
}

/// Quantizes the blocks of `d` (their values into `qs`, their sums into `bsums` and
/// `sums32`) from the values at the start of `x`.
fn quantize_q8k_part(
    x: &[f32],
    qs: &mut [i8],
    d: &mut [f32],
    bsums: &mut [i16],
    sums32: &mut [i16],
) {
    let blocks = x.chunks_exact(QK_K).zip(qs.chunks_exact_mut(QK_K)).zip(d.iter_mut());
    let sums = bsums.chunks_exact_mut(16).zip(sums32.chunks_exact_mut(8));
    for (((xb, qb), d), (bsums, sums32)) in blocks.zip(sums) {
        *d = crate::simd::quantize_q8k_block(xb, qb, bsums)
            .unwrap_or_else(|| quantize_q8k_block(xb, qb, bsums));
        for j in 0..8 {
            sums32[j] = bsums[2 * j] + bsums[2 * j + 1];
        }
    }
}

/// Activation rows rounded to bfloat16, to nearest with ties to even (NaN stays a NaN):
/// the form llama.cpp's BF16 products multiply: the 16-bit values that `vdpbf16ps` and
/// the AVX2 kernel read and, where asked for ([`ActNeed::extras`]), the same widened back
/// to f32 (exactly) for the kernels that multiply f32 lanes. A BF16 weight times such a value is exact in f32, so every tier's product
/// differs from the others only in the order of its additions.
#[derive(Debug, Default, Clone)]
pub struct Bf16Rows {
    /// Elements per row.
    pub cols: usize,
    /// The bfloat16 values, row-major.
    pub bits: Vec<u16>,
    /// The same values as f32 (the extra form, [`ActNeed::extras`]: the kernels that
    /// widen their weights to f32 read it).
    pub f32: Vec<f32>,
    /// Whether `f32` holds the last rounding's values; where not, [`Bf16Rows::f32_row`]
    /// gives an empty row.
    pub widened: bool,
}

impl Bf16Rows {
    /// Rounds rows of `cols` values of `x` (reusing the buffers), widened back to f32 too.
    pub fn round(&mut self, x: &[f32], cols: usize) {
        self.round_with(x, cols, true);
    }

    /// [`Bf16Rows::round`], widening back to f32 only if `widen`.
    pub fn round_with(&mut self, x: &[f32], cols: usize, widen: bool) {
        self.cols = cols;
        self.widened = widen;
        // Sized first, then filled in place.
        self.bits.resize(x.len(), 0);
        crate::simd::round_bf16(x, &mut self.bits);
        if widen {
            self.f32.resize(x.len(), 0.0);
            crate::simd::widen_bf16(&self.bits, &mut self.f32);
        }
    }

    /// Row `r` as bfloat16 values.
    #[inline(always)]
    pub fn bits_row(&self, r: usize) -> &[u16] {
        &self.bits[r * self.cols..(r + 1) * self.cols]
    }

    /// Row `r` as f32 values (empty where they were not widened).
    #[inline(always)]
    pub fn f32_row(&self, r: usize) -> &[f32] {
        if self.widened { &self.f32[r * self.cols..(r + 1) * self.cols] } else { &[] }
    }
}

/// One block of 32 activations quantized as GGML's Q8_0, exactly: `d = amax / 127`, each
/// value `x * (1 / d)` rounded half away from zero into `qb`. Returns `d` (before f16
/// rounding) and the sum of every 4 values: the reference the SIMD path
/// (`simd::quantize_q8_0_blocks`) matches bit for bit.
fn quantize_q8_0_block(xb: &[f32], qb: &mut [i8]) -> (f32, [i32; 8]) {
    let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (q, &v) in qb.iter_mut().zip(xb) {
        *q = round_i8(v * id);
    }
    let fours = std::array::from_fn(|g| qb[4 * g..4 * g + 4].iter().map(|&v| i32::from(v)).sum());
    (d, fours)
}

/// One block of 256 activations quantized as GGML's Q8_K, exactly: the scale comes from
/// the value of largest magnitude with its sign (`-127 / max`), values round half to even,
/// and the block's scale (returned) is the reciprocal (negative when that value is
/// positive); `bsums` gets the sum of every 16 values. The reference the SIMD path
/// (`simd::quantize_q8k_block`) matches bit for bit.
fn quantize_q8k_block(xb: &[f32], qb: &mut [i8], bsums: &mut [i16]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let iscale = if amax != 0.0 { -127.0 / max } else { 0.0 };
    for (q, &v) in qb.iter_mut().zip(xb) {
        *q = (round_half_even(iscale * v) as i32).clamp(-128, 127) as i8;
    }
    for (g, s) in bsums.iter_mut().enumerate() {
        *s = qb[16 * g..16 * g + 16].iter().map(|&q| i16::from(q)).sum();
    }
    if amax != 0.0 { 1.0 / iscale } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantizing_on_a_pool_gives_every_buffer_the_bits_of_one_thread() {
        for (rows, cols) in [(1, 256), (3, 512), (300, 512), (517, 256)] {
            let x: Vec<f32> = (0..rows * cols)
                .map(|i| ((i as u32).wrapping_mul(2654435761) >> 8) as f32 / 65536.0 - 128.0)
                .collect();
            let mut one = Acts::default();
            one.load(&x, cols, &[WeightFormat::Q4_0, WeightFormat::Q4K]);
            for threads in [1, 2, 3] {
                let pool = ThreadPool::new(threads);
                let mut on = Acts { cols, rows, f32: x.clone(), ..Acts::default() };
                on.quantize_for_on(&pool, &[WeightFormat::Q4_0, WeightFormat::Q4K]);
                let (a, b) = (&one.q8, &on.q8);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!((&a.qs, &a.neg8, &a.neg16), (&b.qs, &b.neg8, &b.neg16));
                assert_eq!((&a.neg128, &a.off), (&b.neg128, &b.off));
                for (u, v) in [(&a.d, &b.d), (&a.s, &b.s), (&a.ds, &b.ds), (&a.dv, &b.dv)] {
                    assert_eq!(bits(u), bits(v), "{rows} x {cols} at {threads} threads");
                }
                let (a, b) = (&one.q8k, &on.q8k);
                assert_eq!((&a.qs, &a.bsums, &a.sums32), (&b.qs, &b.bsums, &b.sums32));
                assert_eq!(bits(&a.d), bits(&b.d), "{rows} x {cols} at {threads} threads");
            }
        }
    }

    #[test]
    fn without_extras_the_core_forms_are_the_same_and_the_extras_read_as_empty() {
        let (rows, cols) = (3, 512);
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| ((i as u32).wrapping_mul(2654435761) >> 8) as f32 / 65536.0 - 128.0)
            .collect();
        let mut all = Acts::default();
        all.load(&x, cols, &[WeightFormat::Q8_0, WeightFormat::BF16]);
        let core = [ActKind::Q8, ActKind::Bf16].map(|kind| ActNeed { kind, extras: false });
        for threads in [1, 2] {
            let pool = ThreadPool::new(threads);
            let mut lean = Acts { cols, rows, f32: x.clone(), ..Acts::default() };
            lean.quantize_for_on(&pool, &core);
            for r in 0..rows {
                let (a, b) = (all.q8.row(r), lean.q8.row(r));
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!((a.qs, a.off), (b.qs, b.off), "row {r} at {threads} threads");
                assert_eq!((bits(a.d), bits(a.s)), (bits(b.d), bits(b.s)));
                assert!(a.ds.len() == 2 * cols / QK && a.neg8.len() == cols / 4);
                let extras = [b.neg8.len(), b.neg16.len(), b.neg128.len(), b.ds.len()];
                assert_eq!((extras, b.dv.len()), ([0; 4], 0), "row {r}");
                assert_eq!(all.bf16.bits_row(r), lean.bf16.bits_row(r));
                assert_eq!((all.bf16.f32_row(r).len(), lean.bf16.f32_row(r).len()), (cols, 0));
            }
            // Asked for again with the extras, they are filled.
            lean.quantize_for(&[WeightFormat::Q8_0]);
            assert_eq!(
                (lean.q8.row(1).neg128, lean.q8.row(1).dv),
                (all.q8.row(1).neg128, all.q8.row(1).dv)
            );
        }
    }

    #[test]
    fn simd_q8k_blocks_equal_the_scalar_reference_bit_for_bit_ties_and_odd_values_included() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut blocks: Vec<Vec<f32>> = Vec::new();
        for scale in [1e-30f32, 1e-3, 1.0, 37.5, 3e4, 1e30] {
            for _ in 0..50 {
                blocks.push(
                    (0..256).map(|_| ((next() % 20_001) as f32 / 10_000.0 - 1.0) * scale).collect(),
                );
            }
        }
        // The largest magnitude twice with both signs (the first one sets the sign), a
        // block of zeros (and negative zeros), halves that round to even, a lone value.
        let mut tie = vec![0.25f32; 256];
        tie[17] = -3.0;
        tie[200] = 3.0;
        blocks.push(tie.clone());
        tie.swap(17, 200);
        blocks.push(tie);
        blocks.push(vec![0.0; 256]);
        blocks.push((0..256).map(|i| if i % 2 == 0 { -0.0 } else { 0.0 }).collect());
        blocks.push((0..256).map(|i| (i as f32 - 128.0) * 0.5).collect());
        let mut lone = vec![0.0f32; 256];
        lone[255] = -1e-20;
        blocks.push(lone);
        let mut simd_ran = 0;
        for x in &blocks {
            let (mut q0, mut s0) = (vec![0i8; 256], vec![0i16; 16]);
            let d0 = quantize_q8k_block(x, &mut q0, &mut s0);
            let (mut q1, mut s1) = (vec![0i8; 256], vec![0i16; 16]);
            if let Some(d1) = crate::simd::quantize_q8k_block(x, &mut q1, &mut s1) {
                simd_ran += 1;
                assert_eq!((d1.to_bits(), &q1, &s1), (d0.to_bits(), &q0, &s0), "{x:?}");
            }
        }
        if cfg!(target_arch = "x86_64") && crate::Isa::Avx2.is_available() {
            assert_eq!(simd_ran, blocks.len(), "every finite block takes the SIMD path");
        }
        // Values so small that `-127 / max` overflows: the scalar path's.
        let tiny: Vec<f32> = (0..256).map(|i| (i as f32 - 100.0) * 1e-40).collect();
        assert!(crate::simd::quantize_q8k_block(&tiny, &mut [0; 256], &mut [0; 16]).is_none());
        let (mut q, mut s) = (vec![0i8; 256], vec![0i16; 16]);
        quantize_q8k_part(&tiny, &mut q, &mut [0.0], &mut s, &mut [0; 8]);
        let (mut q0, mut s0) = (vec![0i8; 256], vec![0i16; 16]);
        quantize_q8k_block(&tiny, &mut q0, &mut s0);
        assert_eq!((q, s), (q0, s0));
        // NaN or infinity: the scalar path's.
        let mut bad = vec![1.0f32; 256];
        bad[3] = f32::NAN;
        assert!(crate::simd::quantize_q8k_block(&bad, &mut [0; 256], &mut [0; 16]).is_none());
        bad[3] = f32::NEG_INFINITY;
        assert!(crate::simd::quantize_q8k_block(&bad, &mut [0; 256], &mut [0; 16]).is_none());
    }

    #[test]
    fn rounding_half_to_even_without_libm_gives_round_ties_even_bits() {
        let mut xs: Vec<f32> = (-20_000..=20_000).map(|i| i as f32 * 0.0125).collect();
        xs.extend([
            0.5,
            1.5,
            2.5,
            -0.5,
            -1.5,
            -2.5,
            126.5,
            -127.5,
            4_194_303.5,
            -4_194_304.5,
            8_388_607.5,
        ]);
        xs.extend([1e9, -1e9, f32::INFINITY, f32::NEG_INFINITY, -0.0, 8_388_609.0]);
        for x in xs {
            assert_eq!(round_half_even(x).to_bits(), x.round_ties_even().to_bits(), "{x}");
        }
        assert!(round_half_even(f32::NAN).is_nan());
    }

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
        // Blocks scaled by exactly 1 (largest value 127): every half-integer, and the
        // floats just above and below it, of both signs.
        let mut ties = Vec::new();
        for k in -127..127 {
            let h = k as f32 + 0.5;
            ties.extend([h, h.next_up(), h.next_down(), (k as f32).next_up()]);
        }
        for c in ties.chunks(QK - 1) {
            x.extend(c);
            x.push(127.0);
            x.extend(std::iter::repeat_n(0.0, QK - 1 - c.len()));
        }
        // A block whose scale is subnormal (its values may leave the 8-bit range after
        // rounding the scale), between random blocks on either side of 64-block chunks.
        x.extend((0..40 * QK).map(|_| next() * 3.0));
        x.extend((0..QK).map(|i| (i as f32 - 9.5) * 1e-41));
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
            assert_eq!(q.off[0][b], -8 * sum, "block {b}");
            for g in 0..8 {
                let four: i32 =
                    xb[4 * g..4 * g + 4].iter().map(|&v| i32::from(round_i8(v * id))).sum();
                assert_eq!(q.neg8[8 * b + g], -8 * four, "block {b} values {}..", 4 * g);
                assert_eq!(q.neg128[8 * b + g], -128 * four, "block {b} values {}..", 4 * g);
            }
            let s = f16_precision(d * sum as f32);
            assert_eq!(q.s[b].to_bits(), s.to_bits(), "block {b} scaled sum {s}");
            assert_eq!((q.off[1][b], q.dv[8 * b + 7]), (-16 * sum, q.d[b]), "block {b}");
        }
    }

    #[test]
    fn simd_f16_rounding_keeps_what_f16_cannot_hold_as_the_scalar_rounding_does() {
        let mut xs: Vec<f32> = (0..4000).map(|i| (i as f32 - 2000.0) * 37.123).collect();
        xs.extend([65504.0, 65519.0, 65520.0, -70000.0, 1e10, f32::NAN, f32::INFINITY]);
        xs.extend([1e-8, -6e-8, 5.9e-8, 1e-30, -0.0, 0.0, 3.1e-5, 0.1, 1.0 / 3.0]);
        let want: Vec<u32> = xs.iter().map(|&x| f16_precision(x).to_bits()).collect();
        let mut got = xs.clone();
        let done = crate::simd::f16_round(&mut got);
        if cfg!(target_arch = "x86_64") && crate::Isa::Avx2.is_available() {
            assert_eq!(done, xs.len() / 8 * 8, "every whole 8 by SIMD");
        }
        got[done..].iter_mut().for_each(|x| *x = f16_precision(*x));
        let got: Vec<u32> = got.iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn bfloat16_rounding_is_to_nearest_ties_to_even_and_keeps_nans_infinities_and_signs() {
        let mut values = vec![0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN];
        // Every exponent (subnormals too), odd and even upper halves, and lower halves
        // below, at and above a tie.
        for exponent in 0..255u32 {
            for high in [0x00, 0x01, 0x42, 0x7F] {
                for low in [0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF] {
                    let v = f32::from_bits(exponent << 23 | high << 16 | low);
                    values.extend([v, -v]);
                }
            }
        }
        let mut rows = Bf16Rows::default();
        rows.round(&values, values.len());
        for (i, &v) in values.iter().enumerate() {
            let want = half::bf16::from_f32(v);
            assert_eq!(rows.bits_row(0)[i], want.to_bits(), "{v:e} ({:#010x})", v.to_bits());
            assert_eq!(rows.f32_row(0)[i].to_bits(), want.to_f32().to_bits(), "{v:e}");
        }
        rows.round(&[f32::NAN, -f32::NAN, f32::from_bits(0x7F80_0001)], 3);
        assert!(rows.f32_row(0).iter().all(|v| v.is_nan()), "{:?}", rows.bits_row(0));
        // Infinities and NaNs of every kind, enough of them for the SIMD path: each the
        // scalar rounding's bits, and every NaN still a NaN when widened.
        let specials: Vec<f32> =
            [0x7F80_0000u32, 0x7F80_0001, 0x7FBF_FFFF, 0x7FC0_0000, 0x7FFF_FFFF]
                .iter()
                .flat_map(|&b| [b, b | 0x8000_0000])
                .cycle()
                .take(37)
                .map(f32::from_bits)
                .collect();
        rows.round(&specials, specials.len());
        for (i, &v) in specials.iter().enumerate() {
            assert_eq!(rows.bits_row(0)[i], crate::simd::bf16_bits(v), "{:#010x}", v.to_bits());
            assert_eq!(rows.f32_row(0)[i].is_nan(), v.is_nan(), "{:#010x}", v.to_bits());
        }
    }
}
