//! The shape check a stage's weights pass before it computes.

use super::{Config, FeedForward, Weights};
use crate::matmul::Matrix;

/// Checks every matrix and vector of `w` against the shape `c` describes.
pub(super) fn check_shapes(c: &Config, w: &Weights) -> Result<(), String> {
    let hd = c.head_dim;
    if c.heads == 0
        || c.kv_heads == 0
        || !c.heads.is_multiple_of(c.kv_heads)
        || !hd.is_multiple_of(2)
        || hd == 0
    {
        return Err(format!("{} heads over {} KV heads of {hd}", c.heads, c.kv_heads));
    }
    if c.max_seq_len == 0 {
        return Err("max_seq_len is 0".into());
    }
    if c.arch.window > 0
        && w.layers.iter().any(|l| l.sliding)
        && c.arch.window_cap < c.max_seq_len
        && c.arch.window_cap <= c.arch.window
    {
        return Err(format!(
            "a sliding block's ring of {} positions cannot hold a window of {}",
            c.arch.window_cap, c.arch.window
        ));
    }
    let want = |m: &Matrix, rows: usize, cols: usize, name: &str| {
        if m.rows() == rows && m.cols() == cols {
            Ok(())
        } else {
            Err(format!("{name} is {} x {}, expected {rows} x {cols}", m.rows(), m.cols()))
        }
    };
    let len = |v: &Option<Vec<f32>>, n: usize, name: String| match v {
        Some(v) if v.len() != n => Err(format!("{name} has {} values, expected {n}", v.len())),
        _ => Ok(()),
    };
    let (d, qd, kd) = (c.hidden, c.heads * hd, c.kv_heads * hd);
    for (i, l) in w.layers.iter().enumerate() {
        let n = |s: &str| format!("block {i} {s}");
        want(&l.wq, qd, d, &n("attn_q"))?;
        want(&l.wk, kd, d, &n("attn_k"))?;
        want(&l.wv, kd, d, &n("attn_v"))?;
        want(&l.wo, d, qd, &n("attn_output"))?;
        match &l.ffn {
            FeedForward::Dense { gate, up, down } => {
                want(gate, c.ffn, d, &n("ffn_gate"))?;
                want(up, c.ffn, d, &n("ffn_up"))?;
                want(down, d, c.ffn, &n("ffn_down"))?;
            }
            FeedForward::Experts(x) => x.check(d).map_err(|e| n(&e))?,
        }
        if l.attn_norm.len() != d || l.ffn_norm.len() != d {
            return Err(n("norm has the wrong length"));
        }
        let x = &l.extra;
        len(&x.q_bias, qd, n("attn_q.bias"))?;
        len(&x.k_bias, kd, n("attn_k.bias"))?;
        len(&x.v_bias, kd, n("attn_v.bias"))?;
        len(&x.q_norm, hd, n("attn_q_norm"))?;
        len(&x.k_norm, hd, n("attn_k_norm"))?;
        len(&x.post_attn_norm, d, n("post_attention_norm"))?;
        len(&x.post_ffn_norm, d, n("post_ffw_norm"))?;
    }
    len(&w.rope_factors, hd / 2, "rope_freqs".into())?;
    if let Some(e) = &w.embedding {
        want(e, c.vocab, d, "token_embd")?;
    }
    if let Some(h) = &w.head {
        want(h, c.vocab, d, "output")?;
    }
    if w.norm.as_ref().is_some_and(|n| n.len() != d) {
        return Err("output_norm has the wrong length".into());
    }
    Ok(())
}
