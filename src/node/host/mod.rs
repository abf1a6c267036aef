//! The node's stage host: the executor of the core's [`StageNode`], as [`PlaneExecutor`] is
//! of an edge plane. It feeds the node its inputs (control messages, weights, the worker
//! controller's outputs, pump notices), executes the [`NodeAction`]s it queues (messages
//! and events to the orchestrator, worker commands, weights resolution, pump wakes), and
//! runs the node's plane through the shared executor.
//!
//! It decides nothing itself. Its parts: `control` (weights resolution off the loop),
//! `worker` (the worker as the rings' local user).
#![allow(clippy::disallowed_methods)] // the driver owns the clock

mod control;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use iroh::Endpoint;
use tokio::sync::mpsc;

use crate::arena::{Arena, ArenaManager};
use crate::control::ControlMessage;
use crate::edge::executor::{PlaneExecutor, PumpNotice};
use crate::edge::plane::EdgePlane;
use crate::events::EventLine;
use crate::net::edge::EdgeRouter;
pub use crate::node::stage_node::{EdgeRecord, EdgeState, HostSnapshot, STAGE_ROLE};
use crate::node::stage_node::{NodeAction, StageNode, WeightsNotice, WeightsUnavailable};
use crate::stage::weights::{WeightsError, WeightsProgress};
use crate::wire::reason::{Component, FaultReason};
use crate::wire::{EdgeId, NodeId, RunId, Sequence, WorkerGeneration};
use crate::workerctl::{CtlOutput, WorkerDriver, WorkerNotifier};

/// Inputs the host's tasks report back to the node loop.
#[derive(Debug)]
pub enum HostInput {
    /// The orchestrator opened a control session (replacing any earlier one).
    SessionOpened {
        /// Messages to the orchestrator.
        tx: mpsc::UnboundedSender<ControlMessage>,
        /// The orchestrator's node id (from its `Hello`).
        orchestrator: NodeId,
        /// The session's number.
        session: u64,
    },
    /// A control message on session `session`.
    Control(u64, ControlMessage),
    /// The orchestrator's control session `session` ended.
    SessionClosed(u64),
    /// Another endpoint tried to open a control session and was refused.
    ForeignControl(String),
    /// Weights download progress.
    Weights(RunId, WeightsProgress),
    /// The weights are on this host (or could not be made available).
    WeightsResolved(RunId, Result<(PathBuf, u64), WeightsError>),
    /// A pump's notice (its stream opened, or it ended with its evidence).
    Pump(EdgeId, PumpNotice),
}

/// The stage host. See the module docs.
pub struct StageHost {
    node: StageNode,
    executor: PlaneExecutor,
    worker: WorkerDriver,
    notifier: WorkerNotifier,
    inputs: mpsc::UnboundedSender<HostInput>,
    /// The open control session's sender and number.
    session: Option<(mpsc::UnboundedSender<ControlMessage>, u64)>,
    /// A session just opened, used from the node's `UseSession` on.
    opening: Option<(mpsc::UnboundedSender<ControlMessage>, u64)>,
    cache: PathBuf,
    t0: Instant,
    /// The node's endpoint, for link probes.
    endpoint: Endpoint,
}

