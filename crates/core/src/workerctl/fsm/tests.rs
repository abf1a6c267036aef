//! Worker controller contract tests: lifecycle, routing, crash handling, timeouts.
#![allow(clippy::disallowed_methods)] // tests drive the state machines and own the clock

use std::time::{Duration, Instant};

use super::*;
use crate::events::Direction;
use crate::wire::reason::StepFailure;
use crate::wire::{EdgeId, ObjectId, PortId, RingLayout, RoleId, Sequence, StepId};
use crate::worker::protocol::InputBinding;

fn config(max_restarts: u32) -> CtlConfig {
    CtlConfig {
        arena_ceiling: 1 << 20,
        backend: Backend::Cpu,
        init_timeout: Duration::from_secs(5),
        stop_timeout: Duration::from_secs(2),
        max_restarts,
        restart: RestartPolicy::DEFAULT,
    }
}

fn drain(c: &mut WorkerCtl) -> Vec<CtlOutput> {
    std::iter::from_fn(|| c.poll_output()).collect()
}

fn running(max_restarts: u32) -> (WorkerCtl, Instant) {
    let now = Instant::now();
    let mut c = WorkerCtl::new(config(max_restarts));
    c.start();
    assert_eq!(drain(&mut c), vec![CtlOutput::Spawn { generation: WorkerGeneration(1) }]);
    c.spawned(now);
    assert!(matches!(
        drain(&mut c)[..],
        [CtlOutput::ToWorker(Command::InitializeWorker {
            generation: WorkerGeneration(1),
            ring_abi: RING_ABI,
            ..
        })]
    ));
    c.worker_event(WorkerGeneration(1), ready_event(1), now);
    assert_eq!(drain(&mut c), vec![CtlOutput::Ready { pid: 42, generation: WorkerGeneration(1) }]);
    assert_eq!(c.state(), CtlState::Running);
    (c, now)
}

fn ready_event(generation: u64) -> Event {
    Event::WorkerReady {
        pid: 42,
        generation: WorkerGeneration(generation),
        ring_abi: RING_ABI,
        backend: Backend::Cpu,
    }
}

fn install(ring: u64) -> Command {
    Command::InstallRing {
        ring_id: RingId(ring),
        edge_id: EdgeId(ring),
        port_id: PortId(0),
        direction: Direction::Recv,
        layout: RingLayout {
            ring_id: RingId(ring),
            arena_offset: 0,
            total_len: 8192,
            header_offset: 0,
            data_offset: 4096,
            data_capacity: 4096,
            alignment: 4096,
        },
        object_spec: crate::wire::ObjectSpec::token_ids(16),
    }
}

fn handle(generation: u64, id: u64) -> DeviceHandle {
    DeviceHandle { generation: WorkerGeneration(generation), id }
}

#[test]
fn commands_are_refused_before_the_worker_is_ready() {
    let mut c = WorkerCtl::new(config(0));
    assert_eq!(c.command(install(1)), Err(CtlError::NotRunning));
    c.start();
    c.spawned(Instant::now());
    drain(&mut c);
    assert_eq!(c.command(install(1)), Err(CtlError::NotRunning));
    let out = drain(&mut c);
    assert!(!out.iter().any(|o| matches!(o, CtlOutput::ToWorker(_))), "nothing was sent: {out:?}");
}

#[test]
fn commands_flow_in_order_once_running() {
    let (mut c, _) = running(0);
    c.command(install(1)).expect("install");
    c.command(Command::RingReadable { ring_id: RingId(1) }).expect("wake");
    let out = drain(&mut c);
    assert_eq!(
        out,
        vec![
            CtlOutput::ToWorker(install(1)),
            CtlOutput::ToWorker(Command::RingReadable { ring_id: RingId(1) })
        ]
    );
    assert_eq!(c.installed_rings().collect::<Vec<_>>(), [RingId(1)]);
}

