use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::wire::RunId;
use crate::wire::batch::NO_TOKEN;

const EOS: u32 = 2;

pub(crate) fn cfg(max_sequences: u16, groups: u16, queue: usize, budget: u32) -> SchedulerConfig {
    SchedulerConfig {
        max_sequences,
        groups,
        queue_capacity: queue,
        batch_tokens: budget,
        max_seq_len: 32,
        prefill_budget: None,
        eos: Some(EOS),
        eot: None,
        vocab: 100,
        max_top_logprobs: Some(20),
        draft_max: 0,
        draft_min: 0,
        window: None,
        store: (4, 0),
        mask_bytes: 0,
    }
}

pub(crate) fn req(len: usize, max_tokens: u32) -> SeqRequest {
    SeqRequest {
        prompt: (10..10 + len as u32).collect(),
        max_tokens,
        sampling: SamplingPolicy::Greedy,
        logprobs: None,
        speculative: false,
        cache_prompt: false,
        constraint: None,
    }
}

/// The token-out of `b` with `token` for every sampling entry.
pub(crate) fn answer(b: &PlannedBatch, token: u32) -> Vec<u32> {
    let mut out = vec![NO_TOKEN; usize::from(b.table.capacity())];
    for (i, e) in b.table.entries().iter().enumerate() {
        if e.flags.contains(EntryFlags::SAMPLE) {
            out[i] = token;
        }
    }
    out
}

pub(crate) fn drain(s: &mut Scheduler) -> Vec<SeqOutput> {
    std::iter::from_fn(|| s.poll_output()).collect()
}

#[test]
fn a_request_takes_a_free_slot_and_its_first_chunk_resets_it_and_samples() {
    let mut s = Scheduler::new(cfg(2, 2, 4, 64));
    let id = s.submit(req(5, 3)).unwrap();
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens, vec![10, 11, 12, 13, 14]);
    let e = b.table.entries()[0];
    assert_eq!((e.first_position, e.tokens), (0, 5));
    assert!(e.flags.contains(EntryFlags::RESET | EntryFlags::SAMPLE));
    assert!(s.next_batch().is_none(), "a sequence never has two micro-batches in flight");
    s.batch_returned(&b.table, &answer(&b, 50)).unwrap();
    assert_eq!(drain(&mut s), vec![SeqOutput::Token { id, token: 50 }]);
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens, vec![50]);
    let e = b.table.entries()[0];
    assert_eq!((e.first_position, e.tokens, e.flags), (5, 1, EntryFlags::SAMPLE));
}

#[test]
fn a_sequence_ends_at_eos_max_tokens_or_a_full_context_and_frees_its_slot() {
    let mut s = Scheduler::new(cfg(1, 1, 0, 64));
    let a = s.submit(req(3, 2)).unwrap();
    for token in [40, 41] {
        let b = s.next_batch().unwrap();
        s.batch_returned(&b.table, &answer(&b, token)).unwrap();
    }
    let out = drain(&mut s);
    assert!(matches!(
        out.last(),
        Some(SeqOutput::Finished { id, reason: FinishReason::MaxTokens, generated, .. })
            if *id == a && generated == &vec![40, 41]
    ));
    assert_eq!(s.free_slots(), 1);

    let b_id = s.submit(req(3, 9)).unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, EOS)).unwrap();
    assert!(matches!(
        drain(&mut s).last(),
        Some(SeqOutput::Finished { id, reason: FinishReason::Eos, generated, .. })
            if *id == b_id && generated.is_empty()
    ));

    // 31 prompt tokens in a context of 32: the second token would not fit.
    let c = s.submit(req(31, 9)).unwrap();
    for token in [40, 41] {
        let b = s.next_batch().unwrap();
        s.batch_returned(&b.table, &answer(&b, token)).unwrap();
    }
    assert!(matches!(
        drain(&mut s).last(),
        Some(SeqOutput::Finished { id, reason: FinishReason::ContextFull, .. }) if *id == c
    ));
    assert!(s.is_idle());
}

