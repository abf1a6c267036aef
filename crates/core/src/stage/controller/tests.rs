//! StageController contract tests (DESIGN.md 4.5).

use super::*;
use crate::wire::reason::{ObjectFailure, StepFailure, WeightsFailure, WorkerFatal};
use crate::wire::{LayerRange, WorkerGeneration};

use super::fixtures::{HIDDEN, ORCH, prov};

fn handle(id: u64) -> DeviceHandle {
    DeviceHandle { generation: WorkerGeneration(1), id }
}

fn cmds(c: &mut StageController) -> Vec<StageCommand> {
    std::iter::from_fn(|| c.poll_command()).collect()
}

fn events(c: &mut StageController) -> Vec<StageEvent> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn ready(stage: u32, count: u32) -> StageController {
    let mut c = StageController::new(ORCH);
    c.provision(ORCH, prov(stage, count)).expect("provision");
    cmds(&mut c);
    events(&mut c);
    c.weights_ready(RunId(9), "/m.gguf".into(), 1000);
    c.role_ready();
    c.edge_ready(EdgeId(u64::from(stage) + 1));
    c.edge_ready(EdgeId(u64::from(stage) + 2));
    assert!(matches!(
        events(&mut c)[..],
        [StageEvent::WeightsLoaded { .. }, StageEvent::StageReady { .. }]
    ));
    assert!(
        matches!(
            cmds(&mut c).last(),
            Some(StageCommand::PostStep { step_id: StepId(1), sequence: Sequence(0), .. })
        ),
        "a ready stage posts the prefill's step ahead of its object"
    );
    c
}

#[test]
fn stage_ready_comes_only_after_role_and_both_edges() {
    let mut c = StageController::new(ORCH);
    c.provision(ORCH, prov(1, 3)).expect("provision");
    let c0 = cmds(&mut c);
    assert!(matches!(c0[0], StageCommand::ConfigureRole(_)));
    assert_eq!(
        c0[1..],
        [StageCommand::ProvisionRx(EdgeId(2)), StageCommand::ProvisionTx(EdgeId(3))]
    );
    assert_eq!(
        events(&mut c),
        vec![StageEvent::ProvisionStarted { run_id: RunId(9), stage_index: StageIndex(1) }]
    );
    c.edge_ready(EdgeId(2));
    c.weights_ready(RunId(9), "/m.gguf".into(), 1000);
    c.role_ready();
    assert!(matches!(events(&mut c)[..], [StageEvent::WeightsLoaded { .. }]));
    c.edge_ready(EdgeId(3));
    assert_eq!(
        events(&mut c),
        vec![StageEvent::StageReady { run_id: RunId(9), stage_index: StageIndex(1) }]
    );
}

#[test]
fn provisioning_from_anyone_but_the_orchestrator_or_inconsistent_is_rejected() {
    let mut c = StageController::new(ORCH);
    assert_eq!(c.provision(NodeId(5), prov(0, 2)), Err(StageFault::ProvisionRejected));
    let mut bad = prov(0, 2);
    bad.head = true;
    assert_eq!(c.provision(ORCH, bad), Err(StageFault::ProvisionRejected));
    let mut bad = prov(1, 2);
    bad.layers = LayerRange::new(2, 9);
    assert_eq!(c.provision(ORCH, bad), Err(StageFault::ProvisionRejected));
    assert!(cmds(&mut c).is_empty() && events(&mut c).is_empty(), "refusals change nothing");
    c.provision(ORCH, prov(0, 2)).expect("provision");
    assert_eq!(c.provision(ORCH, prov(0, 2)), Err(StageFault::AlreadyProvisioned));
}

