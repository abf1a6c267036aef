//! The run planner: model facts + pool inventory + placement + runtime settings in, exactly
//! one complete [`RunPlan`] or one typed [`PlanError`] out.
//!
//! Sans-IO and deterministic: the same request always gives the same plan, the pool is
//! never mutated, and edge ids are minted here and nowhere else. [`validate_plan`] checks
//! every structural guarantee of a plan, whoever built it.
//!
//! The steps live in submodules: `checks` (input checks), `ranges` (node choice and the
//! balancing of layer ranges), `edges` (edges, specs and predictions) and `validate`
//! ([`validate_plan`]); their public items are re-exported here.

mod checks;
mod context;
pub mod cost;
mod edges;
pub mod pool;
pub mod prompt_cache;
mod ranges;
mod speed;
mod validate;

use std::fmt;

use crate::model::ModelFacts;
use crate::wire::reason::PlanRejection;
use crate::wire::{
    LayerRange, NodeId, Peer, PlannedModel, RunId, RunPlan, RuntimeConfig, WeightSource,
};
use checks::{check_model, check_node_memory, check_runtime};
use edges::{RingSet, mint_edges, orchestrator_peer, plan_prediction, stage_plans};
use ranges::{choose_nodes, layer_ranges};

pub use checks::{check_pool, check_ranges, check_runtime_config, check_source, check_weights_url};
pub use edges::{
    MAX_ACTIVATION_RING, MIN_ACTIVATION_RING, RING_ALIGNMENT, TOKEN_RING_CAPACITY,
    ring_arena_bytes, stage_active_bytes, stage_weight_bytes,
};
pub use pool::{Pool, PoolError, PoolNode};
pub use ranges::split_evenly;
pub use validate::validate_plan;

/// Where stages go.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Placement {
    /// Nodes in stage order; `None` takes the first nodes of the pool in file order.
    pub nodes: Option<Vec<NodeId>>,
    /// Layer ranges in stage order; `None` balances the stages' decode steps where every
    /// stage node's speed is known (within each node's memory), else blocks by bytes,
    /// weighted by memory.
    pub layers: Option<Vec<LayerRange>>,
    /// Balance by memory even where the nodes' speeds are known (`--balance memory`).
    pub by_memory: bool,
    /// Choose the stage count and the nodes (`--auto-stages`): of every count, the fastest
    /// nodes that hold the model, the plan predicted to decode fastest (fewer stages over
    /// slow links). Needs every node's speed; otherwise one stage per pool node.
    pub auto_stages: bool,
}

/// Everything the planner needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    /// The run's id.
    pub run_id: RunId,
    /// Facts of the model to run.
    pub model: &'a ModelFacts,
    /// Where stages get the weights.
    pub source: WeightSource,
    /// The inventory.
    pub pool: &'a Pool,
    /// Stage count; `None` means one per placed node (or per pool node).
    pub stages: Option<u32>,
    /// Placement input.
    pub placement: Placement,
    /// Runtime settings.
    pub runtime: RuntimeConfig,
    /// Prompt length assumed for the prefill predictions.
    pub prompt_tokens: u32,
    /// The context was not given: `runtime.max_seq_len` is the model's trained length,
    /// lowered until every stage's node holds it ([`plan`]). Otherwise a stage whose node
    /// cannot hold the context is rejected.
    pub fit_context: bool,
    /// Each stage node's prompt-cache budget (`None`: a quarter of what the node has left,
    /// at most [`prompt_cache::DEFAULT_BUDGET_CAP`]; 0: no store).
    pub prompt_cache_bytes: Option<u64>,
    /// Refuse a plan predicted to decode one sequence slower than this many times the
    /// best single node that holds the model ([`PlanRejection::BelowMinSpeedup`]).
    pub min_speedup: Option<f64>,
}

/// A typed rejection: a stable [`PlanRejection`] reason and a human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    /// The stable reason.
    pub reason: PlanRejection,
    /// What exactly is wrong.
    pub message: String,
}

impl PlanError {
    /// A rejection with its reason and what exactly is wrong.
    pub fn new(reason: PlanRejection, message: impl Into<String>) -> PlanError {
        PlanError { reason, message: message.into() }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.reason)
    }
}

impl std::error::Error for PlanError {}

/// A planner step's result: its value or the first rejection.
type Result<T> = std::result::Result<T, PlanError>;

/// Judges a request as [`plan`] will once the nodes reported, for a command to refuse
/// before waiting for the pool a request it can never satisfy (placement, stage count,
/// the memory a pool file declares, ...). A node whose entry leaves out `memory_bytes`
/// is planned with what it reports in `node_available` ([`PoolNode::memory_bytes`]), so
/// here it is not judged by memory: only the plan made with its report is.
pub fn check_before_reports(req: &PlanRequest<'_>) -> Result<()> {
    let mut pool = req.pool.clone();
    for node in pool.nodes.iter_mut().filter(|n| n.memory_bytes == 0) {
        node.memory_bytes = u64::MAX;
    }
    // Speeds come with the reports too: `--min-speedup` is judged on the plan made with them.
    let min_speedup = req.min_speedup.filter(|_| pool.nodes.iter().all(|n| n.speed.is_some()));
    plan(&PlanRequest { pool: &pool, min_speedup, ..req.clone() }).map(|_| ())
}