#[test]
fn requests_are_refused_when_busy_too_long_or_empty_and_nothing_changes() {
    let mut s = Scheduler::new(cfg(1, 1, 1, 64));
    s.submit(req(3, 2)).unwrap();
    s.submit(req(3, 2)).unwrap(); // queued
    assert_eq!(s.submit(req(3, 2)), Err(Refusal::Busy(1)));
    assert_eq!(s.submit(req(33, 2)), Err(Refusal::TooLong { prompt: 33, max: 32 }));
    assert_eq!(s.submit(req(0, 2)), Err(Refusal::EmptyPrompt));
    let hot = SeqRequest {
        sampling: SamplingPolicy::Sample { temperature: -1.0, top_k: None, top_p: None, seed: 0 },
        ..req(3, 2)
    };
    assert_eq!(s.submit(hot), Err(Refusal::BadSampling));
    assert_eq!((s.live(), s.queued()), (1, 1));
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_beside_the_decoding_sequences() {
    let mut s = Scheduler::new(cfg(2, 1, 4, 4));
    let a = s.submit(req(2, 9)).unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 40)).unwrap();
    let long = s.submit(req(7, 9)).unwrap();
    // Budget 4: a's decode row, then 3 rows of the long prompt (no sample yet).
    let b = s.next_batch().unwrap();
    let e = b.table.entries();
    assert_eq!(e.len(), 2);
    assert_eq!((e[0].slot, e[0].tokens, e[0].flags), (0, 1, EntryFlags::SAMPLE));
    assert_eq!((e[1].first_position, e[1].tokens, e[1].flags), (0, 3, EntryFlags::RESET));
    s.batch_returned(&b.table, &answer(&b, 41)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries();
    assert_eq!((e[1].first_position, e[1].tokens, e[1].flags), (3, 3, EntryFlags::NONE));
    s.batch_returned(&b.table, &answer(&b, 42)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries();
    assert_eq!((e[1].first_position, e[1].tokens, e[1].flags), (6, 1, EntryFlags::SAMPLE));
    s.batch_returned(&b.table, &answer(&b, 43)).unwrap();
    let tokens: Vec<(SeqId, u32)> = drain(&mut s)
        .into_iter()
        .filter_map(|o| match o {
            SeqOutput::Token { id, token } => Some((id, token)),
            _ => None,
        })
        .collect();
    assert_eq!(tokens, vec![(a, 40), (a, 41), (a, 42), (a, 43), (long, 43)]);
}

#[test]
fn sequences_spread_over_the_groups_so_several_micro_batches_fly_at_once() {
    let mut s = Scheduler::new(cfg(6, 3, 0, 64));
    for _ in 0..6 {
        s.submit(req(2, 9)).unwrap();
    }
    let batches: Vec<PlannedBatch> = std::iter::from_fn(|| s.next_batch()).collect();
    assert_eq!(batches.len(), 3);
    assert!(batches.iter().all(|b| b.table.entries().len() == 2));
    assert_eq!(s.in_flight(), 3);
    // They come back in order; the group of the first may go again, the others wait.
    s.batch_returned(&batches[0].table, &answer(&batches[0], 40)).unwrap();
    let again = s.next_batch().unwrap();
    assert_eq!(again.group, batches[0].group);
    assert!(s.next_batch().is_none());
}

#[test]
fn a_cancelled_sequence_ends_now_or_when_its_micro_batch_returns() {
    let mut s = Scheduler::new(cfg(2, 2, 2, 64));
    let a = s.submit(req(3, 9)).unwrap();
    let b = s.next_batch().unwrap();
    s.cancel(a, FinishReason::Cancelled);
    assert!(drain(&mut s).is_empty(), "in flight: not yet");
    s.batch_returned(&b.table, &answer(&b, 40)).unwrap();
    assert_eq!(
        drain(&mut s),
        vec![SeqOutput::Finished {
            id: a,
            reason: FinishReason::Cancelled,
            prompt: vec![10, 11, 12],
            generated: vec![],
            cached: 0,
        }]
    );
    let c = s.submit(req(3, 9)).unwrap();
    s.cancel(c, FinishReason::Stop);
    assert!(matches!(drain(&mut s)[..], [SeqOutput::Finished { reason: FinishReason::Stop, .. }]));
    assert!(s.is_idle());
    assert_eq!(s.free_slots(), 2);
}

#[test]
fn a_reused_slot_is_reset_by_the_first_chunk_of_its_new_sequence() {
    let mut s = Scheduler::new(cfg(1, 1, 1, 64));
    s.submit(req(3, 1)).unwrap();
    let waiting = s.submit(req(4, 1)).unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 40)).unwrap();
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert_eq!((e.slot, e.first_position, e.tokens), (0, 0, 4));
    assert!(e.flags.contains(EntryFlags::RESET));
    s.batch_returned(&b.table, &answer(&b, 41)).unwrap();
    assert!(drain(&mut s).iter().any(
        |o| matches!(o, SeqOutput::Finished { id, reason: FinishReason::MaxTokens, .. } if *id == waiting)
    ));
}