#[test]
fn each_object_in_sequence_gives_exactly_one_step_and_steps_never_overlap() {
    let mut c = ready(1, 3);
    c.object_loaded(
        EdgeId(2),
        ObjectId(1),
        Sequence(0),
        5 * u64::from(HIDDEN) * 4,
        handle(1),
        None,
    );
    match &cmds(&mut c)[..] {
        [StageCommand::ExecuteStep { sequence, output_extent, input, .. }] => {
            assert_eq!(*sequence, Sequence(0));
            assert_eq!(*output_extent, 5 * u64::from(HIDDEN) * 4, "same rows out as in");
            assert_eq!(*input, handle(1));
        }
        other => panic!("{other:?}"),
    }
    c.object_loaded(EdgeId(2), ObjectId(2), Sequence(1), u64::from(HIDDEN) * 4, handle(2), None);
    assert!(cmds(&mut c).is_empty(), "one active step at a time");
    // Step 1 was the post the worker passed (it came after the object): step 2 ran.
    c.step_completed(StepId(1));
    assert!(cmds(&mut c).is_empty(), "only the active step completes");
    c.step_completed(StepId(2));
    assert!(matches!(cmds(&mut c)[..], [StageCommand::ExecuteStep { sequence: Sequence(1), .. }]));
    c.step_completed(StepId(3));
    assert!(matches!(cmds(&mut c)[..], [StageCommand::PostStep { sequence: Sequence(2), .. }]));
    assert!(events(&mut c).is_empty());
}

#[test]
fn the_last_stage_produces_one_token_per_step() {
    let mut c = ready(2, 3);
    c.object_loaded(
        EdgeId(3),
        ObjectId(1),
        Sequence(0),
        7 * u64::from(HIDDEN) * 4,
        handle(1),
        None,
    );
    assert!(matches!(cmds(&mut c)[..], [StageCommand::ExecuteStep { output_extent: 4, .. }]));
}

#[test]
fn duplicate_skipped_or_regressed_sequences_fault_the_stage() {
    for bad in [0u64, 3] {
        let mut c = ready(0, 2);
        c.object_loaded(EdgeId(1), ObjectId(1), Sequence(0), 16, handle(1), None);
        c.step_completed(StepId(2));
        assert!(matches!(
            cmds(&mut c)[..],
            [.., StageCommand::PostStep { step_id: StepId(3), .. }]
        ));
        c.object_loaded(EdgeId(1), ObjectId(2), Sequence(bad), 4, handle(2), None);
        assert_eq!(
            events(&mut c),
            vec![StageEvent::StageFault {
                run_id: RunId(9),
                stage_index: StageIndex(0),
                reason: FaultReason::Stage(StageFault::SequenceViolation)
            }]
        );
        c.object_loaded(EdgeId(1), ObjectId(3), Sequence(1), 4, handle(3), None);
        assert_eq!(
            cmds(&mut c),
            [
                StageCommand::ReleaseObject(handle(2)),
                StageCommand::WithdrawStep(StepId(3)),
                StageCommand::ReleaseObject(handle(3))
            ],
            "a faulted stage runs nothing: its post is withdrawn, the violating object and \
             later ones are freed"
        );
    }
}

#[test]
fn every_loaded_object_the_stage_does_not_take_is_released_not_dropped() {
    // Another edge's object, while ready.
    let mut c = ready(1, 3);
    c.object_loaded(EdgeId(7), ObjectId(1), Sequence(0), 16, handle(1), None);
    assert_eq!(cmds(&mut c), [StageCommand::ReleaseObject(handle(1))]);
    assert!(events(&mut c).is_empty(), "a stray object is freed, not a fault");
    // Objects waiting behind the active step are freed by the fault; one arriving while
    // the stage is faulted too.
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(2), None);
    c.object_loaded(EdgeId(2), ObjectId(2), Sequence(1), 256, handle(3), None);
    assert!(matches!(cmds(&mut c)[..], [StageCommand::ExecuteStep { .. }]));
    c.fault(FaultReason::Step(StepFailure::ComputeFailed));
    c.object_loaded(EdgeId(2), ObjectId(3), Sequence(2), 256, handle(4), None);
    assert_eq!(
        cmds(&mut c),
        [StageCommand::ReleaseObject(handle(3)), StageCommand::ReleaseObject(handle(4))]
    );
    // While stopping, and once stopped.
    c.stop_run(ORCH, RunId(9));
    cmds(&mut c);
    c.object_loaded(EdgeId(2), ObjectId(4), Sequence(3), 256, handle(5), None);
    assert_eq!(cmds(&mut c), [StageCommand::ReleaseObject(handle(5))]);
    // Never provisioned.
    let mut fresh = StageController::new(ORCH);
    fresh.object_loaded(EdgeId(1), ObjectId(1), Sequence(0), 16, handle(6), None);
    assert_eq!(cmds(&mut fresh), [StageCommand::ReleaseObject(handle(6))]);
}

