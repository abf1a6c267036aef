//! The engine's matrix products one at a time (`swactor bench products`): for a model
//! file, a thread count and a number of activation rows, each product of the forward pass
//! (every block's `qkv`, `attn_output`, `gate_up`, `down` and the output head) timed alone
//! on the stage's own weights, against the bytes it reads and this machine's memory read
//! bandwidth measured in the same run, beside the whole forward pass of that many rows.
//!
//! Where a forward is slower than a reference, this says which products cost the time and
//! whether each is bound by memory (decode: time near `bytes / bandwidth`) or by
//! arithmetic (prefill: the integer multiply-adds per second it reaches).
//!
//! Beside the streamed rate, each product's kernels are timed with their weights resident
//! in cache ([`RESIDENT_BYTES`] per thread of the product's first rows, repacked as the
//! stage repacks them, run over and over): the kernels' own speed, which memory cannot
//! hold back. A streamed rate far under the resident one is bound by memory; a resident
//! rate under the reference's is the kernel's own miss, on any host.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use serde::Serialize;
use swactor_engine::kernels::Acts;
use swactor_engine::matmul::{Gate, glu_t, matmul_t};
use swactor_engine::transformer::{FeedForward, Input, Output, Stage};
use swactor_engine::{Matrix, ThreadPool, WeightFormat};

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
    /// Multiply-adds per second with the weights resident in cache (the product's first
    /// rows, [`RESIDENT_BYTES`] per thread, repeated), G: the kernels' own speed.
    pub resident_gmacs: f64,
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

/// A product's sums before the ratios: name, formats, shape, calls, bytes, ms, and its
/// cache-resident rate (timed on its first call).
struct Raw {
    product: &'static str,
    format: String,
    shape: (usize, usize),
    calls: usize,
    bytes: u64,
    ms: f64,
    resident_gmacs: f64,
}

/// Weight bytes per thread a cache-resident product reads: well inside any x86 or ARM
/// core's L2 (1-2 MiB), with room for the activations.
pub const RESIDENT_BYTES: usize = 256 << 10;

/// How long a cache-resident product is repeated for one timing.
const RESIDENT_MS: f64 = 20.0;

/// The multiply-adds per second, G, of the product of `mats` (a gated pair when `glu`) on
/// `n` rows of `x` with only their first rows, [`RESIDENT_BYTES`] per thread in all (a
/// multiple of 16 rows, repacked as the stage repacks), repeated while they stay in cache,
/// each call quantizing its activations as the forward does: the best of five timings of
/// [`RESIDENT_MS`] each.
fn time_resident(
    pool: &ThreadPool,
    mats: &[&Matrix],
    glu: Option<Gate>,
    x: &[f32],
    n: usize,
    acts: &mut Acts,
    out: &mut Vec<f32>,
) -> f64 {
    time_resident_for(pool, mats, glu, (x, n), acts, out, (5, RESIDENT_MS, 1))
}

/// [`time_resident`] over the `n` rows of `x`, the best of `timing.0` timings of `timing.1`
/// milliseconds each, on `timing.2` times [`RESIDENT_BYTES`] of weights per thread.
fn time_resident_for(
    pool: &ThreadPool,
    mats: &[&Matrix],
    glu: Option<Gate>,
    (x, n): (&[f32], usize),
    acts: &mut Acts,
    out: &mut Vec<f32>,
    timing: (u32, f64, usize),
) -> f64 {
    let row_bytes: usize = mats.iter().map(|m| m.bytes() / m.rows().max(1)).sum();
    let fewest = mats.iter().map(|m| m.rows()).min().unwrap_or(0);
    let rows = (resident_rows(row_bytes, pool.threads()) * timing.2).min(fewest);
    if rows == 0 {
        return 0.0;
    }
    let small: Vec<Matrix> = mats
        .iter()
        .filter_map(|m| {
            let raw: Vec<u8> = (0..rows).flat_map(|r| m.row(r).iter().copied()).collect();
            // On a cache line, as a model's weights are (the mapping's tensors on the
            // file's alignment, repacked copies on their own): where the allocator puts a
            // vector would otherwise change the figure from run to run.
            let bytes = swactor_engine::Bytes::aligned_copy(&raw);
            Some(Matrix::new(m.format(), rows, m.cols(), bytes, m.isa()).ok()?.repacked())
        })
        .collect();
    if small.len() != mats.len() {
        return 0.0;
    }
    let small: Vec<&Matrix> = small.iter().collect();
    let cols = small[0].cols();
    let needs: Vec<_> = small.iter().map(|m| m.act_need()).collect();
    let out_rows = if glu.is_some() { rows } else { rows * small.len() };
    out.resize(out_rows * n, 0.0);
    let mut run = || {
        acts.load(&x[..n * cols], cols, &needs);
        match glu {
            Some(g) => glu_t(pool, g, small[0], small[1], acts, out),
            None => matmul_t(pool, &small, acts, out),
        }
    };
    run();
    let mut best = 0f64;
    for _ in 0..timing.0 {
        let (t, mut calls) = (Instant::now(), 0u64);
        while t.elapsed().as_secs_f64() * 1e3 < timing.1 {
            run();
            calls += 1;
        }
        let macs = (rows * small.len() * cols * n) as f64 * calls as f64;
        best = best.max(macs / t.elapsed().as_secs_f64() / 1e9);
    }
    best
}

