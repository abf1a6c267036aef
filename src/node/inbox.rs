//! The node's control inbox: accepts connections (edge streams go to the router; control
//! sessions only from the configured orchestrator, which first receives this node's
//! `NodeAvailable` and names the pool's SWIM roster), carries each session's messages to
//! the host, and lets a stopping node wait until its sessions delivered their last words.
//!
//! An observer (`pool watch`) holds its own key and opens a read-only session with the
//! orchestrator's delegation: it gets `NodeAvailable` and this node's membership view, and
//! nothing it sends reaches the host, so it can never disturb a run.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iroh::Endpoint;
use tokio::sync::{mpsc, watch};

use super::host::HostInput;
use crate::control::{self, ControlMessage, FrameDecoder};
use crate::membership::swim;
use crate::net::edge::EdgeRouter;
use crate::net::endpoint::{CTL_ALPN, EDGE_ALPN};
use crate::net::identity::delegation_holds;
use crate::wire::NodeId;
use crate::wire::reason::ControlFault;

/// What observers are sent: the pool's membership as this node's SWIM participant sees
/// it, and the node's fault once it faults for good.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct MemberView {
    /// This node.
    pub node_id: NodeId,
    /// Alive (the node itself included).
    pub up: BTreeSet<NodeId>,
    /// Suspected down.
    pub suspect: BTreeSet<NodeId>,
    /// Set when the node faulted for good (it stops right after).
    pub faulted: Option<crate::wire::reason::BootFault>,
}

impl MemberView {
    fn message(&self) -> ControlMessage {
        match self.faulted {
            Some(reason) => ControlMessage::NodeFaulted { node_id: self.node_id, reason },
            None => ControlMessage::MemberView {
                up: self.up.iter().copied().collect(),
                suspect: self.suspect.iter().copied().collect(),
            },
        }
    }
}

/// Notes a member going up, suspect or down in the admin snapshot (members up) and in the
/// view observers are sent.
pub(super) fn note_member(
    inspect: &std::sync::Mutex<super::inspect::EdgeInspect>,
    view: &watch::Sender<MemberView>,
    ev: &swim::MembershipEvent,
) {
    use swim::MembershipEvent as Ev;
    let mut snapshot = inspect.lock().unwrap_or_else(|e| e.into_inner());
    match ev {
        Ev::Up(id) => {
            let n = id.node_id;
            if !snapshot.members.contains(&n.0) {
                snapshot.members.push(n.0);
                snapshot.members.sort();
            }
            view.send_if_modified(|v| v.suspect.remove(&n) | v.up.insert(n));
        }
        // Still a member until it refutes or is declared down.
        Ev::Suspect(id) => {
            view.send_if_modified(|v| v.suspect.insert(id.node_id));
        }
        Ev::Down(id) => {
            let n = id.node_id;
            snapshot.members.retain(|m| *m != n.0);
            view.send_if_modified(|v| v.suspect.remove(&n) | v.up.remove(&n));
        }
        Ev::Rejected(_) => {}
    }
}

/// How often refusals of one peer are logged again, with how many there were since.
pub const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(5);

/// How many peers' refusals are counted at once (past it the counts start over).
const REFUSAL_LOG_PEERS: usize = 256;

/// The node's log of refusals (control sessions, SWIM datagrams, edge streams): a refused
/// peer retries several times a second, so its first refusal is logged at once and then
/// how many more there were, at most every [`REFUSAL_LOG_EVERY`]. `edge inspect` counts
/// every one.
#[derive(Debug, Default)]
pub(super) struct RefusalLog {
    /// Per peer and reason: when it was last logged and the refusals since.
    peers: HashMap<String, (Instant, u64)>,
}

impl RefusalLog {
    /// Counts one refusal, `line`, of the peer and reason `key` at `now`; returns what to
    /// log now, if anything.
    pub(super) fn refused(&mut self, now: Instant, key: &str, line: &str) -> Option<String> {
        let Some((last, more)) = self.peers.get_mut(key) else {
            if self.peers.len() >= REFUSAL_LOG_PEERS {
                self.peers.clear();
            }
            self.peers.insert(key.to_string(), (now, 0));
            return Some(line.to_string());
        };
        *more += 1;
        if now.duration_since(*last) < REFUSAL_LOG_EVERY {
            return None;
        }
        let logged = format!("{line} ({more} refused since the last line)");
        (*last, *more) = (now, 0);
        Some(logged)
    }
}

/// What the inbox hands every accepted connection.
#[derive(Clone)]
pub(super) struct Inbox {
    /// Routes edge streams.
    pub router: EdgeRouter,
    /// The orchestrator's endpoint id.
    pub orchestrator: String,
    /// This node's `NodeAvailable`.
    pub hello: ControlMessage,
    /// The host's inputs.
    pub inputs: mpsc::UnboundedSender<HostInput>,
    /// The SWIM roster (the orchestrator's `Hello` names it).
    pub roster: swim::RosterHandle,
    /// Carries SWIM datagrams for members reached through a relay.
    pub swim: crate::membership::carrier::Carrier,
    /// Held by a session's writer until it delivered its last words.
    pub open: mpsc::WeakSender<()>,
    /// The membership view observers are sent.
    pub view: watch::Receiver<MemberView>,
}

/// How long a peer other than the orchestrator has to present an observer's delegation.
const OBSERVE_HELLO: Duration = Duration::from_secs(5);

