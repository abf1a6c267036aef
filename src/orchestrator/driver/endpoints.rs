//! The orchestrator's token endpoints as the local user of its two rings: the token-in
//! producer on the first edge, the token-out consumer on the last. The shared edge
//! executor attaches them when the rings are installed and detaches them (their `stop` is
//! the evidence that they let go) when the edges stop.

use tokio::sync::mpsc;

use super::run_loop::Wake as LoopWake;
use crate::edge::executor::{AttachFault, Hint, Ring, RingUser};
use crate::events::Direction;
use crate::orchestrator::tokens::{TokenIn, TokenOut};
use crate::wire::evidence::WorkerQuiet;
use crate::wire::{EdgeId, ObjectSpec, RingId, RingLayout};

/// The token endpoints, once their rings exist.
pub(super) struct TokenUser {
    pub(super) token_in: Option<(RingId, TokenIn<Ring>)>,
    pub(super) token_out: Option<(RingId, TokenOut<Ring>)>,
    /// Where the pumps' wake-ups go (the run loop).
    pub(super) wakes: mpsc::UnboundedSender<LoopWake>,
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
        Box::new(move || drop(wakes.send(LoopWake::TokenInWritable)))
    }

    fn filled_hint(&self, _ring_id: RingId) -> Hint {
        let wakes = self.wakes.clone();
        Box::new(move || drop(wakes.send(LoopWake::TokenOutReadable)))
    }
}
