//! StageNode contract tests: step numbering per provisioning, the late-answer filter,
//! edge records, and the translation of stage commands into worker commands.

use super::*;
use crate::arena::ArenaManager;
use crate::wire::reason::{ControlFault, FaultReason, StepFailure};
use crate::worker::protocol::Event as WorkerEvent;
use crate::workerctl::CtlOutput;

use crate::stage::controller::fixtures::{ORCH, prov};

const SESSION: u64 = 7;

fn node() -> StageNode {
    let mut arena = ArenaManager::new(1 << 30);
    arena.arena_ready();
    let plane = EdgePlane::new(arena, Component::EdgeEstablisher);
    let mut n = StageNode::new(NodeId(5), plane, WorkerGeneration(1));
    n.session_opened(ORCH, SESSION);
    n
}

fn actions(n: &mut StageNode) -> Vec<NodeAction> {
    n.advance();
    std::iter::from_fn(|| n.poll_action()).collect()
}

fn provision(n: &mut StageNode, run: u64) {
    let mut p = prov(1, 3);
    p.run_id = RunId(run);
    n.control(SESSION, ControlMessage::ProvisionStage { provision: Box::new(p) });
}

fn stage_faults(actions: &[NodeAction]) -> usize {
    actions
        .iter()
        .filter(|a| matches!(a, NodeAction::Send(ControlMessage::StageFault { .. })))
        .count()
}

fn step_failed(step: u64) -> CtlOutput {
    CtlOutput::Routed(WorkerEvent::StepFailed {
        role_id: STAGE_ROLE,
        step_id: StepId(step),
        reason: StepFailure::PostRejected,
    })
}

#[test]
fn a_provisioned_stage_fetches_its_weights_and_records_its_edges_as_provisioning() {
    let mut n = node();
    provision(&mut n, 9);
    let a = actions(&mut n);
    assert!(a.iter().any(|a| matches!(a, NodeAction::FetchWeights(p) if p.run_id == RunId(9))));
    assert!(
        a.iter().any(|a| matches!(
            a,
            NodeAction::Emit { event: Event::StageProvisionStarted { .. }, .. }
        ))
    );
    let states: Vec<EdgeState> = n.records().map(|r| r.state).collect();
    assert_eq!(states, vec![EdgeState::Provisioning, EdgeState::Provisioning]);
    let json = serde_json::to_value(n.records().next().expect("a record")).expect("json");
    assert_eq!(json["state"], "provisioning");
}

#[test]
fn a_second_provisioning_while_a_stage_runs_is_refused_with_a_stage_fault() {
    let mut n = node();
    provision(&mut n, 9);
    actions(&mut n);
    provision(&mut n, 10);
    let a = actions(&mut n);
    assert_eq!(stage_faults(&a), 1, "{a:?}");
}

#[test]
fn a_late_answer_about_an_earlier_provisionings_step_is_dropped_and_a_current_one_is_not() {
    let mut n = node();
    provision(&mut n, 9);
    actions(&mut n);
    // Step 1 belongs to no provisioning of this node: each numbers its steps from a range of
    // its own, and the first starts at 1 << 32.
    assert!(n.worker_output(step_failed(1)));
    let a = actions(&mut n);
    assert_eq!(stage_faults(&a), 0, "{a:?}");
    assert!(a.iter().any(|a| matches!(a, NodeAction::Log(l) if l.contains("late answer"))));
    n.worker_output(step_failed((1 << 32) + 1));
    let a = actions(&mut n);
    assert_eq!(stage_faults(&a), 1, "{a:?}");
}

#[test]
fn with_the_late_answer_filter_planted_away_an_earlier_runs_answer_faults_the_stage() {
    let mut n = node();
    n.plant(PlantedNodeBug::NoLateAnswerFilter);
    provision(&mut n, 9);
    actions(&mut n);
    n.worker_output(step_failed(1));
    assert_eq!(stage_faults(&actions(&mut n)), 1);
}

#[test]
fn nothing_is_sent_without_a_session_and_a_closed_session_tears_the_stage_down() {
    let mut n = node();
    provision(&mut n, 9);
    actions(&mut n);
    n.session_closed(SESSION + 1);
    assert!(!actions(&mut n).contains(&NodeAction::CloseSession), "another session's close");
    n.session_closed(SESSION);
    let a = actions(&mut n);
    assert!(a.contains(&NodeAction::CloseSession));
    assert_eq!(stage_faults(&a), 0, "no session to report on: {a:?}");
    assert!(!n.is_idle() || n.provisioning().is_some());
}

#[test]
fn a_second_session_takes_the_node_over_tells_the_first_why_and_tears_its_stage_down() {
    let mut n = node();
    provision(&mut n, 9);
    actions(&mut n);
    n.session_opened(ORCH, SESSION + 1);
    let a = actions(&mut n);
    let taken: FaultReason = ControlFault::TakenOver.into();
    let ending = a.iter().position(|x| {
        matches!(x, NodeAction::Send(ControlMessage::SessionEnding { reason, .. }) if *reason == taken)
    });
    let switch = a.iter().position(|x| *x == NodeAction::UseSession(SESSION + 1));
    assert!(ending.is_some() && switch.is_some() && ending < switch, "told on the old one: {a:?}");
    assert!(
        a.iter().any(|x| matches!(
            x,
            NodeAction::Send(ControlMessage::StageFault { reason, .. }) if *reason == taken
        )),
        "the stage it carried faults with the takeover: {a:?}"
    );
    // The same session opening again is no takeover.
    n.session_opened(ORCH, SESSION + 1);
    let a = actions(&mut n);
    assert!(!a.iter().any(|x| matches!(x, NodeAction::Send(ControlMessage::SessionEnding { .. }))));
}

#[test]
fn a_new_runs_provisioning_during_the_last_runs_teardown_is_held_instead_of_refused() {
    let mut n = node();
    provision(&mut n, 9);
    actions(&mut n);
    // The node comes back to a re-formed session: a new session takes it over (the old
    // run's stage starts tearing down) and at once provisions the new run.
    n.session_opened(ORCH, SESSION + 1);
    actions(&mut n);
    let mut p = prov(1, 3);
    p.run_id = RunId(10);
    n.control(SESSION + 1, ControlMessage::ProvisionStage { provision: Box::new(p) });
    let a = actions(&mut n);
    assert!(
        !a.iter().any(|x| matches!(
            x,
            NodeAction::Send(ControlMessage::StageFault { run_id: RunId(10), .. })
        )),
        "not refused as already provisioned: {a:?}"
    );
    assert!(!a.iter().any(|x| matches!(x, NodeAction::FetchWeights(_))), "held: {a:?}");
    assert_eq!(n.provisioning().map(|p| p.run_id), Some(RunId(9)));
    // A second provisioning while one is held is refused as before.
    let mut q = prov(1, 3);
    q.run_id = RunId(11);
    n.control(SESSION + 1, ControlMessage::ProvisionStage { provision: Box::new(q) });
    assert_eq!(stage_faults(&actions(&mut n)), 1);
}
