//! `swactor cache ls|clear`: the node's weights cache.

use clap::{Args, Subcommand};
use std::path::PathBuf;

use super::flags::OutputFlags;
use crate::cli::exit::EXIT_CODES_HELP;

/// `swactor cache ...`
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// List the downloaded weights: file, kind (whole or a stage's ranges), size, URL, sha256.
    #[command(after_help = EXIT_CODES_HELP)]
    Ls(CacheArgs),
    /// Remove the downloaded weights (only the cache's own files in the directory).
    #[command(after_help = EXIT_CODES_HELP)]
    Clear(CacheArgs),
}

impl CacheCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            CacheCommand::Ls(a) | CacheCommand::Clear(a) => &a.output,
        }
    }
}

/// The cache a `swactor cache` command works on.
#[derive(Debug, Args)]
pub struct CacheArgs {
    /// The weights cache directory, as given to `node boot --cache` (default:
    /// $XDG_CACHE_HOME/swactor/weights).
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
}
