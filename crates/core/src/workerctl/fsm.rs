//! The worker controller state machine.
//!
//! `NotStarted -> Spawning -> Initializing -> Running -> Stopping -> (Killing) -> Stopped`,
//! with `Failed` and `Restarting` on crashes. Time is passed in; the driver asks
//! [`WorkerCtl::poll_timeout`] when to call [`WorkerCtl::handle_timeout`].
//!
//! Guarantees:
//! - commands reach the worker only in `Running`, in the order they were accepted, and only
//!   with handles of the current generation;
//! - when the worker dies unexpectedly every handle of its generation is invalidated, a
//!   `RingFault { worker_crashed }` is synthesized for every installed ring and the driver
//!   is asked to stop each ring's pump, before the controller fails or restarts with
//!   generation + 1;
//! - a worker that does not initialize in time is killed and the controller fails with
//!   `init_timeout`; a worker that does not stop in time is killed;
//! - a worker that crashes soon after its start ([`RestartPolicy::stable_after`]) is
//!   restarted after a pause that doubles with each such crash in a row, up to a cap, and
//!   one that keeps crashing fails the controller with `crash_looping`.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::{RingFault, WorkerFatal};
use crate::wire::{RingId, WorkerGeneration};
use crate::worker::protocol::{Backend, Command, DeviceHandle, Event, RING_ABI, ShutdownMode};

/// Controller settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtlConfig {
    /// Arena size the worker must map.
    pub arena_ceiling: u64,
    /// Device backend.
    pub backend: Backend,
    /// How long the worker may take to report ready.
    pub init_timeout: Duration,
    /// How long a graceful stop may take before the worker is killed.
    pub stop_timeout: Duration,
    /// Restarts allowed after crashes (0: a crash fails the controller).
    pub max_restarts: u32,
    /// How fast crashed workers are restarted, and when a crash loop is given up.
    pub restart: RestartPolicy,
}

/// How a crashed worker is restarted. A worker that lived at least `stable_after` is
/// replaced at once; one that crashed sooner is part of a streak of quick crashes: the
/// first is replaced at once, the second after `first_backoff`, each next one after twice
/// the pause before (at most `max_backoff`), and the `crash_loop_after`-th fails the
/// controller with [`WorkerFatal::CrashLooping`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// A worker that lived this long before it crashed ends the streak of quick crashes.
    pub stable_after: Duration,
    /// The pause before the second restart of a streak.
    pub first_backoff: Duration,
    /// The longest pause.
    pub max_backoff: Duration,
    /// Quick crashes in a row that make a crash loop (0: never given up).
    pub crash_loop_after: u32,
}

impl RestartPolicy {
    /// The node's policy: 10 s to count as stable, pauses from 100 ms doubling to 5 s,
    /// and the 8th quick crash in a row (about 6.3 s after the first) gives up.
    pub const DEFAULT: RestartPolicy = RestartPolicy {
        stable_after: Duration::from_secs(10),
        first_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_secs(5),
        crash_loop_after: 8,
    };

    /// The pause before the restart that follows the `streak`-th quick crash in a row.
    pub fn pause(&self, streak: u32) -> Duration {
        match streak {
            0 | 1 => Duration::ZERO,
            n => {
                let doubled = self.first_backoff.saturating_mul(1 << (n - 2).min(20));
                doubled.min(self.max_backoff)
            }
        }
    }
}

/// Where the controller is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtlState {
    /// Not spawned yet.
    NotStarted,
    /// A spawn was requested.
    Spawning,
    /// Spawned; waiting for `WorkerReady` until the deadline.
    Initializing {
        /// When to give up.
        deadline: Instant,
    },
    /// Ready; commands flow.
    Running,
    /// A crashed worker's successor is spawned at `until` (a pause after quick crashes).
    Backoff {
        /// When to spawn.
        until: Instant,
    },
    /// A shutdown was sent; waiting for the exit until the deadline.
    Stopping {
        /// When to kill.
        deadline: Instant,
    },
    /// The worker was killed; waiting for the exit.
    Killing,
    /// The worker exited after a stop.
    Stopped,
    /// The worker failed for good.
    Failed {
        /// Why.
        reason: WorkerFatal,
    },
}

