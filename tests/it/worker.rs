//! The node-local data plane across a real process boundary: a real `swactor worker`
//! child over a real memfd arena, driven through the worker controller's driver.

use std::sync::Arc;
use std::time::Duration;

use swactor::arena::{
    Arena, ArenaEvent, ArenaManager, LeaseRequest, LeaseRequestId, QuiescenceProof,
};
use swactor::events::Direction;
use swactor::ring::{MappedRing, RingDrain, RingFeeder, Wake};
use swactor::wire::reason::{RingFault, WorkerFatal};
use swactor::wire::{
    ActivationDType, EdgeId, HEADER_LEN, ObjectFlags, ObjectHeader, ObjectId, ObjectSpec, PortId,
    RingLayout, RingSpec, RoleId, Sequence, StepId,
};
use swactor::worker::protocol::{
    Backend, Command, Event, InputBinding, OutputBinding, RoleConfig, ShutdownMode,
};
use swactor::worker::role::transform;
use swactor::workerctl::{CtlConfig, CtlOutput, RestartPolicy, WorkerDriver, WorkerDriverConfig};
use tokio::sync::mpsc::UnboundedReceiver;

const ARENA: u64 = 8 << 20;
const RING: u64 = 64 * 1024;
const HIDDEN: u32 = 64; // rows of 256 bytes
pub(crate) const XOR: u8 = 0x5a;

pub(crate) type NodeRing = Arc<MappedRing<swactor::arena::memfd::ArenaRegion>>;

pub(crate) struct Plane {
    pub(crate) arena: Arc<Arena>,
    pub(crate) manager: ArenaManager,
    pub(crate) driver: WorkerDriver,
    pub(crate) events: UnboundedReceiver<CtlOutput>,
    pub(crate) pid: u32,
    pub(crate) spec: ObjectSpec,
}

pub(crate) async fn next(events: &mut UnboundedReceiver<CtlOutput>) -> CtlOutput {
    tokio::time::timeout(Duration::from_secs(20), events.recv())
        .await
        .expect("worker controller went quiet")
        .expect("driver ended")
}

pub(crate) async fn start(backend: Backend) -> Plane {
    let arena = Arc::new(Arena::create(ARENA).expect("arena"));
    let mut manager = ArenaManager::new(ARENA);
    manager.arena_ready();
    assert_eq!(manager.poll_event(), Some(ArenaEvent::Ready));
    let config = WorkerDriverConfig {
        exe: assert_cmd::cargo::cargo_bin("swactor"),
        ctl: CtlConfig {
            arena_ceiling: ARENA,
            backend,
            init_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            max_restarts: 0,
            restart: RestartPolicy::DEFAULT,
        },
        threads: 1,
        doorbells: false,
    };
    let (driver, mut events) = WorkerDriver::start(config, Arc::clone(&arena));
    let pid = match next(&mut events).await {
        CtlOutput::Ready { pid, .. } => pid,
        other => panic!("expected Ready, got {other:?}"),
    };
    Plane {
        arena,
        manager,
        driver,
        events,
        pid,
        spec: ObjectSpec::activations(1024, HIDDEN, ActivationDType::F32),
    }
}

impl Plane {
    /// Leases a ring, initializes its header on the node side, installs it in the worker.
    pub(crate) async fn ring(&mut self, id: u64, direction: Direction) -> (RingLayout, NodeRing) {
        self.manager.lease(LeaseRequest {
            request_id: LeaseRequestId(id),
            edge_id: EdgeId(id),
            direction,
            ring: RingSpec { capacity: RING, alignment: 128 },
        });
        let layout = match self.manager.poll_event() {
            Some(ArenaEvent::RingLeased { layout, .. }) => layout,
            other => panic!("lease: {other:?}"),
        };
        let ring = Arc::new(
            MappedRing::init(self.arena.region(&layout).expect("region"), &layout).expect("init"),
        );
        self.driver
            .send(Command::InstallRing {
                ring_id: layout.ring_id,
                edge_id: EdgeId(id),
                port_id: PortId(0),
                direction,
                layout,
                object_spec: self.spec,
            })
            .await
            .expect("install");
        loop {
            match next(&mut self.events).await {
                CtlOutput::Routed(Event::RingInstalled { ring_id })
                    if ring_id == layout.ring_id =>
                {
                    break;
                }
                CtlOutput::Routed(_) => {}
                other => panic!("install: {other:?}"),
            }
        }
        (layout, ring)
    }
}

