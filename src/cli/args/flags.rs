//! Flag groups shared by several commands, each declared once and flattened where used
//! (`#[command(flatten)]`): output ([`OutputFlags`]), placement ([`PlacementFlags`]),
//! runtime and sampling ([`RuntimeArgs`], [`SamplingFlags`]), pool ([`PoolFlags`]), and a
//! session's ([`SessionFlags`], with [`ResumeFlags`] and [`SpeculateFlags`]).

use clap::{Args, ValueEnum};

use crate::wire::{ActivationDType, LayerRange, NodeId};

/// Flags shared by every command that prints data.
#[derive(Debug, Args, Clone, Copy)]
pub struct OutputFlags {
    /// Print JSON Lines (one object per line with a `type` tag) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runtime settings shared by planning and running.
#[derive(Debug, Args, Clone)]
pub struct RuntimeArgs {
    /// Longest sequence (prompt + generated tokens) the KV caches hold [default: the
    /// model's trained context length, lowered to what the nodes' memory holds; `run
    /// plan` says which and why].
    #[arg(long, value_name = "N")]
    pub max_seq_len: Option<u32>,
    /// Element type of the KV caches: f16 halves their memory (the values are rounded to
    /// f16 as they are stored; the CPU engine only).
    #[arg(long, value_enum, default_value = "f32", value_name = "DTYPE")]
    pub kv_cache: KvCacheArg,
    /// Element type of activations between stages (f32 is bit-exact with one process).
    #[arg(long, value_enum, default_value = "f32", value_name = "DTYPE")]
    pub activation_dtype: ActivationArg,
    /// Most tokens to generate [default: until the end of sequence, a stop, or the
    /// context's end; a server's requests without `max_tokens` too].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// How the last stage picks tokens.
    #[command(flatten)]
    pub sampler: SamplingFlags,
    /// Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per
    /// slot [default: 1].
    #[arg(long, value_name = "N")]
    pub max_sequences: Option<u32>,
    /// Bytes each stage's node may keep of evicted prompt prefixes (its layers' KV, in
    /// host memory; 0 disables) [default: a quarter of the memory the node has left
    /// after its stage, at most 4 GiB].
    #[arg(long, value_name = "BYTES")]
    pub prompt_cache_bytes: Option<u64>,
}

/// Where the stages of a run go: shared by `run plan` and `orchestrate pool`.
#[derive(Debug, Args, Clone)]
pub struct PlacementFlags {
    /// Number of stages [default: one per placement node, or per pool node].
    #[arg(long, value_name = "N")]
    pub stages: Option<u32>,
    /// Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`.
    #[arg(long, value_delimiter = ',', value_name = "RANGES")]
    pub layers: Option<Vec<LayerRange>>,
    /// Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order].
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub nodes: Option<Vec<u64>>,
    /// What automatic layer ranges balance: the stages' decode steps from the speed each
    /// node measured at boot (within its memory), or their bytes against node memory.
    #[arg(long, value_enum, default_value = "speed", value_name = "BY")]
    pub balance: BalanceBy,
    /// Choose the stage count and nodes: of every count, the fastest nodes (by the speed each
    /// measured at boot) that hold the model, the plan predicted to decode fastest; fewer
    /// stages win ties (so slow links get fewer hops).
    #[arg(long, conflicts_with_all = ["stages", "layers", "nodes"])]
    pub auto_stages: bool,
    /// Refuse a plan predicted to decode one sequence slower than X times the best single
    /// node that holds the model (`below_min_speedup`, exit 4).
    #[arg(long, value_name = "X", value_parser = parse_speedup)]
    pub min_speedup: Option<f64>,
}

/// What automatic layer ranges balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BalanceBy {
    /// The stages' decode steps, from each node's measured speed (memory where unknown).
    Speed,
    /// Stage bytes against node memory.
    Memory,
}

