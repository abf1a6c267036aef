//! What was typed: clap derive structs. Commands turn these into configs; nothing below
//! the CLI layer sees clap types.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::exit::EXIT_CODES_HELP;
use crate::model::synth::SynthDType;
use crate::wire::{ActivationDType, LayerRange, NodeId};

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

/// Weight storage type as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthDTypeArg {
    /// 32-bit floats.
    F32,
    /// 16-bit floats.
    F16,
    /// 8-bit blocks of 32.
    #[value(name = "q8_0")]
    Q8_0,
    /// 4-bit blocks of 32.
    #[value(name = "q4_0")]
    Q4_0,
}

impl From<SynthDTypeArg> for SynthDType {
    fn from(a: SynthDTypeArg) -> Self {
        match a {
            SynthDTypeArg::F32 => SynthDType::F32,
            SynthDTypeArg::F16 => SynthDType::F16,
            SynthDTypeArg::Q8_0 => SynthDType::Q8_0,
            SynthDTypeArg::Q4_0 => SynthDType::Q4_0,
        }
    }
}

/// swactor turns a pool of hosts into one pipeline-parallel inference engine for GGUF
/// language models.
#[derive(Debug, Parser)]
#[command(
    name = "swactor",
    version,
    about = "Distributed, pipeline-parallel inference for GGUF language models",
    long_about = "swactor turns a pool of hosts into one pipeline-parallel inference engine for GGUF \
language models: each host runs a contiguous range of transformer blocks, activations flow \
between hosts over QUIC, and a coordinator injects the prompt and streams the text back.",
    after_help = EXIT_CODES_HELP,
    propagate_version = true
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan runs.
    #[command(subcommand)]
    Run(RunCommand),
    /// Generate text with a whole model in this one process (the pipeline's reference).
    #[command(after_help = EXIT_CODES_HELP)]
    Generate(GenerateArgs),
    /// Run a prompt through a pool of `swactor node boot` hosts.
    #[command(subcommand)]
    Orchestrate(OrchestrateCommand),
    /// Inspect and synthesize GGUF models.
    #[command(subcommand)]
    Model(ModelCommand),
    /// Run this host as a pool node, or print its identity.
    #[command(subcommand)]
    Node(NodeCommand),
    /// Inspect the live edges of a node.
    #[command(subcommand)]
    Edge(EdgeCommand),
    /// Watch a pool from the orchestrator's side.
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Measure the data plane on this machine (each figure beside its baseline).
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Generate completions, man pages and the CLI reference (for packagers).
    #[command(subcommand, hide = true)]
    Util(UtilCommand),
    /// The worker process a node spawns and supervises (internal: speaks JSON lines on
    /// stdin/stdout, maps the arena named by SWACTOR_ARENA_FD / SWACTOR_ARENA_BYTES).
    #[command(hide = true)]
    Worker,
}

/// `swactor run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Plan a run over a pool and predict its resources, without running anything.
    #[command(after_help = EXIT_CODES_HELP)]
    Plan(PlanArgs),
    /// Run a whole pipeline on this machine: N `swactor node boot` children on loopback,
    /// the orchestrator in this process; prints the generated text and cleans up.
    #[command(after_help = EXIT_CODES_HELP)]
    Local(LocalArgs),
}

/// `swactor orchestrate ...`
#[derive(Debug, Subcommand)]
pub enum OrchestrateCommand {
    /// Wait for the pool to be ready, plan, provision every stage, inject the prompt,
    /// stream the generated text, and tear the run down.
    #[command(after_help = EXIT_CODES_HELP)]
    Pool(Box<OrchestratePoolArgs>),
}

