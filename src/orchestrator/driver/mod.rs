//! The orchestrator's driver: pool readiness, planning, and one run from provisioning to
//! teardown. It owns the IO (signals, the clock) and carries inputs to the state machines:
//! the [`PoolPhase`] (control sessions, SWIM, the pool gate, shared with `pool watch`),
//! the planner, and — in `run_loop` — the [`RunFsm`](crate::orchestrator::run::RunFsm) and the token
//! endpoints' [`EdgePlane`](crate::edge::EdgePlane) through the shared edge executor
//! (`endpoints` holds the token endpoints as the rings' local user). Node events arrive
//! over the control sessions and are written, with the orchestrator's own, as one ordered
//! stream to the [`RunSink`].
#![allow(clippy::disallowed_methods)] // the driver owns the clock

mod config;
mod drafting;
mod endpoints;
mod links;
mod reform;
mod run_loop;
pub mod served;

pub use config::SessionSettings;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use iroh::Endpoint;

use super::pool_phase::{PoolNotice, PoolPhase, Role};
use super::reform::ResumePolicy;
use super::requests::{Request, RequestResult};
use super::run::{RunTimeouts, SessionLimits};
use crate::events::{Event, EventLine};
use crate::membership::auth::RejectRecord;
use crate::membership::pool_gate::GateEvent;
use crate::model::ModelFacts;
use crate::model::tokenizer::Tokenizer;
use crate::net::endpoint::bind;
use crate::net::identity::NodeKey;
use crate::orchestrator::session::ReformEnd;
pub use crate::orchestrator::session::{RunFault, RunReport};
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::wire::reason::{Component, FaultReason, OperatorStop};
use crate::wire::{RunId, RunPlan, RuntimeConfig, WeightSource};
pub use drafting::{DraftModelConfig, Drafter};

/// The orchestrator's identity.
#[derive(Debug, Clone)]
pub enum OrchestratorKey {
    /// A key file (created 0600 on first use).
    File(PathBuf),
    /// A key held only in memory (`run local`'s orchestrator: nothing to leave behind).
    Memory(NodeKey),
}

/// Everything one orchestrated run needs (built with [`OrchestrateConfig::new`] or
/// [`OrchestrateConfig::local`], each caller stating what differs).
#[derive(Debug, Clone)]
pub struct OrchestrateConfig {
    /// The pool (its nodes must have been started with this orchestrator's endpoint id).
    pub pool: Pool,
    /// The orchestrator's key.
    pub key: OrchestratorKey,
    /// iroh listen address.
    pub listen: SocketAddr,
    /// SWIM listen address.
    pub swim: SocketAddr,
    /// The longest round trip between members SWIM's timings allow for (zero: a LAN).
    pub swim_rtt: Duration,
    /// The address nodes reach the orchestrator at when it listens on an unspecified one
    /// (`None`: the route toward the pool's nodes).
    pub advertise: Option<std::net::IpAddr>,
    /// The relays it may use and is reached through (none by default).
    pub relays: crate::net::relay::Relays,
    /// The orchestrator's copy of the model (tokenizer and facts come from it).
    pub model: PathBuf,
    /// Where stages get the weights.
    pub source: WeightSource,
    /// The session's requests (a run of one prompt is a session of one request).
    pub requests: Vec<Request>,
    /// How the session's scheduler is sized beyond the plan.
    pub session: SessionLimits,
    /// Stage count (`None`: one per node).
    pub stages: Option<u32>,
    /// Placement.
    pub placement: Placement,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// No `--max-seq-len` was given: each plan fits the context to its nodes' memory
    /// (`runtime.max_seq_len`, the model's trained length, at most).
    pub fit_context: bool,
    /// Each stage node's prompt-cache budget (`None`: the planner's default).
    pub prompt_cache_bytes: Option<u64>,
    /// `--min-speedup`: refuse a plan predicted slower than this times the best single node.
    pub min_speedup: Option<f64>,
    /// The run's id.
    pub run_id: RunId,
    /// Convergence window of the pool gate.
    pub window: Duration,
    /// How long to wait for the pool.
    pub pool_timeout: Duration,
    /// The run's timeouts.
    pub timeouts: RunTimeouts,
    /// What the session does when a stage node is lost.
    pub resume: ResumePolicy,
    /// Where the session's drafts come from when it speculates (`session.draft_max`):
    /// a draft model this process loads and runs off the reactor; `None`: the n-gram
    /// lookup.
    pub draft_model: Option<DraftModelConfig>,
}

