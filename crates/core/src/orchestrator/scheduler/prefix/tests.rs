//! The warm slots' rules, through the scheduler's public surface.

use crate::orchestrator::scheduler::tests::{answer, cfg, drain, req};
use crate::orchestrator::scheduler::*;
use crate::wire::batch::NO_TOKEN;

/// A request with prompt `prompt` that may use the prefix cache.
fn cached(prompt: Vec<u32>, max_tokens: u32) -> SeqRequest {
    SeqRequest { prompt, cache_prompt: true, ..req(1, max_tokens) }
}

/// Runs every sequence to its end, each step answering `token`; returns the outputs.
fn run_out(s: &mut Scheduler, token: u32) -> Vec<SeqOutput> {
    let mut out = Vec::new();
    while let Some(b) = s.next_batch() {
        s.batch_returned(&b.table, &answer(&b, token)).unwrap();
        out.extend(drain(s));
    }
    out
}

/// Returns `b` with `token`, then runs every sequence to its end.
fn run_out_from(s: &mut Scheduler, b: &PlannedBatch, token: u32) -> Vec<SeqOutput> {
    s.batch_returned(&b.table, &answer(b, token)).unwrap();
    let mut out = drain(s);
    out.extend(run_out(s, token));
    out
}

fn cached_of(out: &[SeqOutput], want: SeqId) -> Option<u32> {
    out.iter().find_map(|o| match o {
        SeqOutput::Finished { id, cached, .. } if *id == want => Some(*cached),
        _ => None,
    })
}