/// What to run, shared by `orchestrate pool` and `run local`.
#[derive(Debug, Args, Clone)]
pub struct PromptArgs {
    /// The prompt text.
    #[arg(long, value_name = "TEXT", default_value = "Once upon a time")]
    pub prompt: String,
    /// Wrap the prompt in the model's chat template (ChatML, Llama 3 or Llama 2 style).
    #[arg(long)]
    pub chat: bool,
    /// Run a batch job: JSON Lines requests (`id`, `prompt` or `messages`, `max_tokens`,
    /// `temperature`, `top_p`, `top_k`, `seed`, `stop`) served concurrently by one
    /// session; one JSON line per request's result (or error) on stdout.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "chat"])]
    pub requests: Option<PathBuf>,
    /// With `--requests`: also a JSON line per generated token.
    #[arg(long, requires = "requests")]
    pub stream: bool,
    /// With `--requests`: requests waiting for a slot at most (more are refused as
    /// `busy`) [default: every request of the file].
    #[arg(long, value_name = "N", requires = "requests")]
    pub queue: Option<usize>,
    /// With `--requests`: micro-batches in flight at most (the sequences are spread over
    /// this many groups) [default: one per stage, at most `--max-sequences`].
    #[arg(long, value_name = "N", requires = "requests")]
    pub groups: Option<u16>,
    /// Write every event of the run as JSON Lines to this file.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Seconds to wait for every stage to be ready (weights loaded, edges up).
    #[arg(long, default_value_t = 120, value_name = "S")]
    pub readiness_timeout: u64,
    /// Seconds to wait for each token.
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub token_timeout: u64,
    /// The run id.
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub run_id: u64,
    /// Runtime settings.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Output format: JSON Lines with every event, one `token` line per token and a `run`
    /// summary.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor orchestrate pool`
#[derive(Debug, Args)]
pub struct OrchestratePoolArgs {
    /// The pool file.
    #[arg(long, value_name = "POOL")]
    pub pool: PathBuf,
    /// The GGUF model (the orchestrator's copy: tokenizer and plan come from it).
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The orchestrator's key file (nodes were started with its endpoint id).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Number of stages [default: one per placement node, or per pool node].
    #[arg(long, value_name = "N")]
    pub stages: Option<u32>,
    /// Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`.
    #[arg(long, value_delimiter = ',', value_name = "RANGES")]
    pub layers: Option<Vec<LayerRange>>,
    /// Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order].
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub nodes: Option<Vec<u64>>,
    /// Nodes download the weights from this `http(s)://host[:port]/path` URL (checked
    /// against `--model`'s size and sha256) instead of reading `--model`'s path on their
    /// own disk.
    #[arg(long, value_name = "URL")]
    pub weights_url: Option<String>,
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
    /// Convergence window in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub window_ms: u64,
    /// Seconds to wait for the pool to be ready.
    #[arg(long, default_value_t = 60, value_name = "S")]
    pub pool_timeout: u64,
    /// What to run.
    #[command(flatten)]
    pub run: PromptArgs,
}

/// `swactor run local`
#[derive(Debug, Args)]
pub struct LocalArgs {
    /// Number of stages (one node process each).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// The GGUF model [default: a small synthesized model, written to a temporary file].
    #[arg(long, value_name = "GGUF")]
    pub model: Option<PathBuf>,
    /// Compute threads of each stage worker (the nodes share this host; `--worker-threads`
    /// is an older name).
    #[arg(long = "threads", alias = "worker-threads", default_value_t = 1, value_name = "N")]
    pub worker_threads: u32,
    /// Arena bytes per node.
    #[arg(long, default_value_t = 256 << 20, value_name = "N")]
    pub arena_bytes: u64,
    /// Pass the nodes' logs through to stderr.
    #[arg(long)]
    pub node_logs: bool,
    /// What to run.
    #[command(flatten)]
    pub run: PromptArgs,
}

/// `swactor model ...`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes.
    #[command(after_help = EXIT_CODES_HELP)]
    Inspect(InspectArgs),
    /// Write a deterministic tiny llama model with random weights and a real BPE vocabulary.
    #[command(after_help = EXIT_CODES_HELP)]
    Synth(SynthArgs),
    /// Re-quantize a model's weight matrices (norms stay f32).
    #[command(after_help = EXIT_CODES_HELP)]
    Quantize(QuantizeArgs),
}

