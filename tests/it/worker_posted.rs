//! Posted steps across a real process boundary: a real `swactor worker` takes an object
//! only for the step posted for exactly its ring, edge and sequence, and a post that is
//! withdrawn (by request, by its ring's or role's removal, or by a stop) leaves nothing
//! behind.

use std::sync::Arc;

use swactor::events::Direction;
use swactor::ring::{RingDrain, RingFeeder};
use swactor::wire::reason::StepFailure;
use swactor::wire::{
    EdgeId, HEADER_LEN, ObjectFlags, ObjectHeader, ObjectId, PortId, RingId, RoleId, Sequence,
    StepId,
};
use swactor::worker::protocol::{
    Backend, Command, Event, OutputExtent, PostedOutput, RoleConfig, ShutdownMode,
};
use swactor::worker::role::transform;
use swactor::workerctl::CtlOutput;

use crate::worker::{NodeRing, Plane, XOR, next, object, start};

const ROW: u64 = 256;

fn post(step: u64, ring: RingId, edge: u64, seq: u64, out: RingId) -> Command {
    Command::PostStep {
        role_id: RoleId(1),
        step_id: StepId(step),
        ring_id: ring,
        edge_id: EdgeId(edge),
        port: PortId(0),
        sequence: Sequence(seq),
        output: PostedOutput {
            port: PortId(0),
            ring_id: out,
            object_id: ObjectId(100 + seq),
            sequence: Sequence(seq),
            extent: OutputExtent::PerRow {
                input_row_bytes: ROW,
                output_row_bytes: ROW,
                prefix_bytes: 0,
            },
            flags: ObjectFlags::NONE,
        },
    }
}

/// The worker's events until one matches `done` (included).
async fn until(plane: &mut Plane, done: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        match next(&mut plane.events).await {
            CtlOutput::Routed(e) => {
                let stop = done(&e);
                seen.push(e);
                if stop {
                    return seen;
                }
            }
            other => panic!("unexpected output {other:?}"),
        }
    }
}

async fn send(plane: &Plane, cmd: Command) {
    plane.driver.send(cmd).await.expect("command accepted");
}

/// Writes one whole object into an ingress ring and wakes the worker.
async fn feed(plane: &Plane, ring: &NodeRing, ring_id: RingId, seq: u64, extent: usize) {
    let (header, payload) = object(seq, extent);
    let mut bytes = header.encode().to_vec();
    bytes.extend_from_slice(&payload);
    let mut feeder = RingFeeder::new(ring_id, Arc::clone(ring));
    let (n, _) = feeder.push(&bytes).expect("push");
    assert_eq!(n, bytes.len(), "the object fits the ring");
    send(plane, Command::RingReadable { ring_id }).await;
}

async fn configure(plane: &mut Plane) {
    let config = RoleConfig::Transform { xor: XOR, delay_ms: 0, fail_on_sequence: None };
    send(plane, Command::ConfigureRole { role_id: RoleId(1), config }).await;
    until(plane, |e| matches!(e, Event::RoleConfigured { .. })).await;
}

