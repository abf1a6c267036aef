//! Speed: what a node measures of itself at boot ([`NodeSpeed`]), and what a plan predicts
//! of its own speed from it ([`SpeedPrediction`]): per stage, per hop, for the pipeline and
//! for the best single node that could hold the model (`specs/cost-model.md`).
//!
//! Rates are whole units (MB/s, million multiply-adds per second, microseconds) so that
//! the pool file and the plan stay comparable with `==`.

use serde::{Deserialize, Serialize};

use super::NodeId;

/// One weight format's measured product rates on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FormatRate {
    /// The format as GGUF names it (`q8_0`, `q4_k`, `f16`, ...).
    pub format: String,
    /// Multiply-adds per second (millions) of a one-row product with its weights in cache:
    /// the kernels' own speed where a decode step is not bound by memory.
    pub decode_mmacs: u64,
    /// The same for a product of many rows at once (a prompt's micro-batch).
    pub prefill_mmacs: u64,
}

/// What a node measured of itself at boot: memory read bandwidth and each weight format's
/// product rates, at the worker's thread count and kernel tier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSpeed {
    /// Compute threads the measurement used (the worker's).
    pub threads: u32,
    /// The kernel tier (`avx512`, `avx2`, `neon-dotprod`, `scalar`, ...).
    pub isa: String,
    /// Memory read bandwidth, MB/s, with every thread reading its own buffer.
    pub read_mbs: u64,
    /// Product rates per weight format.
    pub formats: Vec<FormatRate>,
}

impl NodeSpeed {
    /// The rates of `format`, if measured.
    pub fn format(&self, format: &str) -> Option<&FormatRate> {
        self.formats.iter().find(|f| f.format == format)
    }
}

/// A measured link from one node to another (or to the orchestrator): its round trip and,
/// where the probe could tell, its bandwidth towards the measuring node (it asked `to` for
/// the probe's bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkRtt {
    /// The node at the other end.
    pub to: NodeId,
    /// The round trip, microseconds.
    pub rtt_us: u64,
    /// Bytes per second the link carried beyond what its round trip and QUIC's slow start
    /// account for (`None`: not measured, or too fast for the probe to tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_s: Option<u64>,
}

/// How the planner chose layer ranges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacedBy {
    /// Stage times balanced with every node's measured speed, within its memory.
    #[default]
    Speed,
    /// Stage bytes balanced against node memory (a node's speed unknown, or asked for).
    Memory,
    /// The placement gave the ranges.
    Given,
}

/// One stage's predicted times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageSpeed {
    /// The node.
    pub node_id: NodeId,
    /// One decode step of one sequence, microseconds.
    pub step_us: u64,
    /// One decode step of the plan's `concurrent` sequences at once, microseconds.
    pub batch_step_us: u64,
    /// The prefill of the plan's prompt, microseconds.
    pub prefill_us: u64,
    /// The hop from this stage to the next (to the orchestrator from the last), one way,
    /// microseconds: the link's half round trip and the hop's own cost.
    pub hop_us: u64,
}

/// Predicted figures of one layout (the pipeline, or one node alone).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LayoutSpeed {
    /// Decode tokens per second of one sequence.
    pub decode_tok_s: f64,
    /// Decode tokens per second of all `concurrent` sequences together.
    pub decode_tok_s_concurrent: f64,
    /// Time to first token for the plan's prompt, milliseconds.
    pub ttft_ms: f64,
}

/// Whether splitting the model is needed, helps or costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SplitVerdict {
    /// No single node holds the model: only a pipeline runs it.
    Needed,
    /// The pipeline decodes faster than the best single node, by `speedup` (> 1).
    Helps {
        /// Pipeline / single decode rate of one sequence.
        speedup: f64,
    },
    /// The pipeline decodes slower than the best single node: `speedup` < 1.
    Costs {
        /// Pipeline / single decode rate of one sequence.
        speedup: f64,
    },
    /// One stage: the plan is a single node.
    Single,
}

/// A plan's prediction of its own speed, from its nodes' [`NodeSpeed`] and link round
/// trips.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedPrediction {
    /// How the ranges were chosen.
    pub placed_by: PlacedBy,
    /// Sequences assumed in flight for the concurrent figures (the plan's slots).
    pub concurrent: u32,
    /// Prompt tokens assumed for time to first token.
    pub prompt_tokens: u32,
    /// Per stage, in stage order.
    pub stages: Vec<StageSpeed>,
    /// The orchestrator's hop to stage 0, one way, microseconds.
    pub first_hop_us: u64,
    /// The pipeline as planned.
    pub pipeline: LayoutSpeed,
    /// One trip of one sequence round the pipeline carrying `r` rows (a decode step with
    /// `r - 1` drafted tokens to verify), microseconds, for `r` in `1..=ROUND_ROWS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_trip_us: Vec<u64>,
    /// The fastest single pool node that holds the whole model, and its figures.
    pub single: Option<(NodeId, LayoutSpeed)>,
    /// What splitting does.
    pub verdict: SplitVerdict,
    /// Whether some hop's round trip was not measured on its own link (estimated from the
    /// ends' round trips from the orchestrator, or assumed where those are unknown).
    pub links_assumed: bool,
}

/// The most rows [`SpeedPrediction::round_trip_us`] gives a trip for.
pub const ROUND_ROWS: u32 = 16;

impl SpeedPrediction {
    /// The decode rate of one sequence that generated `tokens` tokens with speculation's
    /// `drafts` trips carrying `draft_tokens` drafted tokens of which `accepted` were kept:
    /// every trip costs [`SpeedPrediction::round_trip_us`] at its rows (the mean draft
    /// length), every other trip one row's. `None` without trips to price.
    pub fn speculative_tok_s(
        &self,
        tokens: u64,
        drafts: u64,
        draft_tokens: u64,
        accepted: u64,
    ) -> Option<f64> {
        let decoded = tokens.checked_sub(1).filter(|&d| d > 0)?;
        let trips = decoded.saturating_sub(accepted).max(drafts);
        let rows = 1 + draft_tokens.checked_div(drafts).unwrap_or(0);
        let at = |r: u64| {
            self.round_trip_us.get(r.clamp(1, u64::from(ROUND_ROWS)) as usize - 1).copied()
        };
        let us = drafts as f64 * at(rows)? as f64 + (trips - drafts) as f64 * at(1)? as f64;
        (us > 0.0).then(|| decoded as f64 * 1e6 / us)
    }

    /// What splitting does, in words (`splitting costs: 0.92x node 2 alone's decode rate
    /// (8% slower)`).
    pub fn verdict_words(&self) -> String {
        match (self.verdict, self.single) {
            (SplitVerdict::Single, _) => "one stage: nothing is split".into(),
            (SplitVerdict::Needed, _) => {
                "splitting is needed: no single node holds the model at this context".into()
            }
            (SplitVerdict::Helps { speedup }, Some((node, _))) => {
                format!("splitting helps: {speedup:.2}x node {node} alone's decode rate")
            }
            (SplitVerdict::Costs { speedup }, Some((node, _))) => format!(
                "splitting costs: {speedup:.2}x node {node} alone's decode rate ({:.0}% slower)",
                (1.0 - speedup) * 100.0
            ),
            (SplitVerdict::Helps { speedup } | SplitVerdict::Costs { speedup }, None) => {
                format!("{speedup:.2}x the best single node's decode rate")
            }
        }
    }
}
