//! The blocks of a transformer stage (every supported family): RMSNorm, rotary embedding,
//! grouped-query attention over a KV cache, the gated feed-forward, and on the last stage
//! the final norm and output head. The families differ only in what [`Arch`] and a
//! [`Layer`]'s [`Extras`] hold: rope pairing, biases on Q / K / V, per-head norms on Q and
//! K, norms after attention and feed-forward, GeGLU, a scaled embedding, sliding-window
//! blocks with their own rope base.
//!
//! A [`Stage`] holds KV caches for any number of sequences ("slots"). One
//! [`Stage::forward`] takes rows from several slots at once (decode rows of many
//! sequences, or a prefill chunk of one): rows of a slot take consecutive positions. Every
//! value of a row is computed by the same instructions whatever the other rows are, so a
//! sequence's tokens do not depend on its batch.
//!
//! The numerics follow candle's CPU ops that were the reference before this engine
//! (sequential RMSNorm sum, `x / rms * w`, f32 rope tables, exact softmax).

mod attention;
mod cache;
mod moe;
pub mod ops;
mod rows;
mod shapes;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::kernels::Acts;
use crate::matmul::{Gate, Matrix, glu_t, matmul_t};
use crate::pool::ThreadPool;
use attention::{Block, RopeTables};
use cache::{Cache, Layout, Slot};
pub use cache::{KvBlock, KvFormat};
pub use moe::{ExpertBiases, Experts, FeedForward, Routing, SharedExpert, route, route_chosen};
pub use ops::{RopeStyle, dot, rms_norm, rope, softmax};

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
    /// What the family does differently.
    pub arch: Arch,
}

/// What a model family does differently from Llama 2 (the default is Llama 2's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arch {
    /// How rope pairs a head's dimensions.
    pub rope: RopeStyle,
    /// The feed-forward gate's activation.
    pub gate: Gate,
    /// The token embedding is multiplied by this (Gemma: `sqrt(hidden)`; else 1).
    pub embed_scale: f32,
    /// Linear rope scaling of the global blocks: positions are divided by it (1: none).
    pub rope_scale: f32,
    /// Sliding blocks' window: a query sees itself and the `window - 1` positions before
    /// (0: no block slides).
    pub window: usize,
    /// Positions a sliding block's cache ring holds (at least `window + 1`, or
    /// `max_seq_len`); attention on such a block runs over passes of at most
    /// `window_cap - window` rows, so a pass never overwrites a position it reads.
    pub window_cap: usize,
    /// Rope base of the sliding blocks.
    pub local_rope_base: f32,
    /// The attention scores' scale; 0: `1 / sqrt(head_dim)`.
    pub attention_scale: f32,
    /// YaRN rope scaling of every block (gpt-oss).
    pub yarn: Option<Yarn>,
}

/// YaRN rope scaling as GGML computes it (`rope_yarn`): each angle interpolated by
/// `1 / factor` except on the fast-rotating dimensions, which a ramp between the
/// correction dimensions keeps extrapolated; cosines and sines scaled by
/// `attn_factor (1 + 0.1 ln factor)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// The scaling factor (positions interpolated by its inverse).
    pub factor: f32,
    /// The context the model was trained with before scaling.
    pub original_context: u32,
    /// The magnitude factor the context computes (llama.cpp: `mscale / (1 + 0.1 ln
    /// factor)` times the file's `rope.scaling.attn_factor`).
    pub attn_factor: f32,
    /// The ramp's fast end, in rotations (32).
    pub beta_fast: f32,
    /// The ramp's slow end (1).
    pub beta_slow: f32,
}

