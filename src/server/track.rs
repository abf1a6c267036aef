//! One request's clock: queue time, time to first token, inter-token latency and the
//! end-to-end latency into the metrics, and llama-server's `timings` for its response.
#![allow(clippy::disallowed_methods)] // a request's clock is the server's

use std::sync::Arc;
use std::time::Instant;

use super::metrics::{Finished, Reason};
use super::state::Shared;
use crate::serve::error::ApiError;
use crate::serve::shapes::Timings;

/// A request's moments.
pub struct Tracker {
    shared: Arc<Shared>,
    arrived: Instant,
    started: Option<Instant>,
    first: Option<Instant>,
    last: Option<Instant>,
    prompt_n: u32,
}

impl Tracker {
    /// A request arrived now.
    pub fn arrived(shared: Arc<Shared>) -> Tracker {
        Tracker {
            shared,
            arrived: Instant::now(),
            started: None,
            first: None,
            last: None,
            prompt_n: 0,
        }
    }

    /// It was submitted with `prompt_n` prompt tokens.
    pub fn submitted(mut self, prompt_n: u32) -> Tracker {
        self.prompt_n = prompt_n;
        self
    }

    /// It took a slot.
    pub fn started(&mut self) {
        let now = Instant::now();
        self.started.get_or_insert(now);
        self.shared.metrics.request_queue_time.observe((now - self.arrived).as_secs_f64());
    }

    /// A token arrived.
    pub fn token(&mut self) {
        let now = Instant::now();
        let m = &self.shared.metrics;
        match self.last {
            None => m.time_to_first_token.observe((now - self.arrived).as_secs_f64()),
            Some(last) => m.inter_token_latency.observe((now - last).as_secs_f64()),
        }
        self.first.get_or_insert(now);
        self.last = Some(now);
        m.generation_tokens.inc();
    }

    /// It failed with `reason`: counted, and the API error it becomes.
    pub fn failed(&mut self, reason: &str) -> ApiError {
        let m = &self.shared.metrics;
        m.request_failure.get_or_create(&Reason { reason: reason.to_string() }).inc();
        m.e2e_request_latency.observe(self.arrived.elapsed().as_secs_f64());
        ApiError::from_request_error(reason, self.prompt_n, self.shared.n_ctx())
    }

    /// It finished (`finish`, OpenAI's reason) after `predicted_n` tokens, `cached` of its
    /// prompt tokens found cached: counted, and its timings.
    pub fn finished(&mut self, finish: &str, predicted_n: u32, cached: u32) -> Timings {
        let now = Instant::now();
        let m = &self.shared.metrics;
        m.request_success.get_or_create(&Finished { finished_reason: finish.to_string() }).inc();
        m.prompt_tokens.inc_by(u64::from(self.prompt_n));
        m.e2e_request_latency.observe((now - self.arrived).as_secs_f64());
        let started = self.started.unwrap_or(self.arrived);
        let first = self.first.unwrap_or(now);
        let prompt_ms = first.saturating_duration_since(started).as_secs_f64() * 1e3;
        let predicted_ms =
            self.last.unwrap_or(first).saturating_duration_since(first).as_secs_f64() * 1e3;
        Timings::new(self.prompt_n, prompt_ms, predicted_n, predicted_ms).with_cache(cached)
    }
}
