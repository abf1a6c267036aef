//! `swactor util wan-link`: the user-space wide-area link ([`crate::wan::Forwarder`]) as a
//! process, so that it can sit in any network namespace (the WAN suite puts one in front of
//! every node).

use color_eyre::eyre::eyre;

use super::args::util::WanLinkArgs;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use crate::wan::{Forwarder, LinkSpec, LinkStats};

/// `swactor util wan-link`: forwards until SIGINT / SIGTERM, then says what each way
/// carried.
pub fn wan_link(args: &WanLinkArgs, out: &mut Output) -> Result<(), CliError> {
    let usage = |e: String| CliError::new(ExitCode::Usage, "usage", eyre!(e));
    // Megabits (checked above zero by the parser) to bytes a second.
    let rate = args.rate_mbit.map(|mbit| (mbit * 125_000.0).max(1.0) as u64);
    let spec = LinkSpec::symmetric(args.rtt_ms * 1000, args.jitter_ms * 1000, args.loss)
        .and_then(|s| s.with_rate(rate))
        .map_err(|e| usage(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::new(ExitCode::Internal, "internal", eyre!(e)))?;
    runtime.block_on(async {
        let stop = super::signals::StopSignal::install();
        let link = Forwarder::start(args.listen, args.target, spec, args.seed).map_err(|e| {
            CliError::new(
                ExitCode::Input,
                "wan.bind",
                eyre!("cannot listen on {}: {e}", args.listen),
            )
        })?;
        let ready = serde_json::json!({
            "listen": link.local_addr().to_string(),
            "target": args.target.to_string(),
            "rtt_ms": args.rtt_ms,
            "jitter_ms": args.jitter_ms,
            "loss": args.loss,
            "rate_mbit": args.rate_mbit,
        });
        if args.output.json {
            out.json("wan_link_ready", &ready)?;
        } else {
            out.line(format!("forwarding {} -> {}", link.local_addr(), args.target))?;
        }
        out.flush()?;
        stop.stopped().await;
        let (up, down) = link.stats();
        let way = |s: LinkStats| {
            serde_json::json!({"arrived": s.arrived, "delivered": s.delivered, "dropped": s.dropped})
        };
        let stopped = serde_json::json!({ "up": way(up), "down": way(down) });
        if args.output.json {
            out.json("wan_link_stopped", &stopped)?;
        } else {
            out.line(format!(
                "stopped: up {} delivered, {} dropped; down {} delivered, {} dropped",
                up.delivered, up.dropped, down.delivered, down.dropped
            ))?;
        }
        Ok(())
    })
}