#[test]
fn a_next_turn_prefills_only_what_its_slot_does_not_hold() {
    let mut s = Scheduler::new(cfg(1, 1, 4, 64));
    s.submit(cached(vec![10, 11, 12, 13], 3)).unwrap();
    run_out(&mut s, 50);
    // The slot holds the prompt and the two generated tokens fed back: 10 11 12 13 50 50.
    assert_eq!(s.slots()[0].n_prompt_tokens_cache, 6);
    let turn = s.submit(cached(vec![10, 11, 12, 13, 50, 50, 50, 7, 8], 2)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert_eq!((e.first_position, e.tokens), (6, 3), "only the rest is prefilled");
    assert!(e.flags.contains(EntryFlags::RESET | EntryFlags::SAMPLE));
    assert_eq!(b.tokens, vec![50, 7, 8]);
    let out = run_out_from(&mut s, &b, 60);
    assert_eq!(cached_of(&out, turn), Some(6));
    let c = s.prefix_counters();
    assert_eq!((c.queried_tokens, c.cached_tokens, c.hits), (4 + 9, 6, 1));
}

#[test]
fn the_same_prompt_again_computes_its_last_token_so_that_it_can_sample() {
    let mut s = Scheduler::new(cfg(1, 1, 4, 64));
    s.submit(cached(vec![10, 11, 12], 1)).unwrap();
    run_out(&mut s, 50);
    s.submit(cached(vec![10, 11, 12], 1)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert_eq!((e.first_position, e.tokens), (2, 1));
    assert_eq!(b.tokens, vec![12]);
}

#[test]
fn a_request_takes_the_free_slot_sharing_its_longest_prefix_and_spares_the_others() {
    let mut s = Scheduler::new(cfg(3, 1, 4, 64));
    s.submit(cached(vec![10, 11, 12, 13], 1)).unwrap();
    s.submit(cached(vec![20, 21, 22, 23], 1)).unwrap();
    run_out(&mut s, 50);
    let warm_20 = s.slots().into_iter().find(|v| v.n_prompt_tokens_cache == 4 && v.id == 1);
    assert!(warm_20.is_some(), "the second request ran in slot 1: {:?}", s.slots());
    let id = s.submit(cached(vec![20, 21, 22, 99], 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 3);
    let slot = s.slots().into_iter().find(|v| v.sequence == Some(id)).map(|v| v.id);
    assert_eq!(slot, Some(1));
    // Sharing nothing, a request takes the empty slot and leaves the warm one alone.
    let other = s.submit(cached(vec![30, 31], 1)).unwrap();
    assert!(s.next_batch().is_none(), "one group: the second waits for the first's trip");
    s.batch_returned(&b.table, &answer(&b, 50)).unwrap();
    drain(&mut s);
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 0);
    let slot = s.slots().into_iter().find(|v| v.sequence == Some(other)).map(|v| v.id);
    assert_eq!(slot, Some(2), "the empty slot, not a warm one");
    assert_eq!(s.prefix_counters().evictions, 0);
}

#[test]
fn a_warm_slot_sharing_less_than_half_of_what_it_holds_is_spared_while_an_empty_slot_is_free() {
    let mut s = Scheduler::new(cfg(2, 1, 4, 64));
    // A conversation of 10 tokens in slot 0.
    s.submit(cached(vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 1)).unwrap();
    run_out(&mut s, 50);
    // A request sharing its first 3 tokens takes the empty slot: slot 0 keeps all 10.
    let other = s.submit(cached(vec![1, 2, 3, 99], 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 0);
    let slot = s.slots().into_iter().find(|v| v.sequence == Some(other)).map(|v| v.id);
    assert_eq!(slot, Some(1));
    run_out_from(&mut s, &b, 50);
    assert_eq!(s.slots()[0].n_prompt_tokens_cache, 10);
    // With no empty slot left, the longest share wins, however little it is.
    s.submit(cached(vec![1, 2, 3, 4, 77], 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 4);
}

#[test]
fn a_request_that_opts_out_shares_nothing_and_its_slot_is_emptied() {
    let mut s = Scheduler::new(cfg(1, 1, 4, 64));
    s.submit(cached(vec![10, 11, 12, 13], 1)).unwrap();
    run_out(&mut s, 50);
    let opted = SeqRequest { cache_prompt: false, ..cached(vec![10, 11, 12, 14], 1) };
    let id = s.submit(opted).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert_eq!((e.first_position, e.tokens), (0, 4));
    assert!(e.flags.contains(EntryFlags::RESET));
    let out = run_out_from(&mut s, &b, 50);
    assert_eq!(cached_of(&out, id), Some(0));
    assert_eq!(s.prefix_counters().evictions, 1, "the warm prefix was dropped whole");
}

#[test]
fn a_sliding_window_ring_that_wrapped_past_the_prefix_counts_as_not_cached() {
    // A ring of 8 positions over a window of 6: once the slot wrote past 8, a
    // continuation may go back 2 positions at most.
    let window = Some(WindowRing { positions: 8, window: 6 });
    let mut s = Scheduler::new(SchedulerConfig { window, ..cfg(1, 1, 4, 64) });
    let long: Vec<u32> = (10..22).collect();
    s.submit(cached(long.clone(), 1)).unwrap();
    run_out(&mut s, 50);
    let mut branch = long[..6].to_vec();
    branch.push(99);
    s.submit(cached(branch, 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 0, "the prefix is gone from the ring");
    run_out_from(&mut s, &b, 50);
    // A short history never wrapped: its prefix holds.
    s.submit(cached(vec![1, 2, 3, 4], 1)).unwrap();
    run_out(&mut s, 50);
    s.submit(cached(vec![1, 2, 3, 7], 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 3);
}

#[test]
fn a_rejected_draft_is_not_counted_as_cached() {
    let spec = SchedulerConfig { max_seq_len: 64, draft_max: 3, ..cfg(1, 1, 4, 64) };
    let mut s = Scheduler::new(spec);
    let prompt = vec![11, 12, 13, 11, 12];
    s.submit(SeqRequest { speculative: true, ..cached(prompt, 2) }).unwrap();
    // The prompt samples 13; the n-gram drafter then proposes what followed 12 13 before.
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert!(e.flags.contains(EntryFlags::VERIFY), "a draft rides: {e:?}");
    // The target disagrees at once: the draft is rejected, the sequence ends (2 tokens).
    let mut tokens = vec![NO_TOKEN; usize::from(b.table.capacity())];
    tokens[0] = 40;
    let verified = vec![vec![40; e.tokens as usize - 1]];
    s.batch_returned_all(&b.table, &tokens, &[], &verified).unwrap();
    drain(&mut s);
    // Held: the prompt and the one generated token fed back (13), no draft row.
    assert_eq!(s.slots()[0].n_prompt_tokens_cache, 6);
}

#[test]
fn a_fault_forgets_what_every_slot_held() {
    let mut s = Scheduler::new(cfg(2, 1, 4, 64));
    s.submit(cached(vec![10, 11, 12, 13], 1)).unwrap();
    run_out(&mut s, 50);
    assert_eq!(s.prefix_counters().warm_tokens, 4);
    s.submit(cached(vec![20, 21], 1)).unwrap();
    s.fail_all(FinishReason::Fault);
    assert_eq!(s.prefix_counters().warm_tokens, 0);
    s.submit(cached(vec![10, 11, 12, 13], 1)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.table.entries()[0].first_position, 0);
}

mod model {
    //! A model-based check: stages as token lists, the model's token a hash of what a slot
    //! holds, every request's tokens against its prompt run alone.

    use std::collections::{BTreeMap, VecDeque};

    use proptest::prelude::*;

    use super::cached;
    use crate::orchestrator::scheduler::tests::cfg;
    use crate::orchestrator::scheduler::*;
    use crate::wire::batch::NO_TOKEN;

    const VOCAB: u32 = 100;
    const EOS: u32 = 2;

    /// The model's next token after `held` (what a slot's caches hold).
    fn next(held: &[u32]) -> u32 {
        let h = held.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &t| {
            (h ^ u64::from(t)).wrapping_mul(0x0100_0000_01b3)
        });
        (h % u64::from(VOCAB)) as u32
    }

    /// A request's tokens alone: the prompt, then each token fed back.
    fn reference(prompt: &[u32], max_tokens: u32) -> Vec<u32> {
        let mut held = prompt.to_vec();
        let mut out = Vec::new();
        while out.len() < max_tokens.max(1) as usize {
            let t = next(&held);
            if t == EOS {
                break;
            }
            out.push(t);
            held.push(t);
        }
        out
    }

    /// Runs `b` through the stages (`stage`: each slot's tokens by position); its
    /// token-out, or why a stage would fail the step.
    fn step(stage: &mut [Vec<u32>], b: &PlannedBatch) -> Result<Vec<u32>, String> {
        let mut out = vec![NO_TOKEN; usize::from(b.table.capacity())];
        let mut at = 0;
        for (i, e) in b.table.entries().iter().enumerate() {
            let held = &mut stage[e.slot as usize];
            if e.flags.contains(EntryFlags::RESET) {
                if e.first_position as usize > held.len() {
                    return Err(format!(
                        "slot {} reset at {} holds {}",
                        e.slot,
                        e.first_position,
                        held.len()
                    ));
                }
                held.truncate(e.first_position as usize);
            }
            if e.first_position as usize != held.len() {
                return Err(format!(
                    "slot {} continues at {} holds {}",
                    e.slot,
                    e.first_position,
                    held.len()
                ));
            }
            held.extend_from_slice(&b.tokens[at..at + e.tokens as usize]);
            at += e.tokens as usize;
            if e.flags.contains(EntryFlags::SAMPLE) {
                out[i] = next(held);
            }
        }
        Ok(out)
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A request: a base conversation, how much of it, its own tokens, max tokens,
        /// whether it may use the cache.
        Submit(usize, usize, Vec<u32>, u32, bool),
        Cancel(u64),
        Inject,
        Return,
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0usize..3, 0usize..16, prop::collection::vec(3u32..VOCAB, 1..5), 1u32..6,
                  prop::bool::weighted(0.8))
                .prop_map(|(b, k, own, m, c)| Op::Submit(b, k, own, m, c)),
            1 => (0u64..30).prop_map(Op::Cancel),
            3 => Just(Op::Inject),
            3 => Just(Op::Return),
        ]
    }

    proptest! {
        /// Random conversations that share prefixes, arrivals, cancellations: every entry
        /// continues what its slot holds (a `RESET` only cuts it back), and every request's
        /// tokens are those of its prompt alone (a prefix of them when cancelled).
        #[test]
        fn requests_served_from_warm_slots_get_the_tokens_of_their_prompt_alone(
            ops in prop::collection::vec(arb_op(), 1..150),
            slots in 1u16..4, groups in 1u16..3, budget in 1u32..12,
        ) {
            let bases: [Vec<u32>; 3] =
                [(10..26).collect(), (10..18).chain(40..48).collect(), (60..76).collect()];
            let mut s = Scheduler::new(SchedulerConfig { eos: Some(EOS), ..cfg(slots, groups, 4, budget) });
            let mut stage = vec![Vec::new(); usize::from(slots)];
            let mut flying: VecDeque<(PlannedBatch, Vec<u32>)> = VecDeque::new();
            let mut asked: BTreeMap<SeqId, (Vec<u32>, u32)> = BTreeMap::new();
            let mut ended: BTreeMap<SeqId, (FinishReason, Vec<u32>)> = BTreeMap::new();
            let drain = |s: &mut Scheduler, ended: &mut BTreeMap<SeqId, (FinishReason, Vec<u32>)>| {
                for o in std::iter::from_fn(|| s.poll_output()) {
                    if let SeqOutput::Finished { id, reason, generated, .. } = o {
                        ended.insert(id, (reason, generated));
                    }
                }
            };
            let run = |op: &Op, s: &mut Scheduler, stage: &mut Vec<Vec<u32>>,
                       flying: &mut VecDeque<(PlannedBatch, Vec<u32>)>,
                       asked: &mut BTreeMap<SeqId, (Vec<u32>, u32)>| -> Result<(), TestCaseError> {
                match op {
                    Op::Submit(b, k, own, m, c) => {
                        let mut prompt = bases[*b][..*k].to_vec();
                        prompt.extend_from_slice(own);
                        let req = SeqRequest { cache_prompt: *c, ..cached(prompt.clone(), *m) };
                        if let Ok(id) = s.submit(req) {
                            asked.insert(id, (prompt, *m));
                        }
                    }
                    Op::Cancel(id) => s.cancel(*id, FinishReason::Cancelled),
                    Op::Inject => {
                        if let Some(b) = s.next_batch() {
                            let out = step(stage, &b).map_err(TestCaseError::fail)?;
                            flying.push_back((b, out));
                        }
                    }
                    Op::Return => {
                        if let Some((b, out)) = flying.pop_front() {
                            s.batch_returned(&b.table, &out)
                                .map_err(|e| TestCaseError::fail(e.to_string()))?;
                        }
                    }
                }
                Ok(())
            };
            for op in &ops {
                run(op, &mut s, &mut stage, &mut flying, &mut asked)?;
                drain(&mut s, &mut ended);
            }
            for _ in 0..10_000 {
                if s.is_idle() { break; }
                run(&Op::Inject, &mut s, &mut stage, &mut flying, &mut asked)?;
                run(&Op::Return, &mut s, &mut stage, &mut flying, &mut asked)?;
                drain(&mut s, &mut ended);
            }
            prop_assert!(s.is_idle());
            prop_assert_eq!(asked.len(), ended.len());
            for (id, (prompt, max)) in &asked {
                let want = reference(prompt, *max);
                let (reason, got) = &ended[id];
                if *reason == FinishReason::Cancelled {
                    prop_assert!(want.starts_with(got), "request {}: {:?} not a prefix of {:?}", id, got, want);
                } else {
                    prop_assert_eq!(got, &want, "request {}", id);
                }
            }
        }
    }
}
