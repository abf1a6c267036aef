//! Attention: rope tables, each row's queries and its new keys and values (biases, per-head
//! norms and rope applied) into its slot's cache, and each row's attention over its cache
//! (the whole history on a global block, the window on a sliding one).

use std::ops::Range;

use super::cache::{KvFormat, Layout, Slot};
use super::ops::{dot, rms_norm_in_place, rope_style, softmax, softmax_with_sink};
use super::{Config, Layer, Scratch};
use crate::pool::ThreadPool;

/// The cosines and sines of every position's rope angles.
#[derive(Debug, Default)]
pub(super) struct RopeTables {
    cos: Vec<f32>,
    sin: Vec<f32>,
    half: usize,
}

impl RopeTables {
    /// Bytes its tables hold.
    pub(super) fn bytes(&self) -> usize {
        4 * (self.cos.capacity() + self.sin.capacity())
    }

    /// Angles `p / scale * base^(-2i / hd) / factors[i]` for positions below `positions`;
    /// with `yarn`, YaRN's interpolation of them and its magnitude scaling.
    pub(super) fn new(
        base: f32,
        hd: usize,
        positions: usize,
        scale: f32,
        factors: Option<&[f32]>,
        yarn: Option<&super::Yarn>,
    ) -> RopeTables {
        let half = hd / 2;
        let inv: Vec<f32> = (0..half)
            .map(|i| {
                let f = 1.0 / base.powf(2.0 * i as f32 / hd as f32);
                factors.map_or(f, |ff| f / ff[i])
            })
            .collect();
        let (mut cos, mut sin) =
            (Vec::with_capacity(positions * half), Vec::with_capacity(positions * half));
        let step = 1.0 / scale;
        let yarn = yarn.map(|y| (y, y.corr_dims(hd, base)));
        for p in 0..positions {
            for (i, &f) in inv.iter().enumerate() {
                let t = p as f32 * f * step;
                match yarn {
                    None => {
                        cos.push(t.cos());
                        sin.push(t.sin());
                    }
                    Some((y, dims)) => {
                        let (c, s) = y.rotate(t, dims, 2 * i);
                        cos.push(c);
                        sin.push(s);
                    }
                }
            }
        }
        RopeTables { cos, sin, half }
    }

    fn at(&self, p: usize) -> (&[f32], &[f32]) {
        let r = p * self.half..(p + 1) * self.half;
        (&self.cos[r.clone()], &self.sin[r])
    }
}

/// What one block's attention reads besides the scratch.
pub(super) struct Block<'a> {
    pub(super) c: &'a Config,
    pub(super) l: usize,
    pub(super) w: &'a Layer,
    pub(super) rope: &'a RopeTables,
    pub(super) layout: &'a Layout,
}

/// Takes rows `rows`' queries out of the q / k / v product (`s.out_t`, transposed over all
/// `slots.len()` rows) into `s.q` with biases, norms and rope applied (a share of the rows
/// on each thread), and stores their keys and values at their positions in their slots'
/// caches.
pub(super) fn rope_and_cache(
    b: &Block<'_>,
    s: &mut Scratch,
    pool: &ThreadPool,
    caches: &mut [Slot],
    slots: &[usize],
    rows: Range<usize>,
) {
    let (c, w) = (b.c, b.w);
    let n = slots.len();
    let hd = c.head_dim;
    let (qd, kd) = (c.heads * hd, c.kv_heads * hd);
    let x = &w.extra;
    let bias = |v: &Option<Vec<f32>>, j: usize| v.as_ref().map_or(0.0, |v| v[j]);
    let q = &mut s.q[rows.start * qd..rows.end * qd];
    super::rows::transpose_rows(pool, &s.out_t, n, rows.clone(), qd, q);
    let pos = &s.pos;
    super::rows::for_each_row(pool, q, qd, &|k, q| {
        let (cos, sin) = b.rope.at(pos[rows.start + k]);
        if let Some(bq) = &x.q_bias {
            q.iter_mut().zip(bq).for_each(|(q, b)| *q += b);
        }
        for h in q.chunks_exact_mut(hd) {
            if let Some(norm) = &x.q_norm {
                rms_norm_in_place(h, norm, c.eps);
            }
            rope_style(c.arch.rope, h, cos, sin);
        }
    });
    for i in rows {
        let p = s.pos[i];
        let (cos, sin) = b.rope.at(p);
        let slot = &mut caches[slots[i]];
        s.kv.resize(hd, 0.0);
        for kh in 0..c.kv_heads {
            let at = b.layout.at(b.l, kh, p);
            for (j, k) in s.kv.iter_mut().enumerate() {
                *k = s.out_t[(qd + kh * hd + j) * n + i] + bias(&x.k_bias, kh * hd + j);
            }
            if let Some(norm) = &x.k_norm {
                rms_norm_in_place(&mut s.kv, norm, c.eps);
            }
            rope_style(c.arch.rope, &mut s.kv, cos, sin);
            slot.k.store(at, &s.kv);
            for (j, v) in s.kv.iter_mut().enumerate() {
                *v = s.out_t[(qd + kd + kh * hd + j) * n + i] + bias(&x.v_bias, kh * hd + j);
            }
            slot.v.store(at, &s.kv);
        }
    }
}