/// A `--min-speedup`: a finite number above 0.
fn parse_speedup(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{text}` is not a speedup (a number above 0, e.g. 1.2)")),
    }
}

impl PlacementFlags {
    /// The explicit node order, as node ids.
    pub fn node_ids(&self) -> Option<Vec<NodeId>> {
        self.nodes.as_ref().map(|n| n.iter().copied().map(NodeId).collect())
    }
}

/// How the last stage picks tokens: part of [`RuntimeArgs`].
#[derive(Debug, Args, Clone)]
pub struct SamplingFlags {
    /// How the last stage picks tokens.
    #[arg(long, value_enum, default_value = "greedy", value_name = "MODE")]
    pub sampling: SamplingMode,
    /// Softmax temperature (with `--sampling sample`): finite and >= 0, where 0 is greedy.
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,
    /// Keep only the K most likely tokens (with `--sampling sample`).
    #[arg(long, value_name = "K")]
    pub top_k: Option<u32>,
    /// Keep the smallest set of tokens whose probability reaches P (with `--sampling sample`).
    #[arg(long, value_name = "P")]
    pub top_p: Option<f32>,
    /// Seed of the sampler (with `--sampling sample`).
    #[arg(long, value_name = "SEED")]
    pub seed: Option<u64>,
}

/// The iroh relays an endpoint may use: none unless named (no public relay is ever
/// contacted by default).
#[derive(Debug, Args, Clone, Default)]
pub struct RelayFlags {
    /// An iroh relay to reach peers through when no direct path exists, and to be reached
    /// through: `http://HOST:PORT` or `https://HOST[:PORT]`, e.g. one `swactor relay serve`
    /// runs (repeatable; the first is this host's home relay). iroh moves a relayed
    /// connection to a direct path when one works.
    #[arg(long = "relay", value_name = "URL")]
    pub relay: Vec<String>,
    /// Use the relays alone: open no QUIC port (for a host that must not expose one).
    #[arg(long, requires = "relay")]
    pub relay_only: bool,
    /// A PEM certificate an HTTPS relay's certificate may chain to, beside the public roots
    /// (a relay serving a certificate of its own, e.g. self-signed).
    #[arg(long, value_name = "FILE", requires = "relay")]
    pub relay_ca: Option<std::path::PathBuf>,
}

impl RelayFlags {
    /// The relays, checked (`relay.bad_url` as a usage error).
    pub fn relays(&self) -> Result<crate::net::relay::Relays, crate::cli::exit::CliError> {
        let fail = |e: crate::net::relay::RelayError| {
            let code = match e.reason {
                crate::net::relay::RelayFault::Tls => crate::cli::exit::ExitCode::Input,
                _ => crate::cli::exit::ExitCode::Usage,
            };
            crate::cli::exit::CliError::new(code, e.reason.to_string(), color_eyre::eyre::eyre!(e))
        };
        let relays =
            crate::net::relay::Relays::parse(&self.relay, self.relay_only).map_err(fail)?;
        match &self.relay_ca {
            Some(ca) => relays.trusting(ca).map_err(fail),
            None => Ok(relays),
        }
    }
}

/// How an orchestrator joins a pool (its addresses) and waits for it to be ready.
#[derive(Debug, Args, Clone)]
pub struct PoolFlags {
    /// iroh listen address (must be reachable by the nodes).
    #[arg(long, default_value = "0.0.0.0:0", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// SWIM listen address.
    #[arg(long, default_value = "0.0.0.0:0", value_name = "ADDR")]
    pub swim: std::net::SocketAddr,
    /// The address other hosts reach this one at, when listening on an unspecified address
    /// (default: the local address of the route toward the pool's nodes / join seeds; never
    /// `0.0.0.0`).
    #[arg(long, value_name = "IP")]
    pub advertise: Option<std::net::IpAddr>,
    /// The longest round trip between pool members, milliseconds, for SWIM's probe
    /// timings (members on wide-area links or behind relays: each probe waits 1.5 times it;
    /// up to 40 the LAN profile, failure detection in under a second).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub swim_rtt_ms: u64,
    /// Convergence window in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub window_ms: u64,
    /// Seconds to wait for the pool to be ready.
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub pool_timeout: u64,
    /// Relays.
    #[command(flatten)]
    pub relays: RelayFlags,
}

