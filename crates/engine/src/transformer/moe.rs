//! The feed-forward of a block: dense (gate / up fused, down) or a mixture of experts.
//!
//! A mixture of experts routes each row: the router (`ffn_gate_inp`) scores every expert,
//! a softmax over all of them gives probabilities, the `used` best are kept (in order of
//! probability; Qwen 3 MoE and Mixtral divide them by their sum) and the row's output is
//! the weighted sum of those experts' gated feed-forwards, added in that order (as
//! llama.cpp's `build_moe_ffn` adds them). Qwen 2 MoE adds a shared expert scaled by a
//! sigmoid gate.
//!
//! The expert product runs grouped by expert (llama.cpp's `mul_mat_id`): the rows of a
//! micro-batch that selected expert `e` are gathered into one activation matrix and
//! multiplied by `e`'s weights in one pass, so each selected expert's weights are read
//! once per micro-batch whatever the number of rows that chose it. A row's values come
//! from the same kernels over the same values whichever rows share its experts: the
//! product is bitwise batch-invariant like every other.

use crate::kernels::Acts;
use crate::matmul::{Gate, Matrix, glu_rows_biased, glu_t, matmul_t};
use crate::pool::ThreadPool;

/// A block's feed-forward.
#[derive(Debug, Clone)]
pub enum FeedForward {
    /// One gated feed-forward.
    Dense {
        /// Gate projection `[ffn, hidden]`.
        gate: Matrix,
        /// Up projection `[ffn, hidden]`.
        up: Matrix,
        /// Down projection `[hidden, ffn]`.
        down: Matrix,
    },
    /// Routed experts.
    Experts(Experts),
}

impl FeedForward {
    /// Every weight matrix, for repacking.
    pub fn matrices_mut(&mut self) -> Vec<&mut Matrix> {
        match self {
            FeedForward::Dense { gate, up, down } => vec![gate, up, down],
            FeedForward::Experts(x) => {
                let mut v: Vec<&mut Matrix> = vec![&mut x.router];
                v.extend(x.gate.iter_mut().chain(x.up.iter_mut()).chain(x.down.iter_mut()));
                if let Some(s) = &mut x.shared {
                    v.extend([&mut s.gate, &mut s.up, &mut s.down]);
                }
                v
            }
        }
    }
}

/// A block's routed experts.
#[derive(Debug, Clone)]
pub struct Experts {
    /// The router `[experts, hidden]` (`ffn_gate_inp`).
    pub router: Matrix,
    /// Each expert's gate projection `[expert_ffn, hidden]`.
    pub gate: Vec<Matrix>,
    /// Each expert's up projection `[expert_ffn, hidden]`.
    pub up: Vec<Matrix>,
    /// Each expert's down projection `[hidden, expert_ffn]`.
    pub down: Vec<Matrix>,
    /// Experts each row runs.
    pub used: usize,
    /// Whether the kept probabilities are divided by their sum.
    pub normalize: bool,
    /// A shared expert every row runs (Qwen 2 MoE).
    pub shared: Option<Box<SharedExpert>>,
    /// How the router's scores become weights.
    pub routing: Routing,
    /// The router's and the experts' biases (gpt-oss).
    pub biases: Option<Box<ExpertBiases>>,
}

/// How the router's scores become the chosen experts' weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// A softmax over every expert, the `used` most probable kept (then renormalized
    /// where [`Experts::normalize`] says).
    #[default]
    Softmax,
    /// The `used` highest scores kept, then a softmax over them (gpt-oss).
    SoftmaxOfChosen,
}

/// Biases of a mixture of experts (gpt-oss): added to the router's scores, and to each
/// expert's gate, up (before the activation) and down products.
#[derive(Debug, Clone)]
pub struct ExpertBiases {
    /// `[experts]`.
    pub router: Vec<f32>,
    /// `[experts][expert_ffn]`.
    pub gate: Vec<f32>,
    /// `[experts][expert_ffn]`.
    pub up: Vec<f32>,
    /// `[experts][hidden]`.
    pub down: Vec<f32>,
}

