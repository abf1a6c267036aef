//! Node boot contract tests (seed: node_boot_lifecycle_contract).
#![allow(clippy::disallowed_methods)] // tests own the clock

use super::*;

const ALL: [BootFact; 7] = [
    BootFact::ControlInbox,
    BootFact::Identity,
    BootFact::Arena,
    BootFact::Worker,
    BootFact::Transport,
    BootFact::Membership,
    BootFact::Provisioning,
];

fn boot(worker: WorkerPolicy) -> (NodeBoot, Instant) {
    let now = Instant::now();
    let mut b = NodeBoot::new(
        now,
        BootConfig { node_id: NodeId(7), worker, timeout: Duration::from_secs(5) },
    );
    assert_eq!(b.poll_event(), Some(BootEvent::Started { node_id: NodeId(7) }));
    (b, now)
}

fn drain(b: &mut NodeBoot) -> Vec<BootEvent> {
    std::iter::from_fn(|| b.poll_event()).collect()
}

#[test]
fn node_available_comes_only_after_every_readiness_fact_and_only_once() {
    // Every order of the last fact: availability waits for all of them.
    for last in ALL {
        let (mut b, _) = boot(WorkerPolicy::Eager);
        for f in ALL.iter().filter(|f| **f != last) {
            b.fact_ready(*f);
            assert!(drain(&mut b).is_empty(), "available before {last:?}");
        }
        b.fact_ready(last);
        assert_eq!(drain(&mut b), vec![BootEvent::NodeAvailable { node_id: NodeId(7) }]);
        b.fact_ready(last);
        b.resource_failed(BootFault::ArenaMap);
        assert!(drain(&mut b).is_empty(), "available at most once, and never faulted after");
        assert!(b.is_available());
    }
}

#[test]
fn one_failed_resource_gives_one_typed_fault_and_no_availability() {
    for reason in BootFault::ALL {
        let (mut b, _) = boot(WorkerPolicy::Eager);
        b.fact_ready(BootFact::Identity);
        b.resource_failed(*reason);
        for f in ALL {
            b.fact_ready(f);
        }
        b.resource_failed(BootFault::TransportBind);
        assert_eq!(
            drain(&mut b),
            vec![BootEvent::BootFaulted { node_id: NodeId(7), reason: *reason }]
        );
        assert!(!b.is_available());
    }
}

#[test]
fn the_deferred_worker_policy_does_not_wait_for_the_worker() {
    let (mut b, _) = boot(WorkerPolicy::Deferred);
    for f in ALL.iter().filter(|f| **f != BootFact::Worker) {
        b.fact_ready(*f);
    }
    assert_eq!(drain(&mut b), vec![BootEvent::NodeAvailable { node_id: NodeId(7) }]);
}

#[test]
fn a_boot_past_its_deadline_faults_with_the_first_missing_fact() {
    let (mut b, t0) = boot(WorkerPolicy::Eager);
    for f in ALL.iter().filter(|f| **f != BootFact::Worker && **f != BootFact::Membership) {
        b.fact_ready(*f);
    }
    b.handle_timeout(t0 + Duration::from_secs(4));
    assert!(drain(&mut b).is_empty(), "not before the deadline");
    b.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(
        drain(&mut b),
        vec![BootEvent::BootFaulted { node_id: NodeId(7), reason: BootFault::WorkerInitTimeout }]
    );
    assert_eq!(b.poll_timeout(), None);
}

#[test]
fn a_boot_past_its_deadline_names_the_fact_it_was_waiting_for_in_bring_up_order() {
    // A node brings up its identity and arena, then waits for its worker: the control
    // inbox and the rest are missing too, but the worker is what the boot waited for.
    let (mut b, t0) = boot(WorkerPolicy::Eager);
    b.fact_ready(BootFact::Identity);
    b.fact_ready(BootFact::Arena);
    b.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(
        drain(&mut b),
        vec![BootEvent::BootFaulted { node_id: NodeId(7), reason: BootFault::WorkerInitTimeout }]
    );
    // Nothing at all: the identity.
    let (mut b, t0) = boot(WorkerPolicy::Eager);
    b.handle_timeout(t0 + Duration::from_secs(5));
    assert_eq!(
        drain(&mut b),
        vec![BootEvent::BootFaulted { node_id: NodeId(7), reason: BootFault::IdentityInvalid }]
    );
}
