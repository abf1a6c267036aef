//! Token selection on the last stage: greedy, or temperature / top-k / top-p sampling whose
//! random draw is a pure function of the seed and the position of the token drawn (no
//! running generator): the same seed gives the same tokens, and a sequence replayed up to
//! a position continues exactly as it would have (what resuming after a fault needs).

use crate::wire::SamplingPolicy;

/// Picks tokens from logits according to a [`SamplingPolicy`].
#[derive(Debug, Clone)]
pub struct Sampler {
    policy: SamplingPolicy,
    key: u64,
}

impl Sampler {
    /// A sampler for `policy` (its seed keys every draw). A temperature of 0 samples
    /// greedily.
    pub fn new(policy: SamplingPolicy) -> Sampler {
        let policy = policy.normalized();
        let key = match policy {
            SamplingPolicy::Greedy => 0,
            SamplingPolicy::Sample { seed, .. } => seed ^ 0x5DEE_CE66_D1CE_4E5B,
        };
        Sampler { policy, key }
    }

    /// The uniform draw in `[0, 1)` for the token at `position`: splitmix64's output for
    /// the seed's key and the position, nothing else.
    fn draw(&self, position: u32) -> f64 {
        let mut z = (self.key ^ u64::from(position).wrapping_mul(0xD1B5_4A32_D192_ED03))
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The token for these logits at sequence position `position` (where the token will
    /// stand: the prompt's length for the first generated token). Non-finite logits are
    /// never chosen.
    pub fn sample(&self, logits: &[f32], position: u32) -> u32 {
        match self.policy {
            SamplingPolicy::Greedy => argmax(logits),
            SamplingPolicy::Sample { temperature, top_k, top_p, .. } => {
                let mut cand: Vec<(u32, f32)> = logits
                    .iter()
                    .enumerate()
                    .filter(|(_, l)| l.is_finite())
                    .map(|(i, &l)| (i as u32, l))
                    .collect();
                if cand.is_empty() {
                    return 0;
                }
                // Highest first; ties by id so the order is deterministic.
                cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                if let Some(k) = top_k {
                    cand.truncate((k as usize).max(1));
                }
                let max = cand[0].1;
                let mut probs: Vec<f64> =
                    cand.iter().map(|(_, l)| (((l - max) / temperature) as f64).exp()).collect();
                let sum: f64 = probs.iter().sum();
                probs.iter_mut().for_each(|p| *p /= sum);
                if let Some(p) = top_p {
                    let mut acc = 0.0;
                    let mut keep = probs.len();
                    for (i, q) in probs.iter().enumerate() {
                        acc += q;
                        if acc >= f64::from(p) {
                            keep = i + 1;
                            break;
                        }
                    }
                    probs.truncate(keep);
                    let s: f64 = probs.iter().sum();
                    probs.iter_mut().for_each(|q| *q /= s);
                }
                let mut r = self.draw(position);
                for (i, q) in probs.iter().enumerate() {
                    if r < *q {
                        return cand[i].0;
                    }
                    r -= q;
                }
                cand[probs.len() - 1].0
            }
        }
    }
}

/// Index of the largest finite value (the first one on ties).
pub fn argmax(values: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in values.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_is_a_function_of_the_seed_and_the_position_alone() {
        let logits: Vec<f32> = (0..64).map(|i| ((i * 37) % 23) as f32 / 4.0).collect();
        let policy = SamplingPolicy::Sample { temperature: 1.2, top_k: None, top_p: None, seed: 9 };
        let (a, b) = (Sampler::new(policy), Sampler::new(policy));
        let stream: Vec<u32> = (100..140).map(|p| a.sample(&logits, p)).collect();
        // A fresh sampler resumed at position 120 continues exactly where the stream is.
        let resumed: Vec<u32> = (120..140).map(|p| b.sample(&logits, p)).collect();
        assert_eq!(resumed, stream[20..]);
        assert!(stream.iter().collect::<std::collections::BTreeSet<_>>().len() > 5, "it varies");
    }
}
