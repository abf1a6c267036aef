//! Token selection on the last stage: greedy, or temperature / top-k / top-p sampling with
//! a seeded generator (the same seed always gives the same tokens).

use crate::wire::SamplingPolicy;

/// Picks tokens from logits according to a [`SamplingPolicy`].
#[derive(Debug, Clone)]
pub struct Sampler {
    policy: SamplingPolicy,
    state: u64,
}

impl Sampler {
    /// A sampler for `policy` (its seed starts the random stream). A temperature of 0
    /// samples greedily.
    pub fn new(policy: SamplingPolicy) -> Sampler {
        let policy = policy.normalized();
        let state = match policy {
            SamplingPolicy::Greedy => 0,
            SamplingPolicy::Sample { seed, .. } => seed ^ 0x5DEE_CE66_D1CE_4E5B,
        };
        Sampler { policy, state }
    }

    fn next_f64(&mut self) -> f64 {
        // splitmix64
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next token for these logits (non-finite logits are never chosen).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
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
                let mut r = self.next_f64();
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
