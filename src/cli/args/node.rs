//! `swactor node id|boot` and `swactor edge inspect`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::OutputFlags;
use crate::cli::exit::SEE_EXIT_CODES;

/// `swactor node ...`
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Print this node's identity (endpoint id) from its key file, creating the key (0600)
    /// on first use. The endpoint id is what pool files name.
    #[command(after_help = SEE_EXIT_CODES)]
    Id(NodeIdArgs),
    /// Boot this host as a pool node (identity, arena, worker, iroh endpoint, SWIM,
    /// control inbox, admin socket) and serve until SIGINT or SIGTERM.
    #[command(after_help = SEE_EXIT_CODES)]
    Boot(Box<NodeBootArgs>),
}

/// `swactor node id`
#[derive(Debug, Args)]
pub struct NodeIdArgs {
    /// The node's key file.
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    /// The longest round trip between pool members, milliseconds, for SWIM's probe
    /// timings (members on wide-area links or behind relays: each probe waits 1.5 times it;
    /// up to 40 the LAN profile, failure detection in under a second).
    #[arg(long, default_value_t = 0, value_name = "MS")]
    pub swim_rtt_ms: u64,
    /// The address other hosts reach this one at, when listening on an unspecified address
    /// (default: the local address of the route toward the pool's nodes / join seeds; never
    /// `0.0.0.0`).
    #[arg(long, value_name = "IP")]
    pub advertise: Option<std::net::IpAddr>,
    /// Relays.
    #[command(flatten)]
    pub relays: super::flags::RelayFlags,
    /// SWIM addresses of other members to join through (repeatable): `HOST:PORT`, or a
    /// relay-only member's `relay:<endpoint id>@<relay url>` as it prints it.
    #[arg(long, value_name = "ADDR")]
    pub join: Vec<crate::membership::swim::SwimAddr>,
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
    /// The most bytes this node's stage may keep of evicted prompt prefixes (its layers'
    /// KV, in host memory; 0 disables), reported in `node_available`; with the
    /// orchestrator's `--prompt-cache-bytes` too, the smaller holds [default: the
    /// orchestrator's budget].
    #[arg(long, value_name = "BYTES")]
    pub prompt_cache_bytes: Option<u64>,
    /// Do not measure this host's speed at boot: the node reports none, and a plan over it
    /// balances by memory and predicts no speed (`run local`'s nodes, which share a host,
    /// boot so).
    #[arg(long)]
    pub no_calibrate: bool,
    /// Where the stage computes: `cpu`, or `cuda:N` (an NVIDIA GPU; needs a build with the
    /// `cuda` feature). Checked at boot: a build without CUDA or a missing device faults
    /// the boot (`device_unavailable`, exit 6). Reported in `node_available`.
    #[arg(long, default_value = "cpu", value_name = "DEVICE", value_parser = parse_node_device)]
    pub device: crate::worker::protocol::Backend,
    /// Compute threads of the worker's stage (`--worker-threads` is an older name; one
    /// node per host, its one worker using the host's cores) [default: every CPU this
    /// process may use].
    #[arg(long = "threads", alias = "worker-threads", value_name = "N")]
    pub worker_threads: Option<u32>,
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
    pub output: OutputFlags,
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

/// `swactor edge ...`
#[derive(Debug, Subcommand)]
pub enum EdgeCommand {
    /// Show a node's edge records (state, ring, peers) and what it sees of the pool.
    #[command(after_help = SEE_EXIT_CODES)]
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
    pub output: OutputFlags,
}

impl NodeCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            NodeCommand::Id(a) => &a.output,
            NodeCommand::Boot(a) => &a.output,
        }
    }
}

impl EdgeCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            EdgeCommand::Inspect(a) => &a.output,
        }
    }
}
