//! What a session's flags ([`SessionFlags`]) and a pool's ([`PoolFlags`]) set in its
//! [`OrchestrateConfig`], for `run local`, `orchestrate pool` and `orchestrate serve` alike.

use std::time::Duration;

use crate::cli::args::{PoolFlags, SessionFlags};
use crate::orchestrator::driver::{OrchestrateConfig, SessionSettings};
use crate::orchestrator::run::{RunTimeouts, SessionLimits};

/// The session's settings from its flags; `queue` is the admission queue unless
/// `--queue` says otherwise (a batch job's every request; a server's 64).
pub fn session_settings(flags: &SessionFlags, queue: usize) -> SessionSettings {
    SessionSettings {
        limits: SessionLimits {
            queue_capacity: flags.queue.unwrap_or(queue),
            groups: flags.groups.unwrap_or(0),
            prefill_budget: Some(Duration::from_millis(flags.prefill_budget_ms)),
            draft_max: flags.spec.draft_max(),
            draft_min: flags.spec.draft_min(),
            ..SessionLimits::default()
        },
        // `--readiness-timeout`, `--token-timeout`, and 10 s to tear down.
        timeouts: RunTimeouts {
            readiness: Duration::from_secs(flags.readiness_timeout),
            token: Duration::from_secs(flags.token_timeout),
            teardown: Duration::from_secs(10),
        },
        resume: flags.resume.policy(),
        fit_context: flags.runtime.max_seq_len.is_none(),
        prompt_cache_bytes: flags.runtime.prompt_cache_bytes,
    }
}

/// `config` joining a pool of other hosts as `join` says: its addresses and relays, the
/// convergence window and how long it waits for the pool.
pub fn joined(
    config: OrchestrateConfig,
    join: &PoolFlags,
) -> Result<OrchestrateConfig, crate::cli::exit::CliError> {
    Ok(OrchestrateConfig {
        listen: join.listen,
        swim: join.swim,
        swim_rtt: Duration::from_millis(join.swim_rtt_ms),
        advertise: join.advertise,
        relays: join.relays.relays()?,
        window: Duration::from_millis(join.window_ms),
        pool_timeout: Duration::from_secs(join.pool_timeout),
        ..config
    })
}
