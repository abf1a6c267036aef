//! The draft length of one sequence (pure): how many tokens to draft for its next trip,
//! from its measured acceptance and what one more row costs.
//!
//! With a per-token acceptance rate `a` (a moving average of accepted / drafted), `k`
//! drafted tokens yield `(1 - a^(k+1)) / (1 - a)` tokens per trip in expectation, and the
//! trip costs `1 + r k` times a plain one, where `r` is the cost of one more row relative
//! to a whole decode step (small while decode reads the weights once for every row, near
//! 1 when the session is busy and every row costs compute). The length chosen maximizes
//! tokens per cost; where no length beats 1.0 speculation is off for the sequence, and a
//! short draft probes again every [`PROBE_EVERY`] trips so that a sequence that starts to
//! repeat its input gets it back. Gains follow tokens accepted per trip, not tokens
//! drafted.

/// Trips before the first probe once speculation went off.
pub const PROBE_EVERY: u32 = 16;
/// Trips between probes at most: each probe that does not bring speculation back doubles
/// the wait, up to this (a probe costs more than its row where the drafter must catch up).
pub const PROBE_EVERY_MAX: u32 = 256;
/// Weight of the newest trip in the acceptance average.
const NEW_WEIGHT: f64 = 0.3;
/// Acceptance assumed before anything was measured (optimistic: try it).
const PRIOR: f64 = 0.6;

/// One sequence's draft length controller.
#[derive(Debug, Clone, PartialEq)]
pub struct DraftLength {
    max_k: usize,
    /// Tokens drafted every trip whatever the measurements say (at most `max_k`).
    min_k: usize,
    acceptance: f64,
    /// Trips since speculation went off or last probed (`None`: on).
    off_for: Option<u32>,
    /// Trips to wait for the next probe.
    probe_every: u32,
}

impl DraftLength {
    /// A controller drafting at most `max_k` tokens.
    pub fn new(max_k: usize) -> DraftLength {
        DraftLength { max_k, min_k: 0, acceptance: PRIOR, off_for: None, probe_every: PROBE_EVERY }
    }

    /// The same controller drafting at least `min_k` tokens every trip (cut to its
    /// `max_k`), whatever acceptance and row cost say: a fixed floor, as llama.cpp's
    /// `--draft-min`, for drafters known to pay or for a run that must speculate.
    pub fn with_min(self, min_k: usize) -> DraftLength {
        DraftLength { min_k: min_k.min(self.max_k), ..self }
    }

    /// The acceptance rate it believes (accepted per drafted token).
    pub fn acceptance(&self) -> f64 {
        self.acceptance
    }

    /// A trip drafted `drafted` tokens and `accepted` of them were kept (a trip that
    /// drafted nothing teaches nothing).
    pub fn observe(&mut self, drafted: usize, accepted: usize) {
        if drafted == 0 {
            return;
        }
        let rate = accepted.min(drafted) as f64 / drafted as f64;
        self.acceptance += NEW_WEIGHT * (rate - self.acceptance);
    }

    /// Tokens to draft for the next trip, one more row costing `row_cost` of a decode
    /// step: 0 while speculation does not pay, with a probe of 1 after [`PROBE_EVERY`]
    /// trips, then after twice as many each time until speculation pays again (at most
    /// [`PROBE_EVERY_MAX`]).
    /// A floor set by [`DraftLength::with_min`] raises the result to it.
    pub fn next(&mut self, row_cost: f64) -> usize {
        self.adaptive(row_cost).max(self.min_k)
    }

    fn adaptive(&mut self, row_cost: f64) -> usize {
        let best = best_length(self.acceptance, row_cost, self.max_k);
        if best > 0 {
            self.off_for = None;
            self.probe_every = PROBE_EVERY;
            return best;
        }
        let off = self.off_for.map_or(1, |n| n + 1);
        if off >= self.probe_every && self.max_k > 0 && row_cost < 1.0 {
            self.off_for = Some(0);
            self.probe_every = (self.probe_every * 2).min(PROBE_EVERY_MAX);
            return 1;
        }
        self.off_for = Some(off);
        0
    }
}

/// Expected tokens per trip with `k` drafted at acceptance `a`.
pub fn expected_tokens(a: f64, k: usize) -> f64 {
    let a = a.clamp(0.0, 1.0);
    if a >= 1.0 { (k + 1) as f64 } else { (1.0 - a.powi(k as i32 + 1)) / (1.0 - a) }
}

/// The `k` in `0..=max_k` with the most expected tokens per unit of cost `1 + r k`; 0
/// unless some `k` gains at least 5 % over plain decoding.
pub fn best_length(a: f64, r: f64, max_k: usize) -> usize {
    let r = r.max(0.0);
    let mut best = (0usize, 1.0f64);
    for k in 1..=max_k {
        let gain = expected_tokens(a, k) / (1.0 + r * k as f64);
        if gain > best.1 {
            best = (k, gain);
        }
    }
    if best.1 >= 1.05 { best.0 } else { 0 }
}

/// A row's relative cost assumed until trips have been measured.
pub const PRIOR_ROW_COST: f64 = 0.1;
/// The least relative row cost believed (timer noise never makes rows free).
const MIN_ROW_COST: f64 = 0.02;

/// What one more verifying row costs relative to a plain trip, learned from measured
/// trips (durations the caller measures): a plain trip's time, and each extra row's
/// time beyond it, as moving averages. [`PRIOR_ROW_COST`] until both were seen. The
/// cost differs by CPU, format and pipeline (hops make rows relatively cheaper), so it
/// is measured, not assumed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowCost {
    trip_s: Option<f64>,
    per_row_s: Option<f64>,
}

