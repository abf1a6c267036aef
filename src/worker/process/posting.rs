//! Ingress polling and posted steps: objects loaded from a ring a budget at a time, each
//! taken by the step posted for exactly its ring, edge and sequence, if any.

use super::{InputBinding, POLL_BUDGET, PendingStep, Slot, Worker};
use crate::wire::RingId;
use crate::wire::reason::StepFailure;
use crate::worker::posted::{Post, PostOutcome};
use crate::worker::protocol::Event;

impl Worker {
    /// Consumes what the ring holds, a budget at a time, waking the producer (through the
    /// doorbell) for the space each batch released while the next is copied.
    pub(super) fn poll_ingress(&mut self, ring_id: RingId) {
        loop {
            let read = |w: &Self| match w.rings.get(&ring_id) {
                Some(Slot::Ingress { consumer, .. }) => Some(consumer.read_total()),
                _ => None,
            };
            let before = read(self);
            self.poll_ingress_once(ring_id);
            self.ring_node();
            if read(self) == before {
                return;
            }
        }
    }

    pub(super) fn poll_ingress_once(&mut self, ring_id: RingId) {
        let Some(ready) = self.ready.as_mut() else { return };
        if let Some(Slot::Ingress { consumer, parser }) = self.rings.get_mut(&ring_id) {
            let mut events = parser.poll_budget(consumer, ready.bridge.as_mut(), POLL_BUDGET);
            for e in &mut events {
                if let Event::ObjectLoaded {
                    handle,
                    edge_id,
                    object_id,
                    sequence,
                    extent,
                    taken_by,
                    at_us,
                    ..
                } = e
                {
                    *at_us = Some(crate::clock::monotonic_us());
                    self.origin.insert(*handle, ring_id);
                    // A step posted for exactly this ring, edge and sequence takes it; it
                    // starts once this polling is over (see `handle`).
                    if let Some(p) = self.posted.claim(ring_id, *edge_id, *sequence) {
                        *taken_by = Some(p.step_id);
                        self.pending.push_back(PendingStep {
                            role_id: p.role_id,
                            step_id: p.step_id,
                            inputs: vec![InputBinding {
                                port: p.port,
                                object_id: *object_id,
                                sequence: *sequence,
                                handle: *handle,
                            }],
                            outputs: vec![p.output.bind(*extent)],
                            release_inputs_after: true,
                        });
                    }
                }
            }
            self.events.extend(events);
        }
    }
    /// Takes a posted step: it waits for its object, or is answered at once (passed:
    /// withdrawn; rejected: failed).
    pub(super) fn post(&mut self, post: Post) {
        if self.stopping.is_some() {
            let (role_id, step_id) = (post.role_id, post.step_id);
            self.events.push(Event::StepWithdrawn { role_id, step_id });
            return;
        }
        let ring = match self.rings.get(&post.ring_id) {
            Some(Slot::Ingress { parser, .. }) if !parser.is_faulted() && !parser.is_closed() => {
                Some((parser.edge_id(), parser.next_sequence()))
            }
            _ => None,
        };
        let (role_id, step_id) = (post.role_id, post.step_id);
        match self.posted.post(post, ring) {
            PostOutcome::Waiting => {}
            PostOutcome::Passed => self.events.push(Event::StepWithdrawn { role_id, step_id }),
            PostOutcome::Rejected => {
                let reason = StepFailure::PostRejected;
                self.events.push(Event::StepFailed { role_id, step_id, reason });
            }
        }
    }
    /// Withdraws the posts matching `f`, reporting each.
    pub(super) fn withdraw_where(&mut self, f: impl FnMut(&Post) -> bool) {
        for p in self.posted.withdraw_where(f) {
            self.events.push(Event::StepWithdrawn { role_id: p.role_id, step_id: p.step_id });
        }
    }
}
