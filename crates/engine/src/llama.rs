//! The blocks of a llama-family stage: RMSNorm, rotary embedding (llama's interleaved
//! pairs), grouped-query attention over an f32 KV cache, SwiGLU, and on the last stage the
//! final norm and output head.
//!
//! A [`Stage`] holds KV caches for any number of sequences ("slots"). One
//! [`Stage::forward`] takes rows from several slots at once (decode rows of many
//! sequences, or a prefill chunk of one): rows of a slot take consecutive positions. Every
//! value of a row is computed by the same instructions whatever the other rows are, so a
//! sequence's tokens do not depend on its batch.
//!
//! The numerics follow candle's CPU ops that were the reference before this engine
//! (sequential RMSNorm sum, `x / rms * w`, f32 rope tables, exact softmax).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::kernels::Acts;
use crate::matmul::{Matrix, matmul_t, swiglu_t};
use crate::pool::ThreadPool;

/// The shape of the model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Hidden size.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Key/value heads.
    pub kv_heads: usize,
    /// Size of one head.
    pub head_dim: usize,
    /// Feed-forward inner size.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// RMSNorm epsilon.
    pub eps: f32,
    /// Rotary embedding frequency base.
    pub rope_base: f32,
    /// Longest sequence a slot's KV cache holds.
    pub max_seq_len: usize,
    /// How the KV cache keeps its values.
    pub kv: KvFormat,
}

/// How a KV cache keeps its values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KvFormat {
    /// f32 (the default).
    #[default]
    F32,
    /// f16: half the memory; keys (after rope) and values are rounded as they are stored,
    /// and read back as f32. Every row takes the same path, so results stay
    /// batch-invariant.
    F16,
}

/// One slot's keys or values, `[layer][kv head][position][head dim]`.
#[derive(Debug, Default)]
enum Cache {
    /// Not allocated yet.
    #[default]
    Empty,
    /// f32 values.
    F32(Vec<f32>),
    /// f16 values (their bits: a zeroed allocation stays untouched until written).
    F16(Vec<u16>),
}

impl Cache {
    fn new(kv: KvFormat, size: usize) -> Cache {
        match kv {
            KvFormat::F32 => Cache::F32(vec![0.0; size]),
            KvFormat::F16 => Cache::F16(vec![0; size]),
        }
    }

    fn is_empty(&self) -> bool {
        matches!(self, Cache::Empty)
    }

    /// Stores `values` at `at`.
    fn store(&mut self, at: usize, values: &[f32]) {
        match self {
            Cache::Empty => {}
            Cache::F32(c) => c[at..at + values.len()].copy_from_slice(values),
            Cache::F16(c) => {
                // Slice conversions use the CPU's F16C instructions where it has them.
                use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
                c[at..at + values.len()]
                    .reinterpret_cast_mut::<half::f16>()
                    .convert_from_f32_slice(values);
            }
        }
    }

    /// The `buf.len()` values at `at` as f32 (read in place, or converted into `buf`).
    fn read<'a>(&'a self, at: usize, buf: &'a mut [f32]) -> &'a [f32] {
        match self {
            Cache::Empty => buf,
            Cache::F32(c) => &c[at..at + buf.len()],
            Cache::F16(c) => {
                use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
                c[at..at + buf.len()].reinterpret_cast::<half::f16>().convert_to_f32_slice(buf);
                buf
            }
        }
    }
}

/// One transformer block's weights.
#[derive(Debug, Clone)]
pub struct Layer {
    /// Attention RMSNorm weight.
    pub attn_norm: Vec<f32>,
    /// Query projection.
    pub wq: Matrix,
    /// Key projection.
    pub wk: Matrix,
    /// Value projection.
    pub wv: Matrix,
    /// Attention output projection.
    pub wo: Matrix,
    /// Feed-forward RMSNorm weight.
    pub ffn_norm: Vec<f32>,
    /// Gate projection.
    pub gate: Matrix,
    /// Up projection.
    pub up: Matrix,
    /// Down projection.
    pub down: Matrix,
}

/// A stage's weights.
#[derive(Debug, Clone)]
pub struct Weights {
    /// Token embedding (first stage).
    pub embedding: Option<Matrix>,
    /// The blocks.
    pub layers: Vec<Layer>,
    /// Final norm weight (last stage).
    pub norm: Option<Vec<f32>>,
    /// Output head (last stage).
    pub head: Option<Matrix>,
}

