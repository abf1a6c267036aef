//! SWIM membership over UDP: foca (itself sans-IO) driven by a small tokio task that owns
//! the socket, the timers and the loop, and reports members going up, suspect and down
//! (suspicion is read off foca's member states, which it does not notify).
//!
//! The identity carries the node id, its SWIM address, its iroh endpoint id and a bump
//! counter, so a restarted node wins over its old self. The configuration is foca's LAN
//! profile tuned for loopback and LAN pools (failure detection in about 1.5 s), and the
//! node re-announces itself to its seeds whenever it finds itself alone or cut off, so a
//! paused member rejoins. A suspicion foca stopped timing out (its timers are dropped when
//! its own instance is declared down) is declared down here after a grace, so a member
//! behind a healed partition hears it and rejoins.
//!
//! Membership is authenticated ([`super::auth`]): every datagram is sealed with the
//! sender's iroh key, and a datagram is handed to foca only if its signer is on the
//! participant's [`RosterHandle`], the signature verifies, its stamp is fresh, and the
//! foca header names the signer's own (node id, endpoint id). Everything else is counted
//! by reason and reported as [`MembershipEvent::Rejected`] (logarithmically, so a flood
//! cannot flood the consumer); it never reaches foca, so it never changes who is up.
#![allow(clippy::disallowed_methods)] // the driver owns the clock

use std::collections::{BinaryHeap, HashSet};
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Buf;
use foca::{
    AccumulatingRuntime, Codec, Config, Foca, Header, Member, PeriodicParams, PostcardCodec, State,
    Timer,
};
use iroh::{PublicKey, SecretKey, Signature};
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::auth::{
    self, Reject, RejectCounts, RejectRecord, ReplayGuard, Roster, SIGNATURE_BYTES, StampClock,
};
pub use super::identity::{MembershipEvent, SwimIdentity};
use super::suspicion::{membership_event, stale_suspicions, suspicion_changes};
use crate::wire::NodeId;

/// The members a participant accepts, shared between its SWIM task (which reads it on
/// every datagram) and its owner (which may replace it, e.g. when the orchestrator names
/// the pool), with the refusal counters.
#[derive(Debug, Clone, Default)]
pub struct RosterHandle {
    shared: Arc<Mutex<Shared>>,
    /// Raised when the roster is replaced: the SWIM task announces to its seeds again
    /// (they may have refused it while it was not on their roster yet).
    changed: Arc<tokio::sync::Notify>,
}

#[derive(Debug, Default)]
struct Shared {
    roster: Roster,
    rejects: RejectCounts,
    /// The verified signer of the datagram being decoded.
    signer: Option<[u8; 32]>,
    /// Set by the codec when the datagram names a member its signer may not speak as.
    mismatch: bool,
}

