//! Run plans: the orchestrator's complete, immutable description of one run, and its
//! deterministic projection into one [`ProvisionStage`] message per stage.
//!
//! Plans are produced only by [`crate::planner`]; this module holds the data and the
//! projection.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

pub use super::prompt_cache::{PromptCacheOff, PromptCachePlan};
use super::spec::{ActivationDType, ObjectSpec, RingSpec};
use super::{EdgeId, NodeId, RunId, StageIndex};

/// A half-open, contiguous range of transformer blocks `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LayerRange {
    /// First block of the range.
    pub start: u32,
    /// One past the last block of the range.
    pub end: u32,
}

impl LayerRange {
    /// The range `start..end`.
    pub const fn new(start: u32, end: u32) -> LayerRange {
        LayerRange { start, end }
    }

    /// Number of blocks in the range.
    pub const fn len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    /// Whether the range holds no block.
    pub const fn is_empty(&self) -> bool {
        self.end <= self.start
    }

    /// Whether `block` lies in the range.
    pub const fn contains(&self, block: u32) -> bool {
        self.start <= block && block < self.end
    }

    /// The blocks of the range.
    pub fn blocks(&self) -> std::ops::Range<u32> {
        self.start..self.end
    }
}

impl fmt::Display for LayerRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

impl FromStr for LayerRange {
    type Err = String;

    /// Parses `START..END` (half-open).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s
            .trim()
            .split_once("..")
            .ok_or_else(|| format!("`{s}` is not a layer range like 0..10"))?;
        let num = |t: &str| {
            t.trim().parse::<u32>().map_err(|_| format!("`{s}` is not a layer range like 0..10"))
        };
        Ok(LayerRange::new(num(a)?, num(b)?))
    }
}

/// How the last stage picks the next token.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum SamplingPolicy {
    /// Always the most likely token (deterministic).
    #[default]
    Greedy,
    /// Temperature sampling, optionally restricted to the top-k and top-p tokens,
    /// deterministic for a given seed.
    Sample {
        /// Softmax temperature, >= 0; 0 means greedy.
        temperature: f32,
        /// Keep only the `k` most likely tokens.
        top_k: Option<u32>,
        /// Keep the smallest set whose probability reaches `p`, in `(0, 1]`.
        top_p: Option<f32>,
        /// Seed of the sampler's random stream.
        seed: u64,
    },
}

impl SamplingPolicy {
    /// Checks the parameters are in range; returns a description of the first problem.
    /// A temperature of 0 is valid and means greedy (see [`SamplingPolicy::normalized`]).
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            SamplingPolicy::Greedy => Ok(()),
            SamplingPolicy::Sample { temperature, top_k, top_p, .. } => {
                if !(temperature.is_finite() && temperature >= 0.0) {
                    return Err(format!(
                        "temperature {temperature} must be finite and >= 0 (0 means greedy)"
                    ));
                }
                if top_k == Some(0) {
                    return Err("top_k must be at least 1".into());
                }
                if let Some(p) = top_p
                    && !(p > 0.0 && p <= 1.0)
                {
                    return Err(format!("top_p {p} must lie in (0, 1]"));
                }
                Ok(())
            }
        }
    }
}

impl SamplingPolicy {
    /// The same policy with a temperature of 0 written as [`SamplingPolicy::Greedy`]
    /// (the limit of sampling as the temperature falls to 0 is the most likely token).
    pub fn normalized(self) -> SamplingPolicy {
        match self {
            SamplingPolicy::Sample { temperature: 0.0, .. } => SamplingPolicy::Greedy,
            other => other,
        }
    }
}

/// A weights URL, checked: `http` or `https` (any case), a host (a name, an IPv4 address
/// or a bracketed IPv6 address), an optional non-zero port, and a path. User info
/// (`user@`), whitespace and control characters are refused; a `#fragment` is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsUrl {
    /// Whether the scheme is `https`.
    pub secure: bool,
    /// The host as written (IPv6 addresses keep their brackets).
    pub host: String,
    /// The port (explicit, or 80 / 443).
    pub port: u16,
    /// Whether the URL names its port.
    pub explicit_port: bool,
    /// The path and query, starting with `/`.
    pub path: String,
}

