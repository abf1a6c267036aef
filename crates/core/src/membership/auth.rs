//! SWIM datagram authentication (pure): the signed envelope around every foca datagram, the
//! roster of members a pool names, the replay guard and the rejection counters.
//!
//! A member is the pair (node id, endpoint id) that the pool file names; the endpoint id is
//! the public half of the member's iroh key. Every datagram travels as
//!
//! ```text
//! "SWA1" | signer (32 bytes) | stamp (u64 LE) | foca payload | ed25519 signature (64 bytes)
//! ```
//!
//! where the signature covers everything before it. A receiver accepts a datagram only if
//! the signer is on its roster, the signature verifies, the stamp is newer than every stamp
//! already accepted from that signer and within [`MAX_SKEW_US`] of the receiver's clock
//! (so a captured datagram cannot be replayed, not even to a receiver that restarted), and
//! the foca header inside names the signer's own (node id, endpoint id) as its sender. The
//! cryptography itself is the driver's (`swim.rs`); this module only frames and decides.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::wire::NodeId;

/// The envelope's magic bytes (also its version).
pub const MAGIC: [u8; 4] = *b"SWA1";
/// Bytes in front of the payload: magic, signer, stamp.
pub const PREFIX_BYTES: usize = 4 + 32 + 8;
/// Bytes of the trailing signature.
pub const SIGNATURE_BYTES: usize = 64;
/// How far a stamp may be from the receiver's clock, in microseconds (30 s): hosts of a
/// pool are expected to keep their clocks within that of each other.
pub const MAX_SKEW_US: u64 = 30_000_000;

/// Why a datagram was not accepted. Stable names (`as_str`) appear in reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reject {
    /// Not an envelope at all (no magic, or too short): e.g. a plain foca datagram.
    Unsigned,
    /// The signer is not a member of the roster.
    UnknownSigner,
    /// The signature does not verify.
    BadSignature,
    /// The stamp is not newer than one already accepted from the signer.
    Replayed,
    /// The stamp is too far from the receiver's clock.
    Stale,
    /// The foca header or an update names a member the signer may not speak as, or one
    /// that is not on the roster.
    IdentityMismatch,
}

impl Reject {
    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reject::Unsigned => "unsigned",
            Reject::UnknownSigner => "unknown_signer",
            Reject::BadSignature => "bad_signature",
            Reject::Replayed => "replayed",
            Reject::Stale => "stale",
            Reject::IdentityMismatch => "identity_mismatch",
        }
    }
}

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed envelope; nothing in it is trusted yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The claimed signer's public key.
    pub signer: [u8; 32],
    /// The sender's stamp (microseconds of its wall clock, strictly increasing).
    pub stamp: u64,
    /// The foca datagram inside.
    pub payload: &'a [u8],
    /// The bytes the signature covers.
    pub signed: &'a [u8],
    /// The signature.
    pub signature: [u8; 64],
}

/// Splits a datagram into its envelope parts; total (never panics).
pub fn open(datagram: &[u8]) -> Result<Envelope<'_>, Reject> {
    if datagram.len() < PREFIX_BYTES + SIGNATURE_BYTES || datagram[..4] != MAGIC {
        return Err(Reject::Unsigned);
    }
    let (signed, sig) = datagram.split_at(datagram.len() - SIGNATURE_BYTES);
    let mut signer = [0u8; 32];
    signer.copy_from_slice(&signed[4..36]);
    let mut stamp = [0u8; 8];
    stamp.copy_from_slice(&signed[36..44]);
    let mut signature = [0u8; 64];
    signature.copy_from_slice(sig);
    Ok(Envelope {
        signer,
        stamp: u64::from_le_bytes(stamp),
        payload: &signed[PREFIX_BYTES..],
        signed,
        signature,
    })
}

