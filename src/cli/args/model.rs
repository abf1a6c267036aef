//! `swactor generate` and `swactor model inspect|synth|quantize`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

use super::flags::{OutputFlags, RuntimeArgs, Speculate};
use crate::cli::exit::SEE_EXIT_CODES;
use crate::model::synth::SynthDType;

/// `swactor generate`
#[derive(Debug, Args)]
// One process keeps no prompt cache between runs.
#[command(mut_arg("prompt_cache_bytes", |a| a.hide(true)))]
pub struct GenerateArgs {
    /// The GGUF model.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The prompt text.
    #[arg(long, value_name = "TEXT", required_unless_present = "prompt_ids")]
    pub prompt: Option<String>,
    /// The prompt as token ids, comma-separated (nothing is added: give the bos id
    /// yourself), instead of `--prompt`.
    #[arg(long, value_name = "IDS", value_delimiter = ',', conflicts_with_all = ["prompt", "chat"])]
    pub prompt_ids: Option<Vec<u32>>,
    /// Wrap the prompt in the model's chat template (ChatML, Llama 3, Gemma or Llama 2
    /// style), as `run local --chat` does.
    #[arg(long)]
    pub chat: bool,
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
    /// Speculative decoding: `ngram` drafts from the prompt and output so far and verifies
    /// each draft in one pass (the output is the same tokens as without it).
    #[arg(long, value_enum, default_value_t = Speculate::Off, value_name = "HOW")]
    pub speculate: Speculate,
    /// A draft model (same vocabulary) that proposes the drafts, run greedily in this
    /// process; implies speculation.
    #[arg(long, value_name = "GGUF")]
    pub draft_model: Option<PathBuf>,
    /// The most tokens drafted per pass (the length follows the measured acceptance).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=15))]
    pub draft_max: u32,
    /// Runtime settings.
    #[command(flatten)]
    pub runtime: RuntimeArgs,
    /// Output format: JSON Lines with one `token` line per token and a `generation` summary.
    #[command(flatten)]
    pub output: OutputFlags,
}

/// `swactor model ...`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Print the facts of a GGUF model: shape, tokenizer, rope, tensor bytes.
    #[command(after_help = SEE_EXIT_CODES)]
    Inspect(InspectArgs),
    /// Write a deterministic tiny model of any supported family (`--arch`) with random
    /// weights and a real BPE vocabulary.
    #[command(after_help = SEE_EXIT_CODES)]
    Synth(SynthArgs),
    /// Re-quantize a model's weight matrices (norms stay f32).
    #[command(after_help = SEE_EXIT_CODES)]
    Quantize(QuantizeArgs),
    /// Print the token ids of a text as the model's tokenizer splits it (`--json`: the ids
    /// and each token's text).
    #[command(after_help = SEE_EXIT_CODES)]
    Tokenize(TokenizeArgs),
}

