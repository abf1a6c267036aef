//! SWIM membership over UDP (and, for members that expose no port, over QUIC datagrams
//! through their relay: [`crate::membership::carrier`]): foca (itself sans-IO) driven by a participant on a thread of
//! its own ([`participant`]) that owns the socket, the timers and the loop, and reports
//! members going up, suspect and down (suspicion is read off foca's member states, which it
//! does not notify). The thread keeps the failure detector off the process's busy runtime:
//! a healthy member answers its probes even while its data plane and every core are busy.
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

use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Buf;
use foca::{Codec, Config, Header, Member, PeriodicParams, PostcardCodec};
use iroh::{PublicKey, SecretKey, Signature};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::auth::{self, Reject, RejectCounts, RejectRecord, ReplayGuard, Roster, SIGNATURE_BYTES};
pub use super::identity::{BadSwimAddr, MembershipEvent, SwimAddr, SwimIdentity};
use participant::Participant;

mod participant;

/// A carried datagram for the participant: its bytes and who sent it
/// (`iroh:<endpoint id>`, the form refusals report).
pub type Carried = (Vec<u8>, String);

/// The participant's side of a carrier of relayed members' datagrams
/// (`crate::membership::carrier`): where it sends them and where theirs arrive.
#[derive(Debug)]
pub struct CarrierLink {
    /// Datagrams to send, with the member's address.
    pub outbox: mpsc::UnboundedSender<(SwimAddr, Vec<u8>)>,
    /// Datagrams received.
    pub inbox: mpsc::Receiver<Carried>,
}

/// The members a participant accepts, shared between its SWIM thread (which reads it on
/// every datagram) and its owner (which may replace it, e.g. when the orchestrator names
/// the pool), with the refusal counters.
#[derive(Debug, Clone, Default)]
pub struct RosterHandle {
    shared: Arc<Mutex<Shared>>,
    /// Raised when the roster is replaced: the SWIM thread announces to its seeds again
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
/// all busy (its SWIM thread sleeps until a datagram comes, and the scheduler favours it).
pub fn tuned_config(cluster_size: u32) -> Config {
    tuned_config_for(cluster_size, Duration::ZERO)
}

/// [`tuned_config`] for members up to `max_rtt` apart (wide-area links, relays): the probe
/// waits one and a half round trips for its answer, a period holds two and a half of those
/// (the indirect probes' longer path fits in it) and a suspect has two periods to refute.
/// Up to 40 ms it is the LAN profile itself.
pub fn tuned_config_for(cluster_size: u32, max_rtt: Duration) -> Config {
    let mut c = Config::new_lan(NonZeroU32::new(cluster_size.max(1)).unwrap_or(NonZeroU32::MIN));
    c.probe_rtt = PROBE_RTT.max(max_rtt * 3 / 2);
    c.probe_period = PROBE_PERIOD.max(c.probe_rtt * 5 / 2);
    c.suspect_to_down_after = SUSPECT_TO_DOWN.max(c.probe_period * 2);
    c.periodic_gossip = Some(PeriodicParams {
        frequency: Duration::from_millis(100),
        num_members: NonZeroUsize::new(3).unwrap_or(NonZeroUsize::MIN),
    });
    c.periodic_announce = Some(PeriodicParams {
        frequency: Duration::from_secs(2),
        num_members: NonZeroUsize::new(1).unwrap_or(NonZeroUsize::MIN),
    });
    // Room for the envelope inside a datagram that also fits a QUIC datagram frame on a
    // minimum-size (1200-byte) QUIC packet, for members carried through a relay.
    c.max_packet_size = NonZeroUsize::new(SEALED_MAX - auth::PREFIX_BYTES - SIGNATURE_BYTES)
        .unwrap_or(NonZeroUsize::MIN);
    c
}

/// The largest sealed datagram a participant sends (foca's packets are sized to fit).
pub const SEALED_MAX: usize = 1100;

/// How often each member probes one other member.
pub const PROBE_PERIOD: Duration = Duration::from_millis(150);
/// How long a direct probe waits for its answer before indirect probes are sent.
pub const PROBE_RTT: Duration = Duration::from_millis(60);
/// How long a suspected member has to refute before it is declared down.
pub const SUSPECT_TO_DOWN: Duration = Duration::from_millis(300);

/// A running SWIM participant on its own thread; dropping it leaves the cluster abruptly
/// (like a crash).
///
/// The participant never shares a thread with the rest of its process: its thread sleeps
/// until a datagram or one of its timers is due, so the scheduler wakes it promptly even
/// when every core is busy with compute and the process's own runtime is busy with the
/// data plane. A probe is answered in milliseconds, not when a busy loop gets to it.
#[derive(Debug)]
pub struct Swim {
    /// Dropped (closed) to stop the participant.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Seeds to announce to, added while running.
    seeds: mpsc::UnboundedSender<SwimAddr>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Swim {
    /// Announces to `seed` as well (and again whenever it is not an active member).
    pub fn join(&self, seed: SwimAddr) {
        let _ = self.seeds.send(seed);
    }
}

impl Drop for Swim {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
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
    /// Where to announce (more may be added with [`Swim::join`]).
    pub seeds: Vec<SwimAddr>,
    /// Expected cluster size (tunes foca).
    pub cluster_size: u32,
    /// The longest round trip expected between members (zero: a LAN; see
    /// [`tuned_config_for`]).
    pub max_rtt: Duration,
    /// Seed of foca's random choices.
    pub seed_rng: u64,
}

/// Joins (or starts) a cluster on `socket` (bound by the caller), announcing to the seeds,
/// on a thread of its own with its own single-threaded runtime. Datagrams for relayed
/// members go through `carrier` (none: they are dropped). Fails only when the socket
/// cannot be handed over or the thread cannot start.
pub fn spawn(
    config: SwimConfig,
    socket: UdpSocket,
    carrier: Option<CarrierLink>,
) -> std::io::Result<(Swim, mpsc::UnboundedReceiver<MembershipEvent>)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let (seeds, more_seeds) = mpsc::unbounded_channel();
    let socket = socket.into_std()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let thread = std::thread::Builder::new().name("swactor-swim".into()).spawn(move || {
        runtime.block_on(async move {
            let Ok(socket) = UdpSocket::from_std(socket) else { return };
            let mut participant = Participant::new(config, socket, carrier, tx);
            tokio::select! {
                () = participant.run(more_seeds) => {}
                _ = stopped => {}
            }
        });
    })?;
    Ok((Swim { stop: Some(stop), seeds, thread: Some(thread) }, rx))
}