/// An expert every row runs, scaled by `sigmoid(gate_inp . x)`.
#[derive(Debug, Clone)]
pub struct SharedExpert {
    /// The scalar gate's weights `[hidden]` (`ffn_gate_inp_shexp`).
    pub gate_inp: Vec<f32>,
    /// Gate projection.
    pub gate: Matrix,
    /// Up projection.
    pub up: Matrix,
    /// Down projection.
    pub down: Matrix,
}

impl Experts {
    /// Checks the experts against a hidden size; `Err` names what does not fit.
    pub fn check(&self, hidden: usize) -> Result<(), String> {
        let n = self.router.rows();
        if n == 0 || self.gate.len() != n || self.up.len() != n || self.down.len() != n {
            return Err(format!(
                "a router of {n} experts over {} / {} / {} expert matrices",
                self.gate.len(),
                self.up.len(),
                self.down.len()
            ));
        }
        if self.used == 0 || self.used > n {
            return Err(format!("{} experts used of {n}", self.used));
        }
        if self.router.cols() != hidden {
            return Err(format!("the router reads {} values, not {hidden}", self.router.cols()));
        }
        let ffn = self.gate[0].rows();
        for e in 0..n {
            let (g, u, d) = (&self.gate[e], &self.up[e], &self.down[e]);
            if g.rows() != ffn || u.rows() != ffn || g.cols() != hidden || u.cols() != hidden {
                return Err(format!("expert {e}'s gate / up are not {ffn} x {hidden}"));
            }
            if d.rows() != hidden || d.cols() != ffn {
                return Err(format!("expert {e}'s down is not {hidden} x {ffn}"));
            }
        }
        if let Some(b) = &self.biases
            && (b.router.len() != n
                || b.gate.len() != n * ffn
                || b.up.len() != n * ffn
                || b.down.len() != n * hidden)
        {
            return Err("the experts' biases do not fit".into());
        }
        if let Some(s) = &self.shared {
            let f = s.gate.rows();
            if s.gate_inp.len() != hidden
                || s.up.rows() != f
                || s.gate.cols() != hidden
                || s.up.cols() != hidden
                || s.down.rows() != hidden
                || s.down.cols() != f
            {
                return Err("the shared expert's shapes do not fit".into());
            }
        }
        Ok(())
    }

    /// Bytes of the weights one row reads: the router, `used` experts (the largest
    /// format's) and the shared expert.
    pub fn active_bytes(&self) -> usize {
        let one = self.gate[0].bytes() + self.up[0].bytes() + self.down[0].bytes();
        let shared =
            self.shared.as_ref().map_or(0, |s| s.gate.bytes() + s.up.bytes() + s.down.bytes());
        self.router.bytes() + self.used * one + shared
    }
}

/// The scratch of one expert product (reused across blocks and passes).
#[derive(Debug, Default)]
pub(super) struct MoeScratch {
    /// The normalized input rows, f32.
    xn: Vec<f32>,
    /// Router logits, transposed `[experts][rows]`.
    logits_t: Vec<f32>,
    /// Each row's selected experts and weights, `used` per row.
    sel: Vec<(u32, f32)>,
    /// Each (row, pick) in order of its expert (stable: rows in order within one).
    order: Vec<usize>,
    /// The experts some row selected, in expert order: (expert, first of its (row,
    /// pick)s in `order` and in `acts`, how many).
    groups: Vec<(usize, usize, usize)>,
    /// Every selected expert's gathered rows, expert after expert.
    acts: Acts,
    /// The experts' inner activations, then their outputs, transposed per expert.
    out_t: Vec<f32>,
    /// Each (row, pick)'s expert output, `[rows * used][hidden]`.
    eo: Vec<f32>,
    /// One row's probabilities.
    probs: Vec<f32>,
    /// The tasks of one grouped product: (group, first output row, rows).
    tasks: Vec<(usize, usize, usize)>,
    /// Each task's output length.
    lens: Vec<usize>,
}