#[test]
fn a_returned_batch_must_be_the_oldest_sent_with_tokens_for_its_sampling_entries() {
    let mut s = Scheduler::new(cfg(2, 2, 0, 64));
    assert_eq!(s.batch_returned(&BatchTable::new(2, vec![]), &[]), Err(ReturnError::Unexpected));
    s.submit(req(3, 9)).unwrap();
    s.submit(req(4, 9)).unwrap();
    let first = s.next_batch().unwrap();
    let second = s.next_batch().unwrap();
    assert_eq!(
        s.batch_returned(&second.table, &answer(&second, 40)),
        Err(ReturnError::TableMismatch)
    );
    assert_eq!(
        s.batch_returned(&first.table, &answer(&first, 100)),
        Err(ReturnError::OutOfVocab(100))
    );
    assert_eq!(
        s.batch_returned(&first.table, &answer(&first, NO_TOKEN)),
        Err(ReturnError::Malformed)
    );
    s.batch_returned(&first.table, &answer(&first, 40)).unwrap();
}

#[test]
fn a_failed_session_ends_every_queued_and_live_sequence_with_its_token_log() {
    let mut s = Scheduler::new(cfg(1, 1, 2, 64));
    let a = s.submit(req(3, 9)).unwrap();
    let q = s.submit(req(2, 9)).unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 40)).unwrap();
    s.next_batch().unwrap();
    drain(&mut s);
    s.fail_all(FinishReason::Fault);
    let out = drain(&mut s);
    assert!(out.contains(&SeqOutput::Finished {
        id: q,
        reason: FinishReason::Fault,
        prompt: vec![10, 11],
        generated: vec![],
        cached: 0,
    }));
    assert!(out.contains(&SeqOutput::Finished {
        id: a,
        reason: FinishReason::Fault,
        prompt: vec![10, 11, 12],
        generated: vec![40],
        cached: 0,
    }));
    assert!(s.is_idle());
    assert_eq!((s.in_flight(), s.free_slots()), (0, 1));
}

#[derive(Debug, Clone)]
enum Op {
    Submit(usize, u32),
    Cancel(u64),
    Inject,
    Return(u32),
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..40, 0u32..6).prop_map(|(l, m)| Op::Submit(l, m)),
        (0u64..30).prop_map(Op::Cancel),
        Just(Op::Inject),
        (0u32..8).prop_map(Op::Return),
    ]
}

proptest! {
    /// Random arrivals, cancellations and lengths: a sequence never has two micro-batches
    /// in flight, its rows continue its positions, no sequence is lost or finished twice,
    /// and when everything has drained every slot is free.
    #[test]
    fn random_traffic_never_doubles_a_sequence_loses_one_or_leaks_a_slot(
        ops in prop::collection::vec(arb_op(), 1..120),
        slots in 1u16..5, groups in 1u16..4, budget in 1u32..12,
    ) {
        let mut s = Scheduler::new(cfg(slots, groups, 3, budget));
        let mut flying: std::collections::VecDeque<PlannedBatch> = Default::default();
        let mut accepted = BTreeSet::new();
        let mut finished = BTreeSet::new();
        // slot -> next position expected
        let mut next_pos: BTreeMap<u32, u32> = BTreeMap::new();
        let check = |b: &PlannedBatch, flying: &std::collections::VecDeque<PlannedBatch>,
                     next_pos: &mut BTreeMap<u32, u32>| -> Result<(), TestCaseError> {
            let limits = crate::wire::batch::BatchLimits { capacity: slots, max_seq_len: 32, cache_blocks: 0, mask_bytes: 0 };
            prop_assert!(b.table.check(limits).is_ok());
            prop_assert!(b.table.total_tokens() <= u64::from(budget.max(u32::from(slots))));
            prop_assert_eq!(b.table.total_tokens() as usize, b.tokens.len());
            for e in b.table.entries() {
                for f in flying {
                    prop_assert!(f.table.entries().iter().all(|o| o.slot != e.slot),
                        "slot {} twice in flight", e.slot);
                }
                let expect = if e.flags.contains(EntryFlags::RESET) { 0 }
                    else { *next_pos.get(&e.slot).unwrap_or(&u32::MAX) };
                prop_assert_eq!(e.first_position, expect);
                next_pos.insert(e.slot, e.first_position + e.tokens);
            }
            Ok(())
        };
        let mut step = |s: &mut Scheduler, op: &Op, flying: &mut std::collections::VecDeque<PlannedBatch>,
                        next_pos: &mut BTreeMap<u32, u32>| -> Result<(), TestCaseError> {
            match *op {
                Op::Submit(len, max) => {
                    if let Ok(id) = s.submit(req(len, max)) {
                        accepted.insert(id);
                    }
                }
                Op::Cancel(id) => s.cancel(id, FinishReason::Cancelled),
                Op::Inject => {
                    if let Some(b) = s.next_batch() {
                        check(&b, flying, next_pos)?;
                        flying.push_back(b);
                    }
                }
                Op::Return(t) => {
                    if let Some(b) = flying.pop_front() {
                        s.batch_returned(&b.table, &answer(&b, t + 1)).map_err(|e| TestCaseError::fail(e.to_string()))?;
                    }
                }
            }
            for o in std::iter::from_fn(|| s.poll_output()) {
                if let SeqOutput::Finished { id, .. } = o {
                    prop_assert!(finished.insert(id), "{} finished twice", id);
                }
            }
            Ok(())
        };
        for op in &ops {
            step(&mut s, op, &mut flying, &mut next_pos)?;
        }
        // Drain: keep injecting and returning until idle.
        for _ in 0..10_000 {
            if s.is_idle() { break; }
            step(&mut s, &Op::Inject, &mut flying, &mut next_pos)?;
            step(&mut s, &Op::Return(3), &mut flying, &mut next_pos)?;
        }
        prop_assert!(s.is_idle());
        prop_assert_eq!(&accepted, &finished);
        prop_assert_eq!(s.free_slots(), usize::from(slots));
    }
}

