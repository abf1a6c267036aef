//! The simulated world: an event queue in simulated time, the real state machines, and
//! the checks.
//!
//! This module holds the world itself: its types, its construction from a seed (pool,
//! traffic, late answers), the event queue, the run loop, simulated time and the ordered
//! links. The node side is in [`node`], the orchestrator side in [`orchestrator`], fault
//! injection in [`faults`] and the invariants in [`checks`].

mod checks;
mod drafter;
mod faults;
mod node;
mod orchestrator;
mod reform;
mod setup;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::RngExt;
use rand::rngs::StdRng;
use serde::Serialize;

use super::model::SlotState;
use crate::arena::ArenaManager;
use crate::edge::plane::EdgePlane;
use crate::events::{Event, RunOutcome};
use crate::membership::pool_gate::PoolGate;
use crate::model::{ModelBytes, ModelFacts, RopeFacts};
use crate::node::boot::{BootConfig, BootFact, NodeBoot, WorkerPolicy};
use crate::node::stage_node::{PlantedNodeBug, STAGE_ROLE, StageNode};
use crate::orchestrator::reform::ResumePolicy;
use crate::orchestrator::requests::RequestResult;
use crate::orchestrator::run::{RunTimeouts, SessionLimits};
use crate::orchestrator::session::Session;
use crate::planner::pool::{OrchestratorEntry, PoolNode};
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::wire::batch::BatchLimits;
use crate::wire::reason::{BootFault, Component, FaultReason, StepFailure};
use crate::wire::{
    ActivationDType, EdgeId, NodeId, ObjectId, RunId, RunPlan, RuntimeConfig, SamplingPolicy,
    Sequence, StageIndex, StepId, WeightSource, WorkerGeneration,
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
/// How long a re-forming session waits for capacity (the driver's `--resume-timeout`).
const RESUME_TIMEOUT: Duration = Duration::from_secs(5);
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
    /// A re-formed session forgets its last kept request (neither resumed nor ended).
    ForgetKept,
    /// A re-formed session's replay leaves out the last token a kept request generated.
    ReplaySkipsToken,
    /// A warm slot claims one more prompt token than it shares with a request.
    PrefixOverclaim,
    /// The block store's directory records saved blocks whose save never reaches the
    /// stages.
    StoreSkipSave,
    /// A sequence that takes a slot carried across a re-formation keeps every position
    /// the slot held, shared with its prompt or not.
    ResumeOverkeep,
}

impl Planted {
    /// Every planted bug, in the order the command line lists them.
    pub const ALL: [Planted; 8] = [
        Planted::EarlySlotRelease,
        Planted::SkipReset,
        Planted::NoLateAnswerFilter,
        Planted::ForgetKept,
        Planted::ReplaySkipsToken,
        Planted::PrefixOverclaim,
        Planted::StoreSkipSave,
        Planted::ResumeOverkeep,
    ];

