//! SWIM membership over UDP: foca (itself sans-IO) driven by a small tokio task that owns
//! the socket, the timers and the loop, and reports members going up and down.
//!
//! The identity carries the node id, its SWIM address, its iroh endpoint id and a bump
//! counter, so a restarted node wins over its old self. The configuration is foca's LAN
//! profile tuned for loopback and LAN pools (failure detection in about 1.5 s), and the
//! node re-announces itself to its seeds whenever it finds itself alone or cut off, so a
//! paused member rejoins.
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::time::Duration;

use foca::{
    AccumulatingRuntime, Config, Foca, OwnedNotification, PeriodicParams, PostcardCodec, Timer,
};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::wire::NodeId;

/// A member's identity in the SWIM cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SwimIdentity {
    /// Node id from the pool file (0 for a seed whose id is not known yet).
    pub node_id: NodeId,
    /// SWIM (UDP) address.
    pub addr: SocketAddr,
    /// iroh endpoint id.
    pub endpoint_id: String,
    /// Bumped on every rejoin so a restarted node wins over its old self.
    pub bump: u16,
}

impl foca::Identity for SwimIdentity {
    type Addr = SocketAddr;

    fn renew(&self) -> Option<Self> {
        Some(SwimIdentity { bump: self.bump.wrapping_add(1), ..self.clone() })
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        // Wrapping comparison: the more recent bump wins.
        self.bump.wrapping_sub(adversary.bump) < u16::MAX / 2 && self.bump != adversary.bump
    }
}

/// A membership change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member is alive.
    Up(SwimIdentity),
    /// A member was declared down.
    Down(SwimIdentity),
}

/// foca's LAN profile tuned for small pools on a LAN or loopback.
pub fn tuned_config(cluster_size: u32) -> Config {
    let mut c = Config::new_lan(NonZeroU32::new(cluster_size.max(1)).unwrap_or(NonZeroU32::MIN));
    c.probe_period = Duration::from_millis(300);
    c.probe_rtt = Duration::from_millis(100);
    c.suspect_to_down_after = Duration::from_millis(900);
    c.periodic_gossip = Some(PeriodicParams {
        frequency: Duration::from_millis(100),
        num_members: NonZeroUsize::new(3).unwrap_or(NonZeroUsize::MIN),
    });
    c.periodic_announce = Some(PeriodicParams {
        frequency: Duration::from_secs(2),
        num_members: NonZeroUsize::new(1).unwrap_or(NonZeroUsize::MIN),
    });
    c
}

struct Due(Instant, Timer<SwimIdentity>);

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other.0.cmp(&self.0) // earliest first in a max-heap
    }
}

/// A running SWIM participant; dropping it leaves the cluster abruptly (like a crash).
#[derive(Debug)]
pub struct Swim {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Swim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Joins (or starts) a cluster: binds nothing itself; uses `socket`, announces to `seeds`.
pub fn spawn(
    identity: SwimIdentity,
    socket: UdpSocket,
    seeds: Vec<SocketAddr>,
    cluster_size: u32,
    seed_rng: u64,
) -> (Swim, mpsc::UnboundedReceiver<MembershipEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(identity, socket, seeds, cluster_size, seed_rng, tx));
    (Swim { task }, rx)
}

async fn run(
    identity: SwimIdentity,
    socket: UdpSocket,
    seeds: Vec<SocketAddr>,
    cluster_size: u32,
    seed_rng: u64,
    events: mpsc::UnboundedSender<MembershipEvent>,
) {
    let mut foca = Foca::new(
        identity.clone(),
        tuned_config(cluster_size),
        StdRng::seed_from_u64(seed_rng),
        PostcardCodec,
    );
    let mut rt = AccumulatingRuntime::new();
    let mut timers: BinaryHeap<Due> = BinaryHeap::new();
    let seed_ids: Vec<SwimIdentity> = seeds
        .iter()
        .filter(|a| **a != identity.addr)
        .map(|&addr| SwimIdentity { node_id: NodeId(0), addr, endpoint_id: String::new(), bump: 0 })
        .collect();
    for s in &seed_ids {
        let _ = foca.announce(s.clone(), &mut rt);
    }
    let mut buf = vec![0u8; 2048];
    let mut reannounce = tokio::time::interval(Duration::from_secs(1));
    loop {
        // Shuttle what foca asked for.
        while let Some((dst, data)) = rt.to_send() {
            let _ = socket.send_to(&data, dst.addr).await;
        }
        while let Some((after, timer)) = rt.to_schedule() {
            timers.push(Due(Instant::now() + after, timer));
        }
        while let Some(n) = rt.to_notify() {
            let ev = match n {
                OwnedNotification::MemberUp(id) => Some(MembershipEvent::Up(id)),
                OwnedNotification::MemberDown(id) => Some(MembershipEvent::Down(id)),
                _ => None,
            };
            if let Some(ev) = ev
                && events.send(ev).is_err()
            {
                return;
            }
        }
        let next_timer = timers.peek().map(|d| d.0);
        tokio::select! {
            recv = socket.recv_from(&mut buf) => {
                if let Ok((n, _)) = recv {
                    let _ = foca.handle_data(&buf[..n], &mut rt);
                }
            }
            _ = async { match next_timer { Some(t) => tokio::time::sleep_until(t).await, None => std::future::pending().await } } => {
                let now = Instant::now();
                while timers.peek().is_some_and(|d| d.0 <= now) {
                    if let Some(Due(_, timer)) = timers.pop() {
                        let _ = foca.handle_timer(timer, &mut rt);
                    }
                }
            }
            _ = reannounce.tick() => {
                // Alone or cut off (a false "down" after a pause): announce to the seeds.
                if foca.num_members() == 0 {
                    for s in &seed_ids {
                        let _ = foca.announce(s.clone(), &mut rt);
                    }
                }
            }
        }
    }
}