/// What a forward pass consumes: one entry per row.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// Token ids (first stage).
    Tokens(&'a [u32]),
    /// Hidden states, row-major `[rows, hidden]`.
    Hidden(&'a [f32]),
}

/// What a forward pass produces.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Hidden states `[rows, hidden]` for the next stage.
    Hidden(Vec<f32>),
    /// Logits `[k, vocab]` of the last row of each slot in the batch, in row order.
    Logits(Vec<f32>),
}

/// Why a forward pass did not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardError {
    /// The input does not fit the stage.
    BadInput(String),
    /// A slot's KV cache is full.
    ContextFull {
        /// Tokens already cached.
        used: usize,
        /// Tokens offered.
        more: usize,
        /// The cache length.
        max: usize,
    },
    /// `abort` was set between two blocks; the slots touched must be reset.
    Aborted,
}

#[derive(Debug, Default)]
struct Slot {
    k: Cache,
    v: Cache,
    len: usize,
}

#[derive(Debug, Default)]
struct Scratch {
    pos: Vec<usize>,
    x: Vec<f32>,
    q: Vec<f32>,
    y: Vec<f32>,
    out_t: Vec<f32>,
    att: Vec<f32>,
    /// One key or value row on its way into the cache.
    kv: Vec<f32>,
    acts: Acts,
}

/// One stage of a llama-family model on the CPU.
#[derive(Debug)]
pub struct Stage {
    cfg: Config,
    w: Weights,
    pool: Arc<ThreadPool>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    slots: Vec<Slot>,
    s: Scratch,
}

