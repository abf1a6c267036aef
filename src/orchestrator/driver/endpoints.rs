//! The orchestrator's token endpoints as the local user of its two rings: the token-in
//! producer on the first edge, the token-out consumer on the last. The shared edge
//! executor attaches them when the rings are installed and detaches them (their `stop` is
//! the evidence that they let go) when the edges stop.

use std::sync::Arc;

use iroh::Endpoint;
use tokio::sync::mpsc;

use super::OrchestrateError;
use crate::arena::{Arena, ArenaManager};
use crate::edge::executor::PlaneExecutor;
use crate::edge::executor::{AttachFault, Hint, Ring, RingUser};
use crate::edge::plane::EdgePlane;
use crate::events::Direction;
use crate::net::edge::EdgeRouter;
use crate::orchestrator::tokens::{TokenIn, TokenOut};
use crate::wire::evidence::WorkerQuiet;
use crate::wire::reason::Component;
use crate::wire::{EdgeId, ObjectSpec, RingId, RingLayout, RunPlan};

/// What the token endpoints' pumps tell the run loop.
#[derive(Debug)]
pub(super) enum Wake {
    /// A pump's notice, for the plane.
    Pump(EdgeId, crate::edge::executor::PumpNotice),
    /// The send pump freed token-in ring space.
    TokenInWritable,
    /// The receive pump committed token-out bytes.
    TokenOutReadable,
}

/// The token endpoints, once their rings exist.
pub(super) struct TokenUser {
    pub(super) token_in: Option<(RingId, TokenIn<Ring>)>,
    pub(super) token_out: Option<(RingId, TokenOut<Ring>)>,
    /// Where the pumps' wake-ups go (the run loop).
    pub(super) wakes: mpsc::UnboundedSender<Wake>,
}

impl RingUser for TokenUser {
    async fn attach(
        &mut self,
        edge_id: EdgeId,
        direction: Direction,
        layout: RingLayout,
        object: ObjectSpec,
        ring: Ring,
    ) -> Result<bool, AttachFault> {
        let ring_id = layout.ring_id;
        match direction {
            Direction::Send => self.token_in = Some((ring_id, TokenIn::new(ring_id, ring))),
            Direction::Recv => {
                self.token_out = Some((ring_id, TokenOut::new(ring_id, edge_id, object, ring)))
            }
        }
        Ok(true)
    }

    fn detach(&mut self, ring_id: RingId) -> Option<WorkerQuiet> {
        if self.token_in.as_ref().is_some_and(|(r, _)| *r == ring_id) {
            return self.token_in.take().map(|(_, t)| t.stop());
        }
        if self.token_out.as_ref().is_some_and(|(r, _)| *r == ring_id) {
            return self.token_out.take().map(|(_, t)| t.stop());
        }
        None
    }

    fn drained_hint(&self, _ring_id: RingId) -> Hint {
        let wakes = self.wakes.clone();
        Box::new(move || drop(wakes.send(Wake::TokenInWritable)))
    }

    fn filled_hint(&self, _ring_id: RingId) -> Hint {
        let wakes = self.wakes.clone();
        Box::new(move || drop(wakes.send(Wake::TokenOutReadable)))
    }
}

/// One run's token endpoints: their plane, executor and pumps' wake-ups.
pub(super) struct Parts {
    pub(super) plane: EdgePlane,
    pub(super) executor: PlaneExecutor,
    pub(super) user: TokenUser,
    pub(super) wakes: mpsc::UnboundedReceiver<Wake>,
}

impl Parts {
    /// The token endpoints' arena, plane and executor for `plan`; only its nodes may open
    /// an edge stream before the token-out edge is provisioned.
    pub(super) fn new(
        plan: &RunPlan,
        endpoint: &Endpoint,
        router: &EdgeRouter,
    ) -> Result<Parts, OrchestrateError> {
        let ring_bytes = |e: Option<&crate::wire::EdgePlan>| {
            e.map_or(0, |e| crate::planner::ring_arena_bytes(&e.ring))
        };
        let arena_bytes = ring_bytes(plan.edges.first())
            + ring_bytes(plan.edges.last())
            + 2 * crate::arena::manager::LEASE_PAGE;
        let arena = Arc::new(
            Arena::create(arena_bytes)
                .map_err(|e| OrchestrateError::Setup(format!("token endpoint arena: {e}")))?,
        );
        let mut manager = ArenaManager::new(arena_bytes);
        manager.arena_ready();
        let planned: std::collections::HashSet<[u8; 32]> = plan
            .nodes
            .iter()
            .filter_map(|p| {
                p.endpoint_id.as_deref().and_then(crate::membership::auth::parse_key_hex)
            })
            .collect();
        router.admit_early(Arc::new(move |peer| planned.contains(peer.as_bytes())));
        // A fresh channel per run: a late notice of an earlier run's pump reaches nobody.
        let (tx, wakes) = mpsc::unbounded_channel();
        let notices = tx.clone();
        let executor =
            PlaneExecutor::new(endpoint.clone(), router.clone(), arena, move |edge, n| {
                let _ = notices.send(Wake::Pump(edge, n));
            });
        let plane = EdgePlane::new(manager, Component::TokenEndpoint);
        Ok(Parts {
            plane,
            executor,
            user: TokenUser { token_in: None, token_out: None, wakes: tx },
            wakes,
        })
    }
}
