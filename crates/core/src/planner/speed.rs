//! A plan's prediction of its own speed ([`SpeedPrediction`]) from the cost model, beside
//! the best single node's, and the `--min-speedup` check.

use super::cost::{self, ASSUMED_RTT_US, NodeCost};
use super::pool::PoolNode;
use super::{PlanError, PlanRequest, Result};
use crate::model::ModelFacts;
use crate::wire::ROUND_ROWS;
use crate::wire::reason::PlanRejection;
use crate::wire::{
    LayerRange, LayoutSpeed, NodeId, PlacedBy, SpeedPrediction, SplitVerdict, StagePlan, StageSpeed,
};

/// One stage as the cost model sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct CostStage {
    pub node_id: NodeId,
    pub cost: NodeCost,
    pub layers: LayerRange,
    /// The node's round trip from the orchestrator, microseconds.
    pub rtt_us: u64,
    /// The round trip of the hop after it (to the next stage, or back to the
    /// orchestrator from the last), microseconds.
    pub next_rtt_us: u64,
    /// That hop's bandwidth, MB/s (measured, else [`cost::ASSUMED_LINK_MBS`]).
    pub next_mbs: f64,
}

/// The node's cost for `model` and its round trip (assumed where not measured), if its
/// speed is known.
pub(super) fn node_cost(node: &PoolNode, model: &ModelFacts) -> Option<(NodeCost, u64, bool)> {
    let cost = NodeCost::of(node.speed.as_ref()?, model)?;
    Some((cost, node.rtt_us.unwrap_or(ASSUMED_RTT_US), node.rtt_us.is_none()))
}

/// What a layout's figures are made of.
struct Figures {
    stages: Vec<StageSpeed>,
    first_hop_us: u64,
    layout: LayoutSpeed,
    round_trip_us: Vec<u64>,
}

/// The figures of a pipeline of `stages` (in order) for `slots` sequences and a prompt of
/// `prompt` tokens, each activation row `row_bytes`.
fn figures(
    model: &ModelFacts,
    stages: &[CostStage],
    row_bytes: u64,
    slots: u32,
    prompt: u32,
) -> Figures {
    let n = stages.len();
    let last = |i: usize| i + 1 == n;
    // The hop after stage `i` for `rows` rows: to the next stage, or the sampled ids back.
    let hop = |i: usize, rows: u32| {
        let bytes = if last(i) { 4 * u64::from(rows.max(1)) } else { row_bytes * u64::from(rows) };
        cost::hop_us(stages[i].next_rtt_us, bytes, stages[i].next_mbs)
    };
    let first = |rows: u32| {
        cost::hop_us(stages[0].rtt_us, 4 * u64::from(rows.max(1)), cost::ASSUMED_LINK_MBS)
    };
    let step = |i: usize, rows: u32| {
        let s = &stages[i];
        s.cost.step_us(cost::stage_step_bytes(model, s.layers, last(i)), rows)
    };
    let round_trip =
        |rows: u32| first(rows) + (0..n).map(|i| step(i, rows) + hop(i, rows)).sum::<f64>();

    // Decode: one sequence goes round the loop once per token; `slots` sequences in
    // `groups` micro-batches (one per stage, at most the slots) are bound by the loop or by
    // the busiest stage, which works on every group in turn.
    let one = round_trip(1);
    let groups = (n as u32).min(slots).max(1);
    let rows = slots.div_ceil(groups);
    let busiest = (0..n).map(|i| step(i, rows)).fold(0.0, f64::max);
    let concurrent = round_trip(rows).max(f64::from(groups) * busiest);
    // Time to first token: every chunk of the prompt goes round the loop in turn.
    let chunks = prompt.max(1).div_ceil(cost::PREFILL_CHUNK);
    let prefill: f64 = (0..n)
        .map(|i| cost::stage_prefill_us(&stages[i].cost, model, stages[i].layers, last(i), prompt))
        .sum();
    let hops: f64 = first(0) + (0..n).map(|i| hop(i, 0)).sum::<f64>();
    // The prompt's rows cross every activation link once, on connections that have carried
    // nothing yet: their windows grow as they go, until the link's rate bounds them.
    let prompt_bytes = row_bytes * u64::from(prompt);
    let transfers: f64 = (0..n - 1)
        .map(|i| cost::transfer_us(stages[i].next_rtt_us, prompt_bytes, stages[i].next_mbs))
        .sum();
    let ttft = prefill + f64::from(chunks) * hops + transfers;
    Figures {
        stages: (0..n)
            .map(|i| StageSpeed {
                node_id: stages[i].node_id,
                step_us: step(i, 1).round() as u64,
                batch_step_us: step(i, rows).round() as u64,
                prefill_us: cost::stage_prefill_us(
                    &stages[i].cost,
                    model,
                    stages[i].layers,
                    last(i),
                    prompt,
                )
                .round() as u64,
                hop_us: hop(i, 1).round() as u64,
            })
            .collect(),
        first_hop_us: first(1).round() as u64,
        round_trip_us: (1..=ROUND_ROWS).map(|r| round_trip(r).round() as u64).collect(),
        layout: LayoutSpeed {
            decode_tok_s: 1e6 / one,
            decode_tok_s_concurrent: f64::from(slots) * 1e6 / concurrent,
            ttft_ms: ttft / 1e3,
        },
    }
}

