//! Weight matrices as views of the mapped file, and matrix products split across output
//! rows.
//!
//! Products write their output transposed, `[output row][activation row]`, so that each
//! task of the pool owns one contiguous range of output rows (for one activation row, the
//! common decode case, the two layouts are the same). The caller gathers the values back
//! into its row-major buffers, adding the residual in the same pass where there is one.

use std::ops::Range;
use std::sync::Arc;

use crate::acts::ActNeed;
use crate::format::ActKind;
use crate::isa::Isa;
use crate::kernels::{self, Acts, Kernels};
use crate::pool::ThreadPool;
use crate::quant::{WeightFormat, dequantize_row};

/// The alignment [`Bytes::aligned_copy`] gives: one cache line.
pub const CACHE_LINE: usize = 64;

/// Bytes a matrix reads: a range of a shared buffer (the mapped GGUF file) or owned bytes.
#[derive(Clone)]
pub struct Bytes {
    owner: Arc<dyn AsRef<[u8]> + Send + Sync>,
    range: Range<usize>,
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bytes").field("range", &self.range).finish()
    }
}

impl Bytes {
    /// `range` of `owner`; `None` when it lies outside.
    pub fn new(owner: Arc<dyn AsRef<[u8]> + Send + Sync>, range: Range<usize>) -> Option<Bytes> {
        ((*owner).as_ref().get(range.clone()).is_some()).then_some(Bytes { owner, range })
    }

    /// Owned bytes.
    pub fn from_vec(v: Vec<u8>) -> Bytes {
        let range = 0..v.len();
        Bytes { owner: Arc::new(v), range }
    }

    /// A copy of `bytes` that starts on a 64-byte boundary (a cache line), so that a row's
    /// vector loads straddle no more lines than the row's own offset makes them.
    pub fn aligned_copy(bytes: &[u8]) -> Bytes {
        let mut v = vec![0u8; bytes.len() + CACHE_LINE - 1];
        let start = v.as_ptr().align_offset(CACHE_LINE).min(CACHE_LINE - 1);
        v[start..start + bytes.len()].copy_from_slice(bytes);
        // Moving the vector into the `Arc` keeps its heap buffer where it is.
        Bytes { owner: Arc::new(v), range: start..start + bytes.len() }
    }

    /// Bytes `range` of these bytes (relative to their start); `None` when it lies outside.
    pub fn sub(&self, range: Range<usize>) -> Option<Bytes> {
        if range.start > range.end || range.end > self.range.len() {
            return None;
        }
        let start = self.range.start + range.start;
        Some(Bytes { owner: self.owner.clone(), range: start..start + range.len() })
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.range.clone()]
    }

    /// Where the bytes lie in their owner (the offsets in the mapped file).
    pub fn range(&self) -> Range<usize> {
        self.range.clone()
    }
}

/// A `rows x cols` weight matrix in a GGUF block format (rows are output features).
#[derive(Debug, Clone)]
pub struct Matrix {
    format: WeightFormat,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: Bytes,
    kernels: Kernels,
    isa: Isa,
    /// The weights repacked for the group kernels, when this CPU and format have them.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    packed: Option<Arc<kernels::packed::Packed>>,
}

impl Matrix {
    /// A matrix over `data`, computed with `isa`'s kernels (or the next narrower ones).
    pub fn new(
        format: WeightFormat,
        rows: usize,
        cols: usize,
        data: Bytes,
        isa: Isa,
    ) -> Result<Matrix, String> {
        let row_bytes = format.row_bytes(cols).ok_or_else(|| {
            format!("{} rows of {cols} values are not whole blocks", format.name())
        })?;
        let need = row_bytes.checked_mul(rows).ok_or("matrix size overflows")?;
        if data.as_slice().len() != need {
            return Err(format!(
                "{rows} x {cols} {} needs {need} bytes, got {}",
                format.name(),
                data.as_slice().len()
            ));
        }
        Ok(Matrix {
            format,
            rows,
            cols,
            row_bytes,
            data,
            kernels: kernels::select(isa, format),
            isa: kernels::effective_isa(isa, format),
            #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
            packed: None,
        })
    }

    /// The same matrix with its weights repacked for the products, where the format and
    /// instruction set have a repacked kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K,
    /// Q6_K and MXFP4 with AVX2, AVX-512 VNNI or NEON with dotprod, rows a multiple of 16):
    /// a private copy of the weights that multiplies several activation rows much faster.
    /// Otherwise the matrix as it is. Row lookups ([`Matrix::dequantize_row`]) keep
    /// reading the original bytes.
    pub fn repacked(mut self) -> Matrix {
        self.repack();
        self
    }

