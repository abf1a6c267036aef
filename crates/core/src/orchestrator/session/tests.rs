//! The session's own tests: what it asks of its driver as a run faults, re-forms and ends.
//! The simulation (`crate::sim`) drives it through whole pools, tokens and faults.
#![allow(clippy::disallowed_methods)] // tests own the clock

use std::time::{Duration, Instant};

use super::*;
use crate::membership::pool_gate::GateEvent;
use crate::model::tokenizer::{Kind, Tokenizer};
use crate::orchestrator::requests::Request;
use crate::orchestrator::run::tests::plan_with;
use crate::wire::SamplingPolicy;
use crate::wire::reason::{MembershipLoss, StepFailure};

fn tokenizer() -> Tokenizer {
    let tokens: Vec<String> = (0..300).map(|t| format!("t{t}")).collect();
    let n = tokens.len();
    let kind = Kind::Spm { add_space_prefix: false };
    Tokenizer::new(kind, tokens, vec![1; n], vec![0.0; n], &[], None, None, false)
        .expect("tokenizer")
}

fn request(id: &str) -> Request {
    Request {
        id: id.into(),
        prompt: vec![5, 6, 7],
        max_tokens: 8,
        sampling: SamplingPolicy::Greedy,
        stop: vec![],
        logprobs: None,
        speculative: false,
        cache_prompt: true,
        constraint: None,
    }
}

fn config(queue_capacity: usize) -> SessionConfig {
    SessionConfig {
        limits: SessionLimits { queue_capacity, ..SessionLimits::default() },
        timeouts: RunTimeouts {
            readiness: Duration::from_secs(10),
            token: Duration::from_secs(5),
            teardown: Duration::from_secs(3),
        },
        resume: ResumePolicy::default(),
        desired_stages: 3,
        forget_given: false,
        draft_step_cost: None,
    }
}

/// A served session of the 3-stage plan, past its barrier, with one request admitted.
fn serving(tok: &Tokenizer, now: Instant, queue: usize) -> Session<'_> {
    let plan = plan_with(8, 1);
    let book = RequestBook::new(tok, Vec::new());
    let mut s = Session::start(now, now, plan.clone(), config(queue), book);
    for st in &plan.stages {
        s.stage_ready(now, plan.run_id, st.stage_index, st.node_id).expect("ready");
    }
    s.token_endpoint_ready(now);
    s.token_endpoint_ready(now);
    s.push(now, request("a"));
    drain(&mut s, now);
    s
}

fn drain(s: &mut Session<'_>, now: Instant) -> Vec<SessionOutput> {
    std::iter::from_fn(|| s.poll(now)).collect()
}