/// The bytes to sign for `payload`; the caller appends the signature over them.
pub fn unsigned_envelope(signer: &[u8; 32], stamp: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_BYTES + payload.len() + SIGNATURE_BYTES);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(signer);
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Lowercase hex of a public key: the endpoint id as pool files write it.
pub fn key_hex(key: &[u8; 32]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(64);
    for b in key {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    s
}

/// Parses 64 hex digits (either case) into a key.
pub fn parse_key_hex(s: &str) -> Option<[u8; 32]> {
    let bytes = s.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let nibble = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    let mut key = [0u8; 32];
    for (i, out) in key.iter_mut().enumerate() {
        *out = (nibble(bytes[2 * i])? << 4) | nibble(bytes[2 * i + 1])?;
    }
    Some(key)
}

/// The members a participant accepts datagrams from: (endpoint key -> node id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roster {
    members: BTreeMap<[u8; 32], NodeId>,
}

impl Roster {
    /// An empty roster: nothing is accepted until members are named.
    pub fn new() -> Roster {
        Roster::default()
    }

    /// A roster from (node id, endpoint id) pairs; entries whose endpoint id is not 64 hex
    /// digits are skipped (the pool file's own validation reports them).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (NodeId, &'a str)>) -> Roster {
        let members =
            pairs.into_iter().filter_map(|(n, e)| parse_key_hex(e).map(|k| (k, n))).collect();
        Roster { members }
    }

    /// The node id the roster gives the key, if it is a member.
    pub fn node_of(&self, key: &[u8; 32]) -> Option<NodeId> {
        self.members.get(key).copied()
    }

    /// Whether (node id, endpoint id) is a member.
    pub fn admits(&self, node_id: NodeId, endpoint_id: &str) -> bool {
        parse_key_hex(endpoint_id).and_then(|k| self.node_of(&k)) == Some(node_id)
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the roster names nobody.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// Rejects replayed and stale datagrams: per signer, only strictly newer stamps, and only
/// stamps within [`MAX_SKEW_US`] of the receiver's clock. Memory is bounded by the
/// roster (only roster members reach the guard).
#[derive(Debug, Default)]
pub struct ReplayGuard {
    last: HashMap<[u8; 32], u64>,
}

impl ReplayGuard {
    /// A guard that has accepted nothing.
    pub fn new() -> ReplayGuard {
        ReplayGuard::default()
    }

    /// Accepts `stamp` from `signer` at `now_us` (the receiver's wall clock, in
    /// microseconds) or says why not. Call only after the signature verified: an accepted
    /// stamp is remembered.
    pub fn check(&mut self, signer: &[u8; 32], stamp: u64, now_us: u64) -> Result<(), Reject> {
        if stamp.abs_diff(now_us) > MAX_SKEW_US {
            return Err(Reject::Stale);
        }
        if self.last.get(signer).is_some_and(|&last| stamp <= last) {
            return Err(Reject::Replayed);
        }
        self.last.insert(*signer, stamp);
        Ok(())
    }

    /// Forgets signers no longer on `roster`.
    pub fn retain(&mut self, roster: &Roster) {
        self.last.retain(|k, _| roster.node_of(k).is_some());
    }
}

/// The sender's stamps: its clock, made strictly increasing.
#[derive(Debug, Default)]
pub struct StampClock {
    last: u64,
}

impl StampClock {
    /// The stamp for a datagram sent at `now_us`.
    pub fn next(&mut self, now_us: u64) -> u64 {
        self.last = now_us.max(self.last.saturating_add(1));
        self.last
    }
}

/// Datagrams refused, by reason, and the last few senders refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectCounts {
    /// Count per reason.
    pub by_reason: BTreeMap<Reject, u64>,
    /// The most recent refusals (newest last), at most [`RejectCounts::KEEP`].
    pub recent: Vec<RejectRecord>,
}

/// One refused datagram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectRecord {
    /// Why.
    pub reason: Reject,
    /// The UDP source address.
    pub from: String,
    /// The key the datagram claimed to be signed with, if it had an envelope.
    pub signer: Option<String>,
}

impl RejectCounts {
    /// How many recent refusals are kept.
    pub const KEEP: usize = 16;

    /// Counts one refusal; returns whether it is worth reporting: the 1st, 2nd, 4th, 8th,
    /// ... of its reason, so a flood is reported a logarithmic number of times.
    pub fn record(&mut self, record: RejectRecord) -> bool {
        let count = self.by_reason.entry(record.reason).or_default();
        *count += 1;
        let report = count.is_power_of_two();
        self.recent.retain(|r| !(r.reason == record.reason && r.from == record.from));
        self.recent.push(record);
        if self.recent.len() > Self::KEEP {
            self.recent.remove(0);
        }
        report
    }

