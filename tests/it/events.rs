//! Event stream and reason codes: stable JSON Lines shapes.

use swactor::events::{
    CompletionCause, Direction, Event, EventLine, Reporter, RunOutcome, TeardownPart,
};
use swactor::wire::reason::*;
use swactor::wire::{
    EdgeId, LayerRange, NodeId, ObjectId, RingId, RunId, Sequence, StageIndex, StepId,
    WorkerGeneration,
};

fn one_of_each() -> Vec<Event> {
    let run_id = RunId(7);
    let node_id = NodeId(2);
    let stage_index = StageIndex(1);
    let edge_id = EdgeId(3);
    let ring_id = RingId(11);
    let object_id = ObjectId(5);
    let sequence = Sequence(4);
    let step_id = StepId(9);
    let worker_generation = WorkerGeneration(1);
    vec![
        Event::NodeStarted { node_id },
        Event::NodeAvailable {
            node_id,
            endpoint_id: "ab".repeat(32),
            addrs: vec!["127.0.0.1:1".into()],
        },
        Event::NodeFaulted {
            node_id,
            reason: BootFault::ArenaCreate,
            component: Component::NodeBoot,
        },
        Event::LinksMeasured {
            node_id,
            links: vec![swactor::wire::LinkRtt {
                to: NodeId(1),
                rtt_us: 20_000,
                bytes_per_s: Some(2_500_000),
            }],
        },
        Event::PoolReady { nodes: vec![NodeId(1), node_id] },
        Event::RunPlanned {
            run_id,
            stages: 3,
            edges: 4,
            context: Some(swactor::wire::PlanContext {
                tokens: 4096,
                trained: 8192,
                why: swactor::wire::ContextWhy::Memory { node: NodeId(2) },
            }),
        },
        Event::StageProvisionStarted { run_id, node_id, stage_index, by: Reporter::Node },
        Event::WeightsDownloadStarted { run_id, node_id, stage_index, bytes: 10 },
        Event::WeightsDownloading { run_id, node_id, stage_index, bytes: 5, total: 10 },
        Event::WeightsDownloaded { run_id, node_id, stage_index, bytes: 10 },
        Event::WeightsLoaded {
            run_id,
            node_id,
            stage_index,
            layers: LayerRange::new(4, 8),
            bytes: 10,
            kept_caches: true,
        },
        Event::EdgeProvisionStarted { run_id, node_id, edge_id, direction: Direction::Recv },
        Event::EdgeReady { run_id, node_id, edge_id, ring_id, direction: Direction::Send },
        Event::StageReady { run_id, node_id, stage_index },
        Event::ReadinessBarrierPassed { run_id },
        Event::PromptInjected { run_id, edge_id, object_id, sequence: Sequence(0), tokens: 12 },
        Event::ObjectLoaded {
            run_id,
            node_id,
            stage_index,
            edge_id,
            ring_id,
            object_id,
            sequence,
            extent: 1024,
            worker_generation,
        },
        Event::ExecuteStepStarted {
            run_id,
            node_id,
            stage_index,
            step_id,
            sequence,
            worker_generation,
        },
        Event::ObjectProduced {
            run_id,
            node_id,
            stage_index,
            edge_id,
            ring_id,
            object_id,
            sequence,
            extent: 1024,
        },
        Event::StepCompleted { run_id, node_id, stage_index, step_id, sequence, worker_generation },
        Event::TokenReceived { run_id, edge_id, object_id, sequence },
        Event::RunCompleted { run_id, tokens: 64, cause: CompletionCause::Eos },
        Event::RunFaulted {
            run_id,
            reason: FaultReason::Stream(StreamFault::WriteFailed),
            component: Component::Driver,
            node_id: Some(node_id),
            stage_index: None,
            edge_id: Some(edge_id),
        },
        Event::RunStopped { run_id, reason: OperatorStop::Interrupt.into() },
        Event::StopRunSent { run_id, node_id, stage_index },
        Event::StageStopped { run_id, node_id, stage_index },
        Event::StageLost { run_id, node_id, stage_index, reason: MembershipLoss::NodeDown.into() },
        Event::RunTornDown {
            run_id,
            outcome: RunOutcome::Faulted,
            unconfirmed: vec![TeardownPart::Stage { stage_index }, TeardownPart::TokenEndpoints],
            lost: vec![StageIndex(2)],
            lost_nodes: vec![NodeId(3)],
        },
    ]
}

