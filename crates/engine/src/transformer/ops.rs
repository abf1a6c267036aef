//! The element-wise pieces of a block: RMSNorm, the two rope pairings, softmax, a fixed
//! order dot product.

/// How rope pairs the dimensions of a head.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RopeStyle {
    /// Pairs `(2i, 2i + 1)` turned by angle `i` (llama.cpp's "normal" rope, `llama`).
    #[default]
    Interleaved,
    /// Pairs `(i, i + d/2)` turned by angle `i` (llama.cpp's "neox" rope: Qwen, Gemma).
    Halves,
}

/// `out = x / sqrt(mean(x^2) + eps) * w` (candle's order of operations).
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let sum2: f32 = x.iter().map(|&v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for ((o, &v), &w) in out.iter_mut().zip(x).zip(w) {
        *o = v / m * w;
    }
}

/// [`rms_norm`] in place.
pub fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let sum2: f32 = x.iter().map(|&v| v * v).sum();
    let m = (sum2 / x.len() as f32 + eps).sqrt();
    for (v, &w) in x.iter_mut().zip(w) {
        *v = *v / m * w;
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

/// The neox rotary embedding on one head: pairs `(i, i + d/2)` turned by angle `i`.
pub fn rope_halves(x: &mut [f32], cos: &[f32], sin: &[f32]) {
    let half = x.len() / 2;
    let (lo, hi) = x.split_at_mut(half);
    for (((a, b), &c), &s) in lo.iter_mut().zip(hi.iter_mut()).zip(cos).zip(sin) {
        let (x0, x1) = (*a, *b);
        *a = x0 * c - x1 * s;
        *b = x0 * s + x1 * c;
    }
}

/// Rope of `style` on one head.
pub fn rope_style(style: RopeStyle, x: &mut [f32], cos: &[f32], sin: &[f32]) {
    match style {
        RopeStyle::Interleaved => rope(x, cos, sin),
        RopeStyle::Halves => rope_halves(x, cos, sin),
    }
}

/// Softmax in place over `x` and a sink logit that joins the sum but takes no weight
/// (gpt-oss's attention sinks; GGML's `soft_max` with sinks): `e^(x - m) / (sum +
/// e^(sink - m))` with `m` the largest of both.
pub fn softmax_with_sink(x: &mut [f32], sink: f32) {
    let max = x.iter().fold(sink, |m, &v| m.max(v));
    let mut sum = exp_shifted(x, max);
    let mut sink = [sink];
    sum += exp_shifted(&mut sink, max);
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// `x[i] = e^(x[i] - shift)` in place (eight lanes at a time where the CPU has AVX2, each
/// value computed the same way wherever it sits); returns their sum.
fn exp_shifted(x: &mut [f32], shift: f32) -> f32 {
    if let Some(sum) = crate::simd::exp_shifted(x, shift) {
        return sum;
    }
    let mut sum = 0f32;
    for v in x.iter_mut() {
        *v = (*v - shift).exp();
        sum += *v;
    }
    sum
}

/// Softmax in place: `e^(x - max) / sum`.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let sum = exp_shifted(x, max);
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// A dot product: 8-wide FMA where the CPU has AVX2, else eight partial sums (either way
/// the order is fixed for a given length on a given CPU).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    if let Some(s) = crate::simd::dot_f32(a, b) {
        return s;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_rope_pairings_turn_the_same_pairs_by_the_same_angles() {
        let (cos, sin) = ([0.6f32, 1.0], [0.8f32, 0.0]);
        let mut a = [1.0, 2.0, 3.0, 4.0];
        rope(&mut a, &cos, &sin);
        assert_eq!(a, [1.0 * 0.6 - 2.0 * 0.8, 1.0 * 0.8 + 2.0 * 0.6, 3.0, 4.0]);
        // The same pairs laid out as halves: (x0, x2) and (x1, x3).
        let mut b = [1.0, 3.0, 2.0, 4.0];
        rope_halves(&mut b, &cos, &sin);
        assert_eq!(b, [a[0], a[2], a[1], a[3]]);
    }
}