    /// [`Matrix::repacked`] in place.
    pub fn repack(&mut self) {
        self.repack_then(&mut |_| {});
    }

    /// [`Matrix::repack`], telling `done` the range of its bytes' owner (the file's
    /// offsets, see [`Bytes::range`]) that the copy no longer needs, as it grows: the
    /// owner of a mapping drops those pages while the rest is copied. Never called where
    /// nothing is repacked.
    pub fn repack_then(&mut self, done: &mut dyn FnMut(Range<usize>)) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if self.isa != Isa::Scalar && self.packed.is_none() {
            let start = self.data.range().start;
            self.packed = kernels::packed::Packed::new_then(
                self.format,
                self.rows,
                self.cols,
                self.data.as_slice(),
                self.isa,
                &mut |n| done(start..start + n),
            )
            .map(Arc::new);
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let _ = done;
    }

    /// What this matrix's products read of their activation rows: the extras
    /// ([`ActNeed::extras`]) only where its own kernels read them (blocks of 32 over
    /// rows left unrepacked; bfloat16 on the kernels that widen it to f32).
    pub fn act_need(&self) -> ActNeed {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        let repacked = self.packed.is_some();
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let repacked = false;
        let kind = self.format.act_kind();
        let extras = match kind {
            ActKind::Q8 => !repacked,
            ActKind::Bf16 => kernels::bf16_reads_f32(self.isa),
            ActKind::F32 | ActKind::Q8K => false,
        };
        ActNeed { kind, extras }
    }

    /// Bytes of the repacked copy (0 when the products read the original blocks).
    pub fn repacked_bytes(&self) -> usize {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if let Some(p) = &self.packed {
            return p.bytes();
        }
        0
    }

    /// Storage format.
    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// Output features.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Input features.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The instruction set its kernels use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Bytes of weights.
    pub fn bytes(&self) -> usize {
        self.row_bytes * self.rows
    }

    /// Row `r`'s bytes.
    pub fn row(&self, r: usize) -> &[u8] {
        &self.data.as_slice()[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Row `r` as f32 (the embedding lookup).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        dequantize_row(self.format, self.row(r), &mut out[..self.cols]);
    }

    /// Dot products of rows `rows` with activation rows `acts`: `out[i * stride + k]` for
    /// row `rows.start + i` and activation row `acts.start + k`. The kernels prefetch
    /// weight rows ahead (they stream from memory once per step).
    pub fn dot_rows(
        &self,
        rows: Range<usize>,
        a: &Acts,
        acts: Range<usize>,
        out: &mut [f32],
        stride: usize,
    ) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if let Some(p) = &self.packed {
            return packed_rows(p, rows, a, acts, out, stride);
        }
        // Blocks of rows small enough to stay in L1 while every activation row meets them
        // (the activation rows are the inner loop only within a block).
        const BLOCK: usize = 16;
        let data = self.data.as_slice();
        let mut r = rows.start;
        while r < rows.end {
            let end = (r + BLOCK).min(rows.end);
            let w = &data[r * self.row_bytes..rows.end * self.row_bytes];
            let out = &mut out[(r - rows.start) * stride..];
            let n = end - r;
            kernels::dot_rows(&self.kernels, w, n, self.row_bytes, a, acts.clone(), out, stride);
            r = end;
        }
    }

    /// The kernels.
    pub fn kernels(&self) -> &Kernels {
        &self.kernels
    }
}

/// [`Matrix::dot_rows`] on repacked weights: whole groups of 16 rows, four activation
/// rows at a time, keeping the rows asked for.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn packed_rows(
    p: &kernels::packed::Packed,
    rows: Range<usize>,
    a: &Acts,
    acts: Range<usize>,
    out: &mut [f32],
    stride: usize,
) {
    use kernels::packed::GROUP;
    if rows.is_empty() {
        return;
    }
    for g in rows.start / GROUP..rows.end.div_ceil(GROUP) {
        let keep = (g * GROUP).max(rows.start)..((g + 1) * GROUP).min(rows.end);
        let mut k = acts.start;
        while k < acts.end {
            let mut put = |vals: &[[f32; GROUP]]| {
                for (j, v) in vals.iter().enumerate() {
                    for o in keep.clone() {
                        out[(o - rows.start) * stride + (k - acts.start) + j] = v[o - g * GROUP];
                    }
                }
            };
            match acts.end - k {
                1 => put(&p.group(g, a, [k])),
                2 => put(&p.group(g, a, [k, k + 1])),
                3 => put(&p.group(g, a, [k, k + 1, k + 2])),
                _ => put(&p.group(g, a, [k, k + 1, k + 2, k + 3])),
            }
            k += (acts.end - k).min(4);
        }
    }
}