/// Times every product of `engine`'s blocks and head on `n` activation rows, grouped by
/// name and weight formats, the costliest first.
fn time_products(engine: &Stage, pool: &ThreadPool, n: usize, repeat: u32) -> Vec<Raw> {
    let gate = engine.config().arch.gate;
    let w = engine.weights();
    let mut groups: BTreeMap<(&'static str, String), Raw> = BTreeMap::new();
    let (mut acts, mut out) = (Acts::default(), Vec::new());
    let evict = evictor();
    // Times one call of `product` (over `n` rows of `x`); its group's first call also
    // times its kernels with the weights resident in cache.
    let mut add = |product: &'static str, mats: &[&Matrix], glu: Option<Gate>, x: &[f32], n| {
        let ms = time_product(pool, mats, glu, x, n, &mut acts, &mut out, (repeat, &evict));
        let mut format: Vec<&str> = mats.iter().map(|m| m.format().name()).collect();
        format.dedup();
        let shape = (mats.iter().map(|m| m.rows()).sum(), mats[0].cols());
        let bytes: u64 = mats.iter().map(|m| m.bytes() as u64).sum();
        let g = groups.entry((product, format.join("+"))).or_insert_with(|| Raw {
            product,
            format: format.join("+"),
            shape,
            calls: 0,
            bytes: 0,
            ms: 0.0,
            resident_gmacs: time_resident(pool, mats, glu, x, n, &mut acts, &mut out),
        });
        g.calls += 1;
        g.bytes += bytes;
        g.ms += ms;
    };
    let d = engine.config().hidden;
    let x: Vec<f32> = (0..n * d).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    for l in &w.layers {
        add("qkv", &[&l.wq, &l.wk, &l.wv], None, &x, n);
        let xo = vec![0.25f32; n * l.wo.cols()];
        add("attn_output", &[&l.wo], None, &xo, n);
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
            add("router", &[r], None, &x, n);
        }
        for (g, u, dn) in ffns {
            add("gate_up", &[g, u], Some(gate), &x, n);
            let xd = vec![0.01f32; n * dn.cols()];
            add("down", &[dn], None, &xd, n);
        }
    }
    if let Some(head) = &w.head {
        // The head reads only the last row of a prompt, as the forward does.
        add("output", &[head], None, &x[..d], 1);
    }
    let mut v: Vec<Raw> = groups.into_values().collect();
    v.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    v
}

/// The best of `repeat` runs of one product of `mats` (a gated pair when `glu`) on the
/// `n` rows of `x`, its activation quantization included, each after summing `evict`
/// (the weights cold, as in a forward pass), ms.
#[allow(clippy::too_many_arguments)]
fn time_product(
    pool: &ThreadPool,
    mats: &[&Matrix],
    glu: Option<Gate>,
    x: &[f32],
    n: usize,
    acts: &mut Acts,
    out: &mut Vec<f32>,
    (repeat, evict): (u32, &[u64]),
) -> f64 {
    let needs: Vec<_> = mats.iter().map(|m| m.act_need()).collect();
    let rows = if glu.is_some() { mats[0].rows() } else { mats.iter().map(|m| m.rows()).sum() };
    out.resize(rows * n, 0.0);
    let mut best = f64::MAX;
    for _ in 0..repeat.max(1) {
        std::hint::black_box(sum_words(evict));
        let t = Instant::now();
        acts.load(&x[..n * mats[0].cols()], mats[0].cols(), &needs);
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
        resident_gmacs: r.resident_gmacs,
        of_forward: r.ms / forward_ms,
    }
}

