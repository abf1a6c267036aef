//! Control framing contract tests.

use proptest::prelude::*;

use super::*;
use crate::events::{Event, EventLine};

fn messages() -> Vec<ControlMessage> {
    vec![
        ControlMessage::NodeAvailable {
            node_id: NodeId(3),
            endpoint_id: "ab".repeat(32),
            addrs: vec!["127.0.0.1:1".into()],
            swim_addr: Some("127.0.0.1:2".into()),
            memory_bytes: Some(1 << 30),
            arena_bytes: Some(1 << 28),
            device: Some("cuda:1".into()),
            prompt_cache_bytes: Some(1 << 29),
            speed: Some(crate::wire::NodeSpeed {
                threads: 2,
                isa: "avx2".into(),
                read_mbs: 21_000,
                formats: vec![crate::wire::FormatRate {
                    format: "q8_0".into(),
                    decode_mmacs: 30_000,
                    prefill_mmacs: 90_000,
                }],
            }),
        },
        ControlMessage::MeasureLinks {
            peers: vec![crate::wire::Peer {
                node_id: NodeId(2),
                endpoint_id: Some("cd".repeat(32)),
                addrs: vec!["127.0.0.1:9".parse().expect("addr")],
                relay: None,
            }],
        },
        ControlMessage::LinksMeasured {
            links: vec![crate::wire::LinkRtt {
                to: NodeId(2),
                rtt_us: 20_000,
                bytes_per_s: Some(3_000_000),
            }],
        },
        ControlMessage::Observe { delegation: "ef".repeat(64), members: vec![] },
        ControlMessage::MemberView { up: vec![NodeId(1), NodeId(3)], suspect: vec![NodeId(2)] },
        ControlMessage::StageReady { run_id: RunId(1), stage_index: StageIndex(2) },
        ControlMessage::StageFault {
            run_id: RunId(1),
            stage_index: StageIndex(0),
            reason: FaultReason::Stream(crate::wire::reason::StreamFault::WriteFailed),
            component: Component::Driver,
        },
        ControlMessage::StopRun { run_id: RunId(1), faulted: false, park: false },
        ControlMessage::StopRun { run_id: RunId(1), faulted: true, park: true },
        ControlMessage::StageStopped { run_id: RunId(1), stage_index: StageIndex(1) },
        ControlMessage::NodeFaulted {
            node_id: NodeId(2),
            reason: crate::wire::reason::BootFault::WorkerStart,
        },
        ControlMessage::Event {
            line: EventLine {
                ts_us: 5,
                origin_us: None,
                event: Event::ReadinessBarrierPassed { run_id: RunId(1) },
            },
        },
    ]
}

#[test]
fn frames_round_trip_back_to_back() {
    let mut d = FrameDecoder::new();
    for m in messages() {
        d.push(&encode(&m).expect("encode"));
    }
    for m in messages() {
        assert_eq!(d.next_message(), Some(Ok(m)));
    }
    assert_eq!(d.next_message(), None);
}

#[test]
fn an_oversized_frame_is_refused_before_it_is_buffered() {
    let mut d = FrameDecoder::new();
    d.push(&((MAX_FRAME as u32) + 1).to_le_bytes());
    assert_eq!(d.next_message(), Some(Err(ControlFault::FrameTooLarge)));
    d.push(&encode(&messages()[0]).expect("encode"));
    assert_eq!(d.next_message(), Some(Err(ControlFault::FrameTooLarge)), "the session is over");
}

#[test]
fn malformed_and_foreign_version_frames_end_the_session_with_their_reason() {
    let frame = |body: &[u8]| {
        let mut f = (body.len() as u32).to_le_bytes().to_vec();
        f.extend_from_slice(body);
        f
    };
    for (body, fault) in [
        (&b"{not json"[..], ControlFault::MalformedFrame),
        (&br#"{"v":1,"msg":{"type":"launch"}}"#[..], ControlFault::MalformedFrame),
        (&br#"{"v":2,"msg":{"type":"stop_run","run_id":1}}"#[..], ControlFault::UnsupportedVersion),
    ] {
        let mut d = FrameDecoder::new();
        d.push(&frame(body));
        assert_eq!(d.next_message(), Some(Err(fault)));
    }
}

#[test]
fn only_the_configured_orchestrator_is_authorized() {
    let orch = "ab".repeat(32);
    assert_eq!(authorize(&orch, &orch), Ok(()));
    assert_eq!(authorize(&"cd".repeat(32), &orch), Err(ControlFault::UnauthorizedOrchestrator));
}

proptest! {
    #[test]
    fn any_split_of_the_byte_stream_gives_the_same_messages(cuts in proptest::collection::vec(0usize..4000, 0..12)) {
        let bytes: Vec<u8> = messages().iter().flat_map(|m| encode(m).expect("encode")).collect();
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort();
        let mut d = FrameDecoder::new();
        let mut got = Vec::new();
        let mut last = 0;
        for c in cuts.into_iter().chain([bytes.len()]) {
            d.push(&bytes[last..c]);
            last = c;
            while let Some(m) = d.next_message() {
                got.push(m.expect("valid"));
            }
        }
        prop_assert_eq!(got, messages());
    }
}
