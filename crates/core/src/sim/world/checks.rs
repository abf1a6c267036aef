//! The invariants: violations as they happen, and the checks at the end of a run (see
//! `specs/simulation.md`).

use super::{EOS, MAX_SEQ, VOCAB, World};
use crate::events::{Event, RunOutcome};
use crate::node::stage_node::EdgeState;
use crate::orchestrator::scheduler::FinishReason;
use crate::orchestrator::session::SessionEnd;
use crate::sim::model;
use crate::wire::EdgeId;
use crate::wire::reason::{FaultReason, Timeout};

impl World {
    pub(super) fn violation(&mut self, what: String) {
        self.report.trace.push(format!("{:>9.3} ms VIOLATION {what}", self.ms()));
        self.report.violations.push(what);
    }

    /// The checks at the end (see `specs/simulation.md`).
    pub(super) fn check_end(&mut self) {
        if self.runs == 0 {
            self.check_no_session();
            return;
        }
        self.check_events();
        self.check_requests();
        self.check_outcome();
        self.check_nothing_lost();
        self.check_nodes_left_clean();
    }

    /// A re-formed session loses nothing: unless re-forming was given up, no request ends
    /// with a fault the session survived (only one past its resume cap) or with the
    /// session's end; re-forming is given up for lack of capacity only when no node is
    /// left.
    fn check_nothing_lost(&mut self) {
        let mut lost = Vec::new();
        if self.abandoned.is_none() && self.outcome() == Some(RunOutcome::Completed) {
            for (k, r) in self.reqs.iter().enumerate() {
                let Some(error) = r.result.as_ref().and_then(|r| r.error.as_deref()) else {
                    continue;
                };
                let survived = FaultReason::parse(error).is_some_and(|f| self.policy.survives(f));
                let resumes = self.session.as_ref().map_or(0, |s| s.resumes(k));
                let capped = resumes >= self.policy.max_resumes;
                if r.admitted && (error == SessionEnd::Ended.to_string() || (survived && !capped)) {
                    lost.push(format!(
                        "request {k} ended with {error}, which the session survived"
                    ));
                }
            }
        }
        if self.abandoned == Some("resume_timeout") && self.nodes.iter().any(|n| !n.dead) {
            lost.push("re-forming timed out with a node left".into());
        }
        for l in lost {
            self.violation(l);
        }
    }

    /// No session: only a node that failed its boot (the pool never became ready) or an
    /// operator stop before the pool was ready may explain it, and nothing was provisioned
    /// anywhere.
    fn check_no_session(&mut self) {
        if !self.boot_faulted && !self.faulty {
            self.violation("the pool never became ready, and nothing explains it".into());
        }
        let provisioned = self.nodes.iter().filter(|n| n.stage.provisioning().is_some()).count();
        if provisioned > 0 {
            self.violation(format!("{provisioned} stages provisioned without a session"));
        }
    }

    /// Exactly one terminal outcome and one `run_torn_down` per run, the last run's
    /// `run_torn_down` last (but for the end of re-forming given up).
    fn check_events(&mut self) {
        let runs = self.runs as usize;
        let terminal = self.events.iter().filter(|e| e.is_terminal_outcome()).count();
        if terminal != runs {
            self.violation(format!("{terminal} terminal outcomes in {runs} runs"));
        }
        let torn: Vec<&Event> =
            self.events.iter().filter(|e| matches!(e, Event::RunTornDown { .. })).collect();
        let last =
            self.events.iter().rev().find(|e| !matches!(e, Event::SessionReformFailed { .. }));
        if torn.len() != runs {
            self.violation(format!("run_torn_down {} times in {runs} runs", torn.len()));
        } else if !matches!(last, Some(Event::RunTornDown { .. })) {
            self.violation("run_torn_down is not the last event".into());
        }
    }

    /// Every admitted request ends exactly once; the tokens its result names are the ones
    /// streamed, and they are the reference's (all of them when it ended by itself, a
    /// prefix when it was cut short).
    fn check_requests(&mut self) {
        let mut checks = Vec::new();
        for (k, r) in self.reqs.iter().enumerate() {
            if !r.admitted {
                continue;
            }
            let reference = model::reference(
                &r.prompt,
                r.max_tokens,
                r.temperature,
                r.seed,
                VOCAB,
                Some(EOS),
                MAX_SEQ,
            );
            let got = r.tokens.clone();
            let Some(result) = &r.result else {
                checks.push(format!("request {k} never finished"));
                continue;
            };
            if result.tokens != got {
                checks.push(format!(
                    "request {k}: its result names tokens {:?}, it streamed {got:?}",
                    result.tokens
                ));
            }
            match result.finish_reason {
                Some(FinishReason::Eos | FinishReason::MaxTokens | FinishReason::ContextFull) => {
                    if got != reference {
                        checks
                            .push(format!("request {k}: tokens {got:?}, reference {reference:?}"));
                    }
                }
                _ => {
                    if !reference.starts_with(&got) {
                        checks.push(format!(
                            "request {k}: tokens {got:?} not a prefix of {reference:?}"
                        ));
                    }
                }
            }
        }
        for c in checks {
            self.violation(c);
        }
    }

    /// What the run reports: an outcome; a fault or a stop only when an injected fault
    /// explains it; completion when none was injected.
    fn check_outcome(&mut self) {
        match self.outcome() {
            Some(RunOutcome::Completed) => {}
            Some(RunOutcome::Faulted) => {
                let reported = self.events.iter().rev().find_map(|e| match e {
                    Event::RunFaulted { reason, .. } => Some(*reason),
                    _ => None,
                });
                let stalled = FaultReason::Timeout(Timeout::TokenWait);
                if let Some(r) = reported
                    && !self.possible.contains(&r)
                    && !(self.faulty && r == stalled)
                {
                    self.violation(format!("run faulted with {r}, which no injected fault causes"));
                }
            }
            Some(RunOutcome::OperatorStopped) if !self.faulty => {
                self.violation("stopped without an operator stop".into());
            }
            Some(RunOutcome::OperatorStopped) => {}
            None => self.violation("the run has no outcome".into()),
        }
        if !self.faulty && self.outcome() != Some(RunOutcome::Completed) {
            self.violation(format!("without faults the run ended {:?}", self.outcome()));
        }
    }

    /// Nothing is left on the nodes that lived: every stage stopped, every edge stopped,
    /// no device object held, no step posted.
    fn check_nodes_left_clean(&mut self) {
        let mut kept = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.dead || n.stage.provisioning().is_none() {
                continue;
            }
            let mut left = Vec::new();
            if !n.stage.is_idle() {
                left.push("its stage".to_string());
            }
            let edges: Vec<EdgeId> = n
                .stage
                .records()
                .filter(|r| !matches!(r.state, EdgeState::Stopped | EdgeState::Failed))
                .map(|r| r.edge_id)
                .collect();
            if !edges.is_empty() {
                left.push(format!("edges {edges:?}"));
            }
            if !n.loaded.is_empty() {
                left.push(format!("{} device objects", n.loaded.len()));
            }
            let plane = n.stage.plane();
            if plane.live_leases() > 0 || plane.live_edges() > 0 {
                left.push(format!(
                    "{} leases and {} live edges in its plane",
                    plane.live_leases(),
                    plane.live_edges()
                ));
            }
            if !left.is_empty() {
                kept.push(format!("node {i} kept {}", left.join(", ")));
            }
        }
        for k in kept {
            self.violation(k);
        }
    }
}
