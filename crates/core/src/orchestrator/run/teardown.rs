//! Teardown bookkeeping of the run state machine: `StopRun` to every stage, stages
//! reported stopped or lost with their node, the token endpoints stopped, and
//! `run_torn_down` exactly once, when everything settled or the teardown deadline passed
//! (naming what did not confirm).

use std::collections::BTreeSet;
use std::time::Instant;

use super::{RunCommand, RunFsm, RunInputError, State};
use crate::events::{Event, RunOutcome, TeardownPart};
use crate::wire::reason::{Component, FaultReason};
use crate::wire::{NodeId, RunId, StageIndex};

impl RunFsm {
    /// `StopRun` to every stage, the token endpoints stopped: `TearingDown`.
    pub(super) fn teardown(&mut self, now: Instant) {
        self.end_sequences();
        for &(stage_index, node_id) in &self.stages {
            self.commands.push_back(RunCommand::StopRun(stage_index));
            self.events.push_back(Event::StopRunSent { run_id: self.run_id, node_id, stage_index });
        }
        self.commands.push_back(RunCommand::StopTokenEndpoints);
        self.state = State::TearingDown {
            stopped: BTreeSet::new(),
            endpoints: false,
            deadline: now + self.timeouts.teardown,
        };
    }

    /// A stage reports it is torn down.
    pub fn stage_stopped(
        &mut self,
        run: RunId,
        stage: StageIndex,
        from: NodeId,
    ) -> Result<(), RunInputError> {
        self.check_report(run, stage, from)?;
        if let State::TearingDown { stopped, .. } = &mut self.state
            && stopped.insert(stage)
        {
            self.events.push_back(Event::StageStopped {
                run_id: self.run_id,
                node_id: from,
                stage_index: stage,
            });
            self.check_torn_down();
        }
        Ok(())
    }

    /// The orchestrator lost `node` (its control session closed, or SWIM declared it
    /// down): the run faults with `reason` (detected by `component`) and every stage of
    /// that node is lost — reported once as `stage_lost` and counted as settled for
    /// teardown, never as stopped. A node the plan does not use changes nothing.
    pub fn node_lost(
        &mut self,
        now: Instant,
        node: NodeId,
        reason: FaultReason,
        component: Component,
    ) {
        let stages: Vec<StageIndex> =
            self.stages.iter().filter(|(_, n)| *n == node).map(|(s, _)| *s).collect();
        if stages.is_empty() {
            return;
        }
        self.fault(now, reason, component, Some(node), None, None);
        for stage_index in stages {
            let stopped = matches!(&self.state, State::TearingDown { stopped, .. } if stopped.contains(&stage_index));
            if self.state != State::Done && !stopped && self.lost.insert(stage_index) {
                self.events.push_back(Event::StageLost {
                    run_id: self.run_id,
                    node_id: node,
                    stage_index,
                    reason,
                });
            }
        }
        self.check_torn_down();
    }

    /// Whether teardown waits for the token endpoints (see
    /// [`RunFsm::token_endpoints_stopped`]).
    pub fn awaits_token_endpoints(&self) -> bool {
        matches!(self.state, State::TearingDown { endpoints: false, .. })
    }

    /// The token endpoints are stopped and their leases released (after
    /// `StopTokenEndpoints`).
    pub fn token_endpoints_stopped(&mut self) {
        if let State::TearingDown { endpoints, .. } = &mut self.state {
            *endpoints = true;
        }
        self.check_torn_down();
    }

    /// `run_torn_down` once every stage stopped or was lost and the token endpoints
    /// stopped.
    fn check_torn_down(&mut self) {
        let State::TearingDown { stopped, endpoints, .. } = &self.state else { return };
        let settled = self.stages.iter().all(|(s, _)| stopped.contains(s) || self.lost.contains(s));
        if settled && *endpoints {
            self.torn_down(Vec::new());
        }
    }

    pub(super) fn torn_down(&mut self, unconfirmed: Vec<TeardownPart>) {
        let outcome = self.outcome.unwrap_or(RunOutcome::Faulted);
        let stopped = match &self.state {
            State::TearingDown { stopped, .. } => stopped.clone(),
            _ => BTreeSet::new(),
        };
        let lost: Vec<StageIndex> = self.lost.difference(&stopped).copied().collect();
        let node_of = |s: &StageIndex| self.stages.iter().find(|(i, _)| i == s).map(|(_, n)| *n);
        let lost_nodes = lost.iter().filter_map(node_of).collect();
        self.events.push_back(Event::RunTornDown {
            run_id: self.run_id,
            outcome,
            unconfirmed,
            lost,
            lost_nodes,
        });
        self.state = State::Done;
    }

    /// What had not confirmed its teardown (stages neither stopped nor lost, the token
    /// endpoints if they had not stopped).
    pub(super) fn unconfirmed(&self) -> Vec<TeardownPart> {
        let State::TearingDown { stopped, endpoints, .. } = &self.state else { return Vec::new() };
        let mut parts: Vec<TeardownPart> = self
            .stages
            .iter()
            .map(|(s, _)| *s)
            .filter(|s| !stopped.contains(s) && !self.lost.contains(s))
            .map(|stage_index| TeardownPart::Stage { stage_index })
            .collect();
        if !endpoints {
            parts.push(TeardownPart::TokenEndpoints);
        }
        parts
    }
}
