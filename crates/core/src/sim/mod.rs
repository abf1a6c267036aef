//! A deterministic simulation of a session, driven by one seed (TigerBeetle's VOPR and
//! FoundationDB's simulation are the models): the real orchestrator `Session` (its run
//! FSM, scheduler, request book and re-formation), one real stage node per node, and a
//! simulated world around them — a
//! worker that computes [`model`]'s tiny deterministic network on the real micro-batches,
//! control messages and edge objects with seeded delays, the token endpoints, SWIM's
//! verdicts and a simulated clock. One process, no threads, no sockets, no real clock.
//!
//! Each node boots through its real boot machine (its worker through its real worker
//! controller) and the orchestrator's real pool gate
//! decides when the session starts. The seed chooses the pool (1-3 stages, 1-4 slots), the requests (lengths, limits,
//! sampling, arrival times, cancellations) and, when faults are on, up to three faults:
//! a node crash, a worker crash, a pause or partition (shorter or longer than failure
//! detection), a lost control session, an edge stream error, a slow consumer, late and
//! early timers, an operator stop. Invariants are checked as it runs and at the end (see
//! `specs/simulation.md`); a violated one names the seed, which replays exactly.

pub mod model;
mod world;

pub use world::{Planted, SimConfig, SimReport, simulate};

