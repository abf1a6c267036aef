//! The session across runs, as the orchestrator's driver carries it: once a faulted run
//! that re-forms is down, the nodes the pool gate offered become the next run's plan (as
//! many stages as the session says) and the session resumes on it; an operator stop or the
//! resume timeout gives re-forming up. The decisions are the real [`Session`]'s.
//!
//! [`Session`]: crate::orchestrator::session::Session

use super::World;
use super::setup::the_plan;
use crate::orchestrator::session::ReformEnd;
use crate::wire::SamplingPolicy;
use crate::wire::reason::OperatorStop;

impl super::Req {
    /// How its tokens are picked.
    pub(super) fn sampling(&self) -> SamplingPolicy {
        if self.temperature > 0.0 {
            let (temperature, seed) = (self.temperature, self.seed);
            SamplingPolicy::Sample { temperature, top_k: None, top_p: None, seed }
        } else {
            SamplingPolicy::Greedy
        }
    }
}

impl World {
    /// After the current run is down: the session is over, or it re-forms over the nodes
    /// offered, or gives re-forming up (an operator stop, or the deadline passed). Returns
    /// whether the session was asked anything.
    pub(super) fn after_teardown(&mut self) -> bool {
        let now = self.instant();
        let Some(session) = self.session.as_mut() else { return false };
        if !session.is_torn_down() || self.torn_down {
            return false;
        }
        let Some(reformation) = session.reformation() else {
            // Over: what never ran ends with the session's reason (the driver's last step).
            session.resolve_rest();
            self.torn_down = true;
            return true;
        };
        if let Some(nodes) = session.take_offered() {
            self.reform_over(&nodes);
            if std::mem::take(&mut self.stop_pending)
                && let Some(session) = self.session.as_mut()
            {
                session.operator_stop(now, OperatorStop::Interrupt);
            }
            return true;
        }
        let why = if self.stop_pending {
            ReformEnd::OperatorStop
        } else if reformation.expired(now) {
            ReformEnd::ResumeTimeout
        } else {
            return false;
        };
        self.trace(format!("session_reform_failed: {}", why.as_str()));
        self.abandoned = Some(why.as_str());
        if let Some(session) = self.session.as_mut() {
            session.abandon(why);
        }
        true
    }

    /// The gate offered `nodes`: the next run is planned over as many of them as the
    /// session asks for, and the session resumes on it.
    fn reform_over(&mut self, nodes: &[crate::wire::NodeId]) {
        let Some(session) = self.session.as_mut() else { return };
        let stages = session.next_stages(nodes.len()) as usize;
        // As the driver: the nodes that stay keep their stages' positions.
        let order = crate::orchestrator::reform::keep_order(session.plan(), nodes, stages);
        let nodes = order.unwrap_or_else(|| nodes.to_vec());
        let route: Vec<usize> = nodes.iter().take(stages).map(|n| n.0 as usize - 1).collect();
        self.run = session.next_run_id();
        self.plan = the_plan(&route, self.slots, self.run, self.store_blocks);
        self.route = route;
        self.runs += 1;
        self.report.reformed += 1;
        self.inflight.clear();
        self.trace(format!("session re-formed over nodes {:?} (run {})", self.route, self.run));
        let now = self.instant();
        let plan = self.plan.clone();
        if let Some(session) = self.session.as_mut() {
            session.reform(now, plan);
        }
        self.gate.provisioning_started();
    }
}
