//! The worker's event loop: one thread handles commands in order; a reader thread parses
//! stdin and raises the abort flag as soon as an `AbortInFlight` shutdown arrives, so a
//! long step can be interrupted.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use crate::arena::Arena;
use crate::arena::memfd::ArenaRegion;
use crate::events::Direction;
use crate::ring::{Consumer, Doorbells, MappedRing, Producer};
use crate::wire::reason::{StepFailure, WorkerFatal};
use crate::wire::{ObjectFlags, RingId, RoleId, StepId, WorkerGeneration};
use crate::worker::device::{CpuBridge, DeviceBridge, FaultyBridge};
use crate::worker::egress::EgressProducer;
use crate::worker::ingress::IngressParser;
use crate::worker::posted::{Post, PostedSteps};
use crate::worker::protocol::{
    Backend, Command, DeviceHandle, Event, InputBinding, LineError, OutputBinding, RING_ABI,
    ShutdownMode, encode_line,
};
use crate::worker::role;

mod input;
mod posting;
mod steps;

use input::{next_input, read_commands};

/// Loaded objects an ingress ring may hold before the worker stops consuming it.
pub const MAX_OUTSTANDING_PER_RING: usize = 2;
/// Device memory the CPU backend may hold in live objects.
pub const CPU_DEVICE_LIMIT: u64 = 64 << 30;

/// Bytes an ingress ring's poll consumes before the producer is woken for the space.
pub const POLL_BUDGET: u64 = 1 << 20;

/// Exit status after `WorkerStopped`.
pub const EXIT_STOPPED: u8 = 0;
/// Exit status when the parent went away (stdin closed).
pub const EXIT_ORPHANED: u8 = 1;

/// The spawning node's process id, so that a worker whose node is process 1 (a node as a
/// container's entry point) does not take its node for init and itself for an orphan.
pub const PARENT_ENV: &str = "SWACTOR_WORKER_PARENT";
/// Exit status after a protocol fault (malformed or unexpected command).
pub const EXIT_PROTOCOL: u8 = 2;
/// Exit status after an initialization fault (ABI mismatch, arena, backend).
pub const EXIT_INIT: u8 = 3;

enum Input {
    Command(Command),
    Bad(LineError),
    Eof,
    /// Nothing to handle: just write out the pending events.
    Flush,
}

type MemRing = MappedRing<ArenaRegion>;

enum Slot {
    Ingress { consumer: Consumer<MemRing>, parser: IngressParser },
    Egress { producer: Producer<MemRing>, egress: EgressProducer },
}

struct Output {
    binding: OutputBinding,
    handle: DeviceHandle,
    done: bool,
}

struct ActiveStep {
    role_id: RoleId,
    step_id: StepId,
    inputs: Vec<InputBinding>,
    outputs: Vec<Output>,
    release_inputs_after: bool,
}

struct PendingStep {
    role_id: RoleId,
    step_id: StepId,
    inputs: Vec<InputBinding>,
    outputs: Vec<OutputBinding>,
    release_inputs_after: bool,
}

struct Ready {
    arena: Arc<Arena>,
    bridge: Box<dyn DeviceBridge>,
}

/// The worker's state, driven one input at a time.
struct Worker {
    abort: Arc<AtomicBool>,
    /// Where model roles compute (follows the backend).
    device: crate::model::stage::ComputeDevice,
    ready: Option<Ready>,
    roles: HashMap<RoleId, role::Role>,
    /// A faulted run's model role kept aside with its caches (`ReleaseRole { park }`)
    /// until the next `ConfigureRole` takes it over or drops it.
    parked: Option<role::Role>,
    rings: HashMap<RingId, Slot>,
    origin: HashMap<DeviceHandle, RingId>,
    pending: VecDeque<PendingStep>,
    active: Option<ActiveStep>,
    stopping: Option<ShutdownMode>,
    events: Vec<Event>,
    /// The live device object count last reported (`DeviceObjects`).
    reported_live: usize,
    /// Steps posted ahead of their input.
    posted: PostedSteps,
    /// The doorbells inherited from the node (`None`: wake hints travel as lines).
    bells: Option<Arc<Doorbells>>,
    /// Why the inherited doorbells are unusable (reported at initialization).
    bells_error: Option<String>,
}

