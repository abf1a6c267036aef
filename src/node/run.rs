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
use tokio::io::AsyncWriteExt;
use tokio::net::{UdpSocket, UnixListener};

use super::boot::{BootConfig, BootEvent, BootFact, NodeBoot, WorkerPolicy};
use crate::arena::{Arena, ArenaManager};
use crate::control::{self, ControlMessage, FrameDecoder};
use crate::membership::swim::{self, MembershipEvent, SwimIdentity};
use crate::net::edge::EdgeRouter;
use crate::net::endpoint::{CTL_ALPN, EDGE_ALPN, bind};
use crate::net::identity::NodeKey;
use crate::wire::NodeId;
use crate::wire::reason::BootFault;
use crate::worker::protocol::{Backend, ShutdownMode};
use crate::workerctl::{CtlConfig, CtlOutput, WorkerDriver, WorkerDriverConfig};

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
    /// SWIM seeds.
    pub join: Vec<SocketAddr>,
    /// The orchestrator's endpoint id (64 hex digits).
    pub orchestrator: String,
    /// Arena size.
    pub arena_bytes: u64,
    /// Compute threads of the worker.
    pub worker_threads: u32,
    /// Admin socket path.
    pub admin: PathBuf,
    /// The `swactor` executable (for the worker).
    pub exe: PathBuf,
    /// Boot deadline.
    pub boot_timeout: Duration,
}

/// What the node reports once available.
#[derive(Debug, Clone, Serialize)]
pub struct NodeIdentityReport {
    /// Node id.
    pub node_id: NodeId,
    /// Endpoint id.
    pub endpoint_id: String,
    /// iroh addresses.
    pub addrs: Vec<String>,
    /// SWIM address.
    pub swim_addr: String,
    /// Admin socket.
    pub admin: String,
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

/// The edge records `edge inspect` shows (none until runs provision edges).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct EdgeInspect {
    /// The node.
    pub node_id: NodeId,
    /// Endpoint id.
    pub endpoint_id: String,
    /// Live arena leases.
    pub arena_leases: usize,
    /// Edge records.
    pub edges: Vec<serde_json::Value>,
    /// Members the node sees up in SWIM.
    pub members: Vec<u64>,
}

struct Running {
    endpoint: Endpoint,
    worker: WorkerDriver,
    worker_events: tokio::sync::mpsc::UnboundedReceiver<CtlOutput>,
    _swim: swim::Swim,
    members: tokio::sync::mpsc::UnboundedReceiver<MembershipEvent>,
    inspect: Arc<std::sync::Mutex<EdgeInspect>>,
    admin: PathBuf,
    swim_addr: SocketAddr,
}

fn failed(reason: BootFault, detail: impl std::fmt::Display) -> BootFailed {
    BootFailed { reason, detail: detail.to_string() }
}

/// Boots the node; calls `available` with its identity once `NodeAvailable` holds; runs
/// until `shutdown` resolves; then stops the worker and closes everything.
pub async fn run_node(
    config: NodeConfig,
    available: impl FnOnce(&NodeIdentityReport),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), BootFailed> {
    let mut boot = NodeBoot::new(
        Instant::now(),
        BootConfig {
            node_id: config.node_id,
            worker: WorkerPolicy::Eager,
            timeout: config.boot_timeout,
        },
    );
    let running = match bring_up(&config, &mut boot).await {
        Ok(r) => r,
        Err(e) => {
            boot.resource_failed(e.reason);
            return Err(e);
        }
    };
    let mut report = None;
    while let Some(ev) = boot.poll_event() {
        if let BootEvent::NodeAvailable { .. } = ev {
            report = Some(NodeIdentityReport {
                node_id: config.node_id,
                endpoint_id: running.endpoint.id().to_string(),
                addrs: running.endpoint.bound_sockets().iter().map(ToString::to_string).collect(),
                swim_addr: running.swim_addr.to_string(),
                admin: running.admin.display().to_string(),
            });
        }
    }
    let Some(report) = report else {
        return Err(failed(BootFault::ControlInbox, "boot did not complete"));
    };
    available(&report);
    serve(running, report, shutdown).await;
    Ok(())
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

    let arena = Arc::new(Arena::create(config.arena_bytes).map_err(|e| failed(e.boot_fault(), e))?);
    let mut manager = ArenaManager::new(config.arena_bytes);
    manager.arena_ready();
    boot.fact_ready(BootFact::Arena);

    let ctl = CtlConfig {
        arena_ceiling: config.arena_bytes,
        backend: Backend::Cpu,
        init_timeout: Duration::from_secs(10),
        stop_timeout: Duration::from_secs(5),
        max_restarts: 0,
    };
    let (worker, mut worker_events) = WorkerDriver::start(
        WorkerDriverConfig { exe: config.exe.clone(), ctl, threads: config.worker_threads },
        Arc::clone(&arena),
    );
    loop {
        match worker_events.recv().await {
            Some(CtlOutput::Ready { .. }) => break,
            Some(CtlOutput::Failed { reason }) => {
                return Err(failed(BootFault::WorkerStart, reason));
            }
            Some(_) => {}
            None => return Err(failed(BootFault::WorkerStart, "the worker driver ended")),
        }
    }
    boot.fact_ready(BootFact::Worker);

    let endpoint =
        bind(&key, config.listen).await.map_err(|e| failed(BootFault::TransportBind, e))?;
    boot.fact_ready(BootFact::Transport);

    let socket =
        UdpSocket::bind(config.swim).await.map_err(|e| failed(BootFault::MembershipJoin, e))?;
    let swim_addr = socket.local_addr().map_err(|e| failed(BootFault::MembershipJoin, e))?;
    let identity = SwimIdentity {
        node_id: config.node_id,
        addr: swim_addr,
        endpoint_id: key.endpoint_id_hex(),
        bump: 0,
    };
    let (swim, members) = swim::spawn(identity, socket, config.join.clone(), 4, config.node_id.0);
    boot.fact_ready(BootFact::Membership);

    let inspect = Arc::new(std::sync::Mutex::new(EdgeInspect {
        node_id: config.node_id,
        endpoint_id: key.endpoint_id_hex(),
        arena_leases: manager.live_count(),
        ..EdgeInspect::default()
    }));
    let _ = std::fs::remove_file(&config.admin);
    let admin = UnixListener::bind(&config.admin).map_err(|e| failed(BootFault::AdminSocket, e))?;
    tokio::spawn(serve_admin(admin, Arc::clone(&inspect)));

    let (router, _refusals) = EdgeRouter::new();
    let hello = ControlMessage::NodeAvailable {
        node_id: config.node_id,
        endpoint_id: key.endpoint_id_hex(),
        addrs: endpoint.bound_sockets().iter().map(ToString::to_string).collect(),
        swim_addr: Some(swim_addr.to_string()),
    };
    tokio::spawn(accept(endpoint.clone(), router, config.orchestrator.clone(), hello));
    boot.fact_ready(BootFact::ControlInbox);
    boot.fact_ready(BootFact::Provisioning);
    Ok(Running {
        endpoint,
        worker,
        worker_events,
        _swim: swim,
        members,
        inspect,
        admin: config.admin.clone(),
        swim_addr,
    })
}

