//! Verifying a draft (pure): which drafted tokens the target model accepts, and the token
//! that follows them. Row `i` of a verifying entry is fed token `i` (row 0 the sequence's
//! last accepted token, rows `1..=k` the draft), so the target's choice at row `i` is
//! checked against draft token `i`.
//!
//! - **Greedy**: the longest prefix of the draft equal to the target's argmax at each row,
//!   then the target's argmax after it: exactly what decoding one token at a time gives.
//! - **Sampling** (temperature > 0): the standard rule (Leviathan et al., Chen et al.):
//!   draft token `x` at row `i` is kept with probability `min(1, p_i(x) / q_i(x))`; at the
//!   first rejection the next token is drawn from `max(p_i - q_i, 0)` normalized; when
//!   every draft token is kept, one more is drawn from `p_k`. The output is distributed
//!   exactly as the target's. The n-gram drafter is deterministic: `q_i` is all on `x`.
//!
//! Random numbers come in from the caller (uniform in `[0, 1)`): nothing here draws them.

/// What a verification decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Draft tokens accepted (a prefix of the draft).
    pub accepted: usize,
    /// The tokens the sequence takes: the accepted drafts, then the target's own token.
    pub tokens: Vec<u32>,
}

/// Greedy verification: `target[i]` is the target's argmax at row `i` (`draft.len() + 1`
/// rows). `None` when `target` has fewer rows.
pub fn accept_greedy(draft: &[u32], target: &[u32]) -> Option<Verdict> {
    if target.len() <= draft.len() {
        return None;
    }
    let accepted = draft.iter().zip(target).take_while(|(d, t)| d == t).count();
    let mut tokens = draft[..accepted].to_vec();
    tokens.push(target[accepted]);
    Some(Verdict { accepted, tokens })
}

/// A draft token's distribution: a point mass (the n-gram drafter) or a draft model's
/// probabilities at that row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DraftDist<'a> {
    /// All the probability on the drafted token.
    Point,
    /// The draft model's probabilities over the vocabulary.
    Probs(&'a [f32]),
}

