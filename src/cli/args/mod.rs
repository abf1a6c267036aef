//! What was typed: clap derive structs, one file per command group and the shared flag
//! groups in [`flags`]. The config step ([`super::config`]) turns these into configs;
//! nothing below the CLI layer sees clap types.

use clap::{Parser, Subcommand};

use super::exit::{EXIT_CODES_HELP, SEE_EXIT_CODES};

pub mod bench;
pub mod cache;
pub mod client;
pub mod flags;
pub mod model;
pub mod node;
pub mod pool;
pub mod relay;
pub mod run;
pub mod util;

pub use bench::*;
pub use cache::*;
pub use client::*;
pub use flags::*;
pub use model::*;
pub use node::*;
pub use pool::*;
pub use relay::*;
pub use run::*;
pub use util::*;

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
    /// Run a whole pipeline on this machine (`run local`), or plan one over a pool
    /// (`run plan`).
    #[command(subcommand)]
    Run(RunCommand),
    /// Generate text with a whole model in this one process (the pipeline's reference).
    #[command(after_help = SEE_EXIT_CODES)]
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
    /// List or clear a node's downloaded weights.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Watch a pool from the orchestrator's side.
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Host an iroh relay for pool members behind NAT.
    #[command(subcommand)]
    Relay(RelayCommand),
    /// Chat with a swactor server: an interactive loop on a terminal (the conversation is
    /// kept), one exchange from standard input otherwise.
    #[command(after_help = SEE_EXIT_CODES)]
    Chat(ChatArgs),
    /// Ask a swactor server to complete a prompt; the text on stdout (streamed with
    /// --stream), the whole response with --json.
    #[command(after_help = SEE_EXIT_CODES)]
    Complete(CompleteArgs),
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

impl Command {
    /// The output flags of the command, for reporting an error as the command would print
    /// it: `None` for commands that print no JSON errors (`pool init`, the hidden `util`
    /// helpers and the worker role).
    pub fn output(&self) -> Option<&OutputFlags> {
        match self {
            Command::Run(c) => Some(c.output()),
            Command::Generate(a) => Some(&a.output),
            Command::Orchestrate(c) => Some(c.output()),
            Command::Model(c) => Some(c.output()),
            Command::Node(c) => Some(c.output()),
            Command::Edge(c) => Some(c.output()),
            Command::Pool(c) => c.output(),
            Command::Bench(c) => Some(c.output()),
            Command::Cache(c) => Some(c.output()),
            Command::Relay(c) => Some(c.output()),
            Command::Chat(a) => Some(&a.output),
            Command::Complete(a) => Some(&a.output),
            Command::Util(_) | Command::Worker => None,
        }
    }
}
