//! A stage's KV caches: per sequence slot, per block, per KV head, a run of positions. A
//! global block keeps every position; a sliding-window block keeps a ring of
//! `window_cap` positions (position `p` at `p % window_cap`).

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
