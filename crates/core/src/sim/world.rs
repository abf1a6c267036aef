//! The simulated world: an event queue in simulated time, the real state machines, and
//! the checks.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::model::{self, SlotState};
use crate::arena::ArenaManager;
use crate::control::ControlMessage;
use crate::edge::plane::{EdgePlane, PlaneCommand};
use crate::events::{Event, RunOutcome};
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::model::{ModelBytes, ModelFacts, RopeFacts};
use crate::node::boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
use crate::node::stage_node::{EdgeState, NodeAction, PlantedNodeBug, STAGE_ROLE, StageNode};
use crate::orchestrator::run::{RunCommand, RunFsm, RunTimeouts, SessionLimits};
use crate::orchestrator::scheduler::{FinishReason, SeqId, SeqOutput, SeqRequest};
use crate::planner::pool::{OrchestratorEntry, PoolNode};
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::wire::batch::{BatchLimits, BatchTable};
use crate::wire::evidence::PumpStopped;
use crate::wire::reason::{
    BootFault, Component, ControlFault, FaultReason, MembershipLoss, ObjectFailure, OperatorStop,
    RingFault, StepFailure, StreamFault, Timeout,
};
use crate::wire::{
    ActivationDType, EdgeId, NodeId, ObjectId, RunId, RunPlan, RuntimeConfig, SamplingPolicy,
    Sequence, StageIndex, StepId, WeightSource, WorkerGeneration,
};
use crate::worker::protocol::{Backend, Command, Event as WorkerEvent, RING_ABI};
use crate::worker::protocol::{DeviceHandle, OutputExtent};
use crate::workerctl::{CtlConfig, CtlOutput, WorkerCtl};

const ORCH: NodeId = NodeId(100);
const RUN: RunId = RunId(1);
const VOCAB: u32 = 300;
const EOS: u32 = 2;
const HIDDEN: u32 = 16;
const MAX_SEQ: u32 = 48;
/// Each simulated node's arena (the manager's bookkeeping only: nothing is mapped).
const ARENA: u64 = 64 << 20;
/// Failure detection (SWIM's probe, answer and suspicion windows).
const DETECT: Duration = Duration::from_millis(500);
/// The pool gate's convergence window.
const WINDOW: Duration = Duration::from_millis(300);
/// How long the orchestrator waits for the pool (the driver's `--pool-timeout`).
const POOL_TIMEOUT: Duration = Duration::from_secs(30);
/// Simulated time after which a run that has not torn down has hung.
const HORIZON: Duration = Duration::from_secs(600);

/// The control session every simulated node has with the orchestrator.
const SESSION: u64 = 1;

/// A bug planted on purpose, to show the checks find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Planted {
    /// The scheduler frees a cancelled sequence's slot at once, while its micro-batch is
    /// still in flight.
    EarlySlotRelease,
    /// The scheduler does not reset a reused slot for its next sequence.
    SkipReset,
    /// The stage node takes a late answer about an earlier run's step for this run's.
    NoLateAnswerFilter,
}

impl Planted {
    /// Every planted bug, in the order the command line lists them.
    pub const ALL: [Planted; 3] =
        [Planted::EarlySlotRelease, Planted::SkipReset, Planted::NoLateAnswerFilter];

    /// The bug's name on the command line (`early-slot-release`, `skip-reset`).
    pub const fn name(self) -> &'static str {
        match self {
            Planted::EarlySlotRelease => "early-slot-release",
            Planted::SkipReset => "skip-reset",
            Planted::NoLateAnswerFilter => "no-late-answer-filter",
        }
    }
}

impl std::str::FromStr for Planted {
    type Err = String;

    fn from_str(s: &str) -> Result<Planted, String> {
        Planted::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("no planted bug `{s}`"))
    }
}

/// One simulation.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// Everything follows from it.
    pub seed: u64,
    /// Inject faults (else only traffic: arrivals and cancellations).
    pub faults: bool,
    /// A planted bug.
    pub planted: Option<Planted>,
}

/// What one simulation saw.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// Stages of its pool.
    pub stages: u32,
    /// Requests submitted.
    pub requests: usize,
    /// Fault classes injected.
    pub faults: Vec<&'static str>,
    /// The run's outcome.
    pub outcome: Option<RunOutcome>,
    /// The reported fault.
    pub reason: Option<String>,
    /// Events handled.
    pub steps: u64,
    /// Simulated time at the end, ms.
    pub sim_ms: u64,
    /// Every broken invariant.
    pub violations: Vec<String>,
    /// What happened, one line per event (kept for replays).
    #[serde(skip)]
    pub trace: Vec<String>,
}

#[derive(Debug, Clone)]
enum OrchIn {
    StageReady(usize),
    StageFault(usize, FaultReason, Component),
    StageStopped(usize),
    TokenOut(ObjectId, Sequence, Vec<u8>),
    EndpointsReady,
    EndpointsStopped,
    NodeLost(usize, FaultReason, Component),
    Submit(usize),
    Cancel(usize),
    CloseInput,
    Stop,
    /// A node's `node_available` (its boot finished) over its control session.
    Available(usize),
    /// A node's boot fault.
    BootFaulted(usize, BootFault),
    /// SWIM's view of a member.
    Member(usize, Membership),
    /// The orchestrator stops waiting for the pool.
    PoolTimeout,
}

#[derive(Debug, Clone, Copy)]
enum Membership {
    Up,
    Suspect,
    Down,
}

#[derive(Debug, Clone)]
enum NodeIn {
    Provision,
    StopRun,
    Object(ObjectId, Sequence, Vec<u8>),
    WeightsReady,
    RoleReady,
    PumpReady(EdgeId),
    PumpEnded(EdgeId, crate::wire::RingId),
    /// The worker process of a generation was spawned.
    Spawned(WorkerGeneration),
    /// A command line reaches the simulated worker process of a generation.
    Worker(WorkerGeneration, Command),
    /// An event line of a generation reaches the worker controller.
    FromWorker(WorkerGeneration, WorkerEvent),
    /// The worker process of a generation exited (and was reaped).
    Exited(WorkerGeneration),
    RoleReleased,
    /// A late answer of the worker about a step of an earlier run.
    Late(WorkerEvent),
    StepDone(StepId, Sequence, Result<Vec<u8>, String>, ObjectId, Sequence),
    /// One boot fact established (or, with a reason, failed).
    Boot(BootFact, Option<BootFault>),
}

#[derive(Debug, Clone)]
enum Fault {
    BootFail(usize),
    Crash(usize),
    WorkerCrash(usize),
    Pause(usize, Duration),
    ControlDrop(usize),
    EdgeError(usize),
    Slow(usize),
}

#[derive(Debug, Clone)]
enum Ev {
    Orch(OrchIn),
    Node(usize, NodeIn),
    Fault(Fault),
}

#[derive(Debug, Clone, Copy)]
struct Post {
    step: StepId,
    sequence: Sequence,
    extent: OutputExtent,
    object: ObjectId,
    out_sequence: Sequence,
}

struct Node {
    boot: NodeBoot,
    /// The node's real worker controller (spawn, init, ring commands, crashes, restarts).
    wctl: WorkerCtl,
    /// The simulated worker never answers its initialization (a boot fault).
    mute: bool,
    /// The node's real stage side: its stage controller, edge plane (arena manager and
    /// edge establisher), step numbering, late-answer filter and edge records.
    stage: StageNode,
    /// Installed rings and their edges.
    rings: HashMap<crate::wire::RingId, EdgeId>,
    /// Pumps that ended on their own (a stream error): nothing more to stop.
    ended: BTreeSet<EdgeId>,
    /// Gone for good (crashed, or lost to a long pause).
    dead: bool,
    /// Processes nothing before this time (paused or partitioned).
    paused_until: Duration,
    slots: Vec<SlotState>,
    posted: Option<Post>,
    loaded: HashMap<u64, (ObjectId, Sequence, Vec<u8>)>,
    next_handle: u64,
    next_in: u64,
    executed: Vec<u64>,
    busy_until: Duration,
    slow: u32,
}

