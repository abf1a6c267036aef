//! `swactor util ...` (hidden): generators for packagers and test helpers.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::flags::OutputFlags;

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
    /// A wide-area link for tests and demonstrations (this kernel has no `netem`): listens
    /// on `--listen` and forwards UDP to `--target` from a socket per client, each way
    /// delayed by half of `--rtt-ms` (plus jitter) and losing `--loss` of the datagrams.
    /// Prints `wan_link_ready`, and on SIGINT / SIGTERM what each way carried
    /// (`wan_link_stopped`).
    WanLink(WanLinkArgs),
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
    pub output: OutputFlags,
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
    pub output: OutputFlags,
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

/// `--plant`: the core's planted bugs by name, listed in help and completions.
fn planted_parser() -> impl clap::builder::TypedValueParser<Value = crate::sim::Planted> {
    use clap::builder::TypedValueParser;
    let names = crate::sim::Planted::ALL.map(crate::sim::Planted::name);
    clap::builder::PossibleValuesParser::new(names).try_map(|s| s.parse::<crate::sim::Planted>())
}

/// `swactor util wan-link`.
#[derive(Debug, Args)]
pub struct WanLinkArgs {
    /// Where clients send (port 0 picks one).
    #[arg(long, value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// Where it forwards.
    #[arg(long, value_name = "ADDR")]
    pub target: std::net::SocketAddr,
    /// Round trip the link adds, milliseconds.
    #[arg(long, default_value_t = 20, value_name = "MS")]
    pub rtt_ms: u64,
    /// Jitter each way, milliseconds (at most half the round trip).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub jitter_ms: u64,
    /// Share of datagrams lost each way, 0..=1.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub loss: f64,
    /// Megabits per second the link carries each way (a 100 ms drop-tail queue in front;
    /// default: unlimited).
    #[arg(long, value_name = "MBIT", value_parser = super::bench::parse_rate)]
    pub rate_mbit: Option<f64>,
    /// Seed of the link's draws (delays and losses repeat for the same seed).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}