/// The plan's prediction, where every stage node's speed is known; `single` gives each
/// pool node that holds the whole model on its own, with its cost.
pub(super) fn predict(
    req: &PlanRequest<'_>,
    nodes: &[&PoolNode],
    stages: &[StagePlan],
    row_bytes: u64,
    placed_by: PlacedBy,
    singles: &[(NodeId, NodeCost, u64, u64)],
) -> Option<SpeedPrediction> {
    let mut assumed = false;
    let orchestrator = req.pool.orchestrator.node_id;
    let mut cost_stages: Vec<CostStage> = nodes
        .iter()
        .zip(stages)
        .map(|(node, s)| {
            let (cost, rtt_us, guessed) = node_cost(node, req.model)?;
            assumed |= guessed;
            Some(CostStage {
                node_id: node.node_id,
                cost,
                layers: s.layers,
                rtt_us,
                next_rtt_us: 0,
                next_mbs: cost::ASSUMED_LINK_MBS,
            })
        })
        .collect::<Option<_>>()?;
    // Each hop's round trip: measured by the node on that link, else estimated from the
    // two ends' round trips from the orchestrator. Its bandwidth in the hop's direction:
    // the receiving node's measurement where it measured the link (it asked the sender
    // for the probe's bytes; "too fast to tell" is the assumed rate), else the sender's of
    // the other way (a hop to the orchestrator, which measures nothing).
    for i in 0..cost_stages.len() {
        let next = nodes.get(i + 1);
        let to = next.map_or(orchestrator, |n| n.node_id);
        let receiver = next.filter(|n| n.link_to(nodes[i].node_id).is_some());
        let mbs = match receiver {
            Some(n) => n.link_mbs(nodes[i].node_id),
            None => nodes[i].link_mbs(to),
        };
        cost_stages[i].next_mbs = mbs.unwrap_or(cost::ASSUMED_LINK_MBS);
        cost_stages[i].next_rtt_us = match nodes[i].link_to(to) {
            Some(rtt) => rtt,
            None => {
                assumed = true;
                match cost_stages.get(i + 1) {
                    Some(n) => cost::link_rtt_us(cost_stages[i].rtt_us, n.rtt_us),
                    None => cost_stages[i].rtt_us,
                }
            }
        };
    }
    let slots = u32::from(req.runtime.table_capacity());
    let prompt = req.prompt_tokens.max(1);
    let fig = figures(req.model, &cost_stages, row_bytes, slots, prompt);
    let whole = LayerRange::new(0, req.model.block_count);
    // The fastest; of equals, the first in the pool (`max_by` keeps the last).
    let single = singles
        .iter()
        .rev()
        .map(|&(node_id, cost, rtt_us, next_rtt_us)| {
            let next_mbs = cost::ASSUMED_LINK_MBS;
            let alone = [CostStage { node_id, cost, layers: whole, rtt_us, next_rtt_us, next_mbs }];
            (node_id, figures(req.model, &alone, row_bytes, slots, prompt).layout)
        })
        .max_by(|a, b| a.1.decode_tok_s.total_cmp(&b.1.decode_tok_s));
    let verdict = match (stages.len(), single) {
        (1, _) => SplitVerdict::Single,
        (_, None) => SplitVerdict::Needed,
        (_, Some((_, alone))) => {
            let speedup = fig.layout.decode_tok_s / alone.decode_tok_s;
            if speedup > 1.0 {
                SplitVerdict::Helps { speedup }
            } else {
                SplitVerdict::Costs { speedup }
            }
        }
    };
    Some(SpeedPrediction {
        placed_by,
        concurrent: slots,
        prompt_tokens: prompt,
        stages: fig.stages,
        first_hop_us: fig.first_hop_us,
        pipeline: fig.layout,
        round_trip_us: fig.round_trip_us,
        single,
        verdict,
        links_assumed: assumed,
    })
}