struct Req {
    id: Option<SeqId>,
    prompt: Vec<u32>,
    max_tokens: u32,
    temperature: f32,
    seed: u64,
}

struct World {
    rng: StdRng,
    base: Instant,
    now: Duration,
    queue: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    evs: HashMap<usize, Ev>,
    next_ev: usize,
    order: u64,
    plan: RunPlan,
    /// The session, once the pool gate said ready.
    fsm: Option<RunFsm>,
    session: (SessionLimits, RunTimeouts, Option<Planted>),
    gate: PoolGate,
    /// Requests, cancellations, the input's close and a stop that came before the session.
    early: (Vec<usize>, Vec<usize>, bool, bool),
    boot_faulted: bool,
    nodes: Vec<Node>,
    reqs: Vec<Req>,
    tokens: BTreeMap<SeqId, Vec<u32>>,
    finished: BTreeMap<SeqId, FinishReason>,
    inflight: VecDeque<Vec<u32>>,
    events: Vec<Event>,
    torn_down: bool,
    faulty: bool,
    possible: std::collections::HashSet<FaultReason>,
    report: SimReport,
    jitter: bool,
    /// The last delivery time on each ordered link (QUIC streams and the control stream
    /// deliver in order).
    links: HashMap<Link, Duration>,
}

/// An ordered channel of the simulated world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Link {
    /// Orchestrator to node (control).
    Control(usize),
    /// Node to orchestrator (control).
    Report(usize),
    /// Into node `i` (its inbound edge); `nodes.len()` is the token-out edge.
    Edge(usize),
    /// A node's own components (worker, pumps, weights).
    Local(usize),
    /// The orchestrator's own components (token endpoints, membership).
    Orch,
}

/// Runs one simulation; `base` is the instant simulated time starts at.
pub fn simulate(base: Instant, cfg: SimConfig) -> SimReport {
    let mut w = World::new(base, cfg);
    w.run();
    w.check_end();
    w.report.outcome = w.outcome();
    w.report.sim_ms = w.now.as_millis() as u64;
    w.report
}

fn the_plan(stages: u32, slots: u32) -> RunPlan {
    let facts = ModelFacts {
        architecture: "llama".into(),
        name: None,
        block_count: 6,
        hidden_size: HIDDEN,
        feed_forward_length: None,
        head_count: 4,
        head_count_kv: 2,
        head_dim: 4,
        context_length: 512,
        vocab_size: VOCAB,
        bos_token_id: None,
        eos_token_id: Some(EOS),
        tokenizer_model: None,
        tokenizer_pre: None,
        rope: RopeFacts { freq_base: 10000.0, dimension_count: 4 },
        rms_norm_eps: 1e-5,
        tied_embeddings: true,
        bytes: ModelBytes {
            per_block: vec![1 << 12; 6],
            embedding: 1 << 12,
            head: 1 << 12,
            tensors: 1 << 16,
            file: 1 << 16,
        },
        tensor_types: BTreeMap::new(),
    };
    let pool = Pool {
        orchestrator: OrchestratorEntry { node_id: ORCH, endpoint_id: None, addrs: vec![] },
        nodes: (1..=u64::from(stages))
            .map(|i| PoolNode {
                node_id: NodeId(i),
                endpoint_id: format!("{i:064x}"),
                addrs: vec![std::net::SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16))],
                memory_bytes: 1 << 33,
                device: None,
                arena_bytes: None,
            })
            .collect(),
        placement: None,
    };
    let runtime = RuntimeConfig {
        max_seq_len: MAX_SEQ,
        kv_cache: Default::default(),
        activation_dtype: ActivationDType::F32,
        max_tokens: 8,
        sampling: SamplingPolicy::Greedy,
        max_sequences: slots,
    };
    let req = PlanRequest {
        run_id: RUN,
        model: &facts,
        source: WeightSource::Local { path: "/sim".into() },
        pool: &pool,
        stages: Some(stages),
        placement: Placement::default(),
        runtime,
        prompt_tokens: 0,
    };
    plan(&req).unwrap_or_else(|e| panic!("the simulation's plan is valid: {e}"))
}

impl World {
    fn new(base: Instant, cfg: SimConfig) -> World {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let stages = rng.random_range(1..=3u32);
        let slots = rng.random_range(1..=4u32);
        let plan = the_plan(stages, slots);
        let timeouts = RunTimeouts {
            readiness: Duration::from_secs(10),
            token: Duration::from_secs(5),
            teardown: Duration::from_secs(3),
        };
        let limits = SessionLimits {
            queue_capacity: rng.random_range(1..=8usize),
            batch_tokens: rng.random_range(1..=16u32),
            groups: rng.random_range(0..=3u16),
        };
        let gate = PoolGate::new(base, (1..=u64::from(stages)).map(NodeId), WINDOW);
        let nodes = (0..stages)
            .map(|i| Node {
                boot: NodeBoot::new(
                    base,
                    BootConfig {
                        node_id: NodeId(u64::from(i) + 1),
                        worker: WorkerPolicy::Eager,
                        timeout: Duration::from_secs(10),
                    },
                ),
                wctl: WorkerCtl::new(CtlConfig {
                    arena_ceiling: ARENA,
                    backend: Backend::Cpu,
                    init_timeout: Duration::from_secs(2),
                    stop_timeout: Duration::from_secs(2),
                    max_restarts: 3,
                }),
                mute: false,
                stage: {
                    let mut manager = ArenaManager::new(ARENA);
                    manager.arena_ready();
                    let plane = EdgePlane::new(manager, Component::EdgeEstablisher);
                    let mut stage =
                        StageNode::new(NodeId(u64::from(i) + 1), plane, WorkerGeneration(1));
                    stage.session_opened(ORCH, SESSION);
                    if cfg.planted == Some(Planted::NoLateAnswerFilter) {
                        stage.plant(PlantedNodeBug::NoLateAnswerFilter);
                    }
                    stage
                },
                rings: HashMap::new(),
                ended: BTreeSet::new(),
                dead: false,
                paused_until: Duration::ZERO,
                slots: Vec::new(),
                posted: None,
                loaded: HashMap::new(),
                next_handle: 1,
                next_in: 0,
                executed: Vec::new(),
                busy_until: Duration::ZERO,
                slow: 1,
            })
            .collect();
        let mut w = World {
            rng,
            base,
            now: Duration::ZERO,
            queue: BinaryHeap::new(),
            evs: HashMap::new(),
            next_ev: 0,
            order: 0,
            plan,
            fsm: None,
            session: (limits, timeouts, cfg.planted),
            gate,
            early: (Vec::new(), Vec::new(), false, false),
            boot_faulted: false,
            nodes,
            reqs: Vec::new(),
            tokens: BTreeMap::new(),
            finished: BTreeMap::new(),
            inflight: VecDeque::new(),
            events: Vec::new(),
            torn_down: false,
            faulty: false,
            possible: Default::default(),
            report: SimReport {
                seed: cfg.seed,
                stages,
                requests: 0,
                faults: Vec::new(),
                outcome: None,
                reason: None,
                steps: 0,
                sim_ms: 0,
                violations: Vec::new(),
                trace: Vec::new(),
            },
            jitter: false,
            links: HashMap::new(),
        };
        // Every node boots: its facts come in bring-up order, each after a short delay.
        for i in 0..w.nodes.len() {
            for fact in w.nodes[i].boot.missing() {
                // The worker's fact is its controller's `Ready`.
                if fact != BootFact::Worker {
                    w.send(Link::Local(i), 100, 3000, Ev::Node(i, NodeIn::Boot(fact, None)));
                }
            }
            w.nodes[i].wctl.start();
            w.pump_wctl(i);
        }
        w.at(POOL_TIMEOUT, Ev::Orch(OrchIn::PoolTimeout));
        w.traffic();
        w.late_answers(cfg.seed);
        if cfg.faults {
            w.faults();
        }
        w
    }

