//! When a server forms its next session after one ended (sans-IO). A session that served
//! is followed by the next after [`SessionRetry::FIRST_PAUSE`]; sessions that fault before
//! serving, one after the other, wait twice as long each time (at most
//! [`SessionRetry::MAX_PAUSE`]); and when they fault with the same fault that a new
//! session would meet again ([`FaultReason::repeats_on_retry`]: weights whose bytes are
//! wrong), the [`SessionRetry::GIVE_UP_AFTER`]-th gives up with that fault instead of
//! downloading the same wrong bytes forever.

use std::time::Duration;

use crate::wire::reason::FaultReason;

/// What to do after a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextSession {
    /// Form the next session after this pause.
    After(Duration),
    /// Stop forming sessions: `sessions` in a row faulted with `reason` before serving.
    GiveUp {
        /// The fault they all met.
        reason: FaultReason,
        /// How many sessions met it.
        sessions: u32,
    },
}

/// The server's memory of the sessions that ended before serving.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRetry {
    /// Sessions in a row that ended before serving.
    streak: u32,
    /// Sessions in a row that faulted with `last` before serving.
    same: u32,
    last: Option<FaultReason>,
}

impl SessionRetry {
    /// The pause after a session that served (or the first that did not).
    pub const FIRST_PAUSE: Duration = Duration::from_secs(1);
    /// The longest pause.
    pub const MAX_PAUSE: Duration = Duration::from_secs(30);
    /// Sessions in a row faulting with the same repeating fault before the server gives up.
    pub const GIVE_UP_AFTER: u32 = 4;

    /// A memory of nothing.
    pub fn new() -> SessionRetry {
        SessionRetry::default()
    }

    /// A session ended: `served` says whether it passed its readiness barrier, `fault` is
    /// its fault if it faulted. Says when to form the next, or to give up.
    pub fn ended(&mut self, served: bool, fault: Option<FaultReason>) -> NextSession {
        if served {
            *self = SessionRetry::default();
            return NextSession::After(Self::FIRST_PAUSE);
        }
        self.streak = self.streak.saturating_add(1);
        if fault.is_some() && fault == self.last {
            self.same = self.same.saturating_add(1);
        } else {
            self.same = 1;
        }
        self.last = fault;
        if let Some(reason) = fault.filter(FaultReason::repeats_on_retry)
            && self.same >= Self::GIVE_UP_AFTER
        {
            return NextSession::GiveUp { reason, sessions: self.same };
        }
        let doublings = (self.streak - 1).min(16);
        NextSession::After(Self::FIRST_PAUSE.saturating_mul(1 << doublings).min(Self::MAX_PAUSE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reason::{MembershipLoss, WeightsFailure};

    const MISMATCH: FaultReason = FaultReason::Weights(WeightsFailure::ChecksumMismatch);
    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn a_checksum_mismatch_in_every_session_backs_off_then_gives_up_with_that_fault() {
        let mut r = SessionRetry::new();
        let got: Vec<NextSession> = (0..4).map(|_| r.ended(false, Some(MISMATCH))).collect();
        assert_eq!(
            got,
            [
                NextSession::After(S(1)),
                NextSession::After(S(2)),
                NextSession::After(S(4)),
                NextSession::GiveUp { reason: MISMATCH, sessions: 4 }
            ]
        );
        assert_eq!(MISMATCH.to_string(), "weights.checksum_mismatch");
    }

    #[test]
    fn a_fault_that_may_pass_backs_off_up_to_the_cap_and_is_never_given_up() {
        let mut r = SessionRetry::new();
        let lost = FaultReason::Membership(MembershipLoss::NodeDown);
        let download = FaultReason::Weights(WeightsFailure::DownloadFailed);
        for reason in [lost, download] {
            assert!(!reason.repeats_on_retry(), "{reason}");
        }
        let pauses: Vec<NextSession> = (0..40).map(|_| r.ended(false, Some(download))).collect();
        assert_eq!(pauses[5], NextSession::After(S(30)), "1, 2, 4, 8, 16, then the cap");
        assert_eq!(pauses[39], NextSession::After(SessionRetry::MAX_PAUSE));
    }

    #[test]
    fn a_session_that_served_or_a_different_fault_starts_the_count_over() {
        let mut r = SessionRetry::new();
        for _ in 0..3 {
            r.ended(false, Some(MISMATCH));
        }
        assert_eq!(r.ended(true, Some(MISMATCH)), NextSession::After(S(1)), "it served");
        for _ in 0..3 {
            assert!(matches!(r.ended(false, Some(MISMATCH)), NextSession::After(_)));
        }
        let other = FaultReason::Weights(WeightsFailure::SizeMismatch);
        assert_eq!(
            r.ended(false, Some(other)),
            NextSession::After(S(8)),
            "a new fault, still paused"
        );
        assert!(matches!(r.ended(false, Some(MISMATCH)), NextSession::After(_)));
        assert_eq!(r.ended(false, None), NextSession::After(S(30)), "no fault: never given up");
    }
}