impl Yarn {
    /// The ramp's dimensions for a head of `dims` rotated dimensions on rope base `base`
    /// (GGML's `ggml_rope_yarn_corr_dims`).
    pub fn corr_dims(&self, dims: usize, base: f32) -> [f32; 2] {
        let n = dims as f32;
        let ctx = self.original_context as f32;
        let dim =
            |beta: f32| n * (ctx / (beta * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln());
        [dim(self.beta_fast).floor().max(0.0), dim(self.beta_slow).ceil().min(n - 1.0)]
    }

    /// The cosine and sine of extrapolated angle `theta` at dimension `i0` (even).
    pub fn rotate(&self, theta: f32, dims: [f32; 2], i0: usize) -> (f32, f32) {
        let freq_scale = 1.0 / self.factor;
        let interp = freq_scale * theta;
        let y = ((i0 / 2) as f32 - dims[0]) / (dims[1] - dims[0]).max(0.001);
        let ramp = 1.0 - y.clamp(0.0, 1.0);
        let t = interp * (1.0 - ramp) + theta * ramp;
        let mscale = self.attn_factor * (1.0 + 0.1 * (1.0 / freq_scale).ln());
        (t.cos() * mscale, t.sin() * mscale)
    }
}

impl Default for Arch {
    fn default() -> Self {
        Arch {
            rope: RopeStyle::Interleaved,
            gate: Gate::Silu,
            embed_scale: 1.0,
            rope_scale: 1.0,
            window: 0,
            window_cap: 0,
            local_rope_base: 10_000.0,
            attention_scale: 0.0,
            yarn: None,
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
    /// The feed-forward: dense or routed experts.
    pub ffn: FeedForward,
    /// Whether the block attends over a sliding window (with the local rope base).
    pub sliding: bool,
    /// The family's extra tensors.
    pub extra: Extras,
}

/// The tensors some families add to a block (all absent for Llama).
#[derive(Debug, Clone, Default)]
pub struct Extras {
    /// Bias of the query projection (Qwen 2).
    pub q_bias: Option<Vec<f32>>,
    /// Bias of the key projection (Qwen 2).
    pub k_bias: Option<Vec<f32>>,
    /// Bias of the value projection (Qwen 2).
    pub v_bias: Option<Vec<f32>>,
    /// RMSNorm weight applied to each query head before rope (Qwen 3, Gemma 3).
    pub q_norm: Option<Vec<f32>>,
    /// RMSNorm weight applied to each key head before rope (Qwen 3, Gemma 3).
    pub k_norm: Option<Vec<f32>>,
    /// RMSNorm weight on the attention output before the residual (Gemma 3).
    pub post_attn_norm: Option<Vec<f32>>,
    /// RMSNorm weight on the feed-forward output before the residual (Gemma 3).
    pub post_ffn_norm: Option<Vec<f32>>,
    /// Bias of the attention output projection (gpt-oss).
    pub o_bias: Option<Vec<f32>>,
    /// Each head's attention sink: a logit in every softmax of its scores that takes no
    /// value (gpt-oss).
    pub sinks: Option<Vec<f32>>,
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
    /// Per-dimension rope frequency divisors (Llama 3.1's `rope_freqs`), `head_dim / 2`.
    pub rope_factors: Option<Vec<f32>>,
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
    /// Logits `[k, vocab]` of the last row of each slot in the batch, in row order (of
    /// every row from [`Stage::forward_every_row`]).
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
    moe: moe::MoeScratch,
}

/// One stage of a model (any supported family) on the CPU.
#[derive(Debug)]
pub struct Stage {
    cfg: Config,
    w: Weights,
    pool: Arc<ThreadPool>,
    rope: RopeTables,
    local_rope: RopeTables,
    layout: Layout,
    slots: Vec<Slot>,
    s: Scratch,
    /// The last stage returns logits for every row, not each slot's last (verifying a
    /// draft).
    every_row: bool,
}

impl Stage {
    /// A stage with `slots` sequence slots (KV caches are allocated on first use).
    pub fn new(
        cfg: Config,
        w: Weights,
        pool: Arc<ThreadPool>,
        slots: usize,
    ) -> Result<Stage, String> {
        shapes::check_shapes(&cfg, &w)?;
        let (hd, max) = (cfg.head_dim, cfg.max_seq_len);
        let yarn = cfg.arch.yarn.as_ref();
        let factors = w.rope_factors.as_deref();
        let rope = RopeTables::new(cfg.rope_base, hd, max, cfg.arch.rope_scale, factors, yarn);
        let local_rope = if cfg.arch.window > 0 {
            RopeTables::new(cfg.arch.local_rope_base, hd, max, 1.0, None, yarn)
        } else {
            RopeTables::default()
        };
        let cap =
            |l: &Layer| if l.sliding && cfg.arch.window > 0 { cfg.arch.window_cap } else { max };
        let layout = Layout::new(w.layers.iter().map(cap), cfg.kv_heads, hd);
        Ok(Stage {
            cfg,
            w,
            pool,
            rope,
            local_rope,
            layout,
            slots: (0..slots.max(1)).map(|_| Slot::default()).collect(),
            s: Scratch::default(),
            every_row: false,
        })
    }

    /// Bytes of its scratch buffers and rope tables as they are now (the most a forward
    /// pass has needed so far; the logits of the head are allocated per pass besides).
    pub fn scratch_bytes(&self) -> usize {
        let s = &self.s;
        let floats = s.x.capacity()
            + s.q.capacity()
            + s.y.capacity()
            + s.out_t.capacity()
            + s.att.capacity()
            + s.kv.capacity();
        4 * floats
            + 8 * s.pos.capacity()
            + s.acts.bytes()
            + self.rope.bytes()
            + self.local_rope.bytes()
            + s.moe.bytes()
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

    /// Drops `slot`'s cached positions from `len` on (nothing when it holds fewer): a
    /// rejected draft's rows. The next row continues at `len`, as if they had never run.
    /// On a sliding-window block the rows dropped must be at most the window's spare
    /// positions (`window_cap - window`): a verifying pass of at most that many rows.
    pub fn truncate(&mut self, slot: usize, len: usize) {
        if let Some(s) = self.slots.get_mut(slot) {
            s.len = s.len.min(len);
        }
    }

    /// As [`Stage::forward`], but the last stage returns the logits of every row
    /// (`[rows, vocab]`), as verifying a draft needs.
    pub fn forward_every_row(
        &mut self,
        slots: &[usize],
        input: Input<'_>,
        abort: &AtomicBool,
    ) -> Result<Output, ForwardError> {
        self.every_row = true;
        let out = self.forward(slots, input, abort);
        self.every_row = false;
        out
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
                slot.k = Cache::new(self.cfg.kv, self.layout.size);
                slot.v = Cache::new(self.cfg.kv, self.layout.size);
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
                    let row = &mut self.s.x[i * d..(i + 1) * d];
                    emb.dequantize_row(t as usize, row);
                    if self.cfg.arch.embed_scale != 1.0 {
                        row.iter_mut().for_each(|v| *v *= self.cfg.arch.embed_scale);
                    }
                }
            }
            (Input::Hidden(h), None) => {
                if h.len() != n * d {
                    return Err(ForwardError::BadInput(format!(
                        "{} hidden values for {n} rows of {d}",
                        h.len()
                    )));
                }
                crate::copy::copy_values(&mut self.s.x, h);
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
                let last: Vec<usize> = (0..n)
                    .filter(|&i| self.every_row || !slots[i + 1..].contains(&slots[i]))
                    .collect();
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
                acts.quantize_for(&[head.act_need()]);
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
        rows::norm_rows(&self.pool, &mut s.acts, &s.x, &lw.attn_norm, c.eps, n, d);
        s.acts.quantize_for_on(&self.pool, &[lw.wq.act_need(), lw.wk.act_need(), lw.wv.act_need()]);
        s.out_t.resize((qd + 2 * kd) * n, 0.0);
        matmul_t(&self.pool, &[&lw.wq, &lw.wk, &lw.wv], &s.acts, &mut s.out_t);

        // Rope and the new keys and values into each row's slot, then attention over each
        // row's cache; a sliding block's ring takes the rows in passes that fit it.
        let b = Block {
            c: &c,
            l,
            w: lw,
            rope: if lw.sliding && c.arch.window > 0 { &self.local_rope } else { &self.rope },
            layout: &self.layout,
        };
        let pass = match self.layout.positions(l) {
            cap if cap < c.max_seq_len => cap - c.arch.window,
            _ => n,
        };
        s.q.resize(n * qd, 0.0);
        s.y.resize(n * qd, 0.0);
        for r0 in (0..n).step_by(pass.max(1)) {
            let rows = r0..(r0 + pass).min(n);
            attention::rope_and_cache(&b, s, &self.pool, &mut self.slots, slots, rows.clone());
            attention::attention(&b, s, &self.pool, &self.slots, slots, rows);
        }

        // Output projection, residual.
        crate::copy::replace_values(&mut s.acts.f32, &s.y);
        s.acts.cols = qd;
        s.acts.rows = n;
        s.acts.quantize_for_on(&self.pool, &[lw.wo.act_need()]);
        s.out_t.resize(d * n, 0.0);
        matmul_t(&self.pool, &[&lw.wo], &s.acts, &mut s.out_t);
        if let Some(bias) = &lw.extra.o_bias {
            for (o, b) in bias.iter().enumerate() {
                s.out_t[o * n..(o + 1) * n].iter_mut().for_each(|v| *v += b);
            }
        }
        let post = lw.extra.post_attn_norm.as_deref().map(|w| (w, c.eps));
        rows::add_transposed(&self.pool, &mut s.x, &s.out_t, n, d, post);

        feed_forward(&c, lw, s, &self.pool, n);
    }
}

/// The feed-forward half of a block over the `n` rows of `s.x`: norm, the gated product
/// fused into gate / up, down (or the routed experts), (post-norm,) residual.
fn feed_forward(c: &Config, lw: &Layer, s: &mut Scratch, pool: &ThreadPool, n: usize) {
    let d = c.hidden;
    rows::norm_rows(pool, &mut s.acts, &s.x, &lw.ffn_norm, c.eps, n, d);
    let (gate, up, down) = match &lw.ffn {
        FeedForward::Dense { gate, up, down } => (gate, up, down),
        FeedForward::Experts(x) => {
            // Row-major output, transposed for the residual's shared add.
            s.y.resize(n * d, 0.0);
            moe::experts_forward(x, c.arch.gate, pool, &mut s.acts, &mut s.moe, &mut s.y[..n * d]);
            s.out_t.resize(d * n, 0.0);
            for i in 0..n {
                for o in 0..d {
                    s.out_t[o * n + i] = s.y[i * d + o];
                }
            }
            let post = lw.extra.post_ffn_norm.as_deref().map(|w| (w, c.eps));
            rows::add_transposed(pool, &mut s.x, &s.out_t, n, d, post);
            return;
        }
    };
    s.acts.quantize_for_on(pool, &[gate.act_need(), up.act_need()]);
    s.out_t.resize(c.ffn * n, 0.0);
    glu_t(pool, c.arch.gate, gate, up, &s.acts, &mut s.out_t);
    s.acts.f32.resize(n * c.ffn, 0.0);
    rows::transpose(pool, &s.out_t, n, c.ffn, &mut s.acts.f32);
    s.acts.cols = c.ffn;
    s.acts.quantize_for_on(pool, &[down.act_need()]);
    s.out_t.resize(d * n, 0.0);
    matmul_t(pool, &[down], &s.acts, &mut s.out_t);
    let post = lw.extra.post_ffn_norm.as_deref().map(|w| (w, c.eps));
    rows::add_transposed(pool, &mut s.x, &s.out_t, n, d, post);
}