/// Requests that join a session while it runs.
#[derive(Debug)]
pub enum Arriving {
    /// A batch job's: every request's id is known at the start (a request's index is its
    /// position in `ids`); each request comes once it is ready, `(index, request)`, in any
    /// order. The channel closing says no more will come; a request that never arrived ends
    /// with the session's reason.
    Batch {
        /// Every request's id, in request order.
        ids: Vec<String>,
        /// Each request once it is ready.
        requests: tokio::sync::mpsc::UnboundedReceiver<(usize, Request)>,
    },
    /// A server's: open-ended, each request with its own reply channel (see [`served`]).
    Served(served::Served),
}

/// Where the run's output goes.
pub trait RunSink {
    /// One event line of the ordered stream.
    fn event(&mut self, line: &EventLine);
    /// A generated token of request `request` (its index in the config) and its text
    /// (possibly empty while a character is incomplete).
    fn token(&mut self, request: usize, id: u32, text: &str);
    /// The text of request `request` released when it ended (what was held back as a
    /// possible stop string, and the detokenizer's tail): its tokens' texts and this,
    /// concatenated, are its result's text.
    fn text(&mut self, request: usize, text: &str) {
        let _ = (request, text);
    }
    /// What became of request `request`: its result or error (once per request).
    fn result(&mut self, request: usize, result: &RequestResult) {
        let _ = (request, result);
    }
    /// A progress message while the pool converges and weights load.
    fn progress(&mut self, message: &str);
    /// Sequences holding a slot and requests waiting for one, when either changes.
    fn load(&mut self, running: usize, waiting: usize) {
        let _ = (running, waiting);
    }
    /// Speculation's counters over the run so far (when the load changes).
    fn speculated(&mut self, counters: crate::orchestrator::scheduler::SpecCounters) {
        let _ = counters;
    }
    /// The prefix cache's counters over the run so far (when they or the load change).
    fn prefix(&mut self, counters: crate::orchestrator::scheduler::PrefixCounters) {
        let _ = counters;
    }
    /// The plan the session runs (once planned).
    fn planned(&mut self, plan: &RunPlan) {
        let _ = plan;
    }
}

/// Why no run could be started.
#[derive(Debug, thiserror::Error)]
pub enum OrchestrateError {
    /// Bad configuration or local resources (key, bind, pool file).
    #[error("{0}")]
    Setup(String),
    /// The pool did not become ready in time.
    #[error("the pool did not become ready within {0:?}: {1}")]
    PoolTimeout(Duration, String),
    /// Every node of the pool refused the control session (a key no node accepts): no
    /// waiting makes the pool ready.
    #[error("every node refused the control session: {0}")]
    PoolRefused(String),
    /// The plan was rejected.
    #[error("{0}")]
    Plan(crate::planner::PlanError),
    /// The operator stopped before the run started.
    #[error("stopped by the operator before the run started")]
    Stopped,
    /// The draft model could not load (its file, or another vocabulary than the
    /// model's).
    #[error("{0}")]
    DraftModel(String),
    /// Sessions kept faulting before they served, with a fault a new session would meet
    /// again (weights whose bytes are wrong): the server stopped forming them.
    #[error("{sessions} sessions in a row faulted with {reason} before serving; given up")]
    GaveUp {
        /// The fault they met.
        reason: FaultReason,
        /// How many.
        sessions: u32,
    },
}