impl WeightsUrl {
    /// Parses and checks `url`; the error says what is wrong with it.
    pub fn parse(url: &str) -> Result<WeightsUrl, String> {
        let bad = |why: &str| Err(format!("`{url}` is not an http(s) URL: {why}"));
        if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return bad("it holds whitespace or control characters");
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return bad("it has no `http://` or `https://` scheme");
        };
        let secure = match scheme.to_ascii_lowercase().as_str() {
            "http" => false,
            "https" => true,
            _ => return bad("only http and https are supported"),
        };
        let rest = rest.split_once('#').map_or(rest, |(r, _)| r);
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        if authority.contains('@') {
            return bad("user info (`user@`) is not supported");
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let Some((addr, after)) = v6.split_once(']') else {
                return bad("an IPv6 host lacks its closing `]`");
            };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return bad("the IPv6 host is not an IPv6 address");
            }
            let port = match after {
                "" => None,
                p => match p.strip_prefix(':') {
                    Some(p) => Some(p),
                    None => return bad("unexpected text after the IPv6 host"),
                },
            };
            (&authority[..addr.len() + 2], port)
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return bad("it has no host");
        }
        if !host.starts_with('[')
            && !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
        {
            return bad("the host holds characters a host name cannot");
        }
        let explicit_port = port.is_some();
        let port = match port {
            None => {
                if secure {
                    443
                } else {
                    80
                }
            }
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n != 0 && p.bytes().all(|b| b.is_ascii_digit()) => n,
                _ => return bad("the port is not a number in 1..=65535"),
            },
        };
        let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
        Ok(WeightsUrl { secure, host: host.to_string(), port, explicit_port, path })
    }

    /// `host:port`, to connect to.
    pub fn connect_addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The host without IPv6 brackets (the TLS server name).
    pub fn server_name(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }

    /// The `Host` header's value: the host, with the port when the URL names one.
    pub fn host_header(&self) -> String {
        if self.explicit_port { self.connect_addr() } else { self.host.clone() }
    }
}

/// How a stage keeps its KV cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KvCacheDType {
    /// 4 bytes a value (the default).
    #[default]
    F32,
    /// 2 bytes a value: half the memory, values rounded to f16 as they are stored.
    F16,
}

impl KvCacheDType {
    /// Bytes of one cached value.
    pub fn bytes(self) -> u64 {
        match self {
            KvCacheDType::F32 => 4,
            KvCacheDType::F16 => 2,
        }
    }
}

/// Settings every stage of a run shares.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RuntimeConfig {
    /// Longest token sequence (prompt + generated) the KV caches hold.
    pub max_seq_len: u32,
    /// How the KV caches keep their values.
    #[serde(default)]
    pub kv_cache: KvCacheDType,
    /// Element type of activations between stages.
    pub activation_dtype: ActivationDType,
    /// Most tokens to generate.
    pub max_tokens: u32,
    /// Token selection on the last stage (the default of a request that names none).
    pub sampling: SamplingPolicy,
    /// Sequences in the pipeline at once: the slots every stage holds a KV cache for and
    /// the entries of every micro-batch table (1 to 256).
    #[serde(default = "one")]
    pub max_sequences: u32,
    /// The most alternatives a request's log-probabilities may list (`None`: requests may
    /// not ask for log-probabilities, and the token-out object keeps its smallest size).
    #[serde(default)]
    pub max_top_logprobs: Option<u32>,
    /// Bytes every micro-batch table reserves for token masks (constrained sampling; see
    /// [`super::mask`]). 0: none, and requests may not be constrained.
    #[serde(default)]
    pub mask_bytes: u32,
}

fn one() -> u32 {
    1
}

impl RuntimeConfig {
    /// The micro-batch table capacity (`max_sequences`, at least 1).
    pub fn table_capacity(&self) -> u16 {
        self.max_sequences.clamp(1, u32::from(super::spec::MAX_CAPACITY)) as u16
    }
}

/// Where a stage gets the GGUF file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WeightSource {
    /// A path that exists on every stage's node.
    Local {
        /// The file's path.
        path: String,
    },
    /// A URL each node downloads once into its cache, checked against size and digest.
    Url {
        /// HTTP(S) URL of the file.
        url: String,
        /// Expected size in bytes.
        size: u64,
        /// Expected sha256, lowercase hex.
        sha256: String,
        /// The byte ranges this stage needs, each checked against its own sha256; the node
        /// downloads only these (HTTP range requests) into a sparse file. Empty: the whole
        /// file, checked against `size` and `sha256`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ranges: Vec<WeightRange>,
    },
}

