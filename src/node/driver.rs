//! The node role's driver (`swactor node boot`): brings up every boot resource in turn,
//! feeding the [`NodeBoot`] state machine, then serves the control plane (only to the
//! configured orchestrator), the edge router, SWIM and the admin socket until stopped.
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use serde::Serialize;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::admin::{self, AdminSocket};
use super::boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
use super::facts::{device_label, host_memory_available};
use super::host::{HostInput, StageHost};
use super::inbox::{Inbox, MemberView, RefusalLog, accept, flush_sessions, note_member};
use super::inspect::EdgeInspect;
use crate::arena::{Arena, ArenaManager};
use crate::control::ControlMessage;
use crate::events::{Event, EventLine};
use crate::membership::swim::{self, MembershipEvent, SwimAddr, SwimIdentity};
use crate::net::advertise::advertised;
use crate::net::edge::{EdgeRouter, Refusal};
use crate::net::endpoint::bind;
use crate::net::identity::NodeKey;
use crate::wire::NodeId;
use crate::wire::reason::{BootFault, Component, ControlFault, WorkerFatal};
use crate::worker::protocol::{Backend, ShutdownMode};
use crate::workerctl::{CtlConfig, CtlOutput, RestartPolicy, WorkerDriver, WorkerDriverConfig};

/// Everything `node boot` needs.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Node id (as the pool file names it).
    pub node_id: NodeId,
    /// Key file.
    pub key: PathBuf,
    /// iroh listen address.
    pub listen: SocketAddr,
    /// SWIM listen address.
    pub swim: SocketAddr,
    /// The longest round trip between members SWIM's timings allow for (zero: a LAN).
    pub swim_rtt: Duration,
    /// SWIM seeds.
    pub join: Vec<SwimAddr>,
    /// The orchestrator's endpoint id (64 hex digits).
    pub orchestrator: String,
    /// Arena size.
    pub arena_bytes: u64,
    /// Compute threads of the worker.
    pub worker_threads: u32,
    /// Where the worker's stage computes (`Cpu` or `Cuda`).
    pub device: Backend,
    /// Where the admin socket goes.
    pub admin: AdminPath,
    /// The `swactor` executable (for the worker).
    pub exe: PathBuf,
    /// Boot deadline.
    pub boot_timeout: Duration,
    /// Where downloaded weights are kept.
    pub cache: PathBuf,
    /// Memory the node can give a stage (`None`: the host's available memory).
    pub memory_bytes: Option<u64>,
    /// The most bytes its stage may keep of evicted prompt prefixes, reported in
    /// `node_available` (`None`: the orchestrator decides).
    pub prompt_cache_bytes: Option<u64>,
    /// Measure the host's speed at boot and report it (`node boot --no-calibrate`: not).
    pub calibrate: bool,
    /// The address to advertise (for iroh and SWIM) when listening on an unspecified one
    /// (`None`: the route toward the `join` seeds, else a boot fault).
    pub advertise: Option<std::net::IpAddr>,
    /// The relays the node may use and is reached through (none by default).
    pub relays: crate::net::relay::Relays,
    /// Test-only fault injection (the CLI reads `SWACTOR_FAULT_SKIP_SEQUENCE`): the stage
    /// labels the output of this sequence with the next one.
    pub fault_skip_sequence: Option<crate::wire::Sequence>,
    /// Restarts of a crashed worker before the node faults (`None`: any number).
    pub max_worker_restarts: Option<u32>,
}

/// Where a node puts its admin socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminPath {
    /// Exactly this path (`--admin`).
    Explicit(PathBuf),
    /// `swactor-node-<node id>-<first 16 digits of the endpoint id>.sock` in this
    /// directory: distinct for two nodes of one host, the same across restarts of a node.
    InDir(PathBuf),
}