/// Control sessions the authorized orchestrator may hold open at once; more are closed at
/// once with `too_many_sessions` (a run needs one; a restarted orchestrator's old ones end
/// with their connections).
pub const MAX_CONTROL_SESSIONS: usize = 8;

/// How long the orchestrator has to send its `Hello` on a new control session.
const CONTROL_HELLO: Duration = Duration::from_secs(10);

/// Counts an open control session; uncounted when dropped.
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    /// Counts one more session unless `MAX_CONTROL_SESSIONS` are open.
    fn try_new(open: &Arc<std::sync::atomic::AtomicUsize>) -> Option<Counted> {
        use std::sync::atomic::Ordering;
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_CONTROL_SESSIONS).then_some(n + 1)
        })
        .ok()
        .map(|_| Counted(Arc::clone(open)))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Accepts connections: edge streams go to the router, SWIM datagrams of the pool's
/// members to the carrier, link probes are answered for members; control sessions only from the
/// configured orchestrator, which first receives this node's `NodeAvailable`; the session
/// then carries run work both ways. A peer with the orchestrator's delegation gets a
/// read-only observer session. Anything else is refused and reported.
pub(super) async fn accept(endpoint: Endpoint, inbox: Inbox) {
    let sessions = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let open_sessions = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    while let Some(incoming) = endpoint.accept().await {
        let (inbox, sessions) = (inbox.clone(), sessions.clone());
        let open_sessions = Arc::clone(&open_sessions);
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            if conn.alpn() == EDGE_ALPN {
                inbox.router.serve_connection(conn).await;
            } else if conn.alpn() == crate::net::ping::PING_ALPN {
                // Pool members and the orchestrator measure their link to this node.
                let peer = conn.remote_id();
                let orchestrator = peer.to_string() == inbox.orchestrator;
                if orchestrator || inbox.roster.is_member(peer.as_bytes()) {
                    crate::net::ping::answer(conn).await;
                } else {
                    conn.close(1u32.into(), b"not_a_pool_member");
                }
            } else if conn.alpn() == crate::membership::carrier::SWIM_ALPN {
                inbox.swim.accept(conn).await;
            } else if conn.alpn() == CTL_ALPN {
                let peer = conn.remote_id().to_string();
                if control::authorize(&peer, &inbox.orchestrator).is_err() {
                    if !observer_session(&conn, &inbox).await {
                        let _ = inbox.inputs.send(HostInput::ForeignControl(peer));
                        conn.close(1u32.into(), b"unauthorized_orchestrator");
                    }
                    return;
                }
                let Some(_counted) = Counted::try_new(&open_sessions) else {
                    eprintln!(
                        "swactor node: refused a control session: {MAX_CONTROL_SESSIONS} are open"
                    );
                    conn.close(3u32.into(), b"too_many_sessions");
                    return;
                };
                let session = sessions.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                // No guard: the node is stopping, and the session will not be served.
                let Some(open) = inbox.open.upgrade() else { return };
                control_session(conn, inbox.hello, inbox.inputs, session, inbox.roster, open).await;
            }
        });
    }
}

/// Serves a read-only observer session if the peer opens it with the orchestrator's
/// delegation for its own endpoint id; `false` (nothing served) otherwise.
async fn observer_session(conn: &iroh::endpoint::Connection, inbox: &Inbox) -> bool {
    let Ok(orchestrator) = inbox.orchestrator.parse::<iroh::EndpointId>() else { return false };
    let opened = tokio::time::timeout(OBSERVE_HELLO, async {
        let (send, mut recv) = conn.accept_bi().await.ok()?;
        let mut decoder = FrameDecoder::new();
        match control::read_message(&mut recv, &mut decoder).await {
            Some(Ok(ControlMessage::Observe { delegation, members }))
                if delegation_holds(&orchestrator, &conn.remote_id(), &delegation) =>
            {
                Some((send, recv, decoder, members))
            }
            _ => None,
        }
    });
    let Ok(Some((mut send, mut recv, mut decoder, members))) = opened.await else { return false };
    // A stopping node serves no new session.
    let Some(open) = inbox.open.upgrade() else { return true };
    inbox.roster.set_if_empty(swim::roster_of(&members));
    let mut view = inbox.view.clone();
    let writer = async {
        // Held until the last words are written: a stopping node waits for them.
        let _open = open;
        if control::write_message(&mut send, &inbox.hello).await.is_err() {
            return;
        }
        loop {
            let msg = view.borrow_and_update().message();
            let last = matches!(msg, ControlMessage::NodeFaulted { .. });
            if control::write_message(&mut send, &msg).await.is_err() {
                return;
            }
            if last || view.changed().await.is_err() {
                let _ = send.finish();
                let _ = tokio::time::timeout(SESSION_FLUSH, send.stopped()).await;
                return;
            }
        }
    };
    // Whatever the observer sends is read and dropped; the session ends with its connection.
    let reader =
        async { while let Some(Ok(_)) = control::read_message(&mut recv, &mut decoder).await {} };
    tokio::select! {
        () = writer => {}
        () = reader => {}
    }
    conn.close(0u32.into(), b"observer_session_ended");
    true
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
    let hello_msg =
        tokio::time::timeout(CONTROL_HELLO, control::read_message(&mut recv, &mut decoder));
    let orchestrator = match hello_msg.await.ok().flatten() {
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