impl Stage {
    /// A stage with `slots` sequence slots (KV caches are allocated on first use).
    pub fn new(
        cfg: Config,
        w: Weights,
        pool: Arc<ThreadPool>,
        slots: usize,
    ) -> Result<Stage, String> {
        check_shapes(&cfg, &w)?;
        let half = cfg.head_dim / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| 1.0 / cfg.rope_base.powf(2.0 * i as f32 / cfg.head_dim as f32))
            .collect();
        let mut cos = Vec::with_capacity(cfg.max_seq_len * half);
        let mut sin = Vec::with_capacity(cfg.max_seq_len * half);
        for p in 0..cfg.max_seq_len {
            for &f in &inv {
                let t = p as f32 * f;
                cos.push(t.cos());
                sin.push(t.sin());
            }
        }
        Ok(Stage {
            cfg,
            w,
            pool,
            cos,
            sin,
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
            s: Scratch::default(),
        })
    }

    /// The shape.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        &self.w
    }

    /// Sequence slots.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Tokens cached in `slot`.
    pub fn len(&self, slot: usize) -> usize {
        self.slots[slot].len
    }

    /// Sets the number of sequence slots (new slots start empty; dropped slots free their
    /// caches).
    pub fn set_slots(&mut self, n: usize) {
        self.slots.resize_with(n.max(1), Slot::default);
    }

    /// Empties `slot`'s cache (its memory is kept).
    pub fn reset(&mut self, slot: usize) {
        self.slots[slot].len = 0;
    }

    /// Runs the stage over rows; `slots[i]` is row `i`'s sequence slot. `abort` is polled
    /// between blocks.
    pub fn forward(
        &mut self,
        slots: &[usize],
        input: Input<'_>,
        abort: &AtomicBool,
    ) -> Result<Output, ForwardError> {
        let n = slots.len();
        if n == 0 {
            return Err(ForwardError::BadInput("no rows".into()));
        }
        if let Some(&bad) = slots.iter().find(|&&s| s >= self.slots.len()) {
            return Err(ForwardError::BadInput(format!("slot {bad} does not exist")));
        }
        // Positions: each slot's rows continue its cache in order.
        self.s.pos.clear();
        for (i, &s) in slots.iter().enumerate() {
            let before = slots[..i].iter().filter(|&&t| t == s).count();
            self.s.pos.push(self.slots[s].len + before);
        }
        for (i, &s) in slots.iter().enumerate() {
            if self.s.pos[i] >= self.cfg.max_seq_len {
                let more = slots.iter().filter(|&&t| t == s).count();
                return Err(ForwardError::ContextFull {
                    used: self.slots[s].len,
                    more,
                    max: self.cfg.max_seq_len,
                });
            }
        }
        self.take_input(input, n)?;
        for &s in slots {
            let slot = &mut self.slots[s];
            if slot.k.is_empty() {
                let size = self.w.layers.len()
                    * self.cfg.kv_heads
                    * self.cfg.max_seq_len
                    * self.cfg.head_dim;
                slot.k = Cache::new(self.cfg.kv, size);
                slot.v = Cache::new(self.cfg.kv, size);
            }
        }
        for l in 0..self.w.layers.len() {
            if abort.load(Ordering::Relaxed) {
                return Err(ForwardError::Aborted);
            }
            self.layer(l, slots);
        }
        for &s in slots {
            self.slots[s].len += 1;
        }
        Ok(self.output(slots))
    }

    /// Fills `self.s.x` with the `n` rows of `input` (embedded token ids on the first stage,
    /// hidden states on the others).
    fn take_input(&mut self, input: Input<'_>, n: usize) -> Result<(), ForwardError> {
        let d = self.cfg.hidden;
        self.s.x.resize(n * d, 0.0);
        match (input, &self.w.embedding) {
            (Input::Tokens(ids), Some(emb)) => {
                if ids.len() != n {
                    return Err(ForwardError::BadInput(format!(
                        "{} tokens for {n} rows",
                        ids.len()
                    )));
                }
                if let Some(bad) = ids.iter().find(|&&t| t as usize >= emb.rows()) {
                    return Err(ForwardError::BadInput(format!(
                        "token {bad} outside the vocabulary"
                    )));
                }
                for (i, &t) in ids.iter().enumerate() {
                    emb.dequantize_row(t as usize, &mut self.s.x[i * d..(i + 1) * d]);
                }
            }
            (Input::Hidden(h), None) => {
                if h.len() != n * d {
                    return Err(ForwardError::BadInput(format!(
                        "{} hidden values for {n} rows of {d}",
                        h.len()
                    )));
                }
                self.s.x.copy_from_slice(h);
            }
            (Input::Tokens(_), None) => {
                return Err(ForwardError::BadInput(
                    "token ids for a stage without the embedding".into(),
                ));
            }
            (Input::Hidden(_), Some(_)) => {
                return Err(ForwardError::BadInput("hidden states for the first stage".into()));
            }
        }
        Ok(())
    }

    /// What the stage hands on after its blocks: on the last stage the logits of each
    /// slot's last row (final norm, head), on the others the hidden states.
    fn output(&mut self, slots: &[usize]) -> Output {
        let n = slots.len();
        let d = self.cfg.hidden;
        match (&self.w.norm, &self.w.head) {
            (Some(norm), Some(head)) => {
                let last: Vec<usize> =
                    (0..n).filter(|&i| !slots[i + 1..].contains(&slots[i])).collect();
                let k = last.len();
                let acts = &mut self.s.acts;
                acts.f32.resize(k * d, 0.0);
                for (j, &i) in last.iter().enumerate() {
                    rms_norm(
                        &self.s.x[i * d..(i + 1) * d],
                        norm,
                        self.cfg.eps,
                        &mut acts.f32[j * d..(j + 1) * d],
                    );
                }
                acts.cols = d;
                acts.rows = k;
                acts.quantize_for(&[head.format()]);
                let vocab = head.rows();
                let mut logits_t = vec![0.0; vocab * k];
                matmul_t(&self.pool, &[head], acts, &mut logits_t);
                let mut logits = vec![0.0; vocab * k];
                for j in 0..k {
                    for o in 0..vocab {
                        logits[j * vocab + o] = logits_t[o * k + j];
                    }
                }
                Output::Logits(logits)
            }
            _ => Output::Hidden(self.s.x.clone()),
        }
    }

    /// Block `l` over the rows in `self.s.x` (`slots[i]` is row `i`'s slot): attention and
    /// feed-forward, each added to the residual.
    fn layer(&mut self, l: usize, slots: &[usize]) {
        let c = self.cfg;
        let n = slots.len();
        let (d, hd) = (c.hidden, c.head_dim);
        let (qd, kd) = (c.heads * hd, c.kv_heads * hd);
        let lw = &self.w.layers[l];
        let s = &mut self.s;

        // Attention norm and the fused q / k / v product.
        norm_rows(&mut s.acts, &s.x, &lw.attn_norm, c.eps, n, d);
        s.acts.quantize_for(&[lw.wq.format(), lw.wk.format(), lw.wv.format()]);
        s.out_t.resize((qd + 2 * kd) * n, 0.0);
        matmul_t(&self.pool, &[&lw.wq, &lw.wk, &lw.wv], &s.acts, &mut s.out_t);

        // Rope, and the new keys and values into each row's slot.
        let rope_tables = (self.cos.as_slice(), self.sin.as_slice());
        rope_and_cache(&c, l, s, rope_tables, &mut self.slots, slots);

        // Attention over each row's cache.
        attention(&c, l, s, &self.pool, &self.slots, slots);

        // Output projection, residual.
        s.acts.f32.clear();
        s.acts.f32.extend_from_slice(&s.y);
        s.acts.cols = qd;
        s.acts.rows = n;
        s.acts.quantize_for(&[lw.wo.format()]);
        s.out_t.resize(d * n, 0.0);
        matmul_t(&self.pool, &[&lw.wo], &s.acts, &mut s.out_t);
        add_transposed(&mut s.x, &s.out_t, n, d);

        feed_forward(&c, lw, s, &self.pool, n);
    }
}

