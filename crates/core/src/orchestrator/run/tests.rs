//! Orchestrator run state machine contract tests (DESIGN.md 4.4).
#![allow(clippy::disallowed_methods)] // tests own the clock

use std::collections::BTreeMap;

use super::*;
use crate::events::TeardownPart;
use crate::model::{ModelBytes, ModelFacts, RopeFacts};
use crate::planner::pool::{OrchestratorEntry, PoolNode};
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::wire::reason::{ControlFault, MembershipLoss, RingFault, StreamFault, WeightsFailure};
use crate::wire::{ActivationDType, RuntimeConfig, SamplingPolicy, WeightSource};

const EOS: u32 = 2;

fn the_plan(max_tokens: u32) -> RunPlan {
    plan_with(max_tokens, 1)
}

/// The plan of a 3-stage session with `slots` sequence slots.
pub(crate) fn plan_with(max_tokens: u32, slots: u32) -> RunPlan {
    let facts = ModelFacts {
        architecture: "llama".into(),
        arch: Default::default(),
        name: None,
        block_count: 6,
        hidden_size: 64,
        feed_forward_length: None,
        head_count: 4,
        head_count_kv: 2,
        head_dim: 16,
        context_length: 512,
        vocab_size: 300,
        bos_token_id: None,
        eos_token_id: Some(EOS),
        eot_token_id: None,
        tokenizer_model: None,
        tokenizer_pre: None,
        rope: RopeFacts { freq_base: 10000.0, dimension_count: 16 },
        rms_norm_eps: 1e-5,
        tied_embeddings: true,
        bytes: ModelBytes {
            per_block: vec![1 << 16; 6],
            active_per_block: Vec::new(),
            embedding: 1 << 16,
            head: 1 << 16,
            tensors: 1 << 20,
            file: 1 << 20,
            formats: Default::default(),
        },
        tensor_types: BTreeMap::new(),
        vocab_digest: None,
    };
    let pool = Pool {
        orchestrator: OrchestratorEntry {
            node_id: NodeId(100),
            endpoint_id: None,
            addrs: vec![],
            relay: None,
        },
        nodes: (1..=3)
            .map(|i| PoolNode {
                node_id: NodeId(i),
                endpoint_id: format!("{i:064x}"),
                addrs: vec!["127.0.0.1:1".parse().expect("addr")],
                relay: None,
                memory_bytes: 1 << 33,
                device: None,
                prompt_cache_bytes: None,
                arena_bytes: None,
                speed: None,
                rtt_us: None,
                links: Vec::new(),
            })
            .collect(),
        placement: None,
    };
    plan(&PlanRequest {
        run_id: RunId(5),
        model: &facts,
        source: WeightSource::Local { path: "/m".into() },
        pool: &pool,
        stages: Some(3),
        placement: Placement::default(),
        runtime: RuntimeConfig {
            max_seq_len: 128,
            kv_cache: Default::default(),
            activation_dtype: ActivationDType::F32,
            max_tokens,
            sampling: SamplingPolicy::Greedy,
            max_sequences: slots,
            max_top_logprobs: None,
            mask_bytes: 0,
        },
        prompt_tokens: 4,
        fit_context: false,
        prompt_cache_bytes: None,
        min_speedup: None,
    })
    .expect("plan")
}

/// The table the session sends for step `k` of its one request (a prompt of
/// `prompt_len`), in slot 0.
fn table_for(prompt_len: u32, k: u64) -> BatchTable {
    use crate::wire::batch::{BatchEntry, EntrySampling};
    let (first, tokens, flags) = if k == 0 {
        (0, prompt_len, EntryFlags::RESET | EntryFlags::SAMPLE)
    } else {
        (prompt_len + k as u32 - 1, 1, EntryFlags::SAMPLE)
    };
    BatchTable::new(
        1,
        vec![BatchEntry {
            slot: 0,
            first_position: first,
            tokens,
            flags,
            sampling: EntrySampling::default(),
        }],
    )
}

fn inject_for(prompt_len: u32, k: u64, tokens: &[u32]) -> RunCommand {
    let mut payload = table_for(prompt_len, k).encode();
    payload.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    RunCommand::Inject {
        object_id: ObjectId(k + 1),
        sequence: Sequence(k),
        payload,
        prefill: k == 0,
    }
}