fn now_us(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

/// Runs one prompt through the pool: waits for the pool, plans, provisions, streams the
/// tokens to `sink`, tears down. Returns the run's report (whatever its outcome) or why no
/// run could start. `stop` resolves on Ctrl-C / SIGTERM. `arriving`: requests that join
/// the session as they become ready (a batch job's), after `config.requests`. The
/// session's draft model (`config.draft_model`) is loaded first.
pub async fn orchestrate(
    config: OrchestrateConfig,
    arriving: Option<Arriving>,
    facts: &ModelFacts,
    tokenizer: &Tokenizer,
    sink: &mut dyn RunSink,
    stop: impl std::future::Future<Output = OperatorStop>,
) -> Result<RunReport, OrchestrateError> {
    let drafter = load_drafter(&config, facts).await?;
    orchestrate_drafting(config, drafter.as_ref(), arriving, facts, tokenizer, sink, stop).await
}

/// The draft model `config` names, loaded for the model `facts` describe (`None`:
/// none named).
pub async fn load_drafter(
    config: &OrchestrateConfig,
    facts: &ModelFacts,
) -> Result<Option<Drafter>, OrchestrateError> {
    let Some(d) = &config.draft_model else { return Ok(None) };
    let max_seq_len = config.runtime.max_seq_len;
    Drafter::load(d, facts, max_seq_len).await.map(Some).map_err(OrchestrateError::DraftModel)
}

/// As [`orchestrate`], drafting with `drafter` (a server's, loaded once for all its
/// sessions) rather than loading `config.draft_model`.
pub async fn orchestrate_drafting(
    config: OrchestrateConfig,
    drafter: Option<&Drafter>,
    arriving: Option<Arriving>,
    facts: &ModelFacts,
    tokenizer: &Tokenizer,
    sink: &mut dyn RunSink,
    stop: impl std::future::Future<Output = OperatorStop>,
) -> Result<RunReport, OrchestrateError> {
    let t0 = Instant::now();
    let key = match &config.key {
        OrchestratorKey::File(path) => {
            NodeKey::load_or_create(path).map_err(|e| OrchestrateError::Setup(e.to_string()))?
        }
        OrchestratorKey::Memory(key) => key.clone(),
    };
    let endpoint = bind(&key, config.listen, &config.relays)
        .await
        .map_err(|e| OrchestrateError::Setup(e.to_string()))?;
    if let Err(e) =
        crate::net::endpoint::wait_for_relay(&endpoint, &config.relays, config.pool_timeout).await
    {
        endpoint.close().await;
        return Err(OrchestrateError::Setup(e.to_string()));
    }
    let parts = (&key, &endpoint, drafter);
    let result = run_on(&config, arriving, facts, tokenizer, sink, stop, parts, t0).await;
    match &result {
        // No run started: nothing waits for this endpoint's last words, and a handshake
        // toward a node that never answered would hold the close for seconds past
        // `--pool-timeout`.
        Err(OrchestrateError::PoolTimeout(..) | OrchestrateError::PoolRefused(_)) => {
            let _ = tokio::time::timeout(UNREADY_CLOSE, endpoint.close()).await;
        }
        _ => endpoint.close().await,
    }
    result
}

/// The pool as this orchestrator plans it: its own endpoint id, relay and addresses (the
/// last stage connects back here: never an address other hosts cannot reach).
fn own_pool(
    config: &OrchestrateConfig,
    key: &NodeKey,
    endpoint: &Endpoint,
) -> Result<Pool, OrchestrateError> {
    let mut pool = config.pool.clone();
    pool.orchestrator.endpoint_id = Some(key.endpoint_id_hex());
    pool.orchestrator.relay = config.relays.home().map(ToString::to_string);
    let toward: Vec<SocketAddr> = pool.nodes.iter().flat_map(|n| n.addrs.clone()).collect();
    pool.orchestrator.addrs = endpoint
        .bound_sockets()
        .into_iter()
        .map(|b| crate::net::advertise::advertised(b, config.advertise, &toward))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| OrchestrateError::Setup(e.to_string()))?;
    Ok(pool)
}

/// How long an orchestrator whose pool never became ready waits for its endpoint to close.
const UNREADY_CLOSE: Duration = Duration::from_millis(200);

