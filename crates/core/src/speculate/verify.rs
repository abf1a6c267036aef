//! Verifying a draft (pure): which drafted tokens the target model accepts, and the token
//! that follows them. Row `i` of a verifying entry is fed token `i` (row 0 the sequence's
//! last accepted token, rows `1..=k` the draft), so the target's choice at row `i` is
//! checked against draft token `i`.
//!
//! One rule serves greedy and sampled requests alike: keep the longest prefix of the draft
//! equal to the target's token at each row, then the target's token after it. For greedy
//! decoding the target's token is its argmax. For sampling it is what the last stage's
//! sampler drew at that row, and that sampler is keyed by (seed, position): at a row whose
//! prefix equals the plain sequence's, it draws exactly the token plain decoding draws at
//! that position. Every kept token therefore *is* the plain token (not merely distributed
//! like it), so the output equals decoding one token at a time, token for token. The
//! rejection-sampling rule of Leviathan et al. is not needed: it makes the output
//! distributed like the target's, a weaker promise than this one, and only pays for drafts
//! with a distribution of their own, which swactor's drafters (the n-gram lookup and a
//! greedy draft model) do not have.

/// What a verification decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Draft tokens accepted (a prefix of the draft).
    pub accepted: usize,
    /// The tokens the sequence takes: the accepted drafts, then the target's own token.
    pub tokens: Vec<u32>,
}

/// Verification: `target[i]` is the target's token at row `i` (its argmax, or its
/// position-keyed sample; `draft.len() + 1` rows). `None` when `target` has fewer rows.
pub fn accept_greedy(draft: &[u32], target: &[u32]) -> Option<Verdict> {
    if target.len() <= draft.len() {
        return None;
    }
    let accepted = draft.iter().zip(target).take_while(|(d, t)| d == t).count();
    let mut tokens = draft[..accepted].to_vec();
    tokens.push(target[accepted]);
    Some(Verdict { accepted, tokens })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
