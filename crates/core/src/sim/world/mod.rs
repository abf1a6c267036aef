//! The simulated world: an event queue in simulated time, the real state machines, and
//! the checks.
//!
//! This module holds the world itself: its types, its construction from a seed (pool,
//! traffic, late answers), the event queue, the run loop, simulated time and the ordered
//! links. The node side is in [`node`], the orchestrator side in [`orchestrator`], fault
//! injection in [`faults`] and the invariants in [`checks`].

mod checks;
mod faults;
mod node;
mod orchestrator;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde::Serialize;

use super::model::SlotState;
use crate::arena::ArenaManager;
use crate::edge::plane::EdgePlane;
use crate::events::{Event, RunOutcome};
use crate::membership::pool_gate::PoolGate;
use crate::model::{ModelBytes, ModelFacts, RopeFacts};
use crate::node::boot::{BootConfig, BootFact, NodeBoot, WorkerPolicy};
use crate::node::stage_node::{PlantedNodeBug, STAGE_ROLE, StageNode};
use crate::orchestrator::run::{RunFsm, RunTimeouts, SessionLimits};
use crate::orchestrator::scheduler::{FinishReason, SeqId};
use crate::planner::pool::{OrchestratorEntry, PoolNode};
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::wire::batch::BatchLimits;
use crate::wire::reason::{BootFault, Component, FaultReason, StepFailure};
use crate::wire::{
    ActivationDType, EdgeId, NodeId, ObjectId, RunId, RunPlan, RuntimeConfig, SamplingPolicy,
    Sequence, StepId, WeightSource, WorkerGeneration,
};
use crate::worker::protocol::OutputExtent;
use crate::worker::protocol::{Backend, Command, Event as WorkerEvent};
use crate::workerctl::{CtlConfig, WorkerCtl};

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
        max_top_logprobs: None,
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

    fn limits(&self) -> BatchLimits {
        BatchLimits { capacity: self.plan.runtime.table_capacity(), max_seq_len: MAX_SEQ }
    }
}