/// How a session runs, whatever feeds it (`run local`, `orchestrate pool|serve`): its
/// admission queue and micro-batches, speculation, events file, timeouts, what it does
/// after a node loss, and the runtime settings. `orchestrate serve` words some of their
/// help for a server (`mut_arg`); the flags are the same.
#[derive(Debug, Args, Clone)]
pub struct SessionFlags {
    /// With `--requests` or `--serve`: requests waiting for a slot at most (more are
    /// refused as `busy`, 429 when serving) [default: every request of the file; 64
    /// when serving].
    #[arg(long, value_name = "N")]
    pub queue: Option<usize>,
    /// With `--requests` or `--serve`: micro-batches in flight at most (the sequences
    /// are spread over this many groups) [default: one per stage, at most
    /// `--max-sequences`].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub groups: Option<u16>,
    /// With `--requests` or `--serve`: a micro-batch carrying a prompt chunk while other
    /// sequences decode should come back within this many milliseconds; the chunk size
    /// follows what the session measures (0: chunks follow the row budget alone).
    #[arg(long, value_name = "MS", default_value_t = 250)]
    pub prefill_budget_ms: u64,
    /// Speculative decoding.
    #[command(flatten)]
    pub spec: SpeculateFlags,
    /// Write every event of the run as JSON Lines to this file.
    #[arg(long, value_name = "FILE")]
    pub events: Option<std::path::PathBuf>,
    /// Seconds to wait for every stage to be ready (weights loaded, edges up).
    #[arg(long, default_value_t = 120, value_name = "S")]
    pub readiness_timeout: u64,
    /// Seconds to wait for each token.
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub token_timeout: u64,
    /// After a node loss.
    #[command(flatten)]
    pub resume: ResumeFlags,
    /// Runtime and sampling settings.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// What a session does when a stage node is lost: part of [`SessionFlags`].
#[derive(Debug, Args, Clone)]
pub struct ResumeFlags {
    /// Fail the session at once when a stage node is lost, as before re-formation
    /// existed (default: re-form over the nodes left and resume every request).
    #[arg(long)]
    pub no_resume: bool,
    /// Seconds to wait for enough nodes to re-form after a node is lost; then every
    /// request the session held ends with the fault.
    #[arg(long, default_value_t = 60, value_name = "S", conflicts_with = "no_resume")]
    pub resume_timeout: u64,
    /// Times one request may be resumed; past that it ends with the fault.
    #[arg(long, default_value_t = 3, value_name = "N", conflicts_with = "no_resume")]
    pub max_resumes: u32,
    /// Rebuild every stage's caches from the replay after a re-formation (default: the
    /// stages that stay on their node with the same layers keep theirs, and only the
    /// stages that moved are rebuilt, from the rows the kept stages logged).
    #[arg(long, conflicts_with = "no_resume")]
    pub no_keep_caches: bool,
}

impl ResumeFlags {
    /// The policy the flags ask for.
    pub fn policy(&self) -> crate::orchestrator::reform::ResumePolicy {
        if self.no_resume {
            return crate::orchestrator::reform::ResumePolicy::DISABLED;
        }
        crate::orchestrator::reform::ResumePolicy {
            enabled: true,
            timeout: std::time::Duration::from_secs(self.resume_timeout),
            max_resumes: self.max_resumes,
            keep_caches: !self.no_keep_caches,
        }
    }
}

/// How `run local`'s stages share this host's cores (`--layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Layout {
    /// One micro-batch in flight and every core for the stage computing it
    /// (`--groups 1 --threads <cores>`): the stages take turns as one process's layers
    /// would, and a batch of sequences is read once per step.
    OneHost,
    /// The shape of a pool of hosts: one micro-batch in flight per stage and one compute
    /// thread per worker (`--threads 1`), every stage busy at once.
    MultiHost,
}

