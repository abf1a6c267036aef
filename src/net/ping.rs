//! Link probes: a node dials a peer on the ping ALPN and takes the round trip of the path
//! the handshake selected (QUIC's estimate, iroh's path stats); then it asks the peer for
//! [`PROBE_BYTES`] on a stream and times them; the caller's [`Fit`] (the cost model's,
//! `planner::cost::fitted_bytes_per_s`) turns that transfer into the link's bandwidth. The
//! peer answers the one request and waits for the close. What the cost
//! model's hops are made of (`specs/cost-model.md`).

use std::time::Duration;

use iroh::Endpoint;
use iroh::endpoint::Connection;

use crate::wire::{LinkRtt, NodeId, Peer};

pub use super::endpoint::PING_ALPN;

/// How long a probe may take to connect.
const CONNECT: Duration = Duration::from_secs(5);

/// How long the answering side keeps a probe's connection open (the prober times its peers'
/// transfers one after another, so a connection may wait for its turn).
const LINGER: Duration = Duration::from_secs(30);

/// Bytes a probe asks for to time the link's bandwidth (an answer larger than this is
/// never sent).
pub const PROBE_BYTES: u32 = 1 << 20;

/// How long the timed transfer may take: on a slower link, the bytes that arrived by then
/// give the rate.
const TRANSFER: Duration = Duration::from_secs(3);

/// Turns a timed transfer into a bandwidth: `(bytes, elapsed_us, rtt_us)` to bytes per
/// second, `None` where the transfer cannot tell.
pub type Fit = fn(u64, u64, u64) -> Option<u64>;

/// A connection to `peer` and the round trip of the path its handshake selected,
/// microseconds; `None` if it cannot be reached in time.
async fn connect(endpoint: &Endpoint, peer: &Peer) -> Option<(Connection, u64)> {
    let id = peer.endpoint_id.as_deref()?.parse::<iroh::EndpointId>().ok()?;
    let addr = super::endpoint::endpoint_addr(id, &peer.addrs, peer.relay.as_deref());
    let conn = tokio::time::timeout(CONNECT, endpoint.connect(addr, PING_ALPN)).await.ok()?.ok()?;
    let rtt = super::paths::selected(&conn).map(|p| p.rtt_us)?;
    Some((conn, rtt))
}

/// Asks the peer for [`PROBE_BYTES`] and fits the bandwidth from how long they took.
async fn transfer_rate(conn: &Connection, rtt_us: u64, fit: Fit) -> Option<u64> {
    let (mut send, mut recv) = conn.open_bi().await.ok()?;
    let start = crate::clock::monotonic_us();
    send.write_all(&PROBE_BYTES.to_le_bytes()).await.ok()?;
    send.finish().ok()?;
    let mut got = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(TRANSFER, async {
        while let Ok(Some(n)) = recv.read(&mut buf).await {
            got += n as u64;
        }
    })
    .await;
    let elapsed = crate::clock::monotonic_us().saturating_sub(start).max(1);
    match read {
        Ok(()) if got == u64::from(PROBE_BYTES) => fit(got, elapsed, rtt_us),
        // A link too slow to carry it in time: what did arrive is its rate, near enough.
        Err(_) if got > 0 => Some(got * 1_000_000 / elapsed),
        _ => None,
    }
}

/// Measures every peer of `peers`: connects to all at once (an unreachable one costs at
/// most the connect timeout, not one each) for the round trips, then times the transfers
/// one after another (so that they do not share this host's link), bandwidths by `fit`; the
/// ones reached, in `peers`' order.
pub async fn measure(endpoint: &Endpoint, peers: &[Peer], fit: Fit) -> Vec<LinkRtt> {
    let mut probes = tokio::task::JoinSet::new();
    for (i, peer) in peers.iter().enumerate() {
        let (endpoint, peer) = (endpoint.clone(), peer.clone());
        probes.spawn(async move { (i, peer.node_id, connect(&endpoint, &peer).await) });
    }
    let mut reached: Vec<(usize, NodeId, Connection, u64)> = Vec::new();
    while let Some(done) = probes.join_next().await {
        if let Ok((i, to, Some((conn, rtt_us)))) = done {
            reached.push((i, to, conn, rtt_us));
        }
    }
    reached.sort_by_key(|r| r.0);
    let mut links = Vec::with_capacity(reached.len());
    for (_, to, conn, rtt_us) in reached {
        let bytes_per_s = transfer_rate(&conn, rtt_us, fit).await;
        conn.close(0u32.into(), b"measured");
        links.push(LinkRtt { to, rtt_us, bytes_per_s });
    }
    links
}

/// Answers a probe: sends the bytes it asks for (at most [`PROBE_BYTES`]) and holds the
/// connection until the prober closes it (all within [`LINGER`]).
pub async fn answer(conn: Connection) {
    let _ = tokio::time::timeout(LINGER, async {
        if let Ok((mut send, mut recv)) = conn.accept_bi().await {
            let mut ask = [0u8; 4];
            if recv.read_exact(&mut ask).await.is_ok() {
                let n = u32::from_le_bytes(ask).min(PROBE_BYTES) as usize;
                let chunk = vec![0u8; 64 * 1024];
                let mut left = n;
                while left > 0 {
                    let k = left.min(chunk.len());
                    if send.write_all(&chunk[..k]).await.is_err() {
                        break;
                    }
                    left -= k;
                }
                let _ = send.finish();
            }
        }
        conn.closed().await
    })
    .await;
}