/// Plans a run. Returns exactly one complete plan or the first rejection. With
/// [`PlanRequest::fit_context`], a context that a stage's node cannot hold is lowered
/// (to a multiple of 256 tokens) until every stage fits, and the plan says so
/// ([`RunPlan::context`]).
pub fn plan(req: &PlanRequest<'_>) -> Result<RunPlan> {
    context::plan_fitting(req, plan_exact)
}

/// Plans a run with the context `req.runtime` gives: the placement's, or with
/// [`Placement::auto_stages`] the fastest of every stage count.
fn plan_exact(req: &PlanRequest<'_>) -> Result<RunPlan> {
    if req.placement.auto_stages && req.pool.nodes.iter().all(|n| n.speed.is_some()) {
        return speed::fastest(req, plan_predicted);
    }
    plan_predicted(req)
}

/// Plans a run with the context `req.runtime` gives, its speed predicted beside every
/// pool node that holds the model alone.
fn plan_predicted(req: &PlanRequest<'_>) -> Result<RunPlan> {
    let plan = plan_structure(req)?;
    let singles: Vec<_> = req
        .pool
        .nodes
        .iter()
        .filter_map(|n| {
            let (cost, rtt, _) = speed::node_cost(n, req.model)?;
            let alone = PlanRequest {
                stages: Some(1),
                placement: Placement { nodes: Some(vec![n.node_id]), ..Placement::default() },
                min_speedup: None,
                ..req.clone()
            };
            let back = n.link_to(req.pool.orchestrator.node_id).unwrap_or(rtt);
            plan_structure(&alone).ok().map(|_| (n.node_id, cost, rtt, back))
        })
        .collect();
    let nodes: Vec<&PoolNode> =
        plan.0.stages.iter().filter_map(|s| req.pool.node(s.node_id)).collect();
    let row_bytes = plan.0.prediction.activation_bytes_per_token;
    let speed = speed::predict(req, &nodes, &plan.0.stages, row_bytes, plan.1, &singles);
    speed::check_min_speedup(req, speed.as_ref())?;
    Ok(RunPlan { speed, ..plan.0 })
}

/// Plans a run with the context `req.runtime` gives, without its speed: ranges balanced
/// by speed where the nodes' speeds are known and a split fits, else by memory.
fn plan_structure(req: &PlanRequest<'_>) -> Result<(RunPlan, crate::wire::PlacedBy)> {
    check_runtime(req)?;
    check_model(req.model)?;
    check_source(&req.source)?;
    check_pool(req.pool)?;

    let nodes = choose_nodes(req)?;
    check_node_memory(&nodes)?;
    let by_speed = !req.placement.by_memory;
    match plan_ranges(req, &nodes, by_speed) {
        // A split by speed that fits the weights and KV cache may not fit the rest.
        Err(e)
            if by_speed
                && matches!(
                    e.reason,
                    PlanRejection::ExceedsNodeMemory | PlanRejection::ExceedsNodeArena
                ) =>
        {
            plan_ranges(req, &nodes, false)
        }
        other => other,
    }
}

/// Plans a run over `nodes` with the context `req.runtime` gives.
fn plan_ranges(
    req: &PlanRequest<'_>,
    nodes: &[&PoolNode],
    by_speed: bool,
) -> Result<(RunPlan, crate::wire::PlacedBy)> {
    let model = req.model;
    let (layers, placed_by) = layer_ranges(req, nodes, by_speed)?;
    let rings = RingSet::for_model(model, &req.runtime);
    let orchestrator = orchestrator_peer(req.pool);
    let edges = mint_edges(&orchestrator, nodes, &rings);
    let mut stages = stage_plans(req, nodes, &layers, &edges)?;
    let prompt_cache = prompt_cache::plan_store(req, &mut stages, nodes)?;
    let prediction = plan_prediction(req, &rings, &stages);
    let plan = RunPlan {
        run_id: req.run_id,
        model: PlannedModel {
            source: req.source.clone(),
            name: model.name.clone(),
            architecture: model.architecture.clone(),
            block_count: model.block_count,
            hidden_size: model.hidden_size,
            vocab_size: model.vocab_size,
            eos_token_id: model.eos_token_id,
            eot_token_id: model.eot_token_id,
            sliding_window: model.arch.sliding_window,
            // The orchestrator, which has the file, adds each stage's ranges and digests.
            stage_ranges: Vec::new(),
        },
        orchestrator,
        nodes: nodes
            .iter()
            .map(|n| Peer {
                node_id: n.node_id,
                endpoint_id: Some(n.endpoint_id.to_ascii_lowercase()),
                addrs: n.addrs.clone(),
                relay: n.relay.clone(),
            })
            .collect(),
        stages,
        edges,
        runtime: req.runtime,
        prediction,
        context: None,
        prompt_cache,
        speed: None,
    };
    validate_plan(&plan)?;
    Ok((plan, placed_by))
}