/// The token-out payload of step `k` of `running`'s request (a 4-token prompt).
fn out(seq: Sequence, token: u32) -> Vec<u8> {
    let mut payload = table_for(4, seq.0).encode();
    payload.extend_from_slice(&token.to_le_bytes());
    payload
}

const T: RunTimeouts = RunTimeouts {
    readiness: Duration::from_secs(10),
    token: Duration::from_secs(5),
    teardown: Duration::from_secs(3),
};

fn drain(f: &mut RunFsm) -> (Vec<RunCommand>, Vec<Event>) {
    (
        std::iter::from_fn(|| f.poll_command()).collect(),
        std::iter::from_fn(|| f.poll_event()).collect(),
    )
}

fn running(max_tokens: u32) -> (RunFsm, Instant) {
    let now = Instant::now();
    let mut f = RunFsm::start_one(now, &the_plan(max_tokens), vec![10, 11, 12, 13], T);
    drain(&mut f);
    for s in 0..3u32 {
        f.stage_ready(now, RunId(5), StageIndex(s), NodeId(u64::from(s) + 1)).expect("ready");
    }
    f.token_endpoints_ready(now);
    drain(&mut f);
    (f, now)
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(Event::kind).collect()
}

#[test]
fn provisioning_goes_to_every_stage_at_once_and_the_prompt_waits_for_the_barrier() {
    let now = Instant::now();
    let mut f = RunFsm::start_one(now, &the_plan(8), vec![10, 11], T);
    let (cmds, events) = drain(&mut f);
    assert_eq!(
        cmds,
        vec![
            RunCommand::Provision(StageIndex(0)),
            RunCommand::Provision(StageIndex(1)),
            RunCommand::Provision(StageIndex(2)),
            RunCommand::StartTokenEndpoints
        ]
    );
    assert_eq!(
        kinds(&events),
        [
            "run_planned",
            "stage_provision_started",
            "stage_provision_started",
            "stage_provision_started"
        ]
    );
    f.stage_ready(now, RunId(5), StageIndex(0), NodeId(1)).expect("ready");
    f.stage_ready(now, RunId(5), StageIndex(0), NodeId(1)).expect("duplicate counts once");
    assert_eq!(
        f.stage_ready(now, RunId(6), StageIndex(1), NodeId(2)),
        Err(RunInputError::ForeignRun)
    );
    assert_eq!(
        f.stage_ready(now, RunId(5), StageIndex(7), NodeId(2)),
        Err(RunInputError::UnknownStage)
    );
    assert_eq!(
        f.stage_ready(now, RunId(5), StageIndex(1), NodeId(3)),
        Err(RunInputError::UnknownStage),
        "from the wrong node"
    );
    f.stage_ready(now, RunId(5), StageIndex(1), NodeId(2)).expect("ready");
    f.token_endpoints_ready(now);
    assert!(drain(&mut f).0.is_empty(), "no injection before every stage is ready");
    f.stage_ready(now, RunId(5), StageIndex(2), NodeId(3)).expect("ready");
    let (cmds, events) = drain(&mut f);
    assert_eq!(cmds, vec![inject_for(2, 0, &[10, 11])]);
    assert_eq!(kinds(&events), ["stage_ready", "readiness_barrier_passed", "prompt_injected"]);
}

#[test]
fn each_token_is_injected_back_only_after_it_arrived_and_max_tokens_completes() {
    let (mut f, now) = running(3);
    for (k, tok) in [(0u64, 50u32), (1, 51)] {
        f.token_received(now, ObjectId(k + 1), Sequence(k), &out(Sequence(k), tok));
        let (cmds, _) = drain(&mut f);
        assert_eq!(cmds, vec![inject_for(4, k + 1, &[tok])]);
    }
    f.token_received(now, ObjectId(3), Sequence(2), &out(Sequence(2), 52));
    let (cmds, events) = drain(&mut f);
    assert!(!cmds.iter().any(|c| matches!(c, RunCommand::Inject { .. })));
    assert!(events.contains(&Event::RunCompleted {
        run_id: RunId(5),
        tokens: 3,
        cause: CompletionCause::MaxTokens
    }));
    assert_eq!(f.outcome(), Some(RunOutcome::Completed));
}

