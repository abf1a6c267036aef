//! `swactor bench ...`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::OutputFlags;
use crate::cli::exit::SEE_EXIT_CODES;

/// `swactor bench ...`
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Cross-process ring throughput (node producer -> ingress ring -> a real worker's
    /// device copy) as a ratio of plain memcpy bandwidth measured in the same run.
    #[command(after_help = SEE_EXIT_CODES)]
    Ring(BenchRingArgs),
    /// Wake round trip: a small object written into an ingress ring until the worker's
    /// `ObjectLoaded` line is read back (median and p99).
    #[command(after_help = SEE_EXIT_CODES)]
    Wake(BenchWakeArgs),
    /// Edge throughput (egress ring -> send pump -> QUIC -> receive pump -> ingress ring)
    /// beside raw iroh stream throughput, and the hop latency of a decode-sized object.
    #[command(after_help = SEE_EXIT_CODES)]
    Edge(BenchEdgeArgs),
    /// Decode tokens/s of `swactor generate` at one compute thread: the whole model
    /// against the same model split into in-process stages, for the model and re-quantized
    /// copies of it.
    #[command(after_help = SEE_EXIT_CODES)]
    Decode(BenchDecodeArgs),
    /// Decode tokens/s of a `run local` pipeline (one node process per stage, one compute
    /// thread each) against `swactor generate` at one thread, and the time from `run
    /// local`'s start to its first token.
    #[command(after_help = SEE_EXIT_CODES)]
    Pipeline(BenchDecodeArgs),
    /// The CPU engine on one or more models (and re-quantized copies): decode and
    /// prefill tokens/s at each thread count, aggregate decode at several batch sizes,
    /// and stage load time (mapped, against candle's copying load).
    /// `scripts/bench-llama-cpp.py` runs it beside llama.cpp.
    #[command(after_help = SEE_EXIT_CODES)]
    Engine(BenchEngineArgs),
    /// The engine's matrix products one at a time on a model's own weights: time per
    /// product against the bytes it reads and this machine's memory read bandwidth
    /// (measured in the same run), beside the whole forward pass, for a decode step and
    /// prefills.
    #[command(after_help = SEE_EXIT_CODES)]
    Products(BenchProductsArgs),
    /// Speculative decoding: one sequence's decode tokens/s with and without n-gram
    /// drafts, in one process and through a `run local` pipeline, on a grounded workload
    /// (text the answer repeats or edits) and on free generation, each pair side by side.
    #[command(after_help = SEE_EXIT_CODES)]
    Speculate(BenchSpeculateArgs),
    /// Fault detection: SIGKILLs a stage node of a local pipeline mid-decode and measures
    /// the time to `run_faulted` and to `run_torn_down`.
    #[command(after_help = SEE_EXIT_CODES)]
    Failover(BenchFailoverArgs),
    /// Serving: a `run local` session with 1, 2, 4, 8 and 16 concurrent greedy requests
    /// (aggregate decode tokens/s, time to first token and inter-token latency p50 / p95)
    /// beside one-sequence `swactor generate` with the same total compute threads.
    #[command(after_help = SEE_EXIT_CODES)]
    Serve(BenchServeArgs),
    /// The prefix cache: a multi-turn conversation served by `run local --serve` (each
    /// turn a completion of the transcript so far), each turn sent with the cache and again
    /// with `cache_prompt: false` (time to first token, cached tokens per turn), then
    /// conversations sharing a long system prompt at once, with and without it (aggregate
    /// tokens/s).
    #[command(after_help = SEE_EXIT_CODES)]
    Prefix(BenchPrefixArgs),
    /// Constrained output: the same chat prompts with a JSON schema in `response_format`
    /// and without, side by side in one server; decode tokens/s of each and their ratio,
    /// and how many constrained replies parsed with the schema's keys.
    #[command(after_help = SEE_EXIT_CODES)]
    Structured(BenchStructuredArgs),
    /// Wide-area links: a pipeline of node processes (one compute thread each), each host in
    /// its own network namespace behind a link of each round trip (`util wan-link`), and
    /// relay-only through a relay, with and without n-gram speculation; decode tokens/s and
    /// time to first token measured beside what the plan predicted, and their ratio. Needs
    /// root (network namespaces, iptables).
    #[command(after_help = SEE_EXIT_CODES)]
    Wan(BenchWanArgs),
}

