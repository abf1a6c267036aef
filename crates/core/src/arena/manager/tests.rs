//! ArenaManager contract tests (DESIGN.md 5.1). Unit tests, because quiescence evidence can
//! only be built inside the crate.

use proptest::prelude::*;
use std::collections::HashSet;

use super::*;

const MIB: u64 = 1 << 20;

fn spec(capacity: u64) -> RingSpec {
    RingSpec { capacity, alignment: 128 }
}

fn req(id: u64, capacity: u64) -> LeaseRequest {
    LeaseRequest {
        request_id: LeaseRequestId(id),
        edge_id: EdgeId(id),
        direction: Direction::Recv,
        ring: spec(capacity),
    }
}

fn ready(ceiling: u64) -> ArenaManager {
    let mut m = ArenaManager::new(ceiling);
    m.arena_ready();
    assert_eq!(drain(&mut m), vec![ArenaEvent::Ready]);
    m
}

fn drain(m: &mut ArenaManager) -> Vec<ArenaEvent> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

fn proof(ring_id: RingId) -> QuiescenceProof {
    QuiescenceProof::new(PumpStopped::observed(ring_id), WorkerQuiet::quiesced(ring_id))
        .expect("matching proof")
}

fn leased(events: &[ArenaEvent]) -> Vec<RingLayout> {
    events
        .iter()
        .filter_map(|e| match e {
            ArenaEvent::RingLeased { layout, .. } => Some(*layout),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lease_that_fits_is_granted_with_a_page_aligned_layout_inside_the_ceiling() {
    let mut m = ready(16 * MIB);
    m.lease(req(1, MIB));
    let l = leased(&drain(&mut m));
    assert_eq!(l.len(), 1);
    let l = l[0];
    assert_eq!(l.validate(16 * MIB), Ok(()));
    assert_eq!(l.arena_offset % LEASE_PAGE, 0);
    assert_eq!(l.data_offset - l.header_offset, RING_HEADER_BYTES);
    assert_eq!(l.data_capacity, MIB);
    assert_eq!(l.ring_id, RingId(1));
}

#[test]
fn a_lease_that_can_never_fit_is_rejected_at_once() {
    let mut m = ready(MIB);
    m.lease(req(1, MIB));
    assert_eq!(
        drain(&mut m),
        vec![ArenaEvent::RingLeaseRejected {
            request_id: LeaseRequestId(1),
            reason: LeaseRejection::NeverFits
        }]
    );
    assert_eq!(m.queued_count(), 0);
}

#[test]
fn an_invalid_ring_spec_is_rejected() {
    let mut m = ready(16 * MIB);
    let mut r = req(1, MIB);
    r.ring.alignment = 96;
    m.lease(r);
    assert!(matches!(
        drain(&mut m)[..],
        [ArenaEvent::RingLeaseRejected { reason: LeaseRejection::InvalidSpec, .. }]
    ));
}

#[test]
fn a_lease_that_could_fit_later_is_queued_then_granted_after_a_release() {
    let mut m = ready(3 * MIB);
    m.lease(req(1, 2 * MIB));
    let first = leased(&drain(&mut m))[0];
    m.lease(req(2, 2 * MIB));
    assert_eq!(drain(&mut m), vec![ArenaEvent::LeaseQueued { request_id: LeaseRequestId(2) }]);
    m.release(proof(first.ring_id)).expect("release");
    let events = drain(&mut m);
    assert_eq!(events[0], ArenaEvent::RingReleased { ring_id: first.ring_id });
    let second = leased(&events);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].arena_offset, first.arena_offset, "released ranges are reused");
    assert_ne!(second[0].ring_id, first.ring_id, "ring ids are never reused");
}

#[test]
fn queued_requests_are_granted_strictly_in_arrival_order() {
    let mut m = ready(4 * MIB);
    m.lease(req(1, 3 * MIB));
    let big = leased(&drain(&mut m))[0];
    m.lease(req(2, 2 * MIB)); // queued
    m.lease(req(3, MIB / 4)); // would fit now, but must not overtake request 2
    assert_eq!(
        drain(&mut m),
        vec![
            ArenaEvent::LeaseQueued { request_id: LeaseRequestId(2) },
            ArenaEvent::LeaseQueued { request_id: LeaseRequestId(3) },
        ]
    );
    m.release(proof(big.ring_id)).expect("release");
    let order: Vec<LeaseRequestId> = drain(&mut m)
        .iter()
        .filter_map(|e| match e {
            ArenaEvent::RingLeased { request_id, .. } => Some(*request_id),
            _ => None,
        })
        .collect();
    assert_eq!(order, [LeaseRequestId(2), LeaseRequestId(3)]);
}

#[test]
fn cancelling_a_queued_request_drops_it_and_lets_the_next_one_through() {
    let mut m = ready(4 * MIB);
    m.lease(req(1, 3 * MIB));
    m.lease(req(2, 3 * MIB));
    m.lease(req(3, MIB / 4));
    drain(&mut m);
    m.cancel(LeaseRequestId(2));
    let events = drain(&mut m);
    assert_eq!(events[0], ArenaEvent::LeaseCancelled { request_id: LeaseRequestId(2) });
    assert_eq!(leased(&events).len(), 1, "request 3 no longer waits behind 2");
    assert_eq!(m.queued_count(), 0);
}

#[test]
fn a_lease_granted_before_its_cancellation_is_released_by_the_cancellation() {
    let mut m = ready(4 * MIB);
    m.lease(req(1, MIB));
    let l = leased(&drain(&mut m))[0];
    m.cancel(LeaseRequestId(1));
    assert_eq!(drain(&mut m), vec![ArenaEvent::RingReleased { ring_id: l.ring_id }]);
    assert_eq!(m.live_count(), 0);
    m.cancel(LeaseRequestId(99));
    assert!(drain(&mut m).is_empty(), "cancelling an unknown request changes nothing");
}

#[test]
fn release_needs_a_proof_for_a_live_ring_and_a_bad_release_changes_nothing() {
    let mut m = ready(4 * MIB);
    m.lease(req(1, MIB));
    let l = leased(&drain(&mut m))[0];
    assert_eq!(m.release(proof(RingId(42))), Err(ReleaseError::UnknownRing));
    assert_eq!(
        QuiescenceProof::new(PumpStopped::observed(l.ring_id), WorkerQuiet::quiesced(RingId(7))),
        Err(crate::wire::evidence::EvidenceMismatch)
    );
    assert_eq!(m.live_count(), 1);
    assert!(drain(&mut m).is_empty());
    let reaped = QuiescenceProof::new(
        PumpStopped::observed(l.ring_id),
        WorkerQuiet::reaped(l.ring_id, crate::wire::WorkerGeneration(3)),
    )
    .expect("reaped worker is quiet");
    m.release(reaped).expect("release");
    assert_eq!(m.release(proof(l.ring_id)), Err(ReleaseError::UnknownRing), "no double release");
}

#[test]
fn leases_are_refused_while_booting_and_after_a_failed_boot() {
    let mut m = ArenaManager::new(4 * MIB);
    m.lease(req(1, MIB));
    assert!(matches!(
        drain(&mut m)[..],
        [ArenaEvent::RingLeaseRejected { reason: LeaseRejection::NotReady, .. }]
    ));
    m.arena_failed(BootFault::ArenaMap);
    assert_eq!(drain(&mut m), vec![ArenaEvent::Failed { reason: BootFault::ArenaMap }]);
    m.arena_ready();
    m.lease(req(2, MIB));
    assert!(matches!(
        drain(&mut m)[..],
        [ArenaEvent::RingLeaseRejected { reason: LeaseRejection::NotReady, .. }]
    ));
}

#[test]
fn shutdown_rejects_new_and_queued_requests_and_closes_only_after_live_leases_are_released() {
    let mut m = ready(2 * MIB);
    m.lease(req(1, MIB));
    let l = leased(&drain(&mut m))[0];
    m.lease(req(2, 2 * MIB - LEASE_PAGE)); // queued
    drain(&mut m);
    m.shutdown();
    assert_eq!(
        drain(&mut m),
        vec![ArenaEvent::RingLeaseRejected {
            request_id: LeaseRequestId(2),
            reason: LeaseRejection::ShuttingDown
        }]
    );
    assert_eq!(m.live_count(), 1, "live leases are never released without proof");
    m.lease(req(3, MIB / 4));
    assert!(matches!(
        drain(&mut m)[..],
        [ArenaEvent::RingLeaseRejected { reason: LeaseRejection::ShuttingDown, .. }]
    ));
    m.release(proof(l.ring_id)).expect("release");
    assert_eq!(
        drain(&mut m),
        vec![ArenaEvent::RingReleased { ring_id: l.ring_id }, ArenaEvent::Closed]
    );
}

#[test]
fn a_duplicate_request_id_is_rejected() {
    let mut m = ready(4 * MIB);
    m.lease(req(1, MIB));
    drain(&mut m);
    m.lease(req(1, MIB));
    assert!(matches!(
        drain(&mut m)[..],
        [ArenaEvent::RingLeaseRejected { reason: LeaseRejection::DuplicateRequest, .. }]
    ));
}

#[test]
fn large_alignments_are_honoured() {
    let mut m = ready(64 * MIB);
    let mut r = req(1, MIB);
    r.ring.alignment = MIB;
    m.lease(req(9, 4096));
    m.lease(r);
    let l = leased(&drain(&mut m));
    assert_eq!(l[1].arena_offset % MIB, 0);
    assert_eq!(l[1].data_offset % MIB, 0);
}

#[derive(Debug, Clone)]
enum Op {
    Lease(u64),
    Cancel(usize),
    Release(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..=24).prop_map(|pages| Op::Lease(pages * 4096)),
        (0usize..16).prop_map(Op::Cancel),
        (0usize..16).prop_map(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_lease_cancel_release_sequences_keep_every_invariant(ops in proptest::collection::vec(op(), 1..80)) {
        let ceiling = 40 * 4096 * 4;
        let mut m = ready(ceiling);
        let mut next_req = 0u64;
        let mut requests: Vec<LeaseRequestId> = Vec::new();
        let mut ring_ids_seen = HashSet::new();
        for op in ops {
            match op {
                Op::Lease(cap) => {
                    next_req += 1;
                    requests.push(LeaseRequestId(next_req));
                    m.lease(req(next_req, cap));
                }
                Op::Cancel(i) => {
                    if let Some(&r) = requests.get(i % requests.len().max(1)) {
                        m.cancel(r);
                    }
                }
                Op::Release(i) => {
                    let live: Vec<RingId> = m.live_leases().map(|l| l.ring_id).collect();
                    if !live.is_empty() {
                        m.release(proof(live[i % live.len()])).expect("release a live ring");
                    }
                }
            }
            for e in drain(&mut m) {
                if let ArenaEvent::RingLeased { layout, .. } = e {
                    prop_assert!(ring_ids_seen.insert(layout.ring_id), "ring id reused");
                }
            }
            // Invariants over live leases.
            let live: Vec<RingLayout> = m.live_leases().copied().collect();
            for l in &live {
                prop_assert_eq!(l.validate(ceiling), Ok(()));
                prop_assert_eq!(l.arena_offset % l.alignment, 0);
            }
            for w in live.windows(2) {
                prop_assert!(w[0].arena_offset + w[0].total_len <= w[1].arena_offset, "overlap {:?}", w);
            }
            // Nothing queued could be granted: the queue head does not fit anywhere.
            if m.queued_count() > 0 {
                let head = m.queue[0];
                let (align, total) = lease_shape(&head.ring).expect("shape");
                prop_assert!(m.find_gap(align, total).is_none(), "queue head fits but waits");
            }
        }
        // Releasing everything grants every queued request eventually.
        loop {
            let live: Vec<RingId> = m.live_leases().map(|l| l.ring_id).collect();
            if live.is_empty() { break; }
            for r in live {
                m.release(proof(r)).expect("release");
            }
            drain(&mut m);
        }
        prop_assert_eq!(m.queued_count(), 0);
    }
}