#[allow(clippy::too_many_arguments)]
async fn run_on(
    config: &OrchestrateConfig,
    arriving: Option<Arriving>,
    facts: &ModelFacts,
    tokenizer: &Tokenizer,
    sink: &mut dyn RunSink,
    stop: impl std::future::Future<Output = OperatorStop>,
    (key, endpoint, drafter): (&NodeKey, &Endpoint, Option<&Drafter>),
    t0: Instant,
) -> Result<RunReport, OrchestrateError> {
    let me = config.pool.orchestrator.node_id;
    let relayed = config.relays.home().filter(|_| config.relays.only()).map(ToString::to_string);
    let role = Role::Orchestrator {
        swim: (config.swim, config.advertise),
        seed_rng: me.0 ^ 0x5eed,
        relayed,
        max_rtt: config.swim_rtt,
    };
    let mut phase = PoolPhase::start(endpoint, key, &config.pool, role, config.window)
        .await
        .map_err(OrchestrateError::Setup)?;
    tokio::pin!(stop);
    // Phase 1: the pool (and what each node reports it can give a stage), and the round
    // trips of its links.
    let mut reports = HashMap::new();
    let pool = own_pool(config, key, endpoint)?;
    // Accepting from now: the nodes' link probes come here before the token edges do.
    let routed = crate::net::edge::EdgeRouter::new();
    // Relayed members' SWIM datagrams come to the pool phase's carrier.
    let carrier = phase.swim_carrier();
    let other = move |conn: iroh::endpoint::Connection| {
        let carrier = carrier.clone();
        async move {
            match carrier.filter(|_| conn.alpn() == crate::net::endpoint::SWIM_ALPN) {
                Some(carrier) => carrier.accept(conn).await,
                None => crate::net::edge::EdgeRouter::refuse_other(conn).await,
            }
        }
    };
    tokio::spawn(routed.0.clone().accept_loop(endpoint.clone(), other));
    let (ready_nodes, pool_ready_after) = loop {
        let ready = wait_for_pool(config, &mut phase, sink, &mut stop, t0, &mut reports).await?;
        let at = t0.elapsed();
        let (r, s) = (&mut reports, &mut *sink);
        if links::measure(&mut phase, &pool, &ready, r, s, &mut stop, t0).await? {
            break (ready, at);
        }
    };
    emit(sink, t0, Event::PoolReady { nodes: ready_nodes });
    phase.gate().provisioning_started();

    // Phase 2: the plan, with this orchestrator's identity and, where the pool file leaves
    // them out, the memory and arena each node reported; its device is what it computes on.
    // One prompt is checked by the planner; a session refuses each request itself.
    let prompt_tokens = match &config.requests[..] {
        [one] if arriving.is_none() => (one.prompt.len() as u32).min(config.runtime.max_seq_len),
        _ => 0,
    };
    let ask = Ask { run_id: config.run_id, stages: config.stages, prompt_tokens };
    let plan = plan_run(config, facts, &pool, &reports, ask).await?;
    // Verifying a draft needs the CPU engine on every stage: elsewhere the session runs
    // without speculation (its output is the same).
    let plain;
    let (config, drafter) = match off_cpu(&plan, &reports) {
        Some(device) if config.session.draft_max > 0 => {
            sink.progress(&format!("speculation is off: a stage computes on {device}"));
            plain = OrchestrateConfig {
                session: SessionLimits { draft_max: 0, ..config.session },
                draft_model: None,
                ..config.clone()
            };
            (&plain, None)
        }
        _ => (config, drafter),
    };
    sink.planned(&plan);
    if let Some(speed) = &plan.speed {
        sink.progress(&format!(
            "predicted: decode {:.1} tokens/s, first token {:.0} ms; {}",
            speed.pipeline.decode_tok_s,
            speed.pipeline.ttft_ms,
            speed.verdict_words()
        ));
    }
    sink.progress(&format!("provisioning {} stages", plan.stages.len()));

    // Phase 3: the run, re-formed over the nodes left as long as nodes are lost and the
    // policy survives it.
    let mut run =
        run_loop::RunLoop::start(plan, config, drafter, arriving, endpoint, routed, tokenizer, t0)?;
    run.run(&mut phase, &mut reports, sink, &mut stop).await;
    while run.session().reformation().is_some() {
        let mut ctx = reform::Context { config, facts, pool: &pool, reports: &mut reports, t0 };
        match reform::replan(&mut run, &mut ctx, &mut phase, sink, &mut stop).await {
            Ok(plan) => {
                sink.planned(&plan);
                phase.gate().provisioning_started();
                if let Err(e) = run.reform(plan, endpoint) {
                    sink.progress(&format!("the session could not re-form: {e}"));
                    run.abandon(ReformEnd::Setup, &mut phase, sink);
                    break;
                }
                run.run(&mut phase, &mut reports, sink, &mut stop).await;
            }
            Err(why) => run.abandon(why, &mut phase, sink),
        }
    }
    Ok(run.report(pool_ready_after))
}

/// What one plan asks beyond the configuration.
#[derive(Debug, Clone, Copy)]
struct Ask {
    run_id: RunId,
    stages: Option<u32>,
    prompt_tokens: u32,
}