/// `swactor bench wan`
#[derive(Debug, Args)]
pub struct BenchWanArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// Stages (one host namespace and node process each).
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u8).range(1..=8))]
    pub stages: u8,
    /// Share of datagrams each link loses each way, 0..=1.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss: f64,
    /// Megabits per second each link carries each way (default: unlimited; not the relay).
    #[arg(long, value_name = "MBIT", value_parser = parse_rate)]
    pub rate_mbit: Option<f64>,
    /// The links: `direct`, a round trip in milliseconds, or `relay`.
    #[arg(long, value_delimiter = ',', default_value = "direct,20,80,relay", value_name = "LINKS",
          value_parser = parse_link)]
    pub links: Vec<crate::bench::wan::Link>,
    /// Tokens to generate per run.
    #[arg(long, default_value_t = 32, value_name = "N",
          value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub tokens: u32,
    /// The prompt (by default one whose answer repeats it, where n-gram drafts land).
    #[arg(
        long,
        value_name = "TEXT",
        default_value = "Repeat this list exactly: apples, pears, plums, cherries, grapes, \
                           lemons, limes, melons, peaches, apricots. The list: apples, pears,"
    )]
    pub prompt: String,
    /// Leave out the runs with n-gram speculation.
    #[arg(long)]
    pub no_speculate: bool,
    /// Also run nodes of different speed (every host but the first on the scalar kernels)
    /// with ranges balanced by speed and by memory, side by side.
    #[arg(long)]
    pub mixed: bool,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// A `--links` entry.
fn parse_link(text: &str) -> Result<crate::bench::wan::Link, String> {
    use crate::bench::wan::Link;
    match text {
        "direct" => Ok(Link::Rtt { ms: 0 }),
        "relay" => Ok(Link::Relay),
        ms => match ms.trim_end_matches("ms").parse::<u64>() {
            Ok(ms) if ms <= 10_000 => Ok(Link::Rtt { ms }),
            _ => Err(format!(
                "`{text}` is not a link (direct, relay, or a round trip in ms up to 10000)"
            )),
        },
    }
}

/// `swactor bench structured`
#[derive(Debug, Args)]
pub struct BenchStructuredArgs {
    /// The GGUF model; again for more models, measured one after another in the same run.
    #[arg(long, value_name = "GGUF", required = true)]
    pub model: Vec<PathBuf>,
    /// Also measure a 1.1B llama written on the fly into the scratch directory (`model
    /// synth`; its text is noise, but the schema still holds it).
    #[arg(long)]
    pub synth_1b: bool,
    /// Stages of the session (one node process each).
    #[arg(long, default_value_t = 2, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=16))]
    pub stages: u32,
    /// Compute threads of each stage worker.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Requests of each kind (constrained and free), in turns.
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub requests: u32,
    /// Tokens each reply generates at most (enough for the schema's bounded object).
    #[arg(long, default_value_t = 256, value_name = "N",
          value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub max_tokens: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor bench prefix`
#[derive(Debug, Args)]
pub struct BenchPrefixArgs {
    /// The GGUF model; again for more models, measured one after another in the same run.
    #[arg(long, value_name = "GGUF", required = true)]
    pub model: Vec<PathBuf>,
    /// Also measure a 1.1B llama written on the fly into the scratch directory (`model
    /// synth`), at a real size beside the model's.
    #[arg(long)]
    pub synth_1b: bool,
    /// Stages of the session (one node process each).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Compute threads of each stage worker.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Turns of the conversation.
    #[arg(long, default_value_t = 10, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub turns: u32,
    /// Words of user text each turn adds (about a token each).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub turn_words: u32,
    /// Tokens each reply generates at most.
    #[arg(long, default_value_t = 24, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub reply_tokens: u32,
    /// Conversations at once sharing one system prompt (0: that part is skipped).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u32).range(0..=64))]
    pub conversations: u32,
    /// Words of the shared system prompt.
    #[arg(long, default_value_t = 500, value_name = "N")]
    pub system_words: u32,
    /// Turns of each of those conversations (and of the crowded part's).
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100))]
    pub shared_turns: u32,
    /// Conversations taking turns one after another, twice as many as the slots by
    /// default, so that each finds its history in the stages' block stores, not in its
    /// slot (0: that part is skipped).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=256))]
    pub crowd: Option<u32>,
    /// Each sequence's context [default: the server's: the model's trained length as far
    /// as memory holds it].
    #[arg(long, value_name = "N")]
    pub max_seq_len: Option<u32>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    pub output: OutputFlags,
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
    pub output: OutputFlags,
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
    pub output: OutputFlags,
}