impl Layout {
    /// Compute threads per worker unless `--threads` says: every core of this host
    /// (`cores`) for one host, one for the multi-host shape.
    pub fn threads(self, threads: Option<u32>, cores: u32) -> u32 {
        threads.unwrap_or(match self {
            Layout::OneHost => cores.max(1),
            Layout::MultiHost => 1,
        })
    }

    /// Micro-batches in flight unless `--groups` says (0: the session's default, one per
    /// stage).
    pub fn groups(self, groups: Option<u16>) -> u16 {
        groups.unwrap_or(match self {
            Layout::OneHost => 1,
            Layout::MultiHost => 0,
        })
    }

    /// The flag's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::OneHost => "one-host",
            Layout::MultiHost => "multi-host",
        }
    }
}

/// Token selection mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SamplingMode {
    /// The most likely token, always.
    Greedy,
    /// Temperature sampling with optional top-k / top-p, seeded.
    Sample,
}

/// Activation dtype as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ActivationArg {
    /// 32-bit floats (bit-exact with one process).
    F32,
    /// 16-bit floats (half the bytes per hop).
    F16,
}

impl From<ActivationArg> for ActivationDType {
    fn from(a: ActivationArg) -> Self {
        match a {
            ActivationArg::F32 => ActivationDType::F32,
            ActivationArg::F16 => ActivationDType::F16,
        }
    }
}

/// KV cache element type as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KvCacheArg {
    /// 32-bit floats.
    F32,
    /// 16-bit floats (half the KV cache memory).
    F16,
}

impl From<KvCacheArg> for crate::wire::KvCacheDType {
    fn from(a: KvCacheArg) -> Self {
        match a {
            KvCacheArg::F32 => crate::wire::KvCacheDType::F32,
            KvCacheArg::F16 => crate::wire::KvCacheDType::F16,
        }
    }
}

/// The HTTP server's flags (`orchestrate serve`, `run local --serve`).
#[derive(Debug, Args, Clone)]
pub struct ServeFlags {
    /// Where the HTTP API listens [default: 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Seconds a stop (SIGINT / SIGTERM) lets requests in flight finish before it
    /// cancels them [default: 30].
    #[arg(long = "grace-s", value_name = "S")]
    pub grace_s: Option<u64>,
    /// A file holding the API key: every route but /health and the page then needs
    /// `Authorization: Bearer KEY`.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<std::path::PathBuf>,
    /// Request bodies over this many bytes are refused with 413 [default: 8388608].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_body_bytes: Option<u64>,
    /// HTTP connections open at once; a client past them is answered 503 at once
    /// [default: 256].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: Option<u32>,
    /// HTTP connections open at once from one IP address; a client past them is answered
    /// 429 at once (behind a proxy on this host every client is one address) [default:
    /// half of `--max-connections`].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections_per_peer: Option<u32>,
    /// Seconds a request's headers may take to arrive (and an idle kept-alive connection
    /// stays open) [default: 10].
    #[arg(long = "header-timeout-s", value_name = "S",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout_s: Option<u64>,
    /// Seconds a request's body may take to arrive once its headers have; then 408 and
    /// the connection closes [default: 30].
    #[arg(long = "body-timeout-s", value_name = "S",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout_s: Option<u64>,
    /// A page origin (`scheme://host[:port]`) allowed to call the API from a browser,
    /// besides the server's own page and localhost pages; repeatable; `*` allows any.
    #[arg(long, value_name = "ORIGIN")]
    pub cors_origin: Vec<String>,
    /// A host name (or `name:port`) requests may name in `Host`, besides IP addresses and
    /// `localhost` (this stops DNS rebinding); repeatable; `*` allows any. Without it, a
    /// server bound to a wildcard address (`0.0.0.0`, `[::]`) answers any name, one bound
    /// to a given address only IP addresses and `localhost`.
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
    /// The model's name in /v1/models and in responses [default: the GGUF's name, else
    /// its file name].
    #[arg(long, value_name = "NAME")]
    pub model_name: Option<String>,
}