/// `swactor model quantize`
#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The GGUF model to read.
    #[arg(long = "in", value_name = "GGUF")]
    pub input: PathBuf,
    /// Where to write the re-quantized model.
    #[arg(long, value_name = "GGUF")]
    pub out: PathBuf,
    /// Target type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k.
    #[arg(long, value_name = "TYPE")]
    pub dtype: String,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor node ...`
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Print this node's identity (endpoint id) from its key file, creating the key (0600)
    /// on first use. The endpoint id is what pool files name.
    #[command(after_help = EXIT_CODES_HELP)]
    Id(NodeIdArgs),
    /// Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM,
    /// control inbox, admin socket) and serve until SIGINT or SIGTERM.
    #[command(after_help = EXIT_CODES_HELP)]
    Boot(Box<NodeBootArgs>),
}

/// `swactor node boot`
#[derive(Debug, Args)]
pub struct NodeBootArgs {
    /// This node's id, as the pool file names it.
    #[arg(long, value_name = "ID")]
    pub node_id: u64,
    /// The node's key file (created 0600 on first boot).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// iroh (QUIC) listen address.
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// SWIM (UDP) listen address.
    #[arg(long, value_name = "ADDR")]
    pub swim: std::net::SocketAddr,
    /// The address other hosts reach this one at, when listening on an unspecified address
    /// (default: the local address of the route toward the pool's nodes / join seeds; never
    /// `0.0.0.0`).
    #[arg(long, value_name = "IP")]
    pub advertise: Option<std::net::IpAddr>,
    /// SWIM addresses of other members to join through (repeatable).
    #[arg(long, value_name = "ADDR")]
    pub join: Vec<std::net::SocketAddr>,
    /// The orchestrator's endpoint id: the only peer allowed to control this node.
    #[arg(long, value_name = "ENDPOINT_ID")]
    pub orchestrator: String,
    /// Arena size in bytes.
    #[arg(long, default_value_t = 256 << 20, value_name = "N")]
    pub arena_bytes: u64,
    /// Memory this node can give a stage (weights, KV cache, rings), reported in
    /// `node_available` [default: the host's available memory].
    #[arg(long, value_name = "BYTES")]
    pub memory_bytes: Option<u64>,
    /// Where the stage computes: `cpu`, or `cuda:N` (an NVIDIA GPU; needs a build with the
    /// `cuda` feature). Checked at boot: a build without CUDA or a missing device faults
    /// the boot (`device_unavailable`, exit 6). Reported in `node_available`.
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = parse_node_device)]
    pub device: crate::worker::protocol::Backend,
    /// Compute threads of the worker's stage (`--worker-threads` is an older name).
    #[arg(long = "threads", alias = "worker-threads", default_value_t = 1, value_name = "N")]
    pub worker_threads: u32,
    /// Admin socket for `swactor edge inspect` [default: swactor-node-ID-KEY.sock in the
    /// runtime or temporary directory, KEY being the first 16 digits of the endpoint id].
    /// An existing file there is never touched: only a stale socket is replaced.
    #[arg(long, value_name = "PATH")]
    pub admin: Option<PathBuf>,
    /// Directory for downloaded weights (default: $XDG_CACHE_HOME/swactor/weights).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Milliseconds the boot may take; past it the node faults with the resource it was
    /// waiting for (exit 6).
    #[arg(long, default_value_t = 30_000, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub boot_timeout_ms: u64,
    /// Restarts of a crashed worker before the node faults and stops [default: any number].
    #[arg(long, value_name = "N")]
    pub max_worker_restarts: Option<u32>,
    /// Stop when standard input closes (for supervisors such as `run local`).
    #[arg(long, hide = true)]
    pub stop_on_stdin_eof: bool,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor pool ...`
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Observe a pool read-only: connect to every node of a pool file with the
    /// orchestrator's delegation (never as the orchestrator), and report availability,
    /// liveness as the nodes' SWIM sees it, and pool readiness (ready = every node
    /// available, live and unchanged for the convergence window). Safe beside a run.
    #[command(after_help = EXIT_CODES_HELP)]
    Watch(PoolWatchArgs),
    /// Write a pool file from what the nodes printed: the `node_available` lines of
    /// `node boot --json` (from files, or standard input), so nobody copies endpoint ids by
    /// hand. Each node's reported memory becomes its `memory_bytes`.
    #[command(after_help = EXIT_CODES_HELP)]
    Init(PoolInitArgs),
}

