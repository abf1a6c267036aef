//! The server's sessions: one is formed when the pool is ready and serves while it lasts;
//! after a fault the next forms as soon as the pool is ready again, in the same process.
//! A stop closes the input (the session finishes what it holds and completes), and past
//! the grace period stops the session (what is left ends with `operator.stopped`).
#![allow(clippy::disallowed_methods)] // the session loop owns the clock

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, watch};

use super::state::{SessionInput, Shared};
use super::view::Measured;
use crate::events::{Event, EventLine, RunOutcome};
use crate::model::ModelFacts;
use crate::orchestrator::driver::served::Served;
use crate::orchestrator::driver::{
    Arriving, OrchestrateConfig, OrchestrateError, RunReport, RunSink, load_drafter,
    orchestrate_drafting,
};
use crate::orchestrator::retry::{NextSession, SessionRetry};
use crate::wire::reason::OperatorStop;
use crate::wire::{RunId, RunPlan};

/// Feeds the shared state from one session: lifecycle, view, metrics; opens the server's
/// input when the session can serve; optionally passes every event line on (`--events`).
struct ServeSink<'a> {
    shared: &'a Shared,
    input: Option<SessionInput>,
    t0: Instant,
    events: Option<&'a mut dyn FnMut(&EventLine)>,
    /// Since when the session re-forms after a node loss.
    reforming: Option<(Instant, crate::wire::reason::FaultReason)>,
    /// Speculation's counters as last counted into the metrics.
    spec_seen: crate::orchestrator::scheduler::SpecCounters,
    /// The prefix cache's counters as last told (the metrics take the growth).
    prefix_seen: crate::orchestrator::scheduler::PrefixCounters,
    /// KV cache bytes one cached token takes across the stages (the plan's).
    kv_bytes_per_token: u64,
    /// KV bytes of one prompt-cache block across the stages.
    kv_bytes_per_block: u64,
    /// Whether the session passed its readiness barrier.
    served: bool,
}