impl AdminPath {
    /// The socket's path for this node.
    pub fn resolve(&self, node_id: NodeId, endpoint_id: &str) -> PathBuf {
        match self {
            AdminPath::Explicit(path) => path.clone(),
            AdminPath::InDir(dir) => {
                let short: String = endpoint_id.chars().take(16).collect();
                dir.join(format!("swactor-node-{node_id}-{short}.sock"))
            }
        }
    }
}

/// What the node reports once available.
#[derive(Debug, Clone, Serialize)]
pub struct NodeIdentityReport {
    /// Node id.
    pub node_id: NodeId,
    /// Endpoint id.
    pub endpoint_id: String,
    /// iroh addresses (none when relay-only).
    pub addrs: Vec<String>,
    /// The relay it can be reached through (its first `--relay`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relay: Option<String>,
    /// SWIM address.
    pub swim_addr: String,
    /// Admin socket.
    pub admin: String,
    /// Memory the node can give a stage.
    pub memory_bytes: Option<u64>,
    /// Arena capacity (the most ring bytes a stage can lease).
    pub arena_bytes: u64,
    /// Where its stage computes (`cpu`, `cuda:N`).
    pub device: String,
    /// Compute threads of its worker's stage (`node boot --threads`, by default every
    /// CPU the node may use).
    pub threads: u32,
    /// What it measured of its speed at boot (a CPU node).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speed: Option<crate::wire::NodeSpeed>,
}

/// A boot that failed, with its typed reason.
#[derive(Debug, thiserror::Error)]
#[error("node boot failed: {reason}: {detail}")]
pub struct BootFailed {
    /// Stable reason.
    pub reason: BootFault,
    /// What exactly.
    pub detail: String,
}

struct Running {
    endpoint: Endpoint,
    host: StageHost,
    host_inputs: mpsc::UnboundedReceiver<HostInput>,
    refusals: mpsc::UnboundedReceiver<Refusal>,
    worker_events: tokio::sync::mpsc::UnboundedReceiver<CtlOutput>,
    _swim: swim::Swim,
    roster: swim::RosterHandle,
    members: tokio::sync::mpsc::UnboundedReceiver<MembershipEvent>,
    /// The membership view observers are sent.
    view: tokio::sync::watch::Sender<MemberView>,
    inspect: Arc<std::sync::Mutex<EdgeInspect>>,
    /// The admin socket's requests to bring `inspect` up to date before it answers.
    refreshes: mpsc::UnboundedReceiver<tokio::sync::oneshot::Sender<()>>,
    admin: AdminSocket,
    swim_addr: SwimAddr,
    /// The advertised iroh addresses.
    addrs: Vec<SocketAddr>,
    /// The edge connections it holds, for the paths `edge inspect` shows.
    paths: crate::net::paths::Paths,
    /// Held by every control session's writer until it delivered what it was given: the
    /// node waits for it at shutdown (see [`flush_sessions`]).
    flushed: mpsc::Receiver<()>,
    sessions_open: mpsc::Sender<()>,
    /// What the calibration measured.
    speed: Option<crate::wire::NodeSpeed>,
}

fn failed(reason: BootFault, detail: impl std::fmt::Display) -> BootFailed {
    BootFailed { reason, detail: detail.to_string() }
}