#[test]
fn a_sequence_asking_for_logprobs_flags_its_sampling_entries_and_gets_them_before_each_token() {
    use crate::wire::logprobs::TokenLogprobs;
    let mut s = Scheduler::new(cfg(2, 1, 4, 64));
    let asks = s.submit(SeqRequest { logprobs: Some(2), ..req(3, 2) }).unwrap();
    let quiet = s.submit(req(2, 2)).unwrap();
    let b = s.next_batch().unwrap();
    let flags: Vec<(bool, u32)> = b
        .table
        .entries()
        .iter()
        .map(|e| (e.flags.contains(EntryFlags::LOGPROBS), e.sampling.top_logprobs))
        .collect();
    assert_eq!(flags, [(true, 2), (false, 0)]);
    let lp = TokenLogprobs { logprob: -0.25, top: vec![(50, -0.25), (7, -2.0)] };
    s.batch_returned_with(&b.table, &answer(&b, 50), &[Some(lp.clone()), None]).unwrap();
    assert_eq!(
        drain(&mut s),
        vec![
            SeqOutput::Logprobs { id: asks, logprobs: lp },
            SeqOutput::Token { id: asks, token: 50 },
            SeqOutput::Token { id: quiet, token: 50 },
        ]
    );
}

#[test]
fn a_plan_without_logprobs_never_asks_for_them_and_one_with_fewer_alternatives_cuts_the_request() {
    for (max, want) in [(None, (false, 0)), (Some(1), (true, 1))] {
        let mut s = Scheduler::new(SchedulerConfig { max_top_logprobs: max, ..cfg(1, 1, 4, 64) });
        s.submit(SeqRequest { logprobs: Some(5), ..req(3, 2) }).unwrap();
        let b = s.next_batch().unwrap();
        let e = b.table.entries()[0];
        assert_eq!((e.flags.contains(EntryFlags::LOGPROBS), e.sampling.top_logprobs), want);
    }
}

#[test]
fn a_prompt_arriving_while_others_decode_is_chunked_to_the_time_budget_and_moves_every_step() {
    let paced = SchedulerConfig {
        max_seq_len: 512,
        prefill_budget: Some(Duration::from_millis(100)),
        ..cfg(2, 1, 4, 512)
    };
    let mut s = Scheduler::new(paced);
    let a = s.submit(req(40, 50)).unwrap();
    // Alone, the first prompt goes whole; its round trip teaches the pacer: 40 rows in
    // 410 ms, 10 ms per row beside a 10 ms decode step.
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens.len(), 40);
    s.round_trip(Duration::from_millis(410), true);
    s.batch_returned(&b.table, &answer(&b, 50)).unwrap();
    let b = s.next_batch().unwrap();
    s.round_trip(Duration::from_millis(10), true);
    s.batch_returned(&b.table, &answer(&b, 51)).unwrap();
    let long = s.submit(req(100, 5)).unwrap();
    let mut chunks = Vec::new();
    while s.slots()[1].n_prompt_tokens_processed < 100 {
        let b = s.next_batch().unwrap();
        let e = b.table.entries();
        assert_eq!((e[0].slot, e[0].tokens), (0, 1), "the decoding sequence rides every step");
        chunks.push(e[1].tokens);
        s.batch_returned(&b.table, &answer(&b, 52)).unwrap();
    }
    // (100 ms - 10 ms) / 10 ms per row = 9 rows, raised to the least chunk.
    assert_eq!(chunks, vec![16, 16, 16, 16, 16, 16, 4]);
    let outs = drain(&mut s);
    assert!(outs.iter().any(|o| matches!(o, SeqOutput::Token { id, .. } if *id == long)));
    assert!(
        outs.iter().filter(|o| matches!(o, SeqOutput::Token { id, .. } if *id == a)).count() >= 7
    );
}

