//! A stage's KV caches: per sequence slot, per block, per KV head, a run of positions. A
//! global block keeps every position; a sliding-window block keeps a ring of
//! `window_cap` positions (position `p` at `p % window_cap`).

use crate::copy;
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

/// One slot's keys or values, `[block][kv head][position][head dim]`.
#[derive(Debug, Default)]
pub(super) enum Cache {
    /// Not allocated yet.
    #[default]
    Empty,
    /// f32 values.
    F32(Vec<f32>),
    /// f16 values (their bits: a zeroed allocation stays untouched until written).
    F16(Vec<u16>),
}

impl Cache {
    pub(super) fn new(kv: KvFormat, size: usize) -> Cache {
        match kv {
            KvFormat::F32 => Cache::F32(vec![0.0; size]),
            KvFormat::F16 => Cache::F16(vec![0; size]),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Cache::Empty)
    }

    /// Stores `values` at `at`.
    pub(super) fn store(&mut self, at: usize, values: &[f32]) {
        match self {
            Cache::Empty => {}
            Cache::F32(c) => copy::copy_values(&mut c[at..at + values.len()], values),
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
    /// `len` values from `at` of an f32 cache as they lie (`None` for an f16 or empty one).
    pub(super) fn f32_run(&self, at: usize, len: usize) -> Option<&[f32]> {
        match self {
            Cache::F32(c) => c.get(at..at + len),
            _ => None,
        }
    }

    pub(super) fn read<'a>(&'a self, at: usize, buf: &'a mut [f32]) -> &'a [f32] {
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

/// One sequence slot: its keys, values and cached length.
#[derive(Debug, Default)]
pub(super) struct Slot {
    pub(super) k: Cache,
    pub(super) v: Cache,
    pub(super) len: usize,
}

/// Where each block's part of a slot's cache lies and how many positions it holds.
#[derive(Debug, Clone, Default)]
pub(super) struct Layout {
    /// Per block: the offset of its first value and its positions.
    blocks: Vec<(usize, usize)>,
    /// Values per slot (keys or values alone).
    pub(super) size: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl Layout {
    /// A layout for blocks holding `positions[l]` positions each.
    pub(super) fn new(
        positions: impl Iterator<Item = usize>,
        kv_heads: usize,
        hd: usize,
    ) -> Layout {
        let mut at = 0;
        let blocks = positions
            .map(|cap| {
                let b = (at, cap);
                at += kv_heads * cap * hd;
                b
            })
            .collect();
        Layout { blocks, size: at, kv_heads, head_dim: hd }
    }

    /// Positions block `l` holds.
    pub(super) fn positions(&self, l: usize) -> usize {
        self.blocks[l].1
    }

    /// Where position `p` of KV head `kh` of block `l` lies.
    pub(super) fn at(&self, l: usize, kh: usize, p: usize) -> usize {
        debug_assert!(kh < self.kv_heads);
        let (base, cap) = self.blocks[l];
        base + (kh * cap + p % cap) * self.head_dim
    }
}

/// A run of a slot's cached positions copied out of its caches: for every block and KV
/// head, the run's keys and values as the caches keep them (f32 or f16). A prompt-cache
/// store keeps these and copies them back into any slot at the same positions.
#[derive(Debug)]
pub struct KvBlock {
    start: usize,
    positions: usize,
    k: Cache,
    v: Cache,
}

impl KvBlock {
    /// Bytes it holds.
    pub fn bytes(&self) -> usize {
        let len = |c: &Cache| match c {
            Cache::Empty => 0,
            Cache::F32(v) => 4 * v.len(),
            Cache::F16(v) => 2 * v.len(),
        };
        len(&self.k) + len(&self.v)
    }

    /// Positions it holds.
    pub fn positions(&self) -> usize {
        self.positions
    }
}

impl Cache {
    fn with_capacity(kv: KvFormat, n: usize) -> Cache {
        match kv {
            KvFormat::F32 => Cache::F32(Vec::with_capacity(n)),
            KvFormat::F16 => Cache::F16(Vec::with_capacity(n)),
        }
    }

    /// Appends the `len` values at `at` to `out` (of the same format).
    fn gather(&self, at: usize, len: usize, out: &mut Cache) {
        match (self, out) {
            (Cache::F32(c), Cache::F32(o)) => copy::extend_values(o, &c[at..at + len]),
            (Cache::F16(c), Cache::F16(o)) => copy::extend_values(o, &c[at..at + len]),
            _ => {}
        }
    }

    /// Writes `from`'s `len` values at `src` to `at`.
    fn scatter(&mut self, at: usize, from: &Cache, src: usize, len: usize) {
        match (self, from) {
            (Cache::F32(c), Cache::F32(f)) => {
                copy::copy_values(&mut c[at..at + len], &f[src..src + len])
            }
            (Cache::F16(c), Cache::F16(f)) => {
                copy::copy_values(&mut c[at..at + len], &f[src..src + len])
            }
            _ => {}
        }
    }
}

impl super::Stage {
    /// Whether every block's cache holds every position of the context (no sliding-window
    /// ring shorter than it): only such caches can be copied out and back by position.
    fn caches_hold_the_context(&self) -> bool {
        (0..self.w.layers.len()).all(|l| self.layout.positions(l) >= self.cfg.max_seq_len)
    }

    /// Copies `slot`'s cached positions `start .. start + len` out of its caches. The slot
    /// must hold them, and no block may keep a ring shorter than the context.
    pub fn save_block(&self, slot: usize, start: usize, len: usize) -> Result<KvBlock, String> {
        let s = self.slots.get(slot).ok_or_else(|| format!("slot {slot} does not exist"))?;
        if s.len < start + len || s.k.is_empty() {
            return Err(format!(
                "slot {slot} holds {} positions, not {start}..{}",
                s.len,
                start + len
            ));
        }
        if !self.caches_hold_the_context() {
            return Err("sliding-window caches are not copied by position".into());
        }
        let hd = self.cfg.head_dim;
        let n = self.w.layers.len() * self.cfg.kv_heads * len * hd;
        let mut k = Cache::with_capacity(self.cfg.kv, n);
        let mut v = Cache::with_capacity(self.cfg.kv, n);
        for l in 0..self.w.layers.len() {
            for kh in 0..self.cfg.kv_heads {
                // A global block's positions lie in one run per KV head.
                let at = self.layout.at(l, kh, start);
                s.k.gather(at, len * hd, &mut k);
                s.v.gather(at, len * hd, &mut v);
            }
        }
        Ok(KvBlock { start, positions: len, k, v })
    }

    /// Copies `block` back into `slot` at the positions it was saved from; the slot must
    /// hold at least the positions before them, and holds the block's end afterwards (what
    /// it held past them is dropped).
    pub fn load_block(&mut self, slot: usize, block: &KvBlock) -> Result<(), String> {
        let (kv, size) = (self.cfg.kv, self.layout.size);
        let hold = self.caches_hold_the_context();
        let end = block.start + block.positions;
        let s = self.slots.get_mut(slot).ok_or_else(|| format!("slot {slot} does not exist"))?;
        if s.len < block.start || end > self.cfg.max_seq_len || !hold {
            return Err(format!(
                "slot {slot} holds {} positions, a block starts at {}",
                s.len, block.start
            ));
        }
        if s.k.is_empty() {
            s.k = Cache::new(kv, size);
            s.v = Cache::new(kv, size);
        }
        let hd = self.cfg.head_dim;
        let run = block.positions * hd;
        let mut src = 0;
        for l in 0..self.w.layers.len() {
            for kh in 0..self.cfg.kv_heads {
                let at = self.layout.at(l, kh, block.start);
                s.k.scatter(at, &block.k, src, run);
                s.v.scatter(at, &block.v, src, run);
                src += run;
            }
        }
        s.len = end;
        Ok(())
    }
}