/// What `node boot` reports on its way up.
#[derive(Debug)]
pub enum NodeReport<'a> {
    /// A boot event of the node's own stream (`node_started`, `node_faulted`), stamped by
    /// the node.
    Event(&'a EventLine),
    /// Every readiness fact holds: the node's identity.
    Available(&'a NodeIdentityReport),
}

/// Boots the node, reporting `node_started`, then its identity once `NodeAvailable` holds
/// or `node_faulted` with the typed reason; runs until `shutdown` resolves; then stops the
/// worker and closes everything. A boot that does not complete within the boot timeout is
/// abandoned (everything it started is dropped) and faults with the fact it waited for.
pub async fn run_node(
    config: NodeConfig,
    mut report: impl FnMut(NodeReport<'_>),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), BootFailed> {
    let t0 = Instant::now();
    let mut boot = NodeBoot::new(
        t0,
        BootConfig {
            node_id: config.node_id,
            worker: WorkerPolicy::Eager,
            timeout: config.boot_timeout,
        },
    );
    let deadline = boot.poll_timeout().unwrap_or(t0 + config.boot_timeout);
    report_boot(&mut boot, t0, &mut report);
    let brought = tokio::time::timeout_at(deadline.into(), bring_up(&config, &mut boot)).await;
    let running = match brought {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            boot.resource_failed(e.reason);
            report_boot(&mut boot, t0, &mut report);
            return Err(e);
        }
        Err(_elapsed) => {
            boot.handle_timeout(deadline);
            let reason = report_boot(&mut boot, t0, &mut report).unwrap_or(BootFault::ControlInbox);
            let waited = boot.missing().first().copied();
            return Err(failed(
                reason,
                format!(
                    "the node did not boot within {:?} (waiting for {waited:?})",
                    config.boot_timeout
                ),
            ));
        }
    };
    let mut identity = None;
    while let Some(ev) = boot.poll_event() {
        if let BootEvent::NodeAvailable { .. } = ev {
            identity = Some(NodeIdentityReport {
                node_id: config.node_id,
                endpoint_id: running.endpoint.id().to_string(),
                addrs: running.addrs.iter().map(ToString::to_string).collect(),
                relay: config.relays.home().map(ToString::to_string),
                swim_addr: running.swim_addr.to_string(),
                admin: running.admin.path().display().to_string(),
                memory_bytes: config.memory_bytes.or_else(host_memory_available),
                arena_bytes: config.arena_bytes,
                device: device_label(config.device),
                threads: config.worker_threads,
                speed: running.speed.clone(),
            });
        }
    }
    let Some(identity) = identity else {
        return Err(failed(BootFault::ControlInbox, "boot did not complete"));
    };
    report(NodeReport::Available(&identity));
    let node_id = config.node_id;
    match serve(running, identity, shutdown).await {
        None => {
            let event = Event::NodeStopped { node_id };
            let origin_us = Some(crate::clock::monotonic_us());
            let line = EventLine { ts_us: t0.elapsed().as_micros() as u64, origin_us, event };
            report(NodeReport::Event(&line));
            Ok(())
        }
        Some(reason) => {
            let event = Event::NodeFaulted { node_id, reason, component: Component::WorkerCtl };
            let origin_us = Some(crate::clock::monotonic_us());
            let line = EventLine { ts_us: t0.elapsed().as_micros() as u64, origin_us, event };
            report(NodeReport::Event(&line));
            Err(failed(reason, "the worker failed for good; the node stopped"))
        }
    }
}

/// Reports the boot machine's `Started` and `BootFaulted` as event lines; returns the
/// fault's reason, if it faulted.
fn report_boot(
    boot: &mut NodeBoot,
    t0: Instant,
    report: &mut impl FnMut(NodeReport<'_>),
) -> Option<BootFault> {
    let mut fault = None;
    while let Some(ev) = boot.poll_event() {
        let event = match ev {
            BootEvent::Started { node_id } => Event::NodeStarted { node_id },
            BootEvent::BootFaulted { node_id, reason } => {
                fault = Some(reason);
                Event::NodeFaulted { node_id, reason, component: Component::NodeBoot }
            }
            // Reported with the node's identity, once its resources are known.
            BootEvent::NodeAvailable { .. } => continue,
        };
        let line = EventLine {
            ts_us: t0.elapsed().as_micros() as u64,
            origin_us: Some(crate::clock::monotonic_us()),
            event,
        };
        report(NodeReport::Event(&line));
    }
    fault
}

async fn bring_up(config: &NodeConfig, boot: &mut NodeBoot) -> Result<Running, BootFailed> {
    let key =
        NodeKey::load_or_create(&config.key).map_err(|e| failed(BootFault::IdentityInvalid, e))?;
    if !crate::planner::pool::is_endpoint_id(&config.orchestrator) {
        return Err(failed(
            BootFault::IdentityInvalid,
            "--orchestrator is not an endpoint id (64 hex digits)",
        ));
    }
    boot.fact_ready(BootFact::Identity);
    // The calibration runs beside the rest of the boot (a CPU node only).
    let threads = config.worker_threads;
    let cpu = config.calibrate && matches!(config.device, Backend::Cpu | Backend::CpuFaulty { .. });
    let speed =
        tokio::task::spawn_blocking(move || cpu.then(|| super::calibrate::host_speed(threads)));
    let calibration_deadline = tokio::time::Instant::now() + config.boot_timeout / 2;

    // The admin socket's path is claimed first, before anything is started: a path that
    // is not ours to take fails the boot at once, and leaves nothing behind.
    let admin_path = config.admin.resolve(config.node_id, &key.endpoint_id_hex());
    let (admin, admin_listener) =
        admin::claim(&admin_path).map_err(|e| failed(e.boot_fault(), e))?;

    let arena = Arc::new(Arena::create(config.arena_bytes).map_err(|e| failed(e.boot_fault(), e))?);
    let mut manager = ArenaManager::new(config.arena_bytes);
    manager.arena_ready();
    boot.fact_ready(BootFact::Arena);

    let (worker, worker_events, generation) = start_worker(config, &arena).await?;
    boot.fact_ready(BootFact::Worker);

    let (endpoint, addrs) = bind_transport(config, &key).await?;
    boot.fact_ready(BootFact::Transport);

    let (swim, members, roster, swim_addr, carrier) = join_swim(config, &key, &endpoint).await?;
    boot.fact_ready(BootFact::Membership);

    let inspect = Arc::new(std::sync::Mutex::new(EdgeInspect {
        node_id: config.node_id,
        endpoint_id: key.endpoint_id_hex(),
        arena_leases: manager.live_count(),
        ..EdgeInspect::default()
    }));
    let (refresh, refreshes) = mpsc::unbounded_channel();
    tokio::spawn(admin::serve(admin_listener, Arc::clone(&inspect), refresh));

    let (router, refusals) = EdgeRouter::new();
    let paths = router.paths().clone();
    // Only the pool's members (the roster the orchestrator's `Hello` names) may open an
    // edge stream before this node is provisioned with its edge: a stranger's is refused.
    let pool = roster.clone();
    router.admit_early(Arc::new(move |peer| pool.is_member(peer.as_bytes())));
    let (inputs, host_inputs) = mpsc::unbounded_channel();
    let host = StageHost::new(
        config.node_id,
        endpoint.clone(),
        router.clone(),
        arena,
        manager,
        worker,
        generation,
        inputs.clone(),
        config.cache.clone(),
        config.fault_skip_sequence,
    );
    let speed = calibrated(speed, calibration_deadline, config.boot_timeout / 2).await;
    let hello = ControlMessage::NodeAvailable {
        node_id: config.node_id,
        endpoint_id: key.endpoint_id_hex(),
        addrs: addrs.iter().map(ToString::to_string).collect(),
        swim_addr: Some(swim_addr.to_string()),
        memory_bytes: config.memory_bytes.or_else(host_memory_available),
        arena_bytes: Some(config.arena_bytes),
        device: Some(device_label(config.device)),
        prompt_cache_bytes: config.prompt_cache_bytes,
        speed: speed.clone(),
    };
    let (sessions_open, flushed) = mpsc::channel(1);
    let initial = MemberView {
        node_id: config.node_id,
        up: [config.node_id].into(),
        ..MemberView::default()
    };
    let (view, view_rx) = tokio::sync::watch::channel(initial);
    let inbox = Inbox {
        router,
        orchestrator: config.orchestrator.clone(),
        hello,
        inputs,
        roster: roster.clone(),
        swim: carrier,
        open: sessions_open.downgrade(),
        view: view_rx,
    };
    tokio::spawn(accept(endpoint.clone(), inbox));
    boot.fact_ready(BootFact::ControlInbox);
    boot.fact_ready(BootFact::Provisioning);
    Ok(Running {
        endpoint,
        host,
        host_inputs,
        refusals,
        worker_events,
        _swim: swim,
        roster,
        members,
        view,
        inspect,
        refreshes,
        admin,
        swim_addr,
        addrs,
        paths,
        flushed,
        sessions_open,
        speed,
    })
}

/// The calibration's figures, if it finished by `deadline` (`within` after it started: half
/// the boot's time). A host too busy to measure itself in that time boots without a speed
/// report (the plan balances its layers by memory); the measurement, left to finish, is
/// cached for the next boot.
async fn calibrated(
    speed: tokio::task::JoinHandle<Option<crate::wire::NodeSpeed>>,
    deadline: tokio::time::Instant,
    within: Duration,
) -> Option<crate::wire::NodeSpeed> {
    match tokio::time::timeout_at(deadline, speed).await {
        Ok(measured) => measured.ok().flatten(),
        Err(_) => {
            eprintln!(
                "swactor node: the calibration did not finish within {} s (a busy host): \
                 reporting no speed, so the plan balances this node by memory",
                within.as_secs()
            );
            None
        }
    }
}

/// Starts the supervised worker and waits for it to be ready; returns it, its outputs and
/// its generation.
async fn start_worker(
    config: &NodeConfig,
    arena: &Arc<Arena>,
) -> Result<
    (WorkerDriver, mpsc::UnboundedReceiver<CtlOutput>, crate::wire::WorkerGeneration),
    BootFailed,
> {
    let ctl = CtlConfig {
        arena_ceiling: config.arena_bytes,
        backend: config.device,
        init_timeout: Duration::from_secs(10),
        stop_timeout: Duration::from_secs(5),
        // A worker that dies mid-run faults that run; the node restarts it for the next
        // (after a pause when it keeps dying at once, and not past a crash loop).
        max_restarts: config.max_worker_restarts.unwrap_or(u32::MAX),
        restart: RestartPolicy::DEFAULT,
    };
    let (exe, threads) = (config.exe.clone(), config.worker_threads);
    let driver = WorkerDriverConfig { exe, ctl, threads, doorbells: true };
    let (worker, mut worker_events) = WorkerDriver::start(driver, Arc::clone(arena));
    loop {
        match worker_events.recv().await {
            Some(CtlOutput::Ready { generation, .. }) => {
                return Ok((worker, worker_events, generation));
            }
            Some(CtlOutput::Failed { reason }) => {
                let detail = match config.device {
                    Backend::Cuda { ordinal } => {
                        format!("{reason} (device cuda:{ordinal}; see the worker's log above)")
                    }
                    _ => reason.to_string(),
                };
                return Err(failed(worker_failure(reason), detail));
            }
            Some(_) => {}
            None => return Err(failed(BootFault::WorkerStart, "the worker driver ended")),
        }
    }
}

/// Binds the iroh endpoint, reachable through its relay (if any) before the node says it
/// is available; returns it with the addresses to advertise (never one other hosts cannot
/// reach; none when relay-only).
async fn bind_transport(
    config: &NodeConfig,
    key: &NodeKey,
) -> Result<(Endpoint, Vec<SocketAddr>), BootFailed> {
    let endpoint = bind(key, config.listen, &config.relays)
        .await
        .map_err(|e| failed(BootFault::TransportBind, e))?;
    crate::net::endpoint::wait_for_relay(&endpoint, &config.relays, config.boot_timeout)
        .await
        .map_err(|e| failed(BootFault::RelayUnreachable, e))?;
    let addrs = endpoint
        .bound_sockets()
        .into_iter()
        .map(|b| advertised(b, config.advertise, &udp_seeds(&config.join)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(BootFault::TransportBind, e))?;
    Ok((endpoint, addrs))
}

/// The seeds' UDP addresses (the route toward them picks the address to advertise).
fn udp_seeds(join: &[SwimAddr]) -> Vec<SocketAddr> {
    join.iter().filter_map(SwimAddr::udp).collect()
}

/// What joining SWIM gives the node: the participant, its events, its roster, the address
/// it is reached at, and the carrier of relayed members' datagrams.
type Joined = (
    swim::Swim,
    mpsc::UnboundedReceiver<MembershipEvent>,
    swim::RosterHandle,
    SwimAddr,
    crate::membership::carrier::Carrier,
);

/// Binds the SWIM socket and joins through the seeds. Until an orchestrator names the
/// pool (in its `Hello`), the roster is empty and no peer is accepted. A relay-only node
/// is addressed by its endpoint and home relay (its datagrams come through the carrier);
/// its socket only sends to members with a UDP address.
async fn join_swim(
    config: &NodeConfig,
    key: &NodeKey,
    endpoint: &iroh::Endpoint,
) -> Result<Joined, BootFailed> {
    let socket = UdpSocket::bind(config.swim).await.map_err(|e| {
        let why = if e.kind() == std::io::ErrorKind::AddrInUse {
            "the address is in use (another process listens there)".to_string()
        } else {
            e.to_string()
        };
        failed(BootFault::MembershipJoin, format!("cannot bind SWIM on {}: {why}", config.swim))
    })?;
    let bound = socket.local_addr().map_err(|e| failed(BootFault::MembershipJoin, e))?;
    let swim_addr = match config.relays.home().filter(|_| config.relays.only()) {
        Some(relay) => {
            SwimAddr::Relayed { endpoint: key.endpoint_id_hex(), relay: relay.to_string() }
        }
        None => advertised(bound, config.advertise, &udp_seeds(&config.join))
            .map(SwimAddr::Udp)
            .map_err(|e| failed(BootFault::MembershipJoin, e))?,
    };
    let identity = SwimIdentity {
        node_id: config.node_id,
        addr: swim_addr.clone(),
        endpoint_id: key.endpoint_id_hex(),
        bump: 0,
    };
    let roster = swim::RosterHandle::default();
    let (carrier, link) = crate::membership::carrier::start(endpoint.clone(), roster.clone());
    let (swim, members) = swim::spawn(
        swim::SwimConfig {
            identity,
            key: key.secret().clone(),
            roster: roster.clone(),
            seeds: config.join.clone(),
            cluster_size: 4,
            max_rtt: config.swim_rtt,
            seed_rng: config.node_id.0,
        },
        socket,
        Some(link),
    )
    .map_err(|e| failed(BootFault::MembershipJoin, format!("cannot start SWIM: {e}")))?;
    Ok((swim, members, roster, swim_addr, carrier))
}

/// Adds to an edge record how its peer is reached now (`path`: direct or relayed, and
/// `rtt_us`), when the node holds a live connection to it.
fn with_path(edge: &mut serde_json::Value, paths: &crate::net::paths::Paths) {
    let report = edge.get("peer_endpoint").and_then(|p| p.as_str()).and_then(|p| paths.of(p));
    if let (Some(report), Some(fields)) = (report, edge.as_object_mut()) {
        fields.insert("path".into(), serde_json::json!(report.path));
        fields.insert("rtt_us".into(), serde_json::json!(report.rtt_us));
    }
}

/// The worker fault a node cannot go on after, as the boot fault it amounts to: the node
/// can no longer start a worker.
fn worker_failure(reason: WorkerFatal) -> BootFault {
    match reason {
        WorkerFatal::InitTimeout => BootFault::WorkerInitTimeout,
        WorkerFatal::BackendUnavailable => BootFault::DeviceUnavailable,
        WorkerFatal::CrashLooping => BootFault::WorkerCrashLooping,
        _ => BootFault::WorkerStart,
    }
}

/// Serves until `shutdown` resolves (`None`) or the worker fails for good (the node's
/// fault, reported to the orchestrator before the node stops).
async fn serve(
    mut running: Running,
    _report: NodeIdentityReport,
    shutdown: impl std::future::Future<Output = ()>,
) -> Option<BootFault> {
    let mut fault = None;
    let mut log = RefusalLog::default();
    let mut log_refusal = |key: String, line: &str| {
        if let Some(line) = log.refused(Instant::now(), &key, line) {
            eprintln!("swactor node: {line}");
        }
    };
    tokio::pin!(shutdown);
    // The admin snapshot is refreshed on a tick, not on every hot-path event.
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(done) = running.refreshes.recv() => {
                // The admin socket reads the view now: it shows what the node did last.
                let snap = running.host.snapshot();
                let mut s = running.inspect.lock().unwrap_or_else(|e| e.into_inner());
                s.arena_leases = snap.arena_leases;
                s.installed_rings = snap.installed_rings;
                s.device_objects = snap.device_objects;
                s.edges = snap.edges;
                for edge in &mut s.edges {
                    with_path(edge, &running.paths);
                }
                s.stage = snap.stage;
                drop(s);
                let _ = done.send(());
            }
            ev = running.members.recv() => match ev {
                Some(ev @ (MembershipEvent::Up(_) | MembershipEvent::Suspect(_) | MembershipEvent::Down(_))) => {
                    note_member(&running.inspect, &running.view, &ev);
                }
                Some(MembershipEvent::Rejected(r)) => {
                    let line = format!("SWIM datagram from {} refused: {}", r.from, r.reason);
                    log_refusal(format!("swim {} {}", r.from, r.reason), &line);
                    running.inspect.lock().unwrap_or_else(|e| e.into_inner()).swim_rejected = running.roster.rejects();
                }
                None => break,
            },
            ev = running.worker_events.recv() => match ev {
                Some(out) => {
                    let failed = match &out {
                        CtlOutput::Failed { reason } => Some(worker_failure(*reason)),
                        _ => None,
                    };
                    if !running.host.worker_output(out).await {
                        eprintln!("swactor node: the worker is gone for good; stopping");
                        if let Some(reason) = failed {
                            running.host.node_faulted(reason).await;
                            running.view.send_modify(|v| v.faulted = Some(reason));
                            fault = Some(reason);
                        }
                        break;
                    }
                }
                None => break,
            },
            Some(input) = running.host_inputs.recv() => {
                if let HostInput::ForeignControl(peer) = &input {
                    let reason = ControlFault::UnauthorizedOrchestrator;
                    let line = format!("control session from {peer} refused: {reason}");
                    log_refusal(format!("control {peer}"), &line);
                    running.inspect.lock().unwrap_or_else(|e| e.into_inner()).record_refusal(reason.into(), line);
                }
                running.host.input(input).await;
            }
            Some(refusal) = running.refusals.recv() => {
                let edge = refusal.edge_id.map_or_else(|| "an unreadable preamble".to_string(), |e| format!("edge {}", e.0));
                let line = format!("edge stream from {} for {edge} refused: {}", refusal.peer, refusal.reason);
                let reason = refusal.reason;
                log_refusal(format!("edge {} {reason}", refusal.peer), &line);
                running.inspect.lock().unwrap_or_else(|e| e.into_inner()).record_refusal(reason.into(), line);
            }
        }
    }
    if fault.is_none() {
        running.host.stopping().await;
    }
    // Observer sessions end (after their last words) once the view is gone.
    drop(running.view);
    let worker = running.host.into_worker();
    worker.stop(ShutdownMode::Graceful);
    drop(running.worker_events);
    worker.join().await;
    flush_sessions(running.sessions_open, running.flushed).await;
    running.endpoint.close().await;
    // Removes the socket, unless something else has taken its path meanwhile.
    drop(running.admin);
    fault
}
