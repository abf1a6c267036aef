//! The run loop's pool side: what the pool phase reports during a run (stage reports,
//! lost sessions and members, the gate's verdicts) carried to the session.

use std::time::Instant;

use super::RunLoop;
use crate::control::ControlMessage;
use crate::events::{Event, EventLine};
use crate::orchestrator::driver::{RunSink, now_us};
use crate::orchestrator::pool_phase::PoolNotice;
use crate::wire::NodeId;

impl RunLoop<'_> {
    pub(super) fn pool_notice(&mut self, notice: PoolNotice, sink: &mut dyn RunSink) {
        let now = Instant::now();
        match notice {
            PoolNotice::Message(node, ControlMessage::SessionEnding { reason, .. }) => {
                self.session.session_ending(now, node, reason);
            }
            PoolNotice::Message(node, msg) => self.stage_message(node, msg, sink),
            PoolNotice::SessionClosed(node) => self.session.session_closed(now, node),
            PoolNotice::MemberDown(node) => self.session.member_down(now, node),
            PoolNotice::Gate(event) => self.session.gate_event(now, event),
            _ => {}
        }
    }

    fn stage_message(&mut self, node: NodeId, msg: ControlMessage, sink: &mut dyn RunSink) {
        let now = Instant::now();
        match msg {
            ControlMessage::StageReady { run_id, stage_index } => {
                if let Err(e) = self.session.stage_ready(now, run_id, stage_index, node) {
                    eprintln!("swactor: stage_ready from node {node} refused: {e}");
                }
            }
            ControlMessage::StageFault { run_id, stage_index, reason, component } => {
                let fault = (reason, component);
                if !self.session.stage_fault(now, run_id, stage_index, node, fault) {
                    eprintln!(
                        "swactor: node {node}: {reason} for run {run_id} stage {stage_index} ({component})"
                    );
                }
            }
            ControlMessage::StageStopped { run_id, stage_index } => {
                if let Err(e) = self.session.stage_stopped(run_id, stage_index, node) {
                    eprintln!("swactor: stage_stopped from node {node} refused: {e}");
                }
            }
            ControlMessage::Event { line } if !self.session.is_torn_down() => {
                if let Event::WeightsLoaded { .. } = line.event {
                    sink.progress(&self.session.weights_loaded());
                }
                // A node's event keeps the moment it happened on its host.
                sink.event(&EventLine { ts_us: now_us(self.t0), ..line });
            }
            ControlMessage::Event { .. } => {}
            other => eprintln!("swactor: unexpected message from node {node}: {other:?}"),
        }
    }
}
