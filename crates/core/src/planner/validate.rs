//! Validation of any plan, whoever built it: the stages (indices, embedding and head,
//! nodes, ranges), the edge chain's topology, and each edge's object and ring specs.

use std::collections::HashSet;

use super::checks::check_ranges;
use super::{PlanError, Result};
use crate::wire::reason::PlanRejection;
use crate::wire::spec::SpecError;
use crate::wire::{EdgeKind, EdgePlan, NodeId, PayloadKind, RunPlan, StageIndex};

/// The rejection a spec error stands for.
fn spec_rejection(e: &SpecError) -> PlanRejection {
    match e {
        SpecError::DTypeMismatch { .. } | SpecError::TokenRowNotOne { .. } => {
            PlanRejection::InvalidDTypeWidth
        }
        SpecError::ZeroRowElems => PlanRejection::InvalidHiddenDim,
        SpecError::ZeroExtent
        | SpecError::ExtentNotWholeRows { .. }
        | SpecError::BadRingCapacity { .. } => PlanRejection::InvalidExtent,
        SpecError::AlignmentNotPowerOfTwo { .. } => PlanRejection::AlignmentNotPowerOfTwo,
        SpecError::BadLayout { .. } => PlanRejection::InvalidExtent,
    }
}

/// Checks every structural guarantee of a plan: stage indices, contiguous covering ranges,
/// one node per stage, the edge chain and its endpoints, unique edge ids, valid specs.
pub fn validate_plan(plan: &RunPlan) -> Result<()> {
    check_stages(plan)?;
    check_edge_ids(plan)?;
    for (i, e) in plan.edges.iter().enumerate() {
        let ends = EdgeEnds::expected(plan, i);
        check_edge_ends(plan, e, ends)?;
        check_edge_spec(plan, e, ends.kind)?;
    }
    Ok(())
}

