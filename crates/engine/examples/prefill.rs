//! Times the engine on random weights of SmolLM2-135M's shape, without a model file: one
//! prefill of `--rows` rows and single-row decode steps. For profiling the kernels
//! (`cargo build --profile profiling -p swactor-engine --example prefill`), not a benchmark
//! of record (that is `swactor bench engine`).
//!
//! Usage: `prefill [q8_0|q4_0|q4_1|q4_k|...] [rows] [threads] [repeat] [decode batch]
//! [135m|1b]` (`1b`: the 1.1B llama's shapes, 22 blocks of hidden 2048, ffn 5632); the
//! kernel tier is `SWACTOR_ENGINE_ISA`'s, or the widest this CPU runs.

// A program of its own (a driver): it reads the clock to time the engine.
#![allow(clippy::disallowed_methods)]

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use swactor_engine::transformer::{Config, FeedForward, Input, KvFormat, Layer, Stage, Weights};
use swactor_engine::{Bytes, Isa, Matrix, ThreadPool, WeightFormat};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let fmt = args.get(1).map_or("q8_0", String::as_str);
    let rows: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let threads: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1);
    let repeat: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(5);
    let batch: usize = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1);
    let big = args.get(6).is_some_and(|s| s == "1b");
    let isa = std::env::var("SWACTOR_ENGINE_ISA").ok().and_then(|v| Isa::parse(&v));
    let isa = isa.unwrap_or_else(Isa::detect);
    let format = WeightFormat::ALL.into_iter().find(|f| f.name() == fmt).expect("a weight format");
    let (hidden, heads, kv_heads, ffn, vocab, blocks) =
        if big { (2048, 32, 4, 5632, 32000, 22) } else { (576, 9, 3, 1536, 49152, 30) };
    let cfg = Config {
        hidden,
        heads,
        kv_heads,
        head_dim: 64,
        ffn,
        vocab,
        eps: 1e-5,
        rope_base: 10000.0,
        max_seq_len: 512,
        kv: KvFormat::F32,
        arch: Default::default(),
    };
    let mut seed = 0x1234_5678_9abc_def0u64;
    let repack = std::cell::Cell::new(0f64);
    let mut matrix = |rows: usize, cols: usize| {
        let row_bytes = format.row_bytes(cols).expect("whole blocks");
        let mut b = vec![0u8; rows * row_bytes];
        for x in b.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *x = seed as u8;
        }
        // Small finite f16 scales (and mins) at every block's start (0x1400 is about 0.001),
        // so that activations stay finite through every block.
        let fields = match format {
            WeightFormat::Q4_1 | WeightFormat::Q5_1 => 2,
            _ => 1,
        };
        // The K-quants' f16 super-scale (and super-min) likewise.
        let k_scales: &[usize] = match format {
            WeightFormat::Q4K | WeightFormat::Q5K => &[0, 2],
            WeightFormat::Q6K => &[208],
            _ => &[],
        };
        for blk in b.chunks_exact_mut(format.block_bytes()) {
            for &at in k_scales {
                blk[at] = 0;
                blk[at + 1] = 0x14;
            }
        }
        if format.block_elems() == 32 {
            for blk in b.chunks_exact_mut(format.block_bytes()) {
                for f in 0..fields {
                    blk[2 * f] = 0;
                    blk[2 * f + 1] = 0x14;
                }
            }
        }
        let m = Matrix::new(format, rows, cols, Bytes::from_vec(b), isa).expect("matrix");
        let t = Instant::now();
        let m = m.repacked();
        repack.set(repack.get() + t.elapsed().as_secs_f64());
        m
    };
    let (d, f) = (cfg.hidden, cfg.ffn);
    let kv = kv_heads * 64;
    let layers = (0..blocks)
        .map(|_| Layer {
            attn_norm: vec![1.0; d],
            wq: matrix(d, d),
            wk: matrix(kv, d),
            wv: matrix(kv, d),
            wo: matrix(d, d),
            ffn_norm: vec![1.0; d],
            ffn: FeedForward::Dense { gate: matrix(f, d), up: matrix(f, d), down: matrix(d, f) },
            sliding: false,
            extra: Default::default(),
        })
        .collect();
    let head = Some(matrix(cfg.vocab, d));
    let w = Weights { embedding: None, layers, norm: Some(vec![1.0; d]), head, rope_factors: None };
    let pool = Arc::new(ThreadPool::new(threads));
    let mut stage = Stage::new(cfg, w, pool, batch).expect("stage");
    let no = AtomicBool::new(false);
    let x: Vec<f32> = (0..rows * d).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
    let slots = vec![0usize; rows];
    let mut best = f64::MAX;
    for _ in 0..repeat {
        stage.reset(0);
        let t = Instant::now();
        stage.forward(&slots, Input::Hidden(&x), &no).expect("forward");
        best = best.min(t.elapsed().as_secs_f64());
    }
    let mut dec = f64::MAX;
    for _ in 0..repeat {
        let t = Instant::now();
        let slots: Vec<usize> = (0..batch).collect();
        for _ in 0..16 {
            for &s in &slots {
                stage.reset(s);
            }
            stage.forward(&slots, Input::Hidden(&x[..batch * d]), &no).expect("forward");
        }
        dec = dec.min(t.elapsed().as_secs_f64() / 16.0);
    }
    println!("repacking took {:.1} ms", repack.get() * 1e3);
    println!(
        "{fmt} isa {} threads {threads}: prefill {rows} rows {:.1} rows/s; decode batch {batch} \
         {:.1} tok/s",
        isa.name(),
        rows as f64 / best,
        batch as f64 / dec
    );
}