#[test]
fn handles_of_another_generation_are_refused() {
    let (mut c, _) = running(0);
    let stale = handle(7, 1);
    assert_eq!(
        c.command(Command::ReleaseDeviceObject { handle: stale }),
        Err(CtlError::StaleHandle { found: WorkerGeneration(7), current: WorkerGeneration(1) })
    );
    let step = Command::ExecuteStep {
        role_id: RoleId(1),
        step_id: StepId(1),
        inputs: vec![InputBinding {
            port: PortId(0),
            object_id: ObjectId(1),
            sequence: Sequence(0),
            handle: stale,
        }],
        outputs: vec![],
        release_inputs_after: true,
    };
    assert!(matches!(c.command(step), Err(CtlError::StaleHandle { .. })));
    assert_eq!(
        c.command(Command::ShutdownWorker { mode: ShutdownMode::Graceful }),
        Err(CtlError::Reserved)
    );
    assert!(drain(&mut c).is_empty());
}

#[test]
fn worker_events_are_routed_and_tracked() {
    let (mut c, now) = running(0);
    c.command(install(3)).expect("install");
    drain(&mut c);
    let loaded = Event::ObjectLoaded {
        ring_id: RingId(3),
        edge_id: EdgeId(3),
        port_id: PortId(0),
        object_id: ObjectId(9),
        sequence: Sequence(0),
        extent: 4,
        handle: handle(1, 5),
        taken_by: None,
        at_us: None,
    };
    c.worker_event(WorkerGeneration(1), loaded.clone(), now);
    assert_eq!(drain(&mut c), vec![CtlOutput::Routed(loaded)]);
    assert_eq!(c.live_handles(), 1);
    c.worker_event(WorkerGeneration(1), Event::DeviceObjectReleased { handle: handle(1, 5) }, now);
    c.worker_event(WorkerGeneration(1), Event::RingQuiesced { ring_id: RingId(3) }, now);
    assert_eq!(drain(&mut c).len(), 2);
    assert_eq!(c.live_handles(), 0);
    assert_eq!(c.installed_rings().count(), 0);
}

#[test]
fn a_crash_faults_every_installed_ring_stops_their_pumps_and_invalidates_handles() {
    let (mut c, now) = running(0);
    c.command(install(1)).expect("install");
    c.command(install(2)).expect("install");
    drain(&mut c);
    c.worker_event(
        WorkerGeneration(1),
        Event::ObjectLoaded {
            ring_id: RingId(1),
            edge_id: EdgeId(1),
            port_id: PortId(0),
            object_id: ObjectId(1),
            sequence: Sequence(0),
            extent: 4,
            handle: handle(1, 1),
            taken_by: None,
            at_us: None,
        },
        now,
    );
    drain(&mut c);
    c.worker_exited(WorkerGeneration(1), now);
    let out = drain(&mut c);
    let g = WorkerGeneration(1);
    assert_eq!(
        out,
        vec![
            CtlOutput::RingFault {
                ring_id: RingId(1),
                reason: RingFault::WorkerCrashed,
                generation: g
            },
            CtlOutput::StopPump { ring_id: RingId(1) },
            CtlOutput::RingFault {
                ring_id: RingId(2),
                reason: RingFault::WorkerCrashed,
                generation: g
            },
            CtlOutput::StopPump { ring_id: RingId(2) },
            CtlOutput::Failed { reason: WorkerFatal::Exited },
        ]
    );
    assert_eq!(c.live_handles(), 0);
    assert_eq!(c.command(install(3)), Err(CtlError::NotRunning));
}