/// Memory read bandwidth at `threads` threads, GB/s: the best of three passes of every
/// thread summing its own quarter-GiB (far beyond any cache).
pub fn read_bandwidth(threads: usize) -> f64 {
    let llc = super::cache::last_level_cache_bytes();
    read_bandwidth_of(threads, super::cache::read_bytes(threads, llc).max(256 << 20), 3)
}

/// A buffer twice the last-level cache (as the calibration reads): summing it before a
/// timed product evicts that product's weights, so each is timed streaming from memory
/// as in a forward pass (where every other product's weights passed through the cache
/// since), not from the cache its previous run filled.
fn evictor() -> Vec<u64> {
    let llc = super::cache::last_level_cache_bytes();
    vec![1u64; super::cache::read_bytes(1, llc) / 8]
}

/// Memory read bandwidth at `threads` threads, GB/s: the best of `passes` passes of every
/// thread summing its own `per_thread` bytes.
pub fn read_bandwidth_of(threads: usize, per_thread: usize, passes: u32) -> f64 {
    let (per_thread, threads) = (per_thread.max(8), threads.max(1));
    let bufs: Vec<Vec<u64>> = (0..threads).map(|t| vec![t as u64 + 1; per_thread / 8]).collect();
    let mut best = f64::MAX;
    for _ in 0..passes.max(1) {
        let t = Instant::now();
        std::thread::scope(|s| {
            for b in &bufs {
                s.spawn(move || std::hint::black_box(sum_words(b)));
            }
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    (threads * per_thread) as f64 / best / 1e9
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

/// One weight format's single-row product with its weights resident in cache, for the
/// side-by-side with llama.cpp (`scripts/bench-llama-cpp.py --products`).
#[derive(Debug, Clone, Serialize)]
pub struct FormatFigure {
    /// The format (`q4_k`).
    pub format: String,
    /// The kernel tier that ran it (a format without kernels of the asked tier runs the
    /// next narrower one).
    pub isa: String,
    /// Compute threads.
    pub threads: u32,
    /// Weight rows: [`RESIDENT_BYTES`] per thread, a multiple of 16 per thread.
    pub rows: usize,
    /// Input columns.
    pub cols: usize,
    /// Multiply-adds per second, G, each call quantizing its one activation row.
    pub resident_gmacs: f64,
}

/// The cache-resident decode rate of each of `formats` on a `rows x cols` matrix of
/// deterministic pseudo-random weights (`rows` from [`RESIDENT_BYTES`] per thread), at
/// `threads` threads, with the tier the engine would use.
pub fn format_figures(
    formats: &[swactor_engine::WeightFormat],
    cols: usize,
    threads: u32,
) -> Result<Vec<FormatFigure>, BenchError> {
    let pool = ThreadPool::new(threads as usize);
    let isa = crate::model::engine::isa();
    let x: Vec<f32> = (0..cols).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let (mut acts, mut out) = (Acts::default(), Vec::new());
    let mut figures = Vec::new();
    for &format in formats {
        let row_bytes = format
            .row_bytes(cols)
            .ok_or_else(|| err(format!("{cols} columns are not whole {} blocks", format.name())))?;
        let rows = resident_rows(row_bytes, threads as usize);
        let values: Vec<f32> = (0..rows * cols)
            .map(|i| ((i.wrapping_mul(2_654_435_761) >> 7) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let raw = swactor_engine::quantize::quantize(format, &values)
            .ok_or_else(|| err(format!("no quantizer for {}", format.name())))?;
        let m = Matrix::new(format, rows, cols, swactor_engine::Bytes::from_vec(raw), isa)
            .map_err(err)?;
        let resident_gmacs = time_resident(&pool, &[&m], None, &x, 1, &mut acts, &mut out);
        figures.push(FormatFigure {
            format: format.name().to_string(),
            isa: swactor_engine::kernels::kernel_name(m.isa(), format),
            threads,
            rows,
            cols,
            resident_gmacs,
        });
    }
    Ok(figures)
}

/// A node's calibration: every format's cache-resident product rate at `threads` threads,
/// GMAC/s, for one activation row and for `batch` rows, each the best of two timings of
/// `ms` milliseconds (a format the engine cannot quantize is left out).
pub fn format_rates(threads: u32, batch: usize, ms: f64) -> Vec<(WeightFormat, f64, f64)> {
    const COLS: usize = 2048;
    const MANY: usize = 4;
    let pool = ThreadPool::new(threads as usize);
    let isa = crate::model::engine::isa();
    let x: Vec<f32> =
        (0..COLS * batch).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let (mut acts, mut out) = (Acts::default(), Vec::new());
    let mut rates = Vec::new();
    for format in WeightFormat::ALL {
        let Some(row_bytes) = format.row_bytes(COLS) else { continue };
        // The many-row product on more weights (in L2): its calls take long enough that
        // the pool's dispatch and the activations' quantization weigh as in a prompt.
        let rows = resident_rows(row_bytes, threads as usize) * MANY;
        let values: Vec<f32> = (0..rows * COLS)
            .map(|i| ((i.wrapping_mul(2_654_435_761) >> 7) % 2001) as f32 / 1000.0 - 1.0)
            .collect();
        let Some(raw) = swactor_engine::quantize::quantize(format, &values) else { continue };
        let bytes = swactor_engine::Bytes::from_vec(raw);
        let Ok(m) = Matrix::new(format, rows, COLS, bytes, isa) else { continue };
        let time = |n, acts: &mut Acts, out: &mut Vec<f32>, times| {
            time_resident_for(&pool, &[&m], None, (&x, n), acts, out, (2, ms, times))
        };
        let one = time(1, &mut acts, &mut out, 1);
        let many = time(batch, &mut acts, &mut out, MANY);
        rates.push((format, one, many));
    }
    rates
}

/// The rate at which the one-row Q8_0 product streams its weights from memory at
/// `threads` threads, GB/s: `per_thread` bytes of weights per thread (far beyond a core's
/// caches; scale 1, pseudo-random quants, no quantizer needed), the best of three products.
/// What the engine's decode reads where it is bound by memory: its kernels prefetch and
/// load wider than a plain read loop does.
pub fn stream_rate(threads: usize, per_thread: usize) -> f64 {
    const COLS: usize = 2048;
    let format = WeightFormat::Q8_0;
    let Some(row_bytes) = format.row_bytes(COLS) else { return 0.0 };
    let step = 16 * threads.max(1);
    let rows = (per_thread * threads.max(1) / row_bytes / step * step).max(step);
    let block = format.block_bytes();
    // 61 distinct blocks (an f16 scale of 1.0, then 32 quants), repeated: filling a buffer
    // of a GiB (twice a large server's cache) costs a copy, not a computation per byte.
    let mut pattern = vec![0u8; 61 * block];
    for (i, b) in pattern.chunks_exact_mut(block).enumerate() {
        b[..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        for (j, q) in b[2..].iter_mut().enumerate() {
            *q = (i.wrapping_mul(31).wrapping_add(j * 7) % 61) as u8;
        }
    }
    let mut raw = vec![0u8; rows * row_bytes];
    for chunk in raw.chunks_mut(pattern.len()) {
        chunk.copy_from_slice(&pattern[..chunk.len()]);
    }
    let isa = crate::model::engine::isa();
    let bytes = swactor_engine::Bytes::aligned_copy(&raw);
    drop(raw);
    let Ok(m) = Matrix::new(format, rows, COLS, bytes, isa) else { return 0.0 };
    let m = m.repacked();
    let pool = ThreadPool::new(threads.max(1));
    let x: Vec<f32> = (0..COLS).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let (mut acts, mut out) = (Acts::default(), vec![0f32; rows]);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        acts.load(&x, COLS, &[m.act_need()]);
        matmul_t(&pool, &[&m], &acts, &mut out);
        best = best.min(t.elapsed().as_secs_f64());
    }
    (rows * row_bytes) as f64 / best / 1e9
}

/// Rows of `row_bytes` each that fill [`RESIDENT_BYTES`] per thread, a multiple of 16
/// rows per thread (so that every thread gets the same whole groups of 16; at least one).
pub fn resident_rows(row_bytes: usize, threads: usize) -> usize {
    let step = 16 * threads.max(1);
    (RESIDENT_BYTES * threads.max(1) / row_bytes.max(1) / step * step).max(step)
}