#[test]
fn the_first_fault_is_kept_and_stop_run_tears_down_after_both_edges_stop() {
    let mut c = ready(1, 3);
    c.fault(FaultReason::Step(StepFailure::ComputeFailed));
    c.fault(FaultReason::Object(ObjectFailure::BadMagic));
    assert_eq!(events(&mut c).len(), 1, "only the first fault is reported");
    assert_eq!(cmds(&mut c), [StageCommand::WithdrawStep(StepId(1))], "the post is withdrawn");
    c.stop_run(NodeId(5), RunId(9));
    c.stop_run(ORCH, RunId(8));
    assert!(cmds(&mut c).is_empty(), "StopRun only from the orchestrator, for this run");
    c.stop_run(ORCH, RunId(9));
    assert_eq!(
        cmds(&mut c),
        vec![
            StageCommand::StopEdge(EdgeId(2)),
            StageCommand::StopEdge(EdgeId(3)),
            StageCommand::ResetRole { park: false }
        ]
    );
    c.edge_stopped(EdgeId(2));
    assert!(events(&mut c).is_empty());
    c.edge_stopped(EdgeId(3));
    assert!(events(&mut c).is_empty(), "the role is not released yet");
    c.role_released();
    assert_eq!(
        events(&mut c),
        vec![StageEvent::StageStopped { run_id: RunId(9), stage_index: StageIndex(1) }]
    );
    c.provision(ORCH, prov(1, 3)).expect("a stopped stage can be provisioned again");
}

#[test]
fn the_controller_decides_each_output_object_id_sequence_and_prefill_flag() {
    let posted = |c: &mut StageController| match &cmds(c)[..] {
        [StageCommand::PostStep { output_object, output_sequence, output_flags, .. }] => {
            (*output_object, *output_sequence, *output_flags)
        }
        other => panic!("{other:?}"),
    };
    let executed = |c: &mut StageController| match &cmds(c)[..] {
        [StageCommand::ExecuteStep { output_object, output_sequence, output_flags, .. }] => {
            (*output_object, *output_sequence, *output_flags)
        }
        other => panic!("{other:?}"),
    };
    let mut c = StageController::new(ORCH);
    c.provision(ORCH, prov(1, 3)).expect("provision");
    cmds(&mut c);
    c.weights_ready(RunId(9), "/m.gguf".into(), 1000);
    c.role_ready();
    c.edge_ready(EdgeId(2));
    cmds(&mut c);
    c.edge_ready(EdgeId(3));
    assert_eq!(posted(&mut c), (ObjectId(1), Sequence(0), ObjectFlags::PREFILL));
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(1), Some(StepId(1)));
    c.step_completed(StepId(1));
    assert_eq!(posted(&mut c), (ObjectId(2), Sequence(1), ObjectFlags::NONE));
    // An untaken object (the post came late) gets the same decision through `ExecuteStep`.
    c.object_loaded(EdgeId(2), ObjectId(2), Sequence(1), 256, handle(2), None);
    assert_eq!(executed(&mut c), (ObjectId(2), Sequence(1), ObjectFlags::NONE));

    // The test-only mislabel: sequence 1's output claims sequence 2.
    let mut c = StageController::new(ORCH).mislabel(Some(Sequence(1)));
    c.provision(ORCH, prov(1, 3)).expect("provision");
    cmds(&mut c);
    events(&mut c);
    c.weights_ready(RunId(9), "/m.gguf".into(), 1000);
    c.role_ready();
    c.edge_ready(EdgeId(2));
    cmds(&mut c);
    c.edge_ready(EdgeId(3));
    assert_eq!(posted(&mut c).1, Sequence(0));
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(1), Some(StepId(1)));
    c.step_completed(StepId(1));
    assert_eq!(posted(&mut c), (ObjectId(3), Sequence(2), ObjectFlags::NONE));
}

