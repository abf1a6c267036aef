//! Node boot (seed: node_boot_lifecycle_contract).
//!
//! A boot attempt emits exactly one of `NodeAvailable` or a typed `BootFaulted`, never
//! both, and `NodeAvailable` only once every readiness fact holds: the control inbox is
//! open, the node identity is valid, the arena is created and mapped, the worker is ready
//! (unless the explicit deferred-worker policy is chosen), the iroh endpoint is bound to
//! the node key, the SWIM participant has joined or is joining, and provisioning is
//! accepted. (The process being alive is implied by the state machine running.) The first
//! failed resource faults the boot with its own reason; later reports change nothing. A
//! boot that has not completed by its deadline faults with the reason of the first fact
//! missing in bring-up order (identity, arena, worker, transport, membership, control
//! inbox, provisioning): the one it was waiting for. Nothing here assigns stages, edges or ranges: availability says nothing about
//! weights, roles or edges.

use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::wire::NodeId;
use crate::wire::reason::BootFault;

/// One readiness fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BootFact {
    /// The control inbox accepts messages.
    ControlInbox,
    /// The node key is loaded and valid.
    Identity,
    /// The arena is created and mapped.
    Arena,
    /// The worker reported ready.
    Worker,
    /// The iroh endpoint is bound to the node key.
    Transport,
    /// The SWIM participant joined or is joining the pool.
    Membership,
    /// The node accepts run provisioning.
    Provisioning,
}

impl BootFact {
    /// The boot fault reported when this fact cannot be established.
    pub fn fault(self) -> BootFault {
        match self {
            BootFact::ControlInbox | BootFact::Provisioning => BootFault::ControlInbox,
            BootFact::Identity => BootFault::IdentityInvalid,
            BootFact::Arena => BootFault::ArenaCreate,
            BootFact::Worker => BootFault::WorkerInitTimeout,
            BootFact::Transport => BootFault::TransportBind,
            BootFact::Membership => BootFault::MembershipJoin,
        }
    }
}

/// Whether the worker must be ready before the node is available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerPolicy {
    /// The worker is part of boot (the default).
    Eager,
    /// The worker starts later; stages wait for it before reporting ready, which keeps the
    /// same run-level guarantee.
    Deferred,
}

/// Boot settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootConfig {
    /// The node's id.
    pub node_id: NodeId,
    /// Worker policy.
    pub worker: WorkerPolicy,
    /// How long boot may take.
    pub timeout: Duration,
}

/// What boot reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootEvent {
    /// Boot began.
    Started {
        /// The node.
        node_id: NodeId,
    },
    /// Every readiness fact holds.
    NodeAvailable {
        /// The node.
        node_id: NodeId,
    },
    /// A resource failed: the node is not eligible for planning.
    BootFaulted {
        /// The node.
        node_id: NodeId,
        /// The first failure.
        reason: BootFault,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Booting { deadline: Instant },
    Available,
    Faulted,
}

/// The node boot state machine.
#[derive(Debug)]
pub struct NodeBoot {
    config: BootConfig,
    state: State,
    ready: BTreeSet<BootFact>,
    events: VecDeque<BootEvent>,
}

impl NodeBoot {
    /// Starts a boot attempt at `now`.
    pub fn new(now: Instant, config: BootConfig) -> NodeBoot {
        let mut events = VecDeque::new();
        events.push_back(BootEvent::Started { node_id: config.node_id });
        NodeBoot {
            config,
            state: State::Booting { deadline: now + config.timeout },
            ready: BTreeSet::new(),
            events,
        }
    }

    /// The facts still missing, in bring-up order (the order a node establishes them in:
    /// the first missing one is the one a boot past its deadline was waiting for).
    pub fn missing(&self) -> Vec<BootFact> {
        self.required().into_iter().filter(|f| !self.ready.contains(f)).collect()
    }

    fn required(&self) -> Vec<BootFact> {
        let mut all = vec![
            BootFact::Identity,
            BootFact::Arena,
            BootFact::Worker,
            BootFact::Transport,
            BootFact::Membership,
            BootFact::ControlInbox,
            BootFact::Provisioning,
        ];
        if self.config.worker == WorkerPolicy::Deferred {
            all.retain(|f| *f != BootFact::Worker);
        }
        all
    }

    /// A readiness fact now holds.
    pub fn fact_ready(&mut self, fact: BootFact) {
        if !matches!(self.state, State::Booting { .. }) {
            return;
        }
        self.ready.insert(fact);
        if self.missing().is_empty() {
            self.state = State::Available;
            self.events.push_back(BootEvent::NodeAvailable { node_id: self.config.node_id });
        }
    }

    /// A resource failed. Faults the boot unless it already ended.
    pub fn resource_failed(&mut self, reason: BootFault) {
        if matches!(self.state, State::Booting { .. }) {
            self.state = State::Faulted;
            self.events.push_back(BootEvent::BootFaulted { node_id: self.config.node_id, reason });
        }
    }

    /// The boot deadline, while booting.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            State::Booting { deadline } => Some(deadline),
            _ => None,
        }
    }

    /// Faults a boot that missed its deadline with the first missing fact's reason.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let State::Booting { deadline } = self.state
            && now >= deadline
            && let Some(first) = self.missing().first()
        {
            self.resource_failed(first.fault());
        }
    }

    /// Whether the node is available (and so may be provisioned).
    pub fn is_available(&self) -> bool {
        self.state == State::Available
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<BootEvent> {
        self.events.pop_front()
    }
}

#[cfg(test)]
mod tests;
