//! Edge establisher contract tests (seed: edge_establisher_contract).

use super::*;
use crate::wire::{NodeId, RingLayout};

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

fn layout(ring: u64) -> RingLayout {
    RingLayout {
        ring_id: RingId(ring),
        arena_offset: ring * 8192,
        total_len: 8192,
        header_offset: ring * 8192,
        data_offset: ring * 8192 + 4096,
        data_capacity: 4096,
        alignment: 4096,
    }
}

fn cmds(e: &mut EdgeEstablisher) -> Vec<EstablisherCommand> {
    std::iter::from_fn(|| e.poll_command()).collect()
}

fn events(e: &mut EdgeEstablisher) -> Vec<EstablisherEvent> {
    std::iter::from_fn(|| e.poll_event()).collect()
}

fn request_of(c: &[EstablisherCommand]) -> LeaseRequestId {
    match c.first() {
        Some(EstablisherCommand::LeaseRing(r)) => r.request_id,
        other => panic!("expected a lease request, got {other:?}"),
    }
}

/// Drives an edge to Ready; returns its lease request id.
fn ready(e: &mut EdgeEstablisher, edge: u64, send: bool) -> LeaseRequestId {
    e.provision(prov(edge, send)).expect("provision");
    let req = request_of(&cmds(e));
    e.ring_leased(req, layout(edge));
    cmds(e);
    e.ring_installed(RingId(edge));
    cmds(e);
    e.driver_ready(EdgeId(edge));
    assert!(matches!(events(e)[..], [EstablisherEvent::EdgeReady { .. }]));
    req
}

#[test]
fn establishment_goes_lease_then_install_then_driver_then_ready() {
    for send in [true, false] {
        let mut e = EdgeEstablisher::new();
        e.provision(prov(5, send)).expect("provision");
        let c = cmds(&mut e);
        assert_eq!(c.len(), 1);
        let req = request_of(&c);
        e.ring_installed(RingId(5));
        e.driver_ready(EdgeId(5));
        assert!(cmds(&mut e).is_empty() && events(&mut e).is_empty(), "nothing before the lease");
        e.ring_leased(req, layout(5));
        assert!(matches!(
            cmds(&mut e)[..],
            [EstablisherCommand::InstallRing { edge_id: EdgeId(5), .. }]
        ));
        e.driver_ready(EdgeId(5));
        assert!(events(&mut e).is_empty(), "no driver readiness before the ring is installed");
        e.ring_installed(RingId(5));
        match (send, &cmds(&mut e)[..]) {
            (true, [EstablisherCommand::EstablishSend { consumer, layout: l, .. }]) => {
                assert_eq!(consumer.node_id, NodeId(2));
                assert_eq!(*l, layout(5));
            }
            (false, [EstablisherCommand::EstablishRecv { producer, .. }]) => {
                assert_eq!(producer.node_id, NodeId(1))
            }
            (_, other) => panic!("{other:?}"),
        }
        e.driver_ready(EdgeId(5));
        let dir = if send { Direction::Send } else { Direction::Recv };
        assert_eq!(
            events(&mut e),
            vec![EstablisherEvent::EdgeReady {
                edge_id: EdgeId(5),
                ring_id: RingId(5),
                direction: dir
            }]
        );
        assert!(e.is_ready(EdgeId(5)));
    }
}

#[test]
fn a_rejected_lease_fails_the_record() {
    let mut e = EdgeEstablisher::new();
    e.provision(prov(1, true)).expect("provision");
    let req = request_of(&cmds(&mut e));
    e.lease_rejected(req);
    assert!(matches!(
        events(&mut e)[..],
        [EstablisherEvent::EdgeFailed { edge_id: EdgeId(1), .. }]
    ));
    e.ring_leased(req, layout(1));
    assert_eq!(
        cmds(&mut e),
        vec![EstablisherCommand::CancelLease { request_id: req }],
        "a late grant is released"
    );
}

#[test]
fn stopping_before_the_lease_cancels_it_and_a_late_grant_is_released() {
    let mut e = EdgeEstablisher::new();
    e.provision(prov(1, false)).expect("provision");
    let req = request_of(&cmds(&mut e));
    e.stop_edge(EdgeId(1));
    assert_eq!(cmds(&mut e), vec![EstablisherCommand::CancelLease { request_id: req }]);
    assert_eq!(events(&mut e), vec![EstablisherEvent::EdgeStopped { edge_id: EdgeId(1) }]);
    e.ring_leased(req, layout(1));
    assert_eq!(
        cmds(&mut e),
        vec![EstablisherCommand::CancelLease { request_id: req }],
        "no install for a stopped record"
    );
    e.ring_installed(RingId(1));
    e.driver_ready(EdgeId(1));
    assert!(cmds(&mut e).is_empty() && events(&mut e).is_empty(), "stale events change nothing");
}