/// Plans a run over `pool` (the orchestrator's identity filled in) with what each node
/// reported where the pool file leaves it out, and attaches a URL source's stage ranges
/// (hashed on a blocking thread, and only once per extent: `stage::ranges`).
async fn plan_run(
    config: &OrchestrateConfig,
    facts: &ModelFacts,
    pool: &Pool,
    reports: &HashMap<crate::wire::NodeId, NodeReport>,
    ask: Ask,
) -> Result<RunPlan, OrchestrateError> {
    let mut pool = pool.clone();
    for node in &mut pool.nodes {
        if let Some(report) = reports.get(&node.node_id) {
            if node.memory_bytes == 0 {
                node.memory_bytes = report.memory_bytes.unwrap_or(0);
            }
            node.arena_bytes = node.arena_bytes.or(report.arena_bytes);
            node.prompt_cache_bytes = node.prompt_cache_bytes.or(report.prompt_cache_bytes);
            // What the node measured now, and the round trip measured now, beat the file's.
            node.speed = report.speed.clone().or(node.speed.take());
            node.rtt_us = report.rtt_us.or(node.rtt_us);
            if !report.links.is_empty() {
                node.links = report.links.clone();
            }
            node.device = reported_device(node, report.device.as_deref())?;
        }
    }
    let request = PlanRequest {
        run_id: ask.run_id,
        model: facts,
        source: config.source.clone(),
        pool: &pool,
        stages: ask.stages,
        placement: config.placement.clone(),
        runtime: config.runtime,
        prompt_tokens: ask.prompt_tokens,
        fit_context: config.fit_context,
        prompt_cache_bytes: config.prompt_cache_bytes,
        min_speedup: config.min_speedup,
    };
    let plan = plan(&request).map_err(OrchestrateError::Plan)?;
    // A URL source: each node downloads only its stage's ranges, checked by their digests.
    crate::stage::ranges::attach_stage_ranges_async(plan, &config.model)
        .await
        .map_err(|e| OrchestrateError::Setup(e.to_string()))
}

/// The device of a planned stage's node that is not the CPU, if any.
fn off_cpu(plan: &RunPlan, reports: &HashMap<crate::wire::NodeId, NodeReport>) -> Option<String> {
    plan.stages
        .iter()
        .filter_map(|s| reports.get(&s.node_id).and_then(|r| r.device.clone()))
        .find(|d| d != "cpu")
}

/// What a node reported of itself in `node_available`.
#[derive(Debug, Clone, Default)]
struct NodeReport {
    memory_bytes: Option<u64>,
    arena_bytes: Option<u64>,
    device: Option<String>,
    prompt_cache_bytes: Option<u64>,
    speed: Option<crate::wire::NodeSpeed>,
    rtt_us: Option<u64>,
    /// Round trips it measured to the others (`MeasureLinks`).
    links: Vec<crate::wire::LinkRtt>,
}

/// The device a node computes on: what it reported, which the pool file's label (a fact to
/// check, not a free label) must match.
fn reported_device(
    node: &crate::planner::PoolNode,
    reported: Option<&str>,
) -> Result<Option<String>, OrchestrateError> {
    match (node.device.as_deref(), reported) {
        (Some(file), Some(reported)) if file != reported => {
            Err(OrchestrateError::Plan(crate::planner::PlanError::new(
                crate::wire::reason::PlanRejection::DeviceMismatch,
                format!(
                    "the pool file says node {} computes on {file}, but it was booted with \
                     --device {reported}: fix the pool file's device (or leave it out)",
                    node.node_id
                ),
            )))
        }
        (file, reported) => Ok(reported.or(file).map(str::to_string)),
    }
}