#[test]
fn eos_completes_and_teardown_ends_with_one_run_torn_down_last() {
    let (mut f, now) = running(10);
    f.token_received(now, ObjectId(1), Sequence(0), &out(Sequence(0), EOS));
    let (cmds, events) = drain(&mut f);
    assert_eq!(
        cmds,
        vec![
            RunCommand::StopRun(StageIndex(0)),
            RunCommand::StopRun(StageIndex(1)),
            RunCommand::StopRun(StageIndex(2)),
            RunCommand::StopTokenEndpoints
        ]
    );
    assert_eq!(
        kinds(&events),
        ["token_received", "run_completed", "stop_run_sent", "stop_run_sent", "stop_run_sent"]
    );
    for s in 0..3u32 {
        f.stage_stopped(RunId(5), StageIndex(s), NodeId(u64::from(s) + 1)).expect("stopped");
        f.stage_stopped(RunId(5), StageIndex(s), NodeId(u64::from(s) + 1))
            .expect("duplicate ignored");
    }
    let (_, events) = drain(&mut f);
    assert_eq!(kinds(&events), ["stage_stopped", "stage_stopped", "stage_stopped"]);
    assert!(f.awaits_token_endpoints(), "the token endpoints have not stopped yet");
    f.token_endpoints_stopped();
    let (_, events) = drain(&mut f);
    assert_eq!(
        events,
        [Event::RunTornDown {
            run_id: RunId(5),
            outcome: RunOutcome::Completed,
            unconfirmed: vec![],
            lost: vec![],
            lost_nodes: vec![]
        }]
    );
    assert!(f.is_done());
    f.handle_timeout(now + Duration::from_secs(100));
    assert!(drain(&mut f).1.is_empty(), "run_torn_down exactly once");
}

#[test]
fn the_first_fault_is_kept_and_there_is_one_terminal_outcome() {
    let (mut f, now) = running(10);
    f.fault(
        now,
        WeightsFailure::DownloadFailed.into(),
        Component::Weights,
        Some(NodeId(2)),
        Some(StageIndex(1)),
        None,
    );
    f.fault(now, StreamFault::WriteFailed.into(), Component::Driver, None, None, None);
    f.operator_stop(now, OperatorStop::Interrupt);
    f.token_received(now, ObjectId(1), Sequence(0), &out(Sequence(0), 5));
    let (_, events) = drain(&mut f);
    let terminal: Vec<&Event> = events.iter().filter(|e| e.is_terminal_outcome()).collect();
    assert_eq!(terminal.len(), 1);
    assert!(matches!(
        terminal[0],
        Event::RunFaulted { reason: FaultReason::Weights(WeightsFailure::DownloadFailed), .. }
    ));
}

#[test]
fn an_out_of_order_or_out_of_vocabulary_token_faults_the_run() {
    let (mut f, now) = running(10);
    f.token_received(now, ObjectId(2), Sequence(1), &out(Sequence(1), 7));
    assert!(drain(&mut f).1.iter().any(|e| matches!(
        e,
        Event::RunFaulted { reason: FaultReason::Token(TokenFault::OutOfOrder), .. }
    )));
    let (mut f, now) = running(10);
    f.token_received(now, ObjectId(1), Sequence(0), &out(Sequence(0), 300));
    assert!(drain(&mut f).1.iter().any(|e| matches!(
        e,
        Event::RunFaulted { reason: FaultReason::Token(TokenFault::OutOfVocab), .. }
    )));
}

#[test]
fn operator_stop_and_timeouts_end_in_teardown_even_if_stages_never_answer() {
    let (mut f, now) = running(10);
    f.operator_stop(now, OperatorStop::Interrupt);
    let (_, events) = drain(&mut f);
    assert_eq!(
        events[0],
        Event::RunStopped { run_id: RunId(5), reason: OperatorStop::Interrupt.into() }
    );
    f.handle_timeout(now + Duration::from_secs(2));
    assert!(drain(&mut f).1.is_empty(), "not before the teardown deadline");
    f.handle_timeout(now + T.teardown);
    let all = [0, 1, 2].map(|s| TeardownPart::Stage { stage_index: StageIndex(s) });
    assert_eq!(
        drain(&mut f).1,
        vec![Event::RunTornDown {
            run_id: RunId(5),
            outcome: RunOutcome::OperatorStopped,
            unconfirmed: [&all[..], &[TeardownPart::TokenEndpoints]].concat(),
            lost: vec![],
            lost_nodes: vec![]
        }]
    );

    let now = Instant::now();
    let mut f = RunFsm::start_one(now, &the_plan(4), vec![1], T);
    drain(&mut f);
    f.handle_timeout(now + T.readiness);
    assert!(drain(&mut f).1.iter().any(|e| matches!(
        e,
        Event::RunFaulted { reason: FaultReason::Timeout(Timeout::Readiness), .. }
    )));
}