/// `swactor bench decode` and `swactor bench pipeline`
#[derive(Debug, Args)]
pub struct BenchDecodeArgs {
    /// The GGUF model; again for more models, measured one after another in the same run
    /// (`--requantize` copies the first).
    #[arg(long, value_name = "GGUF", required = true)]
    pub model: Vec<PathBuf>,
    /// Stages of the split run.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Tokens to generate per run.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Also measure copies re-quantized to these types (e.g. `q8_0,q4_0`).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub requantize: Vec<String>,
    /// Also measure a 1.1B llama written on the fly into the scratch directory (`model
    /// synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures
    /// at a real size beside the model's.
    #[arg(long)]
    pub synth_1b: bool,
    /// Runs of each configuration (the best is kept).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    /// Lengths of the prefill prompts (one prefill measured at each).
    #[arg(long, value_delimiter = ',', default_value = "128,512", value_name = "N,...")]
    pub prompt_tokens: Vec<usize>,
    /// Batch sizes of the aggregate decode.
    #[arg(long, value_delimiter = ',', default_value = "1,4,8", value_name = "N,...")]
    pub batch: Vec<usize>,
    /// Runs of each measurement (the best is kept).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor bench products`
#[derive(Debug, Args)]
pub struct BenchProductsArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF", required_unless_present = "formats")]
    pub model: Option<PathBuf>,
    /// Instead of a model's products: each of these weight formats' single-row product on
    /// a `--cols`-wide matrix of pseudo-random weights resident in cache (`all`: every
    /// format the engine reads).
    #[arg(long, value_delimiter = ',', value_name = "FORMATS", conflicts_with_all = ["model", "rows"])]
    pub formats: Option<Vec<String>>,
    /// With `--formats`: input columns of each matrix (a multiple of 256).
    #[arg(long, default_value_t = 4096, value_name = "N", requires = "formats")]
    pub cols: usize,
    /// Compute thread counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2", value_name = "N,...")]
    pub threads: Vec<u32>,
    /// Activation rows of each forward pass measured (1: a decode step; more: a prefill).
    #[arg(long, value_delimiter = ',', default_value = "1,128,512", value_name = "N,...")]
    pub rows: Vec<usize>,
    /// Runs of each measurement (the best is kept).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor bench failover`
#[derive(Debug, Args)]
pub struct BenchFailoverArgs {
    /// Stages of the local pipeline (node 2 is killed).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// Resume instead of failing: the session re-forms over a spare node and, in a second
    /// series, over the survivors alone; the time from the kill to the first resumed token
    /// and its parts.
    #[arg(long, requires = "model")]
    pub resume: bool,
    /// With `--resume`: the GGUF model served.
    #[arg(long, value_name = "GGUF")]
    pub model: Option<PathBuf>,
    /// With `--resume`: requests in flight, each a series.
    #[arg(long, value_delimiter = ',', default_value = "1,8", value_name = "N,...")]
    pub sequences: Vec<u32>,
    /// With `--resume`: tokens each request generates.
    #[arg(long, default_value_t = 160, value_name = "N")]
    pub tokens: u32,
    /// With `--resume`: tokens every request has when node 2 is killed (a longer history
    /// is a longer replay).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub kill_after: u32,
    /// Runs (each on a fresh local pool).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor bench serve`
#[derive(Debug, Args)]
pub struct BenchServeArgs {
    /// The GGUF model; again for more models, measured one after another in the same run
    /// (`--requantize` copies the first).
    #[arg(long, value_name = "GGUF", required = true)]
    pub model: Vec<PathBuf>,
    /// Also measure a 1.1B llama written on the fly into the scratch directory (`model
    /// synth`: 22 blocks, hidden 2048, 32 / 4 heads, ffn 5632, vocab 32000, Q4_0): figures
    /// at a real size beside the model's.
    #[arg(long)]
    pub synth_1b: bool,
    /// Stages of the session (one node process each).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// How the stages share this host's cores (`run local --layout`).
    #[arg(long, value_enum, default_value_t = super::Layout::OneHost, value_name = "LAYOUT")]
    pub layout: super::Layout,
    /// Compute threads of each stage worker (the baselines get every core of the host)
    /// [default: the layout's].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: Option<u32>,
    /// Tokens each request generates.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Concurrency levels.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16", value_name = "LIST")]
    pub concurrency: Vec<u32>,
    /// Also measure copies re-quantized to these types (e.g. `q8_0`).
    #[arg(long, value_delimiter = ',', value_name = "TYPES")]
    pub requantize: Vec<String>,
    /// Micro-batches in flight at most (`run local --groups`) [default: the layout's].
    #[arg(long, value_name = "N")]
    pub groups: Option<u16>,
    /// The session's prefill time budget (`run local --prefill-budget-ms`) [default: the
    /// session's].
    #[arg(long, value_name = "MS")]
    pub prefill_budget_ms: Option<u64>,
    /// Also serve each level through the HTTP API (`run local --serve`, N concurrent
    /// streamed completions measured by the client) beside the batch job's figures.
    #[arg(long)]
    pub http: bool,
    /// Runs per level (each a batch job and, with --http, the same through HTTP, one
    /// after the other); the medians are printed.
    #[arg(long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

impl BenchCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            BenchCommand::Ring(a) => &a.output,
            BenchCommand::Wake(a) => &a.output,
            BenchCommand::Edge(a) => &a.output,
            BenchCommand::Decode(a) | BenchCommand::Pipeline(a) => &a.output,
            BenchCommand::Engine(a) => &a.output,
            BenchCommand::Products(a) => &a.output,
            BenchCommand::Failover(a) => &a.output,
            BenchCommand::Serve(a) => &a.output,
            BenchCommand::Prefix(a) => &a.output,
            BenchCommand::Structured(a) => &a.output,
            BenchCommand::Speculate(a) => &a.output,
            BenchCommand::Wan(a) => &a.output,
        }
    }
}

/// `swactor bench speculate`
#[derive(Debug, Args)]
pub struct BenchSpeculateArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The grounded workload: JSON Lines of `{"prompt", "max_tokens"}`.
    #[arg(long, value_name = "FILE", default_value = "examples/speculate-grounded.jsonl")]
    pub grounded: PathBuf,
    /// Stages of the pipeline layout.
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=16))]
    pub stages: u32,
    /// Tokens per free-generation prompt.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub tokens: u32,
    /// Free-generation prompts (story openings).
    #[arg(long, default_value_t = 4, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=16))]
    pub free: u32,
    /// Draft with this model (same vocabulary) instead of n-gram lookup.
    #[arg(long, value_name = "GGUF")]
    pub draft_model: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// A link rate in megabits per second: a finite number above zero.
pub(super) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("not a rate above zero: {s}")),
    }
}
