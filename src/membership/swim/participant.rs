//! The SWIM participant's loop, on the thread [`super::spawn`] gives it: foca, the socket,
//! the timers foca asks for, the suspicion bookkeeping and the once-a-second housekeeping.
//!
//! Inbound before timers: when the thread wakes late (its host was busy) with both a
//! datagram and a timer due, every datagram already waiting is handed to foca before any
//! timer, so a late timer never judges a member on stale evidence (its ack or refutation
//! sitting unread in the socket).
//!
//! A member addressed by its relay ([`SwimAddr::Relayed`]) gets its datagrams through the
//! carrier ([`CarrierLink`], `crate::membership::carrier`), whose inbox is read like the socket.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use foca::{AccumulatingRuntime, Foca, Member, State, Timer};
use iroh::SecretKey;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{
    Carried, CarrierLink, MembershipEvent, RosterCodec, RosterHandle, SwimAddr, SwimConfig,
    SwimIdentity, auth, on_roster, seal, tuned_config_for, unseal, wall_us,
};
use crate::membership::auth::{Reject, RejectRecord, ReplayGuard, StampClock};
use crate::membership::suspicion::{membership_event, stale_suspicions, suspicion_changes};
use crate::wire::NodeId;

/// The most waiting datagrams handed to foca before the timers that came due with them
/// (a flood cannot hold the timers back for longer).
const INBOUND_BEFORE_TIMERS: usize = 64;

type SwimFoca = Foca<SwimIdentity, RosterCodec, StdRng, foca::NoCustomBroadcast>;

/// The consumer of the participant's events is gone: the participant stops.
struct Gone;

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

