//! The prefill pacer (sans-IO): how many prompt rows a micro-batch may carry so that its
//! round trip stays within a time budget while other sequences decode.
//!
//! It learns a linear cost model of a micro-batch's round trip, `fixed + per_row x prompt
//! rows`, from micro-batches that flew alone (nothing else in flight, so the round trip is
//! their own compute and hops): `fixed` from those without prompt rows, `per_row` from
//! those with at least [`LEARN_MIN_ROWS`] prompt rows. Until it has seen a prompt it does
//! not limit chunks. Time comes in as durations measured by the caller.

use std::time::Duration;

/// A micro-batch teaches the per-row cost only with at least this many prompt rows.
pub const LEARN_MIN_ROWS: u32 = 8;
/// A paced chunk has at least this many rows, whatever the budget (a prompt always moves).
pub const MIN_CHUNK_ROWS: u32 = 16;
/// The budget by default: a micro-batch carrying a prompt chunk beside decoding
/// sequences should come back within this.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(250);

/// Weight of a new observation in the moving averages (1/4).
const NEW_WEIGHT: f64 = 0.25;

/// The learned cost model and the budget.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillPacer {
    /// `None`: chunks are never limited by time.
    budget: Option<Duration>,
    /// Seconds of a round trip without prompt rows.
    fixed_s: Option<f64>,
    /// Seconds per prompt row.
    per_row_s: Option<f64>,
}

impl PrefillPacer {
    /// A pacer keeping paced micro-batches within `budget` (`None` or zero: no pacing).
    pub fn new(budget: Option<Duration>) -> PrefillPacer {
        PrefillPacer { budget: budget.filter(|b| !b.is_zero()), fixed_s: None, per_row_s: None }
    }

    /// A micro-batch with `prompt_rows` prompt rows came back `elapsed` after it was sent,
    /// having flown `alone` (only such round trips teach the model).
    pub fn observe(&mut self, prompt_rows: u32, elapsed: Duration, alone: bool) {
        if !alone {
            return;
        }
        let t = elapsed.as_secs_f64();
        if prompt_rows == 0 {
            self.fixed_s = Some(average(self.fixed_s, t));
        } else if prompt_rows >= LEARN_MIN_ROWS {
            let per_row = (t - self.fixed_s.unwrap_or(0.0)).max(0.0) / f64::from(prompt_rows);
            if per_row > 0.0 {
                self.per_row_s = Some(average(self.per_row_s, per_row));
            }
        }
    }

    /// Whether it has a budget to keep.
    pub fn paces(&self) -> bool {
        self.budget.is_some()
    }

    /// Whether it has learned the per-row cost (pacing is in force).
    pub fn learned(&self) -> bool {
        self.budget.is_some() && self.per_row_s.is_some()
    }

    /// Prompt rows a micro-batch may carry while other sequences decode (at most `cap`):
    /// what fits the budget beside the fixed cost, at least [`MIN_CHUNK_ROWS`]; `cap`
    /// when there is no budget or nothing learned yet.
    pub fn chunk_rows(&self, cap: u32) -> u32 {
        let (Some(budget), Some(per_row)) = (self.budget, self.per_row_s) else { return cap };
        let room = budget.as_secs_f64() - self.fixed_s.unwrap_or(0.0);
        let rows = (room / per_row).floor();
        let rows =
            if rows.is_finite() && rows > 0.0 { rows.min(f64::from(u32::MAX)) as u32 } else { 0 };
        rows.max(MIN_CHUNK_ROWS).min(cap)
    }
}

fn average(old: Option<f64>, new: f64) -> f64 {
    old.map_or(new, |o| o + NEW_WEIGHT * (new - o))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nothing_is_limited_before_a_prompt_was_seen_or_without_a_budget() {
        let mut p = PrefillPacer::new(Some(ms(100)));
        assert_eq!(p.chunk_rows(512), 512);
        p.observe(0, ms(20), true);
        assert_eq!(p.chunk_rows(512), 512);
        let mut off = PrefillPacer::new(None);
        off.observe(100, ms(1000), true);
        assert_eq!(off.chunk_rows(512), 512);
        assert_eq!(PrefillPacer::new(Some(Duration::ZERO)), PrefillPacer::new(None));
    }

    #[test]
    fn the_chunk_fills_what_the_budget_leaves_beside_the_fixed_cost() {
        let mut p = PrefillPacer::new(Some(ms(100)));
        p.observe(0, ms(20), true);
        // 100 rows in 220 ms: 2 ms per row beside the 20 ms fixed cost.
        p.observe(100, ms(220), true);
        assert_eq!(p.chunk_rows(512), 40);
        assert_eq!(p.chunk_rows(30), 30, "never more than the cap");
    }

    #[test]
    fn a_slow_model_still_moves_a_prompt_by_the_least_chunk() {
        let mut p = PrefillPacer::new(Some(ms(100)));
        p.observe(0, ms(150), true);
        p.observe(10, ms(1150), true);
        assert_eq!(p.chunk_rows(512), MIN_CHUNK_ROWS);
    }

    #[test]
    fn round_trips_shared_with_other_micro_batches_and_tiny_chunks_teach_nothing() {
        let mut p = PrefillPacer::new(Some(ms(100)));
        p.observe(100, ms(5000), false);
        p.observe(LEARN_MIN_ROWS - 1, ms(5000), true);
        assert_eq!(p.chunk_rows(512), 512);
    }

    #[test]
    fn the_model_follows_a_change_in_speed() {
        let mut p = PrefillPacer::new(Some(ms(100)));
        p.observe(50, ms(50), true);
        assert_eq!(p.chunk_rows(512), 100);
        for _ in 0..20 {
            p.observe(50, ms(100), true);
        }
        assert_eq!(p.chunk_rows(512), 50);
    }
}
