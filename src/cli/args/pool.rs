//! `swactor pool watch|init`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::OutputFlags;
use crate::cli::exit::SEE_EXIT_CODES;

/// `swactor pool ...`
#[derive(Debug, Subcommand)]
pub enum PoolCommand {
    /// Observe a pool read-only: connect to every node of a pool file with the
    /// orchestrator's delegation (never as the orchestrator), and report availability,
    /// liveness as the nodes' SWIM sees it, and pool readiness (ready = every node
    /// available, live and unchanged for the convergence window). Safe beside a run.
    #[command(after_help = SEE_EXIT_CODES)]
    Watch(PoolWatchArgs),
    /// Write a pool file from what the nodes printed: the `node_available` lines of
    /// `node boot --json` (from files, or standard input), so nobody copies endpoint ids by
    /// hand. Each node's reported memory becomes its `memory_bytes` (left out when it
    /// reported none: `orchestrate pool` then takes the node's report); the pool is
    /// checked as `run plan` checks a pool file.
    #[command(after_help = SEE_EXIT_CODES)]
    Init(PoolInitArgs),
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
    /// Relays.
    #[command(flatten)]
    pub relays: super::flags::RelayFlags,
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
    pub output: OutputFlags,
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

impl PoolCommand {
    /// The command's output flags: `pool init` prints a pool file, never JSON.
    pub fn output(&self) -> Option<&OutputFlags> {
        match self {
            PoolCommand::Watch(a) => Some(&a.output),
            PoolCommand::Init(_) => None,
        }
    }
}
