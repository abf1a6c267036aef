//! Speculative decoding's pure parts (SERVING.md, speculation): drafting from a
//! sequence's own history ([`ngram`]), verifying a draft exactly ([`verify`]), and the
//! per-sequence draft length that follows measured acceptance ([`adapt`]). No clock, no
//! randomness of its own, no IO: the caller feeds tokens, probabilities and uniform
//! numbers.
//!
//! Drafting as data: a session drafts by the n-gram lookup itself (pure and cheap), or
//! asks a drafter outside the core (a draft model its driver runs on a thread of its
//! own) with a [`DraftJob`], and takes the [`DraftAnswer`] back as an input. Whatever a
//! drafter proposes, the output is the target's own: a draft only decides how many of
//! the target's tokens one trip yields.

use crate::wire::RunId;

pub mod adapt;
pub mod ngram;
pub mod verify;

/// One sequence's ask for a draft.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftAsk {
    /// The slot the sequence holds (a drafter with caches keeps one per slot, and finds
    /// by the history what of it still holds).
    pub slot: u16,
    /// The sequence's tokens so far: its prompt, then its output.
    pub history: Vec<u32>,
    /// Tokens wanted at most.
    pub k: usize,
}

/// Names one draft request: the run that asked, and the ask's number within it (an
/// answer for another run, or for an ask the session no longer waits for, is stale).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AskId {
    /// The run (a session re-formed runs under a new id).
    pub run: RunId,
    /// The ask's number in the run, increasing from 0.
    pub number: u64,
}

/// A session's ask for drafts: every drafting sequence of one micro-batch at once (a
/// draft model steps them as one batch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftRequest {
    /// Its name, which the answer carries back.
    pub id: AskId,
    /// One ask per sequence, in the order the answer's drafts follow.
    pub asks: Vec<DraftAsk>,
}

/// What a session asks of a drafter outside the core, in order (a drafter with caches
/// must take them in this order: a warm comes before the drafts that follow it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftJob {
    /// The sequence in `slot` holds `history` (its whole prompt, now on its way through
    /// the target): a drafter with caches reads it now, while the target computes,
    /// rather than at the first ask. Nothing is answered.
    Warm {
        /// The sequence's slot.
        slot: u16,
        /// Its prompt.
        history: Vec<u32>,
    },
    /// Drafts wanted: answer with a [`DraftAnswer`] of the same id.
    Draft(DraftRequest),
}

/// A drafter's answer to a [`DraftRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct DraftAnswer {
    /// The request's id.
    pub id: AskId,
    /// For each ask, in order, up to its `k` tokens (fewer, or none, where the drafter
    /// has no guess or failed).
    pub drafts: Vec<Vec<u32>>,
    /// The drafter's measured time per drafted token, catching up included (`None`: not
    /// measured): over a measured trip's time it is the drafter's true share of a trip.
    pub seconds_per_token: Option<f64>,
}

/// A source of drafts: what a driver (or `generate`) runs to answer a [`DraftJob`]. The
/// session never calls one; it emits jobs and takes answers.
pub trait Draft: std::fmt::Debug + Send {
    /// For each ask, in order, up to its `k` tokens to follow its history (fewer, or
    /// none, where it has no guess). A drafter that fails drafts nothing: speculation
    /// only ever saves trips.
    fn draft(&mut self, asks: &[DraftAsk]) -> Vec<Vec<u32>>;

    /// One drafted token's own cost relative to a decode step of the target (0 for a
    /// lookup; a draft model's share of the target's weights).
    fn step_cost(&self) -> f64 {
        0.0
    }

    /// Its measured time per drafted token, catching up included (`None`: not measured;
    /// the caller then goes by [`Draft::step_cost`]).
    fn seconds_per_token(&self) -> Option<f64> {
        None
    }

    /// The sequence in `slot` holds `history` (see [`DraftJob::Warm`]). Nothing by
    /// default.
    fn warm(&mut self, slot: u16, history: &[u32]) {
        let _ = (slot, history);
    }
}

/// Runs `job` on `drafter`: a warm answers nothing; a request is answered with the
/// drafts (each cut to its ask's `k`) and the drafter's measured cost.
pub fn run_job(drafter: &mut dyn Draft, job: &DraftJob) -> Option<DraftAnswer> {
    match job {
        DraftJob::Warm { slot, history } => {
            drafter.warm(*slot, history);
            None
        }
        DraftJob::Draft(request) => {
            let mut drafts = drafter.draft(&request.asks);
            drafts.resize_with(request.asks.len(), Vec::new);
            for (d, ask) in drafts.iter_mut().zip(&request.asks) {
                d.truncate(ask.k);
            }
            let seconds_per_token = drafter.seconds_per_token();
            Some(DraftAnswer { id: request.id, drafts, seconds_per_token })
        }
    }
}

/// One drafted token's cost relative to a trip of `trip_seconds` (`None`: not measured
/// yet): the drafter's measured `seconds_per_token` where both are known, else its own
/// estimate `step_cost`.
pub fn draft_cost(
    step_cost: f64,
    seconds_per_token: Option<f64>,
    trip_seconds: Option<f64>,
) -> f64 {
    match (seconds_per_token, trip_seconds) {
        (Some(d), Some(t)) if t > 0.0 => (d / t).clamp(0.0, 4.0),
        _ => step_cost,
    }
}

impl Draft for ngram::NgramDrafter {
    fn draft(&mut self, asks: &[DraftAsk]) -> Vec<Vec<u32>> {
        asks.iter().map(|a| ngram::NgramDrafter::draft(self, &a.history, a.k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drafters_cost_is_its_measured_share_of_a_trip_and_its_estimate_until_measured() {
        assert_eq!(draft_cost(0.4, None, Some(0.05)), 0.4);
        assert_eq!(draft_cost(0.4, Some(0.01), None), 0.4);
        assert!((draft_cost(0.4, Some(0.01), Some(0.05)) - 0.2).abs() < 1e-12);
        assert_eq!(draft_cost(0.4, Some(1.0), Some(0.01)), 4.0, "bounded");
        assert_eq!(draft_cost(0.0, None, Some(0.05)), 0.0);
    }

    #[derive(Debug, Default)]
    struct Warmed(Vec<(u16, usize)>);

    impl Draft for Warmed {
        fn draft(&mut self, asks: &[DraftAsk]) -> Vec<Vec<u32>> {
            // One ask too few, and one draft too long: the answer is fitted to the asks.
            asks.iter().skip(1).map(|a| vec![7; a.k + 2]).collect()
        }
        fn seconds_per_token(&self) -> Option<f64> {
            Some(0.5)
        }
        fn warm(&mut self, slot: u16, history: &[u32]) {
            self.0.push((slot, history.len()));
        }
    }

    #[test]
    fn a_job_runs_on_a_drafter_and_its_answer_has_one_draft_per_ask_within_its_k() {
        let mut d = Warmed::default();
        let warm = DraftJob::Warm { slot: 3, history: vec![1, 2, 3] };
        assert_eq!(run_job(&mut d, &warm), None);
        assert_eq!(d.0, vec![(3, 3)]);
        let id = AskId { run: RunId(9), number: 4 };
        let asks = vec![
            DraftAsk { slot: 0, history: vec![1], k: 2 },
            DraftAsk { slot: 1, history: vec![1], k: 1 },
        ];
        let answer = run_job(&mut d, &DraftJob::Draft(DraftRequest { id, asks })).unwrap();
        assert_eq!(answer.id, id);
        assert_eq!(answer.drafts, vec![vec![7, 7], vec![]]);
        assert_eq!(answer.seconds_per_token, Some(0.5));
    }
}
