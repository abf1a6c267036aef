//! Speculative decoding's pure parts (SERVING.md, speculation): drafting from a
//! sequence's own history ([`ngram`]), verifying a draft exactly ([`verify`]), and the
//! per-sequence draft length that follows measured acceptance ([`adapt`]). No clock, no
//! randomness of its own, no IO: the caller feeds tokens, probabilities and uniform
//! numbers.
//!
//! [`Draft`] is where a session's drafts come from: the n-gram lookup here, or a draft
//! model the orchestrator's process runs (the engine, outside this crate). Whatever a
//! drafter proposes, the output is the target's own: a draft only decides how many of
//! the target's tokens one trip yields.

pub mod adapt;
pub mod ngram;
pub mod verify;

/// One sequence's ask for a draft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DraftAsk<'a> {
    /// The slot the sequence holds (a drafter with caches keeps one per slot, and finds
    /// by the history what of it still holds).
    pub slot: u16,
    /// The sequence's tokens so far: its prompt, then its output.
    pub history: &'a [u32],
    /// Tokens wanted at most.
    pub k: usize,
}

/// A source of drafts for a session's sequences.
pub trait Draft: std::fmt::Debug + Send {
    /// For each ask, in order, up to its `k` tokens to follow its history (fewer, or
    /// none, where it has no guess). A drafter that fails drafts nothing: speculation
    /// only ever saves trips.
    fn draft(&mut self, asks: &[DraftAsk<'_>]) -> Vec<Vec<u32>>;

    /// One drafted token's own cost relative to a decode step of the target (0 for a
    /// lookup; a draft model's share of the target's weights).
    fn step_cost(&self) -> f64 {
        0.0
    }

    /// Its measured time per drafted token, catching up included (`None`: not measured;
    /// the caller then goes by [`Draft::step_cost`]). Over a measured trip's time it is
    /// the drafter's true share of a trip.
    fn seconds_per_token(&self) -> Option<f64> {
        None
    }

    /// The sequence in `slot` holds `history` (its whole prompt, now on its way through
    /// the target): a drafter with caches catches up now, while the target computes,
    /// rather than at the first ask. Nothing by default.
    fn warm(&mut self, slot: u16, history: &[u32]) {
        let _ = (slot, history);
    }
}

/// One drafted token's cost relative to a trip of `trip_seconds` (`None`: not measured
/// yet): the drafter's measured time where both are known, else its own estimate.
pub fn draft_cost(drafter: &dyn Draft, trip_seconds: Option<f64>) -> f64 {
    match (drafter.seconds_per_token(), trip_seconds) {
        (Some(d), Some(t)) if t > 0.0 => (d / t).clamp(0.0, 4.0),
        _ => drafter.step_cost(),
    }
}

impl Draft for ngram::NgramDrafter {
    fn draft(&mut self, asks: &[DraftAsk<'_>]) -> Vec<Vec<u32>> {
        asks.iter().map(|a| ngram::NgramDrafter::draft(self, a.history, a.k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Timed(Option<f64>);

    impl Draft for Timed {
        fn draft(&mut self, asks: &[DraftAsk<'_>]) -> Vec<Vec<u32>> {
            vec![Vec::new(); asks.len()]
        }
        fn step_cost(&self) -> f64 {
            0.4
        }
        fn seconds_per_token(&self) -> Option<f64> {
            self.0
        }
    }

    #[test]
    fn a_drafters_cost_is_its_measured_share_of_a_trip_and_its_estimate_until_measured() {
        assert_eq!(draft_cost(&Timed(None), Some(0.05)), 0.4);
        assert_eq!(draft_cost(&Timed(Some(0.01)), None), 0.4);
        assert!((draft_cost(&Timed(Some(0.01)), Some(0.05)) - 0.2).abs() < 1e-12);
        assert_eq!(draft_cost(&Timed(Some(1.0)), Some(0.01)), 4.0, "bounded");
        assert_eq!(draft_cost(&ngram::NgramDrafter::default(), Some(0.05)), 0.0);
    }
}
