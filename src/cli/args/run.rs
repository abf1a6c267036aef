//! `swactor run plan|local` and `swactor orchestrate pool`: what to run and where.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::{
    Layout, OutputFlags, PlacementFlags, PoolFlags, RuntimeArgs, ServeFlags, SessionFlags,
};
use crate::cli::exit::SEE_EXIT_CODES;

/// `swactor run ...`
#[derive(Debug, Subcommand)]
pub enum RunCommand {
    /// Plan a run over a pool and predict its resources, without running anything.
    #[command(after_help = SEE_EXIT_CODES)]
    Plan(Box<PlanArgs>),
    /// Run a whole pipeline on this machine: N `swactor node boot` children on loopback,
    /// the orchestrator in this process; prints the generated text and cleans up.
    #[command(after_help = SEE_EXIT_CODES)]
    Local(Box<LocalArgs>),
}

/// `swactor orchestrate ...`
#[derive(Debug, Subcommand)]
pub enum OrchestrateCommand {
    /// Wait for the pool to be ready, plan, provision every stage, inject the prompt,
    /// stream the generated text, and tear the run down.
    #[command(after_help = SEE_EXIT_CODES)]
    Pool(Box<OrchestratePoolArgs>),
    /// Serve the OpenAI-compatible HTTP API over the pool: form a session when the pool
    /// is ready, serve while it lasts, form a new one after a fault; SIGINT / SIGTERM
    /// drain within --grace-s and exit 0.
    #[command(after_help = SEE_EXIT_CODES)]
    Serve(Box<OrchestrateServeArgs>),
}

/// `--max-sequences` where a requests file raises its default.
const SEQUENCES_HELP_BATCH: &str = "Sequences in the pipeline at once (1 to 256): every stage \
    holds a KV cache per slot [default: 1, or 8 with `--requests`]";
/// `--max-sequences` of `run local`, which also serves.
const SEQUENCES_HELP_LOCAL: &str = "Sequences in the pipeline at once (1 to 256): every stage \
    holds a KV cache per slot [default: 1, or 8 with `--requests` or `--serve`]";
/// `--max-sequences` of a server.
const SEQUENCES_HELP_SERVE: &str = "Sequences served at once, the session's slots (1 to 256): \
    every stage holds a KV cache per slot [default: 8]";

/// A server's `--queue`.
const QUEUE_HELP_SERVE: &str =
    "Requests waiting for a slot at most; more are refused with 429 [default: 64]";
/// A server's `--groups`.
const GROUPS_HELP_SERVE: &str =
    "Micro-batches in flight at most [default: one per stage, at most `--max-sequences`]";
/// A server's `--prefill-budget-ms`.
const PREFILL_HELP_SERVE: &str = "A micro-batch carrying a prompt chunk while other sequences \
    decode should come back within this many milliseconds; the chunk size follows what the \
    session measures (0: chunks follow the row budget alone)";
/// A server's `--events`.
const EVENTS_HELP_SERVE: &str =
    "Write every session's events as JSON Lines to this file (never overwritten)";
/// A server's `--readiness-timeout`.
const READINESS_HELP_SERVE: &str = "Seconds each session may take from provisioning to serving";
/// A server's `--token-timeout`.
const TOKEN_HELP_SERVE: &str =
    "Seconds a micro-batch in flight may take to come back before the session faults";

/// `swactor run plan`
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The GGUF model to plan for.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The pool file (TOML inventory of nodes).
    #[arg(long, value_name = "POOL")]
    pub pool: PathBuf,
    /// Stage count, layers and nodes.
    #[command(flatten)]
    pub placement: PlacementFlags,
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
    pub output: OutputFlags,
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
    /// session; one JSON line per request's result (or error) on stdout. `-` reads
    /// standard input.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["prompt", "chat"])]
    pub requests: Option<PathBuf>,
    /// With `--requests`: also a JSON line per generated token.
    #[arg(long, requires = "requests")]
    pub stream: bool,
    /// How the session runs.
    #[command(flatten)]
    pub session: SessionFlags,
    /// The run id (default: a fresh one, from this host's clock in microseconds, so no two
    /// runs of an orchestrator share one).
    #[arg(long, value_name = "ID")]
    pub run_id: Option<u64>,
    /// Output format: JSON Lines with every event, one `token` line per token and a `run`
    /// summary.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor orchestrate pool`