/// The next carried datagram, or never (no carrier, or its inbox closed).
async fn recv_carried(carried: &mut Option<mpsc::Receiver<Carried>>) -> Option<Carried> {
    match carried.as_mut() {
        Some(inbox) => match inbox.recv().await {
            Some(got) => Some(got),
            None => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

/// One running participant. See the module docs.
pub(super) struct Participant {
    foca: SwimFoca,
    own_addr: SwimAddr,
    key: SecretKey,
    roster: RosterHandle,
    socket: UdpSocket,
    /// Where relayed members' datagrams go (none: nowhere).
    outbox: Option<mpsc::UnboundedSender<(SwimAddr, Vec<u8>)>>,
    /// Where they come from (taken by [`Participant::run`]).
    carried: Option<mpsc::Receiver<Carried>>,
    events: mpsc::UnboundedSender<MembershipEvent>,
    guard: ReplayGuard,
    stamps: StampClock,
    rt: AccumulatingRuntime<SwimIdentity>,
    timers: BinaryHeap<Due>,
    /// The seeds, as identities foca can announce to (only their address is known).
    seed_ids: Vec<SwimIdentity>,
    /// The suspects reported so far.
    suspects: HashSet<SwimIdentity>,
    /// When each suspect was first seen by the housekeeping.
    suspect_since: HashMap<SwimIdentity, Instant>,
    /// How long a suspicion may last before the housekeeping declares it down.
    stale_after: Duration,
    buf: Vec<u8>,
}

impl Participant {
    /// A participant of `config` on `socket`, announcing to its seeds.
    pub(super) fn new(
        config: SwimConfig,
        socket: UdpSocket,
        carrier: Option<CarrierLink>,
        events: mpsc::UnboundedSender<MembershipEvent>,
    ) -> Participant {
        let SwimConfig { identity, key, roster, seeds, cluster_size, max_rtt, seed_rng } = config;
        let tuned = tuned_config_for(cluster_size, max_rtt);
        let stale_after = tuned.suspect_to_down_after * 3;
        let own_addr = identity.addr.clone();
        let foca = Foca::new(
            identity,
            tuned,
            StdRng::seed_from_u64(seed_rng),
            RosterCodec(roster.clone()),
        );
        let mut participant = Participant {
            foca,
            own_addr,
            key,
            roster,
            socket,
            outbox: carrier.as_ref().map(|c| c.outbox.clone()),
            carried: carrier.map(|c| c.inbox),
            events,
            guard: ReplayGuard::new(),
            stamps: StampClock::default(),
            rt: AccumulatingRuntime::new(),
            timers: BinaryHeap::new(),
            seed_ids: Vec::new(),
            suspects: HashSet::new(),
            suspect_since: HashMap::new(),
            stale_after,
            buf: vec![0u8; 2048],
        };
        for seed in seeds {
            participant.seed(seed);
        }
        participant
    }

    /// Adds `addr` to the seeds (not its own, nor one it has) and announces to it.
    fn seed(&mut self, addr: SwimAddr) {
        if addr == self.own_addr || self.seed_ids.iter().any(|s| s.addr == addr) {
            return;
        }
        let id = SwimIdentity { node_id: NodeId(0), addr, endpoint_id: String::new(), bump: 0 };
        let _ = self.foca.announce(id.clone(), &mut self.rt);
        self.seed_ids.push(id);
    }

    /// Runs until the consumer of its events is gone (or the caller drops the future).
    pub(super) async fn run(&mut self, mut more_seeds: mpsc::UnboundedReceiver<SwimAddr>) {
        let mut reannounce = tokio::time::interval(Duration::from_secs(1));
        let roster = self.roster.clone();
        // The carrier's inbox is read beside the socket; without one, never.
        let mut carried = self.carried.take();
        loop {
            if self.flush().await.is_err() {
                return;
            }
            let next_timer = self.timers.peek().map(|d| d.0);
            let step = tokio::select! {
                recv = self.socket.recv_from(&mut self.buf) => match recv {
                    Ok((n, from)) => {
                        let data = self.buf[..n].to_vec();
                        self.datagram(&data, from.to_string())
                    }
                    Err(_) => Ok(()),
                },
                Some((data, from)) = recv_carried(&mut carried) => self.datagram(&data, from),
                () = async {
                    match next_timer {
                        Some(t) => tokio::time::sleep_until(t).await,
                        None => std::future::pending().await,
                    }
                } => self.timers_due(&mut carried),
                () = roster.changed.notified() => {
                    self.guard.retain(&roster.roster());
                    for s in self.seed_ids.clone() {
                        let _ = self.foca.announce(s, &mut self.rt);
                    }
                    Ok(())
                }
                _ = reannounce.tick() => {
                    self.housekeeping();
                    Ok(())
                }
                Some(seed) = more_seeds.recv() => {
                    self.seed(seed);
                    Ok(())
                }
            };
            if step.is_err() {
                return;
            }
        }
    }

    /// Sends what foca asked to send, schedules its timers and reports its notifications
    /// and the suspicions read off its member states.
    async fn flush(&mut self) -> Result<(), Gone> {
        while let Some((dst, data)) = self.rt.to_send() {
            let sealed = seal(&self.key, self.stamps.next(wall_us()), &data);
            match (&dst.addr, &self.outbox) {
                (SwimAddr::Udp(addr), _) => {
                    let _ = self.socket.send_to(&sealed, addr).await;
                }
                (relayed, Some(outbox)) => {
                    let _ = outbox.send((relayed.clone(), sealed));
                }
                (SwimAddr::Relayed { .. }, None) => {}
            }
        }
        while let Some((after, timer)) = self.rt.to_schedule() {
            self.timers.push(Due(Instant::now() + after, timer));
        }
        while let Some(n) = self.rt.to_notify() {
            let foca = &self.foca;
            let ev = membership_event(n, &mut self.suspects, |id| {
                foca.iter_members().any(|m| m.id() == id)
            });
            // Only members of the current roster are reported (it may have been replaced).
            if let Some(ev) = ev.filter(|ev| on_roster(&self.roster, ev)) {
                self.report(ev)?;
            }
        }
        // foca notifies no suspicion: it is read off its member states. A suspect member
        // that is active and alive again refuted the suspicion.
        let states: Vec<(SwimIdentity, State)> =
            self.foca.iter_members().map(|m| (m.id().clone(), m.state())).collect();
        for ev in suspicion_changes(&states, &mut self.suspects) {
            if on_roster(&self.roster, &ev) {
                self.report(ev)?;
            }
        }
        Ok(())
    }

    fn report(&self, ev: MembershipEvent) -> Result<(), Gone> {
        self.events.send(ev).map_err(|_| Gone)
    }

    /// Hands `data` (from `from`: a socket address, or `iroh:<endpoint id>` for a carried
    /// datagram) to foca if it is sealed by a member; counts (and perhaps reports) a
    /// refusal otherwise.
    fn datagram(&mut self, data: &[u8], from: String) -> Result<(), Gone> {
        let refused = match unseal(data, &self.roster, &mut self.guard) {
            Ok((signer, payload)) => {
                self.roster.lock().signer = Some(signer);
                let _ = self.foca.handle_data(payload, &mut self.rt);
                let mut shared = self.roster.lock();
                shared.signer = None;
                std::mem::take(&mut shared.mismatch)
                    .then_some((Reject::IdentityMismatch, Some(signer)))
            }
            Err(refusal) => Some(refusal),
        };
        let Some((reason, signer)) = refused else { return Ok(()) };
        let record = RejectRecord { reason, from, signer: signer.as_ref().map(auth::key_hex) };
        match self.roster.record(record) {
            Some(record) => self.report(MembershipEvent::Rejected(record)),
            None => Ok(()),
        }
    }

    /// Fires the timers that are due, after the datagrams already waiting (module docs).
    fn timers_due(&mut self, carried: &mut Option<mpsc::Receiver<Carried>>) -> Result<(), Gone> {
        for _ in 0..INBOUND_BEFORE_TIMERS {
            match self.socket.try_recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    let data = self.buf[..n].to_vec();
                    self.datagram(&data, from.to_string())?;
                }
                Err(_) => break,
            }
        }
        for _ in 0..INBOUND_BEFORE_TIMERS {
            match carried.as_mut().map(mpsc::Receiver::try_recv) {
                Some(Ok((data, from))) => self.datagram(&data, from)?,
                _ => break,
            }
        }
        let now = Instant::now();
        while self.timers.peek().is_some_and(|d| d.0 <= now) {
            if let Some(Due(_, timer)) = self.timers.pop() {
                let _ = self.foca.handle_timer(timer, &mut self.rt);
            }
        }
        Ok(())
    }

    /// Once a second: declares down the suspicions that outlived foca's own timeout (see
    /// `stale_suspicions`), and announces to every seed that is not an active member
    /// (alone, cut off by a false "down" after a pause, or refused while one side had no
    /// roster yet).
    fn housekeeping(&mut self) {
        let members: Vec<(SwimIdentity, State, foca::Incarnation)> = self
            .foca
            .iter_members()
            .map(|m| (m.id().clone(), m.state(), m.incarnation()))
            .collect();
        let stale =
            stale_suspicions(&members, &mut self.suspect_since, Instant::now(), self.stale_after);
        if !stale.is_empty() {
            let stale: Vec<Member<SwimIdentity>> = stale;
            let _ = self.foca.apply_many(stale.into_iter(), true, &mut self.rt);
        }
        let missing: Vec<SwimIdentity> = self
            .seed_ids
            .iter()
            .filter(|s| !self.foca.iter_members().any(|m| m.id().addr == s.addr))
            .cloned()
            .collect();
        for s in missing {
            let _ = self.foca.announce(s, &mut self.rt);
        }
    }
}