    /// Late answers of the workers about steps of an earlier run (a node that served one
    /// before may still hold them): each node, in half the seeds, gets one while the session
    /// runs. Drawn from a generator of their own, so the rest of a seed's world is as before.
    fn late_answers(&mut self, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x1a7e_a25e_e25c_0de5);
        for i in 0..self.nodes.len() {
            if !rng.random_bool(0.5) {
                continue;
            }
            let step_id = StepId(rng.random_range(1..64));
            let ev = if rng.random_bool(0.5) {
                let reason = StepFailure::PostRejected;
                WorkerEvent::StepFailed { role_id: STAGE_ROLE, step_id, reason }
            } else {
                WorkerEvent::StepCompleted { role_id: STAGE_ROLE, step_id }
            };
            let at = Duration::from_micros(rng.random_range(350_000..900_000));
            self.at(at, Ev::Node(i, NodeIn::Late(ev)));
        }
    }

    /// Requests arriving over the first half second, some cancelled, then the input closes.
    fn traffic(&mut self) {
        let n = self.rng.random_range(1..=16usize);
        let mut last = Duration::ZERO;
        for i in 0..n {
            let len = self.rng.random_range(1..=MAX_SEQ as usize + 4);
            let prompt: Vec<u32> = (0..len).map(|_| self.rng.random_range(3..VOCAB)).collect();
            let hot = self.rng.random_bool(0.3);
            self.reqs.push(Req {
                id: None,
                prompt,
                max_tokens: self.rng.random_range(1..=24u32),
                temperature: if hot { 0.8 } else { 0.0 },
                seed: self.rng.random(),
            });
            let at = Duration::from_micros(self.rng.random_range(300_000..450_000));
            last = last.max(at);
            self.at(at, Ev::Orch(OrchIn::Submit(i)));
            if self.rng.random_bool(0.5) {
                let later = at + Duration::from_micros(self.rng.random_range(0..60_000));
                self.at(later, Ev::Orch(OrchIn::Cancel(i)));
            }
        }
        self.report.requests = n;
        self.at(last + Duration::from_millis(1), Ev::Orch(OrchIn::CloseInput));
    }

    fn faults(&mut self) {
        let stages = self.nodes.len();
        for _ in 0..self.rng.random_range(0..=3u32) {
            let at = Duration::from_micros(self.rng.random_range(200_000..1_700_000));
            let i = self.rng.random_range(0..stages);
            let fault = match self.rng.random_range(0..9u32) {
                8 => {
                    // During boot (before the first fact is in).
                    let at = Duration::from_micros(self.rng.random_range(0..90));
                    self.at(at, Ev::Fault(Fault::BootFail(i)));
                    continue;
                }
                0 => Fault::Crash(i),
                1 => Fault::WorkerCrash(i),
                2 => Fault::Pause(i, Duration::from_millis(self.rng.random_range(10..200))),
                3 => Fault::Pause(i, Duration::from_millis(self.rng.random_range(600..2000))),
                4 => Fault::ControlDrop(i),
                5 => Fault::EdgeError(i),
                6 => Fault::Slow(i),
                _ => {
                    self.report.faults.push("operator_stop");
                    self.at(at, Ev::Orch(OrchIn::Stop));
                    continue;
                }
            };
            self.at(at, Ev::Fault(fault));
        }
        if self.rng.random_bool(0.5) {
            self.jitter = true;
            self.report.faults.push("timer_jitter");
        }
    }

    fn at(&mut self, at: Duration, ev: Ev) {
        let id = self.next_ev;
        self.next_ev += 1;
        self.order += 1;
        self.evs.insert(id, ev);
        self.queue.push(Reverse((at, self.order, id)));
    }

    /// Delivers `ev` on `link` after a random delay, never before what the link carries
    /// already.
    fn send(&mut self, link: Link, lo_us: u64, hi_us: u64, ev: Ev) {
        let d = Duration::from_micros(self.rng.random_range(lo_us..=hi_us));
        let last = self.links.get(&link).copied().unwrap_or_default();
        let at = (self.now + d).max(last);
        self.links.insert(link, at);
        self.at(at, ev);
    }

    fn instant(&self) -> Instant {
        self.base + self.now
    }

    fn violation(&mut self, what: String) {
        self.report.trace.push(format!("{:>9.3} ms VIOLATION {what}", self.ms()));
        self.report.violations.push(what);
    }

    fn ms(&self) -> f64 {
        self.now.as_secs_f64() * 1e3
    }

    fn trace(&mut self, what: String) {
        let line = format!("{:>9.3} ms {what}", self.ms());
        self.report.trace.push(line);
    }

    fn outcome(&self) -> Option<RunOutcome> {
        self.fsm.as_ref().and_then(RunFsm::outcome)
    }

    /// Every timer that is due (an early call changes nothing).
    fn timers(&mut self) {
        let now = self.instant();
        if let Some(fsm) = self.fsm.as_mut() {
            fsm.handle_timeout(now);
        }
        self.gate.handle_timeout(now);
        for i in 0..self.nodes.len() {
            if self.nodes[i].dead {
                continue;
            }
            self.nodes[i].wctl.handle_timeout(now);
            self.nodes[i].boot.handle_timeout(now);
            self.pump_wctl(i);
            self.boot_events(i);
            self.pump_node(i);
        }
        self.pump_gate();
        self.pump_orch();
    }

    /// Carries the pool gate's verdicts: the session starts at `PoolReady`; a required node
    /// lost after provisioning began goes to the session.
    fn pump_gate(&mut self) {
        while let Some(ev) = self.gate.poll_event() {
            self.trace(format!("gate {ev:?}"));
            let now = self.instant();
            match ev {
                GateEvent::PoolReady { .. } if self.fsm.is_none() && !self.early.3 => {
                    self.start_session();
                }
                GateEvent::RequiredNodeLost { node, reason } => {
                    if let Some(fsm) = self.fsm.as_mut() {
                        if reason == MembershipLoss::NodeDown {
                            fsm.node_lost(now, node, reason.into(), Component::Membership);
                        } else {
                            fsm.fault(
                                now,
                                reason.into(),
                                Component::Membership,
                                Some(node),
                                None,
                                None,
                            );
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The pool is ready: the session starts, and what its clients sent meanwhile goes in.
    fn start_session(&mut self) {
        let now = self.instant();
        let (limits, timeouts, planted) = self.session;
        let mut fsm = RunFsm::start(now, &self.plan, limits, timeouts);
        match planted {
            Some(Planted::EarlySlotRelease) => fsm.plant_early_slot_release(),
            Some(Planted::SkipReset) => fsm.plant_skip_reset(),
            Some(Planted::NoLateAnswerFilter) | None => {}
        }
        self.fsm = Some(fsm);
        self.gate.provisioning_started();
        let (submits, cancels, closed, _) = std::mem::take(&mut self.early);
        for k in submits {
            self.orch(OrchIn::Submit(k));
        }
        for k in cancels {
            self.orch(OrchIn::Cancel(k));
        }
        if closed {
            self.orch(OrchIn::CloseInput);
        }
    }

    fn run(&mut self) {
        self.pump_orch();
        loop {
            let nodes = self
                .nodes
                .iter()
                .filter(|n| !n.dead)
                .flat_map(|n| [n.wctl.poll_timeout(), n.boot.poll_timeout()]);
            let deadline =
                [self.fsm.as_ref().and_then(RunFsm::poll_timeout), self.gate.poll_timeout()]
                    .into_iter()
                    .chain(nodes)
                    .flatten()
                    .min()
                    .map(|t| t.saturating_duration_since(self.base));
            let next = self.queue.peek().map(|Reverse((t, _, _))| *t);
            match (next, deadline) {
                (None, Some(d)) | (Some(_), Some(d)) if next.is_none_or(|n| d < n) => {
                    // A timer: sometimes late, sometimes (harmlessly) early as well.
                    let late = if self.jitter {
                        Duration::from_micros(self.rng.random_range(0..20_000))
                    } else {
                        Duration::ZERO
                    };
                    if self.jitter && d > Duration::from_millis(1) {
                        self.now = self.now.max(d - Duration::from_millis(1));
                        self.timers();
                    }
                    self.now = self.now.max(d + late);
                    self.trace("timer".into());
                    self.report.steps += 1;
                    self.timers();
                }
                (Some(_), _) | (None, Some(_)) => {
                    let Some(Reverse((t, order, id))) = self.queue.pop() else { break };
                    self.now = self.now.max(t);
                    let Some(ev) = self.evs.remove(&id) else { continue };
                    self.report.steps += 1;
                    self.handle(ev, order);
                }
                (None, None) => break,
            }
            if self.now > HORIZON || self.report.steps > 500_000 {
                self.violation(format!("no progress: still running at {:.0} ms", self.ms()));
                break;
            }
            if self.torn_down && self.queue.is_empty() {
                break;
            }
        }
    }

    /// Handles one event; `order` is its place in sending order (kept when a paused node
    /// defers it, so deferred events keep the order of their links).
    fn handle(&mut self, ev: Ev, order: u64) {
        match ev {
            Ev::Orch(m) => self.orch(m),
            Ev::Node(i, m) => {
                let node = &self.nodes[i];
                if node.dead {
                    return;
                }
                if node.paused_until > self.now {
                    // Paused or partitioned: everything waits for the heal (QUIC and the
                    // control stream retransmit), in order.
                    let until = node.paused_until;
                    let id = self.next_ev;
                    self.next_ev += 1;
                    self.evs.insert(id, Ev::Node(i, m));
                    self.queue.push(Reverse((until, order, id)));
                    return;
                }
                self.node(i, m);
                self.pump_wctl(i);
                self.pump_node(i);
            }
            Ev::Fault(f) => self.fault(f),
        }
        self.pump_orch();
    }

    fn orch(&mut self, m: OrchIn) {
        let now = self.instant();
        let run = RUN;
        // The pool phase needs no session.
        let m = match m {
            OrchIn::Available(i) => {
                let identity = DataPlaneIdentity {
                    endpoint_id: format!("{:064x}", i + 1),
                    addrs: vec![format!("127.0.0.1:{}", 1001 + i)],
                };
                self.gate.node_available(now, NodeId(i as u64 + 1), identity);
                return self.pump_gate();
            }
            OrchIn::BootFaulted(i, reason) => {
                self.gate.node_faulted(now, NodeId(i as u64 + 1), reason);
                return self.pump_gate();
            }
            OrchIn::Member(i, state) => {
                let node = NodeId(i as u64 + 1);
                match state {
                    Membership::Up => self.gate.member_up(now, node),
                    Membership::Suspect => self.gate.member_suspect(now, node),
                    Membership::Down => self.gate.member_down(now, node),
                }
                return self.pump_gate();
            }
            OrchIn::PoolTimeout => {
                if self.fsm.is_none() {
                    self.trace("the pool did not become ready: no session".into());
                    self.early.3 = true;
                }
                return;
            }
            m => m,
        };
        // Before the session, its clients' inputs wait for it.
        let Some(mut fsm) = self.fsm.take() else {
            match m {
                OrchIn::Submit(k) => self.early.0.push(k),
                OrchIn::Cancel(k) => self.early.1.push(k),
                OrchIn::CloseInput => self.early.2 = true,
                OrchIn::Stop => {
                    self.faulty = true;
                    self.early.3 = true;
                }
                // A session lost before the run: the node is no longer available.
                OrchIn::NodeLost(i, _, _) => {
                    self.gate.node_unavailable(now, NodeId(i as u64 + 1));
                    self.pump_gate();
                }
                _ => {}
            }
            return;
        };
        match m {
            OrchIn::StageReady(i) => {
                let _ = fsm.stage_ready(now, run, StageIndex(i as u32), NodeId(i as u64 + 1));
            }
            OrchIn::StageFault(i, reason, component) => {
                let (node, stage) = (NodeId(i as u64 + 1), StageIndex(i as u32));
                fsm.fault(now, reason, component, Some(node), Some(stage), None);
            }
            OrchIn::StageStopped(i) => {
                let _ = fsm.stage_stopped(run, StageIndex(i as u32), NodeId(i as u64 + 1));
            }
            OrchIn::TokenOut(object, sequence, payload) => {
                self.inflight.pop_front();
                fsm.token_received(now, object, sequence, &payload);
            }
            OrchIn::EndpointsReady => fsm.token_endpoints_ready(now),
            OrchIn::EndpointsStopped => fsm.token_endpoints_stopped(),
            OrchIn::NodeLost(i, reason, component) => {
                fsm.node_lost(now, NodeId(i as u64 + 1), reason, component);
            }
            OrchIn::Submit(k) => {
                let r = &self.reqs[k];
                let req = SeqRequest {
                    prompt: r.prompt.clone(),
                    max_tokens: r.max_tokens,
                    sampling: if r.temperature > 0.0 {
                        SamplingPolicy::Sample {
                            temperature: r.temperature,
                            top_k: None,
                            top_p: None,
                            seed: r.seed,
                        }
                    } else {
                        SamplingPolicy::Greedy
                    },
                };
                let got = fsm.submit(now, req);
                self.trace(format!("submit request {k}: {got:?}"));
                self.reqs[k].id = got.ok();
            }
            OrchIn::Cancel(k) => {
                if let Some(id) = self.reqs[k].id {
                    self.trace(format!("cancel sequence {id}"));
                    fsm.cancel(now, id, FinishReason::Cancelled);
                }
            }
            OrchIn::CloseInput => fsm.close_input(now),
            OrchIn::Stop => {
                self.faulty = true;
                fsm.operator_stop(now, OperatorStop::Interrupt);
            }
            _ => {}
        }
        self.fsm = Some(fsm);
    }

    /// Executes what the run FSM asks and checks what it reports.
    fn pump_orch(&mut self) {
        while let Some(cmd) = self.fsm.as_mut().and_then(RunFsm::poll_command) {
            match cmd {
                RunCommand::Provision(s) => self.send(
                    Link::Control(s.0 as usize),
                    500,
                    5000,
                    Ev::Node(s.0 as usize, NodeIn::Provision),
                ),
                RunCommand::StartTokenEndpoints => {
                    self.send(Link::Orch, 100, 2000, Ev::Orch(OrchIn::EndpointsReady));
                }
                RunCommand::Inject { object_id, sequence, payload, .. } => {
                    let limits = self.limits();
                    match BatchTable::split_rows(&payload, limits, 4) {
                        Ok((table, _)) => {
                            let slots: Vec<u32> = table.entries().iter().map(|e| e.slot).collect();
                            let busy: Vec<u32> = slots
                                .iter()
                                .copied()
                                .filter(|s| self.inflight.iter().any(|f| f.contains(s)))
                                .collect();
                            if !busy.is_empty() {
                                self.violation(format!(
                                    "micro-batch {} touches slots {busy:?} already in flight",
                                    sequence.0
                                ));
                            }
                            self.inflight.push_back(slots);
                        }
                        Err(e) => self.violation(format!("injected a bad micro-batch: {e}")),
                    }
                    self.send(
                        Link::Edge(0),
                        50,
                        1000,
                        Ev::Node(0, NodeIn::Object(object_id, sequence, payload)),
                    );
                }
                RunCommand::StopRun(s) => self.send(
                    Link::Control(s.0 as usize),
                    500,
                    5000,
                    Ev::Node(s.0 as usize, NodeIn::StopRun),
                ),
                RunCommand::StopTokenEndpoints => {
                    self.send(Link::Orch, 100, 3000, Ev::Orch(OrchIn::EndpointsStopped));
                }
            }
        }
        while let Some(ev) = self.fsm.as_mut().and_then(RunFsm::poll_event) {
            if self.torn_down {
                self.violation(format!("{} after run_torn_down", ev.kind()));
            }
            match &ev {
                Event::RunTornDown { .. } => self.torn_down = true,
                Event::RunFaulted { reason, .. } => self.report.reason = Some(reason.to_string()),
                _ => {}
            }
            self.trace(format!("event {}", ev.kind()));
            self.events.push(ev);
        }
        while let Some(out) = self.fsm.as_mut().and_then(RunFsm::poll_output) {
            match out {
                SeqOutput::Token { id, token } => self.tokens.entry(id).or_default().push(token),
                SeqOutput::Finished { id, reason, generated, .. } => {
                    self.trace(format!("sequence {id} finished: {reason:?}"));
                    if self.finished.insert(id, reason).is_some() {
                        self.violation(format!("sequence {id} finished twice"));
                    }
                    if generated != *self.tokens.get(&id).unwrap_or(&Vec::new()) {
                        self.violation(format!(
                            "sequence {id}'s token log differs from its tokens"
                        ));
                    }
                }
            }
        }
    }

    fn limits(&self) -> BatchLimits {
        BatchLimits { capacity: self.plan.runtime.table_capacity(), max_seq_len: MAX_SEQ }
    }

    fn node(&mut self, i: usize, m: NodeIn) {
        let n = &mut self.nodes[i];
        match m {
            NodeIn::Provision => {
                if let Some(p) = self.plan.provision(StageIndex(i as u32)) {
                    let provision = Box::new(p);
                    n.stage.control(SESSION, ControlMessage::ProvisionStage { provision });
                }
            }
            NodeIn::StopRun => n.stage.control(SESSION, ControlMessage::StopRun { run_id: RUN }),
            NodeIn::WeightsReady => n.stage.weights_resolved(RUN, Ok(("/sim".into(), 1 << 12))),
            NodeIn::RoleReady => {
                let ev = WorkerEvent::RoleConfigured { role_id: STAGE_ROLE };
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            NodeIn::PumpReady(e) => n.stage.plane_mut().pump_ready(e),
            NodeIn::PumpEnded(e, r) => {
                n.stage.plane_mut().pump_ended(e, PumpStopped::observed(r), None);
            }
            NodeIn::Spawned(g) => {
                if g == n.wctl.generation() {
                    n.wctl.spawned(self.base + self.now);
                }
            }
            NodeIn::Worker(g, cmd) => self.worker_process(i, g, cmd),
            NodeIn::FromWorker(g, ev) => n.wctl.worker_event(g, ev),
            NodeIn::Exited(g) => n.wctl.worker_exited(g),
            NodeIn::RoleReleased => {
                n.slots.clear();
                let ev = WorkerEvent::RoleReleased { role_id: STAGE_ROLE };
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            NodeIn::Late(ev) => {
                n.stage.worker_output(CtlOutput::Routed(ev));
            }
            NodeIn::Object(object, sequence, payload) => self.arrive(i, object, sequence, payload),
            NodeIn::Boot(fact, failed) => {
                match failed {
                    None => n.boot.fact_ready(fact),
                    Some(reason) => n.boot.resource_failed(reason),
                }
                self.boot_events(i);
            }
            NodeIn::StepDone(step, sequence, result, out_object, out_sequence) => {
                self.done(i, step, sequence, result, out_object, out_sequence);
            }
        }
    }

    /// Carries node `i`'s boot events to the orchestrator.
    fn boot_events(&mut self, i: usize) {
        while let Some(ev) = self.nodes[i].boot.poll_event() {
            match ev {
                BootEvent::NodeAvailable { .. } => {
                    self.send(Link::Report(i), 200, 3000, Ev::Orch(OrchIn::Available(i)));
                    self.send(
                        Link::Orch,
                        100,
                        100_000,
                        Ev::Orch(OrchIn::Member(i, Membership::Up)),
                    );
                }
                BootEvent::BootFaulted { reason, .. } => {
                    self.send(Link::Report(i), 200, 3000, Ev::Orch(OrchIn::BootFaulted(i, reason)));
                }
                BootEvent::Started { .. } => {}
            }
        }
    }

    /// An object reaches node `i`'s ingress: checked in sequence, taken by the posted step
    /// or loaded for the controller.
    fn arrive(&mut self, i: usize, object: ObjectId, sequence: Sequence, payload: Vec<u8>) {
        let n = &mut self.nodes[i];
        let Some(edge) = n.stage.provisioning().map(|p| p.inbound.edge_id) else { return };
        if n.stage.plane().is_settled(edge) {
            return;
        }
        let ring_id =
            n.rings.iter().find(|(_, e)| **e == edge).map_or(crate::wire::RingId(0), |(r, _)| *r);
        if sequence.0 != n.next_in {
            let want = n.next_in;
            let reason = ObjectFailure::SequenceViolation;
            let failed = WorkerEvent::ObjectFailed {
                ring_id,
                edge_id: edge,
                port_id: crate::wire::PortId(0),
                object_id: Some(object),
                sequence: Some(sequence),
                reason,
            };
            n.stage.worker_output(CtlOutput::Routed(failed));
            self.violation(format!("node {i}: object {} arrived, {want} expected", sequence.0));
            return;
        }
        n.next_in += 1;
        let handle = DeviceHandle { generation: WorkerGeneration(1), id: n.next_handle };
        n.next_handle += 1;
        let extent = payload.len() as u64;
        let loaded = |taken_by| WorkerEvent::ObjectLoaded {
            ring_id,
            edge_id: edge,
            port_id: crate::wire::PortId(0),
            object_id: object,
            sequence,
            extent,
            handle,
            taken_by,
            at_us: None,
        };
        match n.posted {
            Some(p) if p.sequence == sequence => {
                n.posted = None;
                n.stage.worker_output(CtlOutput::Routed(loaded(Some(p.step))));
                let want = p.extent.resolve(extent);
                self.compute(i, p.step, sequence, payload, want, p.object, p.out_sequence);
            }
            _ => {
                n.loaded.insert(handle.id, (object, sequence, payload));
                n.stage.worker_output(CtlOutput::Routed(loaded(None)));
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn compute(
        &mut self,
        i: usize,
        step: StepId,
        sequence: Sequence,
        payload: Vec<u8>,
        extent: u64,
        out_object: ObjectId,
        out_sequence: Sequence,
    ) {
        let last = i + 1 == self.nodes.len();
        let limits = self.limits();
        let row = if i == 0 { 4 } else { u64::from(HIDDEN) * 4 };
        let n = &mut self.nodes[i];
        let result = model::step(
            i as u32,
            last,
            &mut n.slots,
            limits,
            row,
            u64::from(HIDDEN) * 4,
            VOCAB,
            &payload,
        )
        .map_err(|e| format!("{e:?}"))
        .and_then(|out| {
            if out.len() as u64 == extent {
                Ok(out)
            } else {
                Err(format!("{} bytes produced, {extent} declared", out.len()))
            }
        });
        let cost = Duration::from_micros(self.rng.random_range(200..3000) * u64::from(n.slow));
        n.busy_until = n.busy_until.max(self.now) + cost;
        let at = n.busy_until;
        self.at(
            at,
            Ev::Node(i, NodeIn::StepDone(step, sequence, result, out_object, out_sequence)),
        );
    }

    fn done(
        &mut self,
        i: usize,
        step: StepId,
        sequence: Sequence,
        result: Result<Vec<u8>, String>,
        out_object: ObjectId,
        out_sequence: Sequence,
    ) {
        let n = &mut self.nodes[i];
        if n.executed.last().is_some_and(|&s| s >= sequence.0)
            || (n.executed.is_empty() && sequence.0 != 0)
        {
            let seen = n.executed.clone();
            self.violation(format!("node {i}: step of sequence {} after {seen:?}", sequence.0));
        }
        self.nodes[i].executed.push(sequence.0);
        match result {
            Err(e) => {
                if !self.faulty {
                    self.violation(format!("node {i}: step {} failed: {e}", sequence.0));
                }
                let reason = StepFailure::ComputeFailed;
                let failed = WorkerEvent::StepFailed { role_id: STAGE_ROLE, step_id: step, reason };
                self.nodes[i].stage.worker_output(CtlOutput::Routed(failed));
            }
            Ok(out) => {
                let dest = if i + 1 == self.nodes.len() {
                    Ev::Orch(OrchIn::TokenOut(out_object, out_sequence, out))
                } else {
                    Ev::Node(i + 1, NodeIn::Object(out_object, out_sequence, out))
                };
                let stage = &self.nodes[i].stage;
                let outbound = stage.provisioning().map(|p| p.outbound.edge_id);
                if outbound.is_some_and(|e| !stage.plane().is_settled(e)) {
                    self.send(Link::Edge(i + 1), 50, 1500, dest);
                }
                let done = WorkerEvent::StepCompleted { role_id: STAGE_ROLE, step_id: step };
                self.nodes[i].stage.worker_output(CtlOutput::Routed(done));
            }
        }
    }

    /// Executes one action of node `i`'s stage side, as the node's host does; the
    /// simulated worker process carries out the commands meant for the worker.
    fn node_action(&mut self, i: usize, action: NodeAction) {
        match action {
            NodeAction::Send(msg) => {
                let to = match msg {
                    ControlMessage::StageReady { .. } => OrchIn::StageReady(i),
                    ControlMessage::StageFault { reason, component, .. } => {
                        OrchIn::StageFault(i, reason, component)
                    }
                    ControlMessage::StageStopped { .. } => OrchIn::StageStopped(i),
                    _ => return,
                };
                self.send(Link::Report(i), 500, 5000, Ev::Orch(to));
            }
            NodeAction::FetchWeights(_) => {
                self.send(Link::Local(i), 1000, 10_000, Ev::Node(i, NodeIn::WeightsReady))
            }
            NodeAction::WorkerSend { command, .. } | NodeAction::WorkerNotify(command) => {
                self.worker_step_command(i, command);
            }
            NodeAction::StopRingPump(ring_id) => {
                let n = &mut self.nodes[i];
                if let Some(&edge) = n.rings.get(&ring_id)
                    && n.ended.insert(edge)
                {
                    let ev = Ev::Node(i, NodeIn::PumpEnded(edge, ring_id));
                    self.send(Link::Local(i), 100, 2000, ev);
                }
            }
            NodeAction::Log(line) => self.trace(format!("node {i}: {line}")),
            NodeAction::Emit { .. }
            | NodeAction::WakeRing(_)
            | NodeAction::ForgetEdges(_)
            | NodeAction::CloseSession => {}
        }
    }

    /// The simulated worker process takes a command about its role or its steps.
    fn worker_step_command(&mut self, i: usize, command: Command) {
        match command {
            Command::ConfigureRole { config, .. } => {
                if let crate::worker::protocol::RoleConfig::LlamaStage { max_sequences, .. } =
                    config
                {
                    self.nodes[i].slots = vec![SlotState::default(); max_sequences.max(1) as usize];
                }
                self.send(Link::Local(i), 1000, 20_000, Ev::Node(i, NodeIn::RoleReady));
            }
            Command::PostStep { step_id, sequence, output, .. } => {
                self.nodes[i].posted = Some(Post {
                    step: step_id,
                    sequence,
                    extent: output.extent,
                    object: output.object_id,
                    out_sequence: output.sequence,
                });
            }
            Command::ExecuteStep { step_id, inputs, outputs, .. } => {
                let (Some(input), Some(output)) = (inputs.first(), outputs.first()) else {
                    self.violation(format!("node {i}: a step without input or output"));
                    return;
                };
                let sequence = input.sequence;
                match self.nodes[i].loaded.remove(&input.handle.id) {
                    Some((_, s, payload)) if s == sequence => {
                        let extent = output.extent;
                        let (object, out_sequence) = (output.object_id, output.sequence);
                        self.compute(i, step_id, sequence, payload, extent, object, out_sequence);
                    }
                    other => {
                        self.violation(format!(
                            "node {i}: step {} on a missing or other input {:?}",
                            sequence.0,
                            other.map(|o| o.1)
                        ));
                    }
                }
            }
            Command::WithdrawStep { step_id } => {
                if self.nodes[i].posted.is_some_and(|p| p.step == step_id) {
                    self.nodes[i].posted = None;
                }
            }
            Command::ReleaseRole { .. } => {
                self.send(Link::Local(i), 100, 2000, Ev::Node(i, NodeIn::RoleReleased))
            }
            Command::ReleaseDeviceObject { handle } => {
                self.nodes[i].loaded.remove(&handle.id);
            }
            _ => {}
        }
    }

    /// Runs node `i`'s stage side to a fixed point: its actions, and its plane's commands
    /// through the simulated executor.
    fn pump_node(&mut self, i: usize) {
        loop {
            let mut progressed = self.nodes[i].stage.advance();
            while let Some(action) = self.nodes[i].stage.poll_action() {
                progressed = true;
                self.node_action(i, action);
            }
            progressed |= self.pump_plane(i);
            if !progressed {
                return;
            }
        }
    }

    /// Executes what node `i`'s edge plane asks (the simulated executor: rings, pumps and
    /// the worker's hold on rings). Returns whether it did anything.
    fn pump_plane(&mut self, i: usize) -> bool {
        let mut any = false;
        {
            while let Some(cmd) = self.nodes[i].stage.plane_mut().poll_command() {
                any = true;
                self.trace(format!("node {i} plane: {cmd:?}"));
                match cmd {
                    PlaneCommand::InstallRing { edge_id, direction, layout, object } => {
                        self.nodes[i].rings.insert(layout.ring_id, edge_id);
                        let cmd = Command::InstallRing {
                            ring_id: layout.ring_id,
                            edge_id,
                            port_id: crate::wire::PortId(0),
                            direction,
                            layout,
                            object_spec: object,
                        };
                        if self.nodes[i].wctl.command(cmd).is_err() {
                            let r = layout.ring_id;
                            let w = RingFault::WorkerCrashed;
                            self.nodes[i].stage.plane_mut().ring_fault(r, w, Component::WorkerCtl);
                        }
                        self.pump_wctl(i);
                    }
                    PlaneCommand::StartSend { edge_id, .. }
                    | PlaneCommand::StartRecv { edge_id, .. } => {
                        self.send(
                            Link::Local(i),
                            200,
                            5000,
                            Ev::Node(i, NodeIn::PumpReady(edge_id)),
                        );
                    }
                    PlaneCommand::StopPump { edge_id } => {
                        if self.nodes[i].ended.contains(&edge_id) {
                            continue;
                        }
                        let ring = self.nodes[i]
                            .rings
                            .iter()
                            .find(|(_, e)| **e == edge_id)
                            .map(|(r, _)| *r);
                        if let Some(r) = ring {
                            self.send(
                                Link::Local(i),
                                100,
                                3000,
                                Ev::Node(i, NodeIn::PumpEnded(edge_id, r)),
                            );
                        }
                    }
                    PlaneCommand::DetachRing { ring_id } => {
                        let reason = crate::worker::protocol::UninstallReason::Stop;
                        // A worker that is gone answers for its rings by being reaped.
                        let _ =
                            self.nodes[i].wctl.command(Command::UninstallRing { ring_id, reason });
                        self.pump_wctl(i);
                    }
                    PlaneCommand::ForgetRing { ring_id, .. } => {
                        self.nodes[i].rings.remove(&ring_id);
                    }
                }
            }
        }
        any
    }

    /// The simulated worker process of generation `g` on node `i` reads one command line.
    fn worker_process(&mut self, i: usize, g: WorkerGeneration, cmd: Command) {
        let reply = match cmd {
            Command::InitializeWorker { generation, .. } if !self.nodes[i].mute => {
                Some(WorkerEvent::WorkerReady {
                    pid: 1000 + i as u32,
                    generation,
                    ring_abi: RING_ABI,
                    backend: Backend::Cpu,
                })
            }
            Command::InstallRing { ring_id, .. } => Some(WorkerEvent::RingInstalled { ring_id }),
            Command::UninstallRing { ring_id, .. } => Some(WorkerEvent::RingQuiesced { ring_id }),
            Command::ShutdownWorker { .. } => {
                self.send(Link::Local(i), 100, 2000, Ev::Node(i, NodeIn::Exited(g)));
                None
            }
            _ => None,
        };
        if let Some(ev) = reply {
            self.send(Link::Local(i), 50, 1500, Ev::Node(i, NodeIn::FromWorker(g, ev)));
        }
    }

    /// Executes what node `i`'s worker controller asks and carries what it reports to the
    /// node's boot and stage side, as the node's driver does.
    fn pump_wctl(&mut self, i: usize) {
        while let Some(out) = self.nodes[i].wctl.poll_output() {
            let g = self.nodes[i].wctl.generation();
            let n = &mut self.nodes[i];
            match out {
                CtlOutput::Spawn { generation } => {
                    self.send(Link::Local(i), 500, 5000, Ev::Node(i, NodeIn::Spawned(generation)));
                }
                CtlOutput::ToWorker(cmd) => {
                    self.send(Link::Local(i), 50, 1000, Ev::Node(i, NodeIn::Worker(g, cmd)));
                }
                CtlOutput::Kill => {
                    self.send(Link::Local(i), 100, 1000, Ev::Node(i, NodeIn::Exited(g)));
                }
                CtlOutput::Ready { .. } => {
                    n.slots.clear();
                    n.stage.worker_output(out);
                    if !n.boot.is_available() {
                        n.boot.fact_ready(BootFact::Worker);
                        self.boot_events(i);
                    }
                }
                CtlOutput::Restarting { .. } => {
                    // The crashed worker took the stage's role with it.
                    n.posted = None;
                    n.loaded.clear();
                    n.slots.clear();
                    n.stage.worker_output(out);
                }
                CtlOutput::Failed { .. } if !n.boot.is_available() => {
                    n.boot.resource_failed(BootFault::WorkerInitTimeout);
                    self.boot_events(i);
                }
                out => {
                    n.stage.worker_output(out);
                }
            }
        }
    }

    fn fault(&mut self, f: Fault) {
        if self.torn_down {
            return;
        }
        let target = match f {
            Fault::BootFail(i)
            | Fault::Crash(i)
            | Fault::WorkerCrash(i)
            | Fault::Pause(i, _)
            | Fault::ControlDrop(i)
            | Fault::EdgeError(i)
            | Fault::Slow(i) => i,
        };
        if self.nodes[target].dead {
            return; // nothing happens to a node that is gone
        }
        // A slow consumer is no fault: the run must still complete.
        self.faulty |= !matches!(f, Fault::Slow(_));
        self.trace(format!("fault {f:?}"));
        // SWIM suspects the member, then declares it down (through the pool gate).
        let lost = |w: &mut World, i: usize| {
            let reason = FaultReason::Membership(MembershipLoss::NodeDown);
            w.possible.insert(reason);
            let d = DETECT.as_micros() as u64;
            w.send(Link::Orch, d / 4, d / 2, Ev::Orch(OrchIn::Member(i, Membership::Suspect)));
            w.send(Link::Orch, d / 2, d, Ev::Orch(OrchIn::Member(i, Membership::Down)));
        };
        match f {
            Fault::BootFail(i) => {
                // Before it is available: its worker does not come up in time.
                self.report.faults.push("boot_fault");
                if !self.nodes[i].boot.is_available() {
                    // Its worker never answers: the controller's init timeout fails it.
                    self.boot_faulted = true;
                    self.nodes[i].mute = true;
                }
            }
            Fault::Crash(i) => {
                self.report.faults.push("node_crash");
                if !self.nodes[i].dead {
                    self.nodes[i].dead = true;
                    lost(self, i);
                    self.neighbours_see_broken_streams(i);
                }
            }
            Fault::WorkerCrash(i) => {
                // The worker process dies: its controller reaps it, faults its rings and
                // restarts it.
                self.report.faults.push("worker_crash");
                self.possible.insert(FaultReason::Ring(RingFault::WorkerCrashed));
                self.possible.insert(FaultReason::Worker(crate::wire::reason::WorkerFatal::Exited));
                let g = self.nodes[i].wctl.generation();
                self.nodes[i].wctl.worker_exited(g);
                self.pump_wctl(i);
                self.neighbours_see_broken_streams(i);
            }
            Fault::Pause(i, d) => {
                self.report.faults.push(if d > DETECT { "long_pause" } else { "short_pause" });
                let until = self.now + d;
                self.nodes[i].paused_until = self.nodes[i].paused_until.max(until);
                if d > DETECT {
                    // SWIM declares it down; when it wakes its session is gone and it
                    // tears its stage down by itself (modelled as a node that is gone).
                    lost(self, i);
                    self.nodes[i].dead = true;
                    self.neighbours_see_broken_streams(i);
                } else if d > DETECT / 4 {
                    // Suspected, then refuted when it wakes.
                    let us = d.as_micros() as u64;
                    self.send(
                        Link::Orch,
                        us / 2,
                        us / 2,
                        Ev::Orch(OrchIn::Member(i, Membership::Suspect)),
                    );
                    self.send(
                        Link::Orch,
                        us,
                        us + 50_000,
                        Ev::Orch(OrchIn::Member(i, Membership::Up)),
                    );
                }
            }
            Fault::ControlDrop(i) => {
                self.report.faults.push("control_drop");
                let reason = FaultReason::Control(ControlFault::ConnectionLost);
                self.possible.insert(reason);
                self.send(
                    Link::Orch,
                    100,
                    5000,
                    Ev::Orch(OrchIn::NodeLost(i, reason, Component::ControlChannel)),
                );
                // Without its session the node tears its stage down by itself.
                self.nodes[i].dead = true;
            }
            Fault::EdgeError(i) => {
                // The stream of node i's outbound edge breaks: both pumps end with it.
                self.report.faults.push("edge_error");
                self.possible.insert(FaultReason::Stream(StreamFault::WriteFailed));
                self.possible.insert(FaultReason::Stream(StreamFault::ReadFailed));
                let edge = self.nodes[i].stage.provisioning().map(|p| p.outbound.edge_id);
                let Some(edge) = edge else { return };
                self.pump_failed(i, edge, StreamFault::WriteFailed);
                if i + 1 < self.nodes.len() && !self.nodes[i + 1].dead {
                    self.pump_failed(i + 1, edge, StreamFault::ReadFailed);
                }
            }
            Fault::Slow(i) => {
                self.report.faults.push("slow_consumer");
                self.nodes[i].slow = self.rng.random_range(5..40);
            }
        }
    }

    /// Node `i`'s pump of `edge` ends with `fault` (if the edge has a ring there).
    fn pump_failed(&mut self, i: usize, edge: EdgeId, fault: StreamFault) {
        let n = &mut self.nodes[i];
        let ring = n.rings.iter().find(|(_, e)| **e == edge).map(|(r, _)| *r);
        if let Some(r) = ring
            && n.ended.insert(edge)
        {
            n.stage.plane_mut().pump_ended(edge, PumpStopped::observed(r), Some(fault));
            self.pump_node(i);
        }
    }

    /// The stages next to a vanished one see their edge streams break.
    fn neighbours_see_broken_streams(&mut self, i: usize) {
        for (j, reason) in [
            (i.checked_sub(1), StreamFault::WriteFailed),
            (Some(i + 1).filter(|&j| j < self.nodes.len()), StreamFault::ReadFailed),
        ] {
            let Some(j) = j else { continue };
            if self.nodes[j].dead {
                continue;
            }
            let r = FaultReason::Stream(reason);
            self.possible.insert(r);
            // The edge between the two: node j's outbound (i after j) or inbound (i before).
            let edge = self.nodes[j]
                .stage
                .provisioning()
                .map(|p| if j < i { p.outbound.edge_id } else { p.inbound.edge_id });
            if let Some(edge) = edge {
                self.nodes[j].stage.plane_mut().stream_fault(
                    edge,
                    reason,
                    Component::EdgeEstablisher,
                );
            }
            self.pump_node(j);
        }
    }

    /// The checks at the end (see `specs/simulation.md`).
    fn check_end(&mut self) {
        if self.fsm.is_none() {
            // No session: only a node that failed its boot (the pool never became ready)
            // or an operator stop before the pool was ready may explain it, and nothing
            // was provisioned anywhere.
            if !self.boot_faulted && !self.faulty {
                self.violation("the pool never became ready, and nothing explains it".into());
            }
            let provisioned =
                self.nodes.iter().filter(|n| n.stage.provisioning().is_some()).count();
            if provisioned > 0 {
                self.violation(format!("{provisioned} stages provisioned without a session"));
            }
            return;
        }
        let terminal = self.events.iter().filter(|e| e.is_terminal_outcome()).count();
        if terminal != 1 {
            self.violation(format!("{terminal} terminal outcomes"));
        }
        let torn: Vec<&Event> =
            self.events.iter().filter(|e| matches!(e, Event::RunTornDown { .. })).collect();
        if torn.len() != 1 {
            self.violation(format!("run_torn_down {} times", torn.len()));
        } else if !matches!(self.events.last(), Some(Event::RunTornDown { .. })) {
            self.violation("run_torn_down is not the last event".into());
        }
        // Every admitted request ends exactly once; its tokens are the reference's (all of
        // them when it ended by itself, a prefix when it was cut short).
        let mut checks = Vec::new();
        for (k, r) in self.reqs.iter().enumerate() {
            let Some(id) = r.id else { continue };
            let reference = model::reference(
                self.nodes.len() as u32,
                &r.prompt,
                r.max_tokens,
                r.temperature,
                r.seed,
                VOCAB,
                Some(EOS),
                MAX_SEQ,
            );
            let got = self.tokens.get(&id).cloned().unwrap_or_default();
            match self.finished.get(&id) {
                None => checks.push(format!("request {k} (sequence {id}) never finished")),
                Some(FinishReason::Eos | FinishReason::MaxTokens | FinishReason::ContextFull) => {
                    if got != reference {
                        checks
                            .push(format!("request {k}: tokens {got:?}, reference {reference:?}"));
                    }
                }
                Some(_) => {
                    if !reference.starts_with(&got) {
                        checks.push(format!(
                            "request {k}: tokens {got:?} not a prefix of {reference:?}"
                        ));
                    }
                }
            }
        }
        for c in checks {
            self.violation(c);
        }
        // What the run reports.
        match self.outcome() {
            Some(RunOutcome::Completed) => {}
            Some(RunOutcome::Faulted) => {
                let reported = self.events.iter().find_map(|e| match e {
                    Event::RunFaulted { reason, .. } => Some(*reason),
                    _ => None,
                });
                let stalled = FaultReason::Timeout(Timeout::TokenWait);
                if let Some(r) = reported
                    && !self.possible.contains(&r)
                    && !(self.faulty && r == stalled)
                {
                    self.violation(format!("run faulted with {r}, which no injected fault causes"));
                }
            }
            Some(RunOutcome::OperatorStopped) if !self.faulty => {
                self.violation("stopped without an operator stop".into());
            }
            Some(RunOutcome::OperatorStopped) => {}
            None => self.violation("the run has no outcome".into()),
        }
        if !self.faulty && self.outcome() != Some(RunOutcome::Completed) {
            self.violation(format!("without faults the run ended {:?}", self.outcome()));
        }
        // Nothing is left on the nodes that lived: every stage stopped, every edge stopped,
        // no device object held, no step posted.
        let mut kept = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.dead || n.stage.provisioning().is_none() {
                continue;
            }
            let mut left = Vec::new();
            if !n.stage.is_idle() {
                left.push("its stage".to_string());
            }
            let edges: Vec<EdgeId> = n
                .stage
                .records()
                .filter(|r| !matches!(r.state, EdgeState::Stopped | EdgeState::Failed))
                .map(|r| r.edge_id)
                .collect();
            if !edges.is_empty() {
                left.push(format!("edges {edges:?}"));
            }
            if !n.loaded.is_empty() {
                left.push(format!("{} device objects", n.loaded.len()));
            }
            let plane = n.stage.plane();
            if plane.live_leases() > 0 || plane.live_edges() > 0 {
                left.push(format!(
                    "{} leases and {} live edges in its plane",
                    plane.live_leases(),
                    plane.live_edges()
                ));
            }
            if !left.is_empty() {
                kept.push(format!("node {i} kept {}", left.join(", ")));
            }
        }
        for k in kept {
            self.violation(k);
        }
    }
}
