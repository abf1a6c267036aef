//! `swactor chat` and `swactor complete`: clients of a swactor server (or any server with
//! the OpenAI API).

use clap::Args;
use std::path::PathBuf;

use super::flags::OutputFlags;

/// Where the server is and how to reach it.
#[derive(Debug, Args, Clone)]
pub struct ServerFlags {
    /// The server's URL.
    #[arg(long, default_value = "http://127.0.0.1:8080", value_name = "URL")]
    pub server: String,
    /// A file holding the API key [default: $SWACTOR_API_KEY, if set].
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// Tokens to generate at most [default: the server's].
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (0 is greedy) [default: the server's].
    #[arg(long, value_name = "T")]
    pub temperature: Option<f32>,
    /// The sampler's seed.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// A string that ends the answer (repeatable).
    #[arg(long, value_name = "TEXT")]
    pub stop: Vec<String>,
}

/// `swactor complete`.
#[derive(Debug, Args)]
pub struct CompleteArgs {
    /// The prompt (`-` reads it from standard input).
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// Print the text as it is generated.
    #[arg(long)]
    pub stream: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub server: ServerFlags,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputFlags,
}

/// `swactor chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// A system message that opens the conversation.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub server: ServerFlags,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub output: OutputFlags,
}
