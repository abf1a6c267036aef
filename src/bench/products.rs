//! The engine's matrix products one at a time (`swactor bench products`): for a model
//! file, a thread count and a number of activation rows, each product of the forward pass
//! (every block's `qkv`, `attn_output`, `gate_up`, `down` and the output head) timed alone
//! on the stage's own weights, against the bytes it reads and this machine's memory read
//! bandwidth measured in the same run, beside the whole forward pass of that many rows.
//!
//! Where a forward is slower than a reference, this says which products cost the time and
//! whether each is bound by memory (decode: time near `bytes / bandwidth`) or by
//! arithmetic (prefill: the integer multiply-adds per second it reaches).

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::Serialize;
use swactor_engine::kernels::Acts;
use swactor_engine::matmul::{Gate, glu_t, matmul_t};
use swactor_engine::transformer::{FeedForward, Input, Output, Stage};
use swactor_engine::{Matrix, ThreadPool};

use super::{BenchError, err};

/// One kind of product (one name and weight format) summed over the blocks that have it.
#[derive(Debug, Clone, Serialize)]
pub struct ProductFigure {
    /// The product: `qkv`, `attn_output`, `gate_up`, `down` or `output`.
    pub product: String,
    /// The weight formats it reads (`q4_k`, or `q4_k+q6_k` for a mixed `qkv`).
    pub format: String,
    /// Output rows x input columns of one call (stacked matrices summed).
    pub shape: (usize, usize),
    /// Calls in one forward pass (blocks with this product in this format).
    pub calls: usize,
    /// Weight bytes one forward pass reads through this product (all its calls).
    pub bytes: u64,
    /// Milliseconds for all its calls in one forward pass (activation quantization
    /// included, as in the forward).
    pub ms: f64,
    /// Weight bytes read per second, GB/s.
    pub gbps: f64,
    /// `bytes / bandwidth` over `ms`: the share of memory bandwidth reached (1.0 = bound by
    /// memory).
    pub of_bandwidth: f64,
    /// Multiply-adds per second, G.
    pub gmacs: f64,
    /// Share of the whole forward pass's time.
    pub of_forward: f64,
}

/// The breakdown of one forward pass of `rows` activation rows.
#[derive(Debug, Clone, Serialize)]
pub struct ProductsFigure {
    /// The file measured.
    pub model: String,
    /// Compute threads.
    pub threads: u32,
    /// Activation rows (1: a decode step; more: a prefill of that many tokens).
    pub rows: usize,
    /// The kernel tier (`avx2`, `avx512`, `scalar`).
    pub isa: String,
    /// Memory read bandwidth of this machine at `threads` threads, GB/s.
    pub bandwidth_gbps: f64,
    /// Milliseconds of one whole forward pass of `rows` rows (from a reset cache).
    pub forward_ms: f64,
    /// Every product, the costliest first.
    pub products: Vec<ProductFigure>,
    /// The forward's time outside the products (attention, norms, rope, embedding,
    /// gathering outputs), ms: `forward_ms` minus the products' sum.
    pub other_ms: f64,
}