impl MoeScratch {
    pub(super) fn bytes(&self) -> usize {
        4 * (self.xn.capacity()
            + self.logits_t.capacity()
            + self.eo.capacity()
            + self.out_t.capacity()
            + self.probs.capacity())
            + 8 * (self.sel.capacity() + self.order.capacity() + self.lens.capacity())
            + 24 * (self.tasks.capacity() + self.groups.capacity())
            + self.acts.bytes()
    }

    /// The tasks of a grouped product whose group `g` has `rows_of(g)` output rows over
    /// its gathered rows; returns each group's offset in the output and its total.
    fn plan_tasks(
        &mut self,
        threads: usize,
        rows_of: &dyn Fn(usize) -> usize,
    ) -> (Vec<usize>, usize) {
        self.tasks.clear();
        self.lens.clear();
        let mut offsets = Vec::with_capacity(self.groups.len());
        let mut at = 0;
        for (g, &(_, _, m)) in self.groups.iter().enumerate() {
            let rows = rows_of(g);
            // One task per thread of each expert: long runs of one expert's rows stream
            // from memory (smaller tasks decode 20 % slower). Only scheduling depends on it.
            let per = rows.div_ceil(threads).next_multiple_of(16).min(rows.max(1));
            offsets.push(at);
            for r0 in (0..rows).step_by(per) {
                let r = per.min(rows - r0);
                self.tasks.push((g, r0, r));
                self.lens.push(r * m);
            }
            at += rows * m;
        }
        (offsets, at)
    }
}

/// The experts' output for the `n` normalized rows in `acts.f32` (`hidden` wide), written
/// into `y` (row-major `[n][hidden]`).
pub(super) fn experts_forward(
    x: &Experts,
    act: Gate,
    pool: &ThreadPool,
    acts: &mut Acts,
    m: &mut MoeScratch,
    y: &mut [f32],
) {
    let (n, d) = (acts.rows, acts.cols);
    let (ne, k) = (x.router.rows(), x.used);
    let f = x.gate[0].rows();
    crate::copy::replace_values(&mut m.xn, &acts.f32[..n * d]);

    // Router: logits, softmax over every expert, the `k` best, (renormalized).
    acts.quantize_for(&[x.router.act_need()]);
    m.logits_t.resize(ne * n, 0.0);
    matmul_t(pool, &[&x.router], acts, &mut m.logits_t);
    m.sel.clear();
    for i in 0..n {
        m.probs.clear();
        m.probs.extend((0..ne).map(|e| m.logits_t[e * n + i]));
        if let Some(b) = &x.biases {
            m.probs.iter_mut().zip(&b.router).for_each(|(p, b)| *p += b);
        }
        match x.routing {
            Routing::Softmax => route(&mut m.probs, k, x.normalize, &mut m.sel),
            Routing::SoftmaxOfChosen => route_chosen(&m.probs, k, &mut m.sel),
        }
    }

    // The selected experts, each with the rows that chose it, gathered and quantized.
    m.order.clear();
    m.order.extend(0..n * k);
    let sel = &m.sel;
    m.order.sort_by_key(|&p| sel[p].0);
    m.groups.clear();
    for (at, &p) in m.order.iter().enumerate() {
        let e = m.sel[p].0 as usize;
        match m.groups.last_mut() {
            Some(g) if g.0 == e => g.2 += 1,
            _ => m.groups.push((e, at, 1)),
        }
    }
    let a = &mut m.acts;
    a.cols = d;
    a.rows = n * k;
    a.f32.clear();
    for &p in &m.order {
        crate::copy::extend_values(&mut a.f32, &m.xn[(p / k) * d..(p / k + 1) * d]);
    }
    a.quantize_for(&[x.gate[0].act_need(), x.up[0].act_need()]);

    // Gate / up of every selected expert in one hand-out of the pool.
    let (offsets, total) = m.plan_tasks(pool.threads(), &|_| f);
    m.out_t.resize(total, 0.0);
    {
        let (groups, acts, tasks) = (&m.groups, &m.acts, &m.tasks);
        pool.for_each_span(&mut m.out_t, &m.lens, &|t, span| {
            let (g, r0, _) = tasks[t];
            let (e, at, rows) = groups[g];
            let bias = x.biases.as_ref().map(|b| (&b.gate[e * f..], &b.up[e * f..]));
            glu_rows_biased(act, &x.gate[e], &x.up[e], bias, acts, at..at + rows, r0, span);
        });
    }
    // The inner activations become the down products' rows, in the same order.
    let a = &mut m.acts;
    a.f32.resize(n * k * f, 0.0);
    for (g, &(_, at, rows)) in m.groups.iter().enumerate() {
        let inner = &m.out_t[offsets[g]..offsets[g] + f * rows];
        for i in 0..rows {
            for o in 0..f {
                a.f32[(at + i) * f + o] = inner[o * rows + i];
            }
        }
    }
    a.cols = f;
    a.quantize_for(&[x.down[0].act_need()]);

    // Down of every selected expert in one hand-out, then each (row, pick)'s output.
    let (offsets, total) = m.plan_tasks(pool.threads(), &|_| d);
    m.out_t.resize(total, 0.0);
    {
        let (groups, acts, tasks) = (&m.groups, &m.acts, &m.tasks);
        pool.for_each_span(&mut m.out_t, &m.lens, &|t, span| {
            let (g, r0, r) = tasks[t];
            let (e, at, rows) = groups[g];
            x.down[e].dot_rows(r0..r0 + r, acts, at..at + rows, span, rows);
        });
    }
    m.eo.resize(n * k * d, 0.0);
    for (g, &(e, at, rows)) in m.groups.iter().enumerate() {
        let out = &m.out_t[offsets[g]..offsets[g] + d * rows];
        let bias = x.biases.as_ref().map(|b| &b.down[e * d..(e + 1) * d]);
        for r in 0..rows {
            let p = m.order[at + r];
            for (o, v) in m.eo[p * d..(p + 1) * d].iter_mut().enumerate() {
                *v = out[o * rows + r] + bias.map_or(0.0, |b| b[o]);
            }
        }
    }

    combine(m, k, d, y);
    if let Some(s) = &x.shared {
        shared_forward(s, act, pool, m, d, y);
    }
}