/// The simulation's plan of `stages` stages on nodes 1.. (for the core's unit tests).
#[cfg(test)]
pub(crate) fn plan_for_tests(stages: u32) -> crate::wire::RunPlan {
    let nodes: Vec<usize> = (0..stages as usize).collect();
    world::the_plan_for_tests(&nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // the simulated clock starts at one real instant
    fn base() -> std::time::Instant {
        std::time::Instant::now()
    }

    #[test]
    fn two_thousand_seeds_of_traffic_alone_complete_with_the_reference_tokens() {
        let base = base();
        let (mut drafted, mut outside, mut cached, mut loaded) = (0, 0, 0, 0);
        for seed in 0..2000 {
            let r = simulate(base, SimConfig { seed, faults: false, planted: None });
            assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
            assert_eq!(r.outcome, Some(crate::events::RunOutcome::Completed), "seed {seed}");
            drafted += r.draft_tokens;
            cached += r.cached_tokens;
            loaded += r.loaded_blocks;
            if seed % 6 == 4 {
                outside += r.draft_tokens;
            }
        }
        // Half of those draft through draft requests, answered late or wrong at times.
        assert!(outside > 0, "no draft request was ever answered in time");
        // A third of the seeds speculate: their drafts are verified (and mostly rolled
        // back) through the real stage controllers, and the tokens still match. The
        // stand-in model's tokens are hashes, so its own output seldom repeats and drafts
        // are rare (about a dozen tokens over these seeds): they must still happen.
        assert!(drafted > 0, "the simulated sessions never drafted");
        // Half the requests continue an earlier one: those that find its slot warm start
        // from the prefix it holds, and their tokens still match.
        println!("{cached} prompt tokens found cached");
        assert!(cached > 1000, "warm slots were seldom reused: {cached} tokens");
        // Six seeds in seven have a block store: evicted prefixes come back from it.
        println!("{loaded} blocks loaded from the stores");
        assert!(loaded > 100, "the block stores were seldom read: {loaded} blocks");
    }

    #[test]
    fn three_thousand_seeds_with_faults_keep_every_invariant_and_inject_every_fault_class() {
        let base = base();
        let mut classes = std::collections::BTreeSet::new();
        let (mut faulted, mut reformed, mut abandoned) = (0, 0, 0);
        let (mut kept_stages, mut kept_rows) = (0, 0);
        for seed in 0..3000 {
            let r = simulate(base, SimConfig { seed, faults: true, planted: None });
            assert!(
                r.violations.is_empty(),
                "seed {seed} (replay: swactor util simulate --seeds 1 --from {seed} --trace): {:?}",
                r.violations
            );
            classes.extend(r.faults.iter().copied());
            faulted += usize::from(r.outcome == Some(crate::events::RunOutcome::Faulted));
            reformed += usize::from(r.reformed > 0);
            abandoned += usize::from(r.abandoned.is_some());
            kept_stages += r.kept_stages;
            kept_rows += r.kept_rows;
        }
        assert_eq!(classes.len(), 10, "every fault class was injected: {classes:?}");
        println!("{faulted} faulted, {reformed} re-formed, {abandoned} gave re-forming up");
        // Re-formed runs keep the stages that stay where they were: their caches, and
        // the rows of the positions they held are sent again, not computed.
        println!("{kept_stages} stages kept, {kept_rows} rows sent from kept caches");
        assert!(kept_stages > 100, "re-formed runs seldom kept a stage: {kept_stages}");
        assert!(kept_rows > 300, "kept stages seldom skipped rows: {kept_rows}");
        assert!(reformed > 200, "sessions re-form after node losses: {reformed}");
        assert!(abandoned > 20, "with no node left, re-forming is given up: {abandoned}");
        assert!(faulted > 50, "faults a session does not survive still end it: {faulted}");
    }

    #[test]
    fn a_seed_replays_exactly() {
        let base = base();
        let cfg = SimConfig { seed: 77, faults: true, planted: None };
        let (a, b) = (simulate(base, cfg), simulate(base, cfg));
        assert_eq!(a.trace, b.trace);
        assert!(a.trace.len() > 20);
    }

    /// The first seed below `within` whose run breaks an invariant naming `symptom`.
    fn finds(planted: Planted, within: u64, symptom: &str) -> Option<u64> {
        finds_in(planted, false, within, symptom)
    }

    /// As [`finds`], with faults injected (`faults`).
    fn finds_in(planted: Planted, faults: bool, within: u64, symptom: &str) -> Option<u64> {
        let base = base();
        (0..within).find(|&seed| {
            let r = simulate(base, SimConfig { seed, faults, planted: Some(planted) });
            r.violations.iter().any(|v| v.contains(symptom))
        })
    }

    #[test]
    fn the_checks_find_a_re_formed_session_that_forgets_a_kept_request_within_a_thousand_seeds() {
        let found = finds_in(Planted::ForgetKept, true, 1000, "which the session survived");
        assert!(found.is_some(), "no seed lost the forgotten request");
    }

    #[test]
    fn the_checks_find_a_replay_that_skips_a_token_within_a_thousand_seeds() {
        let found = finds_in(Planted::ReplaySkipsToken, true, 1000, "reference");
        assert!(found.is_some(), "no seed saw the skipped token");
    }

    #[test]
    fn the_checks_find_a_warm_slot_that_claims_a_token_it_does_not_share_within_a_hundred_seeds() {
        assert!(finds(Planted::PrefixOverclaim, 100, "reference").is_some());
    }

    #[test]
    fn the_checks_find_a_block_store_that_records_saves_it_never_sends_within_a_hundred_seeds() {
        assert!(finds(Planted::StoreSkipSave, 100, "").is_some());
    }

    #[test]
    fn the_checks_find_a_resumed_slot_that_keeps_what_it_does_not_share_within_a_thousand_seeds() {
        let found = finds_in(Planted::ResumeOverkeep, true, 1000, "");
        assert!(found.is_some(), "no seed saw the over-kept slot");
    }

    #[test]
    fn the_checks_find_a_planted_skipped_slot_reset_within_ten_seeds() {
        assert!(finds(Planted::SkipReset, 10, "failed: Position").is_some());
    }

    #[test]
    fn the_checks_find_a_stage_node_without_its_late_answer_filter_within_ten_seeds() {
        // A late answer about an earlier run's step, taken for this run's, faults the stage
        // of a run that nothing else disturbed.
        assert!(finds(Planted::NoLateAnswerFilter, 10, "without faults the run ended").is_some());
    }

    #[test]
    fn the_checks_find_a_planted_early_slot_release_within_ten_thousand_seeds() {
        assert!(finds(Planted::EarlySlotRelease, 10_000, "already in flight").is_some());
    }
}
