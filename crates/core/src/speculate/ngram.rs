//! The n-gram drafter (no model): the sequence's own prompt and output are the draft
//! source. The last `n` tokens (longest `n` first) are looked up earlier in the sequence;
//! at the most recent earlier occurrence, the tokens that followed it are the draft. Text
//! that repeats or edits its input (a passage to copy, code to refactor) drafts well; free
//! generation rarely matches, and then nothing is drafted.

/// The longest suffix looked up by default.
pub const DEFAULT_MAX_N: usize = 4;
/// The shortest suffix looked up by default (a single token matches too often to pay).
pub const DEFAULT_MIN_N: usize = 2;

/// Proposes draft tokens from a sequence's own history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NgramDrafter {
    min_n: usize,
    max_n: usize,
}

impl Default for NgramDrafter {
    fn default() -> Self {
        NgramDrafter::new(DEFAULT_MIN_N, DEFAULT_MAX_N)
    }
}

impl NgramDrafter {
    /// A drafter matching suffixes of `min_n..=max_n` tokens (each at least 1).
    pub fn new(min_n: usize, max_n: usize) -> NgramDrafter {
        let min_n = min_n.max(1);
        NgramDrafter { min_n, max_n: max_n.max(min_n) }
    }

    /// Up to `k` tokens that followed the most recent earlier occurrence of the longest
    /// matching suffix of `history` (empty when nothing matches or `k` is 0).
    pub fn draft(&self, history: &[u32], k: usize) -> Vec<u32> {
        if k == 0 {
            return Vec::new();
        }
        for n in (self.min_n..=self.max_n).rev() {
            let Some(start) = history.len().checked_sub(n) else { continue };
            let key = &history[start..];
            // The most recent occurrence that ends before the suffix itself starts… or
            // overlaps it: any earlier start `p < start` with a continuation.
            let found = (0..start).rev().find(|&p| &history[p..p + n] == key);
            if let Some(p) = found {
                let from = p + n;
                let to = (from + k).min(history.len());
                return history[from..to].to_vec();
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_repeated_phrase_drafts_what_followed_it_last_time() {
        let d = NgramDrafter::default();
        // "1 2 3 4 5 | 9 | 1 2 3" -> after "2 3" came "4 5 9 1 ..."
        let h = [1, 2, 3, 4, 5, 9, 1, 2, 3];
        assert_eq!(d.draft(&h, 3), vec![4, 5, 9]);
        assert_eq!(d.draft(&h, 1), vec![4]);
        assert_eq!(d.draft(&h, 0), Vec::<u32>::new());
    }

    #[test]
    fn the_longest_suffix_wins_and_then_the_most_recent_occurrence() {
        let d = NgramDrafter::new(1, 3);
        // "7 8" occurs twice before; "6 7 8" only at the start.
        let h = [6, 7, 8, 1, 7, 8, 2, 6, 7, 8];
        assert_eq!(d.draft(&h, 1), vec![1], "the 3-gram 6 7 8 matched first");
        let h = [5, 7, 8, 1, 4, 7, 8, 2, 3, 7, 8];
        assert_eq!(d.draft(&h, 2), vec![2, 3], "the most recent 7 8 was followed by 2 3");
    }

    #[test]
    fn nothing_is_drafted_without_a_match_or_history() {
        let d = NgramDrafter::default();
        assert!(d.draft(&[], 4).is_empty());
        assert!(d.draft(&[1], 4).is_empty());
        assert!(d.draft(&[1, 2, 3, 4, 5, 6], 4).is_empty());
    }

    #[test]
    fn a_repeating_run_drafts_what_followed_its_last_occurrence() {
        let d = NgramDrafter::default();
        // The most recent earlier occurrence of the suffix is one token back: one token
        // follows it.
        assert_eq!(d.draft(&[4, 4, 4], 5), vec![4]);
        assert_eq!(d.draft(&[4, 4, 4, 4, 4], 2), vec![4]);
        assert_eq!(d.draft(&[4, 5, 4, 5, 4, 5], 3), vec![4, 5]);
    }

    proptest! {
        #[test]
        fn every_draft_continues_an_earlier_occurrence_of_the_suffix(
            h in proptest::collection::vec(0u32..4, 0..40), k in 0usize..6
        ) {
            let d = NgramDrafter::new(2, 4);
            let draft = d.draft(&h, k);
            prop_assert!(draft.len() <= k);
            if !draft.is_empty() {
                // Some n in 2..=4 and earlier p: h[p..p+n] is the suffix and the draft
                // is what follows it.
                let ok = (2..=4usize).any(|n| {
                    h.len() >= n && (0..h.len() - n).any(|p| {
                        h[p..p + n] == h[h.len() - n..]
                            && h[p + n..].starts_with(&draft)
                    })
                });
                prop_assert!(ok);
            }
        }
    }
}