#[test]
fn a_full_context_completes_the_run_before_the_step_that_would_overflow_it() {
    // max_seq_len 128, a 4-token prompt: 124 tokens fit back into the KV caches; the
    // 125th is still delivered, but feeding it would overflow, so the run completes.
    let (mut f, now) = running(1000);
    for k in 0..124u64 {
        f.token_received(now, ObjectId(k + 1), Sequence(k), &out(Sequence(k), 50));
        let (cmds, _) = drain(&mut f);
        assert!(
            matches!(cmds.as_slice(), [RunCommand::Inject { sequence, .. }] if *sequence == Sequence(k + 1)),
            "token {k} is fed back: {cmds:?}"
        );
    }
    f.token_received(now, ObjectId(125), Sequence(124), &out(Sequence(124), 50));
    let (cmds, events) = drain(&mut f);
    assert!(!cmds.iter().any(|c| matches!(c, RunCommand::Inject { .. })), "{cmds:?}");
    assert!(events.contains(&Event::RunCompleted {
        run_id: RunId(5),
        tokens: 125,
        cause: CompletionCause::ContextFull
    }));
    assert_eq!(f.outcome(), Some(RunOutcome::Completed));
}

#[test]
fn run_torn_down_waits_for_the_token_endpoints_and_every_stage_in_any_order() {
    let (mut f, now) = running(10);
    f.token_received(now, ObjectId(1), Sequence(0), &out(Sequence(0), EOS));
    drain(&mut f);
    f.token_endpoints_stopped();
    f.stage_stopped(RunId(5), StageIndex(0), NodeId(1)).expect("stopped");
    f.stage_stopped(RunId(5), StageIndex(2), NodeId(3)).expect("stopped");
    assert!(!drain(&mut f).1.iter().any(|e| e.kind() == "run_torn_down"), "stage 1 is missing");
    f.stage_stopped(RunId(5), StageIndex(1), NodeId(2)).expect("stopped");
    assert_eq!(kinds(&drain(&mut f).1), ["stage_stopped", "run_torn_down"]);
    assert!(f.is_done());
}

#[test]
fn a_lost_node_is_reported_lost_never_stopped_and_settles_its_stage_for_teardown() {
    let (mut f, now) = running(10);
    let down = FaultReason::Membership(MembershipLoss::NodeDown);
    f.node_lost(now, NodeId(42), down, Component::Membership);
    assert_eq!(drain(&mut f), (vec![], vec![]), "a node outside the plan changes nothing");
    f.node_lost(now, NodeId(2), down, Component::Membership);
    let (cmds, events) = drain(&mut f);
    assert_eq!(
        kinds(&events),
        ["run_faulted", "stop_run_sent", "stop_run_sent", "stop_run_sent", "stage_lost"]
    );
    assert!(matches!(
        events[0],
        Event::RunFaulted { node_id: Some(NodeId(2)), component: Component::Membership, .. }
    ));
    assert_eq!(
        events[4],
        Event::StageLost {
            run_id: RunId(5),
            node_id: NodeId(2),
            stage_index: StageIndex(1),
            reason: down
        }
    );
    assert!(cmds.contains(&RunCommand::StopTokenEndpoints));
    // Its session closing as well: lost once.
    let closed = FaultReason::Control(ControlFault::ConnectionLost);
    f.node_lost(now, NodeId(2), closed, Component::ControlChannel);
    assert!(drain(&mut f).1.is_empty());
    f.stage_stopped(RunId(5), StageIndex(0), NodeId(1)).expect("stopped");
    f.stage_stopped(RunId(5), StageIndex(2), NodeId(3)).expect("stopped");
    f.token_endpoints_stopped();
    let (_, events) = drain(&mut f);
    assert!(
        !events.iter().any(|e| matches!(e, Event::StageStopped { stage_index: StageIndex(1), .. }))
    );
    assert_eq!(
        events.last(),
        Some(&Event::RunTornDown {
            run_id: RunId(5),
            outcome: RunOutcome::Faulted,
            unconfirmed: vec![],
            lost: vec![StageIndex(1)],
            lost_nodes: vec![NodeId(2)]
        }),
        "settled before the deadline, the lost stage named"
    );
}

