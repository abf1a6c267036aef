//! `run local`'s nodes, shared by its runs and its server: started (a spinner on a
//! terminal), and the synthesized model they run without `--model`.

use color_eyre::eyre::eyre;

use super::exit::{CliError, ExitCode};
use super::progress::Progress;
use super::signals::StopSignal;
use crate::orchestrator::local::LocalPool;

/// Without `--model`: a small synthesized model with random weights in the pool's
/// directory (said on stderr: it `what`s random text).
pub fn synth_model(pool: &LocalPool, what: &str) -> Result<std::path::PathBuf, CliError> {
    eprintln!(
        "swactor: no --model: a small synthesized model with random weights {what} (its text \
         is random); pass --model FILE.gguf for a real one"
    );
    let path = pool.dir().join("synth.gguf");
    crate::model::synth::write_model(&path, &crate::model::synth::SynthSpec::default())
        .map_err(|e| CliError::internal(eyre!("cannot synthesize a model: {e}")))?;
    Ok(path)
}

/// Starts `run local`'s nodes (a spinner on a terminal), or `None` when the operator
/// stopped first.
pub async fn start_pool(
    config: &crate::orchestrator::local::LocalPoolConfig,
    json: bool,
    stop: &StopSignal,
) -> Result<Option<LocalPool>, CliError> {
    let mut starting = Progress::new(json);
    starting.spinner(format!("starting {} nodes", config.nodes));
    let pool = tokio::select! {
        p = LocalPool::start(config) => p.map_err(|e| {
            let reason = e.reason.clone().unwrap_or_else(|| "local_pool_failed".into());
            CliError::new(ExitCode::BootFailed, reason, eyre!(e))
                .with_suggestion("run again with --node-logs to see the nodes' logs")
        })?,
        _ = stop.clone().stopped() => return Ok(None),
    };
    starting.clear();
    Ok(Some(pool))
}
