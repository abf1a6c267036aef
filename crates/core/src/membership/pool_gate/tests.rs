//! Pool readiness gate contract tests (seed: membership_pool_readiness_contract).
#![allow(clippy::disallowed_methods)] // tests own the clock

use super::*;

type Setup = (&'static str, Box<dyn Fn(&mut PoolGate, Instant)>);

const WINDOW: Duration = Duration::from_millis(500);
const TICK: Duration = Duration::from_millis(1);

fn id(n: u64) -> NodeId {
    NodeId(n)
}

fn identity(n: u64) -> DataPlaneIdentity {
    DataPlaneIdentity {
        endpoint_id: format!("{n:064x}"),
        addrs: vec![format!("127.0.0.1:{}", 7000 + n)],
    }
}

fn drain(g: &mut PoolGate) -> Vec<GateEvent> {
    std::iter::from_fn(|| g.poll_event()).collect()
}

/// A gate over nodes 1..=3 where every fact holds, the last one set at `t`.
fn all_facts(t0: Instant) -> (PoolGate, Instant) {
    let mut g = PoolGate::new(t0, [id(1), id(2), id(3)], WINDOW);
    let mut t = t0;
    for n in 1..=3 {
        t += TICK;
        g.member_up(t, id(n));
        g.node_available(t, id(n), identity(n));
    }
    (g, t)
}

fn ready(t0: Instant) -> (PoolGate, Instant) {
    let (mut g, t) = all_facts(t0);
    g.handle_timeout(t + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(2), id(3)] }]);
    (g, t + WINDOW)
}

#[test]
fn pool_ready_comes_exactly_when_the_convergence_window_ends() {
    let (mut g, t) = all_facts(Instant::now());
    assert_eq!(g.poll_timeout(), Some(t + WINDOW));
    g.handle_timeout(t + WINDOW - TICK);
    assert!(drain(&mut g).is_empty(), "absent one tick before the window ends");
    g.handle_timeout(t + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(2), id(3)] }]);
    g.handle_timeout(t + WINDOW * 3);
    assert!(drain(&mut g).is_empty(), "PoolReady is emitted once");
}

#[test]
fn each_missing_fact_alone_keeps_the_pool_not_ready() {
    let t0 = Instant::now();
    let cases: Vec<Setup> = vec![
        (
            "unknown node",
            Box::new(|g, t| {
                g.member_up(t, id(1));
                g.node_available(t, id(1), identity(1));
                g.member_up(t, id(2));
                g.node_available(t, id(2), identity(2));
            }),
        ),
        (
            "not live",
            Box::new(|g, t| {
                for n in 1..=3 {
                    g.node_available(t, id(n), identity(n));
                }
                g.member_up(t, id(1));
                g.member_up(t, id(2));
            }),
        ),
        (
            "no NodeAvailable",
            Box::new(|g, t| {
                for n in 1..=3 {
                    g.member_up(t, id(n));
                }
                g.node_available(t, id(1), identity(1));
                g.node_available(t, id(2), identity(2));
            }),
        ),
        (
            "suspect",
            Box::new(|g, t| {
                for n in 1..=3 {
                    g.member_up(t, id(n));
                    g.node_available(t, id(n), identity(n));
                }
                g.member_suspect(t, id(2));
            }),
        ),
        (
            "faulted",
            Box::new(|g, t| {
                for n in 1..=3 {
                    g.member_up(t, id(n));
                    g.node_available(t, id(n), identity(n));
                }
                g.node_faulted(t, id(3), BootFault::ArenaCreate);
            }),
        ),
    ];
    for (name, setup) in cases {
        let mut g = PoolGate::new(t0, [id(1), id(2), id(3)], WINDOW);
        setup(&mut g, t0);
        assert_eq!(g.poll_timeout(), None, "{name}");
        g.handle_timeout(t0 + WINDOW * 10);
        assert!(drain(&mut g).is_empty(), "{name}: no PoolReady");
    }
}

#[test]
fn any_change_in_the_view_restarts_the_window() {
    let (mut g, t) = all_facts(Instant::now());
    let later = t + WINDOW / 2;
    g.member_suspect(later, id(2));
    g.member_up(later + TICK, id(2)); // refuted: live again, but the view changed
    g.handle_timeout(t + WINDOW);
    assert!(drain(&mut g).is_empty(), "the window restarted at the last change");
    g.handle_timeout(later + TICK + WINDOW);
    assert_eq!(drain(&mut g).len(), 1);
}