/// Measures the products of the model at `path` at `threads` threads for each of `rows`.
pub fn products_figures(
    path: &std::path::Path,
    threads: u32,
    rows: &[usize],
    repeat: u32,
) -> Result<Vec<ProductsFigure>, BenchError> {
    use crate::model::stage::{ComputeDevice, ModelStage, StageSpec};
    let file = crate::model::gguf::GgufFile::open(path).map_err(err)?;
    let facts = file.facts().map_err(err)?;
    let tokenizer = crate::model::tokenizer::tokenizer_from_gguf(file.header()).map_err(err)?;
    let longest = rows.iter().copied().max().unwrap_or(1);
    let spec = StageSpec {
        layers: crate::wire::LayerRange::new(0, facts.block_count),
        embedding: true,
        head: true,
        max_seq_len: 512u32.max(longest as u32 + 1),
        kv_cache: Default::default(),
        device: ComputeDevice::Cpu,
        threads,
    };
    let mut stage = ModelStage::load(&file, spec).map_err(err)?;
    let engine = stage.engine_mut().ok_or_else(|| err("not an engine stage"))?;
    let pool = ThreadPool::new(threads as usize);
    let bandwidth_gbps = read_bandwidth(threads as usize);
    let mut figures = Vec::new();
    for &n in rows {
        let (_, prompt) = super::bench_prompts(&tokenizer, n);
        let forward_ms = time_forward(engine, &prompt, repeat)?;
        let products = time_products(engine, &pool, prompt.len(), repeat);
        let sum: f64 = products.iter().map(|p| p.ms).sum();
        let products = products
            .into_iter()
            .map(|p| finish(p, prompt.len(), bandwidth_gbps, forward_ms))
            .collect();
        figures.push(ProductsFigure {
            model: path.display().to_string(),
            threads,
            rows: prompt.len(),
            isa: crate::model::engine::isa().name().to_string(),
            bandwidth_gbps,
            forward_ms,
            products,
            other_ms: forward_ms - sum,
        });
    }
    Ok(figures)
}