    /// The bug's name on the command line (`early-slot-release`, `skip-reset`).
    pub const fn name(self) -> &'static str {
        match self {
            Planted::EarlySlotRelease => "early-slot-release",
            Planted::SkipReset => "skip-reset",
            Planted::NoLateAnswerFilter => "no-late-answer-filter",
            Planted::ForgetKept => "forget-kept",
            Planted::ReplaySkipsToken => "replay-skips-token",
            Planted::PrefixOverclaim => "prefix-overclaim",
            Planted::StoreSkipSave => "store-skip-save",
            Planted::ResumeOverkeep => "resume-overkeep",
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
    /// Times the session re-formed after a node loss.
    pub reformed: u32,
    /// Tokens drafted and verified (every session of the run).
    pub draft_tokens: u64,
    /// Prompt tokens requests found cached in warm slots (every run of the session).
    pub cached_tokens: u64,
    /// Blocks loaded from the stages' prompt-cache stores into slots.
    pub loaded_blocks: u64,
    /// Stages a re-formed run kept with their caches (a parked role taken over).
    pub kept_stages: u32,
    /// Rows resumed sequences sent from what kept stages held, not computed again.
    pub kept_rows: u64,
    /// Why re-forming was given up, if it was.
    pub abandoned: Option<&'static str>,
    /// Every broken invariant.
    pub violations: Vec<String>,
    /// What happened, one line per event (kept for replays).
    #[serde(skip)]
    pub trace: Vec<String>,
}

#[derive(Debug, Clone)]
enum OrchIn {
    StageReady(RunId, StageIndex, usize),
    StageFault(RunId, StageIndex, usize, FaultReason, Component),
    StageStopped(RunId, StageIndex, usize),
    TokenOut(RunId, ObjectId, Sequence, Vec<u8>),
    EndpointsReady,
    EndpointsStopped,
    NodeLost(usize, FaultReason),
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
    /// A re-formation's wait for capacity ends.
    ResumeTimeout,
}

#[derive(Debug, Clone, Copy)]
enum Membership {
    Up,
    Suspect,
    Down,
}

#[derive(Debug, Clone)]
enum NodeIn {
    Provision(Box<crate::wire::plan::ProvisionStage>),
    StopRun(RunId, bool, bool),
    Object(RunId, ObjectId, Sequence, Vec<u8>),
    WeightsReady,
    /// The role is configured (`true`: a parked role taken over).
    RoleReady(bool),
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
    StepDone(RunId, StepId, Sequence, Result<Vec<u8>, String>, ObjectId, Sequence),
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
    /// The drafter outside the core answers a draft request (`drafter.rs`).
    Drafts(crate::speculate::DraftAnswer),
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
    /// The role the worker runs (its configuration).
    role: Option<crate::worker::protocol::RoleConfig>,
    /// A faulted run's role parked with its slots, as the real worker parks it.
    parked: Option<(crate::worker::protocol::RoleConfig, Vec<SlotState>)>,
    /// The worker's prompt-cache store.
    store: super::model::Store,
    posted: Option<Post>,
    loaded: HashMap<u64, (ObjectId, Sequence, Vec<u8>)>,
    next_handle: u64,
    next_in: u64,
    executed: Vec<u64>,
    busy_until: Duration,
    slow: u32,
}

struct Req {
    /// Handed to the session (before it formed: at its start).
    admitted: bool,
    prompt: Vec<u32>,
    max_tokens: u32,
    temperature: f32,
    seed: u64,
    /// Every token the session streamed for it, across runs.
    tokens: Vec<u32>,
    /// What the session gave as its result.
    result: Option<RequestResult>,
}

struct World {
    /// Stages a re-formed run kept (parked roles taken over).
    kept_stages: u32,
    rng: StdRng,
    base: Instant,
    now: Duration,
    queue: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    evs: HashMap<usize, Ev>,
    next_ev: usize,
    order: u64,
    plan: RunPlan,
    /// The current run.
    run: RunId,
    /// Stage `j` of the current run runs on node `route[j]`.
    route: Vec<usize>,
    /// Slots of every run's plan.
    slots: u32,
    /// Blocks in every stage's prompt-cache store.
    store_blocks: u32,
    /// The real session, once the pool gate said ready (it lives through re-formations).
    session: Option<Session<'static>>,
    /// Runs started.
    runs: u32,
    /// What the session does when a node is lost.
    policy: ResumePolicy,
    /// Re-formations given up (timeout or operator stop), and why.
    abandoned: Option<&'static str>,
    /// The operator stopped while the faulted run tore down: it applies once it has.
    stop_pending: bool,
    /// The session's input closed (no request will come).
    input_closed: bool,
    session_cfg: (SessionLimits, RunTimeouts, Option<Planted>),
    gate: PoolGate,
    /// Requests, cancellations, the input's close and a stop that came before the session.
    early: (Vec<usize>, Vec<usize>, bool, bool),
    boot_faulted: bool,
    nodes: Vec<Node>,
    reqs: Vec<Req>,
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
    /// The session drafts through its draft requests, which `drafter.rs` answers.
    drafts_outside: bool,
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

/// The simulation's plan over `nodes` (for the core's unit tests).
#[cfg(test)]
pub(crate) fn the_plan_for_tests(nodes: &[usize]) -> crate::wire::RunPlan {
    setup::the_plan(nodes, 2, crate::wire::RunId(1), 0)
}

/// Runs one simulation; `base` is the instant simulated time starts at.
pub fn simulate(base: Instant, cfg: SimConfig) -> SimReport {
    let mut w = World::new(base, cfg);
    w.run();
    w.check_end();
    w.report.draft_tokens += w.session.as_ref().map_or(0, |s| s.spec_counters().draft_tokens);
    let prefix = w.session.as_ref().map(|s| s.prefix_counters()).unwrap_or_default();
    w.report.cached_tokens = prefix.cached_tokens;
    w.report.loaded_blocks = prefix.store_loaded;
    w.report.kept_stages = w.kept_stages;
    w.report.outcome = w.outcome();
    w.report.abandoned = w.abandoned;
    w.report.sim_ms = w.now.as_millis() as u64;
    w.report
}

impl World {
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

    /// The session's outcome: its current (last) run's.
    fn outcome(&self) -> Option<RunOutcome> {
        self.session.as_ref().and_then(Session::outcome)
    }

    /// The stage node `i` runs in the current run.
    fn stage_of(&self, i: usize) -> Option<usize> {
        self.route.iter().position(|&n| n == i)
    }

    /// The node after node `i` in the current run's pipeline (`None`: the last stage).
    fn next_of(&self, i: usize) -> Option<usize> {
        self.stage_of(i).and_then(|s| self.route.get(s + 1).copied())
    }

    /// The node before node `i` in the current run's pipeline.
    fn prev_of(&self, i: usize) -> Option<usize> {
        self.stage_of(i).and_then(|s| s.checked_sub(1)).map(|s| self.route[s])
    }

    /// Every timer that is due (an early call changes nothing).
    fn timers(&mut self) {
        let now = self.instant();
        if let Some(session) = self.session.as_mut() {
            session.handle_timeout(now);
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
                [self.session.as_ref().and_then(Session::poll_timeout), self.gate.poll_timeout()]
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
            Ev::Drafts(answer) => self.drafts_arrived(answer),
        }
        self.pump_orch();
    }

    fn limits(&self) -> BatchLimits {
        BatchLimits {
            capacity: self.plan.runtime.table_capacity(),
            max_seq_len: MAX_SEQ,
            cache_blocks: self.plan.prompt_cache.blocks,
            mask_bytes: self.plan.runtime.mask_bytes,
        }
    }
}
