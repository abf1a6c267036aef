//! The context a plan gives each sequence: `--max-seq-len` as given, or the model's
//! trained length, lowered until every stage's node holds it (its KV caches, rings and
//! scratch grow with the context), to the longest multiple of [`CONTEXT_STEP`] that fits.

use super::{PlanRequest, Result};
use crate::wire::reason::PlanRejection;
use crate::wire::{ContextWhy, PlanContext, RunPlan, RuntimeConfig};

/// A context lowered to fit memory is a multiple of this many tokens.
pub const CONTEXT_STEP: u32 = 256;

/// Plans `req` with `plan_exact`, fitting the context to memory where the request asks
/// for it; the plan records its context and why.
pub(super) fn plan_fitting(
    req: &PlanRequest<'_>,
    plan_exact: fn(&PlanRequest<'_>) -> Result<RunPlan>,
) -> Result<RunPlan> {
    let trained = req.model.context_length;
    let note = |mut plan: RunPlan, why| {
        plan.context = Some(PlanContext { tokens: plan.runtime.max_seq_len, trained, why });
        plan
    };
    let full = plan_exact(req);
    if !req.fit_context {
        return full.map(|p| note(p, ContextWhy::Given));
    }
    let refused = match full {
        Ok(plan) => return Ok(note(plan, ContextWhy::Trained)),
        Err(e) => e,
    };
    if !matches!(refused.reason, PlanRejection::ExceedsNodeMemory | PlanRejection::ExceedsNodeArena)
    {
        return Err(refused);
    }
    let with = |tokens: u32| PlanRequest {
        runtime: RuntimeConfig { max_seq_len: tokens, ..req.runtime },
        ..req.clone()
    };
    // Memory grows with the context: the longest that fits is found by bisection over
    // the multiples of the step below the trained length, none shorter than the prompt.
    let step = |k: u32| k * CONTEXT_STEP;
    let mut lo = req.prompt_tokens.div_ceil(CONTEXT_STEP).max(1);
    let mut hi = (req.runtime.max_seq_len.saturating_sub(1)) / CONTEXT_STEP;
    let mut best = None;
    while lo <= hi {
        let mid = lo + (hi - lo) / 2;
        match plan_exact(&with(step(mid))) {
            Ok(plan) => {
                best = Some(plan);
                lo = mid + 1;
            }
            Err(_) => hi = mid - 1,
        }
    }
    let plan = best.ok_or(refused)?;
    // The node whose memory the plan fills the most is the one that bounds it.
    let node = plan
        .stages
        .iter()
        .max_by(|a, b| {
            let fill = |s: &crate::wire::StagePlan| {
                s.prediction.total_bytes as f64 / s.prediction.node_memory_bytes.max(1) as f64
            };
            fill(a).total_cmp(&fill(b))
        })
        .map(|s| s.node_id)
        .unwrap_or(crate::wire::NodeId(0));
    Ok(note(plan, ContextWhy::Memory { node }))
}