/// Repacks every matrix of `mats` ([`Matrix::repack`]), one matrix per task of the pool:
/// a stage's load spreads its repacking over its compute threads.
pub fn repack_all(pool: &ThreadPool, mats: &mut [&mut Matrix]) {
    repack_all_then(pool, mats, &|_| {});
}

/// [`repack_all`], calling `done` (on the thread that repacks) with each range of the
/// owners' bytes that a repacked copy no longer needs, as each copy grows
/// ([`Matrix::repack_then`]): the owner of a mapping releases those pages while the rest
/// is copied, so that a load never holds two copies of the weights, not even of one
/// large matrix (a 262k-row output head).
pub fn repack_all_then(
    pool: &ThreadPool,
    mats: &mut [&mut Matrix],
    done: &(dyn Fn(Range<usize>) + Sync),
) {
    pool.for_each_chunk(mats, 1, &|_, chunk| {
        for m in chunk.iter_mut() {
            m.repack_then(&mut |r| done(r));
        }
    });
}

impl Matrix {
    /// The bytes the matrix was made over (the file's, where it is a view of a mapping).
    pub fn data(&self) -> &Bytes {
        &self.data
    }
}

/// Output rows per pool task: enough tasks to balance the threads, few enough to keep
/// the hand-out cheap. Only scheduling depends on it, never a value.
/// A multiple of 16 so that tasks split no group of repacked rows.
pub fn rows_per_task(total: usize, threads: usize) -> usize {
    if threads <= 1 { total.max(1) } else { total.div_ceil(threads * 8).next_multiple_of(16) }
}

/// `out_t[o][b] = mats[..] row o . acts row b` for the stacked output rows of `mats`
/// (all reading the same `acts`); `out_t` holds `sum(rows) * acts.rows` values.
pub fn matmul_t(pool: &ThreadPool, mats: &[&Matrix], acts: &Acts, out_t: &mut [f32]) {
    let n = acts.rows;
    let total: usize = mats.iter().map(|m| m.rows).sum();
    assert_eq!(out_t.len(), total * n);
    assert!(mats.iter().all(|m| m.cols == acts.cols));
    let per = rows_per_task(total, pool.threads());
    pool.for_each_chunk(out_t, per * n, &|i, chunk| {
        // Rows first..first + chunk rows of the stacked matrices, one run per matrix.
        let (mut o, mut m) = (i * per, 0);
        let mut done = 0;
        let rows = chunk.len() / n;
        while done < rows {
            while o >= mats[m].rows {
                o -= mats[m].rows;
                m += 1;
            }
            let take = (mats[m].rows - o).min(rows - done);
            mats[m].dot_rows(o..o + take, acts, 0..n, &mut chunk[done * n..], n);
            o += take;
            done += take;
        }
    });
}

/// The activation of a gated feed-forward's gate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Gate {
    /// SiLU: SwiGLU.
    #[default]
    Silu,
    /// GELU with the tanh approximation: GeGLU.
    GeluTanh,
    /// gpt-oss's clamped SwiGLU (GGML's `swiglu_oai`, alpha 1.702, limit 7).
    SwigluOai,
}

impl Gate {
    /// The activation of `x` (GELU as llama.cpp computes it: [`gelu_f16_table`]).
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Gate::Silu => silu(x),
            Gate::GeluTanh => gelu_table(x),
            Gate::SwigluOai => {
                let x = x.min(7.0);
                x / (1.0 + (1.702 * -x).exp())
            }
        }
    }

    /// The gated value of gate product `g` and up product `u`.
    #[inline]
    pub fn combine(self, g: f32, u: f32) -> f32 {
        match self {
            Gate::SwigluOai => self.apply(g) * (u.clamp(-7.0, 7.0) + 1.0),
            _ => self.apply(g) * u,
        }
    }
}

/// A gated feed-forward fused into the gate and up products: `out_t[o][b] =
/// act(gate_o . x_b) * (up_o . x_b)`.
pub fn glu_t(
    pool: &ThreadPool,
    act: Gate,
    gate: &Matrix,
    up: &Matrix,
    acts: &Acts,
    out_t: &mut [f32],
) {
    let n = acts.rows;
    assert_eq!(gate.rows, up.rows);
    assert_eq!(out_t.len(), gate.rows * n);
    let per = rows_per_task(gate.rows, pool.threads());
    pool.for_each_chunk(out_t, per * n, &|i, chunk| {
        glu_rows(act, gate, up, acts, 0..n, i * per, chunk)
    });
}

