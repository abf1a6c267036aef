//! Runtime and sampling flags -> a checked [`RuntimeConfig`], the same for every command.

use color_eyre::Section;
use color_eyre::eyre::eyre;

use crate::cli::args::{RuntimeArgs, SamplingMode};
use crate::cli::exit::{CliError, ExitCode, plan_error};
use crate::model::ModelFacts;
use crate::planner::check_runtime_config;
use crate::wire::{RuntimeConfig, SamplingPolicy};

/// Default `max_seq_len` cap when the flag is absent.
pub const DEFAULT_MAX_SEQ_LEN: u32 = 2048;

/// Turns runtime flags into a checked config for a model.
pub fn runtime_config(args: &RuntimeArgs, model: &ModelFacts) -> Result<RuntimeConfig, CliError> {
    runtime_config_for(args, model.context_length)
}

/// Turns runtime flags into a config for a model of `context_length` tokens, checked by
/// the planner's own [`check_runtime_config`] (a rejection is `invalid_runtime`, exit 4),
/// so that every command accepts and refuses the same flags. A sampling temperature of 0
/// is greedy.
pub fn runtime_config_for(
    args: &RuntimeArgs,
    context_length: u32,
) -> Result<RuntimeConfig, CliError> {
    let s = &args.sampler;
    let sampling = match s.sampling {
        SamplingMode::Greedy => {
            if s.temperature.is_some() || s.top_k.is_some() || s.top_p.is_some() || s.seed.is_some()
            {
                return Err(CliError::new(
                    ExitCode::Usage,
                    "usage",
                    eyre!("--temperature, --top-k, --top-p and --seed apply only to sampling")
                        .suggestion("add `--sampling sample`"),
                ));
            }
            SamplingPolicy::Greedy
        }
        SamplingMode::Sample => SamplingPolicy::Sample {
            temperature: s.temperature.unwrap_or(0.8),
            top_k: s.top_k,
            top_p: s.top_p,
            seed: s.seed.unwrap_or(0),
        },
    };
    let runtime = RuntimeConfig {
        max_seq_len: args.max_seq_len.unwrap_or(context_length.min(DEFAULT_MAX_SEQ_LEN)),
        kv_cache: args.kv_cache.into(),
        activation_dtype: args.activation_dtype.into(),
        max_tokens: args.max_tokens,
        sampling,
        max_sequences: args.max_sequences.unwrap_or(1),
        max_top_logprobs: None,
    };
    check_runtime_config(&runtime, context_length).map_err(plan_error)?;
    Ok(RuntimeConfig { sampling: runtime.sampling.normalized(), ..runtime })
}