#[test]
fn stopping_a_ready_edge_stops_the_pump_uninstalls_and_releases_only_with_both_proofs() {
    let mut e = EdgeEstablisher::new();
    ready(&mut e, 3, true);
    e.stop_edge(EdgeId(3));
    assert_eq!(
        cmds(&mut e),
        vec![
            EstablisherCommand::StopPump { edge_id: EdgeId(3) },
            EstablisherCommand::UninstallRing { ring_id: RingId(3) }
        ]
    );
    e.worker_quiet(RingId(3), WorkerQuiet::quiesced(RingId(3)));
    assert!(cmds(&mut e).is_empty(), "the pump has not stopped yet");
    e.pump_stopped(EdgeId(3), PumpStopped::observed(RingId(3)));
    match &cmds(&mut e)[..] {
        [EstablisherCommand::ReleaseRing(proof)] => assert_eq!(proof.ring_id(), RingId(3)),
        other => panic!("{other:?}"),
    }
    assert_eq!(events(&mut e), vec![EstablisherEvent::EdgeStopped { edge_id: EdgeId(3) }]);
    assert_eq!(e.live_records(), 0);
}

#[test]
fn evidence_about_another_ring_does_not_release() {
    let mut e = EdgeEstablisher::new();
    ready(&mut e, 3, false);
    e.stop_edge(EdgeId(3));
    cmds(&mut e);
    e.pump_stopped(EdgeId(3), PumpStopped::observed(RingId(9)));
    e.worker_quiet(RingId(3), WorkerQuiet::quiesced(RingId(3)));
    assert!(cmds(&mut e).is_empty(), "mismatched evidence never makes a proof");
}

#[test]
fn a_fault_before_readiness_stops_the_record_and_reports_it() {
    let mut e = EdgeEstablisher::new();
    e.provision(prov(4, false)).expect("provision");
    let req = request_of(&cmds(&mut e));
    e.ring_leased(req, layout(4));
    cmds(&mut e);
    e.ring_fault(RingId(4), RingFault::AbiMismatch);
    assert_eq!(
        events(&mut e),
        vec![EstablisherEvent::EdgeFailed {
            edge_id: EdgeId(4),
            reason: FaultReason::Ring(RingFault::AbiMismatch)
        }]
    );
    // No pump was started: only the worker's evidence is missing.
    assert_eq!(cmds(&mut e), vec![EstablisherCommand::UninstallRing { ring_id: RingId(4) }]);
    e.worker_quiet(RingId(4), WorkerQuiet::quiesced(RingId(4)));
    assert!(matches!(cmds(&mut e)[..], [EstablisherCommand::ReleaseRing(_)]));
}

#[test]
fn a_stream_fault_while_waiting_for_the_driver_stops_the_edge() {
    let mut e = EdgeEstablisher::new();
    e.provision(prov(6, true)).expect("provision");
    let req = request_of(&cmds(&mut e));
    e.ring_leased(req, layout(6));
    e.ring_installed(RingId(6));
    cmds(&mut e);
    e.stream_fault(EdgeId(6), StreamFault::ConnectFailed);
    assert!(matches!(
        events(&mut e)[..],
        [EstablisherEvent::EdgeFailed {
            reason: FaultReason::Stream(StreamFault::ConnectFailed),
            ..
        }]
    ));
    assert_eq!(
        cmds(&mut e),
        vec![
            EstablisherCommand::StopPump { edge_id: EdgeId(6) },
            EstablisherCommand::UninstallRing { ring_id: RingId(6) }
        ]
    );
    e.driver_ready(EdgeId(6));
    assert!(events(&mut e).is_empty(), "a stopping edge never becomes ready");
}

#[test]
fn a_second_provisioning_of_the_same_edge_is_refused() {
    let mut e = EdgeEstablisher::new();
    e.provision(prov(1, true)).expect("provision");
    assert_eq!(e.provision(prov(1, false)), Err(EstablishError::DuplicateEdge(EdgeId(1))));
}