/// One byte range of a weights file and the sha256 of its bytes, computed by the
/// orchestrator from its own copy of the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightRange {
    /// Offset of the first byte in the file.
    pub offset: u64,
    /// Length in bytes (at least 1).
    pub len: u64,
    /// sha256 of the range's bytes, lowercase hex.
    pub sha256: String,
}

impl WeightRange {
    /// One past the range's last byte (`None` if it overflows).
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

/// A node's data-plane identity: node id, iroh endpoint id and addresses.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Peer {
    /// Node id from the pool file.
    pub node_id: NodeId,
    /// iroh endpoint id (64 lowercase hex digits); for the orchestrator it may be unknown
    /// until the run starts.
    pub endpoint_id: Option<String>,
    /// Addresses the endpoint listens on (empty for a node reachable only through its
    /// relay).
    pub addrs: Vec<SocketAddr>,
    /// The iroh relay the endpoint can be reached through (`http(s)://...`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay: Option<String>,
}

/// What kind of hop an edge is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EdgeKind {
    /// Orchestrator -> stage 0: prompt and sampled token ids.
    TokenIn,
    /// Stage `from` -> stage `from + 1`: hidden states.
    Activation {
        /// The producing stage.
        from: StageIndex,
    },
    /// Last stage -> orchestrator: sampled token ids.
    TokenOut,
}

impl EdgeKind {
    /// A short label (`token_in`, `activation`, `token_out`).
    pub const fn label(&self) -> &'static str {
        match self {
            EdgeKind::TokenIn => "token_in",
            EdgeKind::Activation { .. } => "activation",
            EdgeKind::TokenOut => "token_out",
        }
    }
}

/// One edge of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgePlan {
    /// Planner-minted id, unique within the run.
    pub edge_id: EdgeId,
    /// The hop this edge is.
    #[serde(flatten)]
    pub kind: EdgeKind,
    /// Producing node (the orchestrator for `token_in`).
    pub producer: NodeId,
    /// Producing stage, if a stage produces.
    pub producer_stage: Option<StageIndex>,
    /// Consuming node (the orchestrator for `token_out`).
    pub consumer: NodeId,
    /// Consuming stage, if a stage consumes.
    pub consumer_stage: Option<StageIndex>,
    /// The contract for every object on the edge.
    pub object: ObjectSpec,
    /// Size and alignment of each end's ring.
    pub ring: RingSpec,
}

/// Resources a stage is predicted to need, before anything is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePrediction {
    /// Bytes of the tensors the stage loads (its blocks, plus embedding / head; every
    /// expert of a mixture of experts: all are resident).
    pub weight_bytes: u64,
    /// Bytes of weights one decoded token reads: its blocks with only the experts a token
    /// runs, and the head (of the embedding, one row); equal to `weight_bytes` but for the
    /// embedding on a dense model. What bounds a decode step where memory bandwidth does.
    #[serde(default)]
    pub active_weight_bytes: u64,
    /// Bytes of the f32 KV cache for its blocks at `max_seq_len`.
    pub kv_cache_bytes: u64,
    /// Arena bytes for its inbound and outbound rings (headers included).
    pub ring_bytes: u64,
    /// The engine's scratch for the largest micro-batch (`max_seq_len` rows).
    #[serde(default)]
    pub compute_bytes: u64,
    /// The node's and worker's processes themselves (code, runtime, threads).
    #[serde(default)]
    pub process_bytes: u64,
    /// The rows it sends on, logged for every position of every slot (so a resumed
    /// sequence's kept positions are sent without computing them again); 0 on the last
    /// stage.
    #[serde(default)]
    pub row_log_bytes: u64,
    /// The stage's prompt-cache store at most: the plan's store blocks times this stage's
    /// KV bytes per block, and its logged rows (0: no store).
    #[serde(default)]
    pub prompt_cache_bytes: u64,
    /// Sum of the above: what the stage's node and worker hold resident at most.
    pub total_bytes: u64,
    /// Memory the pool file gives the node.
    pub node_memory_bytes: u64,
}