/// `acts` becomes the `n` rows of `x` (each `d` wide) normalized by `w`, not yet
/// quantized.
fn norm_rows(acts: &mut Acts, x: &[f32], w: &[f32], eps: f32, n: usize, d: usize) {
    acts.f32.resize(n * d, 0.0);
    for i in 0..n {
        rms_norm(&x[i * d..(i + 1) * d], w, eps, &mut acts.f32[i * d..(i + 1) * d]);
    }
    acts.cols = d;
    acts.rows = n;
}

/// Takes each row's queries out of the q / k / v product (`s.out_t`, transposed) into
/// `s.q` with rope applied, and stores its keys (with rope) and values at its position in
/// its slot's cache for block `l`.
fn rope_and_cache(
    c: &Config,
    l: usize,
    s: &mut Scratch,
    (cos, sin): (&[f32], &[f32]),
    caches: &mut [Slot],
    slots: &[usize],
) {
    let n = slots.len();
    let hd = c.head_dim;
    let (qd, kd) = (c.heads * hd, c.kv_heads * hd);
    s.q.resize(n * qd, 0.0);
    let half = hd / 2;
    for i in 0..n {
        let p = s.pos[i];
        let (cos, sin) = (&cos[p * half..(p + 1) * half], &sin[p * half..(p + 1) * half]);
        let q = &mut s.q[i * qd..(i + 1) * qd];
        for (j, q) in q.iter_mut().enumerate() {
            *q = s.out_t[j * n + i];
        }
        for h in q.chunks_exact_mut(hd) {
            rope(h, cos, sin);
        }
        let slot = &mut caches[slots[i]];
        s.kv.resize(hd, 0.0);
        for kh in 0..c.kv_heads {
            let at = ((l * c.kv_heads + kh) * c.max_seq_len + p) * hd;
            for (j, k) in s.kv.iter_mut().enumerate() {
                *k = s.out_t[(qd + kh * hd + j) * n + i];
            }
            rope(&mut s.kv, cos, sin);
            slot.k.store(at, &s.kv);
            for (j, v) in s.kv.iter_mut().enumerate() {
                *v = s.out_t[(qd + kd + kh * hd + j) * n + i];
            }
            slot.v.store(at, &s.kv);
        }
    }
}

/// Attention of every row's queries (`s.q`) over its slot's cache for block `l`, into
/// `s.y` (`[row][head][head dim]`).
fn attention(
    c: &Config,
    l: usize,
    s: &mut Scratch,
    pool: &ThreadPool,
    caches: &[Slot],
    slots: &[usize],
) {
    let n = slots.len();
    let hd = c.head_dim;
    let qd = c.heads * hd;
    // One task per (row, head); each owns its output, a row buffer (for an f16 cache's
    // values read back as f32) and its scores.
    let ctx = s.pos.iter().max().map_or(0, |p| p + 1);
    let chunk = 2 * hd + ctx;
    s.att.resize(n * c.heads * chunk, 0.0);
    let scale = 1.0 / (hd as f32).sqrt();
    let group = c.heads / c.kv_heads;
    {
        let (q, pos) = (&s.q, &s.pos);
        pool.for_each_chunk(&mut s.att, chunk, &|t, buf| {
            let (i, h) = (t / c.heads, t % c.heads);
            let p = pos[i];
            let slot = &caches[slots[i]];
            let base = (l * c.kv_heads + h / group) * c.max_seq_len * hd;
            let q = &q[i * qd + h * hd..i * qd + (h + 1) * hd];
            let (y, rest) = buf.split_at_mut(hd);
            let (row, sc) = rest.split_at_mut(hd);
            let sc = &mut sc[..=p];
            for (t, s) in sc.iter_mut().enumerate() {
                *s = dot(q, slot.k.read(base + t * hd, row)) * scale;
            }
            softmax(sc);
            y.fill(0.0);
            for (t, &pt) in sc.iter().enumerate() {
                let v = slot.v.read(base + t * hd, row);
                for (y, &v) in y.iter_mut().zip(v) {
                    *y += pt * v;
                }
            }
        });
    }
    s.y.resize(n * qd, 0.0);
    for t in 0..n * c.heads {
        s.y[t * hd..(t + 1) * hd].copy_from_slice(&s.att[t * chunk..t * chunk + hd]);
    }
}