#[test]
fn nodes_outside_the_candidate_pool_change_nothing() {
    let (mut g, t) = all_facts(Instant::now());
    g.member_down(t + TICK, id(99));
    g.node_faulted(t + TICK, id(99), BootFault::WorkerStart);
    assert_eq!(g.poll_timeout(), Some(t + WINDOW), "the window did not restart");
    g.handle_timeout(t + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(2), id(3)] }]);
}

#[test]
fn losing_readiness_before_a_plan_is_reported_and_readiness_can_return() {
    let (mut g, t) = ready(Instant::now());
    g.member_down(t + TICK, id(1));
    assert_eq!(drain(&mut g), vec![GateEvent::ReadinessLost { node: id(1) }]);
    assert!(!g.provisioning_started(), "no provisioning without readiness");
    g.member_up(t + 2 * TICK, id(1));
    g.handle_timeout(t + 2 * TICK + WINDOW);
    assert_eq!(drain(&mut g).len(), 1, "ready again after a new stable window");
}

#[test]
fn losing_a_required_node_after_provisioning_began_faults_the_run_once() {
    for (loss, reason) in [(0, MembershipLoss::NodeDown), (1, MembershipLoss::NodeFaulted)] {
        let (mut g, t) = ready(Instant::now());
        assert!(g.provisioning_started());
        match loss {
            0 => g.member_down(t + TICK, id(2)),
            _ => g.node_faulted(t + TICK, id(2), BootFault::WorkerStart),
        }
        assert_eq!(drain(&mut g), vec![GateEvent::RequiredNodeLost { node: id(2), reason }]);
        g.member_down(t + 2 * TICK, id(2));
        assert!(drain(&mut g).is_empty(), "a node is lost once");
        g.member_up(t + 3 * TICK, id(2));
        g.handle_timeout(t + WINDOW * 10);
        assert!(drain(&mut g).is_empty(), "no re-placement, no new PoolReady");
    }
}

#[test]
fn a_suspect_node_is_not_ready_but_a_suspicion_alone_does_not_fault_a_committed_run() {
    // Before a plan: a suspect candidate breaks readiness.
    let (mut g, t) = ready(Instant::now());
    g.member_suspect(t + TICK, id(3));
    assert_eq!(drain(&mut g), vec![GateEvent::ReadinessLost { node: id(3) }]);
    assert!(!g.provisioning_started());
    // After: SWIM's suspicion resolves either way; only the `Down` is a loss.
    let (mut g, t) = ready(Instant::now());
    assert!(g.provisioning_started());
    g.member_suspect(t + TICK, id(3));
    g.member_up(t + 2 * TICK, id(3));
    assert!(drain(&mut g).is_empty(), "refuted: nothing was lost");
    g.member_suspect(t + 3 * TICK, id(3));
    g.member_down(t + 4 * TICK, id(3));
    assert_eq!(
        drain(&mut g),
        vec![GateEvent::RequiredNodeLost { node: id(3), reason: MembershipLoss::NodeDown }]
    );
}

#[test]
fn a_lost_control_session_makes_a_node_unavailable_until_it_answers_again() {
    let t0 = Instant::now();
    let mut g = PoolGate::new(t0, vec![NodeId(1)], Duration::from_millis(100));
    g.member_up(t0, NodeId(1));
    g.node_available(t0, NodeId(1), DataPlaneIdentity { endpoint_id: "e".into(), addrs: vec![] });
    g.handle_timeout(t0 + Duration::from_millis(100));
    assert!(matches!(g.poll_event(), Some(GateEvent::PoolReady { .. })));
    g.node_unavailable(t0 + Duration::from_millis(200), NodeId(1));
    assert_eq!(g.poll_event(), Some(GateEvent::ReadinessLost { node: NodeId(1) }));
    assert!(!g.all_ready());
    // A new session: ready again after a window, with no new SWIM `Up` needed.
    let t1 = t0 + Duration::from_millis(300);
    g.node_available(t1, NodeId(1), DataPlaneIdentity { endpoint_id: "e".into(), addrs: vec![] });
    g.handle_timeout(t1 + Duration::from_millis(100));
    assert!(matches!(g.poll_event(), Some(GateEvent::PoolReady { .. })));
}

