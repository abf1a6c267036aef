//! Moving a batch's rows between the products' transposed layout (`[output][row]`) and the
//! residual's (`[row][value]`), spread over the pool: the transposes read and write in
//! tiles of [`TILE`] x [`TILE`] so that each cache line is fetched once per tile, not once
//! per value, and the per-row norms run a share of the rows on each thread.
//!
//! Every value is computed by the same operations in the same order whatever the batch or
//! the thread count (a row's sums run over its own values in index order), so results
//! stay batch-invariant.

use super::ops::rms_norm;
use crate::kernels::Acts;
use crate::pool::ThreadPool;

/// Rows and columns of one transposed tile.
pub(super) const TILE: usize = 16;

/// `dst[i][o] = t[o][i]` for `n` rows of `d` values (`t` holds `d x n` values).
pub(super) fn transpose(pool: &ThreadPool, t: &[f32], n: usize, d: usize, dst: &mut [f32]) {
    transpose_rows(pool, t, n, 0..n, d, dst);
}

/// [`transpose`] of rows `rows` only: `dst[i - rows.start][o] = t[o][i]`, the first `d`
/// outputs of each.
pub(super) fn transpose_rows(
    pool: &ThreadPool,
    t: &[f32],
    n: usize,
    rows: std::ops::Range<usize>,
    d: usize,
    dst: &mut [f32],
) {
    let m = rows.len();
    assert!(rows.end <= n && t.len() >= n * d && dst.len() >= m * d);
    let per = pool.batch_rows_per_task(m, d, TILE);
    pool.for_each_chunk(&mut dst[..m * d], per * d, &|c, chunk| {
        let i0 = rows.start + c * per;
        for_tiles(chunk.len() / d, d, |tile, cols| {
            for o in cols {
                let src = &t[o * n + i0 + tile.start..o * n + i0 + tile.end];
                for (k, &v) in src.iter().enumerate() {
                    chunk[(tile.start + k) * d + o] = v;
                }
            }
        });
    });
}

/// Calls `f(i, row)` for each `d`-wide row of `data`, a share of the rows on each thread.
pub(super) fn for_each_row(
    pool: &ThreadPool,
    data: &mut [f32],
    d: usize,
    f: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    let n = data.len() / d;
    let per = pool.batch_rows_per_task(n, d, TILE);
    pool.for_each_chunk(&mut data[..n * d], per * d, &|c, chunk| {
        for (k, row) in chunk.chunks_exact_mut(d).enumerate() {
            f(c * per + k, row);
        }
    });
}

/// `x[i][j] += t[j][i]` for `n` rows of `d` values; with `norm = (w, eps)` each row of
/// `t` is RMS-normalized by `w` first (a post-norm). A row's sum of squares runs over its
/// values in index order, as [`rms_norm`]'s does.
pub(super) fn add_transposed(
    pool: &ThreadPool,
    x: &mut [f32],
    t: &[f32],
    n: usize,
    d: usize,
    norm: Option<(&[f32], f32)>,
) {
    assert!(x.len() >= n * d && t.len() >= n * d);
    let per = pool.batch_rows_per_task(n, d, TILE);
    pool.for_each_chunk(&mut x[..n * d], per * d, &|c, chunk| {
        let i0 = c * per;
        let rows = chunk.len() / d;
        // A block of rows at a time: its scales, then its tiles.
        for b0 in (0..rows).step_by(BLOCK) {
            let b1 = (b0 + BLOCK).min(rows);
            let mut scale = [1f32; BLOCK];
            if let Some((_, eps)) = norm {
                let mut sum2 = [0f32; BLOCK];
                for j in 0..d {
                    let src = &t[j * n + i0 + b0..j * n + i0 + b1];
                    for (s, &v) in sum2.iter_mut().zip(src) {
                        *s += v * v;
                    }
                }
                for (m, s) in scale.iter_mut().zip(sum2) {
                    *m = (s / d as f32 + eps).sqrt();
                }
            }
            let block = &mut chunk[b0 * d..b1 * d];
            for_tiles(b1 - b0, d, |rows, cols| {
                for o in cols {
                    let src = &t[o * n + i0 + b0 + rows.start..o * n + i0 + b0 + rows.end];
                    for (k, &v) in src.iter().enumerate() {
                        let r = rows.start + k;
                        block[r * d + o] += match norm {
                            None => v,
                            Some((w, _)) => v / scale[r] * w[o],
                        };
                    }
                }
            });
        }
    });
}