/// [`glu_t`] over activation rows `cols` of `acts` for output rows `first..first +
/// chunk.len() / cols.len()` only, into `chunk` (`[row][activation row]`): one task's
/// share, the same values whatever the split.
pub fn glu_rows(
    act: Gate,
    gate: &Matrix,
    up: &Matrix,
    acts: &Acts,
    cols: Range<usize>,
    first: usize,
    chunk: &mut [f32],
) {
    glu_rows_biased(act, gate, up, None, acts, cols, first, chunk);
}

/// [`glu_rows`] with biases added to the gate and up products (indexed by output row)
/// before the activation (gpt-oss's experts).
#[allow(clippy::too_many_arguments)]
pub fn glu_rows_biased(
    act: Gate,
    gate: &Matrix,
    up: &Matrix,
    bias: Option<(&[f32], &[f32])>,
    acts: &Acts,
    cols: Range<usize>,
    first: usize,
    chunk: &mut [f32],
) {
    // Rows per block: one repacked group when several passes of 4 activation rows go over
    // it (the block's weights stay in L1 between passes); 16 groups in one pass (a decode
    // step), so that the gate's and the up's weights each stream from memory in long runs
    // instead of switching between the two matrices every group.
    const BLOCK: usize = 16;
    const WIDE: usize = 16 * BLOCK;
    let (a0, n) = (cols.start, cols.len());
    let block = if n <= 4 { WIDE } else { BLOCK };
    // Blocks of rows x 4 activation rows: gate and up into the stack, then the gated
    // product into the output.
    let mut g = [0f32; WIDE * 4];
    let mut u = [0f32; WIDE * 4];
    let rows = chunk.len() / n;
    for r0 in (0..rows).step_by(block) {
        let nr = block.min(rows - r0);
        let o = first + r0;
        for c0 in (0..n).step_by(4) {
            let nc = 4.min(n - c0);
            gate.dot_rows(o..o + nr, acts, a0 + c0..a0 + c0 + nc, &mut g, 4);
            up.dot_rows(o..o + nr, acts, a0 + c0..a0 + c0 + nc, &mut u, 4);
            for r in 0..nr {
                let (bg, bu) = bias.map_or((0.0, 0.0), |(bg, bu)| (bg[o + r], bu[o + r]));
                for c in 0..nc {
                    let (gv, uv) = (g[r * 4 + c], u[r * 4 + c]);
                    chunk[(r0 + r) * n + c0 + c] = match bias {
                        None => act.combine(gv, uv),
                        Some(_) => act.combine(gv + bg, uv + bu),
                    };
                }
            }
        }
    }
}

/// `x / (1 + e^-x)`.
#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// GELU as llama.cpp's CPU backend computes it: 0 at or below -10, `x` at or above 10,
/// else `x` rounded to f16 indexes a table of [`gelu_tanh`] of every f16 value, each
/// rounded to f16. Bitwise llama.cpp's values, and a lookup instead of a `tanh`.
#[inline]
pub fn gelu_table(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_f16_table()[usize::from(half::f16::from_f32(x).to_bits())]
    }
}

/// [`gelu_tanh`] of every f16 value (by its bits), rounded to f16; made once.
pub fn gelu_f16_table() -> &'static [f32; 65536] {
    static TABLE: std::sync::OnceLock<Box<[f32; 65536]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t = Box::new([0f32; 65536]);
        for (i, v) in t.iter_mut().enumerate() {
            let x = half::f16::from_bits(i as u16).to_f32();
            *v = half::f16::from_f32(gelu_tanh(x)).to_f32();
        }
        t
    })
}

/// GELU, tanh approximation (ggml's and PyTorch's `approximate="tanh"`):
/// `0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2)))`.
#[inline]
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

#[cfg(test)]
mod gelu_tests {
    use super::*;

    #[test]
    fn the_gelu_table_is_the_tanh_form_at_f16_precision_and_exact_beyond_ten() {
        assert_eq!(gelu_table(-10.0), 0.0);
        assert_eq!(gelu_table(-25.0), 0.0);
        assert_eq!(gelu_table(10.0), 10.0);
        assert_eq!(gelu_table(12.5), 12.5);
        for i in -2000..2000 {
            let x = i as f32 / 200.0;
            let (got, want) = (gelu_table(x), gelu_tanh(x));
            // x rounds to f16 (11 bits), then the value does: a few f16 steps at most.
            assert!((got - want).abs() <= 4e-3 * want.abs().max(1.0), "{x}: {got} vs {want}");
            assert_eq!(
                got,
                half::f16::from_f32(gelu_tanh(half::f16::from_f32(x).to_f32())).to_f32()
            );
        }
    }
}
