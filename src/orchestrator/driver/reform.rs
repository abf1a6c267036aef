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
use crate::orchestrator::session::ReformEnd;
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

/// Waits for the pool gate to offer the nodes left and plans the next run over them (as
/// many stages as the session says); or why re-forming is given up.
pub(super) async fn replan(
    run: &mut RunLoop<'_>,
    ctx: &mut Context<'_>,
    phase: &mut PoolPhase,
    sink: &mut dyn RunSink,
    stop: &mut (impl std::future::Future<Output = OperatorStop> + Unpin),
) -> Result<RunPlan, ReformEnd> {
    let Some(reformation) = run.session().reformation() else { return Err(ReformEnd::Setup) };
    // The fault names the node lost (`membership.node_down on node 2 (stage 1), ...`).
    let fault =
        run.session().fault().map_or_else(|| reformation.cause.to_string(), |f| f.to_string());
    let over =
        if reformation.cause.counts_as_resume() { "the nodes left" } else { "the nodes ready" };
    sink.progress(&format!("{fault}: re-forming the session over {over}"));
    let next_run = run.session().next_run_id();
    // The gate began re-forming at the fault: it may have offered the nodes left already.
    if let Some(nodes) = run.session().take_offered() {
        match plan_over(run, ctx, &nodes, next_run).await {
            Ok(plan) => return Ok(plan),
            Err(e) => refused(phase, sink, &nodes, &e),
        }
    }
    loop {
        let notices = tokio::select! {
            _ = &mut *stop => return Err(ReformEnd::OperatorStop),
            () = tokio::time::sleep_until(reformation.deadline.into()) => {
                return Err(ReformEnd::ResumeTimeout);
            }
            notices = phase.next() => notices,
            () = run.next_input() => {
                run.drain(phase, sink);
                continue;
            }
        };
        for notice in notices {
            let offer = node_notice(notice, ctx.reports, sink, ctx.t0);
            if let Some(PoolNotice::Gate(GateEvent::PoolReady { nodes })) = offer {
                match plan_over(run, ctx, &nodes, next_run).await {
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

/// The plan of the re-formed run over `nodes`, with the stage count the session chooses
/// for them ([`crate::orchestrator::session::Session::next_stages`]).
async fn plan_over(
    run: &mut RunLoop<'_>,
    ctx: &Context<'_>,
    nodes: &[NodeId],
    run_id: RunId,
) -> Result<RunPlan, super::OrchestrateError> {
    let mut pool = ctx.pool.clone();
    pool.nodes.retain(|n| nodes.contains(&n.node_id));
    let stages = run.session().next_stages(pool.nodes.len());
    // The stages that do not move keep their caches: the nodes left keep their positions.
    let plan = run.session().plan();
    if let Some(order) = crate::orchestrator::reform::keep_order(plan, nodes, stages as usize) {
        pool.nodes.sort_by_key(|n| order.iter().position(|o| *o == n.node_id));
    }
    let stages = Some(stages);
    let ask = Ask { run_id, stages, prompt_tokens: 0 };
    // A session that lost a node goes on over the survivors however fast they are:
    // `--min-speedup` judges the plan a run starts with, not the one that saves it.
    let config = OrchestrateConfig { min_speedup: None, ..ctx.config.clone() };
    plan_run(&config, ctx.facts, &pool, ctx.reports, ask).await
}
