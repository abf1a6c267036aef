//! The node's control inbox: accepts connections (edge streams go to the router; control
//! sessions only from the configured orchestrator, which first receives this node's
//! `NodeAvailable` and names the pool's SWIM roster), carries each session's messages to
//! the host, and lets a stopping node wait until its sessions delivered their last words.

use std::sync::Arc;
use std::time::Duration;

use iroh::Endpoint;
use tokio::sync::mpsc;

use super::host::HostInput;
use crate::control::{self, ControlMessage, FrameDecoder};
use crate::membership::swim;
use crate::net::edge::EdgeRouter;
use crate::net::endpoint::{CTL_ALPN, EDGE_ALPN};
use crate::wire::reason::ControlFault;

/// Accepts connections: edge streams go to the router; control sessions only from the
/// configured orchestrator, which first receives this node's `NodeAvailable`; the session
/// then carries run work both ways. Anything else is refused and reported.
pub(super) async fn accept(
    endpoint: Endpoint,
    router: EdgeRouter,
    orchestrator: String,
    hello: ControlMessage,
    inputs: mpsc::UnboundedSender<HostInput>,
    roster: swim::RosterHandle,
    open: mpsc::WeakSender<()>,
) {
    let sessions = Arc::new(std::sync::atomic::AtomicU64::new(0));
    while let Some(incoming) = endpoint.accept().await {
        let (router, orchestrator, hello, inputs, sessions, roster, open) = (
            router.clone(),
            orchestrator.clone(),
            hello.clone(),
            inputs.clone(),
            sessions.clone(),
            roster.clone(),
            open.clone(),
        );
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            if conn.alpn() == EDGE_ALPN {
                router.serve_connection(conn).await;
            } else if conn.alpn() == CTL_ALPN {
                if control::authorize(&conn.remote_id().to_string(), &orchestrator).is_err() {
                    let _ = inputs.send(HostInput::ForeignControl(conn.remote_id().to_string()));
                    conn.close(1u32.into(), b"unauthorized_orchestrator");
                    return;
                }
                let session = sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                // No guard: the node is stopping, and the session will not be served.
                let Some(open) = open.upgrade() else { return };
                control_session(conn, hello, inputs, session, roster, open).await;
            }
        });
    }
}

async fn control_session(
    conn: iroh::endpoint::Connection,
    hello: ControlMessage,
    inputs: mpsc::UnboundedSender<HostInput>,
    session: u64,
    roster: swim::RosterHandle,
    open: mpsc::Sender<()>,
) {
    let Ok((mut send, mut recv)) = conn.accept_bi().await else { return };
    let mut decoder = FrameDecoder::new();
    let orchestrator = match control::read_message(&mut recv, &mut decoder).await {
        Some(Ok(ControlMessage::Hello { orchestrator, members })) => {
            // The authorized orchestrator names the pool: only its members take part in
            // SWIM from now on. (An older orchestrator that names nobody leaves the roster
            // as it was.)
            if !members.is_empty() {
                roster.set(swim::roster_of(&members));
            }
            orchestrator
        }
        _ => {
            conn.close(2u32.into(), b"malformed_frame");
            return;
        }
    };
    if control::write_message(&mut send, &hello).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<ControlMessage>();
    let _ = inputs.send(HostInput::SessionOpened { tx, orchestrator, session });
    let writer = tokio::spawn(async move {
        let _open = open;
        while let Some(msg) = rx.recv().await {
            if control::write_message(&mut send, &msg).await.is_err() {
                return;
            }
        }
        // The host let go of the session (the node is stopping): the orchestrator gets to
        // read everything written before the endpoint closes.
        let _ = send.finish();
        let _ = tokio::time::timeout(SESSION_FLUSH, send.stopped()).await;
    });
    while let Some(msg) = control::read_message(&mut recv, &mut decoder).await {
        match msg {
            Ok(msg) => {
                let _ = inputs.send(HostInput::Control(session, msg));
            }
            Err(ControlFault::ConnectionLost) => break,
            Err(fault) => {
                eprintln!("swactor node: control session closed: {fault}");
                conn.close(2u32.into(), fault.as_str().as_bytes());
                break;
            }
        }
    }
    let _ = inputs.send(HostInput::SessionClosed(session));
    writer.abort();
}

/// How long a stopping node waits for its control sessions to deliver their last messages.
const SESSION_FLUSH: Duration = Duration::from_secs(1);

/// Waits (at most [`SESSION_FLUSH`] more) until every control session's writer delivered
/// what the host gave it: each holds a clone of `open` until then.
pub(super) async fn flush_sessions(open: mpsc::Sender<()>, mut flushed: mpsc::Receiver<()>) {
    drop(open);
    let _ = tokio::time::timeout(SESSION_FLUSH, flushed.recv()).await;
}
