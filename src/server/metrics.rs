//! The server's Prometheus metrics (text format, `prometheus-client`), named after vLLM's
//! and llama.cpp's, plus what only a pipeline has: per-stage step time and per-edge hop
//! time, from the events the nodes forward.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// A `reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Reason {
    /// The stable reason.
    pub reason: String,
}

/// A `finished_reason` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Finished {
    /// OpenAI's finish reason.
    pub finished_reason: String,
}

/// An `outcome` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `resumed`, or why re-forming was given up (`resume_timeout`, `operator_stop`, ...).
    pub outcome: String,
}

/// A `stage` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Stage {
    /// The stage index.
    pub stage: u32,
}

/// An `edge` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Edge {
    /// The edge id.
    pub edge: u64,
}

fn latency_hist(start: f64, count: u16) -> Histogram {
    Histogram::new(exponential_buckets(start, 2.0, count))
}

/// Every metric, and the registry that prints them.
pub struct Metrics {
    registry: Registry,
    /// Requests holding a slot.
    pub requests_running: Gauge,
    /// Requests waiting for a slot.
    pub requests_waiting: Gauge,
    /// Requests that ended with a result, by finish reason.
    pub request_success: Family<Finished, Counter>,
    /// Requests that failed, by reason.
    pub request_failure: Family<Reason, Counter>,
    /// Prompt tokens of requests that ran.
    pub prompt_tokens: Counter,
    /// Tokens generated.
    pub generation_tokens: Counter,
    /// From arrival to the first token.
    pub time_to_first_token: Histogram,
    /// Between consecutive tokens of one request.
    pub inter_token_latency: Histogram,
    /// From arrival to the end.
    pub e2e_request_latency: Histogram,
    /// From arrival to taking a slot.
    pub request_queue_time: Histogram,
    /// Slots holding a sequence.
    pub slots_in_use: Gauge,
    /// Sessions that reached serving.
    pub sessions_formed: Counter,
    /// Sessions that faulted, by reason.
    pub session_faults: Family<Reason, Counter>,
    /// Re-formations after a node loss, by outcome.
    pub failovers: Family<Outcome, Counter>,
    /// From a node loss being seen to the re-formed session serving.
    pub resume_seconds: Histogram,
    /// A stage's step, from the worker's start to its completion.
    pub stage_step: Family<Stage, Histogram>,
    /// An object's hop from one stage's egress to the next stage's ingress.
    pub hop: Family<Edge, Histogram>,
    /// Trips that carried a speculative draft.
    pub spec_drafts: Counter,
    /// Tokens drafted.
    pub spec_draft_tokens: Counter,
    /// Drafted tokens accepted.
    pub spec_accepted_tokens: Counter,
    /// Prompt tokens of requests that could use the prefix cache (vLLM counts tokens).
    pub prefix_queries: Counter,
    /// Prompt tokens found in the prefix cache.
    pub prefix_hits: Counter,
    /// Warm prefixes dropped whole to make room.
    pub prefix_evictions: Counter,
    /// KV cache bytes holding reusable prefixes (across the stages).
    pub prefix_bytes: Gauge,
    /// HTTP connections open.
    pub http_connections: Gauge,
    /// HTTP connections answered at once and closed, by reason (a cap reached).
    pub http_refused: Family<Reason, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Every metric registered, at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let m = Metrics {
            requests_running: Gauge::default(),
            requests_waiting: Gauge::default(),
            request_success: Family::default(),
            request_failure: Family::default(),
            prompt_tokens: Counter::default(),
            generation_tokens: Counter::default(),
            time_to_first_token: latency_hist(0.005, 14),
            inter_token_latency: latency_hist(0.0005, 14),
            e2e_request_latency: latency_hist(0.05, 14),
            request_queue_time: latency_hist(0.001, 16),
            slots_in_use: Gauge::default(),
            spec_drafts: Counter::default(),
            spec_draft_tokens: Counter::default(),
            spec_accepted_tokens: Counter::default(),
            prefix_queries: Counter::default(),
            prefix_hits: Counter::default(),
            prefix_evictions: Counter::default(),
            prefix_bytes: Gauge::default(),
            http_connections: Gauge::default(),
            http_refused: Family::default(),
            sessions_formed: Counter::default(),
            session_faults: Family::default(),
            failovers: Family::default(),
            resume_seconds: latency_hist(0.05, 12),
            stage_step: Family::new_with_constructor(|| latency_hist(0.0001, 16)),
            hop: Family::new_with_constructor(|| latency_hist(0.00002, 16)),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "swactor_requests_running",
            "Requests holding a slot",
            m.requests_running.clone(),
        );
        r.register(
            "swactor_requests_waiting",
            "Requests waiting for a slot",
            m.requests_waiting.clone(),
        );
        r.register(
            "swactor_request_success",
            "Requests that ended with a result",
            m.request_success.clone(),
        );
        r.register("swactor_request_failure", "Requests that failed", m.request_failure.clone());
        r.register(
            "swactor_prompt_tokens",
            "Prompt tokens of requests that ran",
            m.prompt_tokens.clone(),
        );
        r.register("swactor_generation_tokens", "Tokens generated", m.generation_tokens.clone());
        r.register(
            "swactor_time_to_first_token_seconds",
            "From arrival to the first token",
            m.time_to_first_token.clone(),
        );
        r.register(
            "swactor_inter_token_latency_seconds",
            "Between tokens of one request",
            m.inter_token_latency.clone(),
        );
        r.register(
            "swactor_e2e_request_latency_seconds",
            "From arrival to the end",
            m.e2e_request_latency.clone(),
        );
        r.register(
            "swactor_request_queue_time_seconds",
            "From arrival to taking a slot",
            m.request_queue_time.clone(),
        );
        r.register("swactor_slots_in_use", "Slots holding a sequence", m.slots_in_use.clone());
        register_caches(r, &m);
        r.register(
            "swactor_http_connections_open",
            "HTTP connections open",
            m.http_connections.clone(),
        );
        r.register(
            "swactor_http_connections_refused",
            "HTTP connections answered at once and closed, by the cap reached",
            m.http_refused.clone(),
        );
        r.register(
            "swactor_sessions_formed",
            "Sessions that reached serving",
            m.sessions_formed.clone(),
        );
        r.register("swactor_session_faults", "Sessions that faulted", m.session_faults.clone());
        r.register(
            "swactor_failovers",
            "Sessions re-formed after a node loss, by outcome",
            m.failovers.clone(),
        );
        r.register(
            "swactor_resume_seconds",
            "From a node loss being seen to the re-formed session serving",
            m.resume_seconds.clone(),
        );
        r.register(
            "swactor_stage_step_seconds",
            "A stage's step on its worker",
            m.stage_step.clone(),
        );
        r.register("swactor_hop_seconds", "An object's hop between stages", m.hop.clone());
        Metrics { registry, ..m }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// Registers what speculation and the prefix cache count.
fn register_caches(r: &mut Registry, m: &Metrics) {
    r.register(
        "swactor_spec_decode_num_drafts",
        "Trips that carried a speculative draft",
        m.spec_drafts.clone(),
    );
    r.register(
        "swactor_spec_decode_num_draft_tokens",
        "Tokens drafted for speculative decoding",
        m.spec_draft_tokens.clone(),
    );
    r.register(
        "swactor_spec_decode_num_accepted_tokens",
        "Drafted tokens the target model accepted",
        m.spec_accepted_tokens.clone(),
    );
    r.register(
        "swactor_prefix_cache_queries",
        "Prompt tokens of requests that could use a cached prefix",
        m.prefix_queries.clone(),
    );
    r.register(
        "swactor_prefix_cache_hits",
        "Prompt tokens found cached (not computed again)",
        m.prefix_hits.clone(),
    );
    r.register(
        "swactor_prefix_cache_evictions",
        "Cached prefixes dropped whole to make room",
        m.prefix_evictions.clone(),
    );
    r.register(
        "swactor_prefix_cache_bytes",
        "KV cache bytes holding reusable prefixes, across the stages",
        m.prefix_bytes.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_counters_with_total_and_histograms_with_buckets() {
        let m = Metrics::new();
        m.request_success.get_or_create(&Finished { finished_reason: "stop".into() }).inc();
        m.time_to_first_token.observe(0.02);
        m.hop.get_or_create(&Edge { edge: 2 }).observe(0.0002);
        let text = m.encode();
        assert!(
            text.contains("swactor_request_success_total{finished_reason=\"stop\"} 1"),
            "{text}"
        );
        assert!(text.contains("swactor_time_to_first_token_seconds_bucket"), "{text}");
        assert!(text.contains("swactor_hop_seconds_count{edge=\"2\"} 1"), "{text}");
        assert!(text.contains("swactor_requests_running 0"), "{text}");
    }
}
