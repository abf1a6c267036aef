//! The server's lifecycle, from the session's events: waiting for the pool, forming a
//! session, serving, faulted (until the pool is ready again and a new session forms),
//! draining. It says whether requests are taken and what `/health` answers.

use std::collections::VecDeque;

use serde::Serialize;

use super::error::ApiError;
use crate::events::Event;
use crate::wire::reason::ApiRefusal;

/// Faults kept for the page and `/slots`.
pub const KEPT_FAULTS: usize = 8;

/// Where the server is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for the pool to be alive and stable.
    PoolNotReady,
    /// The pool is ready; the session is being provisioned.
    SessionForming,
    /// A session serves.
    Serving,
    /// The last session faulted; the next forms when the pool is ready again.
    SessionFaulted {
        /// The fault, `class.code`.
        reason: String,
    },
    /// A stage node was lost: the session re-forms over the nodes left and resumes
    /// every sequence it held; new requests wait for it.
    Reforming {
        /// The fault, `class.code`.
        reason: String,
    },
    /// Stopping: no new request is taken.
    ShuttingDown,
}

/// The lifecycle and what it has seen.
#[derive(Debug, Clone, Serialize)]
pub struct ServerPhase {
    /// Where the server is.
    pub phase: Phase,
    /// Sessions that reached serving.
    pub sessions_formed: u64,
    /// The last faults (newest last), `class.code`.
    pub faults: VecDeque<String>,
}

impl Default for ServerPhase {
    fn default() -> Self {
        ServerPhase { phase: Phase::PoolNotReady, sessions_formed: 0, faults: VecDeque::new() }
    }
}

impl ServerPhase {
    /// A session's event moves the phase.
    pub fn event(&mut self, event: &Event) {
        if self.phase == Phase::ShuttingDown {
            return;
        }
        match event {
            Event::PoolReady { .. } => self.phase = Phase::SessionForming,
            Event::ReadinessBarrierPassed { .. } => {
                self.phase = Phase::Serving;
                self.sessions_formed += 1;
            }
            Event::SessionReforming { cause, .. } => {
                self.phase = Phase::Reforming { reason: cause.to_string() };
            }
            Event::RunFaulted { reason, .. } => {
                let reason = reason.to_string();
                if self.faults.len() == KEPT_FAULTS {
                    self.faults.pop_front();
                }
                self.faults.push_back(reason.clone());
                if !matches!(self.phase, Phase::Reforming { .. }) {
                    self.phase = Phase::SessionFaulted { reason };
                }
            }
            Event::SessionReformFailed { cause, .. } => {
                self.phase = Phase::SessionFaulted { reason: cause.to_string() };
            }
            _ => {}
        }
    }

    /// A session ended (or could not start, `why`): the server waits for the pool again,
    /// still saying why the last one faulted.
    pub fn session_ended(&mut self, why: Option<&str>) {
        match (&self.phase, why) {
            (Phase::ShuttingDown | Phase::SessionFaulted { .. }, _) => {}
            (_, Some(reason)) => {
                self.phase = Phase::SessionFaulted { reason: reason.to_string() };
            }
            _ => self.phase = Phase::PoolNotReady,
        }
    }

    /// Stopping: nothing new is taken from here on.
    pub fn shutting_down(&mut self) {
        self.phase = Phase::ShuttingDown;
    }

    /// Whether a new request is taken (while re-forming it waits for the new pipeline).
    pub fn serving(&self) -> bool {
        matches!(self.phase, Phase::Serving | Phase::Reforming { .. })
    }

    /// `/health`: `Ok` while serving, else the 503 saying why.
    pub fn health(&self) -> Result<(), ApiError> {
        match &self.phase {
            Phase::Serving => Ok(()),
            Phase::PoolNotReady => {
                Err(ApiError::unavailable(ApiRefusal::PoolNotReady, "the pool is not ready"))
            }
            Phase::SessionForming => {
                Err(ApiError::unavailable(ApiRefusal::SessionForming, "the session is forming"))
            }
            Phase::SessionFaulted { reason } => Err(ApiError::unavailable(
                ApiRefusal::SessionFaulted,
                format!("the session faulted ({reason}); a new one forms when the pool is ready"),
            )),
            Phase::Reforming { reason } => Err(ApiError::unavailable(
                ApiRefusal::Reforming,
                format!(
                    "a node was lost ({reason}); the session re-forms and resumes every \
                     request it holds"
                ),
            )),
            Phase::ShuttingDown => {
                Err(ApiError::unavailable(ApiRefusal::ShuttingDown, "the server is shutting down"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reason::{Component, MembershipLoss};
    use crate::wire::{NodeId, RunId};

    #[test]
    fn the_server_serves_from_the_barrier_until_a_fault_and_forms_again_when_the_pool_is_ready() {
        let mut p = ServerPhase::default();
        assert_eq!(p.health().expect_err("not ready").reason.as_deref(), Some("pool_not_ready"));
        p.event(&Event::PoolReady { nodes: vec![NodeId(1)] });
        assert_eq!(p.health().expect_err("forming").reason.as_deref(), Some("session_forming"));
        p.event(&Event::ReadinessBarrierPassed { run_id: RunId(1) });
        assert!(p.serving() && p.health().is_ok());
        p.event(&Event::RunFaulted {
            run_id: RunId(1),
            reason: MembershipLoss::NodeDown.into(),
            component: Component::Membership,
            node_id: Some(NodeId(2)),
            stage_index: None,
            edge_id: None,
        });
        p.session_ended(None);
        let e = p.health().expect_err("faulted");
        assert_eq!(e.reason.as_deref(), Some("session_faulted"));
        assert!(e.message.contains("membership.node_down"));
        p.event(&Event::PoolReady { nodes: vec![NodeId(1)] });
        p.event(&Event::ReadinessBarrierPassed { run_id: RunId(2) });
        assert_eq!((p.sessions_formed, p.faults.len()), (2, 1));
        p.shutting_down();
        p.event(&Event::ReadinessBarrierPassed { run_id: RunId(3) });
        assert!(!p.serving());
    }

    #[test]
    fn a_reforming_session_says_so_takes_requests_and_serves_again_or_fails_with_its_cause() {
        let cause: crate::wire::reason::FaultReason = MembershipLoss::NodeDown.into();
        for gives_up in [false, true] {
            let mut p = ServerPhase::default();
            p.event(&Event::ReadinessBarrierPassed { run_id: RunId(1) });
            p.event(&Event::SessionReforming { run_id: RunId(1), cause, sequences: 3 });
            p.event(&Event::RunFaulted {
                run_id: RunId(1),
                reason: cause,
                component: Component::Membership,
                node_id: Some(NodeId(2)),
                stage_index: None,
                edge_id: None,
            });
            let e = p.health().expect_err("reforming");
            assert_eq!(e.reason.as_deref(), Some("reforming"));
            assert!(p.serving(), "requests wait for the re-formed session");
            assert_eq!(p.faults.len(), 1);
            if gives_up {
                let why = "resume_timeout".into();
                p.event(&Event::SessionReformFailed { run_id: RunId(1), cause, why });
                let e = p.health().expect_err("faulted");
                assert_eq!(e.reason.as_deref(), Some("session_faulted"));
                assert!(!p.serving());
            } else {
                p.event(&Event::ReadinessBarrierPassed { run_id: RunId(2) });
                assert!(p.health().is_ok() && p.serving());
            }
        }
    }
}