impl ServeFlags {
    /// Whether any of them was given.
    pub fn any(&self) -> bool {
        self.http.is_some()
            || self.grace_s.is_some()
            || self.api_key_file.is_some()
            || self.max_body_bytes.is_some()
            || self.max_connections.is_some()
            || self.max_connections_per_peer.is_some()
            || self.header_timeout_s.is_some()
            || self.body_timeout_s.is_some()
            || !self.cors_origin.is_empty()
            || !self.allowed_host.is_empty()
            || self.model_name.is_some()
    }
}

/// Speculative decoding in a session: part of [`SessionFlags`].
#[derive(Debug, Clone, Args)]
pub struct SpeculateFlags {
    /// Speculative decoding: `ngram` drafts each sequence's next tokens from its own
    /// prompt and output and verifies them in one trip through the pipeline (the output
    /// is the same tokens as without it).
    #[arg(long, value_enum, default_value_t = Speculate::Off, value_name = "HOW")]
    pub speculate: Speculate,
    /// With `--speculate`: the most tokens drafted per trip (the length follows each
    /// sequence's measured acceptance).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=15))]
    pub draft_max: u8,
    /// With `--speculate`: the fewest tokens drafted per trip where the drafter has
    /// them, whatever the measured acceptance and row cost (0: the length adapts alone;
    /// at most `--draft-max`).
    #[arg(long, default_value_t = 0, value_name = "N",
          value_parser = clap::value_parser!(u8).range(0..=15))]
    pub draft_min: u8,
    /// A draft model (same vocabulary as the model) that proposes the drafts, run
    /// greedily by this process's engine for every speculating sequence at once;
    /// implies speculation.
    #[arg(long, value_name = "GGUF")]
    pub draft_model: Option<std::path::PathBuf>,
    /// With `--draft-model`: its compute threads in this process.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub draft_threads: u32,
}

impl SpeculateFlags {
    /// The session's draft length limit: `--draft-max` where the session drafts
    /// (`--speculate ngram` or `--draft-model`), else 0.
    pub fn draft_max(&self) -> u8 {
        match (self.speculate, &self.draft_model) {
            (Speculate::Off, None) => 0,
            _ => self.draft_max,
        }
    }

    /// The session's draft length floor: `--draft-min` where the session drafts, cut to
    /// `--draft-max`.
    pub fn draft_min(&self) -> u8 {
        self.draft_min.min(self.draft_max())
    }
}

/// `--speculate`: how drafts are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Speculate {
    /// No speculation.
    Off,
    /// N-gram lookup over the sequence's own prompt and output.
    Ngram,
}

#[cfg(test)]
mod layout_tests {
    use super::Layout;

    #[test]
    fn one_host_gives_every_core_and_one_group_and_multi_host_one_thread_and_a_group_per_stage() {
        assert_eq!((Layout::OneHost.threads(None, 8), Layout::OneHost.groups(None)), (8, 1));
        assert_eq!((Layout::MultiHost.threads(None, 8), Layout::MultiHost.groups(None)), (1, 0));
        // What the user says wins in either layout.
        assert_eq!((Layout::OneHost.threads(Some(3), 8), Layout::OneHost.groups(Some(4))), (3, 4));
        assert_eq!(Layout::MultiHost.threads(Some(2), 8), 2);
        assert_eq!(Layout::OneHost.threads(None, 0), 1, "a host reporting no cores gets one");
    }
}
