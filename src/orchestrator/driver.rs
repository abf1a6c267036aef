//! The orchestrator's driver: pool readiness, planning, and one run from provisioning to
//! teardown. It owns the IO (control sessions, SWIM, the token endpoints' rings and pumps,
//! signals, the clock) and feeds the [`PoolGate`] and the [`RunFsm`], executing what they
//! ask. Node events arrive over the control sessions and are written, with the
//! orchestrator's own, as one ordered stream to the [`RunSink`].
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iroh::{Endpoint, EndpointId};
use tokio::sync::mpsc;

use super::run::{RunCommand, RunFsm, RunTimeouts};
use super::sessions::{self, SessionEvent};
use super::tokens::{TokenIn, TokenOut, TokenOutEvent};
use crate::arena::memfd::ArenaRegion;
use crate::arena::{Arena, ArenaEvent, ArenaManager, WorkerQuiet};
use crate::control::ControlMessage;
use crate::edge::{EdgeEnd, EdgeEstablisher, EdgeProvision, EstablisherCommand, EstablisherEvent};
use crate::events::{Direction, Event, EventLine, RunOutcome};
use crate::membership::pool_gate::{DataPlaneIdentity, GateEvent, PoolGate};
use crate::membership::swim::{self, MembershipEvent, SwimIdentity};
use crate::model::ModelFacts;
use crate::model::tokenizer::{Detokenizer, Tokenizer};
use crate::net::edge::{EdgeRouter, PumpEnd, PumpHandle, spawn_recv, spawn_send};
use crate::net::endpoint::{EDGE_ALPN, bind};
use crate::net::identity::NodeKey;
use crate::planner::{Placement, PlanRequest, Pool, plan};
use crate::ring::{MappedRing, Wake};
use crate::wire::reason::{
    Component, ControlFault, FaultReason, MembershipLoss, OperatorStop, StreamFault, Timeout,
};
use crate::wire::{
    EdgeId, NodeId, Peer, RingId, RunId, RunPlan, RuntimeConfig, StageIndex, WeightSource,
};
use crate::worker::protocol::Event as WorkerEvent;

type Ring = Arc<MappedRing<ArenaRegion>>;

/// The orchestrator's identity.
#[derive(Debug, Clone)]
pub enum OrchestratorKey {
    /// A key file (created 0600 on first use).
    File(PathBuf),
    /// A key held only in memory (`run local`'s orchestrator: nothing to leave behind).
    Memory(NodeKey),
}

/// Everything one orchestrated run needs.
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
    /// The orchestrator's copy of the model (tokenizer and facts come from it).
    pub model: PathBuf,
    /// Where stages get the weights.
    pub source: WeightSource,
    /// Prompt token ids.
    pub prompt: Vec<u32>,
    /// Stage count (`None`: one per node).
    pub stages: Option<u32>,
    /// Placement.
    pub placement: Placement,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// The run's id.
    pub run_id: RunId,
    /// Convergence window of the pool gate.
    pub window: Duration,
    /// How long to wait for the pool.
    pub pool_timeout: Duration,
    /// The run's timeouts.
    pub timeouts: RunTimeouts,
}

/// Where the run's output goes.
pub trait RunSink {
    /// One event line of the ordered stream.
    fn event(&mut self, line: &EventLine);
    /// A generated token and its text (possibly empty while a character is incomplete).
    fn token(&mut self, id: u32, text: &str);
    /// A progress message while the pool converges and weights load.
    fn progress(&mut self, message: &str);
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The one terminal outcome.
    pub outcome: RunOutcome,
    /// Why a completed run completed.
    pub stop: Option<crate::events::CompletionCause>,
    /// The first fault, for a faulted run.
    pub fault: Option<(FaultReason, Component)>,
    /// Generated token ids (EOS excluded).
    pub tokens: Vec<u32>,
    /// Text left in the detokenizer at the end.
    pub tail: String,
    /// The plan that ran.
    pub plan: RunPlan,
    /// From start to the pool being ready.
    pub pool_ready_after: Duration,
    /// From start to the first token.
    pub first_token_after: Option<Duration>,
    /// From the first token to the last.
    pub decode_time: Duration,
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
    /// The plan was rejected.
    #[error("{0}")]
    Plan(crate::planner::PlanError),
    /// The operator stopped before the run started.
    #[error("stopped by the operator before the run started")]
    Stopped,
}