/// Each row's experts weighted and summed in the order they were picked, into `y`.
fn combine(m: &MoeScratch, k: usize, d: usize, y: &mut [f32]) {
    for (i, yi) in y.chunks_exact_mut(d).enumerate() {
        for j in 0..k {
            let (_, w) = m.sel[i * k + j];
            let o = &m.eo[(i * k + j) * d..(i * k + j + 1) * d];
            if j == 0 {
                yi.iter_mut().zip(o).for_each(|(y, v)| *y = v * w);
            } else {
                yi.iter_mut().zip(o).for_each(|(y, v)| *y += v * w);
            }
        }
    }
}

/// The shared expert over the normalized rows `m.xn`, gated per row, added into `y`.
fn shared_forward(
    s: &SharedExpert,
    act: Gate,
    pool: &ThreadPool,
    m: &mut MoeScratch,
    d: usize,
    y: &mut [f32],
) {
    let n = m.xn.len() / d;
    let a = &mut m.acts;
    a.cols = d;
    a.rows = n;
    crate::copy::replace_values(&mut a.f32, &m.xn);
    gated(act, &s.gate, &s.up, &s.down, pool, a, &mut m.out_t);
    for i in 0..n {
        let g = sigmoid(super::ops::dot(&s.gate_inp, &m.xn[i * d..(i + 1) * d]));
        for o in 0..d {
            y[i * d + o] += m.out_t[o * n + i] * g;
        }
    }
}

