//! `swactor relay serve`: an iroh relay for pool members behind NAT, until SIGINT or
//! SIGTERM.

use color_eyre::eyre::eyre;
use serde::Serialize;

use super::args::RelayServeArgs;
use super::exit::{CliError, ExitCode};
use super::output::Output;
use super::signals::stop_signal;
use crate::net::relay::{RelayError, RelayFault, RelayServer, TlsFiles};

/// A relay that could not start, as the CLI reports it: an unreadable certificate or an
/// address it cannot listen on is the user's input (exit 3).
fn relay_error(e: RelayError) -> CliError {
    let code = match e.reason {
        RelayFault::BadUrl | RelayFault::OnlyWithoutRelay => ExitCode::Usage,
        RelayFault::Tls | RelayFault::Bind | RelayFault::Unreachable => ExitCode::Input,
    };
    CliError::new(code, e.reason.to_string(), eyre!(e).wrap_err("cannot serve the relay"))
}

#[derive(Serialize)]
struct Ready<'a> {
    url: &'a str,
    addr: String,
    tls: bool,
}

/// `swactor relay serve`.
pub fn serve(args: &RelayServeArgs, out: &mut Output) -> Result<(), CliError> {
    let tls = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert: cert.clone(), key: key.clone() }),
        _ => None,
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        // Listen for the stop first: a SIGTERM at any moment stops the relay cleanly.
        let stop = tokio::spawn(stop_signal());
        tokio::task::yield_now().await;
        let server = RelayServer::start(args.listen, tls.as_ref(), args.host.as_deref())
            .await
            .map_err(relay_error)?;
        let ready =
            Ready { url: server.url(), addr: server.addr().to_string(), tls: tls.is_some() };
        let said = if args.output.json {
            out.json("relay_ready", &ready)
        } else {
            out.line(format!(
                "relay serving at {} (name it with --relay {})",
                ready.addr, ready.url
            ))
        };
        if said.is_ok() {
            let _ = stop.await;
        }
        server.shutdown().await;
        said?;
        if args.output.json {
            out.json("relay_stopped", &serde_json::json!({}))?;
        }
        Ok(())
    })
}