/// What the controller asks of its driver or reports to the node.
#[derive(Debug, Clone, PartialEq)]
pub enum CtlOutput {
    /// Spawn a worker process for this generation.
    Spawn {
        /// The generation.
        generation: WorkerGeneration,
    },
    /// Write this command line to the worker.
    ToWorker(Command),
    /// Kill the worker process (SIGKILL).
    Kill,
    /// The worker is ready.
    Ready {
        /// Its process id.
        pid: u32,
        /// Its generation.
        generation: WorkerGeneration,
    },
    /// A worker event for the rest of the node (edges, stage, driver wakes).
    Routed(Event),
    /// The worker died holding this ring: the ring is faulted.
    RingFault {
        /// The ring.
        ring_id: RingId,
        /// Always `worker_crashed` for synthesized faults.
        reason: RingFault,
        /// The generation that died (its reaping is the ring's quiescence evidence).
        generation: WorkerGeneration,
    },
    /// Stop the network pump of this ring.
    StopPump {
        /// The ring.
        ring_id: RingId,
    },
    /// A crashed worker is being replaced by this generation (everything must be
    /// reinstalled), spawned after `after` (zero: at once).
    Restarting {
        /// The new generation.
        generation: WorkerGeneration,
        /// The pause before its spawn (quick crashes in a row, [`RestartPolicy`]).
        after: Duration,
    },
    /// The worker stopped after a requested shutdown.
    Stopped,
    /// The controller failed for good.
    Failed {
        /// Why.
        reason: WorkerFatal,
    },
}

impl CtlOutput {
    /// The evidence this output carries that the worker no longer touches a ring: the
    /// worker reported the ring quiesced or faulted (it detaches a faulted ring), or the
    /// worker that had it installed was reaped. The only place worker evidence is minted.
    pub fn quiet_evidence(&self) -> Option<WorkerQuiet> {
        match *self {
            CtlOutput::Routed(Event::RingQuiesced { ring_id }) => {
                Some(WorkerQuiet::reported(ring_id, false))
            }
            CtlOutput::Routed(Event::RingFault { ring_id, .. }) => {
                Some(WorkerQuiet::reported(ring_id, true))
            }
            CtlOutput::RingFault { ring_id, generation, .. } => {
                Some(WorkerQuiet::reaped(ring_id, generation))
            }
            _ => None,
        }
    }
}

/// Why a command was refused (nothing was sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    /// The worker is not running.
    #[error("the worker is not running")]
    NotRunning,
    /// A handle belongs to another worker generation.
    #[error("device handle of generation {found}, the worker is generation {current}")]
    StaleHandle {
        /// The handle's generation.
        found: WorkerGeneration,
        /// The current generation.
        current: WorkerGeneration,
    },
    /// Lifecycle commands are the controller's own.
    #[error("this command is issued by the controller itself")]
    Reserved,
}

/// The worker controller.
#[derive(Debug)]
pub struct WorkerCtl {
    config: CtlConfig,
    state: CtlState,
    generation: WorkerGeneration,
    restarts: u32,
    /// When the current worker was spawned.
    spawned_at: Option<Instant>,
    /// Quick crashes in a row ([`RestartPolicy`]).
    streak: u32,
    installed: BTreeSet<RingId>,
    handles: BTreeSet<DeviceHandle>,
    out: VecDeque<CtlOutput>,
}

impl WorkerCtl {
    /// A controller that has not spawned anything.
    pub fn new(config: CtlConfig) -> WorkerCtl {
        WorkerCtl {
            config,
            state: CtlState::NotStarted,
            generation: WorkerGeneration(0),
            restarts: 0,
            spawned_at: None,
            streak: 0,
            installed: BTreeSet::new(),
            handles: BTreeSet::new(),
            out: VecDeque::new(),
        }
    }

    /// Current state.
    pub fn state(&self) -> CtlState {
        self.state
    }

    /// Current worker generation (0 before the first spawn).
    pub fn generation(&self) -> WorkerGeneration {
        self.generation
    }