/// Runs the worker process until it stops; returns its exit status. `spin`: how long it
/// polls (commands and ingress rings) before it blocks (0 never polls); short polling keeps
/// wake hints and the consumption of a streaming ring off the sleep/wake path.
pub fn run(spin: Duration) -> u8 {
    // Die with the node: if the parent goes away, the kernel kills us.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // Read here, at the edge: the node that spawned this worker.
    let spawner = std::env::var(PARENT_ENV).ok().and_then(|v| v.parse::<i32>().ok());
    let parent = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
    let orphaned = match spawner {
        Some(node) => parent != Some(node),
        None => parent.is_none_or(|p| p == 1),
    };
    if orphaned {
        eprintln!("swactor worker: the node that started it is gone; exiting");
        return EXIT_ORPHANED;
    }
    let abort = Arc::new(AtomicBool::new(false));
    let (bells, bells_error) = match Doorbells::from_env() {
        None => (None, None),
        Some(Ok(b)) => (Some(Arc::new(b)), None),
        Some(Err(e)) => (None, Some(e.to_string())),
    };
    let (tx, rx) = mpsc::channel();
    let reader_abort = Arc::clone(&abort);
    let reader_bells = bells.clone();
    std::thread::spawn(move || read_commands(tx, reader_abort, reader_bells));

    let mut worker = Worker {
        abort,
        device: crate::model::stage::ComputeDevice::Cpu,
        ready: None,
        roles: HashMap::new(),
        parked: None,
        rings: HashMap::new(),
        origin: HashMap::new(),
        pending: VecDeque::new(),
        active: None,
        stopping: None,
        events: Vec::new(),
        reported_live: 0,
        posted: PostedSteps::new(),
        bells,
        bells_error,
    };
    let stdout = std::io::stdout();
    loop {
        let input = next_input(&rx, &mut worker, spin);
        let exit = worker.handle(input);
        if exit.is_none() {
            worker.report_live();
        }
        if !worker.write_events(&stdout) {
            return EXIT_ORPHANED;
        }
        if let Some(code) = exit {
            return code;
        }
        // A prefill whose posted input was loaded starts only now, once the node was told
        // (`ObjectLoaded` names the step): its start is observable while it computes.
        if worker.start_taken() {
            worker.report_live();
            if !worker.write_events(&stdout) {
                return EXIT_ORPHANED;
            }
        }
    }
}

impl Worker {
    /// Configures a role. A parked role is taken over by the run that keeps its very
    /// stage, and dropped before any other role loads (a node holds one stage's memory).
    fn configure_role(&mut self, role_id: RoleId, config: crate::worker::protocol::RoleConfig) {
        let kept = match self.parked.take().map(|p| p.take_over(&config)) {
            Some(Ok(role)) => Some(role),
            Some(Err(parked)) => {
                drop(parked);
                None
            }
            None => None,
        };
        let taken_over = kept.is_some();
        let role = match kept {
            Some(role) => Ok(role),
            None => role::Role::configure(config, self.device),
        };
        match role {
            Ok(role) => {
                self.roles.insert(role_id, role);
                self.events.push(Event::RoleConfigured { role_id, taken_over });
            }
            Err(reason) => {
                self.roles.remove(&role_id);
                self.events.push(Event::RoleFailed { role_id, reason });
            }
        }
    }

    /// Drops a role, or (`park`, a model role of a faulted run) keeps it aside with its
    /// caches for the next `ConfigureRole`; any role parked before is dropped.
    fn release_role(&mut self, role_id: RoleId, park: bool) {
        self.withdraw_where(|p| p.role_id == role_id);
        self.parked = None;
        let role = self.roles.remove(&role_id);
        if park && role.as_ref().is_some_and(|r| r.model().is_some()) {
            self.parked = role;
        }
        self.events.push(Event::RoleReleased { role_id });
    }