pub(crate) fn object(seq: u64, extent: usize) -> (ObjectHeader, Vec<u8>) {
    let payload: Vec<u8> = (0..extent).map(|i| (i as u64 * 31 + seq * 7) as u8).collect();
    let flags = if seq == 0 { ObjectFlags::PREFILL } else { ObjectFlags::NONE };
    (ObjectHeader::new(ObjectId(seq + 1), Sequence(seq), extent as u64, flags), payload)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_worker_streams_objects_larger_than_its_rings_and_produces_them_byte_exact() {
    let mut plane = start(Backend::Cpu).await;
    plane
        .driver
        .send(Command::ConfigureRole {
            role_id: RoleId(1),
            config: RoleConfig::Transform { xor: XOR, delay_ms: 0, fail_on_sequence: None },
        })
        .await
        .expect("configure");
    assert!(matches!(
        next(&mut plane.events).await,
        CtlOutput::Routed(Event::RoleConfigured { role_id: RoleId(1), taken_over: false })
    ));
    let (in_layout, in_ring) = plane.ring(1, Direction::Recv).await;
    let (out_layout, out_ring) = plane.ring(2, Direction::Send).await;
    let mut feeder = RingFeeder::new(in_layout.ring_id, Arc::clone(&in_ring));
    let mut drain = RingDrain::new(out_layout.ring_id, Arc::clone(&out_ring));

    let extent = 200 * 1024; // three times the ring
    let mut trace: Vec<String> = Vec::new();
    let mut produced = Vec::new();
    for seq in 0..3u64 {
        let (header, payload) = object(seq, extent);
        let mut bytes = header.encode().to_vec();
        bytes.extend_from_slice(&payload);
        let mut sent = 0;
        let mut handle = None;
        let mut step_sent = false;
        let mut completed = false;
        let mut out = Vec::new();
        while !(completed && out.len() == HEADER_LEN + extent) {
            if sent < bytes.len() {
                let (n, wake) = feeder.push(&bytes[sent..]).expect("push");
                sent += n;
                if wake == Wake::Send {
                    plane
                        .driver
                        .send(Command::RingReadable { ring_id: in_layout.ring_id })
                        .await
                        .expect("wake");
                }
            }
            if let (Some(h), false) = (handle, step_sent) {
                step_sent = true;
                plane
                    .driver
                    .send(Command::ExecuteStep {
                        role_id: RoleId(1),
                        step_id: StepId(seq + 1),
                        inputs: vec![InputBinding {
                            port: PortId(0),
                            object_id: header.object_id,
                            sequence: Sequence(seq),
                            handle: h,
                        }],
                        outputs: vec![OutputBinding {
                            port: PortId(0),
                            ring_id: out_layout.ring_id,
                            object_id: ObjectId(100 + seq),
                            sequence: Sequence(seq),
                            extent: extent as u64,
                            flags: ObjectFlags::NONE,
                        }],
                        release_inputs_after: true,
                    })
                    .await
                    .expect("step");
            }
            loop {
                let mut buf = vec![0u8; 16 * 1024];
                let (n, wake) = drain.pull(&mut buf).expect("pull");
                out.extend_from_slice(&buf[..n]);
                if wake == Wake::Send {
                    plane
                        .driver
                        .send(Command::RingWritable { ring_id: out_layout.ring_id })
                        .await
                        .expect("wake");
                }
                if n == 0 {
                    break;
                }
            }
            if completed && out.len() == HEADER_LEN + extent {
                break;
            }
            match next(&mut plane.events).await {
                CtlOutput::Routed(e) => match &e {
                    Event::ObjectLoaded { handle: h, sequence, extent: x, .. } => {
                        assert_eq!((*sequence, *x), (Sequence(seq), extent as u64));
                        handle = Some(*h);
                        trace.push(format!("loaded {seq}"));
                    }
                    Event::ObjectProduced { sequence, .. } => {
                        trace.push(format!("produced {}", sequence.0))
                    }
                    Event::StepCompleted { step_id, .. } => {
                        assert_eq!(*step_id, StepId(seq + 1));
                        trace.push(format!("completed {seq}"));
                        completed = true;
                    }
                    Event::RingWritable { ring_id } if *ring_id == in_layout.ring_id => {
                        feeder.on_writable().expect("writable");
                    }
                    Event::RingReadable { ring_id } if *ring_id == out_layout.ring_id => {
                        drain.on_readable().expect("readable");
                    }
                    Event::DeviceObjectReleased { .. } | Event::DeviceObjects { .. } => {}
                    other => panic!("unexpected event {other:?}"),
                },
                other => panic!("unexpected output {other:?}"),
            }
        }
        let h = ObjectHeader::decode(out[..HEADER_LEN].try_into().expect("header"))
            .expect("valid header");
        assert_eq!(
            (h.object_id, h.sequence, h.extent),
            (ObjectId(100 + seq), Sequence(seq), extent as u64)
        );
        assert!(
            out[HEADER_LEN..] == transform(&payload, XOR, extent)[..],
            "object {seq} is byte-exact"
        );
        produced.push(h);
    }
    assert_eq!(
        trace,
        [
            "loaded 0",
            "produced 0",
            "completed 0",
            "loaded 1",
            "produced 1",
            "completed 1",
            "loaded 2",
            "produced 2",
            "completed 2"
        ]
    );

    // Teardown: uninstall both rings, stop the node-side pumps, release with proof.
    for (ring_id, pump) in [(in_layout.ring_id, feeder.stop()), (out_layout.ring_id, drain.stop())]
    {
        plane
            .driver
            .send(Command::UninstallRing {
                ring_id,
                reason: swactor::worker::protocol::UninstallReason::Stop,
            })
            .await
            .expect("uninstall");
        let quiet = loop {
            let out = next(&mut plane.events).await;
            if let (CtlOutput::Routed(_), Some(q)) = (&out, out.quiet_evidence()) {
                break q;
            }
        };
        plane.manager.release(QuiescenceProof::new(pump, quiet).expect("proof")).expect("release");
    }
    assert_eq!(plane.manager.live_count(), 0, "no leaked arena lease");
    plane.driver.stop(ShutdownMode::Graceful);
    assert_eq!(
        next(&mut plane.events).await,
        CtlOutput::Routed(Event::WorkerStopped { mode: ShutdownMode::Graceful })
    );
    assert_eq!(next(&mut plane.events).await, CtlOutput::Stopped);
    plane.driver.join().await;
    assert!(!process_exists(plane.pid), "the worker was reaped");
}

fn process_exists(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_step_faults_every_installed_ring_and_is_reaped() {
    let mut plane = start(Backend::Cpu).await;
    plane
        .driver
        .send(Command::ConfigureRole {
            role_id: RoleId(1),
            config: RoleConfig::Transform { xor: 1, delay_ms: 30_000, fail_on_sequence: None },
        })
        .await
        .expect("configure");
    let _ = next(&mut plane.events).await;
    let (in_layout, in_ring) = plane.ring(1, Direction::Recv).await;
    let (out_layout, out_ring) = plane.ring(2, Direction::Send).await;
    let mut feeder = RingFeeder::new(in_layout.ring_id, in_ring);
    let drain = RingDrain::new(out_layout.ring_id, out_ring);
    let (header, payload) = object(0, 1024);
    let mut bytes = header.encode().to_vec();
    bytes.extend_from_slice(&payload);
    let (n, _) = feeder.push(&bytes).expect("push");
    assert_eq!(n, bytes.len());
    plane.driver.send(Command::RingReadable { ring_id: in_layout.ring_id }).await.expect("wake");
    let handle = loop {
        if let CtlOutput::Routed(Event::ObjectLoaded { handle, .. }) = next(&mut plane.events).await
        {
            break handle;
        }
    };
    plane
        .driver
        .send(Command::ExecuteStep {
            role_id: RoleId(1),
            step_id: StepId(1),
            inputs: vec![InputBinding {
                port: PortId(0),
                object_id: header.object_id,
                sequence: Sequence(0),
                handle,
            }],
            outputs: vec![OutputBinding {
                port: PortId(0),
                ring_id: out_layout.ring_id,
                object_id: ObjectId(9),
                sequence: Sequence(0),
                extent: 1024,
                flags: ObjectFlags::NONE,
            }],
            release_inputs_after: true,
        })
        .await
        .expect("step");
    tokio::time::sleep(Duration::from_millis(200)).await; // the step is computing
    let pid = rustix::process::Pid::from_raw(plane.pid as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");

    let mut faulted = Vec::new();
    let mut stopped_pumps = Vec::new();
    let mut quiet = Vec::new();
    loop {
        let out = next(&mut plane.events).await;
        if let CtlOutput::RingFault { .. } = out
            && let Some(q) = out.quiet_evidence()
        {
            quiet.push(q);
        }
        match out {
            CtlOutput::RingFault { ring_id, reason, .. } => {
                assert_eq!(reason, RingFault::WorkerCrashed);
                faulted.push(ring_id);
            }
            CtlOutput::StopPump { ring_id } => stopped_pumps.push(ring_id),
            CtlOutput::Failed { reason } => {
                assert_eq!(reason, WorkerFatal::Exited);
                break;
            }
            CtlOutput::Routed(Event::DeviceObjects { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    faulted.sort();
    stopped_pumps.sort();
    let mut rings = vec![in_layout.ring_id, out_layout.ring_id];
    rings.sort();
    assert_eq!(faulted, rings, "a RingFault for each installed ring");
    assert_eq!(stopped_pumps, rings, "every pump is stopped");
    plane.driver.join().await;
    assert!(!process_exists(plane.pid), "the killed worker was reaped");
    // The reaped worker is quiescence evidence: both leases come back.
    for pump in [feeder.stop(), drain.stop()] {
        let proof = quiet
            .iter()
            .find_map(|q| QuiescenceProof::new(pump, *q).ok())
            .expect("evidence for every ring");
        plane.manager.release(proof).expect("release");
    }
    assert_eq!(plane.manager.live_count(), 0, "no leaked arena lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_frees_its_input_and_the_worker_reports_no_live_device_object() {
    let mut plane = start(Backend::Cpu).await;
    let fail = Some(Sequence(0));
    let config = RoleConfig::Transform { xor: 1, delay_ms: 0, fail_on_sequence: fail };
    plane.driver.send(Command::ConfigureRole { role_id: RoleId(1), config }).await.expect("role");
    let (in_layout, in_ring) = plane.ring(1, Direction::Recv).await;
    let (out_layout, _out_ring) = plane.ring(2, Direction::Send).await;
    let mut feeder = RingFeeder::new(in_layout.ring_id, in_ring);
    let (header, payload) = object(0, 1024);
    let mut bytes = header.encode().to_vec();
    bytes.extend_from_slice(&payload);
    assert_eq!(feeder.push(&bytes).expect("push").0, bytes.len());
    plane.driver.send(Command::RingReadable { ring_id: in_layout.ring_id }).await.expect("wake");
    // Every routed event from here on, with the live count the worker last reported.
    let mut live = 0;
    let handle = loop {
        match next(&mut plane.events).await {
            CtlOutput::Routed(Event::ObjectLoaded { handle, .. }) => break handle,
            CtlOutput::Routed(Event::DeviceObjects { live: n }) => live = n,
            _ => {}
        }
    };
    let step = Command::ExecuteStep {
        role_id: RoleId(1),
        step_id: StepId(1),
        inputs: vec![InputBinding {
            port: PortId(0),
            object_id: header.object_id,
            sequence: Sequence(0),
            handle,
        }],
        outputs: vec![OutputBinding {
            port: PortId(0),
            ring_id: out_layout.ring_id,
            object_id: ObjectId(1),
            sequence: Sequence(0),
            extent: 1024,
            flags: ObjectFlags::NONE,
        }],
        release_inputs_after: true,
    };
    plane.driver.send(step).await.expect("step");
    let mut released = false;
    loop {
        match next(&mut plane.events).await {
            CtlOutput::Routed(Event::DeviceObjectReleased { handle: h }) if h == handle => {
                released = true;
            }
            CtlOutput::Routed(Event::DeviceObjects { live: n }) => live = n,
            CtlOutput::Routed(Event::StepFailed { step_id, .. }) => {
                assert_eq!(step_id, StepId(1));
                break;
            }
            CtlOutput::Routed(Event::StepCompleted { .. }) => panic!("the step was to fail"),
            _ => {}
        }
    }
    assert!(released, "the failed step's input was freed");
    assert!(live <= 1, "at most the loaded input was reported live before the failure");
    // The count changed with the release: it is reported right after the failure.
    assert_eq!(next(&mut plane.events).await, CtlOutput::Routed(Event::DeviceObjects { live: 0 }));
    plane.driver.stop(ShutdownMode::Graceful);
    while !matches!(next(&mut plane.events).await, CtlOutput::Stopped) {}
    plane.driver.join().await;
}

mod process {
    //! The worker adapter and the ring across a real process boundary, without the driver.

    use std::io::{BufRead, BufReader, Write};
    use std::process::{Command as Process, Stdio};
    use std::sync::Arc;

    use swactor::arena::{ARENA_BYTES_ENV, ARENA_FD_ENV, Arena};
    use swactor::cli::util_cmd::ring_pattern;
    use swactor::ring::{Consumer, MappedRing};
    use swactor::wire::reason::{DeviceFailure, WorkerFatal};
    use swactor::wire::{RingId, RingLayout, WorkerGeneration};
    use swactor::worker::protocol::{DeviceHandle, Event};

    fn exe() -> std::path::PathBuf {
        assert_cmd::cargo::cargo_bin("swactor")
    }

    /// Runs a worker on `input` lines; returns its events and exit code.
    fn worker_with(input: &str, arena: Option<&Arena>) -> (Vec<Event>, i32) {
        let mut cmd = Process::new(exe());
        cmd.arg("worker").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some(a) = arena {
            cmd.env(ARENA_FD_ENV, a.fd().to_string()).env(ARENA_BYTES_ENV, a.len().to_string());
        }
        let mut child = cmd.spawn().expect("spawn worker");
        child.stdin.take().expect("stdin").write_all(input.as_bytes()).expect("write");
        let out = child.wait_with_output().expect("wait");
        let events = String::from_utf8(out.stdout)
            .expect("utf8")
            .lines()
            .map(|l| {
                serde_json::from_str::<Event>(l)
                    .unwrap_or_else(|e| panic!("stdout holds only event lines ({e}): {l}"))
            })
            .collect();
        (events, out.status.code().unwrap_or(-1))
    }

    fn init(abi: u64, bytes: u64) -> String {
        format!(
            "{{\"type\":\"InitializeWorker\",\"generation\":1,\"arena_ceiling\":{bytes},\"ring_abi\":{abi},\"backend\":{{\"kind\":\"cpu\"}}}}\n"
        )
    }

    #[test]
    fn malformed_json_is_a_fatal_protocol_fault() {
        let (events, code) = worker_with("{not json\n", None);
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::MalformedCommand }]);
        assert_eq!(code, 2);
    }

    #[test]
    fn an_unknown_command_is_a_fatal_protocol_fault() {
        let (events, code) = worker_with("{\"type\":\"LaunchMissiles\"}\n", None);
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::MalformedCommand }]);
        assert_eq!(code, 2);
    }

    #[test]
    fn a_command_before_initialization_is_unexpected() {
        let (events, code) = worker_with("{\"type\":\"RingReadable\",\"ring_id\":1}\n", None);
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::UnexpectedCommand }]);
        assert_eq!(code, 2);
    }

    #[test]
    fn a_ring_abi_mismatch_is_fatal_at_initialization() {
        let (events, code) = worker_with(&init(99, 1 << 20), None);
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::AbiMismatch }]);
        assert_eq!(code, 3);
    }

    #[test]
    fn a_backend_this_build_lacks_is_fatal_at_initialization() {
        let arena = Arena::create(1 << 20).expect("arena");
        let line =
            init(1, 1 << 20).replace("{\"kind\":\"cpu\"}", "{\"kind\":\"cuda\",\"ordinal\":0}");
        let (events, code) = worker_with(&line, Some(&arena));
        if cfg!(feature = "gpu-bridge") && matches!(events.first(), Some(Event::WorkerReady { .. }))
        {
            return; // a machine with a GPU
        }
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::BackendUnavailable }]);
        assert_eq!(code, 3);
    }

    #[test]
    fn a_missing_arena_is_fatal_at_initialization() {
        let (events, code) = worker_with(&init(1, 1 << 20), None);
        assert_eq!(events, [Event::WorkerFatal { reason: WorkerFatal::ArenaMapFailed }]);
        assert_eq!(code, 3);
    }

    #[test]
    fn a_handle_of_an_older_generation_is_refused_by_the_worker() {
        let arena = Arena::create(1 << 20).expect("arena");
        let stale = DeviceHandle { generation: WorkerGeneration(0), id: 1 };
        let input = format!(
            "{}{}\n{{\"type\":\"ShutdownWorker\",\"mode\":\"graceful\"}}\n",
            init(1, 1 << 20),
            serde_json::to_string(&swactor::worker::protocol::Command::ReleaseDeviceObject {
                handle: stale
            })
            .unwrap()
        );
        let (events, code) = worker_with(&input, Some(&arena));
        assert!(matches!(events[0], Event::WorkerReady { generation: WorkerGeneration(1), .. }));
        assert_eq!(
            events[1],
            Event::ReleaseFailed { handle: stale, reason: DeviceFailure::StaleHandle }
        );
        assert!(matches!(events[2], Event::WorkerStopped { .. }));
        assert_eq!(code, 0);
    }

    #[test]
    fn a_producer_killed_mid_write_never_exposes_uncommitted_bytes() {
        let arena = Arc::new(Arena::create(1 << 20).expect("arena"));
        let layout = RingLayout {
            ring_id: RingId(5),
            arena_offset: 8192,
            total_len: 4096 + 16384,
            header_offset: 8192,
            data_offset: 8192 + 4096,
            data_capacity: 16384,
            alignment: 4096,
        };
        let ring = MappedRing::init(arena.region(&layout).expect("region"), &layout).expect("init");
        let mut consumer = Consumer::attach(ring);
        let total = 1_000_000u64; // many times the ring: the stream wraps around
        let mut child = Process::new(exe())
            .args([
                "util",
                "ring-produce",
                "--bytes",
                &total.to_string(),
                "--uncommitted",
                "3000",
                "--layout",
            ])
            .arg(serde_json::to_string(&layout).expect("layout"))
            .env(ARENA_FD_ENV, arena.fd().to_string())
            .env(ARENA_BYTES_ENV, arena.len().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn producer");
        let mut got = 0u64;
        let mut buf = vec![0u8; 8192];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while got < total {
            assert!(std::time::Instant::now() < deadline, "stream stalled at {got}");
            let n = consumer.read(&mut buf).expect("read");
            for (k, b) in buf[..n].iter().enumerate() {
                assert_eq!(
                    *b,
                    ring_pattern(got + k as u64),
                    "byte {} of the committed stream",
                    got + k as u64
                );
            }
            got += n as u64;
            consumer.release();
            if n == 0 {
                std::thread::yield_now();
            }
        }
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("line");
        assert_eq!(line.trim(), "stalled", "the producer wrote its uncommitted bytes");
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        assert_eq!(consumer.available(), Ok(0), "uncommitted bytes never become readable");
        assert_eq!(consumer.read_total(), total);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_worker_is_replaced_by_the_next_generation_when_restarts_are_allowed() {
    let arena = Arc::new(Arena::create(ARENA).expect("arena"));
    let config = WorkerDriverConfig {
        exe: assert_cmd::cargo::cargo_bin("swactor"),
        ctl: CtlConfig {
            arena_ceiling: ARENA,
            backend: Backend::Cpu,
            init_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            max_restarts: 1,
            restart: RestartPolicy::DEFAULT,
        },
        threads: 1,
        doorbells: false,
    };
    let (driver, mut events) = WorkerDriver::start(config, arena);
    let first = match next(&mut events).await {
        CtlOutput::Ready { pid, generation } => {
            assert_eq!(generation, swactor::wire::WorkerGeneration(1));
            pid
        }
        other => panic!("{other:?}"),
    };
    let pid = rustix::process::Pid::from_raw(first as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).expect("kill");
    assert_eq!(
        next(&mut events).await,
        CtlOutput::Restarting {
            generation: swactor::wire::WorkerGeneration(2),
            after: Duration::ZERO
        }
    );
    match next(&mut events).await {
        CtlOutput::Ready { pid, generation } => {
            assert_eq!(generation, swactor::wire::WorkerGeneration(2));
            assert_ne!(pid, first);
        }
        other => panic!("{other:?}"),
    }
    assert!(!process_exists(first), "the crashed worker was reaped");
    driver.stop(ShutdownMode::Graceful);
    while !matches!(next(&mut events).await, CtlOutput::Stopped) {}
    driver.join().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_exits_at_once_is_restarted_after_growing_pauses_and_reported_crash_looping()
{
    let arena = Arc::new(Arena::create(ARENA).expect("arena"));
    let ms = Duration::from_millis;
    let restart = RestartPolicy {
        stable_after: Duration::from_secs(10),
        first_backoff: ms(50),
        max_backoff: ms(200),
        crash_loop_after: 5,
    };
    // `false worker` exits 1 at once, like a worker that cannot start.
    let exe =
        ["/usr/bin/false", "/bin/false"].into_iter().find(|p| std::path::Path::new(p).exists());
    let config = WorkerDriverConfig {
        exe: exe.expect("false").into(),
        ctl: CtlConfig {
            arena_ceiling: ARENA,
            backend: Backend::Cpu,
            init_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            max_restarts: u32::MAX,
            restart,
        },
        threads: 1,
        doorbells: false,
    };
    let t0 = std::time::Instant::now();
    let (driver, mut events) = WorkerDriver::start(config, arena);
    let mut pauses = Vec::new();
    let reason = loop {
        match next(&mut events).await {
            CtlOutput::Restarting { after, .. } => pauses.push(after),
            CtlOutput::Failed { reason } => break reason,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(reason, WorkerFatal::CrashLooping);
    assert_eq!(pauses, [ms(0), ms(50), ms(100), ms(200)], "four restarts, then given up");
    assert!(t0.elapsed() >= ms(350), "the pauses were kept: {:?}", t0.elapsed());
    driver.join().await;
    assert!(events.recv().await.is_none(), "nothing after the failure");
}

#[test]
fn a_worker_dies_with_its_node_even_when_the_node_is_killed() {
    // `swactor bench wake` runs a worker under the controller; kill it like a crashed node.
    let mut node = std::process::Command::new(assert_cmd::cargo::cargo_bin("swactor"))
        .args(["bench", "wake", "--samples", "100000000"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let node_pid = node.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let worker = loop {
        let children =
            std::fs::read_to_string(format!("/proc/{node_pid}/task/{node_pid}/children"))
                .unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            break pid.parse::<u32>().expect("pid");
        }
        assert!(std::time::Instant::now() < deadline, "the node never started a worker");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(process_exists(worker));
    node.kill().expect("SIGKILL the node");
    node.wait().expect("reap the node");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while process_alive(worker) {
        assert!(std::time::Instant::now() < deadline, "worker {worker} outlived its node");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Alive and not a zombie waiting to be reaped by init.
fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}