fn events(outs: &[SessionOutput]) -> Vec<&'static str> {
    outs.iter()
        .filter_map(|o| match o {
            SessionOutput::Event(e) => Some(e.kind()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_node_loss_asks_the_gate_to_re_form_and_requests_that_arrive_meanwhile_wait_up_to_the_queue() {
    let (tok, now) = (tokenizer(), Instant::now());
    let mut s = serving(&tok, now, 1);
    s.member_down(now, NodeId(2));
    s.gate_event(
        now,
        GateEvent::RequiredNodeLost { node: NodeId(2), reason: MembershipLoss::NodeDown },
    );
    let outs = drain(&mut s, now);
    assert!(outs.contains(&SessionOutput::Gate(GateAsk::Reform)), "{outs:?}");
    assert!(events(&outs).contains(&"session_reforming"), "{outs:?}");
    assert!(s.reformation().is_some());
    // The first waits for the next run; the second finds the queue full.
    let waiting = s.push(now, request("b"));
    let refused = s.push(now, request("c"));
    let outs = drain(&mut s, now);
    let results: Vec<(usize, Option<String>)> = outs
        .iter()
        .filter_map(|o| match o {
            SessionOutput::Result { index, result } => Some((*index, result.error.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![(refused, Some("busy".into()))], "{waiting} waits");
}

#[test]
fn a_fault_the_policy_does_not_survive_ends_every_request_with_it_and_nothing_re_forms() {
    let (tok, now) = (tokenizer(), Instant::now());
    let mut s = serving(&tok, now, 4);
    let plan = s.plan().clone();
    let fault = (StepFailure::ComputeFailed.into(), Component::Worker);
    assert!(s.stage_fault(now, plan.run_id, StageIndex(1), NodeId(2), fault));
    let outs = drain(&mut s, now);
    assert!(!outs.iter().any(|o| matches!(o, SessionOutput::Gate(_))), "{outs:?}");
    assert!(s.reformation().is_none());
    let ended = outs.iter().find_map(|o| match o {
        SessionOutput::Result { result, .. } => result.error.clone(),
        _ => None,
    });
    assert_eq!(ended.as_deref(), Some("step.compute_failed"));
    // Every stage is told to stop, as faulted, and to drop its role: nothing re-forms.
    let stops = outs
        .iter()
        .filter(|o| {
            matches!(
                o,
                SessionOutput::Command(SessionCommand::StopRun { faulted: true, park: false, .. })
            )
        })
        .count();
    assert_eq!(stops, 3);
}

#[test]
fn a_foreign_stage_fault_is_not_the_runs() {
    let (tok, now) = (tokenizer(), Instant::now());
    let mut s = serving(&tok, now, 4);
    let fault = (StepFailure::ComputeFailed.into(), Component::Worker);
    assert!(!s.stage_fault(now, RunId(99), StageIndex(1), NodeId(2), fault), "another run");
    assert!(!s.stage_fault(now, s.plan().run_id, StageIndex(1), NodeId(3), fault), "wrong node");
    assert!(s.outcome().is_none());
}

#[test]
fn the_next_run_has_as_many_stages_as_asked_for_as_far_as_the_offered_nodes_go() {
    let (tok, now) = (tokenizer(), Instant::now());
    let s = serving(&tok, now, 4);
    assert_eq!(s.next_stages(2), 2);
    assert_eq!(s.next_stages(3), 3);
    assert_eq!(s.next_stages(5), 3, "never more than the session asks for");
    assert_eq!(s.next_stages(0), 1);
    assert_eq!(s.next_run_id(), RunId(s.plan().run_id.0 + 1));
}

#[test]
fn re_forming_stops_the_faulted_run_on_nodes_it_keeps_before_provisioning_the_next() {
    let (tok, now) = (tokenizer(), Instant::now());
    let mut s = serving(&tok, now, 4);
    let old = s.plan().run_id;
    s.gate_event(
        now,
        GateEvent::RequiredNodeLost { node: NodeId(3), reason: MembershipLoss::NodeDown },
    );
    drain(&mut s, now);
    let mut next = plan_with(8, 1);
    next.run_id = s.next_run_id();
    s.reform(now, next);
    let outs = drain(&mut s, now);
    let commands: Vec<&SessionCommand> = outs
        .iter()
        .filter_map(|o| match o {
            SessionOutput::Command(c) => Some(c),
            _ => None,
        })
        .collect();
    let stops = commands
        .iter()
        .take_while(|c| matches!(c, SessionCommand::StopRun { .. }))
        .map(|c| match c {
            SessionCommand::StopRun { node, run_id, faulted, park } => {
                (*node, *run_id, *faulted, *park)
            }
            _ => unreachable!(),
        })
        .collect::<Vec<_>>();
    // A re-formed session's nodes park their roles (the next run may keep their stages).
    let want: Vec<_> = (1..=3).map(|n| (NodeId(n), old, true, true)).collect();
    assert_eq!(stops, want, "{commands:?}");
    assert!(
        commands[stops.len()..].iter().any(|c| matches!(c, SessionCommand::Provision { .. })),
        "then the next run provisions: {commands:?}"
    );
    assert!(events(&outs).contains(&"sequence_resumed"), "the kept request resumes: {outs:?}");
}

#[test]
fn an_operator_stop_while_re_forming_ends_what_was_kept_and_what_waited_as_stopped() {
    let (tok, now) = (tokenizer(), Instant::now());
    let mut s = serving(&tok, now, 4);
    s.session_closed(now, NodeId(1));
    drain(&mut s, now);
    s.handle_timeout(now + Duration::from_secs(1));
    drain(&mut s, now);
    assert!(s.reformation().is_some());
    s.push(now, request("waits"));
    drain(&mut s, now);
    s.abandon(ReformEnd::OperatorStop);
    let outs = drain(&mut s, now);
    assert!(events(&outs).contains(&"session_reform_failed"), "{outs:?}");
    let errors: Vec<Option<String>> = outs
        .iter()
        .filter_map(|o| match o {
            SessionOutput::Result { result, .. } => Some(result.error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(errors, vec![Some("operator.stopped".into()); 2]);
    assert!(s.reformation().is_none());
}

#[test]
fn an_idle_session_does_not_re_form_after_a_node_loss() {
    let (tok, now) = (tokenizer(), Instant::now());
    let plan = plan_with(8, 1);
    let book = RequestBook::new(&tok, Vec::new());
    let mut s = Session::start(now, now, plan, config(4), book);
    s.close_input(now);
    drain(&mut s, now);
    s.gate_event(
        now,
        GateEvent::RequiredNodeLost { node: NodeId(2), reason: MembershipLoss::NodeDown },
    );
    let outs = drain(&mut s, now);
    assert!(!outs.iter().any(|o| matches!(o, SessionOutput::Gate(_))), "{outs:?}");
    assert!(s.reformation().is_none());
}

#[test]
fn the_end_reasons_are_the_stable_codes() {
    assert_eq!(SessionEnd::OperatorStopped.to_string(), "operator.stopped");
    assert_eq!(SessionEnd::Ended.to_string(), "session.ended");
    let f = SessionEnd::Fault(MembershipLoss::NodeDown.into());
    assert_eq!(f.to_string(), "membership.node_down");
    let codes = [ReformEnd::OperatorStop, ReformEnd::ResumeTimeout, ReformEnd::Setup];
    assert_eq!(codes.map(ReformEnd::as_str), ["operator_stop", "resume_timeout", "setup"]);
}
