//! Link round trips: a node dials a peer on the ping ALPN, takes the round trip of the path
//! the handshake selected (QUIC's estimate, iroh's path stats) and closes; the peer only
//! waits for the close. What the cost model's hops are made of (`specs/cost-model.md`).

use std::time::Duration;

use iroh::Endpoint;
use iroh::endpoint::Connection;

use crate::wire::{LinkRtt, Peer};

pub use super::endpoint::PING_ALPN;

/// How long a probe may take to connect.
const CONNECT: Duration = Duration::from_secs(5);

/// How long the answering side keeps a probe's connection open.
const LINGER: Duration = Duration::from_secs(5);

/// The round trip to `peer`, microseconds; `None` if it cannot be reached in time.
pub async fn round_trip(endpoint: &Endpoint, peer: &Peer) -> Option<u64> {
    let id = peer.endpoint_id.as_deref()?.parse::<iroh::EndpointId>().ok()?;
    let addr = super::endpoint::endpoint_addr(id, &peer.addrs, peer.relay.as_deref());
    let conn = tokio::time::timeout(CONNECT, endpoint.connect(addr, PING_ALPN)).await.ok()?.ok()?;
    let rtt = super::paths::selected(&conn).map(|p| p.rtt_us);
    conn.close(0u32.into(), b"measured");
    rtt
}

/// Measures every peer of `peers` at once (an unreachable one costs at most the connect
/// timeout, not one each); the ones reached, in `peers`' order.
pub async fn measure(endpoint: &Endpoint, peers: &[Peer]) -> Vec<LinkRtt> {
    let mut probes = tokio::task::JoinSet::new();
    for (i, peer) in peers.iter().enumerate() {
        let (endpoint, peer) = (endpoint.clone(), peer.clone());
        probes.spawn(async move { (i, peer.node_id, round_trip(&endpoint, &peer).await) });
    }
    let mut links: Vec<(usize, LinkRtt)> = Vec::new();
    while let Some(done) = probes.join_next().await {
        if let Ok((i, to, Some(rtt_us))) = done {
            links.push((i, LinkRtt { to, rtt_us }));
        }
    }
    links.sort_by_key(|(i, _)| *i);
    links.into_iter().map(|(_, l)| l).collect()
}

/// Answers a probe: holds the connection until the prober closes it (at most [`LINGER`]).
pub async fn answer(conn: Connection) {
    let _ = tokio::time::timeout(LINGER, conn.closed()).await;
}
