//! `swactor run local`'s flags -> a [`LocalRun`], and the session's config once its nodes
//! run ([`LocalRun::orchestrate`]).

use color_eyre::eyre::eyre;
use std::path::Path;
use std::time::Duration;

use crate::cli::args::LocalArgs;
use crate::cli::exit::{CliError, ExitCode};
use crate::cli::run_sink::EventsFile;
use crate::orchestrator::driver::OrchestrateConfig;
use crate::orchestrator::local::{LocalPool, LocalPoolConfig};

use super::run::{PrintConfig, RunInputs, session_draft_model, usage};
use super::runtime::runtime_config_for;
use super::session::session_settings;

/// A local pipeline, configured: checked before any node starts.
pub struct LocalRun {
    /// Nodes (one per stage).
    pub nodes: u32,
    /// Compute threads per worker.
    pub worker_threads: u32,
    /// Arena bytes per node.
    pub arena_bytes: u64,
    /// Pass the nodes' logs through to stderr.
    pub node_logs: bool,
    /// Test hook (`SWACTOR_TEST_PAUSE_AFTER_NODES_MS`): hold between starting the nodes
    /// and running, the window in which a Ctrl-C used to be lost.
    pub pause: Option<Duration>,
    /// The `--events` file, created.
    pub events: Option<EventsFile>,
    /// How the run is printed.
    pub print: PrintConfig,
    /// The model side, read before any node starts (`None` without `--model`: the
    /// synthesized model is written once the pool runs).
    pub inputs: Option<RunInputs>,
}

impl LocalRun {
    /// Checks what can be checked before any node starts (stage count, model, runtime
    /// flags), reads the test hook, and creates the `--events` file.
    pub fn from_args(args: &LocalArgs) -> Result<LocalRun, CliError> {
        if args.stages == 0 {
            return Err(usage("--stages must be at least 1".into()));
        }
        let inputs = args.model.as_deref().map(|m| RunInputs::read(m, &args.run)).transpose()?;
        let blocks = match &inputs {
            Some(inputs) => inputs.facts.block_count,
            None => {
                let synth = crate::model::synth::SynthSpec::default();
                runtime_config_for(&args.run.session.runtime, synth.context)?;
                synth.blocks
            }
        };
        if args.stages > blocks {
            return Err(CliError::new(
                ExitCode::PlanRejected,
                crate::wire::reason::PlanRejection::TooManyStages.as_str(),
                eyre!("{} stages for a model of {blocks} blocks", args.stages),
            )
            .with_suggestion("use at most one stage per transformer block"));
        }
        // Read here at the edge.
        let pause = std::env::var("SWACTOR_TEST_PAUSE_AFTER_NODES_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .map(Duration::from_millis);
        let events = args.run.session.events.as_deref().map(EventsFile::create).transpose()?;
        Ok(LocalRun {
            nodes: args.stages,
            worker_threads: args.threads(),
            arena_bytes: args.arena_bytes,
            node_logs: args.node_logs,
            pause,
            events,
            print: PrintConfig::of(&args.run),
            inputs,
        })
    }

    /// The local pool's config, with this executable as the nodes' program.
    pub fn pool_config(&self) -> Result<LocalPoolConfig, CliError> {
        Ok(LocalPoolConfig {
            exe: std::env::current_exe()?,
            nodes: self.nodes,
            worker_threads: self.worker_threads,
            arena_bytes: self.arena_bytes,
            node_logs: self.node_logs,
        })
    }

    /// The session's config over the started `pool`, running `model` (read as `inputs`).
    pub fn orchestrate(
        args: &LocalArgs,
        pool: &LocalPool,
        model: &Path,
        inputs: &RunInputs,
    ) -> Result<OrchestrateConfig, CliError> {
        let mut session = session_settings(&args.run.session, inputs.request_count().max(1));
        session.limits.groups = args.groups();
        let spec = &args.run.session.spec;
        Ok(OrchestrateConfig {
            requests: inputs.requests.clone(),
            run_id: super::run::run_id(&args.run),
            draft_model: session_draft_model(spec, &inputs.facts)?,
            ..OrchestrateConfig::local(pool, model, inputs.runtime).with_session(session)
        })
    }
}