impl StageHost {
    /// A host for a node whose worker, arena and endpoint are up.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node_id: NodeId,
        endpoint: Endpoint,
        router: EdgeRouter,
        arena: Arc<Arena>,
        manager: ArenaManager,
        worker: WorkerDriver,
        generation: WorkerGeneration,
        inputs: mpsc::UnboundedSender<HostInput>,
        cache: PathBuf,
        skip_sequence: Option<Sequence>,
    ) -> StageHost {
        let notifier = worker.notifier();
        let notices = inputs.clone();
        let probes = endpoint.clone();
        let executor = PlaneExecutor::new(endpoint, router, arena, move |edge, notice| {
            let _ = notices.send(HostInput::Pump(edge, notice));
        });
        let plane = EdgePlane::new(manager, Component::EdgeEstablisher);
        StageHost {
            node: StageNode::new(node_id, plane, generation).mislabel(skip_sequence),
            executor,
            worker,
            notifier,
            inputs,
            session: None,
            opening: None,
            cache,
            t0: Instant::now(),
            endpoint: probes,
        }
    }

    /// The worker driver (to stop it when the node stops).
    pub fn into_worker(self) -> WorkerDriver {
        self.worker
    }

    /// What `edge inspect` shows.
    pub fn snapshot(&self) -> HostSnapshot {
        self.node.snapshot()
    }

    /// The node faulted and stops (its worker failed for good): tells the orchestrator,
    /// and lets go of the session so that everything sent is delivered before the node
    /// closes.
    pub async fn node_faulted(&mut self, reason: crate::wire::reason::BootFault) {
        self.node.node_faulted(reason);
        self.drain().await;
    }

    /// The node stops cleanly: its session is told (`node.stopped`) and let go of, so that
    /// everything sent is delivered before the node closes.
    pub async fn stopping(&mut self) {
        self.node.session_ending(crate::wire::reason::NodeStop::Stopped.into());
        self.drain().await;
    }

    /// Handles one output of the worker controller. Returns `false` when the worker failed
    /// for good (the node cannot compute any more).
    pub async fn worker_output(&mut self, out: CtlOutput) -> bool {
        let alive = self.node.worker_output(out);
        self.drain().await;
        alive
    }

    /// Handles one input from the node's tasks.
    pub async fn input(&mut self, input: HostInput) {
        match input {
            HostInput::SessionOpened { tx, orchestrator, session } => {
                // Used once the node says so: what it tells the session before (a
                // takeover) goes on the old one.
                self.opening = Some((tx, session));
                self.node.session_opened(orchestrator, session);
            }
            HostInput::SessionClosed(session) => self.node.session_closed(session),
            HostInput::ForeignControl(peer) => self.node.foreign_control(&peer),
            HostInput::Control(session, ControlMessage::MeasureLinks { peers }) => {
                // Measured beside everything else; the answer goes on the session that asked.
                // Bandwidths are fitted by the cost model's own terms.
                if let Some((tx, _)) = self.session.as_ref().filter(|s| s.1 == session) {
                    let (tx, endpoint) = (tx.clone(), self.endpoint.clone());
                    let fit = crate::planner::cost::fitted_bytes_per_s;
                    tokio::spawn(async move {
                        let links = crate::net::ping::measure(&endpoint, &peers, fit).await;
                        let _ = tx.send(ControlMessage::LinksMeasured { links });
                    });
                }
            }
            HostInput::Control(session, msg) => self.node.control(session, msg),
            HostInput::Weights(run, progress) => {
                let notice = match progress {
                    WeightsProgress::Started { bytes, .. } => WeightsNotice::Started { bytes },
                    WeightsProgress::Downloaded { bytes } => WeightsNotice::Downloaded { bytes },
                    WeightsProgress::Received { bytes, total } => {
                        WeightsNotice::Received { bytes, total }
                    }
                };
                self.node.weights_progress(run, notice);
            }
            HostInput::WeightsResolved(run, result) => {
                let result = result
                    .map(|(path, bytes)| (path.display().to_string(), bytes))
                    .map_err(|e| WeightsUnavailable { reason: e.reason, detail: e.to_string() });
                self.node.weights_resolved(run, result);
            }
            HostInput::Pump(edge, notice) => {
                let fault = match &notice {
                    PumpNotice::Ended(crate::net::edge::PumpEnd::Faulted(reason, ..)) => {
                        Some(FaultReason::from(*reason))
                    }
                    _ => None,
                };
                if let Some(stats) = self.executor.notice(self.node.plane_mut(), edge, notice) {
                    self.node.pump_counted(edge, stats.bytes, stats.stalls, fault);
                }
            }
        }
        self.drain().await;
    }

    /// Executes one action of the node.
    async fn execute(&mut self, action: NodeAction) {
        match action {
            NodeAction::Send(msg) => {
                if let Some((tx, _)) = &self.session {
                    let _ = tx.send(msg);
                }
            }
            NodeAction::Emit { event, origin_us } => {
                if let Some((tx, _)) = &self.session {
                    let line = EventLine {
                        ts_us: self.t0.elapsed().as_micros() as u64,
                        origin_us: Some(origin_us.unwrap_or_else(crate::clock::monotonic_us)),
                        event,
                    };
                    let _ = tx.send(ControlMessage::Event { line });
                }
            }
            NodeAction::WorkerSend { command, lost } => {
                if let Err(e) = self.worker.send(command).await {
                    eprintln!("swactor node: a command did not reach the worker: {e}");
                    self.node.worker_unreachable(lost);
                }
            }
            NodeAction::WorkerNotify(command) => self.notifier.notify(command),
            NodeAction::FetchWeights(p) => {
                control::fetch_weights(&p, self.cache.clone(), self.inputs.clone());
            }
            NodeAction::StopRingPump(ring) => self.executor.stop_ring_pump(ring),
            NodeAction::WakeRing(ring) => self.executor.wake_ring(ring),
            NodeAction::ForgetEdges(edges) => {
                self.executor.forget_routes(edges);
                self.executor.forget_connections();
            }
            NodeAction::AbortPumps => self.executor.abort_pumps(),
            NodeAction::CloseSession => self.session = None,
            NodeAction::UseSession(n) => {
                if self.opening.as_ref().is_some_and(|o| o.1 == n) {
                    self.session = self.opening.take();
                }
            }
            NodeAction::Log(line) => eprintln!("swactor node: {line}"),
        }
    }

    /// Runs the node's actions and the plane's commands to a fixed point.
    async fn drain(&mut self) {
        loop {
            let mut progressed = self.node.advance();
            while let Some(action) = self.node.poll_action() {
                progressed = true;
                self.execute(action).await;
            }
            let mut user =
                worker::WorkerUser { worker: &mut self.worker, notifier: &self.notifier };
            progressed |= self.executor.drive(self.node.plane_mut(), &mut user).await;
            if !progressed {
                return;
            }
        }
    }
}
