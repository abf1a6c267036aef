//! Re-forming a session after a node loss: the pool gate offers the nodes left once they
//! are stable, the planner places the model over them (a smaller pipeline when a node is
//! missing, the same shape when a spare or the lost node came back), and the run loop
//! resumes every kept request on the new run. Until then the session's input is still
//! read (requests wait, cancellations end kept requests); the operator's stop or the
//! resume timeout gives re-forming up.

use std::collections::HashMap;
use std::time::Instant;

use super::run_loop::RunLoop;
use super::{Ask, NodeReport, OrchestrateConfig, RunSink, node_notice, plan_run};
use crate::membership::pool_gate::GateEvent;
use crate::model::ModelFacts;
use crate::orchestrator::pool_phase::{PoolNotice, PoolPhase};
use crate::planner::Pool;
use crate::wire::reason::OperatorStop;
use crate::wire::{NodeId, RunId, RunPlan};

/// What re-planning needs from the driver.
pub(super) struct Context<'a> {
    pub(super) config: &'a OrchestrateConfig,
    pub(super) facts: &'a ModelFacts,
    /// The pool with the orchestrator's identity filled in.
    pub(super) pool: &'a Pool,
    pub(super) reports: &'a mut HashMap<NodeId, NodeReport>,
    pub(super) t0: Instant,
}

/// Waits for the pool gate to offer the nodes left and plans the next run over them;
/// or why re-forming is given up (`resume_timeout`, `operator_stop`).
pub(super) async fn replan(
    run: &mut RunLoop<'_>,
    ctx: &mut Context<'_>,
    phase: &mut PoolPhase,
    sink: &mut dyn RunSink,
    stop: &mut (impl std::future::Future<Output = OperatorStop> + Unpin),
) -> Result<RunPlan, &'static str> {
    let Some(reformation) = run.reformation() else { return Err("none") };
    // The fault names the node lost (`membership.node_down on node 2 (stage 1), ...`).
    let fault = run.fault().map_or_else(|| reformation.cause.to_string(), |f| f.to_string());
    let over =
        if reformation.cause.counts_as_resume() { "the nodes left" } else { "the nodes ready" };
    sink.progress(&format!("{fault}: re-forming the session over {over}"));
    // As many stages as the session asks for (`--stages`, or one per pool node), as far
    // as the nodes offered go: a spare or a node back restores the shape.
    let stages_before = ctx.config.stages.unwrap_or(ctx.pool.nodes.len() as u32);
    let next_run = RunId(run.plan().run_id.0 + 1);
    // The gate began re-forming at the fault: it may have offered the nodes left already.
    if let Some(nodes) = run.take_offered() {
        match plan_over(ctx, &nodes, stages_before, next_run).await {
            Ok(plan) => return Ok(plan),
            Err(e) => refused(phase, sink, &nodes, &e),
        }
    }
    loop {
        let notices = tokio::select! {
            _ = &mut *stop => return Err("operator_stop"),
            () = tokio::time::sleep_until(reformation.deadline.into()) => {
                return Err("resume_timeout");
            }
            notices = phase.next() => notices,
            () = run.next_input(sink) => continue,
        };
        for notice in notices {
            let offer = node_notice(notice, ctx.reports, sink, ctx.t0);
            if let Some(PoolNotice::Gate(GateEvent::PoolReady { nodes })) = offer {
                match plan_over(ctx, &nodes, stages_before, next_run).await {
                    Ok(plan) => return Ok(plan),
                    Err(e) => refused(phase, sink, &nodes, &e),
                }
            }
        }
    }
}

/// The nodes offered cannot hold the model: the gate offers again once the set changes.
fn refused(
    phase: &mut PoolPhase,
    sink: &mut dyn RunSink,
    nodes: &[NodeId],
    e: &super::OrchestrateError,
) {
    sink.progress(&format!("nodes {nodes:?} cannot hold the model ({e}); waiting for more"));
    phase.gate().offer_refused();
}

/// The plan of the re-formed run over `nodes`: as many stages as the session asks for
/// where enough nodes are ready (a spare or the lost node back), else one per node.
async fn plan_over(
    ctx: &Context<'_>,
    nodes: &[NodeId],
    stages_before: u32,
    run_id: RunId,
) -> Result<RunPlan, super::OrchestrateError> {
    let mut pool = ctx.pool.clone();
    pool.nodes.retain(|n| nodes.contains(&n.node_id));
    let stages = Some(stages_before.min(pool.nodes.len() as u32).max(1));
    let ask = Ask { run_id, stages, prompt_tokens: 0 };
    plan_run(ctx.config, ctx.facts, &pool, ctx.reports, ask).await
}
