//! Suspicion bookkeeping of the SWIM driver (`swim.rs`): the events read off foca's member
//! states and notifications, and the suspicions foca stopped timing out. Plain functions of
//! their inputs (time is passed in), so they are tested without sockets or clocks.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use foca::{Member, OwnedNotification, State};
use tokio::time::Instant;

use super::identity::{MembershipEvent, SwimIdentity};
use crate::wire::NodeId;

/// Compares foca's suspect members with `suspects` (the ones reported so far): a newly
/// suspect member gives `Suspect`, a formerly suspect one that is alive again gives `Up`
/// (one that went down was reported by foca's own `MemberDown`). Updates `suspects`.
pub(super) fn suspicion_changes(
    members: &[(SwimIdentity, State)],
    suspects: &mut HashSet<SwimIdentity>,
) -> Vec<MembershipEvent> {
    let now: HashSet<SwimIdentity> =
        members.iter().filter(|(_, s)| *s == State::Suspect).map(|(id, _)| id.clone()).collect();
    let mut out: Vec<MembershipEvent> =
        now.difference(suspects).cloned().map(MembershipEvent::Suspect).collect();
    let alive = members.iter().filter(|(id, s)| *s == State::Alive && suspects.contains(id));
    out.extend(alive.map(|(id, _)| MembershipEvent::Up(id.clone())));
    *suspects = now;
    out.sort_by_key(|ev| match ev {
        MembershipEvent::Up(id) | MembershipEvent::Suspect(id) | MembershipEvent::Down(id) => {
            id.node_id
        }
        MembershipEvent::Rejected(_) => NodeId(0),
    });
    out
}

/// The suspects whose suspicion outlived foca's own timeout by `grace` (`since` holds when
/// each was first seen suspect; entries of members no longer suspect are dropped): each
/// comes back as the `Down` update foca's lost timer would have applied.
///
/// foca ignores every timer it set before its instance was declared down or went idle, so
/// a member suspected before that stays suspect for good while it answers probes (an ack
/// refutes nothing) and never hears that it is suspected (a healed partition). Declaring
/// it down makes it hear, renew its identity and rejoin.
pub(super) fn stale_suspicions(
    members: &[(SwimIdentity, State, foca::Incarnation)],
    since: &mut HashMap<SwimIdentity, Instant>,
    now: Instant,
    grace: Duration,
) -> Vec<Member<SwimIdentity>> {
    since.retain(|id, _| members.iter().any(|(m, s, _)| m == id && *s == State::Suspect));
    let mut stale = Vec::new();
    for (id, state, incarnation) in members {
        if *state != State::Suspect {
            continue;
        }
        let first = *since.entry(id.clone()).or_insert(now);
        if now.saturating_duration_since(first) >= grace {
            stale.push(Member::new(id.clone(), *incarnation, State::Down));
            since.remove(id);
        }
    }
    stale
}

/// The membership event of one foca notification, if any (`suspects` are the members
/// reported suspect so far).
pub(super) fn membership_event(
    n: OwnedNotification<SwimIdentity>,
    suspects: &mut HashSet<SwimIdentity>,
    is_active: impl Fn(&SwimIdentity) -> bool,
) -> Option<MembershipEvent> {
    match n {
        OwnedNotification::MemberUp(id) => Some(MembershipEvent::Up(id)),
        OwnedNotification::MemberDown(id) => {
            suspects.remove(&id);
            Some(MembershipEvent::Down(id))
        }
        // A member renewed its identity (a suspect refuting after it saw itself declared
        // down, a restart): foca notifies no `MemberUp` when both the old and the new
        // identity are active, so the new one is reported up here.
        OwnedNotification::Rename(old, new) => {
            let was_suspect = suspects.remove(&old);
            (was_suspect && is_active(&new)).then_some(MembershipEvent::Up(new))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> SwimIdentity {
        SwimIdentity {
            node_id: NodeId(n),
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 7000 + n as u16)).into(),
            endpoint_id: format!("{n:064x}"),
            bump: 0,
        }
    }

    #[test]
    fn a_suspicion_older_than_the_grace_becomes_a_down_update_and_a_refuted_one_is_forgotten() {
        let mut since = std::collections::HashMap::new();
        #[allow(clippy::disallowed_methods)] // a test picks its own origin
        let t0 = Instant::now();
        let grace = Duration::from_secs(3);
        let suspect = [(id(1), State::Alive, 0), (id(2), State::Suspect, 4)];
        assert!(stale_suspicions(&suspect, &mut since, t0, grace).is_empty(), "just suspected");
        let later = t0 + Duration::from_secs(2);
        assert!(stale_suspicions(&suspect, &mut since, later, grace).is_empty(), "within grace");
        let stale = stale_suspicions(&suspect, &mut since, t0 + grace, grace);
        assert_eq!(stale, [Member::new(id(2), 4, State::Down)], "the lost timer's update");
        // A member that refuted in between starts over when it is suspected again.
        let mut since = std::collections::HashMap::new();
        stale_suspicions(&suspect, &mut since, t0, grace);
        let refuted = [(id(1), State::Alive, 0), (id(2), State::Alive, 5)];
        assert!(stale_suspicions(&refuted, &mut since, later, grace).is_empty());
        assert!(since.is_empty());
        assert!(stale_suspicions(&suspect, &mut since, t0 + grace, grace).is_empty());
    }

    #[test]
    fn suspicion_is_reported_once_and_a_refutation_reports_the_member_up_again() {
        let mut suspects = HashSet::new();
        let alive = [(id(1), State::Alive), (id(2), State::Alive)];
        assert!(suspicion_changes(&alive, &mut suspects).is_empty());
        let suspect = [(id(1), State::Alive), (id(2), State::Suspect)];
        assert_eq!(suspicion_changes(&suspect, &mut suspects), [MembershipEvent::Suspect(id(2))]);
        assert!(suspicion_changes(&suspect, &mut suspects).is_empty(), "once");
        assert_eq!(suspicion_changes(&alive, &mut suspects), [MembershipEvent::Up(id(2))]);
        // A suspect that goes down leaves the active members: foca reports that itself.
        suspicion_changes(&suspect, &mut suspects);
        assert!(suspicion_changes(&[(id(1), State::Alive)], &mut suspects).is_empty());
        assert!(suspects.is_empty());
    }
}