impl RunSink for ServeSink<'_> {
    fn event(&mut self, line: &EventLine) {
        if let Some(f) = self.events.as_mut() {
            f(line);
        }
        let m = &self.shared.metrics;
        match &line.event {
            Event::ReadinessBarrierPassed { .. } => {
                self.served = true;
                m.sessions_formed.inc();
                // The server holds the only sender from here on: dropping it on a stop
                // closes the session's input. A re-formed session keeps the same input.
                if self.input.is_some() {
                    self.shared.set_input(self.input.take());
                }
            }
            Event::SessionReforming { cause, .. } => {
                self.reforming = Some((Instant::now(), *cause));
            }
            Event::SessionReformed { .. } => {
                // A re-formation onto a pool that grew is no failover: it counts apart.
                let mut outcome = "resumed";
                if let Some((since, cause)) = self.reforming.take() {
                    m.resume_seconds.observe(since.elapsed().as_secs_f64());
                    if !cause.counts_as_resume() {
                        outcome = "grown";
                    }
                }
                let outcome = outcome.into();
                m.failovers.get_or_create(&super::metrics::Outcome { outcome }).inc();
            }
            Event::SessionReformFailed { why, .. } => {
                self.reforming = None;
                let outcome = why.clone();
                m.failovers.get_or_create(&super::metrics::Outcome { outcome }).inc();
                self.shared.set_input(None);
            }
            Event::RunFaulted { reason, .. } => {
                if reason.counts_as_resume() {
                    let reason = reason.to_string();
                    m.session_faults.get_or_create(&super::metrics::Reason { reason }).inc();
                }
                // A session that re-forms keeps its input: requests wait for it.
                if self.reforming.is_none() {
                    self.shared.set_input(None);
                }
            }
            Event::RunCompleted { .. } | Event::RunStopped { .. } => self.shared.set_input(None),
            _ => {}
        }
        self.shared.phase().event(&line.event);
        match self.shared.view().event(&line.event, line.origin_us) {
            Measured::Step(stage, s) => {
                m.stage_step.get_or_create(&super::metrics::Stage { stage }).observe(s);
            }
            Measured::Hop(edge, s) => {
                m.hop.get_or_create(&super::metrics::Edge { edge }).observe(s);
            }
            Measured::Nothing => {}
        }
    }

    fn token(&mut self, _request: usize, _id: u32, _text: &str) {
        self.shared.view().tokens(self.t0.elapsed().as_secs(), 1);
    }

    fn progress(&mut self, message: &str) {
        eprintln!("swactor: {message}");
    }

    fn load(&mut self, running: usize, waiting: usize) {
        let m = &self.shared.metrics;
        m.requests_running.set(running as i64);
        m.requests_waiting.set(waiting as i64);
        m.slots_in_use.set(running as i64);
        let mut view = self.shared.view();
        (view.slots_in_use, view.waiting) = (running, waiting);
    }

    fn speculated(&mut self, c: crate::orchestrator::scheduler::SpecCounters) {
        let m = &self.shared.metrics;
        let last = std::mem::replace(&mut self.spec_seen, c);
        m.spec_drafts.inc_by(delta(c.drafts, last.drafts));
        m.spec_draft_tokens.inc_by(delta(c.draft_tokens, last.draft_tokens));
        m.spec_accepted_tokens.inc_by(delta(c.accepted_tokens, last.accepted_tokens));
    }

    fn prefix(&mut self, c: crate::orchestrator::scheduler::PrefixCounters) {
        let m = &self.shared.metrics;
        let last = std::mem::replace(&mut self.prefix_seen, c);
        m.prefix_queries.inc_by(delta(c.queried_tokens, last.queried_tokens));
        m.prefix_hits.inc_by(delta(c.cached_tokens, last.cached_tokens));
        m.prefix_evictions.inc_by(delta(c.evictions, last.evictions));
        m.prefix_evictions.inc_by(delta(c.store_evicted, last.store_evicted));
        // The warm slots' tokens, and the stores' blocks.
        let stored = c.store_blocks.saturating_mul(self.kv_bytes_per_block);
        let bytes = c.warm_tokens.saturating_mul(self.kv_bytes_per_token).saturating_add(stored);
        m.prefix_bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    fn planned(&mut self, plan: &RunPlan) {
        self.kv_bytes_per_token = plan.kv_bytes_per_token();
        let blocks = u64::from(plan.prompt_cache.blocks.max(1));
        self.kv_bytes_per_block =
            plan.stages.iter().map(|s| s.prediction.prompt_cache_bytes).sum::<u64>() / blocks;
        self.shared.planned_context(plan.runtime.max_seq_len);
        self.shared.view().planned(plan);
    }
}

/// How the server's sessions ended.
#[derive(Debug)]
pub struct ServeReport {
    /// Sessions that reached serving.
    pub sessions: u64,
    /// The last session's report, if one ran.
    pub last: Option<RunReport>,
}

/// The server's stop signals, as the session loop sees them.
pub struct Stopping {
    /// True once the server stops (drain).
    pub shutdown: watch::Receiver<bool>,
    /// True once the drain is cut short.
    pub force: watch::Receiver<bool>,
}