#[test]
fn a_lone_sequence_is_never_held_to_the_time_budget() {
    let paced = SchedulerConfig {
        max_seq_len: 512,
        prefill_budget: Some(Duration::from_millis(1)),
        ..cfg(2, 1, 4, 512)
    };
    let mut s = Scheduler::new(paced);
    s.submit(req(30, 1)).unwrap();
    let b = s.next_batch().unwrap();
    s.round_trip(Duration::from_millis(300), true);
    s.batch_returned(&b.table, &answer(&b, 50)).unwrap();
    s.submit(req(200, 1)).unwrap();
    assert_eq!(s.next_batch().unwrap().tokens.len(), 200);
}

#[test]
fn prompts_arriving_together_go_whole_and_one_arriving_beside_decoders_waits_for_the_pacer() {
    let paced = SchedulerConfig {
        max_seq_len: 512,
        prefill_budget: Some(Duration::from_millis(100)),
        ..cfg(4, 1, 4, 512)
    };
    let mut s = Scheduler::new(paced);
    let ids: Vec<SeqId> = (0..2).map(|_| s.submit(req(20, 4)).unwrap()).collect();
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens.len(), 40, "nobody decodes: both prompts at full size");
    s.batch_returned(&b.table, &answer(&b, 50)).unwrap();
    assert_eq!(drain(&mut s).len(), 2);
    // Two prompts arrive while both decode, before the cost is known: one at a time.
    s.submit(req(20, 4)).unwrap();
    s.submit(req(20, 4)).unwrap();
    let b = s.next_batch().unwrap();
    let rows: Vec<u32> = b.table.entries().iter().map(|e| e.tokens).collect();
    assert_eq!(rows, vec![1, 1, 20]);
    assert_eq!(ids.len(), 2);
}

/// A scheduler that speculates (k up to `k`), one slot, one group, context 64.
fn speculating(k: u8) -> Scheduler {
    Scheduler::new(SchedulerConfig { max_seq_len: 64, draft_max: k, ..cfg(1, 1, 4, 64) })
}

/// The token-out of a verifying batch: the target's token after every row (`target[i]`
/// after row `i`), split as the wire carries it.
fn verify_answer(b: &PlannedBatch, target: &[u32]) -> (Vec<u32>, Vec<Vec<u32>>) {
    let mut last = vec![NO_TOKEN; usize::from(b.table.capacity())];
    let (head, tail) = target.split_at(target.len() - 1);
    last[0] = tail[0];
    (last, vec![head.to_vec()])
}

#[test]
fn a_decoding_sequence_drafts_from_its_history_and_keeps_the_agreeing_prefix() {
    let mut s = speculating(4);
    // Prompt 11 12 13 11 12: after "11 12" came "13 11 12".
    let id = s
        .submit(SeqRequest { prompt: vec![11, 12, 13, 11, 12], speculative: true, ..req(1, 20) })
        .unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
    // History 11 12 13 11 12 13: the 3-gram matched at 0 -> draft "11 12 13".
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert!(e.flags.contains(EntryFlags::VERIFY | EntryFlags::SAMPLE));
    assert_eq!(b.tokens, vec![13, 11, 12, 13]);
    assert_eq!(e.first_position, 5);
    // The target agrees on "11 12", then says 19 instead of 13.
    let (last, verified) = verify_answer(&b, &[11, 12, 19, 17]);
    s.batch_returned_all(&b.table, &last, &[], &verified).unwrap();
    let got: Vec<u32> = drain(&mut s)
        .into_iter()
        .filter_map(|o| match o {
            SeqOutput::Token { token, .. } => Some(token),
            _ => None,
        })
        .collect();
    assert_eq!(got, vec![13, 11, 12, 19], "the agreeing prefix, then the target's own 19");
    assert_eq!(s.spec_counters(), SpecCounters { drafts: 1, draft_tokens: 3, accepted_tokens: 2 });
    // The stages hold row 3 of the draft: the next entry starts at the kept length and
    // rolls the rest back, in order, with its own rows.
    let b = s.next_batch().unwrap();
    let e = b.table.entries()[0];
    assert!(e.flags.contains(EntryFlags::ROLLBACK));
    assert_eq!(e.first_position, 8);
    assert_eq!(b.tokens[0], 19);
    let _ = id;
}