#[test]
fn a_reforming_gate_offers_the_survivors_after_a_stable_window_and_a_node_back_later() {
    let (mut g, t) = ready(Instant::now());
    assert!(g.provisioning_started());
    g.member_down(t + TICK, id(2));
    drain(&mut g);
    let t = t + 2 * TICK;
    g.reform(t);
    assert_eq!(g.poll_timeout(), Some(t + WINDOW), "the window starts at the re-formation");
    g.handle_timeout(t + WINDOW - TICK);
    assert!(drain(&mut g).is_empty(), "not before the window ends");
    g.handle_timeout(t + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(3)] }]);
    // The survivors cannot hold the model: nothing is offered until the set changes.
    g.offer_refused();
    g.handle_timeout(t + WINDOW * 4);
    assert!(drain(&mut g).is_empty(), "the same set is not offered twice");
    let back = t + WINDOW * 5;
    g.member_up(back, id(2));
    g.node_available(back, id(2), identity(2));
    assert_eq!(g.poll_timeout(), Some(back + WINDOW));
    g.handle_timeout(back + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(2), id(3)] }]);
    assert!(g.provisioning_started());
    g.member_down(back + WINDOW + TICK, id(2));
    assert_eq!(
        drain(&mut g),
        vec![GateEvent::RequiredNodeLost { node: id(2), reason: MembershipLoss::NodeDown }],
        "a node lost again after a re-formation is reported again"
    );
}

#[test]
fn after_a_partial_offer_only_an_offered_node_breaks_readiness() {
    let (mut g, t) = ready(Instant::now());
    assert!(g.provisioning_started());
    g.node_unavailable(t + TICK, id(3));
    g.reform(t + TICK);
    g.handle_timeout(t + TICK + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(2)] }]);
    let t = t + TICK + WINDOW;
    g.member_down(t + TICK, id(3));
    assert!(drain(&mut g).is_empty(), "node 3 was not offered");
    g.member_suspect(t + 2 * TICK, id(1));
    assert_eq!(drain(&mut g), vec![GateEvent::ReadinessLost { node: id(1) }]);
    g.member_up(t + 3 * TICK, id(1));
    g.handle_timeout(t + 3 * TICK + WINDOW);
    assert_eq!(
        drain(&mut g),
        vec![GateEvent::PoolReady { nodes: vec![id(1), id(2)] }],
        "readiness lost before a plan is offered again once stable"
    );
}

#[test]
fn a_run_over_the_survivors_hears_once_when_a_lost_node_has_been_ready_for_the_window() {
    let (mut g, t) = ready(Instant::now());
    assert!(g.provisioning_started());
    g.member_down(t + TICK, id(2));
    drain(&mut g);
    let t = t + 2 * TICK;
    g.reform(t);
    g.handle_timeout(t + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::PoolReady { nodes: vec![id(1), id(3)] }]);
    assert!(g.provisioning_started());
    assert_eq!(g.poll_timeout(), None, "nothing grew yet");
    let back = t + WINDOW * 2;
    g.member_up(back, id(2));
    g.node_available(back, id(2), identity(2));
    assert_eq!(g.poll_timeout(), Some(back + WINDOW), "growth waits for a stable window");
    g.handle_timeout(back + WINDOW - TICK);
    assert!(drain(&mut g).is_empty(), "not before the window ends");
    g.handle_timeout(back + WINDOW);
    assert_eq!(drain(&mut g), vec![GateEvent::CapacityGrew { nodes: vec![id(1), id(2), id(3)] }]);
    g.handle_timeout(back + WINDOW * 3);
    assert!(drain(&mut g).is_empty(), "the same growth is reported once");
    // The session re-forms onto the grown set at once: provisioning may start.
    g.reform_onto(&[id(1), id(2), id(3)]);
    assert!(g.provisioning_started());
    g.member_down(back + WINDOW * 4, id(2));
    assert_eq!(
        drain(&mut g),
        vec![GateEvent::RequiredNodeLost { node: id(2), reason: MembershipLoss::NodeDown }],
        "the returned node is required again"
    );
}

#[test]
fn the_first_run_over_the_whole_pool_never_reports_growth() {
    let (mut g, t) = ready(Instant::now());
    assert!(g.provisioning_started());
    g.member_suspect(t + TICK, id(2));
    g.member_up(t + 2 * TICK, id(2));
    assert_eq!(g.poll_timeout(), None);
    g.handle_timeout(t + WINDOW * 4);
    assert!(drain(&mut g).is_empty());
}
