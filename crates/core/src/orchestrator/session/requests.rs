//! The session's requests: their arrival and submission (or refusal, or waiting while the
//! session re-forms), cancellation, their tokens and ends, and the results given out.

use std::time::Instant;

use super::{Session, SessionOutput};
use crate::orchestrator::requests::Request;
use crate::orchestrator::scheduler::{FinishReason, SeqOutput, SeqRequest};

impl Session<'_> {
    /// Request `index` (known to the book) arrived at `now`: it is submitted.
    pub fn arrived(&mut self, now: Instant, index: usize, request: Request) {
        self.book.arrived(index, request);
        self.submit(now, index);
    }

    /// A request without a known index (a server's) arrived at `now`: it is submitted.
    /// Returns its index, which its outputs carry.
    pub fn push(&mut self, now: Instant, request: Request) -> usize {
        let index = self.book.push(request);
        self.submit(now, index);
        index
    }

    /// No more requests will come: the session completes once it holds none.
    pub fn close_input(&mut self, now: Instant) {
        self.input_closed = true;
        self.fsm.close_input(now);
    }

    /// Submits request `index` (arrived) to the run, or ends it with the session's reason
    /// once the run has an outcome; while the session re-forms — or may yet: the run
    /// faulted and waits for the fault's cause — it waits for the next run, as many as the
    /// queue holds (more are refused at once, as a full queue refuses them).
    pub(super) fn submit(&mut self, now: Instant, index: usize) {
        // A request ends once: one that already has its result (the session's end reached
        // it before it arrived) is not run.
        let Some(r) = self.book.request(index) else { return };
        if self.book.result(index).is_some() {
            return;
        }
        if self.fsm.outcome().is_some() && (self.reforming.is_some() || self.may_reform()) {
            if self.waiting.len() >= self.config.limits.queue_capacity {
                self.book.refused(index, "busy");
                self.unsent.push(index);
                return;
            }
            self.waiting.push(index);
            return;
        }
        if self.fsm.outcome().is_some() {
            let reason = self.end_reason().to_string();
            self.book.refused(index, &reason);
            self.unsent.push(index);
            return;
        }
        let req = SeqRequest {
            prompt: r.prompt.clone(),
            max_tokens: r.max_tokens,
            sampling: r.sampling,
            logprobs: r.logprobs,
            speculative: r.speculative,
            cache_prompt: r.cache_prompt,
            constraint: r.constraint.clone(),
        };
        match self.fsm.submit(now, req) {
            Ok(seq) => self.book.admitted(index, seq),
            Err(refusal) => {
                self.book.refused(index, refusal.code());
                self.unsent.push(index);
            }
        }
    }

    /// Whether the run faulted and its fault is not reported yet (a consequence waits for
    /// its cause): the session may still re-form.
    fn may_reform(&self) -> bool {
        let faulted = self.fsm.outcome() == Some(crate::events::RunOutcome::Faulted);
        faulted && self.fault.is_none() && self.config.resume.enabled
    }

    /// The run's fault was reported and the session does not re-form: the requests that
    /// waited to see end with it.
    pub(super) fn refuse_waiting(&mut self) {
        let reason = self.end_reason().to_string();
        for index in std::mem::take(&mut self.waiting) {
            self.book.refused(index, &reason);
            self.unsent.push(index);
        }
    }

    /// Request `index`'s client went away: its sequence is cancelled (its slot frees); kept
    /// to resume, or waiting while the session re-forms, it is not run.
    pub fn cancel(&mut self, now: Instant, index: usize) {
        if let Some(seq) = self.book.seq_of(index) {
            self.fsm.cancel(now, seq, FinishReason::Cancelled);
            return;
        }
        if !self.end_kept(index, FinishReason::Cancelled, "")
            && let Some(at) = self.waiting.iter().position(|i| *i == index)
        {
            self.waiting.remove(at);
            self.book.refused(index, "cancelled");
            self.give_result(index);
        }
    }

    /// Kept request `index` ends without resuming (`reason`, `error` for a fault): its
    /// text and result go out. Returns whether it was kept.
    pub(super) fn end_kept(&mut self, index: usize, reason: FinishReason, error: &str) -> bool {
        let Some((_, _, rest)) = self.book.end_kept(index, reason, error) else { return false };
        self.ended(index, rest);
        true
    }

    /// Request `index` ended: the text it had not released yet (`rest`), then its result.
    fn ended(&mut self, index: usize, rest: String) {
        if !rest.is_empty() {
            self.out.push_back(SessionOutput::Text { index, text: rest.clone() });
        }
        self.give_result(index);
        if index == 0 {
            self.tail = rest;
        }
    }

    /// Gives request `index`'s result out (a server's book then forgets it).
    pub(super) fn give_result(&mut self, index: usize) {
        let Some(result) = self.book.result(index).cloned() else { return };
        self.out.push_back(SessionOutput::Result { index, result });
        if self.config.forget_given {
            self.book.forget(index);
        }
    }

    /// After teardown: every request without a result (one that never arrived) ends with
    /// the session's reason. Returns whether the session is over (`false`: it re-forms,
    /// and everything is kept for the next run).
    pub fn resolve_rest(&mut self) -> bool {
        if self.reforming.is_some() {
            return false;
        }
        let reason = self.end_reason().to_string();
        for index in self.book.unresolved() {
            if self.book.refused(index, &reason).is_some() {
                self.give_result(index);
            }
        }
        true
    }

    /// A sequence's token or end: its text goes out; a stop string cancels it; a fault
    /// while the session re-forms keeps it, with its text and log, to resume.
    pub(super) fn output(&mut self, now: Instant, out: SeqOutput) {
        match out {
            SeqOutput::Logprobs { id, logprobs } => {
                self.held.insert(id, logprobs);
            }
            SeqOutput::Token { id, token } => {
                let logprobs = self.held.remove(&id);
                let Some(note) = self.book.token(now, id, token) else { return };
                self.first_token_at.get_or_insert(now);
                self.last_token_at = now;
                if note.index == 0 {
                    self.tokens.push(token);
                }
                let (index, piece) = (note.index, note.piece);
                self.out.push_back(SessionOutput::Token { index, token, piece, logprobs });
                if note.stop {
                    self.fsm.cancel(now, id, FinishReason::Stop);
                }
            }
            SeqOutput::Finished { id, reason, prompt, generated, cached } => {
                if reason == FinishReason::Fault && self.reforming.is_some() {
                    self.held.remove(&id);
                    self.book.keep(id, &prompt, generated);
                    return;
                }
                let fault = self.end_reason().to_string();
                let finished = self.book.finished(id, reason, &prompt, generated, cached, &fault);
                if let Some((index, _, rest)) = finished {
                    self.ended(index, rest);
                }
            }
        }
    }
}
