//! The run loop's requests: submitting them, routing a server's, their tokens and ends,
//! and keeping them across a re-formation (resumed on the next run, or ended with the
//! fault when re-forming is given up).

use std::time::Instant;

use super::RunLoop;
use crate::events::{Event, RunOutcome};
use crate::orchestrator::driver::served::{Reply, Routed, SlotsReport, Submission, next_routed};
use crate::orchestrator::driver::{RunSink, emit, next_arrival};
use crate::orchestrator::reform::{KeptEnd, REPLAY_TOO_LONG, Reformation, resubmission};
use crate::orchestrator::requests::Request;
use crate::orchestrator::scheduler::{FinishReason, SeqOutput, SeqRequest};
use crate::wire::reason::FaultReason;

impl RunLoop<'_> {
    /// Submits request `index` (arrived) to the session, or ends it with the session's
    /// reason once the session has an outcome.
    pub(super) fn submit(&mut self, index: usize) {
        let now = Instant::now();
        let Some(r) = self.book.request(index) else { return };
        if self.fsm.outcome().is_some() && self.reforming.is_some() {
            // The session re-forms: the request waits for the next run, as many as the
            // queue holds (more are refused at once, as a full queue refuses them).
            if self.waiting.len() >= self.queue_capacity {
                self.book.refused(index, "busy");
                self.unsent.push(index);
                return;
            }
            self.waiting.push(index);
            return;
        }
        if self.fsm.outcome().is_some() {
            let reason = self.end_reason();
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
        };
        match self.fsm.submit(now, req) {
            Ok(seq) => self.book.admitted(index, seq),
            Err(refusal) => {
                self.book.refused(index, refusal.code());
                self.unsent.push(index);
            }
        }
    }

    /// A request arrived (`None`: no more will).
    pub(super) fn arrive(&mut self, arrived: Option<(usize, Request)>) {
        match arrived {
            Some((index, request)) => {
                self.book.arrived(index, request);
                self.submit(index);
            }
            None => {
                self.arriving = None;
                self.input_closed = true;
                self.fsm.close_input(Instant::now());
            }
        }
    }

    /// A server's request arrived (`None`: no more will).
    pub(super) fn submission(&mut self, sub: Option<Submission>) {
        let Some(routes) = self.served.as_mut() else { return };
        match sub {
            // Its client went away before it was read: nothing to run.
            Some(s) if s.reply.is_closed() => {}
            Some(Submission { ticket, request, reply }) => {
                let index = self.book.push(request);
                routes.add(index, ticket, reply);
                self.submit(index);
            }
            None => {
                routes.close();
                self.input_closed = true;
                self.fsm.close_input(Instant::now());
            }
        }
    }

    /// A server's client went away: its sequence is cancelled (its slot frees).
    pub(super) fn cancelled(&mut self, ticket: u64, sink: &mut dyn RunSink) {
        let Some(index) = self.served.as_ref().and_then(|r| r.cancelled(ticket)) else { return };
        if let Some(seq) = self.book.seq_of(index) {
            self.fsm.cancel(Instant::now(), seq, FinishReason::Cancelled);
            return;
        }
        // Kept to resume, or waiting, while the session re-forms: it is not run.
        if !self.end_kept(index, FinishReason::Cancelled, "", sink)
            && let Some(at) = self.waiting.iter().position(|i| *i == index)
        {
            self.waiting.remove(at);
            self.book.refused(index, "cancelled");
            self.give_result(index, sink);
        }
    }

    /// What a server's channels brought: a request, a cancellation, a question about the
    /// slots.
    pub(in crate::orchestrator::driver) fn routed(
        &mut self,
        routed: Routed,
        sink: &mut dyn RunSink,
    ) {
        match routed {
            Routed::Submission(sub) => {
                self.submission(sub);
                // A refusal goes out at once, a re-forming session's too.
                for index in std::mem::take(&mut self.unsent) {
                    self.give_result(index, sink);
                }
            }
            Routed::Cancel(ticket) => self.cancelled(ticket, sink),
            Routed::Slots(answer) => {
                let (slots, queued) = self.fsm.slots();
                let _ = answer.send(SlotsReport { slots, queued });
            }
        }
    }

    /// The next request, cancellation or question of a batch job's or a server's input
    /// (pending forever when none can come), handled.
    pub(in crate::orchestrator::driver) async fn next_input(&mut self, sink: &mut dyn RunSink) {
        tokio::select! {
            arrived = next_arrival(&mut self.arriving) => self.arrive(arrived),
            routed = next_routed(&mut self.served) => self.routed(routed, sink),
        }
    }

    /// The session faulted with `cause`: a node loss the policy survives starts a
    /// re-formation (its sequences are kept as they end). Returns whether it did.
    pub(super) fn faulted(&mut self, cause: FaultReason, sink: &mut dyn RunSink) -> bool {
        // Nothing to resume and nothing more to come: the session simply ends.
        let idle = self.input_closed && self.load == (0, 0) && self.waiting.is_empty();
        if self.reforming.is_some() || idle || !self.resume.survives(cause) {
            return false;
        }
        self.reforming = Some(Reformation::start(Instant::now(), cause, &self.resume));
        let sequences = (self.load.0 + self.load.1) as u32;
        let run_id = self.plan.run_id;
        emit(sink, self.t0, Event::SessionReforming { run_id, cause, sequences });
        true
    }

    /// Kept request `index` resumes on the re-formed run, or ends (`cause`: the fault
    /// that started the re-formation).
    pub(super) fn resume_kept(
        &mut self,
        index: usize,
        cause: Option<FaultReason>,
        sink: &mut dyn RunSink,
    ) {
        let (Some(request), Some(replay)) = (self.book.request(index), self.book.replay(index))
        else {
            return;
        };
        let fault = cause.map(|c| c.to_string()).unwrap_or_default();
        let max = self.plan.runtime.max_seq_len;
        // A pool that grew is no failure: it does not use up the sequence's resumes.
        let counted = cause.is_none_or(|c| c.counts_as_resume());
        let policy = if counted {
            self.resume
        } else {
            crate::orchestrator::reform::ResumePolicy { max_resumes: u32::MAX, ..self.resume }
        };
        let (reason, error) = match resubmission(&policy, request, &replay, max) {
            Ok(req) => match self.fsm.submit(Instant::now(), req) {
                Ok(seq) => {
                    self.book.resumed(index, seq, counted);
                    let (run_id, replayed_tokens) = (self.plan.run_id, replay.tokens.len() as u32);
                    emit(
                        sink,
                        self.t0,
                        Event::SequenceResumed { run_id, id: seq, replayed_tokens },
                    );
                    return;
                }
                Err(refusal) => (FinishReason::Fault, refusal.code().to_string()),
            },
            Err(KeptEnd::Finished(reason)) => (reason, String::new()),
            Err(KeptEnd::CapReached) => (FinishReason::Fault, fault),
            Err(KeptEnd::TooLong) => (FinishReason::Fault, REPLAY_TOO_LONG.to_string()),
        };
        self.end_kept(index, reason, &error, sink);
    }

    /// Kept request `index` ends without resuming (`reason`, `error` for a fault): its
    /// text and result go out. Returns whether it was kept.
    pub(super) fn end_kept(
        &mut self,
        index: usize,
        reason: FinishReason,
        error: &str,
        sink: &mut dyn RunSink,
    ) -> bool {
        let Some((_, _, rest)) = self.book.end_kept(index, reason, error) else { return false };
        self.ended(index, rest, sink);
        true
    }

    /// Request `index` ended: the text it had not released yet (`rest`), then its result.
    fn ended(&mut self, index: usize, rest: String, sink: &mut dyn RunSink) {
        if !rest.is_empty() {
            sink.text(index, &rest);
            if let Some(routes) = self.served.as_mut() {
                routes.send(index, Reply::Text(rest.clone()));
            }
        }
        self.give_result(index, sink);
        if index == 0 {
            self.tail = rest;
        }
    }

    /// Gives request `index`'s result to the sink and, for a served one, its client.
    pub(super) fn give_result(&mut self, index: usize, sink: &mut dyn RunSink) {
        let Some(r) = self.book.result(index) else { return };
        sink.result(index, r);
        if let Some(routes) = self.served.as_mut() {
            routes.send(index, Reply::Done(r.clone()));
            // The client has it: a long-lived server's book keeps only what is live.
            self.book.forget(index);
        }
    }

    /// Why a request that did not finish ended: the session's fault, the operator's stop,
    /// or the session's end.
    pub(super) fn end_reason(&self) -> String {
        if self.stopped {
            return "operator.stopped".into();
        }
        match (self.fault, self.fsm.outcome()) {
            (Some(f), _) => f.reason.to_string(),
            (None, Some(RunOutcome::OperatorStopped)) => "operator.stopped".into(),
            _ => "session.ended".into(),
        }
    }

    /// After teardown: every request without a result (one that never arrived) ends with
    /// the session's reason; requests still arriving are no longer awaited.
    pub(super) fn resolve_rest(&mut self, sink: &mut dyn RunSink) {
        if self.reforming.is_some() {
            // Everything is kept for the re-formed session.
            return;
        }
        self.arriving = None;
        if let Some(routes) = self.served.as_mut() {
            routes.close();
        }
        let reason = self.end_reason();
        for index in self.book.unresolved() {
            if self.book.refused(index, &reason).is_some() {
                self.give_result(index, sink);
            }
        }
    }

    /// A sequence's token or end: its text to the sink; a stop string cancels it.
    pub(super) fn output(&mut self, out: SeqOutput, sink: &mut dyn RunSink) {
        let now = Instant::now();
        match out {
            SeqOutput::Logprobs { id, logprobs } => {
                if let Some(routes) = self.served.as_mut() {
                    routes.hold_logprobs(id, logprobs);
                }
            }
            SeqOutput::Token { id, token } => {
                let logprobs = self.served.as_mut().and_then(|r| r.take_logprobs(id));
                let Some(note) = self.book.token(now, id, token) else { return };
                self.first_token_at.get_or_insert(now);
                self.last_token_at = now;
                if note.index == 0 {
                    self.tokens.push(token);
                }
                sink.token(note.index, token, &note.piece);
                if let Some(routes) = self.served.as_mut() {
                    let piece = note.piece;
                    routes.send(note.index, Reply::Token { id: token, piece, logprobs });
                }
                if note.stop {
                    self.fsm.cancel(now, id, FinishReason::Stop);
                }
            }
            SeqOutput::Finished { id, reason, prompt, generated } => {
                if reason == FinishReason::Fault && self.reforming.is_some() {
                    // Kept, with its text and log, to resume on the re-formed session.
                    if let Some(routes) = self.served.as_mut() {
                        routes.take_logprobs(id);
                    }
                    self.book.keep(id, &prompt, generated);
                    return;
                }
                let fault = self.end_reason();
                let finished = self.book.finished(id, reason, &prompt, generated, &fault);
                if let Some((index, _, rest)) = finished {
                    self.ended(index, rest, sink);
                }
            }
        }
    }
}