#[test]
fn at_the_teardown_deadline_run_torn_down_names_the_parts_that_did_not_confirm() {
    let (mut f, now) = running(10);
    f.operator_stop(now, OperatorStop::Terminate);
    drain(&mut f);
    f.stage_stopped(RunId(5), StageIndex(0), NodeId(1)).expect("stopped");
    f.stage_stopped(RunId(5), StageIndex(1), NodeId(2)).expect("stopped");
    f.stage_stopped(RunId(5), StageIndex(2), NodeId(3)).expect("stopped");
    assert!(drain(&mut f).1.iter().all(|e| e.kind() == "stage_stopped"), "endpoints pending");
    f.handle_timeout(now + T.teardown);
    assert_eq!(
        drain(&mut f).1,
        [Event::RunTornDown {
            run_id: RunId(5),
            outcome: RunOutcome::OperatorStopped,
            unconfirmed: vec![TeardownPart::TokenEndpoints],
            lost: vec![],
            lost_nodes: vec![]
        }]
    );
}

fn reported_faults(events: &[Event]) -> Vec<(FaultReason, Component)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RunFaulted { reason, component, .. } => Some((*reason, *component)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_consequence_that_comes_first_gives_way_to_its_cause_within_the_settle_window() {
    // A killed worker on node 2: node 1's send pump sees its stream break and may report
    // before node 2 reports the crash that broke it.
    let (mut f, now) = running(10);
    let write_failed = FaultReason::Stream(StreamFault::WriteFailed);
    f.fault(now, write_failed, Component::TxEdge, Some(NodeId(1)), Some(StageIndex(0)), None);
    assert_eq!(f.outcome(), Some(RunOutcome::Faulted), "the outcome is decided at once");
    assert_eq!(drain(&mut f), (vec![], vec![]), "nothing is reported or stopped yet");
    assert_eq!(f.poll_timeout(), Some(now + SETTLE));
    // Meanwhile the pipeline is broken: a token or a stop changes nothing.
    f.token_received(now, ObjectId(1), Sequence(0), &out(Sequence(0), 5));
    f.operator_stop(now, OperatorStop::Interrupt);
    f.fault(now, ControlFault::ConnectionLost.into(), Component::ControlChannel, None, None, None);
    assert_eq!(drain(&mut f), (vec![], vec![]));
    let crashed = FaultReason::Ring(RingFault::WorkerCrashed);
    let later = now + SETTLE - Duration::from_millis(1);
    f.fault(later, crashed, Component::WorkerCtl, Some(NodeId(2)), Some(StageIndex(1)), None);
    let (cmds, events) = drain(&mut f);
    assert_eq!(reported_faults(&events), [(crashed, Component::WorkerCtl)]);
    assert_eq!(kinds(&events)[0], "run_faulted");
    assert!(cmds.contains(&RunCommand::StopTokenEndpoints), "teardown starts with the report");
    f.handle_timeout(now + SETTLE);
    f.fault(now + SETTLE, write_failed, Component::TxEdge, None, None, None);
    assert!(reported_faults(&drain(&mut f).1).is_empty(), "one run_faulted, ever");
}

#[test]
fn a_consequence_without_a_cause_is_reported_when_the_settle_window_ends() {
    let (mut f, now) = running(10);
    let lost = FaultReason::Control(ControlFault::ConnectionLost);
    f.fault(now, lost, Component::ControlChannel, Some(NodeId(3)), None, None);
    f.handle_timeout(now + SETTLE - Duration::from_millis(1));
    assert_eq!(drain(&mut f), (vec![], vec![]), "not before the window ends");
    f.handle_timeout(now + SETTLE);
    let (cmds, events) = drain(&mut f);
    assert_eq!(reported_faults(&events), [(lost, Component::ControlChannel)]);
    assert!(cmds.contains(&RunCommand::StopRun(StageIndex(0))));
    assert!(f.poll_timeout().is_some_and(|t| t > now + SETTLE), "no busy loop");
}

#[test]
fn a_cause_is_reported_at_once_and_no_later_fault_replaces_it() {
    let (mut f, now) = running(10);
    let crashed = FaultReason::Ring(RingFault::WorkerCrashed);
    f.fault(now, crashed, Component::WorkerCtl, Some(NodeId(2)), None, None);
    let write_failed = FaultReason::Stream(StreamFault::WriteFailed);
    f.fault(now, write_failed, Component::TxEdge, Some(NodeId(1)), None, None);
    f.fault(now, TokenFault::OutOfOrder.into(), Component::TokenEndpoint, None, None, None);
    assert_eq!(reported_faults(&drain(&mut f).1), [(crashed, Component::WorkerCtl)]);
    assert!(is_consequence(write_failed) && !is_consequence(crashed));
}

fn session_plan(slots: u32) -> RunPlan {
    plan_with(4, slots)
}

fn ready_session(plan: &RunPlan) -> (RunFsm, Instant) {
    let now = Instant::now();
    let mut f = RunFsm::start(now, plan, SessionLimits::default(), T);
    drain(&mut f);
    for s in 0..3u32 {
        f.stage_ready(now, RunId(5), StageIndex(s), NodeId(u64::from(s) + 1)).expect("ready");
    }
    f.token_endpoints_ready(now);
    drain(&mut f);
    (f, now)
}

/// Answers an injected micro-batch with `token` for each sampling entry.
fn answer(cmd: &RunCommand, capacity: u16, token: u32) -> (ObjectId, Sequence, Vec<u8>) {
    let RunCommand::Inject { object_id, sequence, payload, .. } = cmd else {
        panic!("not an injection: {cmd:?}")
    };
    let limits = BatchLimits { capacity, max_seq_len: 128, cache_blocks: 0, mask_bytes: 0 };
    let (table, _) = BatchTable::split_rows(payload, limits, 4).expect("a valid micro-batch");
    let mut out = table.encode();
    for i in 0..usize::from(capacity) {
        let samples = table.entries().get(i).is_some_and(|e| e.flags.contains(EntryFlags::SAMPLE));
        let t = if samples { token } else { crate::wire::batch::NO_TOKEN };
        out.extend_from_slice(&t.to_le_bytes());
    }
    (*object_id, *sequence, out)
}

fn req(len: u32, max_tokens: u32) -> SeqRequest {
    SeqRequest {
        prompt: (10..10 + len).collect(),
        max_tokens,
        sampling: SamplingPolicy::Greedy,
        logprobs: None,
        speculative: true,
        cache_prompt: false,
        constraint: None,
    }
}

#[test]
fn a_session_serves_several_requests_at_once_and_completes_when_its_closed_input_is_served() {
    let plan = session_plan(4);
    let (mut f, now) = ready_session(&plan);
    let ids: Vec<SeqId> = (0..3).map(|i| f.submit(now, req(3 + i, 2)).expect("admitted")).collect();
    // Nothing is injected twice for one sequence; every group flies at once.
    let (cmds, _) = drain(&mut f);
    assert_eq!(cmds.len(), 3, "one group per stage, three sequences: {cmds:?}");
    assert_eq!(f.poll_timeout(), Some(now + T.token), "the token deadline runs while in flight");
    f.close_input(now);
    let mut tokens = 0;
    let mut pending: std::collections::VecDeque<RunCommand> = cmds.into();
    while let Some(cmd) = pending.pop_front() {
        let (object, sequence, out) = answer(&cmd, 4, 50);
        f.token_received(now, object, sequence, &out);
        let (more, events) = drain(&mut f);
        pending.extend(more.into_iter().filter(|c| matches!(c, RunCommand::Inject { .. })));
        if let Some(Event::RunCompleted { tokens: n, cause, .. }) =
            events.iter().find(|e| e.kind() == "run_completed")
        {
            assert_eq!((*n, *cause), (6, CompletionCause::RequestsDone));
        }
        tokens += 1;
    }
    let outs: Vec<SeqOutput> = std::iter::from_fn(|| f.poll_output()).collect();
    for id in ids {
        assert!(outs.contains(&SeqOutput::Finished {
            id,
            reason: FinishReason::MaxTokens,
            prompt: (10..10 + 3 + id as u32).collect(),
            generated: vec![50, 50],
            cached: 0,
        }));
    }
    assert_eq!(tokens, 6, "three sequences, two steps each, one object per step each");
    assert_eq!(f.outcome(), Some(RunOutcome::Completed));
}

#[test]
fn a_session_fault_ends_every_live_sequence_with_its_token_log_and_refuses_new_requests() {
    let plan = session_plan(2);
    let (mut f, now) = ready_session(&plan);
    let a = f.submit(now, req(3, 9)).expect("a");
    let b = f.submit(now, req(2, 9)).expect("b");
    let queued = f.submit(now, req(2, 9)).expect("queued");
    let (cmds, _) = drain(&mut f);
    let (object, sequence, out) = answer(&cmds[0], 2, 70);
    f.token_received(now, object, sequence, &out);
    drain(&mut f);
    let crashed = FaultReason::Ring(RingFault::WorkerCrashed);
    f.fault(now, crashed, Component::WorkerCtl, Some(NodeId(2)), None, None);
    let outs: Vec<SeqOutput> = std::iter::from_fn(|| f.poll_output()).collect();
    let ended: Vec<(SeqId, FinishReason, usize)> = outs
        .iter()
        .filter_map(|o| match o {
            SeqOutput::Finished { id, reason, generated, .. } => {
                Some((*id, *reason, generated.len()))
            }
            _ => None,
        })
        .collect();
    assert!(ended.contains(&(queued, FinishReason::Fault, 0)), "{ended:?}");
    assert!(
        ended.contains(&(a, FinishReason::Fault, 1))
            || ended.contains(&(b, FinishReason::Fault, 1))
    );
    assert_eq!(ended.len(), 3);
    assert_eq!(f.submit(now, req(2, 9)), Err(Refusal::Busy(0)), "a faulted session takes nothing");
}

#[test]
fn a_token_out_object_with_another_table_than_the_one_sent_faults_the_session_as_malformed() {
    let plan = session_plan(2);
    let (mut f, now) = ready_session(&plan);
    f.submit(now, req(3, 9)).expect("a");
    let (cmds, _) = drain(&mut f);
    let (object, sequence, mut out) = answer(&cmds[0], 2, 70);
    out[16 + 4] ^= 1; // the entry's first position
    f.token_received(now, object, sequence, &out);
    assert!(drain(&mut f).1.iter().any(|e| matches!(
        e,
        Event::RunFaulted { reason: FaultReason::Token(TokenFault::Malformed), .. }
    )));
}

#[test]
fn a_request_arriving_while_others_decode_joins_and_a_cancelled_one_ends_when_its_batch_returns() {
    let plan = session_plan(4);
    let (mut f, now) = ready_session(&plan);
    let a = f.submit(now, req(3, 9)).expect("a");
    let (cmds, _) = drain(&mut f);
    let (object, sequence, out) = answer(&cmds[0], 4, 50);
    f.token_received(now, object, sequence, &out);
    let (cmds, _) = drain(&mut f);
    assert_eq!(cmds.len(), 1, "a decodes");
    // A new request while a's next micro-batch is in flight: injected in another group.
    let b = f.submit(now, req(2, 9)).expect("b");
    let (more, _) = drain(&mut f);
    assert_eq!(more.len(), 1, "b's prefill flies beside a's decode");
    // a is cancelled while in flight: it ends when its micro-batch returns, its token dropped.
    f.cancel(now, a, FinishReason::Cancelled);
    assert!(
        !std::iter::from_fn(|| f.poll_output()).any(|o| matches!(o, SeqOutput::Finished { .. }))
    );
    let (object, sequence, out) = answer(&cmds[0], 4, 51);
    f.token_received(now, object, sequence, &out);
    let outs: Vec<SeqOutput> = std::iter::from_fn(|| f.poll_output()).collect();
    assert_eq!(
        outs,
        vec![SeqOutput::Finished {
            id: a,
            reason: FinishReason::Cancelled,
            prompt: vec![10, 11, 12],
            generated: vec![50],
            cached: 0,
        }]
    );
    // b goes on (its next micro-batch flies at once); a stop string cancels it, and it
    // ends when that micro-batch returns.
    let (object, sequence, out) = answer(&more[0], 4, 60);
    f.token_received(now, object, sequence, &out);
    let (next, _) = drain(&mut f);
    let _ = std::iter::from_fn(|| f.poll_output()).count();
    f.cancel(now, b, FinishReason::Stop);
    let (object, sequence, out) = answer(&next[0], 4, 61);
    f.token_received(now, object, sequence, &out);
    assert!(std::iter::from_fn(|| f.poll_output()).any(
        |o| matches!(o, SeqOutput::Finished { id, reason: FinishReason::Stop, .. } if id == b)
    ));
}

/// The token ids an injection carries.
fn injected_rows(cmd: &RunCommand) -> Vec<u32> {
    let RunCommand::Inject { payload, .. } = cmd else { panic!("not an injection: {cmd:?}") };
    let limits = BatchLimits { capacity: 1, max_seq_len: 128, cache_blocks: 0, mask_bytes: 0 };
    let (_, rows) = BatchTable::split_rows(payload, limits, 4).expect("a valid micro-batch");
    rows.chunks(4).map(|r| u32::from_le_bytes([r[0], r[1], r[2], r[3]])).collect()
}

/// The draft requests among `f`'s jobs (warms skipped).
fn draft_requests(f: &mut RunFsm) -> Vec<crate::speculate::DraftRequest> {
    std::iter::from_fn(|| f.poll_draft_job())
        .filter_map(|j| match j {
            crate::speculate::DraftJob::Draft(r) => Some(r),
            crate::speculate::DraftJob::Warm { .. } => None,
        })
        .collect()
}

#[test]
fn a_session_drafting_outside_waits_for_its_answer_at_most_a_trip_and_ignores_stale_ones() {
    use crate::speculate::{AskId, DraftAnswer, DraftJob};
    let plan = session_plan(1);
    let now = Instant::now();
    let limits = SessionLimits { draft_max: 3, ..SessionLimits::default() };
    let mut f = RunFsm::start(now, &plan, limits, T);
    f.draft_externally(0.0);
    for s in 0..3u32 {
        f.stage_ready(now, RunId(5), StageIndex(s), NodeId(u64::from(s) + 1)).expect("ready");
    }
    f.token_endpoints_ready(now);
    drain(&mut f);
    f.submit(now, SeqRequest { prompt: vec![11, 12], ..req(2, 9) }).expect("admitted");
    let (cmds, _) = drain(&mut f);
    let warm = f.poll_draft_job();
    assert_eq!(warm, Some(DraftJob::Warm { slot: 0, history: vec![11, 12] }), "read in flight");
    let (object, sequence, out) = answer(&cmds[0], 1, 7);
    f.token_received(now, object, sequence, &out);
    // The decoding sequence's drafts are asked for; nothing flies until they come, and
    // before a plain trip was measured the wait is the token timeout.
    assert!(drain(&mut f).0.is_empty());
    let asked = draft_requests(&mut f);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].id, AskId { run: RunId(5), number: 0 });
    assert_eq!(asked[0].asks[0].history, vec![11, 12, 7]);
    assert_eq!(f.poll_timeout(), Some(now + T.token));
    // The wait runs out: the trip goes without a draft, and the late answer is ignored.
    let later = now + T.token;
    f.handle_timeout(later);
    let (cmds, _) = drain(&mut f);
    assert_eq!(injected_rows(&cmds[0]), vec![7]);
    let late = DraftAnswer { id: asked[0].id, drafts: vec![vec![1, 2]], seconds_per_token: None };
    f.drafts_ready(later, late);
    assert!(drain(&mut f).0.is_empty());
    // That plain trip, alone, is measured: the next wait is one trip.
    let back = later + Duration::from_millis(10);
    let (object, sequence, out) = answer(&cmds[0], 1, 8);
    f.token_received(back, object, sequence, &out);
    let asked = draft_requests(&mut f);
    assert_eq!(asked[0].id.number, 1);
    assert_eq!(f.poll_timeout(), Some(back + Duration::from_millis(10)));
    // Another run's answer is not this run's; this run's flies at once, cut to its k.
    let drafts = vec![vec![20, 21, 22, 23, 24]];
    let foreign = AskId { run: RunId(6), number: 1 };
    f.drafts_ready(
        back,
        DraftAnswer { id: foreign, drafts: drafts.clone(), seconds_per_token: None },
    );
    assert!(drain(&mut f).0.is_empty());
    let k = asked[0].asks[0].k;
    assert!(k >= 1);
    f.drafts_ready(back, DraftAnswer { id: asked[0].id, drafts, seconds_per_token: None });
    let (cmds, _) = drain(&mut f);
    let mut want = vec![8];
    want.extend((20..).take(k));
    assert_eq!(injected_rows(&cmds[0]), want);
}