#[test]
fn every_event_serializes_as_one_json_line_tagged_with_its_type() {
    for (i, event) in one_of_each().into_iter().enumerate() {
        let line = EventLine { ts_us: i as u64, origin_us: None, event: event.clone() };
        let json = line.to_json();
        assert!(!json.contains('\n'), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        assert_eq!(value["type"], event.kind(), "{json}");
        assert_eq!(value["ts_us"], i as u64);
        assert_eq!(EventLine::from_json(&json).expect("parses back"), line);
    }
}

#[test]
fn event_types_cover_the_design_list_exactly_once() {
    let kinds: Vec<&str> = one_of_each().iter().map(Event::kind).collect();
    let design = [
        "node_started",
        "node_available",
        "node_faulted",
        "links_measured",
        "pool_ready",
        "run_planned",
        "stage_provision_started",
        "weights_download_started",
        "weights_downloading",
        "weights_downloaded",
        "weights_loaded",
        "edge_provision_started",
        "edge_ready",
        "stage_ready",
        "readiness_barrier_passed",
        "prompt_injected",
        "object_loaded",
        "execute_step_started",
        "object_produced",
        "step_completed",
        "token_received",
        "run_completed",
        "run_faulted",
        "stop_run_sent",
        "stage_stopped",
        "stage_lost",
        "run_torn_down",
    ];
    for kind in design {
        assert_eq!(kinds.iter().filter(|k| **k == kind).count(), 1, "{kind}");
    }
    let terminal: Vec<_> =
        one_of_each().into_iter().filter(Event::is_terminal_outcome).map(|e| e.kind()).collect();
    assert_eq!(terminal, ["run_completed", "run_faulted", "run_stopped"]);
}

#[test]
fn run_torn_down_names_the_parts_that_did_not_confirm_and_the_lost_stages() {
    let e = Event::RunTornDown {
        run_id: RunId(1),
        outcome: RunOutcome::Faulted,
        unconfirmed: vec![
            TeardownPart::Stage { stage_index: StageIndex(2) },
            TeardownPart::TokenEndpoints,
        ],
        lost: vec![StageIndex(1)],
        lost_nodes: vec![NodeId(2)],
    };
    let v: serde_json::Value = serde_json::to_value(&e).expect("json");
    assert_eq!(
        v["unconfirmed"],
        serde_json::json!([{"part": "stage", "stage_index": 2}, {"part": "token_endpoints"}])
    );
    assert_eq!(v["lost"], serde_json::json!([1]));
    assert_eq!(v["lost_nodes"], serde_json::json!([2]), "the lost stages' nodes are named");
}

#[test]
fn identity_fields_appear_by_name_in_the_json() {
    let e = Event::ObjectLoaded {
        run_id: RunId(1),
        node_id: NodeId(2),
        stage_index: StageIndex(3),
        edge_id: EdgeId(4),
        ring_id: RingId(5),
        object_id: ObjectId(6),
        sequence: Sequence(7),
        extent: 8,
        worker_generation: WorkerGeneration(9),
    };
    let v: serde_json::Value = serde_json::to_value(&e).expect("json");
    for (field, n) in [
        ("run_id", 1),
        ("node_id", 2),
        ("stage_index", 3),
        ("edge_id", 4),
        ("ring_id", 5),
        ("object_id", 6),
        ("sequence", 7),
        ("extent", 8),
        ("worker_generation", 9),
    ] {
        assert_eq!(v[field], n, "{field}");
    }
}

#[test]
fn fault_reasons_serialize_as_class_dot_code_and_parse_back() {
    let mut all: Vec<FaultReason> = Vec::new();
    all.extend(BootFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(PlanRejection::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(ObjectFailure::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(RingFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(StepFailure::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(WorkerFatal::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(DeviceFailure::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(WeightsFailure::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(StreamFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(ControlFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(MembershipLoss::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(StageFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(TokenFault::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(Timeout::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(OperatorStop::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(NodeStop::ALL.iter().map(|&r| FaultReason::from(r)));
    all.extend(PoolChange::ALL.iter().map(|&r| FaultReason::from(r)));
    let mut seen = std::collections::HashSet::new();
    for r in all {
        let json = serde_json::to_string(&r).expect("json");
        assert_eq!(json, format!("\"{}.{}\"", r.class(), r.code()));
        assert!(seen.insert(json.clone()), "duplicate code {json}");
        assert!(r.code().chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{json}");
        assert_eq!(serde_json::from_str::<FaultReason>(&json).expect("parses"), r);
    }
    assert!(serde_json::from_str::<FaultReason>("\"stream.no_such_code\"").is_err());
    assert!(serde_json::from_str::<FaultReason>("\"nonsense\"").is_err());
}
