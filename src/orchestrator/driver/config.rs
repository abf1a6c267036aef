//! How an [`OrchestrateConfig`] is built: [`OrchestrateConfig::new`] (or
//! [`OrchestrateConfig::local`] over a [`LocalPool`]) fills every field a caller need not
//! think about, [`SessionSettings`] carries what a session's flags set, and each caller
//! states only what differs with struct update syntax.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{OrchestrateConfig, OrchestratorKey};
use crate::orchestrator::local::LocalPool;
use crate::orchestrator::reform::ResumePolicy;
use crate::orchestrator::run::{RunTimeouts, SessionLimits};
use crate::planner::{Placement, Pool};
use crate::wire::{RunId, RuntimeConfig, WeightSource};

/// Any port on loopback: where an orchestrator of a local pool listens.
const LOOPBACK_ANY: SocketAddr =
    SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 0));

/// How a session runs, whatever its pool and requests: what a session's flags set.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// How its scheduler is sized beyond the plan.
    pub limits: SessionLimits,
    /// Its timeouts.
    pub timeouts: RunTimeouts,
    /// What it does when a stage node is lost.
    pub resume: ResumePolicy,
    /// No `--max-seq-len` was given: each plan fits the context to its nodes' memory.
    pub fit_context: bool,
    /// `--prompt-cache-bytes`: each stage node's prompt-cache budget.
    pub prompt_cache_bytes: Option<u64>,
}

impl OrchestrateConfig {
    /// A session of `model` (the orchestrator's copy) over `pool` as `key`, its stages
    /// reading the weights from `source`, with `runtime`. Everything else at its default:
    /// listening on loopback, no requests at the start, the default session limits and
    /// resume policy, one stage per node placed in pool order, the context as `runtime`
    /// says, run id 1, a 300 ms convergence window, 60 s for the pool, the readiness and
    /// each token, 10 s to tear down, no draft model.
    pub fn new(
        pool: Pool,
        key: OrchestratorKey,
        model: PathBuf,
        source: WeightSource,
        runtime: RuntimeConfig,
    ) -> OrchestrateConfig {
        OrchestrateConfig {
            pool,
            key,
            listen: LOOPBACK_ANY,
            swim: LOOPBACK_ANY,
            swim_rtt: Duration::ZERO,
            advertise: None,
            relays: crate::net::relay::Relays::none(),
            model,
            source,
            requests: Vec::new(),
            session: SessionLimits::default(),
            stages: None,
            placement: Placement::default(),
            runtime,
            fit_context: false,
            prompt_cache_bytes: None,
            min_speedup: None,
            run_id: RunId(1),
            window: Duration::from_millis(300),
            pool_timeout: Duration::from_secs(60),
            timeouts: RunTimeouts {
                readiness: Duration::from_secs(60),
                token: Duration::from_secs(60),
                teardown: Duration::from_secs(10),
            },
            resume: ResumePolicy::default(),
            draft_model: None,
        }
    }

    /// A session of `model` over a local pool (`run local`'s, the benchmarks'): its pool
    /// and in-memory key, the stages reading `model`'s own path (made absolute), one stage
    /// per node of the pool; the rest as [`OrchestrateConfig::new`] says.
    pub fn local(pool: &LocalPool, model: &Path, runtime: RuntimeConfig) -> OrchestrateConfig {
        let path = std::path::absolute(model).unwrap_or_else(|_| model.to_path_buf());
        let source = WeightSource::Local { path: path.display().to_string() };
        let key = OrchestratorKey::Memory(pool.orchestrator_key.clone());
        OrchestrateConfig {
            stages: Some(pool.pool.nodes.len() as u32),
            ..OrchestrateConfig::new(pool.pool.clone(), key, model.to_path_buf(), source, runtime)
        }
    }

    /// The same config with `session`'s settings.
    pub fn with_session(self, session: SessionSettings) -> OrchestrateConfig {
        OrchestrateConfig {
            session: session.limits,
            timeouts: session.timeouts,
            resume: session.resume,
            fit_context: session.fit_context,
            prompt_cache_bytes: session.prompt_cache_bytes,
            ..self
        }
    }
}