#[test]
fn a_crowded_group_drafts_nothing_unless_the_session_sets_a_draft_floor() {
    let verifying = |draft_min: u8| {
        let c = SchedulerConfig { max_seq_len: 64, draft_max: 4, draft_min, ..cfg(4, 1, 4, 64) };
        let mut s = Scheduler::new(c);
        for _ in 0..4 {
            let prompt = vec![11, 12, 13, 11, 12];
            s.submit(SeqRequest { prompt, speculative: true, ..req(1, 20) }).unwrap();
        }
        let b = s.next_batch().unwrap();
        s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
        let b = s.next_batch().unwrap();
        let entries = b.table.entries();
        entries.iter().filter(|e| e.flags.contains(EntryFlags::VERIFY)).count()
    };
    // Four sequences in one group: a row costs a step, so no length pays.
    assert_eq!(verifying(0), 0);
    assert_eq!(verifying(1), 4, "a floor drafts for every sequence the drafter can");
}

#[test]
fn a_fully_accepted_draft_needs_no_rollback_and_stops_at_max_tokens_or_eos_inside_it() {
    let mut s = speculating(4);
    s.submit(SeqRequest { prompt: vec![11, 12, 13, 11, 12], speculative: true, ..req(1, 3) })
        .unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
    let b = s.next_batch().unwrap();
    // max_tokens 3 with one generated: the draft is cut to the 2 tokens still wanted... by
    // room: k <= max_tokens - generated = 2.
    assert_eq!(b.tokens.len(), 3);
    let (last, verified) = verify_answer(&b, &[11, 12, 15]);
    s.batch_returned_all(&b.table, &last, &[], &verified).unwrap();
    let outs = drain(&mut s);
    assert!(matches!(
        outs.last(),
        Some(SeqOutput::Finished { reason: FinishReason::MaxTokens, generated, .. })
            if generated == &vec![13, 11, 12]
    ));
    // EOS among the accepted tokens ends the sequence there.
    let mut s = speculating(4);
    s.submit(SeqRequest { prompt: vec![11, 12, 13, 11, 12], speculative: true, ..req(1, 30) })
        .unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
    let b = s.next_batch().unwrap();
    let (last, verified) = verify_answer(&b, &[11, EOS, 14, 14]);
    s.batch_returned_all(&b.table, &last, &[], &verified).unwrap();
    let outs = drain(&mut s);
    assert!(matches!(
        outs.last(),
        Some(SeqOutput::Finished { reason: FinishReason::Eos, generated, .. })
            if generated == &vec![13, 11]
    ));
}

#[test]
fn sequences_that_opt_out_or_ask_for_logprobs_never_draft() {
    for r in [
        SeqRequest { prompt: vec![11, 12, 13, 11, 12], speculative: false, ..req(1, 9) },
        SeqRequest {
            prompt: vec![11, 12, 13, 11, 12],
            speculative: true,
            cache_prompt: true,
            logprobs: Some(1),
            ..req(1, 9)
        },
    ] {
        let mut s = speculating(4);
        s.submit(r).unwrap();
        let b = s.next_batch().unwrap();
        s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
        let b = s.next_batch().unwrap();
        assert_eq!(b.tokens, vec![13]);
        assert!(!b.table.entries()[0].flags.contains(EntryFlags::VERIFY));
    }
}

/// One ask as a drafter outside the core sees it: slot, history, k.
type Asked = (u16, Vec<u32>, usize);

/// The jobs `s` emitted since the last call: its warms `(slot, prompt)`, and its draft
/// requests.
fn jobs(s: &mut Scheduler) -> (Vec<(u16, Vec<u32>)>, Vec<crate::speculate::DraftRequest>) {
    let (mut warms, mut requests) = (Vec::new(), Vec::new());
    while let Some(job) = s.poll_draft_job() {
        match job {
            crate::speculate::DraftJob::Warm { slot, history } => warms.push((slot, history)),
            crate::speculate::DraftJob::Draft(r) => requests.push(r),
        }
    }
    (warms, requests)
}

fn asked(r: &crate::speculate::DraftRequest) -> Vec<Asked> {
    r.asks.iter().map(|a| (a.slot, a.history.clone(), a.k)).collect()
}

/// An answer to `r` that proposes too much (`k + 2` tokens counting up from 50).
fn too_long(r: &crate::speculate::DraftRequest) -> crate::speculate::DraftAnswer {
    let drafts = r.asks.iter().map(|a| (50..50 + a.k as u32 + 2).collect()).collect();
    crate::speculate::DraftAnswer { id: r.id, drafts, seconds_per_token: None }
}

