//! The orchestrator's control sessions: one per pool node, on ALPN `swactor/ctl/1`. Each
//! session opens with `Hello` and the node's `NodeAvailable`, then carries run work both
//! ways until the connection ends. A node that refuses the session (it was started for
//! another orchestrator) is reported with the reason it gave; sessions are retried while
//! nodes boot, and reopened after they end (a healed partition, a restarted node).

use std::str::FromStr;
use std::time::Duration;

use iroh::endpoint::ConnectionError;
use iroh::{Endpoint, EndpointAddr, EndpointId};
use tokio::sync::mpsc;

use crate::control::{self, ControlMessage, FrameDecoder};
use crate::net::endpoint::CTL_ALPN;
use crate::planner::PoolNode;
use crate::wire::NodeId;

/// How long one attempt to open a session (connect, `Hello`, `NodeAvailable`) may take
/// before it is retried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a session reports.
#[derive(Debug)]
pub enum SessionEvent {
    /// The node answered `Hello`; messages to it go through `tx`.
    Available {
        /// The node's `NodeAvailable`.
        hello: ControlMessage,
        /// The session's outbound queue.
        tx: mpsc::UnboundedSender<ControlMessage>,
        /// The round trip of the session's path when the node answered, microseconds.
        rtt_us: Option<u64>,
    },
    /// A message from the node.
    Message(ControlMessage),
    /// The session ended (the node stopped, or its connection was lost).
    Closed,
    /// The node refused the session; the reason it gave.
    Refused(String),
}

/// The sessions' tasks: dropping it ends every session at once (a connect in progress
/// included), so nothing holds the endpoint open after the pool phase ends.
pub type SessionTasks = tokio::task::JoinSet<()>;

/// Opens (and keeps retrying until opened) a session to every node, each opened with
/// `hello` (the orchestrator's `Hello`, or an observer's `Observe`); everything they report
/// arrives on the returned receiver as `(node, event)`, while the returned tasks are held.
pub fn open_all(
    endpoint: &Endpoint,
    nodes: &[PoolNode],
    hello: &ControlMessage,
) -> Result<(mpsc::UnboundedReceiver<(NodeId, SessionEvent)>, SessionTasks), String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut tasks = SessionTasks::new();
    for node in nodes {
        let id = EndpointId::from_str(&node.endpoint_id)
            .map_err(|e| format!("node {}: endpoint id: {e}", node.node_id))?;
        let addr = crate::net::endpoint::endpoint_addr(id, &node.addrs, node.relay.as_deref());
        tasks.spawn(session(endpoint.clone(), addr, node.node_id, hello.clone(), tx.clone()));
    }
    Ok((rx, tasks))
}

async fn session(
    endpoint: Endpoint,
    addr: EndpointAddr,
    node: NodeId,
    hello: ControlMessage,
    events: mpsc::UnboundedSender<(NodeId, SessionEvent)>,
) {
    loop {
        if events.is_closed() {
            return;
        }
        // Bounded: a connect toward a path that just healed must not hang the retries.
        let connect =
            tokio::time::timeout(CONNECT_TIMEOUT, endpoint.connect(addr.clone(), CTL_ALPN));
        let Ok(Ok(conn)) = connect.await else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let opened = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let (mut send, mut recv) = conn.open_bi().await.ok()?;
            control::write_message(&mut send, &hello).await.ok()?;
            let mut decoder = FrameDecoder::new();
            match control::read_message(&mut recv, &mut decoder).await {
                Some(Ok(hello @ ControlMessage::NodeAvailable { .. })) => {
                    Some((send, recv, decoder, hello))
                }
                _ => None,
            }
        })
        .await
        .ok()
        .flatten();
        let Some((mut send, mut recv, mut decoder, hello)) = opened else {
            if let Some(ConnectionError::ApplicationClosed(close)) = conn.close_reason() {
                let reason = String::from_utf8_lossy(&close.reason).into_owned();
                let _ = events.send((node, SessionEvent::Refused(reason)));
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<ControlMessage>();
        let rtt_us = crate::net::paths::selected(&conn).map(|p| p.rtt_us);
        if events.send((node, SessionEvent::Available { hello, tx, rtt_us })).is_err() {
            return;
        }
        let writer = tokio::spawn(async move {
            while let Some(msg) = rx.recv().await {
                if control::write_message(&mut send, &msg).await.is_err() {
                    return;
                }
            }
            let _ = send.finish();
        });
        while let Some(msg) = control::read_message(&mut recv, &mut decoder).await {
            match msg {
                Ok(msg) => {
                    if events.send((node, SessionEvent::Message(msg))).is_err() {
                        break;
                    }
                }
                Err(crate::wire::reason::ControlFault::ConnectionLost) => break,
                Err(fault) => {
                    eprintln!("swactor: control session with node {node} closed: {fault}");
                    conn.close(2u32.into(), fault.as_str().as_bytes());
                    break;
                }
            }
        }
        writer.abort();
        if events.send((node, SessionEvent::Closed)).is_err() {
            return;
        }
        // The node may come back (a partition healed, a restart): open a new session.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