async fn stop(mut plane: Plane) {
    plane.driver.stop(ShutdownMode::Graceful);
    until(&mut plane, |e| matches!(e, Event::WorkerStopped { .. })).await;
    plane.driver.join().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_step_never_runs_on_an_object_of_another_sequence_ring_or_edge() {
    let mut plane = start(Backend::Cpu).await;
    configure(&mut plane).await;
    let (a, a_ring) = plane.ring(1, Direction::Recv).await;
    let (b, b_ring) = plane.ring(3, Direction::Recv).await;
    let (out, out_ring) = plane.ring(2, Direction::Send).await;
    let (a, b, out) = (a.ring_id, b.ring_id, out.ring_id);
    let failed = |step: u64| {
        move |e: &Event| {
            matches!(e, Event::StepFailed { step_id, reason: StepFailure::PostRejected, .. }
                if *step_id == StepId(step))
        }
    };

    // Refused: a ring of another edge, a ring that is not an ingress ring.
    send(&plane, post(1, a, 9, 1, out)).await;
    until(&mut plane, failed(1)).await;
    send(&plane, post(2, out, 2, 0, out)).await;
    until(&mut plane, failed(2)).await;

    // Step 3 waits for sequence 1 of ring a: sequence 0 of ring a, and of ring b, are
    // loaded untaken.
    send(&plane, post(3, a, 1, 1, out)).await;
    for (ring_id, ring) in [(a, &a_ring), (b, &b_ring)] {
        feed(&plane, ring, ring_id, 0, 2 * ROW as usize).await;
        let seen = until(&mut plane, |e| matches!(e, Event::ObjectLoaded { .. })).await;
        let Some(Event::ObjectLoaded { taken_by, handle, sequence, .. }) = seen.last() else {
            unreachable!()
        };
        assert_eq!((*taken_by, *sequence), (None, Sequence(0)), "ring {ring_id:?}");
        assert!(!seen.iter().any(|e| matches!(e, Event::StepCompleted { .. })));
        send(&plane, Command::ReleaseDeviceObject { handle: *handle }).await;
    }

    // Sequence 1 of ring a: taken by step 3, which runs without an `ExecuteStep`.
    feed(&plane, &a_ring, a, 1, 3 * ROW as usize).await;
    let seen = until(&mut plane, |e| matches!(e, Event::StepCompleted { .. })).await;
    let loaded = seen.iter().find_map(|e| match e {
        Event::ObjectLoaded { taken_by, sequence, handle, .. } => {
            Some((*taken_by, *sequence, *handle))
        }
        _ => None,
    });
    let Some((taken_by, sequence, input)) = loaded else { panic!("{seen:?}") };
    assert_eq!((taken_by, sequence), (Some(StepId(3)), Sequence(1)));
    assert!(
        seen.iter()
            .any(|e| matches!(e, Event::DeviceObjectReleased { handle } if *handle == input)),
        "the step freed its input: {seen:?}"
    );
    assert!(matches!(seen.last(), Some(Event::StepCompleted { step_id: StepId(3), .. })));
    let mut drain = RingDrain::new(out, Arc::clone(&out_ring));
    let mut bytes = vec![0u8; HEADER_LEN + 3 * ROW as usize];
    let (n, _) = drain.pull(&mut bytes).expect("pull");
    assert_eq!(n, bytes.len(), "the whole output is committed");
    let h = ObjectHeader::decode(bytes[..HEADER_LEN].try_into().expect("header")).expect("valid");
    assert_eq!((h.object_id, h.sequence, h.extent), (ObjectId(101), Sequence(1), 3 * ROW));
    let (_, payload) = object(1, 3 * ROW as usize);
    assert!(bytes[HEADER_LEN..] == transform(&payload, XOR, 3 * ROW as usize)[..]);

    // A post for a sequence the ring already loaded is passed at once.
    send(&plane, post(4, a, 1, 1, out)).await;
    until(&mut plane, |e| matches!(e, Event::StepWithdrawn { step_id: StepId(4), .. })).await;
    stop(plane).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_while_a_step_is_posted_withdraws_it_and_leaves_nothing_behind() {
    let mut plane = start(Backend::Cpu).await;
    configure(&mut plane).await;
    let (a, _a_ring) = plane.ring(1, Direction::Recv).await;
    let (b, b_ring) = plane.ring(3, Direction::Recv).await;
    let (out, _out_ring) = plane.ring(2, Direction::Send).await;
    let (a, b, out) = (a.ring_id, b.ring_id, out.ring_id);
    let withdrawn = |step: u64| move |e: &Event| matches!(e, Event::StepWithdrawn { step_id, .. } if *step_id == StepId(step));

    // Withdrawn on request.
    send(&plane, post(1, a, 1, 0, out)).await;
    send(&plane, Command::WithdrawStep { step_id: StepId(1) }).await;
    until(&mut plane, withdrawn(1)).await;
    // Withdrawn with its ring: the ring is quiet after it.
    send(&plane, post(2, a, 1, 0, out)).await;
    send(
        &plane,
        Command::UninstallRing {
            ring_id: a,
            reason: swactor::worker::protocol::UninstallReason::Stop,
        },
    )
    .await;
    let seen = until(&mut plane, |e| matches!(e, Event::RingQuiesced { .. })).await;
    assert!(seen.iter().any(withdrawn(2)), "{seen:?}");
    // Withdrawn with its role; a later object of that sequence is loaded untaken.
    send(&plane, post(3, b, 3, 0, out)).await;
    send(&plane, Command::ReleaseRole { role_id: RoleId(1), park: false }).await;
    let seen = until(&mut plane, |e| matches!(e, Event::RoleReleased { .. })).await;
    assert!(seen.iter().any(withdrawn(3)), "{seen:?}");
    feed(&plane, &b_ring, b, 0, ROW as usize).await;
    let seen = until(&mut plane, |e| matches!(e, Event::ObjectLoaded { .. })).await;
    let Some(Event::ObjectLoaded { taken_by: None, handle, .. }) = seen.last() else {
        panic!("{seen:?}")
    };
    send(&plane, Command::ReleaseDeviceObject { handle: *handle }).await;
    until(&mut plane, |e| matches!(e, Event::DeviceObjects { live: 0 })).await;
    // Withdrawn by the worker's stop.
    configure(&mut plane).await;
    send(&plane, post(4, b, 3, 1, out)).await;
    plane.driver.stop(ShutdownMode::Graceful);
    let seen = until(&mut plane, |e| matches!(e, Event::WorkerStopped { .. })).await;
    assert!(seen.iter().any(withdrawn(4)), "{seen:?}");
    plane.driver.join().await;
}