/// Sampling verification. `p[i]` is the target's distribution at row `i` (after the
/// request's temperature, top-k and top-p; `draft.len() + 1` rows), `q[i]` the draft's at
/// row `i` for each draft token, `uniform` yields numbers in `[0, 1)`. `None` when the
/// rows do not match the draft.
pub fn accept_sampled(
    draft: &[u32],
    p: &[&[f32]],
    q: &[DraftDist<'_>],
    uniform: &mut dyn FnMut() -> f64,
) -> Option<Verdict> {
    if p.len() <= draft.len() || q.len() < draft.len() {
        return None;
    }
    let mut tokens = Vec::with_capacity(draft.len() + 1);
    for (i, &x) in draft.iter().enumerate() {
        let pi = p[i];
        let px = f64::from(*pi.get(x as usize)?);
        let qx = match q[i] {
            DraftDist::Point => 1.0,
            DraftDist::Probs(qi) => f64::from(*qi.get(x as usize)?),
        };
        let keep = if qx <= 0.0 { 1.0 } else { (px / qx).min(1.0) };
        if uniform() < keep {
            tokens.push(x);
            continue;
        }
        // Rejected: draw from the residual max(p - q, 0).
        let residual: Vec<f64> = match q[i] {
            DraftDist::Point => pi
                .iter()
                .enumerate()
                .map(|(t, &v)| if t == x as usize { 0.0 } else { f64::from(v) })
                .collect(),
            DraftDist::Probs(qi) => pi
                .iter()
                .zip(qi.iter().chain(std::iter::repeat(&0.0)))
                .map(|(&a, &b)| (f64::from(a) - f64::from(b)).max(0.0))
                .collect(),
        };
        tokens.push(draw(&residual, uniform()).or_else(|| draw_f32(pi, uniform()))?);
        return Some(Verdict { accepted: i, tokens });
    }
    let last = p[draft.len()];
    tokens.push(draw_f32(last, uniform())?);
    Some(Verdict { accepted: draft.len(), tokens })
}

/// Index drawn from unnormalized weights `w` with `u` in `[0, 1)`; `None` when they sum to 0.
fn draw(w: &[f64], u: f64) -> Option<u32> {
    let total: f64 = w.iter().sum();
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    let mut acc = 0.0;
    let target = u * total;
    let mut last = None;
    for (t, &v) in w.iter().enumerate() {
        if v > 0.0 {
            acc += v;
            last = Some(t as u32);
            if target < acc {
                return last;
            }
        }
    }
    last
}

fn draw_f32(w: &[f32], u: f64) -> Option<u32> {
    draw(&w.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn greedy_keeps_the_agreeing_prefix_and_adds_the_targets_next_token() {
        let v = accept_greedy(&[5, 6, 7], &[5, 6, 9, 1]).unwrap();
        assert_eq!(v, Verdict { accepted: 2, tokens: vec![5, 6, 9] });
        let v = accept_greedy(&[5, 6], &[5, 6, 8]).unwrap();
        assert_eq!(v, Verdict { accepted: 2, tokens: vec![5, 6, 8] });
        let v = accept_greedy(&[], &[3]).unwrap();
        assert_eq!(v, Verdict { accepted: 0, tokens: vec![3] });
        assert_eq!(accept_greedy(&[1, 2], &[1, 2]), None, "a row short");
    }

    /// The first token out of a verification, over many trials, against the target's
    /// distribution: the largest absolute difference of frequencies. With a draft model
    /// (`q`) the draft token is drawn from `q` each trial, as the draft model would;
    /// without, it is always `draft_tok` (the n-gram drafter is deterministic).
    fn first_token_error(draft_tok: u32, q: Option<Vec<f32>>, seed: u64) -> f64 {
        let p0 = vec![0.1f32, 0.2, 0.3, 0.4];
        let p1 = vec![0.25f32, 0.25, 0.25, 0.25];
        let mut rng = StdRng::seed_from_u64(seed);
        let trials = 200_000;
        let mut counts = [0u32; 4];
        for _ in 0..trials {
            let mut u = || rng.random::<f64>();
            let (dist, tok) = match &q {
                None => (DraftDist::Point, draft_tok),
                Some(q) => {
                    let w: Vec<f64> = q.iter().map(|&v| f64::from(v)).collect();
                    (DraftDist::Probs(q), draw(&w, u()).unwrap())
                }
            };
            let v = accept_sampled(&[tok], &[&p0, &p1], &[dist], &mut u).unwrap();
            counts[v.tokens[0] as usize] += 1;
        }
        counts
            .iter()
            .zip(&p0)
            .map(|(&c, &p)| (f64::from(c) / f64::from(trials) - f64::from(p)).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn sampling_verification_leaves_the_targets_distribution_exact_for_a_point_draft() {
        // 200k trials: a frequency's standard error is about 0.001; 0.005 is five of them.
        for (tok, seed) in [(0u32, 1u64), (3, 2), (1, 3)] {
            let err = first_token_error(tok, None, seed);
            assert!(err < 0.005, "draft {tok}: off by {err}");
        }
    }

    #[test]
    fn sampling_verification_leaves_the_targets_distribution_exact_for_a_draft_model() {
        // A draft model that over-proposes token 0.
        let q = vec![0.7f32, 0.1, 0.1, 0.1];
        let err = first_token_error(0, Some(q), 4);
        assert!(err < 0.005, "off by {err}");
    }

    #[test]
    fn every_draft_kept_draws_one_more_from_the_last_row() {
        let p0 = [0.0f32, 1.0];
        let p1 = [1.0f32, 0.0];
        let mut u = || 0.5;
        let v = accept_sampled(&[1], &[&p0, &p1], &[DraftDist::Point], &mut u).unwrap();
        assert_eq!(v, Verdict { accepted: 1, tokens: vec![1, 0] });
    }

    #[test]
    fn mismatched_rows_are_refused() {
        let p0 = [1.0f32];
        let mut u = || 0.5;
        assert_eq!(accept_sampled(&[0], &[&p0], &[DraftDist::Point], &mut u), None);
        assert_eq!(accept_sampled(&[7], &[&p0, &p0], &[DraftDist::Point], &mut u), None);
    }
}