    /// Rings installed in the current worker.
    pub fn installed_rings(&self) -> impl Iterator<Item = RingId> + '_ {
        self.installed.iter().copied()
    }

    /// Live device handles of the current generation.
    pub fn live_handles(&self) -> usize {
        self.handles.len()
    }

    /// Requests the first spawn.
    pub fn start(&mut self) {
        if self.state == CtlState::NotStarted {
            self.spawn_next();
        }
    }

    fn spawn_next(&mut self) {
        self.generation = WorkerGeneration(self.generation.0 + 1);
        self.state = CtlState::Spawning;
        self.spawned_at = None;
        self.out.push_back(CtlOutput::Spawn { generation: self.generation });
    }

    /// The process was spawned: initialize it, with a deadline.
    pub fn spawned(&mut self, now: Instant) {
        if self.state != CtlState::Spawning {
            return;
        }
        self.state = CtlState::Initializing { deadline: now + self.config.init_timeout };
        self.spawned_at = Some(now);
        self.out.push_back(CtlOutput::ToWorker(Command::InitializeWorker {
            generation: self.generation,
            arena_ceiling: self.config.arena_ceiling,
            ring_abi: RING_ABI,
            backend: self.config.backend,
        }));
    }

    /// The process could not be spawned (the executable is missing or not runnable: no
    /// retry would help).
    pub fn spawn_failed(&mut self) {
        if self.state == CtlState::Spawning {
            self.fail(WorkerFatal::Exited);
        }
    }

    fn fail(&mut self, reason: WorkerFatal) {
        self.state = CtlState::Failed { reason };
        self.out.push_back(CtlOutput::Failed { reason });
    }

    /// Sends a command to the worker. Refused (nothing sent) unless `Running`, for
    /// lifecycle commands, and for handles of another generation.
    pub fn command(&mut self, cmd: Command) -> Result<(), CtlError> {
        if self.state != CtlState::Running {
            // A ring that reaches no worker (it is restarting, or gone) is held by none:
            // it faults, with that as its quiescence evidence, or its edge could never be
            // torn down (found by the simulation: a lease that was never released).
            if let Command::InstallRing { ring_id, .. } = &cmd {
                self.out.push_back(CtlOutput::RingFault {
                    ring_id: *ring_id,
                    reason: RingFault::WorkerCrashed,
                    generation: self.generation,
                });
            }
            return Err(CtlError::NotRunning);
        }
        let current = self.generation;
        let check = |h: &DeviceHandle| {
            if h.generation == current {
                Ok(())
            } else {
                Err(CtlError::StaleHandle { found: h.generation, current })
            }
        };
        match &cmd {
            Command::InitializeWorker { .. } | Command::ShutdownWorker { .. } => {
                return Err(CtlError::Reserved);
            }
            Command::ExecuteStep { inputs, .. } => {
                inputs.iter().try_for_each(|i| check(&i.handle))?
            }
            Command::ReleaseDeviceObject { handle } => check(handle)?,
            Command::InstallRing { ring_id, .. } => {
                self.installed.insert(*ring_id);
            }
            _ => {}
        }
        self.out.push_back(CtlOutput::ToWorker(cmd));
        Ok(())
    }

    /// Handles one event line from the worker of `generation`, read at `now` (stale
    /// generations are ignored).
    pub fn worker_event(&mut self, generation: WorkerGeneration, event: Event, now: Instant) {
        if generation != self.generation {
            return;
        }
        match (&self.state, &event) {
            (
                CtlState::Initializing { .. },
                Event::WorkerReady { pid, generation, ring_abi, .. },
            ) => {
                if *generation != self.generation || *ring_abi != RING_ABI {
                    self.out.push_back(CtlOutput::Kill);
                    self.fail(WorkerFatal::AbiMismatch);
                    return;
                }
                self.state = CtlState::Running;
                self.out.push_back(CtlOutput::Ready { pid: *pid, generation: *generation });
            }
            (_, Event::WorkerFatal { reason }) => {
                // The process exits right after; remember why. A worker that cannot drive
                // its device fails the same way after any restart: it is not retried.
                let reason = *reason;
                if reason == WorkerFatal::BackendUnavailable {
                    self.restarts = self.config.max_restarts;
                }
                self.crash(now, Some(reason));
            }
            (CtlState::Running | CtlState::Stopping { .. }, _) => {
                match &event {
                    Event::ObjectLoaded { handle, .. } => {
                        self.handles.insert(*handle);
                    }
                    Event::DeviceObjectReleased { handle } => {
                        self.handles.remove(handle);
                    }
                    Event::RingQuiesced { ring_id } | Event::RingFault { ring_id, .. } => {
                        self.installed.remove(ring_id);
                    }
                    _ => {}
                }
                self.out.push_back(CtlOutput::Routed(event));
            }
            // Anything else before ready is a protocol fault.
            (CtlState::Initializing { .. }, _) => {
                self.out.push_back(CtlOutput::Kill);
                self.crash(now, Some(WorkerFatal::MalformedEvent));
            }
            _ => {}
        }
    }

    /// A line from the worker of `generation` could not be parsed (at `now`).
    pub fn malformed_event(&mut self, generation: WorkerGeneration, now: Instant) {
        if generation == self.generation
            && matches!(self.state, CtlState::Initializing { .. } | CtlState::Running)
        {
            self.out.push_back(CtlOutput::Kill);
            self.crash(now, Some(WorkerFatal::MalformedEvent));
        }
    }

    /// The worker process of `generation` exited (it has been reaped) at `now`. Exits of
    /// older generations are ignored.
    pub fn worker_exited(&mut self, generation: WorkerGeneration, now: Instant) {
        if generation != self.generation {
            return;
        }
        match self.state {
            CtlState::Stopping { .. } | CtlState::Killing => {
                self.invalidate(WorkerFatal::Exited);
                self.state = CtlState::Stopped;
                self.out.push_back(CtlOutput::Stopped);
            }
            CtlState::Initializing { .. } | CtlState::Running | CtlState::Spawning => {
                self.crash(now, None);
            }
            _ => {}
        }
    }

    /// Asks the worker to stop. Before it runs, the controller simply stops.
    pub fn stop(&mut self, now: Instant, mode: ShutdownMode) {
        match self.state {
            CtlState::Running => {
                self.state = CtlState::Stopping { deadline: now + self.config.stop_timeout };
                self.out.push_back(CtlOutput::ToWorker(Command::ShutdownWorker { mode }));
            }
            CtlState::Initializing { .. } | CtlState::Spawning => {
                self.state = CtlState::Killing;
                self.out.push_back(CtlOutput::Kill);
            }
            // Nothing runs (a crashed worker's successor is not spawned yet).
            CtlState::NotStarted | CtlState::Backoff { .. } => {
                self.state = CtlState::Stopped;
                self.out.push_back(CtlOutput::Stopped);
            }
            _ => {}
        }
    }

    /// Handles an expired deadline; stale calls change nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            CtlState::Initializing { deadline } if now >= deadline => {
                self.out.push_back(CtlOutput::Kill);
                self.restarts = self.config.max_restarts; // a worker that cannot start is not retried
                self.crash(now, Some(WorkerFatal::InitTimeout));
            }
            CtlState::Backoff { until } if now >= until => self.spawn_next(),
            CtlState::Stopping { deadline } if now >= deadline => {
                self.state = CtlState::Killing;
                self.out.push_back(CtlOutput::Kill);
            }
            _ => {}
        }
    }

    /// The next deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            CtlState::Initializing { deadline } | CtlState::Stopping { deadline } => Some(deadline),
            CtlState::Backoff { until } => Some(until),
            _ => None,
        }
    }

    /// The next output, if any. Drain after every input.
    pub fn poll_output(&mut self) -> Option<CtlOutput> {
        self.out.pop_front()
    }

    /// Faults every installed ring and forgets every handle of the dying generation.
    fn invalidate(&mut self, _why: WorkerFatal) {
        let generation = self.generation;
        for ring_id in std::mem::take(&mut self.installed) {
            self.out.push_back(CtlOutput::RingFault {
                ring_id,
                reason: RingFault::WorkerCrashed,
                generation,
            });
            self.out.push_back(CtlOutput::StopPump { ring_id });
        }
        self.handles.clear();
    }

    /// The worker crashed at `now`: its rings fault, and its successor is spawned (at
    /// once, or after a pause when it crashed soon after its start), or the controller
    /// fails (no restarts left, or a crash loop).
    fn crash(&mut self, now: Instant, reason: Option<WorkerFatal>) {
        if matches!(
            self.state,
            CtlState::Failed { .. } | CtlState::Stopped | CtlState::Backoff { .. }
        ) {
            return;
        }
        let reason = reason.unwrap_or(WorkerFatal::Exited);
        self.invalidate(reason);
        let policy = self.config.restart;
        let lived = self.spawned_at.map(|t| now.saturating_duration_since(t));
        if lived.is_some_and(|l| l >= policy.stable_after) {
            self.streak = 0;
        }
        self.streak = self.streak.saturating_add(1);
        if self.restarts >= self.config.max_restarts {
            self.fail(reason);
        } else if policy.crash_loop_after > 0 && self.streak >= policy.crash_loop_after {
            self.fail(WorkerFatal::CrashLooping);
        } else {
            self.restarts += 1;
            let after = policy.pause(self.streak);
            let generation = WorkerGeneration(self.generation.0 + 1);
            if after.is_zero() {
                self.spawn_next();
            } else {
                self.state = CtlState::Backoff { until: now + after };
            }
            self.out.push_back(CtlOutput::Restarting { generation, after });
        }
    }
}

#[cfg(test)]
mod tests;
