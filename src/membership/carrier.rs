//! SWIM datagrams for members without a reachable UDP port: carried as QUIC datagrams on
//! the SWIM ALPN over the iroh endpoint, so through the member's relay when no direct path
//! exists (a `--relay-only` node behind a NAT), and over the direct path once iroh finds
//! one.
//!
//! The carrier only moves bytes: the SWIM participant seals every datagram and checks every
//! one it receives exactly as it does for UDP (signature, stamp, roster), so a carried
//! datagram is trusted no more than a UDP one. It keeps one connection per peer (its own
//! or the peer's, whichever exists), queues the few datagrams sent while a connection is
//! being made, and reads the datagrams of every connection into one inbox. Connections are
//! accepted from the roster's members only.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use iroh::endpoint::Connection;
use iroh::{Endpoint, EndpointId};
use tokio::sync::{Mutex, mpsc};

pub use super::swim::{Carried, CarrierLink};
use super::swim::{RosterHandle, SwimAddr};

pub use crate::net::endpoint::SWIM_ALPN;

/// How long one connection attempt may take.
const CONNECT: Duration = Duration::from_secs(5);

/// Datagrams kept for a peer while its connection is being made (older ones are dropped:
/// SWIM repeats itself).
const PENDING: usize = 16;

/// Inbound datagrams waiting for the participant (beyond that, new ones are dropped).
const INBOX: usize = 1024;

/// The endpoint's side of a carrier: hands it the SWIM connections the endpoint accepts.
#[derive(Debug, Clone)]
pub struct Carrier {
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    endpoint: Endpoint,
    roster: RosterHandle,
    inbox: mpsc::Sender<Carried>,
    peers: Mutex<HashMap<EndpointId, Peer>>,
}

/// One peer's connection, or the datagrams waiting for it.
#[derive(Debug)]
enum Peer {
    Connecting(Vec<Bytes>),
    Open(Connection),
}

/// Starts a carrier on `endpoint` (which must speak [`SWIM_ALPN`]) for the members of
/// `roster`; runs on the current runtime until the link's outbox closes.
pub fn start(endpoint: Endpoint, roster: RosterHandle) -> (Carrier, CarrierLink) {
    let (inbox_tx, inbox) = mpsc::channel(INBOX);
    let (outbox, mut outgoing) = mpsc::unbounded_channel::<(SwimAddr, Vec<u8>)>();
    let state = Arc::new(State { endpoint, roster, inbox: inbox_tx, peers: Mutex::default() });
    let carrier = Carrier { state };
    let sender = carrier.clone();
    tokio::spawn(async move {
        while let Some((to, data)) = outgoing.recv().await {
            sender.send(&to, Bytes::from(data)).await;
        }
    });
    (carrier, CarrierLink { outbox, inbox })
}

impl Carrier {
    /// Serves a connection the endpoint accepted on [`SWIM_ALPN`]: refused unless its peer
    /// is on the roster, else kept as the peer's connection and read until it closes.
    pub async fn accept(&self, conn: Connection) {
        let peer = conn.remote_id();
        if !self.state.roster.is_member(peer.as_bytes()) {
            conn.close(1u32.into(), b"not_a_pool_member");
            return;
        }
        let pending = match self.state.peers.lock().await.insert(peer, Peer::Open(conn.clone())) {
            Some(Peer::Connecting(pending)) => pending,
            _ => Vec::new(),
        };
        for data in pending {
            let _ = conn.send_datagram(data);
        }
        self.read(conn).await;
    }

    /// Sends one datagram to `to` (a relayed member; UDP addresses are not the carrier's).
    async fn send(&self, to: &SwimAddr, data: Bytes) {
        let SwimAddr::Relayed { endpoint, relay } = to else { return };
        let Ok(id) = endpoint.parse::<EndpointId>() else { return };
        let mut peers = self.state.peers.lock().await;
        match peers.get_mut(&id) {
            Some(Peer::Open(conn)) if conn.close_reason().is_none() => {
                let _ = conn.send_datagram(data);
            }
            Some(Peer::Connecting(pending)) => {
                if pending.len() == PENDING {
                    pending.remove(0);
                }
                pending.push(data);
            }
            _ => {
                peers.insert(id, Peer::Connecting(vec![data]));
                let carrier = self.clone();
                let addr = crate::net::endpoint::endpoint_addr(id, &[], Some(relay));
                tokio::spawn(async move { carrier.connect(id, addr).await });
            }
        }
    }

    /// Connects to a peer, sends what waited for it and reads its datagrams; on failure the
    /// waiting datagrams are dropped (the next one tries again).
    async fn connect(&self, id: EndpointId, addr: iroh::EndpointAddr) {
        let endpoint = &self.state.endpoint;
        let conn = tokio::time::timeout(CONNECT, endpoint.connect(addr, SWIM_ALPN)).await;
        let mut peers = self.state.peers.lock().await;
        let Ok(Ok(conn)) = conn else {
            if matches!(peers.get(&id), Some(Peer::Connecting(_))) {
                peers.remove(&id);
            }
            return;
        };
        let pending = match peers.insert(id, Peer::Open(conn.clone())) {
            Some(Peer::Connecting(pending)) => pending,
            _ => Vec::new(),
        };
        drop(peers);
        for data in pending {
            let _ = conn.send_datagram(data);
        }
        self.read(conn).await;
    }

    /// Reads `conn`'s datagrams into the inbox until it closes, then forgets it.
    async fn read(&self, conn: Connection) {
        let from = format!("iroh:{}", conn.remote_id());
        while let Ok(data) = conn.read_datagram().await {
            if self.state.inbox.is_closed() {
                break;
            }
            let _ = self.state.inbox.try_send((data.to_vec(), from.clone()));
        }
        let mut peers = self.state.peers.lock().await;
        let id = conn.remote_id();
        if matches!(peers.get(&id), Some(Peer::Open(c)) if c.stable_id() == conn.stable_id()) {
            peers.remove(&id);
        }
    }
}