/// The best of `repeat` forward passes of `prompt` from a reset cache, ms.
fn time_forward(engine: &mut Stage, prompt: &[u32], repeat: u32) -> Result<f64, BenchError> {
    let no = AtomicBool::new(false);
    let slots = vec![0usize; prompt.len()];
    let mut best = f64::MAX;
    for _ in 0..repeat.max(1) {
        engine.reset(0);
        let t = Instant::now();
        match engine.forward(&slots, Input::Tokens(prompt), &no) {
            Ok(Output::Logits(_)) => {}
            Ok(Output::Hidden(_)) => return Err(err("the whole model produced hidden states")),
            Err(e) => return Err(BenchError(format!("{e:?}"))),
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    Ok(best)
}

/// A product's sums before the ratios: name, formats, shape, calls, bytes, ms.
struct Raw {
    product: &'static str,
    format: String,
    shape: (usize, usize),
    calls: usize,
    bytes: u64,
    ms: f64,
}

/// Times every product of `engine`'s blocks and head on `n` activation rows, grouped by
/// name and weight formats, the costliest first.
fn time_products(engine: &Stage, pool: &ThreadPool, n: usize, repeat: u32) -> Vec<Raw> {
    let gate = engine.config().arch.gate;
    let w = engine.weights();
    let mut groups: BTreeMap<(&'static str, String), Raw> = BTreeMap::new();
    let mut add = |product: &'static str, mats: &[&Matrix], ms: f64| {
        let format: Vec<&str> = mats.iter().map(|m| m.format().name()).collect();
        let mut format = format;
        format.dedup();
        let shape = (mats.iter().map(|m| m.rows()).sum(), mats[0].cols());
        let bytes: u64 = mats.iter().map(|m| m.bytes() as u64).sum();
        let g = groups.entry((product, format.join("+"))).or_insert(Raw {
            product,
            format: format.join("+"),
            shape,
            calls: 0,
            bytes: 0,
            ms: 0.0,
        });
        g.calls += 1;
        g.bytes += bytes;
        g.ms += ms;
    };
    let d = engine.config().hidden;
    let x: Vec<f32> = (0..n * d).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let mut acts = Acts::default();
    let mut out = Vec::new();
    for l in &w.layers {
        let qkv = [&l.wq, &l.wk, &l.wv];
        add("qkv", &qkv, time_product(pool, &qkv, None, &x, n, &mut acts, &mut out, repeat));
        let o = [&l.wo];
        let xo = vec![0.25f32; n * l.wo.cols()];
        add("attn_output", &o, time_product(pool, &o, None, &xo, n, &mut acts, &mut out, repeat));
        // A mixture of experts is timed as one row's experts: the router and the first
        // `used` experts, each over all `n` rows.
        let (ffns, router) = match &l.ffn {
            FeedForward::Dense { gate, up, down } => (vec![(gate, up, down)], None),
            FeedForward::Experts(x) => {
                let picked = (0..x.used).map(|e| (&x.gate[e], &x.up[e], &x.down[e]));
                (picked.collect(), Some(&x.router))
            }
        };
        if let Some(r) = router {
            let r = [r];
            add("router", &r, time_product(pool, &r, None, &x, n, &mut acts, &mut out, repeat));
        }
        for (g, u, dn) in ffns {
            let gu = [g, u];
            let ms = time_product(pool, &gu, Some(gate), &x, n, &mut acts, &mut out, repeat);
            add("gate_up", &gu, ms);
            let dn = [dn];
            let xd = vec![0.01f32; n * dn[0].cols()];
            add("down", &dn, time_product(pool, &dn, None, &xd, n, &mut acts, &mut out, repeat));
        }
    }
    if let Some(head) = &w.head {
        // The head reads only the last row of a prompt, as the forward does.
        let h = [head];
        add("output", &h, time_product(pool, &h, None, &x[..d], 1, &mut acts, &mut out, repeat));
    }
    let mut v: Vec<Raw> = groups.into_values().collect();
    v.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    v
}

/// The best of `repeat` runs of one product of `mats` (a gated pair when `glu`) on the
/// `n` rows of `x`, its activation quantization included, ms.
#[allow(clippy::too_many_arguments)]
fn time_product(
    pool: &ThreadPool,
    mats: &[&Matrix],
    glu: Option<Gate>,
    x: &[f32],
    n: usize,
    acts: &mut Acts,
    out: &mut Vec<f32>,
    repeat: u32,
) -> f64 {
    let formats: Vec<_> = mats.iter().map(|m| m.format()).collect();
    let rows = if glu.is_some() { mats[0].rows() } else { mats.iter().map(|m| m.rows()).sum() };
    out.resize(rows * n, 0.0);
    let mut best = f64::MAX;
    for _ in 0..repeat.max(1) {
        let t = Instant::now();
        acts.load(&x[..n * mats[0].cols()], mats[0].cols(), &formats);
        match glu {
            Some(g) => glu_t(pool, g, mats[0], mats[1], acts, out),
            None => matmul_t(pool, mats, acts, out),
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    best
}

/// The ratios of one product.
fn finish(r: Raw, n: usize, bandwidth_gbps: f64, forward_ms: f64) -> ProductFigure {
    let n = if r.product == "output" { 1 } else { n };
    let s = r.ms / 1e3;
    let gbps = r.bytes as f64 / s / 1e9;
    let macs = (r.shape.0 * r.shape.1) as f64 * r.calls as f64 * n as f64;
    ProductFigure {
        product: r.product.to_string(),
        format: r.format,
        shape: r.shape,
        calls: r.calls,
        bytes: r.bytes,
        ms: r.ms,
        gbps,
        of_bandwidth: gbps / bandwidth_gbps,
        gmacs: macs / s / 1e9,
        of_forward: r.ms / forward_ms,
    }
}

/// Memory read bandwidth at `threads` threads, GB/s: the best of three passes of every
/// thread summing its own quarter-GiB (far beyond any cache).
pub fn read_bandwidth(threads: usize) -> f64 {
    const PER_THREAD: usize = 256 << 20;
    let threads = threads.max(1);
    let bufs: Vec<Vec<u64>> = (0..threads).map(|t| vec![t as u64 + 1; PER_THREAD / 8]).collect();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for b in &bufs {
                s.spawn(move || std::hint::black_box(sum_words(b)));
            }
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    (threads * PER_THREAD) as f64 / best / 1e9
}

/// The wrapping sum of `v`, four lanes at a time (the loads, not the adds, bound it).
fn sum_words(v: &[u64]) -> u64 {
    let mut acc = [0u64; 8];
    for c in v.chunks_exact(8) {
        for (a, x) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*x);
        }
    }
    acc.iter().fold(0, |a, x| a.wrapping_add(*x))
}