#[derive(Debug, Args)]
#[command(mut_arg("max_sequences", |a| a.help(SEQUENCES_HELP_BATCH)))]
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
    /// Stage count, layers and nodes.
    #[command(flatten)]
    pub placement: PlacementFlags,
    /// Nodes download the weights from this `http(s)://host[:port]/path` URL (checked
    /// against `--model`'s size and sha256) instead of reading `--model`'s path on their
    /// own disk.
    #[arg(long, value_name = "URL")]
    pub weights_url: Option<String>,
    /// How this orchestrator joins the pool and waits for it.
    #[command(flatten)]
    pub join: PoolFlags,
    /// What to run.
    #[command(flatten)]
    pub run: PromptArgs,
}

/// `swactor run local`
#[derive(Debug, Args)]
#[command(mut_arg("max_sequences", |a| a.help(SEQUENCES_HELP_LOCAL)))]
pub struct LocalArgs {
    /// Number of stages (one node process each).
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub stages: u32,
    /// The GGUF model [default: a small synthesized model, written to a temporary file].
    #[arg(long, value_name = "GGUF")]
    pub model: Option<PathBuf>,
    /// How the stages share this host's cores: `one-host` (one micro-batch in flight,
    /// every core for the stage computing it) or `multi-host` (one micro-batch per stage,
    /// one thread per worker: the shape of a pool of hosts).
    #[arg(long, value_enum, default_value_t = Layout::OneHost, value_name = "LAYOUT")]
    pub layout: Layout,
    /// Compute threads of each stage worker (the nodes share this host; `--worker-threads`
    /// is an older name) [default: every core with `--layout one-host`, 1 with
    /// `multi-host`].
    #[arg(long = "threads", alias = "worker-threads", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub worker_threads: Option<u32>,
    /// Arena bytes per node.
    #[arg(long, default_value_t = 256 << 20, value_name = "N")]
    pub arena_bytes: u64,
    /// Pass the nodes' logs through to stderr.
    #[arg(long)]
    pub node_logs: bool,
    /// Serve the OpenAI-compatible HTTP API over the local pipeline instead of running one
    /// prompt or a requests file (see `orchestrate serve`).
    #[arg(long, conflicts_with_all = ["requests", "stream"])]
    pub serve: bool,
    /// The server's flags (with `--serve`).
    #[command(flatten)]
    pub http: ServeFlags,
    /// What to run.
    #[command(flatten)]
    pub run: PromptArgs,
}

impl LocalArgs {
    /// Compute threads per worker: `--threads`, else what `--layout` gives this host.
    pub fn threads(&self) -> u32 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        self.layout.threads(self.worker_threads, cores)
    }

    /// Micro-batches in flight: `--groups`, else what `--layout` gives (0: one per stage).
    pub fn groups(&self) -> u16 {
        self.layout.groups(self.run.session.groups)
    }
}

impl RunCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            RunCommand::Plan(a) => &a.output,
            RunCommand::Local(a) => &a.run.output,
        }
    }
}

/// `swactor orchestrate serve`.
#[derive(Debug, Args)]
#[command(
    mut_arg("max_sequences", |a| a.help(SEQUENCES_HELP_SERVE)),
    mut_arg("queue", |a| a.help(QUEUE_HELP_SERVE)),
    mut_arg("groups", |a| a.help(GROUPS_HELP_SERVE)),
    mut_arg("prefill_budget_ms", |a| a.help(PREFILL_HELP_SERVE)),
    mut_arg("events", |a| a.help(EVENTS_HELP_SERVE)),
    mut_arg("readiness_timeout", |a| a.help(READINESS_HELP_SERVE)),
    mut_arg("token_timeout", |a| a.help(TOKEN_HELP_SERVE))
)]
pub struct OrchestrateServeArgs {
    /// The pool file.
    #[arg(long, value_name = "POOL")]
    pub pool: PathBuf,
    /// The GGUF model (the orchestrator's copy: tokenizer, chat template, facts).
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The orchestrator's key file (created on first use).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Placement.
    #[command(flatten)]
    pub placement: PlacementFlags,
    /// Nodes fetch their stage's weights from this URL instead of their own copy.
    #[arg(long, value_name = "URL")]
    pub weights_url: Option<String>,
    /// Joining the pool.
    #[command(flatten)]
    pub join: PoolFlags,
    /// The server's flags.
    #[command(flatten)]
    pub http: ServeFlags,
    /// How each session runs.
    #[command(flatten)]
    pub session: SessionFlags,
    /// Output.
    #[command(flatten)]
    pub output: OutputFlags,
}

impl OrchestrateCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            OrchestrateCommand::Pool(a) => &a.run.output,
            OrchestrateCommand::Serve(a) => &a.output,
        }
    }
}