    fn fatal(&mut self, reason: WorkerFatal, code: u8) -> Option<u8> {
        eprintln!("swactor worker: fatal: {reason}");
        self.events.push(Event::WorkerFatal { reason });
        Some(code)
    }

    fn handle(&mut self, input: Input) -> Option<u8> {
        let exit = self.handle_input(input);
        if exit.is_none() && !self.announce_first() {
            // A decode step starts at once: its `ObjectLoaded` is written after it, so the
            // node (and through it the orchestrator) is not woken while it computes.
            self.start_taken();
        }
        exit
    }

    /// Whether the next step waiting to start is a prefill (its output flagged
    /// `PREFILL`): its `ObjectLoaded` is written before it starts, so that a long step's
    /// start is visible (and can be stopped) while it runs.
    fn announce_first(&self) -> bool {
        self.pending
            .front()
            .is_some_and(|p| p.outputs.iter().any(|o| o.flags.contains(ObjectFlags::PREFILL)))
    }

    /// Starts the steps that took their posted input, unless stopping; returns whether
    /// one ran.
    fn start_taken(&mut self) -> bool {
        if self.stopping.is_some() || self.active.is_some() || self.pending.is_empty() {
            return false;
        }
        self.start_next_step();
        true
    }

    /// Rings the node's doorbell for the wake hints, then writes every other event as a
    /// line; `false` when the node is gone.
    fn write_events(&mut self, stdout: &std::io::Stdout) -> bool {
        self.ring_node();
        let mut out = stdout.lock();
        for e in self.events.drain(..) {
            if out.write_all(encode_line(&e).as_bytes()).is_err() {
                return false;
            }
        }
        out.flush().is_ok()
    }

    fn handle_input(&mut self, input: Input) -> Option<u8> {
        let cmd = match input {
            Input::Flush => return None,
            Input::Eof => return Some(EXIT_ORPHANED),
            Input::Bad(e) => {
                eprintln!("swactor worker: {e}");
                return self.fatal(WorkerFatal::MalformedCommand, EXIT_PROTOCOL);
            }
            Input::Command(cmd) => cmd,
        };
        if self.ready.is_none() {
            return match cmd {
                Command::InitializeWorker { generation, arena_ceiling, ring_abi, backend } => {
                    self.initialize(generation, arena_ceiling, ring_abi, backend)
                }
                _ => self.fatal(WorkerFatal::UnexpectedCommand, EXIT_PROTOCOL),
            };
        }
        match cmd {
            Command::InitializeWorker { .. } => {
                return self.fatal(WorkerFatal::UnexpectedCommand, EXIT_PROTOCOL);
            }
            Command::ConfigureRole { role_id, config } => self.configure_role(role_id, config),
            Command::AbortStep => {
                // The step it aborted (if any) has returned; later steps run normally.
                if self.stopping.is_none() {
                    self.abort.store(false, Ordering::SeqCst);
                }
            }
            Command::ReleaseRole { role_id, park } => self.release_role(role_id, park),
            Command::InstallRing { ring_id, edge_id, port_id, direction, layout, object_spec } => {
                self.install(ring_id, edge_id, port_id, direction, layout, object_spec);
            }
            Command::UninstallRing { ring_id, .. } => self.uninstall(ring_id),
            Command::RingReadable { ring_id } => {
                // Clear the pending bit before looking at the cursors (the wake protocol).
                if let Some(Slot::Ingress { consumer, .. }) = self.rings.get_mut(&ring_id) {
                    let _ = consumer.on_readable();
                }
                self.poll_ingress(ring_id);
            }
            Command::RingWritable { ring_id } => {
                if let Some(Slot::Egress { producer, .. }) = self.rings.get_mut(&ring_id) {
                    let _ = producer.on_writable();
                }
                if self
                    .active
                    .as_ref()
                    .is_some_and(|a| a.outputs.iter().any(|o| o.binding.ring_id == ring_id))
                {
                    self.drive_step();
                }
            }
            Command::ExecuteStep { role_id, step_id, inputs, outputs, release_inputs_after } => {
                if self.stopping.is_some() {
                    let reason = StepFailure::Aborted;
                    self.step_failed(role_id, step_id, &inputs, release_inputs_after, reason);
                } else {
                    self.pending.push_back(PendingStep {
                        role_id,
                        step_id,
                        inputs,
                        outputs,
                        release_inputs_after,
                    });
                    self.start_next_step();
                }
            }
            Command::PostStep { role_id, step_id, ring_id, edge_id, port, sequence, output } => {
                let post = Post { role_id, step_id, ring_id, edge_id, port, sequence, output };
                self.post(post);
            }
            Command::WithdrawStep { step_id } => {
                if let Some(p) = self.posted.withdraw(step_id) {
                    self.events.push(Event::StepWithdrawn { role_id: p.role_id, step_id });
                }
            }
            Command::ReleaseDeviceObject { handle } => self.release_object(handle),
            Command::ShutdownWorker { mode } => {
                self.withdraw_where(|_| true);
                self.stopping = Some(mode);
                if mode == ShutdownMode::AbortInFlight {
                    self.abort_active();
                }
            }
        }
        self.maybe_stop()
    }