#[test]
fn a_drafter_outside_is_asked_once_per_micro_batch_and_the_group_forms_with_its_answer() {
    let mut s =
        Scheduler::new(SchedulerConfig { max_seq_len: 64, draft_max: 3, ..cfg(3, 1, 4, 64) });
    s.draft_externally(RunId(5), 0.0);
    for (prompt, speculative) in [(vec![11, 12], true), (vec![21], false), (vec![31, 32, 33], true)]
    {
        s.submit(SeqRequest { prompt, speculative, ..req(1, 20) }).unwrap();
    }
    let b = s.next_batch().unwrap();
    // The speculating prompts, sent whole, are for the drafter to read meanwhile.
    let (warms, requests) = jobs(&mut s);
    assert_eq!(warms, vec![(0, vec![11, 12]), (2, vec![31, 32, 33])]);
    assert!(requests.is_empty(), "prompts are not drafted for");
    s.batch_returned(&b.table, &answer(&b, 7)).unwrap();
    // One request for the whole micro-batch: the two speculating sequences, with their
    // slot and history; the opted-out one is not asked for. The group waits for it.
    assert_eq!(s.next_batch(), None);
    let (_, requests) = jobs(&mut s);
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].id, crate::speculate::AskId { run: RunId(5), number: 0 });
    assert_eq!(asked(&requests[0]), vec![(0, vec![11, 12, 7], 3), (2, vec![31, 32, 33, 7], 3)]);
    assert_eq!(s.next_batch(), None, "still waiting, asked once");
    assert!(jobs(&mut s).1.is_empty());
    assert!(s.drafts_ready(too_long(&requests[0])));
    // Each draft is cut to the k asked for and rides after its sequence's last token.
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens, vec![7, 50, 51, 52, 7, 7, 50, 51, 52]);
    let flags: Vec<bool> =
        b.table.entries().iter().map(|e| e.flags.contains(EntryFlags::VERIFY)).collect();
    assert_eq!(flags, vec![true, false, true]);
}

#[test]
fn while_one_group_waits_for_its_drafts_the_others_go_on_and_answers_come_in_any_order() {
    let mut s =
        Scheduler::new(SchedulerConfig { max_seq_len: 64, draft_max: 2, ..cfg(2, 2, 4, 64) });
    s.draft_externally(RunId(1), 0.0);
    for prompt in [vec![11, 12], vec![31, 32]] {
        s.submit(SeqRequest { prompt, speculative: true, ..req(1, 20) }).unwrap();
    }
    let (a, b) = (s.next_batch().unwrap(), s.next_batch().unwrap());
    s.batch_returned(&a.table, &answer(&a, 7)).unwrap();
    assert_eq!(s.next_batch(), None, "group 0 waits; group 1 is in flight");
    s.batch_returned(&b.table, &answer(&b, 8)).unwrap();
    assert_eq!(s.next_batch(), None, "both wait");
    let (_, requests) = jobs(&mut s);
    assert_eq!(requests.len(), 2);
    // Group 1's answer first: it flies while group 0 still waits.
    assert!(s.drafts_ready(too_long(&requests[1])));
    let got = s.next_batch().unwrap();
    assert_eq!((got.group, got.tokens.clone()), (1, vec![8, 50, 51]));
    assert_eq!(s.next_batch(), None);
    assert!(s.drafts_ready(too_long(&requests[0])));
    assert_eq!(s.next_batch().unwrap().tokens, vec![7, 50, 51]);
}

#[test]
fn a_stale_or_given_up_answer_drafts_nothing_and_the_group_forms_without_it() {
    let mut s = speculating(4);
    s.draft_externally(RunId(1), 0.0);
    let id = s
        .submit(SeqRequest { prompt: vec![11, 12, 13, 11, 12], speculative: true, ..req(1, 20) })
        .unwrap();
    let b = s.next_batch().unwrap();
    s.batch_returned(&b.table, &answer(&b, 13)).unwrap();
    assert_eq!(s.next_batch(), None);
    let (_, requests) = jobs(&mut s);
    // Another run's answer with the same number is not this one's.
    let mut foreign = too_long(&requests[0]);
    foreign.id.run = RunId(2);
    assert!(!s.drafts_ready(foreign));
    assert_eq!(s.next_batch(), None);
    // The wait is given up: the group forms without a draft, and the late answer is
    // ignored.
    s.give_up_ask(requests[0].id);
    let b = s.next_batch().unwrap();
    assert_eq!(b.tokens, vec![13]);
    assert!(!b.table.entries()[0].flags.contains(EntryFlags::VERIFY));
    assert!(!s.drafts_ready(too_long(&requests[0])));
    s.batch_returned(&b.table, &answer(&b, 14)).unwrap();
    // A sequence that ends while its group waits: the wait ends with it, and its answer
    // drafts for nobody.
    assert_eq!(s.next_batch(), None);
    let (_, requests) = jobs(&mut s);
    assert_eq!(requests[0].id.number, 1);
    s.cancel(id, FinishReason::Cancelled);
    assert_eq!(s.next_batch(), None);
    assert!(!s.drafts_ready(too_long(&requests[0])));
    assert!(s.is_idle());
}

