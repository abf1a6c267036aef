//! A drafter outside the core, as the simulation plays it (drafting as data): half of
//! the speculating seeds draft through the session's draft requests rather than the
//! n-gram lookup in the core. Each request is answered from the reference (what the
//! model will say), wrong from a token the seed picks on, after a delay the seed picks;
//! an answer later than its group's wait is given up by the session. Neither draws from
//! the world's stream, so the other seeds run as they did.

use std::time::Duration;

use super::{EOS, Ev, MAX_SEQ, VOCAB, World};
use crate::orchestrator::session::Session;
use crate::sim::model::{self, mix};
use crate::speculate::{DraftAnswer, DraftAsk, DraftJob};

/// An answer's delay at most, in microseconds (a trip of the simulated pipeline takes a
/// few milliseconds: most answers come within the wait, some after it).
const MAX_DELAY_US: u64 = 6000;

impl World {
    /// Answers the session's draft requests (a warm needs nothing of this drafter).
    pub(super) fn answer_drafts(&mut self) {
        while let Some(job) = self.session.as_mut().and_then(Session::poll_draft_job) {
            let DraftJob::Draft(request) = job else { continue };
            let h = mix(self.report.seed, mix(request.id.run.0, request.id.number));
            let drafts: Vec<Vec<u32>> = (request.asks.iter().enumerate())
                .map(|(i, a)| self.oracle_draft(a, mix(h, i as u64)))
                .collect();
            let delay = Duration::from_micros(h % MAX_DELAY_US);
            let drafted = drafts.iter().map(Vec::len).sum::<usize>().max(1);
            self.trace(format!("drafts for ask {} in {delay:?}", request.id.number));
            let seconds_per_token = Some(delay.as_secs_f64() / drafted as f64);
            let answer = DraftAnswer { id: request.id, drafts, seconds_per_token };
            self.at(self.now + delay, Ev::Drafts(answer));
        }
    }

    /// An answer reaches the session (the current run's, or a stale one it ignores).
    pub(super) fn drafts_arrived(&mut self, answer: DraftAnswer) {
        let now = self.instant();
        if let Some(session) = self.session.as_mut() {
            session.drafts_ready(now, answer);
        }
    }

    /// Up to `ask.k` tokens of the reference after `ask.history`, the one at a position
    /// `h` picks (if within the draft) changed: the target rejects it and what follows.
    fn oracle_draft(&self, ask: &DraftAsk, h: u64) -> Vec<u32> {
        for r in &self.reqs {
            let mut full = r.prompt.clone();
            let (max, t) = (r.max_tokens, r.temperature);
            full.extend(model::reference(&r.prompt, max, t, r.seed, VOCAB, Some(EOS), MAX_SEQ));
            if full.len() > ask.history.len() && full.starts_with(&ask.history) {
                let mut draft: Vec<u32> = full[ask.history.len()..].to_vec();
                draft.truncate(ask.k);
                if let Some(t) = draft.get_mut((h % (ask.k as u64 + 2)) as usize) {
                    *t = (*t + 1) % VOCAB;
                }
                return draft;
            }
        }
        Vec::new()
    }
}