/// Refuses a plan predicted below `--min-speedup` times the best single node's decode rate
/// (or whose speed cannot be predicted); a split that is needed, or one stage, passes.
pub(super) fn check_min_speedup(
    req: &PlanRequest<'_>,
    speed: Option<&SpeedPrediction>,
) -> Result<()> {
    let Some(min) = req.min_speedup else { return Ok(()) };
    let Some(speed) = speed else {
        return Err(PlanError::new(
            PlanRejection::BelowMinSpeedup,
            format!(
                "--min-speedup {min} needs every stage node's speed, and some node reported none"
            ),
        ));
    };
    match (speed.verdict, speed.single) {
        (
            SplitVerdict::Helps { speedup } | SplitVerdict::Costs { speedup },
            Some((node, alone)),
        ) if speedup < min => Err(PlanError::new(
            PlanRejection::BelowMinSpeedup,
            format!(
                "the plan is predicted to decode at {:.1} tokens/s, {speedup:.2}x node {node} \
                     alone ({:.1} tokens/s), below --min-speedup {min}",
                speed.pipeline.decode_tok_s, alone.decode_tok_s
            ),
        )),
        _ => Ok(()),
    }
}

/// The plan `plan` makes that is predicted to decode fastest (all the plan's sequences at
/// once where it has several, else one) over the `k` fastest pool nodes (in pool order),
/// for every `k`; ties go to fewer stages. The last rejection where none plans.
pub(super) fn fastest(
    req: &PlanRequest<'_>,
    plan: fn(&PlanRequest<'_>) -> Result<crate::wire::RunPlan>,
) -> Result<crate::wire::RunPlan> {
    // Nodes by their cost per byte of a decode step, the fastest first (ties: pool order).
    let mut by_speed: Vec<(f64, usize)> = req
        .pool
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (node_cost(n, req.model).map_or(f64::INFINITY, |c| c.0.step_us(1 << 20, 1)), i)
        })
        .collect();
    by_speed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let most = req.pool.nodes.len().min(req.model.block_count as usize);
    let rate = |p: &crate::wire::RunPlan| {
        p.speed.as_ref().map_or(0.0, |s| {
            if s.concurrent > 1 {
                s.pipeline.decode_tok_s_concurrent
            } else {
                s.pipeline.decode_tok_s
            }
        })
    };
    let mut best: Option<crate::wire::RunPlan> = None;
    let mut last = None;
    for k in 1..=most {
        let mut picked: Vec<usize> = by_speed[..k].iter().map(|&(_, i)| i).collect();
        picked.sort_unstable();
        let nodes = picked.iter().map(|&i| req.pool.nodes[i].node_id).collect();
        let placement = super::Placement {
            nodes: Some(nodes),
            layers: None,
            by_memory: req.placement.by_memory,
            auto_stages: false,
        };
        let one = PlanRequest { stages: Some(k as u32), placement, ..req.clone() };
        match plan(&one) {
            Ok(p) if best.as_ref().is_none_or(|b| rate(&p) > rate(b)) => best = Some(p),
            Ok(_) => {}
            Err(e) => last = Some(e),
        }
    }
    best.ok_or_else(|| {
        last.unwrap_or_else(|| {
            PlanError::new(PlanRejection::NotEnoughNodes, "the pool has no node")
        })
    })
}
