//! The run loop's requests: a batch job's arrivals and a server's submissions,
//! cancellations and questions, carried to the session.

use std::time::Instant;

use super::RunLoop;
use crate::orchestrator::driver::next_arrival;
use crate::orchestrator::driver::served::{
    PromptCacheView, Routed, SlotsReport, Submission, next_routed,
};
use crate::orchestrator::requests::Request;

impl RunLoop<'_> {
    /// A request arrived (`None`: no more will).
    pub(super) fn arrive(&mut self, arrived: Option<(usize, Request)>) {
        let now = Instant::now();
        match arrived {
            Some((index, request)) => self.session.arrived(now, index, request),
            None => {
                self.arriving = None;
                self.session.close_input(now);
            }
        }
    }

    /// A server's request arrived (`None`: no more will).
    fn submission(&mut self, sub: Option<Submission>) {
        let now = Instant::now();
        let Some(routes) = self.served.as_mut() else { return };
        match sub {
            // Its client went away before it was read: nothing to run.
            Some(s) if s.reply.is_closed() => {}
            Some(Submission { ticket, request, reply }) => {
                // Its route is known before anything of it goes out.
                let index = self.session.push(now, request);
                routes.add(index, ticket, reply);
            }
            None => {
                routes.close();
                self.session.close_input(now);
            }
        }
    }

    /// What a server's channels brought: a request, a cancellation, a question about the
    /// slots.
    pub(super) fn routed(&mut self, routed: Routed) {
        match routed {
            Routed::Submission(sub) => self.submission(sub),
            Routed::Cancel(ticket) => {
                let index = self.served.as_ref().and_then(|r| r.cancelled(ticket));
                if let Some(index) = index {
                    self.session.cancel(Instant::now(), index);
                }
            }
            Routed::Slots(answer) => {
                let (slots, queued) = self.session.slots();
                let plan = self.session.plan();
                let prompt_cache = PromptCacheView {
                    blocks: plan.prompt_cache.blocks,
                    block_tokens: plan.prompt_cache.block_tokens,
                    blocks_used: self.session.prefix_counters().store_blocks,
                    bytes: plan.stages.iter().map(|s| s.prediction.prompt_cache_bytes).sum(),
                };
                let _ = answer.send(SlotsReport { slots, queued, prompt_cache });
            }
        }
    }

    /// The next request, cancellation or question of a batch job's or a server's input
    /// (pending forever when none can come), carried to the session (what it asks then is
    /// the caller's to execute: [`RunLoop::drain`]).
    pub(in crate::orchestrator::driver) async fn next_input(&mut self) {
        tokio::select! {
            arrived = next_arrival(&mut self.arriving) => self.arrive(arrived),
            routed = next_routed(&mut self.served) => self.routed(routed),
        }
    }
}