#[test]
fn a_crash_with_restarts_left_spawns_the_next_generation() {
    let (mut c, now) = running(1);
    c.command(install(1)).expect("install");
    drain(&mut c);
    c.worker_exited(WorkerGeneration(1), now);
    let out = drain(&mut c);
    assert!(out.contains(&CtlOutput::Spawn { generation: WorkerGeneration(2) }));
    assert!(out.contains(&CtlOutput::Restarting {
        generation: WorkerGeneration(2),
        after: Duration::ZERO
    }));
    c.worker_exited(WorkerGeneration(1), now);
    assert!(drain(&mut c).is_empty(), "a late exit of the old generation changes nothing");
    c.spawned(now);
    drain(&mut c);
    c.worker_event(WorkerGeneration(1), ready_event(1), now);
    assert!(drain(&mut c).is_empty(), "events of the old generation are ignored");
    c.worker_event(WorkerGeneration(2), ready_event(2), now);
    assert_eq!(drain(&mut c), vec![CtlOutput::Ready { pid: 42, generation: WorkerGeneration(2) }]);
    assert_eq!(
        c.command(Command::ReleaseDeviceObject { handle: handle(1, 1) }),
        Err(CtlError::StaleHandle { found: WorkerGeneration(1), current: WorkerGeneration(2) })
    );
    c.worker_exited(WorkerGeneration(2), now);
    assert!(
        drain(&mut c).contains(&CtlOutput::Failed { reason: WorkerFatal::Exited }),
        "no restarts left"
    );
}

#[test]
fn a_worker_that_does_not_initialize_in_time_is_killed_and_fails() {
    let now = Instant::now();
    let mut c = WorkerCtl::new(config(3));
    c.start();
    c.spawned(now);
    drain(&mut c);
    assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(5)));
    c.handle_timeout(now + Duration::from_secs(4));
    assert!(drain(&mut c).is_empty(), "an early timeout changes nothing");
    c.handle_timeout(now + Duration::from_secs(5));
    assert_eq!(
        drain(&mut c),
        vec![CtlOutput::Kill, CtlOutput::Failed { reason: WorkerFatal::InitTimeout }]
    );
}

#[test]
fn a_fatal_worker_fails_the_controller_with_its_reason() {
    let now = Instant::now();
    let mut c = WorkerCtl::new(config(0));
    c.start();
    c.spawned(now);
    drain(&mut c);
    c.worker_event(
        WorkerGeneration(1),
        Event::WorkerFatal { reason: WorkerFatal::AbiMismatch },
        now,
    );
    assert_eq!(drain(&mut c), vec![CtlOutput::Failed { reason: WorkerFatal::AbiMismatch }]);
    c.worker_exited(WorkerGeneration(1), now);
    assert!(drain(&mut c).is_empty());
}

#[test]
fn a_worker_that_cannot_drive_its_device_fails_at_once_whatever_restarts_are_left() {
    let now = Instant::now();
    let mut c = WorkerCtl::new(config(u32::MAX));
    c.start();
    c.spawned(now);
    drain(&mut c);
    let fatal = Event::WorkerFatal { reason: WorkerFatal::BackendUnavailable };
    c.worker_event(WorkerGeneration(1), fatal, now);
    assert_eq!(drain(&mut c), vec![CtlOutput::Failed { reason: WorkerFatal::BackendUnavailable }]);
}

#[test]
fn graceful_stop_escalates_to_kill_after_the_deadline() {
    let (mut c, now) = running(0);
    c.stop(now, ShutdownMode::Graceful);
    assert_eq!(
        drain(&mut c),
        vec![CtlOutput::ToWorker(Command::ShutdownWorker { mode: ShutdownMode::Graceful })]
    );
    c.handle_timeout(now + Duration::from_secs(2));
    assert_eq!(drain(&mut c), vec![CtlOutput::Kill]);
    assert_eq!(c.state(), CtlState::Killing);
    c.worker_exited(WorkerGeneration(1), now);
    assert_eq!(drain(&mut c), vec![CtlOutput::Stopped]);
}