/// At least one stage; stage indices in order; the embedding on the first stage and the
/// head on the last; one stage per node, each node with a data-plane identity; ranges
/// that cover the model.
fn check_stages(plan: &RunPlan) -> Result<()> {
    let n = plan.stages.len();
    if n == 0 {
        return Err(PlanError::new(PlanRejection::ZeroStages, "the plan has no stages"));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut nodes = HashSet::new();
    for (i, s) in plan.stages.iter().enumerate() {
        if s.stage_index.0 as usize != i {
            return Err(PlanError::new(
                PlanRejection::MissingStageAssignment,
                format!("stage at position {i} has index {}", s.stage_index),
            ));
        }
        if s.embedding != (i == 0) || s.head != (i == n - 1) {
            return Err(PlanError::new(
                PlanRejection::MissingStageAssignment,
                format!(
                    "stage {i}: only the first stage owns the embedding and only the last the head"
                ),
            ));
        }
        if !nodes.insert(s.node_id) {
            return Err(PlanError::new(
                PlanRejection::DuplicateStageAssignment,
                format!("node {} runs more than one stage", s.node_id),
            ));
        }
        if s.node_id == plan.orchestrator.node_id
            || !plan.nodes.iter().any(|p| p.node_id == s.node_id)
        {
            return Err(PlanError::new(
                PlanRejection::UnknownNode,
                format!("stage {i}'s node {} has no data-plane identity in the plan", s.node_id),
            ));
        }
        ranges.push(s.layers);
    }
    check_ranges(&ranges, plan.model.block_count)
}

/// One edge more than stages, and no edge id twice.
fn check_edge_ids(plan: &RunPlan) -> Result<()> {
    let n = plan.stages.len();
    if plan.edges.len() != n + 1 {
        return Err(PlanError::new(
            PlanRejection::EdgeEndpointMismatch,
            format!("{} edges for {n} stages (expected {})", plan.edges.len(), n + 1),
        ));
    }
    let mut ids = HashSet::new();
    for e in &plan.edges {
        if !ids.insert(e.edge_id) {
            return Err(PlanError::new(
                PlanRejection::DuplicateEdgeId,
                format!("edge id {} is used twice", e.edge_id),
            ));
        }
    }
    Ok(())
}

/// What an edge of the chain must connect.
#[derive(Debug, Clone, Copy)]
struct EdgeEnds {
    kind: EdgeKind,
    producer: NodeId,
    producer_stage: Option<usize>,
    consumer: NodeId,
    consumer_stage: Option<usize>,
}

impl EdgeEnds {
    /// The ends of edge `i`: token-in first, then one activation hop per stage boundary,
    /// token-out last.
    fn expected(plan: &RunPlan, i: usize) -> EdgeEnds {
        let n = plan.stages.len();
        let orch = plan.orchestrator.node_id;
        let node_of = |i: usize| plan.stages[i].node_id;
        let (kind, producer, producer_stage, consumer, consumer_stage) = if i == 0 {
            (EdgeKind::TokenIn, orch, None, node_of(0), Some(0))
        } else if i == n {
            (EdgeKind::TokenOut, node_of(n - 1), Some(n - 1), orch, None)
        } else {
            (
                EdgeKind::Activation { from: StageIndex(i as u32 - 1) },
                node_of(i - 1),
                Some(i - 1),
                node_of(i),
                Some(i),
            )
        };
        EdgeEnds { kind, producer, producer_stage, consumer, consumer_stage }
    }
}

/// The edge connects the stages it should, and they name it as their inbound and
/// outbound edges.
fn check_edge_ends(plan: &RunPlan, e: &EdgePlan, ends: EdgeEnds) -> Result<()> {
    let EdgeEnds { kind, producer, producer_stage, consumer, consumer_stage } = ends;
    let stage = |s: Option<usize>| s.map(|s| StageIndex(s as u32));
    if e.kind != kind
        || e.producer != producer
        || e.consumer != consumer
        || e.producer_stage != stage(producer_stage)
        || e.consumer_stage != stage(consumer_stage)
    {
        return Err(PlanError::new(
            PlanRejection::EdgeEndpointMismatch,
            format!(
                "edge {} ({}) does not connect the stages it should",
                e.edge_id,
                e.kind.label()
            ),
        ));
    }
    if let Some(s) = consumer_stage
        && plan.stages[s].inbound != e.edge_id
    {
        return Err(PlanError::new(
            PlanRejection::EdgeEndpointMismatch,
            format!("stage {s}'s inbound edge is not edge {}", e.edge_id),
        ));
    }
    if let Some(s) = producer_stage
        && plan.stages[s].outbound != e.edge_id
    {
        return Err(PlanError::new(
            PlanRejection::EdgeEndpointMismatch,
            format!("stage {s}'s outbound edge is not edge {}", e.edge_id),
        ));
    }
    Ok(())
}

/// The edge's object and ring specs are valid and carry what an edge of `kind` carries.
fn check_edge_spec(plan: &RunPlan, e: &EdgePlan, kind: EdgeKind) -> Result<()> {
    let spec_err =
        |err: SpecError| PlanError::new(spec_rejection(&err), format!("edge {}: {err}", e.edge_id));
    e.object.validate().map_err(spec_err)?;
    e.ring.validate().map_err(spec_err)?;
    let expected_payload = if matches!(kind, EdgeKind::Activation { .. }) {
        PayloadKind::Activations
    } else {
        PayloadKind::TokenIds
    };
    if e.object.payload != expected_payload {
        return Err(PlanError::new(
            PlanRejection::InvalidDTypeWidth,
            format!(
                "edge {} carries {:?}, expected {:?}",
                e.edge_id, e.object.payload, expected_payload
            ),
        ));
    }
    if expected_payload == PayloadKind::Activations {
        check_activation_spec(plan, e)?;
    }
    Ok(())
}

/// An activation edge's rows hold the model's hidden size in the run's activation dtype,
/// and its extent is the micro-batch table plus `max_seq_len` rows.
fn check_activation_spec(plan: &RunPlan, e: &EdgePlan) -> Result<()> {
    if e.object.row_elems != plan.model.hidden_size {
        return Err(PlanError::new(
            PlanRejection::InvalidHiddenDim,
            format!(
                "edge {} rows hold {} elements, the model's hidden size is {}",
                e.edge_id, e.object.row_elems, plan.model.hidden_size
            ),
        ));
    }
    if e.object.dtype != plan.runtime.activation_dtype.wire() {
        return Err(PlanError::new(
            PlanRejection::InvalidDTypeWidth,
            format!("edge {} dtype differs from the run's activation dtype", e.edge_id),
        ));
    }
    let want = crate::wire::batch::table_bytes(plan.runtime.table_capacity())
        + u64::from(plan.runtime.mask_bytes)
        + u64::from(plan.runtime.max_seq_len) * e.object.row_bytes();
    if e.object.max_extent != want {
        return Err(PlanError::new(
            PlanRejection::InvalidExtent,
            format!(
                "edge {} max extent {} should be the micro-batch table plus \
                 max_seq_len * hidden * width = {want}",
                e.edge_id, e.object.max_extent
            ),
        ));
    }
    Ok(())
}
