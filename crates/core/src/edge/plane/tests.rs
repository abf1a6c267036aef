//! Edge plane contract tests: the arena manager and the establisher composed, evidence and
//! proofs kept inside, faults attributed to the component that saw them first.

use super::*;
use crate::wire::evidence::{PumpStopped, WorkerQuiet};
use crate::wire::{NodeId, RingSpec};

fn peer(n: u64) -> Peer {
    Peer { node_id: NodeId(n), endpoint_id: Some(format!("{n:064x}")), addrs: vec![], relay: None }
}

fn prov(edge: u64, send: bool) -> EdgeProvision {
    EdgeProvision {
        run_id: crate::wire::RunId(1),
        edge_id: EdgeId(edge),
        end: if send {
            EdgeEnd::Send { consumer: peer(2) }
        } else {
            EdgeEnd::Recv { producer: peer(1) }
        },
        object: ObjectSpec::token_ids(16),
        ring: RingSpec { capacity: 4096, alignment: 128 },
    }
}

fn plane() -> EdgePlane {
    let mut m = ArenaManager::new(1 << 20);
    m.arena_ready();
    EdgePlane::new(m, Component::EdgeEstablisher)
}

fn cmds(p: &mut EdgePlane) -> Vec<PlaneCommand> {
    std::iter::from_fn(|| p.poll_command()).collect()
}

fn events(p: &mut EdgePlane) -> Vec<PlaneEvent> {
    std::iter::from_fn(|| p.poll_event()).collect()
}

/// Provisions an edge end and installs its ring; returns the ring.
fn installed(p: &mut EdgePlane, edge: u64, send: bool) -> RingId {
    p.provision(prov(edge, send)).expect("provision");
    let ring = match &cmds(p)[..] {
        [PlaneCommand::InstallRing { edge_id, layout, .. }] if *edge_id == EdgeId(edge) => {
            layout.ring_id
        }
        other => panic!("expected one ring to install, got {other:?}"),
    };
    p.ring_installed(ring);
    ring
}

#[test]
fn an_edge_end_is_leased_installed_pumped_and_only_then_ready() {
    let mut p = plane();
    let ring = installed(&mut p, 1, true);
    assert_eq!(p.live_leases(), 1);
    assert_eq!(
        cmds(&mut p),
        [PlaneCommand::StartSend {
            run_id: crate::wire::RunId(1),
            edge_id: EdgeId(1),
            consumer: peer(2),
            ring_id: ring,
        }]
    );
    assert!(events(&mut p).is_empty(), "not ready before the pump is");
    p.pump_ready(EdgeId(1));
    assert_eq!(
        events(&mut p),
        [PlaneEvent::EdgeReady { edge_id: EdgeId(1), ring_id: ring, direction: Direction::Send }]
    );
}

#[test]
fn a_stopped_edge_gives_its_lease_back_only_with_both_halves_of_the_evidence() {
    let mut p = plane();
    let ring = installed(&mut p, 1, false);
    cmds(&mut p);
    p.pump_ready(EdgeId(1));
    events(&mut p);
    p.stop_edge(EdgeId(1));
    assert_eq!(
        cmds(&mut p),
        [PlaneCommand::StopPump { edge_id: EdgeId(1) }, PlaneCommand::DetachRing { ring_id: ring }]
    );
    // The pump's evidence alone releases nothing.
    p.pump_ended(EdgeId(1), PumpStopped::observed(ring), None);
    assert!(cmds(&mut p).is_empty());
    assert_eq!(p.live_leases(), 1);
    assert!(events(&mut p).is_empty());
    p.local_quiet(WorkerQuiet::quiesced(ring));
    assert_eq!(cmds(&mut p), [PlaneCommand::ForgetRing { edge_id: EdgeId(1), ring_id: ring }]);
    assert_eq!(p.live_leases(), 0);
    assert_eq!(events(&mut p), [PlaneEvent::EdgeStopped { edge_id: EdgeId(1) }]);
    assert!(p.is_settled(EdgeId(1)));
}

#[test]
fn a_pump_that_ended_before_its_edge_stopped_keeps_its_evidence_for_the_stop() {
    let mut p = plane();
    let ring = installed(&mut p, 1, false);
    cmds(&mut p);
    p.pump_ready(EdgeId(1));
    events(&mut p);
    // The producer finished its stream: the pump is gone, the edge is not stopped yet.
    p.pump_ended(EdgeId(1), PumpStopped::observed(ring), None);
    assert!(cmds(&mut p).is_empty());
    p.stop_edge(EdgeId(1));
    assert_eq!(cmds(&mut p), [PlaneCommand::DetachRing { ring_id: ring }], "no StopPump");
    p.local_quiet(WorkerQuiet::quiesced(ring));
    assert_eq!(p.live_leases(), 0);
    assert_eq!(
        events(&mut p),
        [PlaneEvent::EdgeStopped { edge_id: EdgeId(1) }],
        "released with the parked evidence"
    );
}

#[test]
fn evidence_about_another_ring_never_releases_a_lease() {
    let mut p = plane();
    let ring = installed(&mut p, 1, false);
    cmds(&mut p);
    p.pump_ready(EdgeId(1));
    p.stop_edge(EdgeId(1));
    cmds(&mut p);
    p.pump_ended(EdgeId(1), PumpStopped::observed(ring), None);
    p.local_quiet(WorkerQuiet::quiesced(RingId(ring.0 + 40)));
    assert_eq!(p.live_leases(), 1);
    p.local_quiet(WorkerQuiet::quiesced(ring));
    assert_eq!(p.live_leases(), 0);
}

#[test]
fn each_fault_names_the_component_that_saw_it_first() {
    let mut p = plane();
    // A send pump's stream fault is the tx edge's.
    let ring1 = installed(&mut p, 1, true);
    cmds(&mut p);
    p.pump_ended(EdgeId(1), PumpStopped::observed(ring1), Some(StreamFault::WriteFailed));
    let failed = events(&mut p);
    assert!(
        matches!(
            failed[..],
            [PlaneEvent::EdgeFailed { edge_id: EdgeId(1), component: Component::TxEdge, .. }]
        ),
        "{failed:?}"
    );
    // The failed edge is taken down by the plane itself; the pump is already gone.
    assert_eq!(cmds(&mut p), [PlaneCommand::DetachRing { ring_id: ring1 }]);
    // A ring fault is whoever reported it, and the first component stays.
    let ring2 = installed(&mut p, 2, false);
    p.ring_fault(ring2, RingFault::WorkerCrashed, Component::WorkerCtl);
    p.stream_fault(EdgeId(2), StreamFault::ReadFailed, Component::RxEdge);
    let failed = events(&mut p);
    assert!(
        matches!(
            failed[..],
            [PlaneEvent::EdgeFailed { edge_id: EdgeId(2), component: Component::WorkerCtl, .. }]
        ),
        "{failed:?}"
    );
}

#[test]
fn a_second_provisioning_of_a_live_edge_is_refused_and_changes_nothing() {
    let mut p = plane();
    installed(&mut p, 1, true);
    cmds(&mut p);
    assert!(p.provision(prov(1, true)).is_err());
    assert!(cmds(&mut p).is_empty());
    assert_eq!(p.live_leases(), 1);
}