/// `swactor model tokenize`
#[derive(Debug, Args)]
pub struct TokenizeArgs {
    /// The GGUF model whose tokenizer is used.
    #[arg(long, value_name = "GGUF")]
    pub model: PathBuf,
    /// The text (repeat the flag for several texts: one line of ids each).
    #[arg(long, value_name = "TEXT", required = true)]
    pub text: Vec<String>,
    /// Add the model's bos token where its tokenizer does.
    #[arg(long)]
    pub add_special: bool,
    /// Match control tokens written in the text (`<|im_start|>`, `<start_of_turn>`, ...).
    #[arg(long)]
    pub parse_special: bool,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    pub output: OutputFlags,
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
    /// The family written: llama (Llama 2 style), llama3, qwen2, qwen3, gemma3, or a
    /// mixture of experts: qwen3moe, qwen2moe, mixtral, gpt-oss (`--ffn` is then each
    /// expert's).
    #[arg(long, value_enum, default_value = "llama", value_name = "ARCH")]
    pub arch: SynthArchArg,
    /// Experts per block of a mixture-of-experts family.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub experts: u32,
    /// Experts each token runs (mixture-of-experts families).
    #[arg(long, default_value_t = 2, value_name = "K")]
    pub experts_used: u32,
    /// Each attention head's size (default: the family's, from hidden / heads).
    #[arg(long, value_name = "D")]
    pub head_dim: Option<u32>,
    /// Seed of the random weights.
    #[arg(long, default_value_t = 0, value_name = "S")]
    pub seed: u64,
    /// Take the tokenizer of this GGUF model (its tokens, merges, special ids, chat
    /// template) instead of synthesizing one: the model shares its vocabulary (a tiny
    /// draft model for it). The vocabulary size is its token count.
    #[arg(long, value_name = "GGUF", conflicts_with = "vocab")]
    pub vocab_from: Option<PathBuf>,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    /// Target type: f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, a
    /// K-quant mix as llama.cpp makes it: q4_k_m, q5_k_m (Q6_K where more bits pay), or
    /// mxfp4_moe (routed experts in MXFP4, the rest Q8_0). Routers stay as they are.
    #[arg(long, value_name = "TYPE")]
    pub dtype: String,
    /// Output format.
    #[command(flatten)]
    pub output: OutputFlags,
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
    /// MXFP4 experts (llama.cpp's MXFP4_MOE), every other matrix Q8_0.
    #[value(name = "mxfp4")]
    Mxfp4,
}

impl From<SynthDTypeArg> for SynthDType {
    fn from(a: SynthDTypeArg) -> Self {
        match a {
            SynthDTypeArg::F32 => SynthDType::F32,
            SynthDTypeArg::F16 => SynthDType::F16,
            SynthDTypeArg::Q8_0 => SynthDType::Q8_0,
            SynthDTypeArg::Q4_0 => SynthDType::Q4_0,
            SynthDTypeArg::Mxfp4 => SynthDType::Mxfp4,
        }
    }
}

impl ModelCommand {
    /// The command's output flags.
    pub fn output(&self) -> &OutputFlags {
        match self {
            ModelCommand::Inspect(a) => &a.output,
            ModelCommand::Synth(a) => &a.output,
            ModelCommand::Quantize(a) => &a.output,
            ModelCommand::Tokenize(a) => &a.output,
        }
    }
}

/// Family of a synthesized model as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthArchArg {
    /// Llama 2 style `llama`.
    Llama,
    /// Llama 3.x style `llama` (rope base 500 000, rope frequency factors, tied).
    Llama3,
    /// Qwen 2.5 (`qwen2`: Q / K / V biases).
    Qwen2,
    /// Qwen 3 (`qwen3`: Q / K norms, wide heads).
    Qwen3,
    /// Gemma 3 (`gemma3`: post norms, Q / K norms, GeGLU, sliding window).
    Gemma3,
    /// Qwen 3 MoE (`qwen3moe`: Qwen 3's attention, routed experts).
    Qwen3moe,
    /// Qwen 2 MoE (`qwen2moe`: Qwen 2's attention, routed experts, a shared expert).
    Qwen2moe,
    /// Mixtral (`llama` with routed experts).
    Mixtral,
    /// gpt-oss (`gpt-oss`: biases, attention sinks, alternating sliding blocks, YaRN,
    /// routed experts with biases, the clamped SwiGLU).
    #[value(name = "gpt-oss")]
    GptOss,
}

impl From<SynthArchArg> for crate::model::synth::SynthArch {
    fn from(a: SynthArchArg) -> Self {
        use crate::model::synth::SynthArch as S;
        match a {
            SynthArchArg::Llama => S::Llama,
            SynthArchArg::Llama3 => S::Llama3,
            SynthArchArg::Qwen2 => S::Qwen2,
            SynthArchArg::Qwen3 => S::Qwen3,
            SynthArchArg::Gemma3 => S::Gemma3,
            SynthArchArg::Qwen3moe => S::Qwen3Moe,
            SynthArchArg::Qwen2moe => S::Qwen2Moe,
            SynthArchArg::Mixtral => S::Mixtral,
            SynthArchArg::GptOss => S::GptOss,
        }
    }
}