#[test]
fn a_stopped_worker_still_faults_rings_it_left_installed() {
    let (mut c, now) = running(0);
    c.command(install(4)).expect("install");
    drain(&mut c);
    c.stop(now, ShutdownMode::AbortInFlight);
    drain(&mut c);
    c.worker_event(
        WorkerGeneration(1),
        Event::StepFailed { role_id: RoleId(1), step_id: StepId(1), reason: StepFailure::Aborted },
        now,
    );
    assert_eq!(drain(&mut c).len(), 1, "events still route while stopping");
    c.worker_exited(WorkerGeneration(1), now);
    let out = drain(&mut c);
    assert_eq!(out.last(), Some(&CtlOutput::Stopped));
    assert!(out.contains(&CtlOutput::StopPump { ring_id: RingId(4) }));
}

#[test]
fn an_unparseable_event_line_kills_the_worker_and_fails_the_controller() {
    let (mut c, now) = running(0);
    c.command(install(1)).expect("install");
    drain(&mut c);
    c.malformed_event(WorkerGeneration(1), now);
    let out = drain(&mut c);
    assert_eq!(out.first(), Some(&CtlOutput::Kill));
    assert!(out.contains(&CtlOutput::RingFault {
        ring_id: RingId(1),
        reason: RingFault::WorkerCrashed,
        generation: WorkerGeneration(1)
    }));
    assert_eq!(out.last(), Some(&CtlOutput::Failed { reason: WorkerFatal::MalformedEvent }));
}

#[test]
fn a_ring_install_that_reaches_no_worker_faults_the_ring_with_evidence_that_none_holds_it() {
    let (mut c, now) = running(1);
    // The worker dies; while its replacement starts, an edge installs a ring.
    c.worker_exited(WorkerGeneration(1), now);
    drain(&mut c);
    assert_eq!(c.command(install(9)), Err(CtlError::NotRunning));
    let out = drain(&mut c);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(
        out[0],
        CtlOutput::RingFault { ring_id: RingId(9), reason: RingFault::WorkerCrashed, .. }
    ));
    assert_eq!(out[0].quiet_evidence().map(|q| q.ring_id()), Some(RingId(9)));
}

/// A controller with any number of restarts and a small restart policy: pauses of 100,
/// 200, 400 ms (the cap), the 6th quick crash in a row a crash loop, 10 s to be stable.
fn looping() -> WorkerCtl {
    let mut config = config(u32::MAX);
    config.restart = RestartPolicy {
        stable_after: Duration::from_secs(10),
        first_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(400),
        crash_loop_after: 6,
    };
    WorkerCtl::new(config)
}

/// Spawns the pending generation at `at` and has it exit at `exit`; returns the outputs.
fn live_and_die(c: &mut WorkerCtl, at: Instant, exit: Instant) -> Vec<CtlOutput> {
    c.spawned(at);
    drain(c);
    c.worker_exited(c.generation(), exit);
    drain(c)
}

#[test]
fn a_worker_that_exits_at_once_is_restarted_after_doubling_pauses_then_fails_crash_looping() {
    let t0 = Instant::now();
    let mut c = looping();
    c.start();
    assert_eq!(drain(&mut c), vec![CtlOutput::Spawn { generation: WorkerGeneration(1) }]);
    let mut now = t0;
    let ms = Duration::from_millis;
    for (crash, pause) in [ms(0), ms(100), ms(200), ms(400), ms(400)].into_iter().enumerate() {
        let out = live_and_die(&mut c, now, now);
        let next = WorkerGeneration(crash as u64 + 2);
        let restarting = CtlOutput::Restarting { generation: next, after: pause };
        if pause.is_zero() {
            assert_eq!(out, vec![CtlOutput::Spawn { generation: next }, restarting]);
            continue;
        }
        assert_eq!(
            out,
            vec![restarting],
            "crash {}: nothing is spawned during the pause",
            crash + 1
        );
        assert_eq!(c.state(), CtlState::Backoff { until: now + pause });
        assert_eq!(c.poll_timeout(), Some(now + pause));
        c.handle_timeout(now + pause - ms(1));
        assert!(drain(&mut c).is_empty(), "not before the pause is over");
        now += pause;
        c.handle_timeout(now);
        assert_eq!(drain(&mut c), vec![CtlOutput::Spawn { generation: next }]);
    }
    let out = live_and_die(&mut c, now, now + ms(5));
    assert_eq!(out, vec![CtlOutput::Failed { reason: WorkerFatal::CrashLooping }]);
    assert_eq!(c.state(), CtlState::Failed { reason: WorkerFatal::CrashLooping });
    assert_eq!(c.poll_timeout(), None);
    assert_eq!(WorkerFatal::CrashLooping.to_string(), "crash_looping");
    let reason: crate::wire::reason::FaultReason = WorkerFatal::CrashLooping.into();
    assert_eq!(reason.to_string(), "worker.crash_looping");
}