#[test]
fn a_posted_step_runs_on_its_object_without_an_execute_step_and_the_next_is_posted_after_it() {
    let mut c = ready(1, 3);
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 5 * 256, handle(1), Some(StepId(1)));
    assert!(cmds(&mut c).is_empty(), "no ExecuteStep and no release: the worker owns it");
    c.step_completed(StepId(1));
    match &cmds(&mut c)[..] {
        [StageCommand::PostStep { step_id, sequence, output_extent, .. }] => {
            assert_eq!((*step_id, *sequence), (StepId(2), Sequence(1)));
            assert_eq!(
                output_extent.resolve(3 * u64::from(HIDDEN) * 4),
                3 * u64::from(HIDDEN) * 4,
                "same rows out as in"
            );
        }
        other => panic!("{other:?}"),
    }
    // The last stage posts one token per step, whatever the input's rows.
    let mut c = ready(2, 3);
    c.object_loaded(EdgeId(3), ObjectId(1), Sequence(0), 7 * 256, handle(1), Some(StepId(1)));
    c.step_completed(StepId(1));
    match &cmds(&mut c)[..] {
        [StageCommand::PostStep { output_extent, .. }] => {
            assert_eq!(output_extent.resolve(7 * 256), 4);
        }
        other => panic!("{other:?}"),
    }
    assert!(events(&mut c).is_empty());
}

#[test]
fn a_stop_or_a_fault_while_a_step_is_posted_withdraws_it_and_releases_nothing_the_worker_owns() {
    let mut c = ready(1, 3);
    c.stop_run(ORCH, RunId(9));
    assert_eq!(
        cmds(&mut c),
        [
            StageCommand::WithdrawStep(StepId(1)),
            StageCommand::StopEdge(EdgeId(2)),
            StageCommand::StopEdge(EdgeId(3)),
            StageCommand::ResetRole { park: false }
        ]
    );
    // The worker had taken the object before the withdrawal reached it: it runs the step
    // and frees the input itself.
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(1), Some(StepId(1)));
    c.step_completed(StepId(1));
    assert!(cmds(&mut c).is_empty());

    let mut c = ready(1, 3);
    c.fault(FaultReason::Step(StepFailure::ComputeFailed));
    assert_eq!(cmds(&mut c), [StageCommand::WithdrawStep(StepId(1))]);
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(1), Some(StepId(1)));
    assert!(cmds(&mut c).is_empty(), "a taken object is never released by the controller");
    c.object_loaded(EdgeId(2), ObjectId(2), Sequence(1), 256, handle(2), None);
    assert_eq!(cmds(&mut c), [StageCommand::ReleaseObject(handle(2))]);
}

#[test]
fn a_post_the_worker_drops_on_its_own_or_a_step_taking_the_wrong_object_faults_the_stage() {
    let post_rejected = FaultReason::Step(StepFailure::PostRejected);
    let mut c = ready(1, 3);
    c.step_withdrawn(StepId(1));
    assert!(matches!(
        events(&mut c)[..],
        [StageEvent::StageFault { reason, .. }] if reason == post_rejected
    ));

    // A post the worker passed because its object came first: the object was executed,
    // the withdrawal that follows changes nothing.
    let mut c = ready(1, 3);
    c.object_loaded(EdgeId(2), ObjectId(1), Sequence(0), 256, handle(1), None);
    c.step_withdrawn(StepId(1));
    assert!(events(&mut c).is_empty());
    assert!(matches!(cmds(&mut c)[..], [StageCommand::ExecuteStep { step_id: StepId(2), .. }]));

    // A step the controller did not post, or its object of another sequence.
    for (step, seq) in [(StepId(7), 0), (StepId(1), 1)] {
        let mut c = ready(1, 3);
        c.object_loaded(EdgeId(2), ObjectId(1), Sequence(seq), 256, handle(1), Some(step));
        assert!(matches!(
            events(&mut c)[..],
            [StageEvent::StageFault {
                reason: FaultReason::Stage(StageFault::SequenceViolation),
                ..
            }]
        ));
    }
}