#[test]
fn a_drafter_as_costly_as_the_target_is_never_asked() {
    let mut s = speculating(4);
    s.draft_externally(RunId(1), 1.0);
    s.submit(SeqRequest { prompt: vec![11, 12], speculative: true, ..req(1, 40) }).unwrap();
    for _ in 0..30 {
        let b = s.next_batch().unwrap();
        assert_eq!(b.tokens.len(), if b.table.entries()[0].first_position == 0 { 2 } else { 1 });
        s.batch_returned(&b.table, &answer(&b, 7)).unwrap();
    }
    assert!(jobs(&mut s).1.is_empty(), "a draft step costing a whole step never pays");
}

/// A grammar that allows only `next`, then `next + 1`, ... (and records what was
/// committed).
struct Only {
    next: u32,
    committed: std::sync::Arc<std::sync::Mutex<Vec<u32>>>,
}

impl crate::model::constraint::Constraint for Only {
    fn mask(&mut self) -> crate::wire::mask::MaskSet {
        crate::wire::mask::MaskSet::Ids(vec![self.next])
    }
    fn commit(&mut self, token: u32) {
        self.committed.lock().unwrap().push(token);
        self.next += 1;
    }
    fn masks_along(&mut self, draft: &[u32]) -> Vec<crate::wire::mask::MaskSet> {
        let mut n = self.next;
        let mut out = vec![crate::wire::mask::MaskSet::Ids(vec![n])];
        for &d in draft {
            if d != n {
                break;
            }
            n += 1;
            out.push(crate::wire::mask::MaskSet::Ids(vec![n]));
        }
        out
    }
}

#[test]
fn a_constrained_sequence_carries_its_mask_on_every_sampling_row_and_commits_what_it_keeps() {
    use crate::model::constraint::SharedConstraint;
    use crate::wire::mask::MaskSet;
    let committed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let only = Only { next: 40, committed: committed.clone() };
    let mut c = cfg(2, 1, 4, 64);
    let refused = Scheduler::new(c).submit(SeqRequest {
        constraint: Some(SharedConstraint::new(Only { next: 0, committed: Default::default() })),
        ..req(2, 2)
    });
    assert_eq!(refused, Err(Refusal::Unconstrained), "a session without a mask section");
    c.mask_bytes = 256;
    c.draft_max = 4;
    let mut s = Scheduler::new(c);
    // The prompt repeats what the grammar will allow, so the n-gram drafter proposes it.
    let a = s
        .submit(SeqRequest {
            prompt: vec![40, 41, 42, 43, 44, 45, 9],
            constraint: Some(SharedConstraint::new(only)),
            speculative: true,
            ..req(0, 6)
        })
        .unwrap();
    let free = s.submit(req(3, 3)).unwrap();
    let mut verified_rows = 0;
    while s.live() > 0 {
        let Some(b) = s.next_batch() else { break };
        let mut out = answer(&b, 99);
        let mut verify = vec![Vec::new(); b.table.entries().len()];
        for m in b.table.masks() {
            let e = b.table.entries()[usize::from(m.entry)];
            let MaskSet::Ids(ids) = &m.set else { panic!("ids") };
            assert!(usize::from(m.row) < e.tokens as usize);
            // The stage samples the allowed token on every masked row.
            if usize::from(m.row) + 1 == e.tokens as usize {
                out[usize::from(m.entry)] = ids[0];
            } else {
                verify[usize::from(m.entry)].push(ids[0]);
                verified_rows += 1;
            }
        }
        s.batch_returned_all(&b.table, &out, &[], &verify).unwrap();
    }
    assert!(verified_rows > 0, "the constrained sequence drafted, its rows masked");
    assert_eq!(*committed.lock().unwrap(), vec![40, 41, 42, 43, 44, 45]);
    let out = drain(&mut s);
    assert!(out.iter().any(|o| matches!(o, SeqOutput::Finished { id, .. } if *id == a)));
    assert!(out.iter().any(|o| matches!(o, SeqOutput::Finished { id, .. } if *id == free)));
}