    fn initialize(
        &mut self,
        generation: WorkerGeneration,
        ceiling: u64,
        ring_abi: u64,
        backend: Backend,
    ) -> Option<u8> {
        if ring_abi != RING_ABI {
            return self.fatal(WorkerFatal::AbiMismatch, EXIT_INIT);
        }
        if let Some(e) = self.bells_error.take() {
            eprintln!("swactor worker: {e}");
            return self.fatal(WorkerFatal::DoorbellUnusable, EXIT_INIT);
        }
        let arena = match Arena::from_env() {
            Ok(a) if a.len() == ceiling => a,
            Ok(a) => {
                eprintln!(
                    "swactor worker: arena holds {} bytes, node announced {ceiling}",
                    a.len()
                );
                return self.fatal(WorkerFatal::ArenaMapFailed, EXIT_INIT);
            }
            Err(e) => {
                eprintln!("swactor worker: {e}");
                return self.fatal(WorkerFatal::ArenaMapFailed, EXIT_INIT);
            }
        };
        let cpu = CpuBridge::new(generation, CPU_DEVICE_LIMIT);
        let bridge: Box<dyn DeviceBridge> = match backend {
            Backend::Cpu => Box::new(cpu),
            Backend::CpuFaulty { fail_alloc_at, fail_copy_at } => {
                Box::new(FaultyBridge::new(cpu, fail_alloc_at, fail_copy_at))
            }
            #[cfg(feature = "gpu-bridge")]
            Backend::Cuda { ordinal } => match super::cuda::CudaBridge::new(generation, ordinal) {
                Ok(b) => Box::new(b),
                Err(e) => {
                    eprintln!("swactor worker: CUDA device {ordinal}: {e}");
                    return self.fatal(WorkerFatal::BackendUnavailable, EXIT_INIT);
                }
            },
            #[cfg(not(feature = "gpu-bridge"))]
            Backend::Cuda { .. } => {
                eprintln!("swactor worker: built without the `cuda` feature");
                return self.fatal(WorkerFatal::BackendUnavailable, EXIT_INIT);
            }
        };
        if let Backend::Cuda { ordinal } = backend {
            self.device = crate::model::stage::ComputeDevice::Cuda(ordinal);
        }
        self.ready = Some(Ready { arena: Arc::new(arena), bridge });
        self.events.push(Event::WorkerReady {
            pid: std::process::id(),
            generation,
            ring_abi: RING_ABI,
            backend,
        });
        None
    }