/// `swactor pool init`
#[derive(Debug, Args)]
pub struct PoolInitArgs {
    /// Files holding `node boot --json` output (default: standard input).
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The orchestrator's node id in the pool.
    #[arg(long, default_value_t = 100, value_name = "ID")]
    pub orchestrator_node_id: u64,
}

/// `swactor pool watch`
#[derive(Debug, Args)]
pub struct PoolWatchArgs {
    /// The pool file.
    #[arg(long, value_name = "POOL")]
    pub pool: PathBuf,
    /// The orchestrator's key file (nodes were started with its endpoint id). It only
    /// vouches for the watch, which holds a key of its own and observes read-only: it may
    /// run beside `orchestrate pool` with the same file.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// iroh listen address (the watch only connects out; it joins no membership).
    #[arg(long, default_value = "0.0.0.0:0", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Convergence window in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub window_ms: u64,
    /// Exit once the pool is ready.
    #[arg(long)]
    pub until_ready: bool,
    /// Give up (exit 8) when the pool is not ready within S seconds [default: wait on].
    #[arg(long, value_name = "S")]
    pub pool_timeout: Option<u64>,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor edge ...`
#[derive(Debug, Subcommand)]
pub enum EdgeCommand {
    /// Show a node's edge records (state, ring, peers) and what it sees of the pool.
    #[command(after_help = EXIT_CODES_HELP)]
    Inspect(EdgeInspectArgs),
}

/// `swactor edge inspect`
#[derive(Debug, Args)]
pub struct EdgeInspectArgs {
    /// The node's admin socket.
    #[arg(long = "node", value_name = "SOCKET")]
    pub node: PathBuf,
    /// Show only this edge.
    #[arg(long, value_name = "ID")]
    pub edge: Option<u64>,
    /// Milliseconds to wait for the node's answer.
    #[arg(long, default_value_t = 5000, value_name = "MS")]
    pub timeout_ms: u64,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor node id`
#[derive(Debug, Args)]
pub struct NodeIdArgs {
    /// The node's key file.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Cross-process ring throughput (node producer -> ingress ring -> a real worker's
    /// device copy) as a ratio of plain memcpy bandwidth measured in the same run.
    #[command(after_help = EXIT_CODES_HELP)]
    Ring(BenchRingArgs),
    /// Wake round trip: a small object written into an ingress ring until the worker's
    /// `ObjectLoaded` line is read back (median and p99).
    #[command(after_help = EXIT_CODES_HELP)]
    Wake(BenchWakeArgs),
    /// Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring)
    /// beside raw iroh stream throughput, and the hop latency of a decode-sized object.
    #[command(after_help = EXIT_CODES_HELP)]
    Edge(BenchEdgeArgs),
    /// Decode tokens/s of `swactor generate` at one compute thread: the whole model
    /// against the same model split into in-process stages, for the model and re-quantized
    /// copies of it.
    #[command(after_help = EXIT_CODES_HELP)]
    Decode(BenchDecodeArgs),
    /// Decode tokens/s of a `run local` pipeline (one node process per stage, one compute
    /// thread each) against `swactor generate` at one thread, and the time from `run
    /// local`'s start to its first token.
    #[command(after_help = EXIT_CODES_HELP)]
    Pipeline(BenchDecodeArgs),
    /// The CPU engine on one or more models (and re-quantized copies): decode and
    /// prefill tokens/s at each thread count, aggregate decode at several batch sizes,
    /// and stage load time (mapped, against candle's copying load).
    /// `scripts/bench-llama-cpp.py` runs it beside llama.cpp.
    #[command(after_help = EXIT_CODES_HELP)]
    Engine(BenchEngineArgs),
    /// Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures
    /// the time to `run_faulted` and to `run_torn_down`.
    #[command(after_help = EXIT_CODES_HELP)]
    Failover(BenchFailoverArgs),
    /// Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests
    /// (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95)
    /// beside one-sequence `swactor generate` with the same total compute threads.
    #[command(after_help = EXIT_CODES_HELP)]
    Serve(BenchServeArgs),
}

/// `swactor bench serve`
#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// Stages of the session (one node process and one compute thread each).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Tokens each request generates.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16", value_name = "LIST")]
    pub concurrency: Vec<u32>,
    /// Also measure copies re-quantized to these types (e.g. `q8_0`).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub requantize: Vec<String>,
    /// Micro-batches in flight at most (`run local --groups`) [default: the session's].
    #[arg(long, value_name = "N")]
    pub groups: Option<u16>,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench edge`
#[derive(Debug, Args)]
pub struct BenchEdgeArgs {
    /// MiB to stream in each throughput run.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub mib: u64,
    /// Object size of the latency run (a decode-sized activation by default).
    #[arg(long, default_value_t = 2344, value_name = "BYTES")]
    pub object_bytes: u64,
    /// Latency samples.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub samples: usize,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench engine`
#[derive(Debug, Args)]
pub struct BenchEngineArgs {
    /// A GGUF model (repeatable).
    #[arg(long, value_name = "GGUF", required = true)]
    pub model: Vec<PathBuf>,
    /// Also measure copies of the first model re-quantized to these types (e.g.
    /// `q8_0,q4_0,q4_k`).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub requantize: Vec<String>,
    /// Compute thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_name = "N,...")]
    pub threads: Vec<u32>,
    /// Tokens decoded per run.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Length of the prefill prompt.
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub prompt_tokens: usize,
    /// Batch sizes of the aggregate decode.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8", value_name = "N,...")]
    pub batch: Vec<usize>,
    /// Runs of each measurement (the best is kept).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench failover`
#[derive(Debug, Args)]
pub struct BenchFailoverArgs {
    /// Stages of the local pipeline (node 2 is killed).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Runs (each on a fresh local pool).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench decode` and `swactor bench pipeline`
#[derive(Debug, Args)]
pub struct BenchDecodeArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// Stages of the split run.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Tokens to generate per run.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub requantize: Vec<String>,
    /// Runs of each configuration (the best is kept).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench ring`
#[derive(Debug, Args)]
pub struct BenchRingArgs {
    /// Ring data capacity in MiB (the planner's largest activation ring).
    #[arg(long, default_value_t = 4, value_name = "MIB")]
    pub ring_mib: u64,
    /// Bytes the producer writes at a time, in KiB.
    #[arg(long, default_value_t = 256, value_name = "KIB")]
    pub span_kib: u64,
    /// Object size in MiB.
    #[arg(long, default_value_t = 16, value_name = "MIB")]
    pub object_mib: u64,
    /// Bytes to stream in MiB.
    #[arg(long, default_value_t = 2048, value_name = "MIB")]
    pub total_mib: u64,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor bench wake`
#[derive(Debug, Args)]
pub struct BenchWakeArgs {
    /// Round trips to measure.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub samples: usize,
    /// Object payload bytes (a multiple of 4).
    #[arg(long, default_value_t = 64, value_name = "BYTES")]
    pub bytes: u64,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor util ...` (hidden).
#[derive(Debug, Subcommand)]
pub enum UtilCommand {
    /// Print shell completions, or write every shell's file into a directory.
    Completions {
        /// The shell to print completions for.
        #[arg(value_enum, required_unless_present = "dir")]
        shell: Option<clap_complete::Shell>,
        /// Write bash, zsh, fish, elvish and powershell completions into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print the man page, or write every command's page into a directory.
    Man {
        /// Write one page per command into this directory.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Print the whole CLI reference as Markdown.
    MarkdownHelp,
    /// Test helper: attach as producer to a ring of the inherited arena, write and commit
    /// a pattern stream, then write bytes without committing them and stall until killed.
    RingProduce {
        /// The ring's layout as JSON.
        #[arg(long)]
        layout: String,
        /// Pattern bytes to write and commit (`(i * 7 + 3) mod 256`).
        #[arg(long)]
        bytes: u64,
        /// Bytes to write after them without committing.
        #[arg(long, default_value_t = 0)]
        uncommitted: u64,
    },
    /// Feed every decoder of untrusted bytes (object header, control frames, worker lines,
    /// GGUF header, pool file, plan) seeded mutations of valid inputs; report panics and
    /// slow inputs (exit 1 when any is found).
    Fuzz(FuzzArgs),
    /// Run the seeded simulation of a whole session (the real run FSM, scheduler and stage
    /// controllers in a simulated world with faults) for many seeds; print a summary, and
    /// for a seed that broke an invariant the command that replays it and its trace.
    Simulate(SimulateArgs),
    /// Test helper: a hostile SWIM participant that claims someone else's node id and
    /// endpoint id and sends to `--target` until killed. Prints its address first.
    SwimImpostor {
        /// How it attacks.
        #[arg(long, value_enum)]
        mode: ImpostorModeArg,
        /// The member it pretends to be: node id.
        #[arg(long)]
        node_id: u64,
        /// The member it pretends to be: endpoint id.
        #[arg(long)]
        endpoint_id: String,
        /// Where it sends (a member's SWIM address).
        #[arg(long)]
        target: std::net::SocketAddr,
        /// Where it listens.
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
    },
}

/// `swactor util fuzz` (hidden): every decoder of untrusted bytes fed mutated inputs.
#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// The decoders to fuzz (default: all).
    #[arg(long, value_enum)]
    pub target: Vec<crate::fuzz::Target>,
    /// Inputs per decoder.
    #[arg(long, default_value_t = 100_000)]
    pub iterations: u64,
    /// Seed of the first run (a finding names the seed that replays it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor util simulate`
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Seeds to run.
    #[arg(long, default_value_t = 1000)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Traffic only: no faults injected.
    #[arg(long)]
    pub no_faults: bool,
    /// Plant a known bug (to check that the checks find it).
    #[arg(long, value_parser = planted_parser())]
    pub plant: Option<crate::sim::Planted>,
    /// Print every seed's trace, not only a failing one's.
    #[arg(long)]
    pub trace: bool,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// How `util swim-impostor` attacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ImpostorModeArg {
    /// Plain foca datagrams (no envelope).
    Plain,
    /// Sealed with a key of its own.
    OwnKey,
    /// Naming the claimed key as signer, signed with its own.
    ForgedSigner,
    /// Replays the first datagram it receives.
    Replay,
}

/// Flags shared by every command that prints data.
#[derive(Debug, Args, Clone, Copy)]
pub struct JsonFlag {
    /// Print JSON Lines (one object per line with a `type` tag) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Token selection mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SamplingMode {
    /// The most likely token, always.
    Greedy,
    /// Temperature sampling with optional top-k / top-p, seeded.
    Sample,
}

/// Runtime settings shared by planning and running.
#[derive(Debug, Args, Clone)]
pub struct RuntimeArgs {
    /// Longest sequence (prompt + generated tokens) the KV caches hold [default: the
    /// model's context length, at most 2048].
    #[arg(long, value_name = "N")]
    pub max_seq_len: Option<u32>,
    /// Element type of the KV caches: f16 halves their memory (the values are rounded to
    /// f16 as they are stored; the CPU engine only).
    #[arg(long, value_enum, default_value = "f32", value_name = "DTYPE")]
    pub kv_cache: KvCacheArg,
    /// Element type of activations between stages (f32 is bit-exact with one process).
    #[arg(long, value_enum, default_value = "f32", value_name = "DTYPE")]
    pub activation_dtype: ActivationArg,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_tokens: u32,
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
    /// Sequences in the pipeline at once (1 to 256): every stage holds a KV cache per
    /// slot [default: 1, or 8 with `--requests`].
    #[arg(long, value_name = "N")]
    pub max_sequences: Option<u32>,
}

/// `swactor run plan`
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The GGUF model to plan for.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The pool file (TOML inventory of nodes).
    #[arg(long, value_name = "POOL")]
    pub pool: PathBuf,
    /// Number of stages [default: one per placement node, or per pool node].
    #[arg(long, value_name = "N")]
    pub stages: Option<u32>,
    /// Explicit layer ranges in stage order, e.g. `0..10,10..20,20..30`.
    #[arg(long, value_delimiter = ',', value_name = "RANGES")]
    pub layers: Option<Vec<LayerRange>>,
    /// Explicit nodes in stage order, e.g. `3,1,2` [default: pool file order].
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    pub nodes: Option<Vec<u64>>,
    /// Prompt length assumed for the prefill predictions.
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub prompt_tokens: u32,
    /// Nodes download the weights from this `http(s)://host[:port]/path` URL instead of
    /// reading `--model`'s path; the plan carries the size and sha256 of the local
    /// `--model` file to check them against.
    #[arg(long, value_name = "URL")]
    pub weights_url: Option<String>,
    /// The run id to write into the plan.
    #[arg(long, default_value_t = 1, value_name = "ID")]
    pub run_id: u64,
    /// Runtime settings.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

impl PlanArgs {
    /// The explicit node order, as node ids.
    pub fn node_ids(&self) -> Option<Vec<NodeId>> {
        self.nodes.as_ref().map(|n| n.iter().copied().map(NodeId).collect())
    }
}

/// `swactor generate`
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The prompt text.
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// Split the model into this many stages in this process (activations cross each
    /// boundary as wire bytes, as in a pipeline).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub stages: u32,
    /// Where to compute: `cpu` (swactor's engine), `candle` (candle's CPU ops, the
    /// reference), or `cuda:N` in a build with the `cuda` feature.
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    pub device: String,
    /// Compute threads (the in-process stages share them) [default: the CPUs available].
    #[arg(long, value_name = "N")]
    pub threads: Option<u32>,
    /// Runtime settings.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Output format: JSON Lines with one `token` line per token and a `generation` summary.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor model inspect`
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The GGUF file.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Show the layers and weight bytes of each of N stages (the planner's balance over
    /// nodes of equal memory) [default: 2, or 1 for a one-block model].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub stages: Option<u32>,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `swactor model synth`
#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Where to write the GGUF file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Transformer blocks.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub blocks: u32,
    /// Hidden size.
    #[arg(long, default_value_t = 256, value_name = "H")]
    pub hidden: u32,
    /// Attention heads.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub heads: u32,
    /// Key/value heads (grouped-query attention).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub kv_heads: u32,
    /// Feed-forward inner size.
    #[arg(long, default_value_t = 512, value_name = "F")]
    pub ffn: u32,
    /// Vocabulary size (at least 257: 256 bytes and an end-of-text token).
    #[arg(long, default_value_t = 512, value_name = "V")]
    pub vocab: u32,
    /// Context length recorded in the file.
    #[arg(long, default_value_t = 2048, value_name = "N")]
    pub context: u32,
    /// Storage type of the weight matrices.
    #[arg(long, value_enum, default_value = "f32", value_name = "DTYPE")]
    pub dtype: SynthDTypeArg,
    /// Reuse the token embedding as the output head (no `output.weight`).
    #[arg(long)]
    pub tied_embeddings: bool,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Output format.
    #[command(flatten)]
    pub output: JsonFlag,
}

/// `cpu`, `cuda` (device 0) or `cuda:N`, as `node boot --device` takes it.
fn parse_node_device(text: &str) -> Result<crate::worker::protocol::Backend, String> {
    use crate::worker::protocol::Backend;
    match text {
        "cpu" => Ok(Backend::Cpu),
        "cuda" => Ok(Backend::Cuda { ordinal: 0 }),
        _ => text
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(|ordinal| Backend::Cuda { ordinal })
            .ok_or_else(|| format!("expected `cpu` or `cuda:N`, not `{text}`")),
    }
}

/// `--plant`: the core's planted bugs by name, listed in help and completions.
fn planted_parser() -> impl clap::builder::TypedValueParser<Value = crate::sim::Planted> {
    use clap::builder::TypedValueParser;
    let names = crate::sim::Planted::ALL.map(crate::sim::Planted::name);
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<crate::sim::Planted>())
}
