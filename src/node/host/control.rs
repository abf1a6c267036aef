//! Control messages from the orchestrator, and the stage's weights (resolved off the loop,
//! then handed to the worker as its role).

use std::path::PathBuf;

use super::{HostInput, StageHost};
use crate::control::ControlMessage;
use crate::stage::controller::StageController;
use crate::stage::weights::{WeightsError, resolve};
use crate::wire::reason::{Component, StageFault, WeightsFailure};
use crate::wire::{ProvisionStage, RunId};
use crate::worker::protocol::Command;

impl StageHost {
    pub(super) fn control(&mut self, msg: ControlMessage) {
        let Some(orchestrator) = self.session.as_ref().map(|s| s.1) else { return };
        match msg {
            ControlMessage::ProvisionStage { provision } => {
                let p = *provision;
                let (run_id, stage_index) = (p.run_id, p.stage_index);
                let busy = self.controller.as_ref().is_some_and(|c| !c.is_stopped());
                let result = if busy {
                    Err(StageFault::AlreadyProvisioned)
                } else {
                    let base = self.step_base + (1 << 32);
                    let mut ctl = StageController::new(orchestrator)
                        .mislabel(self.skip_sequence)
                        .first_step(base);
                    let r = ctl.provision(orchestrator, p);
                    if r.is_ok() {
                        self.controller = Some(ctl);
                        self.step_base = base;
                        self.fault_component = None;
                        self.records.clear();
                        self.steps.clear();
                    }
                    r
                };
                if let Err(reason) = result {
                    eprintln!("swactor node: provisioning of run {run_id} refused: {reason}");
                    self.send(ControlMessage::StageFault {
                        run_id,
                        stage_index,
                        reason: reason.into(),
                        component: Component::StageController,
                    });
                }
            }
            ControlMessage::StopRun { run_id } => {
                // A step in flight (a long prefill) must not hold the teardown.
                if !self.steps.is_empty() && self.ids().is_some_and(|(r, _)| r == run_id) {
                    self.notifier.notify(Command::AbortStep);
                }
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.stop_run(orchestrator, run_id);
                }
            }
            other => eprintln!("swactor node: unexpected control message {other:?}"),
        }
    }

    pub(super) fn fetch_weights(&mut self, p: &ProvisionStage) {
        let (source, cache, run, inputs) =
            (p.weights.clone(), self.cache.clone(), p.run_id, self.inputs.clone());
        let (layers, embedding, head, blocks) = (p.layers, p.embedding, p.head, p.block_count);
        tokio::task::spawn_blocking(move || {
            let progress = inputs.clone();
            let result = resolve(&source, &cache, |e| {
                let _ = progress.send(HostInput::Weights(run, e));
            })
            .and_then(|path| {
                let facts = crate::model::gguf::read_facts(&path).map_err(|e| WeightsError {
                    reason: WeightsFailure::ParseFailed,
                    detail: e.to_string(),
                })?;
                if facts.block_count != blocks {
                    return Err(WeightsError {
                        reason: WeightsFailure::InvalidRange,
                        detail: format!(
                            "the plan has {blocks} blocks, the file {}",
                            facts.block_count
                        ),
                    });
                }
                let bytes = crate::planner::stage_weight_bytes(&facts, layers, embedding, head);
                Ok((path, bytes))
            });
            let _ = inputs.send(HostInput::WeightsResolved(run, result));
        });
    }

    pub(super) fn weights_resolved(
        &mut self,
        run: RunId,
        result: Result<(PathBuf, u64), WeightsError>,
    ) {
        let Some(p) = self.controller.as_ref().and_then(|c| c.provisioning()).cloned() else {
            return;
        };
        if p.run_id != run || self.controller.as_ref().is_some_and(StageController::is_stopped) {
            return;
        }
        match result {
            Err(e) => {
                eprintln!("swactor node: {e}");
                self.stage_fault(e.reason.into(), Component::Weights);
            }
            Ok((path, bytes)) => {
                if let Some(ctl) = self.controller.as_mut() {
                    ctl.weights_ready(run, path.display().to_string(), bytes);
                }
            }
        }
    }
}
