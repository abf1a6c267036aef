//! `swactor relay serve`.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::OutputFlags;
use crate::cli::exit::SEE_EXIT_CODES;

/// `swactor relay ...`
#[derive(Debug, Subcommand)]
pub enum RelayCommand {
    /// Serve an iroh relay for the pool's hosts behind NAT (nodes and orchestrators name it
    /// with `--relay URL`), until SIGINT or SIGTERM. Plain HTTP without a certificate
    /// (tests, trusted networks), HTTPS with `--cert` and `--key`.
    #[command(after_help = SEE_EXIT_CODES)]
    Serve(RelayServeArgs),
}

impl RelayCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            RelayCommand::Serve(a) => &a.output,
        }
    }
}

/// `swactor relay serve`
#[derive(Debug, Args)]
pub struct RelayServeArgs {
    /// Where the relay listens (TCP).
    #[arg(long, default_value = "0.0.0.0:3340", value_name = "ADDR")]
    pub listen: std::net::SocketAddr,
    /// The host name (or IP) in the relay's URL, as the pool's hosts reach it (default:
    /// the listen address's IP; must match the certificate with `--cert`).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// The certificate chain (PEM) to serve HTTPS with.
    #[arg(long, value_name = "FILE", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}
