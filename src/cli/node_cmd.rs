//! `swactor node boot` and `swactor node id`.

use color_eyre::eyre::eyre;

use super::args::{NodeBootArgs, NodeIdArgs};
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::signals::stop_signal_or_eof;
use crate::node::driver::{AdminPath, NodeConfig, NodeReport, run_node};
use crate::wire::NodeId;

/// The directory of default admin sockets: the runtime directory, else the temporary one.
fn default_admin_dir() -> std::path::PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// The weights cache of `node boot` without `--cache`: `$XDG_CACHE_HOME/swactor/weights`,
/// else `~/.cache/swactor/weights`.
pub fn default_cache() -> std::path::PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("swactor")
        .join("weights")
}

/// `swactor node boot`.
pub fn boot(args: &NodeBootArgs, out: &mut Output) -> Result<(), CliError> {
    let config = NodeConfig {
        node_id: NodeId(args.node_id),
        key: args.key.clone(),
        listen: args.listen,
        swim: args.swim,
        swim_rtt: std::time::Duration::from_millis(args.swim_rtt_ms),
        join: args.join.clone(),
        orchestrator: args.orchestrator.to_ascii_lowercase(),
        arena_bytes: args.arena_bytes,
        worker_threads: super::generate_cmd::compute_threads(args.worker_threads)?,
        device: args.device,
        admin: match &args.admin {
            Some(path) => AdminPath::Explicit(path.clone()),
            None => AdminPath::InDir(default_admin_dir()),
        },
        exe: std::env::current_exe()?,
        boot_timeout: std::time::Duration::from_millis(args.boot_timeout_ms),
        max_worker_restarts: args.max_worker_restarts,
        cache: args.cache.clone().unwrap_or_else(default_cache),
        fault_skip_sequence: fault_skip_sequence(),
        advertise: args.advertise,
        relays: args.relays.relays()?,
        memory_bytes: args.memory_bytes,
        prompt_cache_bytes: args.prompt_cache_bytes,
        calibrate: !args.no_calibrate,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let json = args.output.json;
    let mut printed = Ok(());
    let result = runtime.block_on(async {
        // Listen for the stop from the start: a SIGTERM right after `node_available` stops
        // the node cleanly (its session told, `node_stopped` written), never kills it.
        let (stopped, stop) = tokio::sync::oneshot::channel::<()>();
        let signal = stop_signal_or_eof(args.stop_on_stdin_eof);
        tokio::spawn(async move {
            signal.await;
            let _ = stopped.send(());
        });
        tokio::task::yield_now().await;
        run_node(
            config,
            |report| {
                let r = match report {
                    // Boot events are data of `--json` only: the text form says what it has to
                    // say with the identity, or with the error on stderr.
                    NodeReport::Event(line) if json => out.line(line.to_json()),
                    NodeReport::Event(_) => Ok(()),
                    NodeReport::Available(report) if json => out.json("node_available", report),
                    NodeReport::Available(report) => out.line(format!(
                        "node {} available: endpoint {} at {}, swim {}, computing on {} with {} \
                     threads, admin {}",
                        report.node_id,
                        report.endpoint_id,
                        report.addrs.join(", "),
                        report.swim_addr,
                        report.device,
                        report.threads,
                        report.admin
                    )),
                }
                .and_then(|()| out.flush());
                if printed.is_ok() {
                    printed = r;
                }
            },
            async {
                let _ = stop.await;
            },
        )
        .await
    });
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    printed?;
    result.map_err(|e| {
        let device = e.reason == crate::wire::reason::BootFault::DeviceUnavailable;
        let err = CliError::new(ExitCode::BootFailed, e.reason.as_str(), eyre!(e));
        if device {
            err.with_suggestion(
                "is this a build with `--features cuda`, and does `nvidia-smi` list the device?",
            )
        } else {
            err
        }
    })
}

/// Test-only fault injection, read here at the edge and passed in as configuration: a node
/// started with `SWACTOR_FAULT_SKIP_SEQUENCE=N` labels the output of sequence `N` as
/// `N + 1` (a skipped sequence downstream).
fn fault_skip_sequence() -> Option<crate::wire::Sequence> {
    std::env::var("SWACTOR_FAULT_SKIP_SEQUENCE").ok()?.parse().ok().map(crate::wire::Sequence)
}

/// `swactor node id`.
pub fn node_id(args: &NodeIdArgs, out: &mut Output) -> Result<(), CliError> {
    let key = crate::net::identity::NodeKey::load_or_create(&args.key).map_err(|e| {
        CliError::new(ExitCode::Input, "identity_invalid", color_eyre::eyre::eyre!(e))
    })?;
    if args.output.json {
        let record = serde_json::json!({ "key": args.key.display().to_string(), "endpoint_id": key.endpoint_id_hex() });
        out.json("node_identity", &record)?;
    } else {
        out.line(key.endpoint_id_hex())?;
    }
    Ok(())
}