/// One stage of the pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagePlan {
    /// Position in the pipeline.
    pub stage_index: StageIndex,
    /// The node that runs it.
    pub node_id: NodeId,
    /// Its contiguous block range.
    pub layers: LayerRange,
    /// Whether it owns the token embedding (stage 0).
    pub embedding: bool,
    /// Whether it owns the final norm, output head and sampling (last stage).
    pub head: bool,
    /// Its receive edge.
    pub inbound: EdgeId,
    /// Its send edge.
    pub outbound: EdgeId,
    /// Predicted resources.
    pub prediction: StagePrediction,
}

/// The model as the plan records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedModel {
    /// Where stages get the file.
    pub source: WeightSource,
    /// Human name from the file's metadata, if any.
    pub name: Option<String>,
    /// Architecture (`llama`).
    pub architecture: String,
    /// Transformer blocks.
    pub block_count: u32,
    /// Hidden size.
    pub hidden_size: u32,
    /// Vocabulary size.
    pub vocab_size: u32,
    /// End-of-sequence token id, if the file names one.
    pub eos_token_id: Option<u32>,
    /// End-of-turn token id, if the vocabulary has one (generation stops at it too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eot_token_id: Option<u32>,
    /// The window of the model's sliding-window blocks, if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// For a URL source, per stage (by index) the byte ranges its node downloads, with
    /// their digests (filled in by the orchestrator, which has the file); empty: every
    /// node downloads the whole file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stage_ranges: Vec<Vec<WeightRange>>,
}

/// Data-movement predictions for the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanPrediction {
    /// Activation bytes per hop for one decoded token.
    pub activation_bytes_per_token: u64,
    /// Number of activation hops (stages - 1).
    pub activation_hops: u32,
    /// Prompt tokens assumed for the prefill figures.
    pub prompt_tokens: u32,
    /// Activation bytes per hop for the prefill of `prompt_tokens`.
    pub prompt_activation_bytes: u64,
    /// Bytes crossing the network per decoded token, all hops and both token edges.
    pub network_bytes_per_token: u64,
    /// Sum of every stage's weight bytes.
    pub total_weight_bytes: u64,
    /// Sum of every stage's active weight bytes: what one decoded token reads.
    #[serde(default)]
    pub active_weight_bytes: u64,
}

/// Exactly one complete plan for a run. Built only by [`crate::planner::plan`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The run's id.
    pub run_id: RunId,
    /// The model.
    pub model: PlannedModel,
    /// The orchestrator's identity (endpoint may be filled in when the run starts).
    pub orchestrator: Peer,
    /// Data-plane identity of every node that runs a stage, in stage order.
    pub nodes: Vec<Peer>,
    /// Stages, indexed by `stage_index`.
    pub stages: Vec<StagePlan>,
    /// Edges: token-in, the activation hops in order, token-out.
    pub edges: Vec<EdgePlan>,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// Predictions.
    pub prediction: PlanPrediction,
    /// How the context (`runtime.max_seq_len`) was chosen (`None` from an older planner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<PlanContext>,
    /// Every stage's prompt-cache store (`blocks` 0: none).
    #[serde(default)]
    pub prompt_cache: PromptCachePlan,
    /// Its predicted speed, where every stage node's speed is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<super::SpeedPrediction>,
}

/// The context a plan gives each sequence, and why it is that long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanContext {
    /// Positions per sequence (`runtime.max_seq_len`).
    pub tokens: u32,
    /// The model's trained context length.
    pub trained: u32,
    /// Why it is `tokens` long.
    pub why: ContextWhy,
}

/// Why a plan's context is as long as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContextWhy {
    /// `--max-seq-len` gave it.
    Given,
    /// The model's trained length, which every stage's node holds.
    Trained,
    /// The longest that every stage's node holds: the trained length does not fit `node`
    /// (the node whose memory it fills the most).
    Memory {
        /// The node that bounds it.
        node: NodeId,
    },
}

/// A stage's receive edge as its node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecvEdgeProvision {
    /// The edge.
    pub edge_id: EdgeId,
    /// The only peer allowed to open the edge's stream.
    pub producer: Peer,
    /// Object contract, copied unchanged from the plan.
    pub object: ObjectSpec,
    /// Ring spec, copied unchanged from the plan.
    pub ring: RingSpec,
}