enum Input {
    Session(NodeId, SessionEvent),
    Member(MembershipEvent),
    PumpReady(EdgeId),
    PumpEnded(EdgeId, PumpEnd),
    TokenInWritable,
    TokenOutReadable,
}

/// The token endpoints: the orchestrator's own arena, rings and pumps.
struct Endpoints {
    arena: Arc<Arena>,
    manager: ArenaManager,
    establisher: EdgeEstablisher,
    token_in: Option<(RingId, TokenIn<Ring>)>,
    token_out: Option<(RingId, TokenOut<Ring>)>,
    rings: HashMap<RingId, (EdgeId, Ring)>,
    pumps: HashMap<EdgeId, PumpHandle>,
    ready: usize,
    failed: Vec<(EdgeId, FaultReason)>,
    parked: HashMap<EdgeId, crate::arena::PumpStopped>,
}

fn now_us(t0: Instant) -> u64 {
    t0.elapsed().as_micros() as u64
}

/// Runs one prompt through the pool: waits for the pool, plans, provisions, streams the
/// tokens to `sink`, tears down. Returns the run's report (whatever its outcome) or why no
/// run could start. `stop` resolves on Ctrl-C / SIGTERM.
pub async fn orchestrate(
    config: OrchestrateConfig,
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
    let endpoint =
        bind(&key, config.listen).await.map_err(|e| OrchestrateError::Setup(e.to_string()))?;
    let result = run_on(&config, facts, tokenizer, sink, stop, &key, &endpoint, t0).await;
    endpoint.close().await;
    result
}