#[test]
fn a_worker_that_ran_long_enough_is_restarted_at_once_and_ends_the_streak_of_quick_crashes() {
    let t0 = Instant::now();
    let mut c = looping();
    c.start();
    drain(&mut c);
    live_and_die(&mut c, t0, t0);
    let out = live_and_die(&mut c, t0, t0);
    assert!(out.contains(&CtlOutput::Restarting {
        generation: WorkerGeneration(3),
        after: Duration::from_millis(100)
    }));
    let t1 = t0 + Duration::from_millis(100);
    c.handle_timeout(t1);
    drain(&mut c);
    // Generation 3 runs 10 s, then crashes: a restart at once, the streak starts over.
    let t2 = t1 + Duration::from_secs(10);
    let out = live_and_die(&mut c, t1, t2);
    assert_eq!(
        out[out.len() - 2..],
        [
            CtlOutput::Spawn { generation: WorkerGeneration(4) },
            CtlOutput::Restarting { generation: WorkerGeneration(4), after: Duration::ZERO }
        ]
    );
    let out = live_and_die(&mut c, t2, t2);
    assert!(out.contains(&CtlOutput::Restarting {
        generation: WorkerGeneration(5),
        after: Duration::from_millis(100)
    }));
}

#[test]
fn a_pause_before_a_restart_holds_no_worker_refuses_commands_and_a_stop_ends_it() {
    let t0 = Instant::now();
    let mut c = looping();
    c.start();
    drain(&mut c);
    live_and_die(&mut c, t0, t0);
    live_and_die(&mut c, t0, t0);
    assert!(matches!(c.state(), CtlState::Backoff { .. }));
    assert_eq!(c.command(install(7)), Err(CtlError::NotRunning));
    assert!(
        drain(&mut c).iter().any(|o| matches!(o, CtlOutput::RingFault { ring_id: RingId(7), .. })),
        "a ring that reaches no worker faults"
    );
    c.worker_exited(WorkerGeneration(2), t0);
    assert!(drain(&mut c).is_empty(), "a late exit of the crashed worker changes nothing");
    c.stop(t0, ShutdownMode::AbortInFlight);
    assert_eq!(drain(&mut c), vec![CtlOutput::Stopped]);
    c.handle_timeout(t0 + Duration::from_secs(1));
    assert!(drain(&mut c).is_empty(), "no spawn after the stop");
}

#[test]
fn the_default_pauses_double_from_100_ms_to_5_s_and_a_loop_is_given_up_in_seconds() {
    let p = RestartPolicy::DEFAULT;
    let pauses: Vec<Duration> = (1..=p.crash_loop_after).map(|n| p.pause(n)).collect();
    assert_eq!(
        pauses[..3],
        [Duration::ZERO, Duration::from_millis(100), Duration::from_millis(200)]
    );
    assert_eq!(p.pause(40), p.max_backoff, "capped, never overflowing");
    let total: Duration = pauses[..pauses.len() - 1].iter().sum();
    assert!(total < Duration::from_secs(10), "within a node's boot timeout: {total:?}");
}