/// `down(act(gate . a) * (up . a))` over the rows of `a` (whose f32 rows are set; they
/// are replaced by the inner activations), into `out_t` transposed `[hidden][rows]`.
fn gated(
    act: Gate,
    gate: &Matrix,
    up: &Matrix,
    down: &Matrix,
    pool: &ThreadPool,
    a: &mut Acts,
    out_t: &mut Vec<f32>,
) {
    let (n, f) = (a.rows, gate.rows());
    a.quantize_for(&[gate.act_need(), up.act_need()]);
    out_t.resize(f * n, 0.0);
    glu_t(pool, act, gate, up, a, out_t);
    a.f32.resize(n * f, 0.0);
    for i in 0..n {
        for o in 0..f {
            a.f32[i * f + o] = out_t[o * n + i];
        }
    }
    a.cols = f;
    a.quantize_for(&[down.act_need()]);
    out_t.resize(down.rows() * n, 0.0);
    matmul_t(pool, &[down], a, out_t);
}

/// One row's routing: `logits` (every expert's) become probabilities by a softmax as
/// ggml computes it (the sum in f64, then one reciprocal), the `k` largest are pushed to
/// `sel` in descending order (ties: the lower expert first), divided by their sum when
/// `normalize` (the sum at least 2^-14, as llama.cpp clamps it).
pub fn route(logits: &mut [f32], k: usize, normalize: bool, sel: &mut Vec<(u32, f32)>) {
    ggml_softmax(logits);
    let start = sel.len();
    top_k(logits, k, sel);
    if normalize {
        // llama.cpp clamps the sum to f16's smallest normal before it divides.
        let s: f32 = sel[start..].iter().map(|&(_, w)| w).sum::<f32>().max(6.103_515_6e-5);
        sel[start..].iter_mut().for_each(|(_, w)| *w /= s);
    }
}

/// gpt-oss's routing: the `k` highest `logits` pushed to `sel` in descending order (ties:
/// the lower expert), weighted by a softmax over those `k` alone.
pub fn route_chosen(logits: &[f32], k: usize, sel: &mut Vec<(u32, f32)>) {
    let start = sel.len();
    top_k(logits, k, sel);
    let mut w: Vec<f32> = sel[start..].iter().map(|&(_, w)| w).collect();
    ggml_softmax(&mut w);
    sel[start..].iter_mut().zip(w).for_each(|(s, w)| s.1 = w);
}

/// The `k` largest of `values` with their values, pushed in descending order.
fn top_k(values: &[f32], k: usize, sel: &mut Vec<(u32, f32)>) {
    let start = sel.len();
    for _ in 0..k {
        let mut best: Option<usize> = None;
        for (e, &p) in values.iter().enumerate() {
            let taken = sel[start..].iter().any(|&(t, _)| t as usize == e);
            if !taken && best.is_none_or(|b| p > values[b]) {
                best = Some(e);
            }
        }
        let e = best.unwrap_or(0);
        sel.push((e as u32, values[e]));
    }
}

/// A softmax in place as GGML's `soft_max` computes it: the maximum subtracted, the sum
/// in f64, one reciprocal multiplied in.
fn ggml_softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

#[inline]
fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_keeps_the_k_most_probable_experts_in_order_and_renormalizes_them() {
        let mut sel = Vec::new();
        let mut logits = vec![0.0, 3.0, 1.0, 2.0];
        route(&mut logits, 2, true, &mut sel);
        assert_eq!(sel.iter().map(|s| s.0).collect::<Vec<_>>(), vec![1, 3]);
        assert!((sel[0].1 + sel[1].1 - 1.0).abs() < 1e-6);
        assert!(sel[0].1 > sel[1].1);
        let mut raw = Vec::new();
        let mut logits = vec![0.0, 3.0, 1.0, 2.0];
        route(&mut logits, 2, false, &mut raw);
        let total: f32 = [0f32, 3.0, 1.0, 2.0].iter().map(|v| (v - 3.0).exp()).sum();
        assert!((raw[0].1 - 1.0 / total).abs() < 1e-6, "a softmax over all four");
    }

    #[test]
    fn routing_breaks_ties_toward_the_lower_expert() {
        let mut sel = Vec::new();
        route(&mut [1.0, 1.0, 1.0], 2, true, &mut sel);
        assert_eq!((sel[0].0, sel[1].0), (0, 1));
    }
}
