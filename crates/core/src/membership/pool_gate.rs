//! The pool readiness gate (seed: membership_pool_readiness_contract).
//!
//! `PoolReady` names exactly the intended candidate pool, and is emitted only when every
//! candidate is known, live in the SWIM view, has sent `NodeAvailable` with its data-plane
//! identity, is neither suspect nor faulted, and the view has not changed for the
//! convergence window (absent one tick before the window ends, present at it).
//!
//! Before a plan is committed, losing readiness is reported (`ReadinessLost`; a suspect
//! node is not ready) and the gate waits for the pool to become ready and stable again.
//! Once provisioning has begun, losing a required node (down or faulted) is a run fault
//! (`RequiredNodeLost`); a suspicion alone is not a loss (SWIM resolves it into a refutation
//! or a `Down` within its suspicion timeout). The gate never re-places anything. Nodes
//! outside the candidate pool never influence it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::wire::NodeId;
use crate::wire::reason::{BootFault, MembershipLoss};

/// A node's data-plane identity as its `NodeAvailable` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataPlaneIdentity {
    /// iroh endpoint id.
    pub endpoint_id: String,
    /// Addresses.
    pub addrs: Vec<String>,
}

/// What the gate reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateEvent {
    /// The whole candidate pool is ready and stable.
    PoolReady {
        /// The candidates, sorted.
        nodes: Vec<NodeId>,
    },
    /// The pool was ready and no longer is (before provisioning): wait or abort.
    ReadinessLost {
        /// The candidate that broke readiness.
        node: NodeId,
    },
    /// A required node was lost after provisioning began: the run faults.
    RequiredNodeLost {
        /// The node.
        node: NodeId,
        /// How it was lost.
        reason: MembershipLoss,
    },
    /// After a re-formation, a run is committed over part of the pool and more candidates
    /// have been ready and stable for the window (a lost node came back, or a spare
    /// joined): a larger plan may fit. Reported once per grown set.
    CapacityGrew {
        /// Every candidate ready now, sorted.
        nodes: Vec<NodeId>,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Candidate {
    known: bool,
    live: bool,
    suspect: bool,
    faulted: Option<BootFault>,
    identity: Option<DataPlaneIdentity>,
}

impl Candidate {
    fn ready(&self) -> bool {
        self.known
            && self.live
            && !self.suspect
            && self.faulted.is_none()
            && self.identity.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the pool (or for it to be stable).
    Gathering,
    /// `PoolReady` was emitted; no plan committed yet.
    Ready,
    /// Provisioning began: losses fault the run.
    Committed,
    /// A run faulted and its session re-forms: ready once the candidates that are ready
    /// (at least one) have not changed for the window and are not the set last offered.
    Reforming,
}

/// The orchestrator's pool readiness gate.
#[derive(Debug)]
pub struct PoolGate {
    candidates: BTreeMap<NodeId, Candidate>,
    window: Duration,
    changed_at: Instant,
    phase: Phase,
    lost: BTreeSet<NodeId>,
    events: VecDeque<GateEvent>,
    /// Once re-forming: the ready set last offered (readiness is judged over it alone).
    offered: Option<BTreeSet<NodeId>>,
    /// Whether readiness is partial (after the first re-formation).
    partial: bool,
}

impl PoolGate {
    /// A gate for exactly `candidates`, requiring `window` of stability. `now` starts the
    /// first window.
    pub fn new(
        now: Instant,
        candidates: impl IntoIterator<Item = NodeId>,
        window: Duration,
    ) -> PoolGate {
        PoolGate {
            candidates: candidates.into_iter().map(|n| (n, Candidate::default())).collect(),
            window,
            changed_at: now,
            phase: Phase::Gathering,
            lost: BTreeSet::new(),
            events: VecDeque::new(),
            offered: None,
            partial: false,
        }
    }

    fn update(&mut self, now: Instant, node: NodeId, f: impl FnOnce(&mut Candidate)) {
        let Some(c) = self.candidates.get_mut(&node) else { return };
        let before = c.clone();
        c.known = true;
        f(c);
        if *c == before {
            return;
        }
        let still_ready = c.ready();
        self.changed_at = now;
        match self.phase {
            Phase::Gathering | Phase::Reforming => {}
            Phase::Ready if self.partial => {
                let offered = self.offered.as_ref().is_some_and(|o| o.contains(&node));
                if offered && !still_ready {
                    self.phase = Phase::Reforming;
                    self.offered = None;
                    self.events.push_back(GateEvent::ReadinessLost { node });
                }
            }
            Phase::Ready if !still_ready => {
                self.phase = Phase::Gathering;
                self.events.push_back(GateEvent::ReadinessLost { node });
            }
            Phase::Ready => {}
            Phase::Committed => {
                // Suspicion is SWIM's question, not its verdict: the member refutes it or is
                // declared down within the suspicion timeout, and only that `Down` loses it.
                let reason = if c.faulted.is_some() {
                    Some(MembershipLoss::NodeFaulted)
                } else if !c.live {
                    Some(MembershipLoss::NodeDown)
                } else {
                    None
                };
                if let Some(reason) = reason
                    && self.lost.insert(node)
                {
                    self.events.push_back(GateEvent::RequiredNodeLost { node, reason });
                }
            }
        }
    }

    /// SWIM reports the node alive.
    pub fn member_up(&mut self, now: Instant, node: NodeId) {
        self.update(now, node, |c| {
            c.live = true;
            c.suspect = false;
        });
    }

    /// SWIM suspects the node.
    pub fn member_suspect(&mut self, now: Instant, node: NodeId) {
        self.update(now, node, |c| c.suspect = true);
    }

    /// SWIM declares the node down.
    pub fn member_down(&mut self, now: Instant, node: NodeId) {
        self.update(now, node, |c| {
            c.live = false;
            c.suspect = false;
        });
    }

    /// The node sent `NodeAvailable` with its data-plane identity.
    pub fn node_available(&mut self, now: Instant, node: NodeId, identity: DataPlaneIdentity) {
        self.update(now, node, |c| c.identity = Some(identity));
    }

    /// The node's control session ended: it is not available (it cannot be provisioned)
    /// until it answers a new session. Its SWIM liveness is SWIM's to report. After
    /// provisioning began the run's driver handles the lost session itself.
    pub fn node_unavailable(&mut self, now: Instant, node: NodeId) {
        self.update(now, node, |c| c.identity = None);
    }

    /// The node reported a boot fault: it is never eligible.
    pub fn node_faulted(&mut self, now: Instant, node: NodeId, reason: BootFault) {
        self.update(now, node, |c| c.faulted = Some(reason));
    }

    /// A plan was committed and provisioning began: from now on, losses fault the run.
    /// Refused (returns false) unless the pool is ready.
    pub fn provisioning_started(&mut self) -> bool {
        if self.phase != Phase::Ready {
            return false;
        }
        self.phase = Phase::Committed;
        true
    }

    /// The run faulted and its session re-forms over the nodes left: from `now`, the gate
    /// offers (`PoolReady`) the candidates that are ready once they have been stable for
    /// the window, whichever are missing. Losses are reported afresh for the next run.
    pub fn reform(&mut self, now: Instant) {
        self.phase = Phase::Reforming;
        self.partial = true;
        self.offered = None;
        self.lost.clear();
        self.changed_at = now;
    }

    /// The run re-forms on purpose over `nodes` (just reported by
    /// [`GateEvent::CapacityGrew`]): they are offered at once, as if `PoolReady` had named
    /// them, so provisioning may start without another window. Losses are reported afresh.
    pub fn reform_onto(&mut self, nodes: &[NodeId]) {
        self.phase = Phase::Ready;
        self.partial = true;
        self.offered = Some(nodes.iter().copied().collect());
        self.lost.clear();
    }

    /// Whether a committed run over a partial offer has more candidates ready than it was
    /// offered.
    fn grown(&self) -> bool {
        self.partial
            && self
                .offered
                .as_ref()
                .is_some_and(|o| self.ready_nodes().iter().any(|n| !o.contains(n)))
    }

    /// The set just offered could not hold a plan: the gate offers again only once the
    /// ready set changes (a node comes back or a spare joins) and is stable again.
    pub fn offer_refused(&mut self) {
        if self.phase == Phase::Ready && self.partial {
            self.phase = Phase::Reforming;
        }
    }

    /// The candidates that hold every readiness fact now.
    pub fn ready_nodes(&self) -> BTreeSet<NodeId> {
        self.candidates.iter().filter(|(_, c)| c.ready()).map(|(n, _)| *n).collect()
    }

    /// Whether every candidate holds every readiness fact (stability aside).
    pub fn all_ready(&self) -> bool {
        self.candidates.values().all(Candidate::ready)
    }

    /// The identity a candidate announced.
    pub fn identity(&self, node: NodeId) -> Option<&DataPlaneIdentity> {
        self.candidates.get(&node).and_then(|c| c.identity.as_ref())
    }

    /// The deadline at which the pool becomes ready if nothing changes.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let ready = match self.phase {
            Phase::Gathering => self.all_ready(),
            Phase::Reforming => {
                let now_ready = self.ready_nodes();
                !now_ready.is_empty() && self.offered.as_ref() != Some(&now_ready)
            }
            Phase::Committed => self.grown(),
            Phase::Ready => false,
        };
        ready.then(|| self.changed_at + self.window)
    }

    /// Emits `PoolReady` once the window has passed with every fact holding.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(deadline) = self.poll_timeout()
            && now >= deadline
        {
            if self.phase == Phase::Committed {
                let ready = self.ready_nodes();
                self.offered = Some(ready.clone());
                let nodes = ready.into_iter().collect();
                self.events.push_back(GateEvent::CapacityGrew { nodes });
                return;
            }
            let nodes: Vec<NodeId> = if self.phase == Phase::Reforming {
                let ready = self.ready_nodes();
                self.offered = Some(ready.clone());
                ready.into_iter().collect()
            } else {
                self.candidates.keys().copied().collect()
            };
            self.phase = Phase::Ready;
            self.events.push_back(GateEvent::PoolReady { nodes });
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<GateEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