/// The feed-forward half of a block over the `n` rows of `s.x`: norm, SwiGLU fused into
/// gate / up, down, residual.
fn feed_forward(c: &Config, lw: &Layer, s: &mut Scratch, pool: &ThreadPool, n: usize) {
    let d = c.hidden;
    norm_rows(&mut s.acts, &s.x, &lw.ffn_norm, c.eps, n, d);
    s.acts.quantize_for(&[lw.gate.format(), lw.up.format()]);
    s.out_t.resize(c.ffn * n, 0.0);
    swiglu_t(pool, &lw.gate, &lw.up, &s.acts, &mut s.out_t);
    s.acts.f32.resize(n * c.ffn, 0.0);
    for i in 0..n {
        for o in 0..c.ffn {
            s.acts.f32[i * c.ffn + o] = s.out_t[o * n + i];
        }
    }
    s.acts.cols = c.ffn;
    s.acts.quantize_for(&[lw.down.format()]);
    s.out_t.resize(d * n, 0.0);
    matmul_t(pool, &[&lw.down], &s.acts, &mut s.out_t);
    add_transposed(&mut s.x, &s.out_t, n, d);
}

/// `x[i][j] += t[j][i]` for `n` rows of `d`.
fn add_transposed(x: &mut [f32], t: &[f32], n: usize, d: usize) {
    for i in 0..n {
        for j in 0..d {
            x[i * d + j] += t[j * n + i];
        }
    }
}

/// `out = x / sqrt(mean(x^2) + eps) * w` (candle's order of operations).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum2: f32 = x.iter().map(|&v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(w) {
        *o = v / m * w;
    }
}

/// Llama's rotary embedding on one head: pairs `(2i, 2i + 1)` turned by angle `i`.
pub fn rope(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    for ((p, &c), &s) in x.chunks_exact_mut(2).zip(cos).zip(sin) {
        let (a, b) = (p[0], p[1]);
        p[0] = a * c - b * s;
        p[1] = a * s + b * c;
    }
}

/// Softmax in place: `e^(x - max) / sum`.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// A dot product with eight partial sums (vectorizes on any target; the order is fixed).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ar, br) = (ac.remainder(), bc.remainder());
    for (x, y) in ac.zip(bc) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ar.iter().zip(br) {
        s += x * y;
    }
    s
}

fn check_shapes(c: &Config, w: &Weights) -> Result<(), String> {
    let hd = c.head_dim;
    if c.heads == 0
        || c.kv_heads == 0
        || !c.heads.is_multiple_of(c.kv_heads)
        || !hd.is_multiple_of(2)
        || hd == 0
    {
        return Err(format!("{} heads over {} KV heads of {hd}", c.heads, c.kv_heads));
    }
    if c.max_seq_len == 0 {
        return Err("max_seq_len is 0".into());
    }
    let want = |m: &Matrix, rows: usize, cols: usize, name: &str| {
        if m.rows() == rows && m.cols() == cols {
            Ok(())
        } else {
            Err(format!("{name} is {} x {}, expected {rows} x {cols}", m.rows(), m.cols()))
        }
    };
    let (d, qd, kd) = (c.hidden, c.heads * hd, c.kv_heads * hd);
    for (i, l) in w.layers.iter().enumerate() {
        let n = |s: &str| format!("block {i} {s}");
        want(&l.wq, qd, d, &n("attn_q"))?;
        want(&l.wk, kd, d, &n("attn_k"))?;
        want(&l.wv, kd, d, &n("attn_v"))?;
        want(&l.wo, d, qd, &n("attn_output"))?;
        want(&l.gate, c.ffn, d, &n("ffn_gate"))?;
        want(&l.up, c.ffn, d, &n("ffn_up"))?;
        want(&l.down, d, c.ffn, &n("ffn_down"))?;
        if l.attn_norm.len() != d || l.ffn_norm.len() != d {
            return Err(n("norm has the wrong length"));
        }
    }
    if let Some(e) = &w.embedding {
        want(e, c.vocab, d, "token_embd")?;
    }
    if let Some(h) = &w.head {
        want(h, c.vocab, d, "output")?;
    }
    if w.norm.as_ref().is_some_and(|n| n.len() != d) {
        return Err("output_norm has the wrong length".into());
    }
    Ok(())
}