/// Feeds the pool phase until the gate says the pool is ready (its nodes), every node
/// refused the control session, the deadline passes or the operator stops.
async fn wait_for_pool(
    config: &OrchestrateConfig,
    phase: &mut PoolPhase,
    sink: &mut dyn RunSink,
    stop: &mut (impl std::future::Future<Output = OperatorStop> + Unpin),
    t0: Instant,
    reports: &mut HashMap<crate::wire::NodeId, NodeReport>,
) -> Result<Vec<crate::wire::NodeId>, OrchestrateError> {
    let pool_deadline = t0 + config.pool_timeout;
    sink.progress(&format!("waiting for {} nodes", config.pool.nodes.len()));
    loop {
        let notices = tokio::select! {
            _ = &mut *stop => return Err(OrchestrateError::Stopped),
            () = tokio::time::sleep_until(pool_deadline.into()) => {
                return Err(OrchestrateError::PoolTimeout(config.pool_timeout, phase.missing()));
            }
            notices = phase.next() => notices,
        };
        for notice in notices {
            let Some(notice) = node_notice(notice, reports, sink, t0) else { continue };
            match notice {
                PoolNotice::NodeRefused { node_id, reason } => {
                    sink.progress(&format!("node {node_id} refused the control session: {reason}"));
                }
                PoolNotice::Gate(GateEvent::PoolReady { nodes }) => return Ok(nodes),
                PoolNotice::Gate(GateEvent::ReadinessLost { node }) => {
                    sink.progress(&format!("node {node} left; waiting for the pool again"));
                }
                _ => {}
            }
        }
        if phase.all_refused() {
            return Err(OrchestrateError::PoolRefused(phase.missing()));
        }
    }
}

/// Carries what a node says of itself while no run holds the pool (waiting for it, or
/// re-forming): its report is kept, its availability, fault or a refused datagram written;
/// any other notice is handed back.
fn node_notice(
    notice: PoolNotice,
    reports: &mut HashMap<crate::wire::NodeId, NodeReport>,
    sink: &mut dyn RunSink,
    t0: Instant,
) -> Option<PoolNotice> {
    let notice = match record_report(notice, reports) {
        Ok((node_id, endpoint_id, addrs)) => {
            emit(sink, t0, Event::NodeAvailable { node_id, endpoint_id, addrs });
            sink.progress(&format!("node {node_id} available"));
            return None;
        }
        Err(notice) => notice,
    };
    match notice {
        PoolNotice::Rejected(r, count) => emit(sink, t0, rejected_event(r, count)),
        PoolNotice::NodeFaulted { node_id, reason } => {
            let component = Component::WorkerCtl;
            emit(sink, t0, Event::NodeFaulted { node_id, reason, component });
        }
        other => return Some(other),
    }
    None
}

/// Keeps what a node reported of itself for the next plan, writing nothing; any other
/// notice is handed back (a node's fault or a refused datagram is dropped).
fn keep_report(
    notice: PoolNotice,
    reports: &mut HashMap<crate::wire::NodeId, NodeReport>,
) -> Option<PoolNotice> {
    match record_report(notice, reports) {
        Ok(_) => None,
        Err(PoolNotice::Rejected(..) | PoolNotice::NodeFaulted { .. }) => None,
        Err(other) => Some(other),
    }
}

/// Keeps what a `NodeAvailable` notice reports in `reports` (replacing the node's earlier
/// report) and gives back its node id, endpoint id and addresses; any other notice is
/// handed back (moved back as it came: a notice is as large either way).
#[allow(clippy::result_large_err)]
fn record_report(
    notice: PoolNotice,
    reports: &mut HashMap<crate::wire::NodeId, NodeReport>,
) -> Result<(crate::wire::NodeId, String, Vec<String>), PoolNotice> {
    match notice {
        PoolNotice::NodeAvailable {
            node_id,
            endpoint_id,
            addrs,
            memory_bytes,
            arena_bytes,
            device,
            prompt_cache_bytes,
            speed,
            rtt_us,
            ..
        } => {
            let report = NodeReport {
                memory_bytes,
                arena_bytes,
                device,
                prompt_cache_bytes,
                speed,
                rtt_us,
                links: Vec::new(),
            };
            reports.insert(node_id, report);
            Ok((node_id, endpoint_id, addrs))
        }
        other => Err(other),
    }
}

/// Writes one of the orchestrator's own events, stamped now.
fn emit(sink: &mut dyn RunSink, t0: Instant, event: Event) {
    let origin_us = Some(crate::clock::monotonic_us());
    sink.event(&EventLine { ts_us: now_us(t0), origin_us, event });
}

/// The event for a refused SWIM datagram.
fn rejected_event(r: RejectRecord, count: u64) -> Event {
    Event::MembershipRejected {
        reason: r.reason.as_str().into(),
        from: r.from,
        signer: r.signer,
        count,
    }
}

/// The next arriving request (pending forever once none will come).
pub(super) async fn next_arrival(
    rx: &mut Option<tokio::sync::mpsc::UnboundedReceiver<(usize, Request)>>,
) -> Option<(usize, Request)> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