    fn install(
        &mut self,
        ring_id: RingId,
        edge_id: crate::wire::EdgeId,
        port_id: crate::wire::PortId,
        direction: Direction,
        layout: crate::wire::RingLayout,
        spec: crate::wire::ObjectSpec,
    ) {
        let Some(ready) = &self.ready else { return };
        let attached = if layout.ring_id != ring_id || self.rings.contains_key(&ring_id) {
            Err(crate::wire::reason::RingFault::LayoutInvalid)
        } else {
            ready
                .arena
                .region(&layout)
                .map_err(|_| crate::wire::reason::RingFault::LayoutInvalid)
                .and_then(|region| MappedRing::attach(region, &layout))
        };
        let ring = match attached {
            Ok(r) => r,
            Err(reason) => {
                self.events.push(Event::RingFault { ring_id, reason });
                return;
            }
        };
        let slot = match direction {
            Direction::Recv => Slot::Ingress {
                consumer: Consumer::attach(ring),
                parser: IngressParser::new(
                    ring_id,
                    edge_id,
                    port_id,
                    spec,
                    MAX_OUTSTANDING_PER_RING,
                ),
            },
            Direction::Send => Slot::Egress {
                producer: Producer::attach(ring),
                egress: EgressProducer::new(ring_id, edge_id, port_id, spec),
            },
        };
        self.rings.insert(ring_id, slot);
        self.events.push(Event::RingInstalled { ring_id });
        self.poll_ingress(ring_id);
    }

    fn uninstall(&mut self, ring_id: RingId) {
        self.withdraw_where(|p| p.ring_id == ring_id);
        if let Some(slot) = self.rings.remove(&ring_id) {
            let ready = self.ready.as_mut();
            match slot {
                Slot::Ingress { parser, .. } => {
                    if let (Some(h), Some(r)) = (parser.partial_handle(), ready) {
                        let _ = r.bridge.free(h);
                    }
                }
                Slot::Egress { .. } => {
                    let uses = self
                        .active
                        .as_ref()
                        .is_some_and(|a| a.outputs.iter().any(|o| o.binding.ring_id == ring_id));
                    if uses {
                        self.fail_active(StepFailure::OutputRingFault);
                    }
                }
            }
        }
        // Answered even for unknown rings: the worker does not touch them either way.
        self.events.push(Event::RingQuiesced { ring_id });
    }

    /// Reports the live device object count if it changed since the last report.
    fn report_live(&mut self) {
        let Some(ready) = self.ready.as_ref() else { return };
        let live = ready.bridge.live();
        if live != self.reported_live {
            self.reported_live = live;
            self.events.push(Event::DeviceObjects { live: live as u64 });
        }
    }

    /// Reports a step that ended without completing; frees its inputs if it owned them.
    fn step_failed(
        &mut self,
        role_id: RoleId,
        step_id: StepId,
        inputs: &[InputBinding],
        release_inputs: bool,
        reason: StepFailure,
    ) {
        if release_inputs {
            self.release_inputs(inputs);
        }
        self.events.push(Event::StepFailed { role_id, step_id, reason });
    }

    /// Frees a finished step's inputs (a handle of another generation is not ours: skipped).
    fn release_inputs(&mut self, inputs: &[InputBinding]) {
        let Some(ready) = self.ready.as_mut() else { return };
        let mut freed = Vec::new();
        for i in inputs {
            if ready.bridge.free(i.handle).is_ok() {
                self.events.push(Event::DeviceObjectReleased { handle: i.handle });
                freed.push(i.handle);
            }
        }
        for h in freed {
            self.object_gone(h);
        }
    }

    fn release_object(&mut self, handle: DeviceHandle) {
        let Some(ready) = self.ready.as_mut() else { return };
        match ready.bridge.free(handle) {
            Ok(()) => {
                self.events.push(Event::DeviceObjectReleased { handle });
                self.object_gone(handle);
            }
            Err(reason) => self.events.push(Event::ReleaseFailed { handle, reason }),
        }
    }

    /// A loaded object is gone: its ring may consume again.
    fn object_gone(&mut self, handle: DeviceHandle) {
        if let Some(ring_id) = self.origin.remove(&handle) {
            if let Some(Slot::Ingress { parser, .. }) = self.rings.get_mut(&ring_id) {
                parser.object_released();
            }
            self.poll_ingress(ring_id);
        }
    }

    fn maybe_stop(&mut self) -> Option<u8> {
        let mode = self.stopping?;
        if self.active.is_some() {
            return None;
        }
        self.abort_pending();
        self.events.push(Event::WorkerStopped { mode });
        Some(EXIT_STOPPED)
    }
}