#[allow(clippy::too_many_arguments)]
async fn run_on(
    config: &OrchestrateConfig,
    facts: &ModelFacts,
    tokenizer: &Tokenizer,
    sink: &mut dyn RunSink,
    stop: impl std::future::Future<Output = OperatorStop>,
    key: &NodeKey,
    endpoint: &Endpoint,
    t0: Instant,
) -> Result<RunReport, OrchestrateError> {
    let me = config.pool.orchestrator.node_id;
    let (router, mut refusals) = EdgeRouter::new();
    tokio::spawn(router.clone().accept_loop(endpoint.clone()));
    let (inputs, mut rx) = mpsc::unbounded_channel::<Input>();
    let members = swim::pool_members(&config.pool, &key.endpoint_id_hex());
    let roster = swim::RosterHandle::new(swim::roster_of(&members));
    let mut session_rx = sessions::open_all(endpoint, &config.pool.nodes, me, &members)
        .map_err(OrchestrateError::Setup)?;
    {
        let inputs = inputs.clone();
        tokio::spawn(async move {
            while let Some((node, ev)) = session_rx.recv().await {
                if inputs.send(Input::Session(node, ev)).is_err() {
                    return;
                }
            }
        });
    }
    let socket = tokio::net::UdpSocket::bind(config.swim)
        .await
        .map_err(|e| OrchestrateError::Setup(format!("SWIM bind {}: {e}", config.swim)))?;
    let swim_addr =
        socket.local_addr().map_err(|e| OrchestrateError::Setup(format!("SWIM: {e}")))?;
    let mut socket = Some(socket);
    let mut _swim: Option<swim::Swim> = None;

    let candidates: Vec<NodeId> = config.pool.nodes.iter().map(|n| n.node_id).collect();
    let mut gate = PoolGate::new(Instant::now(), candidates, config.window);
    let mut out: HashMap<NodeId, mpsc::UnboundedSender<ControlMessage>> = HashMap::new();
    let mut refused: HashMap<NodeId, String> = HashMap::new();
    let mut emit = |sink: &mut dyn RunSink, event: Event| {
        let origin_us = Some(crate::events::monotonic_us());
        sink.event(&EventLine { ts_us: now_us(t0), origin_us, event });
    };
    // A node's event keeps the moment it happened on its host.
    let forward = |sink: &mut dyn RunSink, line: EventLine| {
        sink.event(&EventLine { ts_us: now_us(t0), ..line });
    };
    tokio::pin!(stop);
    let pool_deadline = t0 + config.pool_timeout;
    sink.progress(&format!("waiting for {} nodes", config.pool.nodes.len()));

    // Phase 1: the pool.
    let ready_nodes = loop {
        let mut ready = None;
        while let Some(ev) = gate.poll_event() {
            match ev {
                GateEvent::PoolReady { nodes } => ready = Some(nodes),
                GateEvent::ReadinessLost { node } => {
                    sink.progress(&format!("node {node} left; waiting for the pool again"));
                }
                GateEvent::RequiredNodeLost { .. } => {}
            }
        }
        if let Some(nodes) = ready {
            break nodes;
        }
        let deadline = gate.poll_timeout().map_or(pool_deadline, |d| d.min(pool_deadline));
        tokio::select! {
            _ = &mut stop => return Err(OrchestrateError::Stopped),
            _ = tokio::time::sleep_until(deadline.into()) => {
                let now = Instant::now();
                gate.handle_timeout(now);
                if now >= pool_deadline {
                    let waiting: Vec<String> = config.pool.nodes.iter()
                        .filter(|n| !out.contains_key(&n.node_id))
                        .map(|n| match refused.get(&n.node_id) {
                            Some(r) => format!("node {} refused the control session ({r})", n.node_id),
                            None => format!("node {} did not answer", n.node_id),
                        })
                        .collect();
                    let detail = if waiting.is_empty() { "membership did not converge".to_string() } else { waiting.join("; ") };
                    return Err(OrchestrateError::PoolTimeout(config.pool_timeout, detail));
                }
            }
            Some(input) = rx.recv() => match input {
                Input::Session(node, SessionEvent::Available {
                    hello: ControlMessage::NodeAvailable { node_id, endpoint_id, addrs, swim_addr: seed },
                    tx,
                }) => {
                    {
                        if node_id != node {
                            eprintln!("swactor: the node at node {node}'s address says it is node {node_id}; ignored");
                            continue;
                        }
                        out.insert(node, tx);
                        emit(sink, Event::NodeAvailable { node_id, endpoint_id: endpoint_id.clone(), addrs: addrs.clone() });
                        sink.progress(&format!("node {node_id} available"));
                        gate.node_available(Instant::now(), node, DataPlaneIdentity { endpoint_id, addrs });
                        if let (Some(seed), Some(sock)) = (seed.and_then(|s| s.parse::<SocketAddr>().ok()), socket.take()) {
                            let identity = SwimIdentity { node_id: me, addr: swim_addr, endpoint_id: key.endpoint_id_hex(), bump: 0 };
                            let n = config.pool.nodes.len() as u32 + 1;
                            let swim_config = swim::SwimConfig {
                                identity,
                                key: key.secret().clone(),
                                roster: roster.clone(),
                                seeds: vec![seed],
                                cluster_size: n,
                                seed_rng: me.0 ^ 0x5eed,
                            };
                            let (s, mut members) = swim::spawn(swim_config, sock);
                            _swim = Some(s);
                            let inputs = inputs.clone();
                            tokio::spawn(async move {
                                while let Some(m) = members.recv().await {
                                    if inputs.send(Input::Member(m)).is_err() { return; }
                                }
                            });
                        }
                    }
                }
                Input::Session(node, SessionEvent::Refused(reason)) if !refused.contains_key(&node) => {
                    sink.progress(&format!("node {node} refused the control session: {reason}"));
                    refused.insert(node, reason);
                }
                Input::Session(node, SessionEvent::Closed) => {
                    out.remove(&node);
                    gate.member_down(Instant::now(), node);
                }
                Input::Session(node, SessionEvent::Message(ControlMessage::NodeFaulted { node_id, reason })) if node_id == node => {
                    emit(sink, Event::NodeFaulted { node_id, reason, component: Component::WorkerCtl });
                    gate.node_faulted(Instant::now(), node, reason);
                }
                Input::Session(_, SessionEvent::Message(_)) => {}
                Input::Member(MembershipEvent::Up(id)) => gate.member_up(Instant::now(), id.node_id),
                Input::Member(MembershipEvent::Suspect(id)) => gate.member_suspect(Instant::now(), id.node_id),
                Input::Member(MembershipEvent::Down(id)) => gate.member_down(Instant::now(), id.node_id),
                Input::Member(MembershipEvent::Rejected(r)) => emit(sink, rejected_event(&roster, r)),
                _ => {}
            },
        }
    };
    let pool_ready_after = t0.elapsed();
    emit(sink, Event::PoolReady { nodes: ready_nodes });
    gate.provisioning_started();

    // Phase 2: the plan, with this orchestrator's identity.
    let mut pool = config.pool.clone();
    pool.orchestrator.endpoint_id = Some(key.endpoint_id_hex());
    pool.orchestrator.addrs = endpoint.bound_sockets();
    if pool.orchestrator.addrs.iter().any(|a| a.ip().is_unspecified())
        && pool.nodes.iter().flat_map(|n| &n.addrs).any(|a| !a.ip().is_loopback())
    {
        eprintln!(
            "swactor: warning: listening on {:?}: the last stage connects back to this \
             address; pass --listen with an address the nodes can reach",
            pool.orchestrator.addrs
        );
    }
    let request = PlanRequest {
        run_id: config.run_id,
        model: facts,
        source: config.source.clone(),
        pool: &pool,
        stages: config.stages,
        placement: config.placement.clone(),
        runtime: config.runtime,
        prompt_tokens: (config.prompt.len() as u32).min(config.runtime.max_seq_len),
    };
    let plan = plan(&request).map_err(OrchestrateError::Plan)?;
    sink.progress(&format!("provisioning {} stages", plan.stages.len()));

    // Phase 3: the run.
    let arena_bytes = plan.edges.first().map_or(0, |e| crate::planner::ring_arena_bytes(&e.ring))
        + plan.edges.last().map_or(0, |e| crate::planner::ring_arena_bytes(&e.ring))
        + 2 * crate::arena::manager::LEASE_PAGE;
    let arena = Arc::new(
        Arena::create(arena_bytes)
            .map_err(|e| OrchestrateError::Setup(format!("token endpoint arena: {e}")))?,
    );
    let mut manager = ArenaManager::new(arena_bytes);
    manager.arena_ready();
    let mut eps = Endpoints {
        arena,
        manager,
        establisher: EdgeEstablisher::new(),
        token_in: None,
        token_out: None,
        rings: HashMap::new(),
        pumps: HashMap::new(),
        ready: 0,
        failed: Vec::new(),
        parked: HashMap::new(),
    };
    let node_of: HashMap<StageIndex, NodeId> =
        plan.stages.iter().map(|s| (s.stage_index, s.node_id)).collect();
    let mut fsm = RunFsm::start(Instant::now(), &plan, config.prompt.clone(), config.timeouts);
    let mut detok = Detokenizer::new(tokenizer);
    let mut tokens = Vec::new();
    let mut first_token_at: Option<Instant> = None;
    let mut last_token_at = t0;
    let mut fault: Option<(FaultReason, Component)> = None;
    let mut torn_down = false;
    let mut loaded_weights = 0usize;
    let mut exit_deadline: Option<Instant> = None;
    let eos = plan.model.eos_token_id;
    loop {
        // Run the state machines to a fixed point.
        loop {
            let mut progressed = false;
            while let Some(ev) = fsm.poll_event() {
                progressed = true;
                if let Event::RunFaulted { reason, component, .. } = &ev {
                    fault = Some((*reason, *component));
                }
                if let Event::RunTornDown { .. } = ev {
                    torn_down = true;
                }
                emit(sink, ev);
            }
            while let Some(cmd) = fsm.poll_command() {
                progressed = true;
                match cmd {
                    RunCommand::Provision(stage) => {
                        let node = node_of.get(&stage).copied().unwrap_or_default();
                        let sent = plan.provision(stage).is_some_and(|p| {
                            out.get(&node).is_some_and(|tx| {
                                tx.send(ControlMessage::ProvisionStage { provision: Box::new(p) })
                                    .is_ok()
                            })
                        });
                        if !sent {
                            fsm.fault(
                                Instant::now(),
                                ControlFault::ConnectionLost.into(),
                                Component::ControlChannel,
                                Some(node),
                                Some(stage),
                                None,
                            );
                        }
                    }
                    RunCommand::StartTokenEndpoints => {
                        start_token_endpoints(&plan, &mut eps, sink, &mut emit, me);
                    }
                    RunCommand::Inject { object_id, sequence, tokens } => {
                        if let Some((_, tin)) = eps.token_in.as_mut() {
                            match tin.inject(object_id, sequence, &tokens) {
                                Ok(Wake::Send) => {
                                    if let Some(p) = eps.pumps.get(&plan.edges[0].edge_id) {
                                        p.hint.notify_one();
                                    }
                                }
                                Ok(_) => {}
                                Err(_) => fsm.fault(
                                    Instant::now(),
                                    crate::wire::reason::RingFault::CursorCorrupt.into(),
                                    Component::TokenEndpoint,
                                    None,
                                    None,
                                    Some(plan.edges[0].edge_id),
                                ),
                            }
                        }
                    }
                    RunCommand::StopRun(stage) => {
                        if let Some(tx) = node_of.get(&stage).and_then(|n| out.get(n)) {
                            let _ = tx.send(ControlMessage::StopRun { run_id: plan.run_id });
                        }
                    }
                    RunCommand::StopTokenEndpoints => {
                        for e in [plan.edges[0].edge_id, plan.edges[plan.edges.len() - 1].edge_id] {
                            eps.establisher.stop_edge(e);
                        }
                    }
                }
            }
            progressed |=
                drive_endpoints(&mut eps, &inputs, endpoint, &router, &plan, sink, &mut emit, me);
            for (edge, reason) in std::mem::take(&mut eps.failed) {
                fsm.fault(Instant::now(), reason, Component::TokenEndpoint, None, None, Some(edge));
                progressed = true;
            }
            if eps.ready == 2 {
                eps.ready = 3;
                fsm.token_endpoints_ready(Instant::now());
                progressed = true;
            }
            if fsm.awaits_token_endpoints() && eps.establisher.live_records() == 0 {
                fsm.token_endpoints_stopped();
                progressed = true;
            }
            if !progressed {
                break;
            }
        }
        if torn_down && eps.establisher.live_records() == 0 {
            break;
        }
        if torn_down && exit_deadline.is_none() {
            // Bounded wait for the token endpoints' pumps after the stages are down.
            exit_deadline = Some(Instant::now() + Duration::from_secs(2));
        }
        let deadline = fsm.poll_timeout().or(exit_deadline);
        tokio::select! {
            how = &mut stop, if fsm.outcome().is_none() => {
                fsm.operator_stop(Instant::now(), how);
            }
            _ = async { match deadline { Some(d) => tokio::time::sleep_until(d.into()).await, None => std::future::pending().await } } => {
                fsm.handle_timeout(Instant::now());
                if torn_down {
                    break;
                }
            }
            Some(refusal) = refusals.recv() => {
                eprintln!("swactor: refused an edge stream from {}: {}", refusal.peer, refusal.reason);
            }
            Some(input) = rx.recv() => {
                let now = Instant::now();
                match input {
                    Input::Session(node, SessionEvent::Message(msg)) => match msg {
                        ControlMessage::StageReady { run_id, stage_index } => {
                            if let Err(e) = fsm.stage_ready(now, run_id, stage_index, node) {
                                eprintln!("swactor: stage_ready from node {node} refused: {e}");
                            }
                        }
                        ControlMessage::StageFault { run_id, stage_index, reason, component } => {
                            if run_id == plan.run_id && node_of.get(&stage_index) == Some(&node) {
                                fsm.fault(now, reason, component, Some(node), Some(stage_index), None);
                            } else {
                                eprintln!("swactor: node {node}: {reason} for run {run_id} stage {stage_index} ({component})");
                            }
                        }
                        ControlMessage::StageStopped { run_id, stage_index } => {
                            if let Err(e) = fsm.stage_stopped(run_id, stage_index, node) {
                                eprintln!("swactor: stage_stopped from node {node} refused: {e}");
                            }
                        }
                        ControlMessage::Event { line } => {
                            if !torn_down {
                                if let Event::WeightsLoaded { .. } = line.event {
                                    loaded_weights += 1;
                                    sink.progress(&format!("weights loaded on {loaded_weights} of {} stages", plan.stages.len()));
                                }
                                forward(sink, line);
                            }
                        }
                        ControlMessage::NodeFaulted { node_id, reason } if node_id == node => {
                            if !torn_down {
                                emit(sink, Event::NodeFaulted { node_id, reason, component: Component::WorkerCtl });
                            }
                            gate.node_faulted(now, node, reason);
                            while let Some(ev) = gate.poll_event() {
                                if let GateEvent::RequiredNodeLost { node, reason } = ev
                                    && node_of.values().any(|n| *n == node)
                                {
                                    fsm.fault(now, reason.into(), Component::Membership, Some(node), None, None);
                                }
                            }
                        }
                        other => eprintln!("swactor: unexpected message from node {node}: {other:?}"),
                    },
                    Input::Session(node, SessionEvent::Closed) => {
                        out.remove(&node);
                        // No stage report will come from a node without a session: its stages are lost.
                        fsm.node_lost(now, node, ControlFault::ConnectionLost.into(), Component::ControlChannel);
                    }
                    Input::Session(..) => {}
                    Input::Member(MembershipEvent::Down(id)) => {
                        gate.member_down(now, id.node_id);
                        while let Some(ev) = gate.poll_event() {
                            if let GateEvent::RequiredNodeLost { node, reason } = ev
                                && node_of.values().any(|n| *n == node)
                            {
                                if reason == MembershipLoss::NodeDown {
                                    fsm.node_lost(now, node, reason.into(), Component::Membership);
                                } else {
                                    fsm.fault(now, reason.into(), Component::Membership, Some(node), None, None);
                                }
                            }
                        }
                    }
                    Input::Member(MembershipEvent::Up(id)) => gate.member_up(now, id.node_id),
                    // A suspect is not a loss; the `Down` that may follow it is.
                    Input::Member(MembershipEvent::Suspect(id)) => gate.member_suspect(now, id.node_id),
                    Input::Member(MembershipEvent::Rejected(r)) => emit(sink, rejected_event(&roster, r)),
                    Input::PumpReady(edge) => eps.establisher.driver_ready(edge),
                    Input::PumpEnded(edge, end) => {
                        eps.pumps.remove(&edge);
                        let evidence = match end {
                            PumpEnd::Stopped(ev, _) => ev,
                            PumpEnd::Faulted(reason, ev, _) => {
                                let component = if edge == plan.edges[0].edge_id { Component::TxEdge } else { Component::RxEdge };
                                fsm.fault(now, reason.into(), component, None, None, Some(edge));
                                eps.establisher.stream_fault(edge, reason);
                                ev
                            }
                        };
                        if eps.establisher.is_stopping(edge) {
                            eps.establisher.pump_stopped(edge, evidence);
                        } else {
                            eps.parked.insert(edge, evidence);
                        }
                    }
                    Input::TokenInWritable => {
                        if let Some((_, tin)) = eps.token_in.as_mut()
                            && let Ok(Wake::Send) = tin.on_writable()
                            && let Some(p) = eps.pumps.get(&plan.edges[0].edge_id)
                        {
                            p.hint.notify_one();
                        }
                    }
                    Input::TokenOutReadable => {
                        let events = match eps.token_out.as_mut() {
                            Some((_, tout)) => tout.poll(),
                            None => Vec::new(),
                        };
                        let out_edge = plan.edges[plan.edges.len() - 1].edge_id;
                        for ev in events {
                            match ev {
                                TokenOutEvent::Token { object_id, sequence, token } => {
                                    let before = fsm.outcome();
                                    fsm.token_received(now, object_id, sequence, token);
                                    if before.is_none() && (fsm.outcome().is_none() || fsm.outcome() == Some(RunOutcome::Completed)) && Some(token) != eos && token < plan.model.vocab_size {
                                        first_token_at.get_or_insert(now);
                                        last_token_at = now;
                                        tokens.push(token);
                                        let text = detok.push(token);
                                        sink.token(token, &text);
                                    }
                                }
                                TokenOutEvent::Fault(reason) => {
                                    fsm.fault(now, reason, Component::TokenEndpoint, None, None, Some(out_edge));
                                }
                                TokenOutEvent::Writable => {
                                    if let Some(p) = eps.pumps.get(&out_edge) {
                                        p.hint.notify_one();
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let outcome = fsm.outcome().unwrap_or(RunOutcome::Faulted);
    if outcome == RunOutcome::Faulted && fault.is_none() {
        fault = Some((Timeout::Teardown.into(), Component::Orchestrator));
    }
    Ok(RunReport {
        outcome,
        stop: fsm.cause(),
        fault,
        tokens,
        tail: detok.finish(),
        plan,
        pool_ready_after,
        first_token_after: first_token_at.map(|t| t - t0),
        decode_time: first_token_at.map(|t| last_token_at - t).unwrap_or_default(),
    })
}

fn start_token_endpoints(
    plan: &RunPlan,
    eps: &mut Endpoints,
    sink: &mut dyn RunSink,
    emit: &mut impl FnMut(&mut dyn RunSink, Event),
    me: NodeId,
) {
    let (tin, tout) = (&plan.edges[0], &plan.edges[plan.edges.len() - 1]);
    let first = plan.stages.first().and_then(|s| plan.peer(s.node_id)).cloned();
    let last = plan.stages.last().and_then(|s| plan.peer(s.node_id)).cloned();
    let (Some(first), Some(last)) = (first, last) else { return };
    for (edge, end) in
        [(tin, EdgeEnd::Send { consumer: first }), (tout, EdgeEnd::Recv { producer: last })]
    {
        let direction =
            if matches!(end, EdgeEnd::Send { .. }) { Direction::Send } else { Direction::Recv };
        emit(
            sink,
            Event::EdgeProvisionStarted {
                run_id: plan.run_id,
                node_id: me,
                edge_id: edge.edge_id,
                direction,
            },
        );
        let _ = eps.establisher.provision(EdgeProvision {
            edge_id: edge.edge_id,
            end,
            object: edge.object,
            ring: edge.ring,
        });
    }
}

/// Executes the token endpoints' establisher and arena commands; returns whether anything
/// happened.
#[allow(clippy::too_many_arguments)]
fn drive_endpoints(
    eps: &mut Endpoints,
    inputs: &mpsc::UnboundedSender<Input>,
    endpoint: &Endpoint,
    router: &EdgeRouter,
    plan: &RunPlan,
    sink: &mut dyn RunSink,
    emit: &mut impl FnMut(&mut dyn RunSink, Event),
    me: NodeId,
) -> bool {
    let mut progressed = false;
    loop {
        let mut any = false;
        while let Some(ev) = eps.manager.poll_event() {
            any = true;
            match ev {
                ArenaEvent::RingLeased { request_id, layout, .. } => {
                    eps.establisher.ring_leased(request_id, layout)
                }
                ArenaEvent::RingLeaseRejected { request_id, .. } => {
                    eps.establisher.lease_rejected(request_id)
                }
                _ => {}
            }
        }
        while let Some(cmd) = eps.establisher.poll_command() {
            any = true;
            match cmd {
                EstablisherCommand::LeaseRing(req) => eps.manager.lease(req),
                EstablisherCommand::CancelLease { request_id } => eps.manager.cancel(request_id),
                EstablisherCommand::InstallRing { edge_id, direction, layout, .. } => {
                    let ring = eps
                        .arena
                        .region(&layout)
                        .ok()
                        .and_then(|r| MappedRing::init(r, &layout).ok())
                        .map(Arc::new);
                    let Some(ring) = ring else {
                        eps.establisher.ring_fault(
                            layout.ring_id,
                            crate::wire::reason::RingFault::LayoutInvalid,
                        );
                        continue;
                    };
                    eps.rings.insert(layout.ring_id, (edge_id, Arc::clone(&ring)));
                    // The token endpoint is this ring's local user (the worker's place).
                    match direction {
                        Direction::Send => {
                            eps.token_in =
                                Some((layout.ring_id, TokenIn::new(layout.ring_id, ring)))
                        }
                        Direction::Recv => {
                            eps.token_out =
                                Some((layout.ring_id, TokenOut::new(layout.ring_id, edge_id, ring)))
                        }
                    }
                    eps.establisher.ring_installed(layout.ring_id);
                }
                EstablisherCommand::EstablishSend { edge_id, consumer, layout } => {
                    let Some((_, ring)) = eps.rings.get(&layout.ring_id) else { continue };
                    let drain = crate::ring::RingDrain::new(layout.ring_id, Arc::clone(ring));
                    let endpoint = endpoint.clone();
                    let (hints, ready, ended) = (inputs.clone(), inputs.clone(), inputs.clone());
                    let pump = spawn_send(
                        edge_id,
                        drain,
                        async move { connect(&endpoint, &consumer).await },
                        move || drop(hints.send(Input::TokenInWritable)),
                        move || drop(ready.send(Input::PumpReady(edge_id))),
                        move |end| drop(ended.send(Input::PumpEnded(edge_id, end))),
                    );
                    eps.pumps.insert(edge_id, pump);
                }
                EstablisherCommand::EstablishRecv { edge_id, producer, layout } => {
                    let Some((_, ring)) = eps.rings.get(&layout.ring_id) else { continue };
                    let feeder = crate::ring::RingFeeder::new(layout.ring_id, Arc::clone(ring));
                    let Some(peer) =
                        producer.endpoint_id.as_deref().and_then(|e| EndpointId::from_str(e).ok())
                    else {
                        eps.establisher.stream_fault(edge_id, StreamFault::UnauthorizedPeer);
                        continue;
                    };
                    router.expect(edge_id, peer);
                    let (hints, ended) = (inputs.clone(), inputs.clone());
                    let pump = spawn_recv(
                        router.stream_for(edge_id),
                        feeder,
                        move || drop(hints.send(Input::TokenOutReadable)),
                        move |end| drop(ended.send(Input::PumpEnded(edge_id, end))),
                    );
                    eps.pumps.insert(edge_id, pump);
                    eps.establisher.driver_ready(edge_id);
                }
                EstablisherCommand::StopPump { edge_id } => {
                    if let Some(p) = eps.pumps.get(&edge_id) {
                        p.stop.notify_one();
                    } else if let Some(evidence) = eps.parked.remove(&edge_id) {
                        eps.establisher.pump_stopped(edge_id, evidence);
                    }
                }
                EstablisherCommand::UninstallRing { ring_id } => {
                    // The token endpoint lets go of the ring: it is quiet from here on.
                    if eps.token_in.as_ref().is_some_and(|(r, _)| *r == ring_id) {
                        eps.token_in = None;
                    }
                    if eps.token_out.as_ref().is_some_and(|(r, _)| *r == ring_id) {
                        eps.token_out = None;
                    }
                    if let Some(q) =
                        WorkerQuiet::from_worker_event(&WorkerEvent::RingQuiesced { ring_id })
                    {
                        eps.establisher.worker_quiet(ring_id, q);
                    }
                }
                EstablisherCommand::ReleaseRing(proof) => {
                    if let Some((edge, _)) = eps.rings.remove(&proof.ring_id()) {
                        router.forget(edge);
                    }
                    let _ = eps.manager.release(proof);
                }
            }
        }
        while let Some(ev) = eps.establisher.poll_event() {
            any = true;
            match ev {
                EstablisherEvent::EdgeReady { edge_id, ring_id, direction } => {
                    eps.ready += 1;
                    emit(
                        sink,
                        Event::EdgeReady {
                            run_id: plan.run_id,
                            node_id: me,
                            edge_id,
                            ring_id,
                            direction,
                        },
                    );
                }
                EstablisherEvent::EdgeFailed { edge_id, reason } => {
                    eps.failed.push((edge_id, reason));
                }
                EstablisherEvent::EdgeStopped { .. } => {}
            }
        }
        if !any {
            return progressed;
        }
        progressed = true;
    }
}

async fn connect(
    endpoint: &Endpoint,
    peer: &Peer,
) -> Result<iroh::endpoint::Connection, StreamFault> {
    let addr = crate::net::endpoint::peer_addr(peer).ok_or(StreamFault::ConnectFailed)?;
    endpoint.connect(addr, EDGE_ALPN).await.map_err(|_| StreamFault::ConnectFailed)
}

/// The event for a refused SWIM datagram.
fn rejected_event(roster: &swim::RosterHandle, r: crate::membership::auth::RejectRecord) -> Event {
    let count = roster.rejects().by_reason.get(&r.reason).copied().unwrap_or(0);
    Event::MembershipRejected {
        reason: r.reason.as_str().into(),
        from: r.from,
        signer: r.signer,
        count,
    }
}