/// Rows per block of [`add_transposed`]'s norms.
const BLOCK: usize = 64;

/// `acts`' f32 rows become the `n` rows of `x` (each `d` wide) normalized by `w`, a share
/// of the rows on each thread; not yet quantized.
pub(super) fn norm_rows(
    pool: &ThreadPool,
    acts: &mut Acts,
    x: &[f32],
    w: &[f32],
    eps: f32,
    n: usize,
    d: usize,
) {
    acts.f32.resize(n * d, 0.0);
    for_each_row(pool, &mut acts.f32[..n * d], d, &|i, out| {
        rms_norm(&x[i * d..(i + 1) * d], w, eps, out);
    });
    acts.cols = d;
    acts.rows = n;
}

/// Calls `f(rows, cols)` for each tile of a `rows x cols` grid, row tiles outermost.
fn for_tiles(
    rows: usize,
    cols: usize,
    mut f: impl FnMut(std::ops::Range<usize>, std::ops::Range<usize>),
) {
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            f(r0..(r0 + TILE).min(rows), c0..(c0 + TILE).min(cols));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simd::test_values as values;

    /// The plain one-row-at-a-time form the tiled one must equal bit for bit.
    fn reference(x: &mut [f32], t: &[f32], n: usize, d: usize, norm: Option<(&[f32], f32)>) {
        for i in 0..n {
            let mut row: Vec<f32> = (0..d).map(|j| t[j * n + i]).collect();
            if let Some((w, eps)) = norm {
                super::super::ops::rms_norm_in_place(&mut row, w, eps);
            }
            for (x, r) in x[i * d..(i + 1) * d].iter_mut().zip(&row) {
                *x += r;
            }
        }
    }

    #[test]
    fn a_post_norm_normalizes_each_row_before_it_joins_the_residual() {
        let pool = ThreadPool::new(1);
        let mut x = vec![0.0; 4];
        // Two rows of two, transposed: row 0 = (3, 4), row 1 = (1, 1).
        let t = [3.0, 1.0, 4.0, 1.0];
        add_transposed(&pool, &mut x, &t, 2, 2, Some((&[1.0, 1.0], 0.0)));
        let r = (12.5f32).sqrt();
        assert_eq!(x, vec![3.0 / r, 4.0 / r, 1.0, 1.0]);
    }

    #[test]
    fn tiled_transposes_and_adds_give_the_bits_of_one_row_at_a_time_at_any_thread_count() {
        for threads in [1, 2, 3] {
            let pool = ThreadPool::new(threads);
            for (n, d) in [(1, 48), (5, 33), (130, 520), (600, 130)] {
                let t = values(n * d, 7);
                let mut want = vec![0f32; n * d];
                for i in 0..n {
                    for o in 0..d {
                        want[i * d + o] = t[o * n + i];
                    }
                }
                let mut got = vec![f32::NAN; n * d];
                transpose(&pool, &t, n, d, &mut got);
                assert_eq!(got, want, "transpose {n} x {d} at {threads} threads");
                let w = values(d, 9);
                for norm in [None, Some((&w[..], 1e-5))] {
                    let base = values(n * d, 3);
                    let (mut want, mut got) = (base.clone(), base);
                    reference(&mut want, &t, n, d, norm);
                    add_transposed(&pool, &mut got, &t, n, d, norm);
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "add {n} x {d} norm {}", norm.is_some());
                }
            }
        }
    }
}