/// Accepts connections: edge streams go to the router; control sessions only from the
/// configured orchestrator, which first receives this node's `NodeAvailable`.
async fn accept(
    endpoint: Endpoint,
    router: EdgeRouter,
    orchestrator: String,
    hello: ControlMessage,
) {
    while let Some(incoming) = endpoint.accept().await {
        let (router, orchestrator, hello) = (router.clone(), orchestrator.clone(), hello.clone());
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            if conn.alpn() == EDGE_ALPN {
                router.serve_connection(conn).await;
            } else if conn.alpn() == CTL_ALPN {
                if control::authorize(&conn.remote_id().to_string(), &orchestrator).is_err() {
                    eprintln!("swactor node: refused a control session from {}", conn.remote_id());
                    conn.close(1u32.into(), b"unauthorized_orchestrator");
                    return;
                }
                let Ok((mut send, mut recv)) = conn.accept_bi().await else { return };
                let mut decoder = FrameDecoder::new();
                match control::read_message(&mut recv, &mut decoder).await {
                    Some(Ok(ControlMessage::Hello { .. })) => {}
                    _ => {
                        conn.close(2u32.into(), b"malformed_frame");
                        return;
                    }
                }
                if control::write_message(&mut send, &hello).await.is_err() {
                    return;
                }
                // Run work arrives with the run issue; a malformed frame ends the session.
                while let Some(msg) = control::read_message(&mut recv, &mut decoder).await {
                    if let Err(fault) = msg {
                        eprintln!("swactor node: control session closed: {fault}");
                        conn.close(2u32.into(), fault.as_str().as_bytes());
                        return;
                    }
                }
            }
        });
    }
}

async fn serve_admin(listener: UnixListener, inspect: Arc<std::sync::Mutex<EdgeInspect>>) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let body = {
            let state = inspect.lock().unwrap_or_else(|e| e.into_inner());
            serde_json::to_string(&*state).unwrap_or_default()
        };
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.write_all(b"\n").await;
        let _ = stream.shutdown().await;
    }
}

async fn serve(
    mut running: Running,
    _report: NodeIdentityReport,
    shutdown: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            ev = running.members.recv() => match ev {
                Some(MembershipEvent::Up(id)) => {
                    let mut s = running.inspect.lock().unwrap_or_else(|e| e.into_inner());
                    if !s.members.contains(&id.node_id.0) {
                        s.members.push(id.node_id.0);
                        s.members.sort();
                    }
                }
                Some(MembershipEvent::Down(id)) => {
                    running.inspect.lock().unwrap_or_else(|e| e.into_inner()).members.retain(|m| *m != id.node_id.0);
                }
                None => break,
            },
            ev = running.worker_events.recv() => match ev {
                Some(CtlOutput::Failed { reason }) => {
                    eprintln!("swactor node: worker failed: {reason}");
                    break;
                }
                Some(_) => {}
                None => break,
            },
        }
    }
    running.worker.stop(ShutdownMode::Graceful);
    drop(running.worker_events);
    running.worker.join().await;
    running.endpoint.close().await;
    let _ = std::fs::remove_file(&running.admin);
}