impl RosterHandle {
    /// A handle holding `roster`.
    pub fn new(roster: Roster) -> RosterHandle {
        RosterHandle {
            shared: Arc::new(Mutex::new(Shared { roster, ..Shared::default() })),
            changed: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` (an endpoint's public key) is a member of the roster.
    pub fn is_member(&self, key: &[u8; 32]) -> bool {
        self.lock().roster.node_of(key).is_some()
    }

    /// Replaces the roster; the participant announces itself to its seeds again.
    pub fn set(&self, roster: Roster) {
        self.lock().roster = roster;
        self.changed.notify_one();
    }

    /// Sets the roster only if none is set yet (an observer may seed a node that no
    /// orchestrator named a pool to, never replace the orchestrator's); `true` if it did.
    pub fn set_if_empty(&self, roster: Roster) -> bool {
        let mut shared = self.lock();
        if !shared.roster.is_empty() || roster.is_empty() {
            return false;
        }
        shared.roster = roster;
        drop(shared);
        self.changed.notify_one();
        true
    }

    /// The current roster.
    pub fn roster(&self) -> Roster {
        self.lock().roster.clone()
    }

    /// Every refusal so far, by reason, and the last few.
    pub fn rejects(&self) -> RejectCounts {
        self.lock().rejects.clone()
    }

    /// Counts a refusal; returns it when worth reporting. Before any roster is set (a node
    /// that no orchestrator has named a pool to yet), refusals are counted, not reported:
    /// its peers' announces are expected to be refused until then.
    fn record(&self, record: RejectRecord) -> Option<RejectRecord> {
        let mut shared = self.lock();
        let report = shared.rejects.record(record.clone());
        (report && !shared.roster.is_empty()).then_some(record)
    }
}

/// foca's postcard codec, plus the check that the header's sender is the datagram's
/// verified signer and that every member named in it is on the roster.
struct RosterCodec(RosterHandle);

#[derive(Debug, thiserror::Error)]
enum CodecError {
    #[error("decode: {0}")]
    Decode(String),
    #[error("encode: {0}")]
    Encode(String),
    #[error("identity_mismatch")]
    Mismatch,
}

impl RosterCodec {
    fn mismatch(&self) -> CodecError {
        self.0.lock().mismatch = true;
        CodecError::Mismatch
    }
}

impl Codec<SwimIdentity> for RosterCodec {
    type Error = CodecError;

    fn encode_header(
        &mut self,
        header: &Header<SwimIdentity>,
        buf: impl bytes::BufMut,
    ) -> Result<(), CodecError> {
        PostcardCodec.encode_header(header, buf).map_err(|e| CodecError::Encode(e.to_string()))
    }

    fn decode_header(&mut self, buf: impl Buf) -> Result<Header<SwimIdentity>, CodecError> {
        let header: Header<SwimIdentity> =
            PostcardCodec.decode_header(buf).map_err(|e| CodecError::Decode(e.to_string()))?;
        let ok = {
            let shared = self.0.lock();
            let src = &header.src;
            shared.signer.is_some_and(|signer| {
                auth::parse_key_hex(&src.endpoint_id) == Some(signer)
                    && shared.roster.node_of(&signer) == Some(src.node_id)
            })
        };
        if ok { Ok(header) } else { Err(self.mismatch()) }
    }

    fn encode_member(
        &mut self,
        member: &Member<SwimIdentity>,
        buf: impl bytes::BufMut,
    ) -> Result<(), CodecError> {
        PostcardCodec.encode_member(member, buf).map_err(|e| CodecError::Encode(e.to_string()))
    }

    fn decode_member(&mut self, buf: impl Buf) -> Result<Member<SwimIdentity>, CodecError> {
        let member: Member<SwimIdentity> =
            PostcardCodec.decode_member(buf).map_err(|e| CodecError::Decode(e.to_string()))?;
        let id = member.id();
        let ok = self.0.lock().roster.admits(id.node_id, &id.endpoint_id);
        if ok { Ok(member) } else { Err(self.mismatch()) }
    }
}

/// The roster of the members an orchestrator named (in its `Hello`).
pub fn roster_of(members: &[crate::control::PoolMember]) -> Roster {
    Roster::from_pairs(members.iter().map(|m| (m.node_id, m.endpoint_id.as_str())))
}

/// The pool's members as the orchestrator names them in `Hello`, itself included.
pub fn pool_members(
    pool: &crate::planner::Pool,
    orchestrator_endpoint: &str,
) -> Vec<crate::control::PoolMember> {
    pool.members(orchestrator_endpoint)
        .into_iter()
        .map(|(node_id, endpoint_id)| crate::control::PoolMember { node_id, endpoint_id })
        .collect()
}

/// This host's wall clock in microseconds since the Unix epoch (the stamps' clock).
fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Whether a membership event is about a member of the current roster (rejections are
/// always reported).
fn on_roster(roster: &RosterHandle, ev: &MembershipEvent) -> bool {
    match ev {
        MembershipEvent::Up(id) | MembershipEvent::Suspect(id) | MembershipEvent::Down(id) => {
            roster.lock().roster.admits(id.node_id, &id.endpoint_id)
        }
        MembershipEvent::Rejected(_) => true,
    }
}

/// Seals one foca datagram with `key`.
pub fn seal(key: &SecretKey, stamp: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = auth::unsigned_envelope(key.public().as_bytes(), stamp, payload);
    let sig = key.sign(&out);
    out.extend_from_slice(&sig.to_bytes());
    out
}

/// Why a datagram was refused, with the signer it claimed (if it had an envelope).
type Refusal = (Reject, Option<[u8; 32]>);

/// Checks one datagram's envelope against the roster, the signature and the replay guard;
/// returns the verified signer and the foca payload.
fn unseal<'a>(
    datagram: &'a [u8],
    roster: &RosterHandle,
    guard: &mut ReplayGuard,
) -> Result<([u8; 32], &'a [u8]), Refusal> {
    let env = auth::open(datagram).map_err(|r| (r, None))?;
    let fail = |r| (r, Some(env.signer));
    if roster.lock().roster.node_of(&env.signer).is_none() {
        return Err(fail(Reject::UnknownSigner));
    }
    let key = PublicKey::from_bytes(&env.signer).map_err(|_| fail(Reject::BadSignature))?;
    let mut sig = [0u8; SIGNATURE_BYTES];
    sig.copy_from_slice(&env.signature);
    key.verify(env.signed, &Signature::from_bytes(&sig)).map_err(|_| fail(Reject::BadSignature))?;
    guard.check(&env.signer, env.stamp, wall_us()).map_err(fail)?;
    Ok((env.signer, env.payload))
}

/// foca's LAN profile tuned for small pools on a LAN or loopback: a member that stops
/// answering is probed within a period, suspected at the end of it (direct and indirect
/// probes unanswered) and declared down [`SUSPECT_TO_DOWN`] later, well under a second in
/// all; a live member answers a probe within [`PROBE_RTT`] even on a host whose cores are
/// all busy (its SWIM task sleeps until a datagram comes, and the scheduler favours it).
pub fn tuned_config(cluster_size: u32) -> Config {
    let mut c = Config::new_lan(NonZeroU32::new(cluster_size.max(1)).unwrap_or(NonZeroU32::MIN));
    c.probe_period = PROBE_PERIOD;
    c.probe_rtt = PROBE_RTT;
    c.suspect_to_down_after = SUSPECT_TO_DOWN;
    c.periodic_gossip = Some(PeriodicParams {
        frequency: Duration::from_millis(100),
        num_members: NonZeroUsize::new(3).unwrap_or(NonZeroUsize::MIN),
    });
    c.periodic_announce = Some(PeriodicParams {
        frequency: Duration::from_secs(2),
        num_members: NonZeroUsize::new(1).unwrap_or(NonZeroUsize::MIN),
    });
    // Room for the envelope inside a 1400-byte datagram.
    c.max_packet_size =
        NonZeroUsize::new(1400 - auth::PREFIX_BYTES - SIGNATURE_BYTES).unwrap_or(NonZeroUsize::MIN);
    c
}

/// How often each member probes one other member.
pub const PROBE_PERIOD: Duration = Duration::from_millis(150);
/// How long a direct probe waits for its answer before indirect probes are sent.
pub const PROBE_RTT: Duration = Duration::from_millis(60);
/// How long a suspected member has to refute before it is declared down.
pub const SUSPECT_TO_DOWN: Duration = Duration::from_millis(300);

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

/// How a participant takes part: who it is, the key it signs with, whom it accepts.
#[derive(Debug, Clone)]
pub struct SwimConfig {
    /// Its identity (the endpoint id must be `key`'s).
    pub identity: SwimIdentity,
    /// The key every datagram is sealed with.
    pub key: SecretKey,
    /// The members accepted (may be replaced while running).
    pub roster: RosterHandle,
    /// Where to announce.
    pub seeds: Vec<SocketAddr>,
    /// Expected cluster size (tunes foca).
    pub cluster_size: u32,
    /// Seed of foca's random choices.
    pub seed_rng: u64,
}

/// Joins (or starts) a cluster: binds nothing itself; uses `socket`, announces to the
/// seeds.
pub fn spawn(
    config: SwimConfig,
    socket: UdpSocket,
) -> (Swim, mpsc::UnboundedReceiver<MembershipEvent>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(run(config, socket, tx));
    (Swim { task }, rx)
}

async fn run(
    config: SwimConfig,
    socket: UdpSocket,
    events: mpsc::UnboundedSender<MembershipEvent>,
) {
    let SwimConfig { identity, key, roster, seeds, cluster_size, seed_rng } = config;
    let mut foca = Foca::new(
        identity.clone(),
        tuned_config(cluster_size),
        StdRng::seed_from_u64(seed_rng),
        RosterCodec(roster.clone()),
    );
    let mut guard = ReplayGuard::new();
    let mut stamps = StampClock::default();
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
    let mut suspects: HashSet<SwimIdentity> = HashSet::new();
    let mut suspect_since = std::collections::HashMap::new();
    let stale_after = tuned_config(cluster_size).suspect_to_down_after * 3;
    let mut reannounce = tokio::time::interval(Duration::from_secs(1));
    loop {
        // Shuttle what foca asked for.
        while let Some((dst, data)) = rt.to_send() {
            let sealed = seal(&key, stamps.next(wall_us()), &data);
            let _ = socket.send_to(&sealed, dst.addr).await;
        }
        while let Some((after, timer)) = rt.to_schedule() {
            timers.push(Due(Instant::now() + after, timer));
        }
        while let Some(n) = rt.to_notify() {
            let ev =
                membership_event(n, &mut suspects, |id| foca.iter_members().any(|m| m.id() == id));
            // Only members of the current roster are reported (it may have been replaced).
            let ev = ev.filter(|ev| on_roster(&roster, ev));
            if let Some(ev) = ev
                && events.send(ev).is_err()
            {
                return;
            }
        }
        // foca notifies no suspicion: it is read off its member states. A suspect member
        // that is active and alive again refuted the suspicion.
        let states: Vec<(SwimIdentity, State)> =
            foca.iter_members().map(|m| (m.id().clone(), m.state())).collect();
        for ev in suspicion_changes(&states, &mut suspects) {
            if on_roster(&roster, &ev) && events.send(ev).is_err() {
                return;
            }
        }
        let next_timer = timers.peek().map(|d| d.0);
        tokio::select! {
            recv = socket.recv_from(&mut buf) => {
                if let Ok((n, from)) = recv {
                    let refused = match unseal(&buf[..n], &roster, &mut guard) {
                        Ok((signer, payload)) => {
                            roster.lock().signer = Some(signer);
                            let _ = foca.handle_data(payload, &mut rt);
                            let mut shared = roster.lock();
                            shared.signer = None;
                            std::mem::take(&mut shared.mismatch)
                                .then_some((Reject::IdentityMismatch, Some(signer)))
                        }
                        Err(refusal) => Some(refusal),
                    };
                    if let Some((reason, signer)) = refused {
                        let record = RejectRecord {
                            reason,
                            from: from.to_string(),
                            signer: signer.as_ref().map(auth::key_hex),
                        };
                        if let Some(record) = roster.record(record)
                            && events.send(MembershipEvent::Rejected(record)).is_err()
                        {
                            return;
                        }
                    }
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
            () = roster.changed.notified() => {
                guard.retain(&roster.roster());
                for s in &seed_ids {
                    let _ = foca.announce(s.clone(), &mut rt);
                }
            }
            _ = reannounce.tick() => {
                let stale = |m: &[_]| stale_suspicions(m, &mut suspect_since, Instant::now(), stale_after);
                housekeeping(&mut foca, &mut rt, &seed_ids, stale);
            }
        }
    }
}

type Participant = Foca<SwimIdentity, RosterCodec, StdRng, foca::NoCustomBroadcast>;

/// Once a second: declares down the suspicions `stale` picks from the members (identity,
/// state, incarnation), and announces to every seed that is not an active member (alone,
/// cut off by a false "down" after a pause, or refused while one side had no roster yet).
fn housekeeping(
    foca: &mut Participant,
    rt: &mut AccumulatingRuntime<SwimIdentity>,
    seed_ids: &[SwimIdentity],
    stale: impl FnOnce(&[(SwimIdentity, State, foca::Incarnation)]) -> Vec<Member<SwimIdentity>>,
) {
    let members: Vec<_> =
        foca.iter_members().map(|m| (m.id().clone(), m.state(), m.incarnation())).collect();
    let stale = stale(&members);
    if !stale.is_empty() {
        let _ = foca.apply_many(stale.into_iter(), true, &mut *rt);
    }
    let missing: Vec<SwimIdentity> = seed_ids
        .iter()
        .filter(|s| !foca.iter_members().any(|m| m.id().addr == s.addr))
        .cloned()
        .collect();
    for s in missing {
        let _ = foca.announce(s, &mut *rt);
    }
}
