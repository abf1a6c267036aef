//! A session's drafting as data: the jobs its scheduler emits for a drafter outside the
//! core, the answers it takes back, and how long a group waits for one (a trip, as
//! measured; the token timeout until measured).

use std::time::Instant;

use super::{RunFsm, State};
use crate::speculate::{DraftAnswer, DraftJob};

impl RunFsm {
    /// The session's drafts come from a drafter outside the core (a draft model its
    /// driver runs off the reactor), whose step costs `step_cost` of the target's: it
    /// emits [`DraftJob`]s ([`RunFsm::poll_draft_job`]) and takes their answers
    /// ([`RunFsm::drafts_ready`]). Without it a speculating session drafts by the n-gram
    /// lookup in the core.
    pub fn draft_externally(&mut self, step_cost: f64) {
        self.sched.draft_externally(self.run_id, step_cost);
    }

    /// The next job for the session's drafter outside the core, in order.
    pub fn poll_draft_job(&mut self) -> Option<DraftJob> {
        self.draft_jobs.pop_front()
    }

    /// A drafter's answer to one of the session's draft requests: the group that waits
    /// for it forms its micro-batch. A stale answer (another run's, one whose wait was
    /// given up, or for sequences that ended) drafts nothing; the output is the same.
    pub fn drafts_ready(&mut self, now: Instant, answer: DraftAnswer) {
        if self.outcome.is_some() {
            return;
        }
        self.ask_deadlines.retain(|(id, _)| *id != answer.id);
        if self.sched.drafts_ready(answer) {
            self.pump(now);
        }
    }

    /// Moves the scheduler's new jobs out, each draft request with the time its group
    /// stops waiting for the answer.
    pub(super) fn take_draft_jobs(&mut self, now: Instant) {
        while let Some(job) = self.sched.poll_draft_job() {
            if let DraftJob::Draft(request) = &job {
                let wait = self.sched.draft_wait().unwrap_or(self.timeouts.token);
                self.ask_deadlines.push_back((request.id, now + wait));
            }
            self.draft_jobs.push_back(job);
        }
    }

    /// The earliest time a group stops waiting for its drafts.
    pub(super) fn ask_deadline(&self) -> Option<Instant> {
        self.ask_deadlines.iter().map(|(_, at)| *at).min()
    }

    /// Gives up the waits that ran out by `now` (their groups form without drafts).
    pub(super) fn give_up_overdue_asks(&mut self, now: Instant) {
        if !matches!(self.state, State::Running { .. }) {
            return;
        }
        let (due, left) = std::mem::take(&mut self.ask_deadlines)
            .into_iter()
            .partition::<Vec<_>, _>(|(_, at)| *at <= now);
        self.ask_deadlines = left.into();
        if !due.is_empty() {
            for (id, _) in due {
                self.sched.give_up_ask(id);
            }
            self.pump(now);
        }
    }
}
