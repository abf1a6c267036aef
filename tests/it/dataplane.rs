//! Ingress parser and egress producer contracts on heap rings (no process boundary), with
//! one fault injected at a time.

use std::sync::Arc;

use swactor::ring::{Consumer, HeapRegion, MappedRing, Producer, RingDrain, RingFeeder};
use swactor::wire::reason::{DeviceFailure, ObjectFailure, StepFailure};
use swactor::wire::{
    ActivationDType, EdgeId, HEADER_LEN, ObjectFlags, ObjectHeader, ObjectId, ObjectSpec, PortId,
    RingId, Sequence, WorkerGeneration,
};
use swactor::worker::device::{CpuBridge, DeviceBridge, FaultyBridge};
use swactor::worker::egress::{EgressProducer, Progress};
use swactor::worker::ingress::IngressParser;
use swactor::worker::protocol::{DeviceHandle, Event, OutputBinding};

type Ring = Arc<MappedRing<HeapRegion>>;
type Corruption = (Box<dyn Fn(&mut Vec<u8>)>, ObjectFailure);

fn ring(capacity: u64) -> Ring {
    let (region, layout) = HeapRegion::for_ring(1, capacity);
    Arc::new(MappedRing::init(region, &layout).expect("init"))
}

fn spec() -> ObjectSpec {
    ObjectSpec::activations(64, 4, ActivationDType::F32) // rows of 16 bytes, max 1024
}

fn parser() -> IngressParser {
    IngressParser::new(RingId(1), EdgeId(1), PortId(0), spec(), 2)
}

fn object_bytes(seq: u64, extent: u64) -> Vec<u8> {
    let mut b = ObjectHeader::new(ObjectId(seq + 10), Sequence(seq), extent, ObjectFlags::NONE)
        .encode()
        .to_vec();
    b.extend((0..extent).map(|i| (i * 3 + seq) as u8));
    b
}

fn failures(events: &[Event]) -> Vec<ObjectFailure> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ObjectFailed { reason, .. } => Some(*reason),
            _ => None,
        })
        .collect()
}

fn loaded(events: &[Event]) -> Vec<(Sequence, DeviceHandle)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ObjectLoaded { sequence, handle, .. } => Some((*sequence, *handle)),
            _ => None,
        })
        .collect()
}

/// Feeds `bytes` through a ring of `capacity`, polling the parser whenever the ring is full.
fn feed(
    capacity: u64,
    bytes: &[u8],
    close: bool,
    p: &mut IngressParser,
    bridge: &mut dyn DeviceBridge,
) -> Vec<Event> {
    let r = ring(capacity);
    let mut feeder = RingFeeder::new(RingId(1), Arc::clone(&r));
    let mut consumer = Consumer::attach(Arc::clone(&r));
    let mut events = Vec::new();
    let mut sent = 0;
    loop {
        let (n, _) = feeder.push(&bytes[sent..]).expect("push");
        sent += n;
        if sent == bytes.len() && close {
            feeder.close();
        }
        events.extend(p.poll(&mut consumer, bridge));
        if sent == bytes.len() || p.is_faulted() {
            return events;
        }
        if n == 0 {
            assert!(
                !events.is_empty() || consumer.available().expect("available") < capacity,
                "no progress"
            );
        }
    }
}

#[test]
fn objects_larger_than_the_ring_load_whole_and_in_order() {
    let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
    let mut p = IngressParser::new(RingId(1), EdgeId(1), PortId(0), spec(), 8);
    let mut bytes = object_bytes(0, 1024);
    bytes.extend(object_bytes(1, 512));
    let events = feed(96, &bytes, false, &mut p, &mut bridge);
    let got = loaded(&events);
    assert_eq!(got.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [Sequence(0), Sequence(1)]);
    let expect: Vec<u8> = (0..1024u64).map(|i| (i * 3) as u8).collect();
    assert_eq!(bridge.view(got[0].1).expect("view"), &expect[..]);
    assert!(
        events.iter().any(|e| matches!(e, Event::RingWritable { .. })),
        "releases wake the producer"
    );
}