impl RowCost {
    /// A trip carrying `extra_rows` verifying rows beyond its plain ones took `elapsed`.
    pub fn observe(&mut self, extra_rows: usize, elapsed: std::time::Duration) {
        let t = elapsed.as_secs_f64();
        if extra_rows == 0 {
            self.trip_s = Some(self.trip_s.map_or(t, |o| o + NEW_WEIGHT * (t - o)));
        } else if let Some(trip) = self.trip_s {
            let per_row = (t - trip).max(0.0) / extra_rows as f64;
            self.per_row_s =
                Some(self.per_row_s.map_or(per_row, |o| o + NEW_WEIGHT * (per_row - o)));
        }
    }

    /// A plain trip's measured time, in seconds.
    pub fn trip_seconds(&self) -> Option<f64> {
        self.trip_s
    }

    /// One more row's cost relative to a plain trip (within `0.02..=1`).
    pub fn relative(&self) -> f64 {
        match (self.trip_s, self.per_row_s) {
            (Some(trip), Some(row)) if trip > 0.0 => (row / trip).clamp(MIN_ROW_COST, 1.0),
            _ => PRIOR_ROW_COST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_row_cost_is_the_prior_until_measured_then_follows_the_trips() {
        let ms = std::time::Duration::from_millis;
        let mut c = RowCost::default();
        assert_eq!(c.relative(), PRIOR_ROW_COST);
        c.observe(4, ms(100));
        assert_eq!(c.relative(), PRIOR_ROW_COST, "an extra row means nothing without a plain trip");
        c.observe(0, ms(40));
        c.observe(4, ms(80));
        assert!((c.relative() - 0.25).abs() < 1e-9, "{}", c.relative());
        // Rows measured as free are still believed to cost something; never more than a trip.
        let mut free = RowCost::default();
        free.observe(0, ms(40));
        free.observe(3, ms(39));
        assert_eq!(free.relative(), MIN_ROW_COST);
        let mut dear = RowCost::default();
        dear.observe(0, ms(10));
        dear.observe(1, ms(50));
        assert_eq!(dear.relative(), 1.0);
    }

    #[test]
    fn expected_tokens_grow_with_acceptance_and_length() {
        assert_eq!(expected_tokens(0.0, 5), 1.0);
        assert_eq!(expected_tokens(1.0, 3), 4.0);
        assert!((expected_tokens(0.5, 2) - 1.75).abs() < 1e-12);
    }

    #[test]
    fn cheap_rows_and_high_acceptance_draft_long_expensive_rows_or_low_acceptance_none() {
        assert_eq!(best_length(0.9, 0.05, 8), 8);
        assert!(best_length(0.6, 0.1, 8) >= 2);
        assert_eq!(best_length(0.05, 0.1, 8), 0);
        assert_eq!(best_length(0.9, 1.0, 8), 0, "a busy session: a row costs a step");
    }

    #[test]
    fn a_sequence_whose_drafts_fail_turns_speculation_off_and_probes_again_later() {
        let mut d = DraftLength::new(6);
        assert!(d.next(0.1) > 0, "tried before anything is known");
        for _ in 0..20 {
            d.observe(4, 0);
        }
        let ks: Vec<usize> = (0..PROBE_EVERY).map(|_| d.next(0.1)).collect();
        assert_eq!(ks.iter().filter(|&&k| k > 0).count(), 1, "one probe per {PROBE_EVERY}");
        assert_eq!(*ks.last().unwrap(), 1);
        // The probe succeeds again and again: speculation comes back.
        for _ in 0..10 {
            d.observe(1, 1);
        }
        assert!(d.next(0.1) > 1);
    }

    #[test]
    fn probes_that_keep_failing_come_ever_more_rarely_and_a_success_resets_them() {
        let mut d = DraftLength::new(4);
        for _ in 0..20 {
            d.observe(4, 0);
        }
        let mut probes = Vec::new();
        for trip in 1..=2000u32 {
            if d.next(0.1) > 0 {
                probes.push(trip);
                d.observe(1, 0);
            }
        }
        let gaps: Vec<u32> = probes.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(probes[0], PROBE_EVERY);
        assert_eq!(&gaps[..4], &[32, 64, 128, 256]);
        assert!(gaps[4..].iter().all(|&g| g == PROBE_EVERY_MAX), "{gaps:?}");
        // Speculation that pays again starts the waits over.
        for _ in 0..10 {
            d.observe(1, 1);
        }
        assert!(d.next(0.1) > 0);
        for _ in 0..20 {
            d.observe(4, 0);
        }
        let first = (1..=PROBE_EVERY).find(|_| d.next(0.1) > 0);
        assert_eq!(first, Some(PROBE_EVERY));
    }

    #[test]
    fn a_busy_session_never_probes() {
        let mut d = DraftLength::new(4);
        for _ in 0..20 {
            d.observe(4, 0);
        }
        assert!((0..3 * PROBE_EVERY).all(|_| d.next(1.0) == 0));
    }

    #[test]
    fn a_floor_drafts_every_trip_even_when_busy_and_rejected_but_never_past_the_limit() {
        let mut d = DraftLength::new(4).with_min(2);
        for _ in 0..20 {
            d.observe(4, 0);
        }
        assert!((0..3 * PROBE_EVERY).all(|_| d.next(1.0) == 2));
        let mut d = DraftLength::new(4).with_min(2);
        (0..20).for_each(|_| d.observe(4, 4));
        assert_eq!(d.next(0.02), 4, "measurements still lengthen past the floor");
        assert_eq!(DraftLength::new(3).with_min(9).next(1.0), 3, "the floor is cut to the limit");
    }
}