#[test]
fn stage_stopped_needs_the_role_released_and_both_edges_stopped_in_any_order() {
    let stopped = vec![StageEvent::StageStopped { run_id: RunId(9), stage_index: StageIndex(1) }];
    let mut c = ready(1, 3);
    c.role_released();
    assert!(events(&mut c).is_empty(), "a release before the stop counts for nothing");
    c.stop_run(ORCH, RunId(9));
    cmds(&mut c);
    c.role_released();
    c.edge_stopped(EdgeId(3));
    assert!(events(&mut c).is_empty(), "the inbound edge still holds its lease");
    c.edge_stopped(EdgeId(2));
    assert_eq!(events(&mut c), stopped);

    // A worker that crashed took the role with it: its reaping is the release, and the
    // stage faulted when it happened.
    let mut c = ready(1, 3);
    c.worker_reaped();
    assert!(matches!(
        events(&mut c)[..],
        [StageEvent::StageFault { reason: FaultReason::Worker(WorkerFatal::Exited), .. }]
    ));
    c.stop_run(ORCH, RunId(9));
    assert_eq!(
        cmds(&mut c),
        [
            StageCommand::WithdrawStep(StepId(1)),
            StageCommand::StopEdge(EdgeId(2)),
            StageCommand::StopEdge(EdgeId(3))
        ],
        "no role to release in the new worker"
    );
    c.edge_stopped(EdgeId(2));
    c.edge_stopped(EdgeId(3));
    assert_eq!(events(&mut c), stopped);

    // Reaped while stopping.
    let mut c = ready(1, 3);
    c.stop_run(ORCH, RunId(9));
    c.edge_stopped(EdgeId(2));
    c.edge_stopped(EdgeId(3));
    assert!(events(&mut c).is_empty());
    c.worker_reaped();
    assert_eq!(events(&mut c), stopped);
}

#[test]
fn weights_loaded_comes_only_after_the_worker_configured_the_role_and_never_after_a_failure() {
    let mut c = StageController::new(ORCH);
    c.provision(ORCH, prov(1, 3)).expect("provision");
    cmds(&mut c);
    events(&mut c);
    // A `RoleConfigured` nobody asked for counts for nothing.
    c.role_ready();
    assert!(events(&mut c).is_empty());
    // Weights of another run are ignored; this run's are handed to the worker to load.
    c.weights_ready(RunId(8), "/old.gguf".into(), 1);
    assert!(cmds(&mut c).is_empty());
    c.weights_ready(RunId(9), "/m.gguf".into(), 1234);
    match &cmds(&mut c)[..] {
        [StageCommand::LoadRole(RoleConfig::ModelStage { weights, layers, kv_cache, .. })] => {
            assert_eq!((weights.as_str(), *layers), ("/m.gguf", LayerRange::new(2, 4)));
            assert_eq!(*kv_cache, crate::wire::KvCacheDType::F16, "the run's KV cache type");
        }
        other => panic!("{other:?}"),
    }
    assert!(events(&mut c).is_empty(), "resolved weights are not loaded weights");
    c.role_ready();
    assert_eq!(
        events(&mut c),
        [StageEvent::WeightsLoaded {
            run_id: RunId(9),
            stage_index: StageIndex(1),
            layers: LayerRange::new(2, 4),
            bytes: 1234,
            kept_caches: false,
        }]
    );
    c.role_ready();
    assert!(events(&mut c).is_empty(), "once");

    // The worker failed to load: the weights fault, and no `WeightsLoaded`, ever.
    let mut c = StageController::new(ORCH);
    c.provision(ORCH, prov(1, 3)).expect("provision");
    c.weights_ready(RunId(9), "/m.gguf".into(), 1234);
    events(&mut c);
    c.fault(FaultReason::Weights(WeightsFailure::MissingTensor));
    c.role_ready();
    assert_eq!(
        events(&mut c),
        [StageEvent::StageFault {
            run_id: RunId(9),
            stage_index: StageIndex(1),
            reason: FaultReason::Weights(WeightsFailure::MissingTensor)
        }]
    );
}
