//! `swactor pool watch`: observe a pool read-only and report its readiness as it changes.

use color_eyre::eyre::eyre;

use super::args::PoolWatchArgs;
use super::config::source::read_pool;
use super::exit::{CliError, ExitCode, POOL_NOT_READY};
use super::output::Output;
use super::signals::{stdout_closed, stop_signal};

/// `swactor pool watch`.
pub fn watch(args: &PoolWatchArgs, out: &mut Output) -> Result<(), CliError> {
    use crate::orchestrator::watch::{WatchConfig, WatchError, watch as run_watch};
    use std::ops::ControlFlow;
    let pool = read_pool(&args.pool)?;
    let config = WatchConfig {
        pool,
        key: args.key.clone(),
        listen: args.listen,
        relays: args.relays.relays()?,
        window: std::time::Duration::from_millis(args.window_ms),
        pool_timeout: args.pool_timeout.map(std::time::Duration::from_secs),
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let json = args.output.json;
    let mut write_err = None;
    let result = runtime.block_on(async {
        let stop = async {
            tokio::select! {
                _ = stop_signal() => {}
                _ = stdout_closed() => {}
            }
        };
        run_watch(
            config,
            args.until_ready,
            |ev| {
                let r = if json {
                    serde_json::to_string(ev)
                        .map_err(std::io::Error::other)
                        .and_then(|line| out.line(line))
                } else {
                    out.line(ev.to_string())
                }
                .and_then(|()| out.flush());
                match r {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        write_err.get_or_insert(e);
                        ControlFlow::Break(())
                    }
                }
            },
            stop,
        )
        .await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    if let Some(e) = write_err {
        return Err(e.into());
    }
    result.map_err(|e| match e {
        WatchError::EmptyPool => CliError::new(ExitCode::Input, "empty_pool", eyre!(e))
            .with_suggestion("list the pool's nodes under [[nodes]] in the pool file"),
        WatchError::Setup(_) => CliError::new(ExitCode::Input, "watch_failed", eyre!(e)),
        WatchError::Refused(_) => CliError::new(ExitCode::PoolNotReady, "pool_refused", eyre!(e))
            .with_suggestion(
                "were the nodes started with this key's endpoint id as --orchestrator?",
            ),
        WatchError::NotReady(..) => {
            CliError::new(ExitCode::PoolNotReady, POOL_NOT_READY.to_string(), eyre!(e))
                .with_suggestion("are the nodes running with this orchestrator's endpoint id?")
        }
    })
}