/// A stage's send edge as its node sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SendEdgeProvision {
    /// The edge.
    pub edge_id: EdgeId,
    /// The peer to open the edge's stream to.
    pub consumer: Peer,
    /// Object contract, copied unchanged from the plan.
    pub object: ObjectSpec,
    /// Ring spec, copied unchanged from the plan.
    pub ring: RingSpec,
}

/// Everything one node needs to run one stage of a run, and nothing about other stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisionStage {
    /// The run.
    pub run_id: RunId,
    /// The orchestrator allowed to control this stage.
    pub orchestrator: NodeId,
    /// This stage's position.
    pub stage_index: StageIndex,
    /// Total stages in the run.
    pub stage_count: u32,
    /// This stage's blocks.
    pub layers: LayerRange,
    /// Blocks in the whole model (to validate the range against the file).
    pub block_count: u32,
    /// Whether to load the token embedding.
    pub embedding: bool,
    /// Whether to load the final norm and output head.
    pub head: bool,
    /// Where to get the weights.
    pub weights: WeightSource,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// The receive edge.
    pub inbound: RecvEdgeProvision,
    /// The send edge.
    pub outbound: SendEdgeProvision,
    /// The faulted run this one re-forms (`None`: a first run): a node that ran this
    /// very stage in it keeps its caches (`specs/reformation.md`).
    #[serde(default)]
    pub resume_from: Option<RunId>,
    /// The prompt-cache store this stage keeps.
    #[serde(default)]
    pub prompt_cache: PromptCachePlan,
}

impl RunPlan {
    /// KV cache bytes one cached position takes across every stage (the planned caches'
    /// average: exact where no block has a sliding window).
    pub fn kv_bytes_per_token(&self) -> u64 {
        let kv: u64 = self.stages.iter().map(|s| s.prediction.kv_cache_bytes).sum();
        let positions =
            u64::from(self.runtime.max_seq_len) * u64::from(self.runtime.max_sequences.max(1));
        kv / positions.max(1)
    }

    /// The edge with this id.
    pub fn edge(&self, id: EdgeId) -> Option<&EdgePlan> {
        self.edges.iter().find(|e| e.edge_id == id)
    }

    /// The data-plane identity of a node of the plan (a stage node or the orchestrator).
    pub fn peer(&self, node: NodeId) -> Option<&Peer> {
        if self.orchestrator.node_id == node {
            return Some(&self.orchestrator);
        }
        self.nodes.iter().find(|p| p.node_id == node)
    }

    /// The weights source of one stage: the model's, with the stage's own byte ranges for
    /// a URL when the plan carries them.
    pub fn stage_source(&self, stage: StageIndex) -> Option<WeightSource> {
        let mut source = self.model.source.clone();
        if let WeightSource::Url { ranges, .. } = &mut source
            && !self.model.stage_ranges.is_empty()
        {
            ranges.clone_from(self.model.stage_ranges.get(usize::try_from(stage.0).ok()?)?);
        }
        Some(source)
    }

    /// Projects the plan onto one stage: its own range, its receive and send edge, specs
    /// copied unchanged. Deterministic; `None` if the plan has no such stage or is not
    /// internally consistent (which a plan from the planner always is).
    pub fn provision(&self, stage: StageIndex) -> Option<ProvisionStage> {
        let s = self.stages.get(usize::try_from(stage.0).ok()?)?;
        if s.stage_index != stage {
            return None;
        }
        let inbound = self.edge(s.inbound)?;
        let outbound = self.edge(s.outbound)?;
        Some(ProvisionStage {
            run_id: self.run_id,
            orchestrator: self.orchestrator.node_id,
            stage_index: stage,
            stage_count: u32::try_from(self.stages.len()).ok()?,
            layers: s.layers,
            block_count: self.model.block_count,
            embedding: s.embedding,
            head: s.head,
            weights: self.stage_source(stage)?,
            runtime: self.runtime,
            inbound: RecvEdgeProvision {
                edge_id: inbound.edge_id,
                producer: self.peer(inbound.producer)?.clone(),
                object: inbound.object,
                ring: inbound.ring,
            },
            outbound: SendEdgeProvision {
                edge_id: outbound.edge_id,
                consumer: self.peer(outbound.consumer)?.clone(),
                object: outbound.object,
                ring: outbound.ring,
            },
            prompt_cache: self.prompt_cache,
            resume_from: None,
        })
    }
}