/// The first position a query at `p` sees on this block.
fn first_seen(b: &Block<'_>, p: usize) -> usize {
    if b.w.sliding && b.c.arch.window > 0 { (p + 1).saturating_sub(b.c.arch.window) } else { 0 }
}

/// Attention of rows `rows`' queries (`s.q`) over their slots' caches, into `s.y`
/// (`[row][head][head dim]`).
///
/// One task per (row, run of query heads sharing a KV head): a whole GQA group when there
/// are enough such tasks to keep the pool busy (a prefill), one head otherwise (a decode).
/// A group's heads take each block of keys and values in turn while it is in L1, so a key
/// is read from memory once per group, not once per head. Each head's sums are the same
/// whichever way its tasks are cut: a row's result never depends on its batch.
pub(super) fn attention(
    b: &Block<'_>,
    s: &mut Scratch,
    pool: &ThreadPool,
    caches: &[Slot],
    slots: &[usize],
    rows: Range<usize>,
) {
    let c = b.c;
    let hd = c.head_dim;
    let qd = c.heads * hd;
    let group = c.heads / c.kv_heads;
    let gs = if rows.len() * c.kv_heads >= 4 * pool.threads() { group } else { 1 };
    let tasks_per_row = c.heads / gs;
    // Each task owns its heads' outputs, their scores, a row buffer (for an f16 cache's
    // values read back as f32) and its heads' queries rounded for an f16 cache.
    let seen = rows.clone().map(|i| s.pos[i] + 1 - first_seen(b, s.pos[i])).max().unwrap_or(0);
    let chunk = gs * (2 * hd + seen) + hd;
    // With an f16 cache the query and the attention weights are rounded to f16 too, as
    // llama.cpp's products with its f16 cache round them.
    let f16 = c.kv == KvFormat::F16;
    let r0 = rows.start;
    // Sliding and global blocks ask for different sizes: grow to the size asked, not by
    // doubling, so the scratch stays within what the planner counts.
    let need = rows.len() * tasks_per_row * chunk;
    s.att.reserve_exact(need.saturating_sub(s.att.len()));
    s.att.resize(need, 0.0);
    let scale = match c.arch.attention_scale {
        s if s > 0.0 => s,
        _ => 1.0 / (hd as f32).sqrt(),
    };
    // Runs of an f32 cache in place where the CPU has the SIMD for them (decided per
    // row by its own slot's cache, so a row's path never depends on its batch).
    let runs = crate::simd::has_runs(hd);
    // Keys (or values) per block a group's heads share while it is in L1: about 16 KiB.
    let block = (4096 / hd).max(4).next_multiple_of(4);
    {
        let (q, pos) = (&s.q, &s.pos);
        pool.for_each_chunk(&mut s.att, chunk, &|t, buf| {
            let (i, h0) = (r0 + t / tasks_per_row, t % tasks_per_row * gs);
            let p = pos[i];
            let lo = first_seen(b, p);
            let m = p + 1 - lo;
            let slot = &caches[slots[i]];
            let kh = h0 / group;
            let q = &q[i * qd + h0 * hd..i * qd + (h0 + gs) * hd];
            let (y, rest) = buf.split_at_mut(gs * hd);
            let (row, rest) = rest.split_at_mut(hd);
            let (qr, sc) = rest.split_at_mut(gs * hd);
            let q = if f16 {
                for (r, &v) in qr.iter_mut().zip(q) {
                    *r = to_f16(v);
                }
                &*qr
            } else {
                q
            };
            let sc = &mut sc[..gs * m];
            y.fill(0.0);
            let softmax_heads = |sc: &mut [f32]| {
                for (g, sc) in sc.chunks_exact_mut(m).enumerate() {
                    match &b.w.extra.sinks {
                        Some(sinks) => softmax_with_sink(sc, sinks[h0 + g]),
                        None => softmax(sc),
                    }
                }
            };
            if !f16 && runs && slot.k.f32_run(0, 0).is_some() {
                // An f32 cache read in place, a contiguous run of positions at a time (a
                // ring wraps once at most), a block of keys for every head in turn.
                for_blocks(b, kh, lo..p + 1, block, |r, at, len| {
                    let keys = slot.k.f32_run(at, len * hd).expect("an f32 cache");
                    for (g, q) in q.chunks_exact(hd).enumerate() {
                        let out = &mut sc[g * m + r..g * m + r + len];
                        crate::simd::scores_f32(q, keys, scale, out);
                    }
                });
                softmax_heads(sc);
                for_blocks(b, kh, lo..p + 1, block, |r, at, len| {
                    let values = slot.v.f32_run(at, len * hd).expect("an f32 cache");
                    for (g, y) in y.chunks_exact_mut(hd).enumerate() {
                        crate::simd::mix_f32(y, &sc[g * m + r..g * m + r + len], values);
                    }
                });
                return;
            }
            for (g, q) in q.chunks_exact(hd).enumerate() {
                for (k, s) in sc[g * m..(g + 1) * m].iter_mut().enumerate() {
                    *s = dot(q, slot.k.read(b.layout.at(b.l, kh, lo + k), row)) * scale;
                }
            }
            softmax_heads(sc);
            if f16 {
                sc.iter_mut().for_each(|v| *v = to_f16(*v));
            }
            for (y, sc) in y.chunks_exact_mut(hd).zip(sc.chunks_exact(m)) {
                for (k, &pk) in sc.iter().enumerate() {
                    let v = slot.v.read(b.layout.at(b.l, kh, lo + k), row);
                    if !crate::simd::axpy_f32(y, pk, v) {
                        for (y, &v) in y.iter_mut().zip(v) {
                            *y += pk * v;
                        }
                    }
                }
            }
        });
    }
    let out = gs * hd;
    for t in 0..rows.len() * tasks_per_row {
        let at = r0 * qd + t * out;
        s.y[at..at + out].copy_from_slice(&s.att[t * chunk..t * chunk + out]);
    }
}

/// [`for_runs`] with each run cut into pieces of at most `block` positions.
fn for_blocks(
    b: &Block<'_>,
    kh: usize,
    positions: Range<usize>,
    block: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    let hd = b.c.head_dim;
    for_runs(b, kh, positions, |r, at, len| {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(block);
            f(r + done, at + done * hd, n);
            done += n;
        }
    });
}

/// Calls `f(offset, at, len)` for each contiguous run of `positions` in KV head `kh`'s part
/// of block `b`'s cache: `offset` from the first position, `at` where the run starts,
/// `len` positions (a sliding block's ring wraps once at most).
fn for_runs(
    b: &Block<'_>,
    kh: usize,
    positions: Range<usize>,
    mut f: impl FnMut(usize, usize, usize),
) {
    let cap = b.layout.positions(b.l);
    let mut p = positions.start;
    while p < positions.end {
        let len = (positions.end - p).min(cap - p % cap);
        f(p - positions.start, b.layout.at(b.l, kh, p), len);
        p += len;
    }
}

/// `x` rounded to f16 precision.
fn to_f16(x: f32) -> f32 {
    half::f16::from_f32(x).to_f32()
}