#[test]
fn each_malformed_header_fails_the_object_with_its_reason_and_stops_the_ring() {
    let cases: Vec<Corruption> = vec![
        (Box::new(|b| b[0] = b'X'), ObjectFailure::BadMagic),
        (Box::new(|b| b[4] = 9), ObjectFailure::UnsupportedVersion),
        (Box::new(|b| b[6] = 48), ObjectFailure::BadHeaderLength),
        (
            Box::new(|b| b[24..32].copy_from_slice(&2048u64.to_le_bytes())),
            ObjectFailure::ExtentOverMax,
        ),
        (
            Box::new(|b| b[24..32].copy_from_slice(&17u64.to_le_bytes())),
            ObjectFailure::ExtentMisaligned,
        ),
        (
            Box::new(|b| b[16..24].copy_from_slice(&1u64.to_le_bytes())),
            ObjectFailure::SequenceViolation,
        ),
    ];
    for (corrupt, reason) in cases {
        let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
        let mut p = parser();
        let mut bytes = object_bytes(0, 64);
        corrupt(&mut bytes);
        bytes.extend(object_bytes(1, 64));
        let events = feed(4096, &bytes, false, &mut p, &mut bridge);
        assert_eq!(failures(&events), [reason]);
        assert!(loaded(&events).is_empty(), "nothing after a fault is loaded");
        assert!(p.is_faulted());
        assert_eq!(bridge.live(), 0, "no device object leaked");
    }
}

#[test]
fn a_duplicated_sequence_is_a_violation() {
    let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
    let mut p = IngressParser::new(RingId(1), EdgeId(1), PortId(0), spec(), 8);
    let mut bytes = object_bytes(0, 16);
    bytes.extend(object_bytes(0, 16));
    let events = feed(4096, &bytes, false, &mut p, &mut bridge);
    assert_eq!(loaded(&events).len(), 1);
    assert_eq!(failures(&events), [ObjectFailure::SequenceViolation]);
}

#[test]
fn the_stream_ending_inside_an_object_fails_it_as_eof_mid_object() {
    for cut in [10, HEADER_LEN + 8] {
        let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
        let mut p = parser();
        let bytes = object_bytes(0, 64);
        let events = feed(4096, &bytes[..cut], true, &mut p, &mut bridge);
        assert_eq!(failures(&events), [ObjectFailure::EofMidObject], "cut at {cut}");
        assert_eq!(bridge.live(), 0);
    }
    let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
    let mut p = parser();
    let events = feed(4096, &object_bytes(0, 64), true, &mut p, &mut bridge);
    assert_eq!(loaded(&events).len(), 1);
    assert!(p.is_closed(), "a stream ending between objects closes cleanly");
}

#[test]
fn allocation_and_copy_failures_fail_the_object_with_their_reason() {
    let mut bridge = FaultyBridge::new(CpuBridge::new(WorkerGeneration(1), 1 << 20), Some(1), None);
    let events = feed(4096, &object_bytes(0, 64), false, &mut parser(), &mut bridge);
    assert_eq!(failures(&events), [ObjectFailure::AllocationFailed]);
    let mut bridge = FaultyBridge::new(CpuBridge::new(WorkerGeneration(1), 1 << 20), None, Some(1));
    let events = feed(4096, &object_bytes(0, 64), false, &mut parser(), &mut bridge);
    assert_eq!(failures(&events), [ObjectFailure::CopyFailed]);
    assert_eq!(bridge.live(), 0, "the half-loaded object was freed");
}

#[test]
fn unreleased_objects_stop_consumption_until_one_is_released() {
    let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
    let mut p = parser(); // at most 2 outstanding
    let r = ring(4096);
    let mut feeder = RingFeeder::new(RingId(1), Arc::clone(&r));
    let mut consumer = Consumer::attach(Arc::clone(&r));
    for seq in 0..3 {
        feeder.push(&object_bytes(seq, 16)).expect("push");
    }
    let events = p.poll(&mut consumer, &mut bridge);
    assert_eq!(loaded(&events).len(), 2, "the third object waits in the ring");
    assert!(consumer.available().expect("available") > 0);
    p.object_released();
    assert_eq!(
        loaded(&p.poll(&mut consumer, &mut bridge)),
        [(Sequence(2), DeviceHandle { generation: WorkerGeneration(1), id: 3 })]
    );
}

#[test]
fn the_cpu_bridge_rejects_stale_and_unknown_handles() {
    let mut bridge = CpuBridge::new(WorkerGeneration(2), 1024);
    let h = bridge.alloc(16).expect("alloc");
    let stale = DeviceHandle { generation: WorkerGeneration(1), id: h.id };
    assert_eq!(bridge.free(stale), Err(DeviceFailure::StaleHandle));
    assert_eq!(
        bridge.view(DeviceHandle { generation: WorkerGeneration(2), id: 99 }).err(),
        Some(DeviceFailure::UnknownHandle)
    );
    assert_eq!(bridge.alloc(2048).err(), Some(DeviceFailure::AllocationFailed), "over the limit");
    assert_eq!(
        bridge.host_to_device(h, 8, &[0; 16]),
        Err(DeviceFailure::CopyFailed),
        "out of bounds"
    );
    bridge.free(h).expect("free");
    assert_eq!(bridge.free(h), Err(DeviceFailure::UnknownHandle), "no double free");
}