    /// Total refusals.
    pub fn total(&self) -> u64 {
        self.by_reason.values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 32] = [1; 32];

    #[test]
    fn an_envelope_round_trips_its_parts() {
        let mut d = unsigned_envelope(&A, 42, b"foca");
        d.extend_from_slice(&[9; 64]);
        let e = open(&d).unwrap();
        assert_eq!((e.signer, e.stamp, e.payload, e.signature), (A, 42, &b"foca"[..], [9; 64]));
        assert_eq!(e.signed, &d[..d.len() - 64]);
    }

    #[test]
    fn a_plain_or_short_datagram_is_unsigned() {
        assert_eq!(open(b"").unwrap_err(), Reject::Unsigned);
        assert_eq!(open(&[0u8; 200]).unwrap_err(), Reject::Unsigned);
        let mut d = unsigned_envelope(&A, 1, b"");
        d.extend_from_slice(&[0; 63]);
        assert_eq!(open(&d).unwrap_err(), Reject::Unsigned);
    }

    #[test]
    fn a_stamp_is_accepted_once_and_only_when_newer() {
        let mut g = ReplayGuard::new();
        let now = 100 * MAX_SKEW_US;
        assert_eq!(g.check(&A, now, now), Ok(()));
        assert_eq!(g.check(&A, now, now), Err(Reject::Replayed));
        assert_eq!(g.check(&A, now - 1, now), Err(Reject::Replayed));
        assert_eq!(g.check(&A, now + 1, now), Ok(()));
        assert_eq!(g.check(&[2; 32], now - 5, now), Ok(()), "signers are independent");
    }

    #[test]
    fn a_stamp_far_from_the_clock_is_stale_even_to_a_fresh_receiver() {
        let mut g = ReplayGuard::new();
        let now = 100 * MAX_SKEW_US;
        assert_eq!(g.check(&A, now - MAX_SKEW_US - 1, now), Err(Reject::Stale));
        assert_eq!(g.check(&A, now + MAX_SKEW_US + 1, now), Err(Reject::Stale));
        assert_eq!(g.check(&A, now - MAX_SKEW_US, now), Ok(()));
    }

    #[test]
    fn stamps_strictly_increase_even_when_the_clock_does_not() {
        let mut c = StampClock::default();
        assert_eq!(c.next(10), 10);
        assert_eq!(c.next(10), 11);
        assert_eq!(c.next(5), 12);
        assert_eq!(c.next(100), 100);
    }

    #[test]
    fn the_roster_admits_only_the_named_pairs() {
        let a = key_hex(&A);
        let r = Roster::from_pairs([(NodeId(1), a.as_str()), (NodeId(2), "not hex")]);
        assert_eq!(r.len(), 1);
        assert!(r.admits(NodeId(1), &a));
        assert!(r.admits(NodeId(1), &a.to_uppercase()));
        assert!(!r.admits(NodeId(2), &a), "a member's key with another node id");
        assert!(!r.admits(NodeId(1), &key_hex(&[2; 32])));
    }

    #[test]
    fn refusals_keep_counting_while_the_record_stays_bounded() {
        let mut c = RejectCounts::default();
        for i in 0..1000 {
            let rec = RejectRecord {
                reason: Reject::Unsigned,
                from: format!("127.0.0.1:{}", i % 40),
                signer: None,
            };
            let n: u64 = i + 1;
            assert_eq!(c.record(rec), n.is_power_of_two(), "refusal {n}");
        }
        assert_eq!(c.total(), 1000);
        assert_eq!(c.recent.len(), RejectCounts::KEEP);
    }

    #[test]
    fn key_hex_round_trips() {
        let k: [u8; 32] = std::array::from_fn(|i| (i * 37) as u8);
        assert_eq!(parse_key_hex(&key_hex(&k)), Some(k));
        assert_eq!(parse_key_hex("zz"), None);
    }
}