/// Forms sessions until `shutdown` turns true; then drains the serving one within
/// `grace` (or until `force`). The first session's setup or plan error, or a pool that never became ready
/// for it, ends the server (the configuration is wrong); later ones are retried. The
/// draft model, if any, is loaded once: every session drafts with it.
pub async fn run_sessions(
    shared: Arc<Shared>,
    mut config: OrchestrateConfig,
    facts: &ModelFacts,
    stopping: Stopping,
    mut events: Option<&mut dyn FnMut(&EventLine)>,
) -> Result<ServeReport, OrchestrateError> {
    let Stopping { mut shutdown, force } = stopping;
    let t0 = Instant::now();
    let tokenizer = shared.tokenizer.clone();
    let mut report = ServeReport { sessions: 0, last: None };
    let mut first = true;
    let mut retry = SessionRetry::new();
    let drafter = load_drafter(&config, facts).await?;
    while !*shutdown.borrow() {
        let (submit, submissions) = mpsc::unbounded_channel();
        let (cancel, cancels) = mpsc::unbounded_channel();
        let (queries_tx, queries) = mpsc::unbounded_channel();
        let input = SessionInput { submit, cancel, queries: queries_tx };
        let arriving = Arriving::Served(Served { submissions, cancels, queries });
        let mut sink = ServeSink {
            shared: &shared,
            input: Some(input),
            t0,
            events: events.as_mut().map(|f| &mut **f as &mut dyn FnMut(&EventLine)),
            reforming: None,
            spec_seen: Default::default(),
            prefix_seen: Default::default(),
            kv_bytes_per_token: 0,
            kv_bytes_per_block: 0,
            served: false,
        };
        let stop = stop_after_grace(shutdown.clone(), force.clone(), shared.clone());
        let (this, drafter) = (config.clone(), drafter.as_ref());
        let result =
            orchestrate_drafting(this, drafter, Some(arriving), facts, &tokenizer, &mut sink, stop)
                .await;
        let served = sink.served;
        drop(sink);
        shared.set_input(None);
        // The next session's run id follows every run this one held (re-formations too).
        let last = result.as_ref().map_or(config.run_id, |r| r.plan.run_id);
        config.run_id = RunId(last.0.max(config.run_id.0) + 1);
        match result {
            Ok(r) => {
                let fault = r.fault.map(|f| f.reason).filter(|_| r.outcome == RunOutcome::Faulted);
                let faulted = (r.outcome == RunOutcome::Faulted)
                    .then(|| fault.map(|f| f.to_string()).unwrap_or_default());
                shared.phase().session_ended(faulted.as_deref());
                report.sessions += 1;
                report.last = Some(r);
                first = false;
                // Sessions that keep faulting before serving are formed less and less
                // often, and given up when the fault would repeat (wrong weights).
                let next = retry.ended(served, fault);
                match next {
                    _ if faulted.is_none() => {}
                    NextSession::After(wait) => pause(&mut shutdown, wait).await,
                    NextSession::GiveUp { reason, sessions } => {
                        return Err(OrchestrateError::GaveUp { reason, sessions });
                    }
                }
            }
            Err(OrchestrateError::Stopped) => break,
            Err(e) if first => return Err(e),
            Err(e) => {
                eprintln!("swactor: no session formed: {e}; trying again");
                shared.phase().session_ended(None);
                pause(&mut shutdown, SessionRetry::FIRST_PAUSE).await;
            }
        }
    }
    Ok(report)
}

/// A pause between session attempts, cut short by a stop.
async fn pause(shutdown: &mut watch::Receiver<bool>, wait: Duration) {
    tokio::select! {
        () = tokio::time::sleep(wait) => {}
        _ = shutdown.wait_for(|s| *s) => {}
    }
}

/// Resolves once the server is told to stop and, if a session was serving then, the
/// grace period has passed (the session finished what it held by then, or is stopped).
async fn stop_after_grace(
    mut shutdown: watch::Receiver<bool>,
    mut force: watch::Receiver<bool>,
    shared: Arc<Shared>,
) -> OperatorStop {
    let _ = shutdown.wait_for(|s| *s).await;
    let serving = shared.view().slots_in_use > 0 || shared.view().waiting > 0;
    if serving {
        tokio::select! {
            () = tokio::time::sleep(shared.config.grace) => {}
            _ = force.wait_for(|f| *f) => {}
        }
    }
    OperatorStop::Terminate
}

/// What a session's counter grew by since it was `before` (a new session's counters restart
/// from zero: they count from zero).
fn delta(now: u64, before: u64) -> u64 {
    if now >= before { now - before } else { now }
}