fn binding(seq: u64, extent: u64) -> OutputBinding {
    OutputBinding {
        port: PortId(0),
        ring_id: RingId(2),
        object_id: ObjectId(50 + seq),
        sequence: Sequence(seq),
        extent,
        flags: ObjectFlags::NONE,
    }
}

#[test]
fn egress_writes_the_header_then_exactly_extent_bytes_and_waits_when_full() {
    let mut bridge = CpuBridge::new(WorkerGeneration(1), 1 << 20);
    let h = bridge.alloc(1024).expect("alloc");
    let payload: Vec<u8> = (0..1024u32).map(|i| (i % 251) as u8).collect();
    bridge.host_to_device(h, 0, &payload).expect("copy");
    let r = ring(256);
    let mut producer = Producer::attach(Arc::clone(&r));
    let mut drain = RingDrain::new(RingId(2), Arc::clone(&r));
    let mut eg = EgressProducer::new(RingId(2), EdgeId(2), PortId(0), spec());
    assert_eq!(
        eg.poll(&mut producer, &mut bridge, &mut Vec::new()),
        Progress::Idle,
        "nothing without a binding"
    );
    eg.start(binding(0, 1024), h).expect("start");
    assert_eq!(
        eg.start(binding(1, 16), h),
        Err(StepFailure::OutputRingFault),
        "one object at a time"
    );
    let mut out = Vec::new();
    let mut events = Vec::new();
    loop {
        match eg.poll(&mut producer, &mut bridge, &mut events) {
            Progress::Done => break,
            Progress::Blocked => {
                assert!(
                    !events.iter().any(|e| matches!(e, Event::ObjectProduced { .. })),
                    "not produced before fully committed"
                );
                let mut buf = [0u8; 100];
                let (n, _) = drain.pull(&mut buf).expect("pull");
                assert!(n > 0);
                out.extend_from_slice(&buf[..n]);
                producer.on_writable().expect("writable");
            }
            other => panic!("{other:?}"),
        }
    }
    let mut rest = vec![0u8; 4096];
    let (n, _) = drain.pull(&mut rest).expect("pull");
    out.extend_from_slice(&rest[..n]);
    assert_eq!(out.len(), HEADER_LEN + 1024, "exactly the header and extent bytes");
    let header = ObjectHeader::decode(out[..HEADER_LEN].try_into().unwrap()).expect("header first");
    assert_eq!(
        (header.object_id, header.sequence, header.extent),
        (ObjectId(50), Sequence(0), 1024)
    );
    assert_eq!(&out[HEADER_LEN..], &payload[..]);
    assert!(matches!(
        events.last(),
        Some(Event::ObjectProduced { sequence: Sequence(0), extent: 1024, .. })
    ));
}

#[test]
fn egress_refuses_an_extent_its_edge_cannot_carry() {
    let mut eg = EgressProducer::new(RingId(2), EdgeId(2), PortId(0), spec());
    let h = DeviceHandle { generation: WorkerGeneration(1), id: 1 };
    assert_eq!(eg.start(binding(0, 2048), h), Err(StepFailure::ComputeFailed));
    assert_eq!(eg.start(binding(0, 15), h), Err(StepFailure::ComputeFailed));
}

#[test]
fn an_egress_copy_failure_fails_the_step_without_producing_the_object() {
    let mut bridge = FaultyBridge::new(CpuBridge::new(WorkerGeneration(1), 1 << 20), None, Some(2));
    let h = bridge.alloc(64).expect("alloc");
    bridge.host_to_device(h, 0, &[7; 64]).expect("first copy succeeds");
    let r = ring(4096);
    let mut producer = Producer::attach(Arc::clone(&r));
    let mut eg = EgressProducer::new(RingId(2), EdgeId(2), PortId(0), spec());
    eg.start(binding(0, 64), h).expect("start");
    let mut events = Vec::new();
    assert_eq!(
        eg.poll(&mut producer, &mut bridge, &mut events),
        Progress::Failed(StepFailure::ComputeFailed)
    );
    assert!(!events.iter().any(|e| matches!(e, Event::ObjectProduced { .. })));
    let mut consumer = Consumer::attach(Arc::clone(&r));
    assert_eq!(consumer.available(), Ok(0), "no byte of the broken object was published");
}
