//! Re-forming a session after a node loss (pure): whether a fault is survived, and how
//! each kept sequence resumes — its prompt and every token it generated become the new
//! pipeline's prefill, and decoding continues from there with what is left of its budget.
//! Sampling is a function of the seed and the token's position, so a replayed sequence
//! continues exactly as an undisturbed one would.

use std::time::{Duration, Instant};

use super::requests::{Replay, Request};
use super::scheduler::{FinishReason, SeqRequest};
use crate::wire::reason::FaultReason;
use crate::wire::{NodeId, RunPlan};

/// The order to plan a re-formed run of `stages` stages over the `offered` nodes in (the
/// planner takes stages from the front). Where the run keeps the faulted run `old`'s stage
/// count, every node of `old` that is offered keeps its stage's position and the other
/// nodes (a spare, the lost node back) fill the positions of the nodes lost, so the stages
/// that did not move stay where they were and keep their caches. Another stage count
/// moves every range: `None`, the nodes keep the pool's order.
pub fn keep_order(old: &RunPlan, offered: &[NodeId], stages: usize) -> Option<Vec<NodeId>> {
    if old.stages.len() != stages {
        return None;
    }
    let planned = |n: &NodeId| old.stages.iter().any(|s| s.node_id == *n);
    let mut others = offered.iter().filter(|n| !planned(n)).copied();
    let mut order: Vec<NodeId> = old
        .stages
        .iter()
        .filter_map(|s| if offered.contains(&s.node_id) { Some(s.node_id) } else { others.next() })
        .collect();
    order.extend(others);
    Some(order)
}

/// Which stages of `next` (a plan re-forming the faulted run `old`) stay where they were:
/// the same node runs the same layers, ends and weights with the same caches (context, KV
/// and activation types, slots, store). Such a stage's node keeps its caches (its worker
/// parked the role) and recomputes none of the positions it held
/// (`specs/reformation.md`).
pub fn kept_stages(old: &RunPlan, next: &RunPlan) -> Vec<bool> {
    let (a, b) = (&old.runtime, &next.runtime);
    let same_caches = a.max_seq_len == b.max_seq_len
        && a.kv_cache == b.kv_cache
        && a.activation_dtype == b.activation_dtype
        && a.max_sequences == b.max_sequences
        && old.prompt_cache == next.prompt_cache;
    next.stages
        .iter()
        .map(|n| {
            same_caches
                && old.stages.iter().any(|o| {
                    o.node_id == n.node_id
                        && o.layers == n.layers
                        && (o.embedding, o.head) == (n.embedding, n.head)
                        && old.stage_source(o.stage_index) == next.stage_source(n.stage_index)
                })
        })
        .collect()
}

/// How a session answers the loss of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePolicy {
    /// Re-form and resume (`false`: `--no-resume`, the session fails at once).
    pub enabled: bool,
    /// How long to wait for enough capacity before every kept sequence ends with the fault.
    pub timeout: Duration,
    /// Times one sequence may be resumed; past that it ends with the fault.
    pub max_resumes: u32,
    /// The stages that stay where they were keep their caches (`false`:
    /// `--no-keep-caches`, every stage rebuilds its caches from the replay).
    pub keep_caches: bool,
}

impl Default for ResumePolicy {
    fn default() -> Self {
        ResumePolicy {
            enabled: true,
            timeout: Duration::from_secs(60),
            max_resumes: 3,
            keep_caches: true,
        }
    }
}

impl ResumePolicy {
    /// Fail fast: today's behaviour before re-formation existed.
    pub const DISABLED: ResumePolicy = ResumePolicy {
        enabled: false,
        timeout: Duration::ZERO,
        max_resumes: 0,
        keep_caches: false,
    };

    /// Whether a session that faulted with `cause` re-forms.
    pub fn survives(&self, cause: FaultReason) -> bool {
        self.enabled && cause.reforms()
    }
}

/// What a session is doing when the pool grows (see [`grown_stages`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrowthAsk {
    /// Stages of the run now serving.
    pub stages: u32,
    /// Stages the session asks for (`--stages`, or one per pool node).
    pub desired: u32,
    /// Candidates ready now (the gate's `CapacityGrew`).
    pub ready: u32,
    /// Whether the run serves (no outcome yet, not re-forming).
    pub serving: bool,
    /// Whether it holds nothing and no more requests will come.
    pub idle: bool,
}

/// Whether a session re-forms onto a pool that grew, and to how many stages: only a
/// serving, non-idle session with resuming on, when the ready nodes allow more stages than
/// it runs (up to what it asks for). Such a re-formation ends the run with
/// `pool.capacity_grew` and loses nothing (every sequence is kept and replayed).
pub fn grown_stages(policy: &ResumePolicy, ask: GrowthAsk) -> Option<u32> {
    let target = ask.ready.min(ask.desired);
    (policy.enabled && ask.serving && !ask.idle && target > ask.stages).then_some(target)
}

/// Why a kept sequence does not resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeptEnd {
    /// It had already generated its budget: it finished, with this reason.
    Finished(FinishReason),
    /// It was resumed as often as the policy allows: it ends with the fault.
    CapReached,
    /// Its replay does not fit the new pipeline's context: it ends with
    /// [`REPLAY_TOO_LONG`].
    TooLong,
}

/// The error of a sequence whose replay does not fit the re-formed session's context.
pub const REPLAY_TOO_LONG: &str = "replay_too_long";

/// The resubmission of kept `request` (what it replays: `replay`) to a re-formed session
/// whose context is `max_seq_len` tokens, or why it does not resume.
pub fn resubmission(
    policy: &ResumePolicy,
    request: &Request,
    replay: &Replay,
    max_seq_len: u32,
) -> Result<SeqRequest, KeptEnd> {
    let budget = request.max_tokens.max(1);
    if replay.generated >= budget {
        return Err(KeptEnd::Finished(FinishReason::MaxTokens));
    }
    if replay.resumed >= policy.max_resumes {
        return Err(KeptEnd::CapReached);
    }
    // As a prompt: the context holds it whole (the next token is sampled past it).
    if replay.tokens.len() > max_seq_len as usize {
        return Err(KeptEnd::TooLong);
    }
    Ok(SeqRequest {
        prompt: replay.tokens.clone(),
        max_tokens: budget - replay.generated,
        sampling: request.sampling,
        logprobs: request.logprobs,
        speculative: request.speculative,
        cache_prompt: request.cache_prompt,
        // Its state goes on: every token kept so far was committed once.
        constraint: request.constraint.clone(),
    })
}

/// One re-formation in progress: its cause and its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reformation {
    /// The fault that started it.
    pub cause: FaultReason,
    /// When the fault was seen.
    pub since: Instant,
    /// When waiting for capacity ends.
    pub deadline: Instant,
}

impl Reformation {
    /// A re-formation after `cause`, seen at `now`, under `policy`.
    pub fn start(now: Instant, cause: FaultReason, policy: &ResumePolicy) -> Reformation {
        // A timeout too long for the clock waits as long as the clock can say.
        let deadline = now
            .checked_add(policy.timeout)
            .or_else(|| now.checked_add(Duration::from_secs(1 << 32)))
            .unwrap_or(now);
        Reformation { cause, since: now, deadline }
    }

    /// Whether waiting for capacity is over at `now`.
    pub fn expired(&self, now: Instant) -> bool {
        now >= self.deadline
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::SamplingPolicy;
    use crate::wire::reason::{ControlFault, MembershipLoss, PoolChange, StepFailure, TokenFault};

    fn request(max_tokens: u32) -> Request {
        Request {
            id: "r".into(),
            prompt: vec![1, 2],
            max_tokens,
            sampling: SamplingPolicy::Sample {
                temperature: 0.7,
                top_k: Some(40),
                top_p: Some(0.9),
                seed: 5,
            },
            stop: vec![],
            logprobs: Some(2),
            speculative: true,
            cache_prompt: true,
            constraint: None,
        }
    }

    fn replay(generated: u32, resumed: u32) -> Replay {
        let mut tokens = vec![1, 2];
        tokens.extend((0..generated).map(|t| 10 + t));
        Replay { tokens, generated, resumed }
    }

    /// A plan of stages on `nodes` with the layers each runs.
    fn plan_on(nodes: &[(u64, u32, u32)]) -> RunPlan {
        let mut plan = crate::sim::plan_for_tests(nodes.len() as u32);
        for (s, &(node, start, end)) in plan.stages.iter_mut().zip(nodes) {
            s.node_id = NodeId(node);
            s.layers = crate::wire::LayerRange::new(start, end);
        }
        plan
    }

    #[test]
    fn survivors_keep_their_positions_and_a_spare_takes_the_lost_nodes() {
        let old = plan_on(&[(1, 0, 2), (2, 2, 4), (3, 4, 6)]);
        let order = |offered: &[u64], stages| {
            let offered: Vec<NodeId> = offered.iter().map(|&n| NodeId(n)).collect();
            let order = keep_order(&old, &offered, stages).expect("same stage count");
            order.iter().map(|n| n.0).collect::<Vec<_>>()
        };
        assert_eq!(order(&[1, 3, 4], 3), [1, 4, 3], "the spare takes the lost middle");
        assert_eq!(order(&[4, 3, 1, 5], 3), [1, 4, 3, 5]);
        assert_eq!(order(&[3, 2, 1], 3), [1, 2, 3], "the lost node back takes its place");
        assert_eq!(keep_order(&old, &[NodeId(1), NodeId(3)], 2), None, "the pool's order");
        let two = plan_on(&[(1, 0, 3), (3, 3, 6)]);
        let grown = keep_order(&two, &[NodeId(1), NodeId(2), NodeId(3)], 3);
        assert_eq!(grown, None, "a pool that grew is planned in its own order");
    }

    #[test]
    fn a_stage_is_kept_only_where_its_node_runs_the_same_layers_with_the_same_caches() {
        let old = plan_on(&[(1, 0, 2), (2, 2, 4), (3, 4, 6)]);
        let spare = plan_on(&[(1, 0, 2), (4, 2, 4), (3, 4, 6)]);
        assert_eq!(kept_stages(&old, &spare), [true, false, true]);
        let fewer = plan_on(&[(1, 0, 3), (3, 3, 6)]);
        assert_eq!(kept_stages(&old, &fewer), [false, false], "the ranges moved");
        let mut longer = spare.clone();
        longer.runtime.max_seq_len += 1;
        assert_eq!(kept_stages(&old, &longer), [false, false, false], "other caches");
    }

    #[test]
    fn a_serving_session_grows_only_to_more_stages_than_it_runs_and_at_most_what_it_asks() {
        let on = ResumePolicy::default();
        let ask = GrowthAsk { stages: 2, desired: 3, ready: 3, serving: true, idle: false };
        assert_eq!(grown_stages(&on, ask), Some(3));
        assert_eq!(grown_stages(&on, GrowthAsk { ready: 5, ..ask }), Some(3), "capped");
        assert_eq!(grown_stages(&on, GrowthAsk { ready: 2, ..ask }), None, "no more stages");
        assert_eq!(grown_stages(&on, GrowthAsk { stages: 3, ..ask }), None, "already whole");
        assert_eq!(grown_stages(&on, GrowthAsk { serving: false, ..ask }), None);
        assert_eq!(grown_stages(&on, GrowthAsk { idle: true, ..ask }), None, "nothing to serve");
        assert_eq!(grown_stages(&ResumePolicy::DISABLED, ask), None, "--no-resume");
    }

    #[test]
    fn only_the_loss_of_a_node_is_survived_and_only_when_resuming_is_on() {
        let on = ResumePolicy::default();
        assert!(on.survives(MembershipLoss::NodeDown.into()));
        assert!(on.survives(ControlFault::ConnectionLost.into()));
        assert!(!on.survives(StepFailure::ComputeFailed.into()), "a failed step would repeat");
        assert!(!on.survives(TokenFault::OutOfOrder.into()));
        assert!(!ResumePolicy::DISABLED.survives(MembershipLoss::NodeDown.into()));
        assert!(on.survives(PoolChange::CapacityGrew.into()), "a pool that grew re-forms");
        assert!(!ResumePolicy::DISABLED.survives(PoolChange::CapacityGrew.into()));
    }

    #[test]
    fn a_kept_sequence_replays_its_log_with_what_is_left_of_its_budget_and_its_sampling() {
        let policy = ResumePolicy::default();
        let req = resubmission(&policy, &request(10), &replay(4, 0), 64).expect("resumes");
        assert_eq!(req.prompt, vec![1, 2, 10, 11, 12, 13]);
        assert_eq!(req.max_tokens, 6);
        assert_eq!((req.sampling, req.logprobs), (request(10).sampling, Some(2)));
    }

    #[test]
    fn a_spent_budget_finishes_a_capped_one_ends_and_a_replay_past_the_context_is_too_long() {
        let policy = ResumePolicy { max_resumes: 2, ..ResumePolicy::default() };
        let finished = resubmission(&policy, &request(4), &replay(4, 0), 64);
        assert_eq!(finished, Err(KeptEnd::Finished(FinishReason::MaxTokens)));
        assert_eq!(
            resubmission(&policy, &request(10), &replay(1, 2), 64),
            Err(KeptEnd::CapReached)
        );
        assert!(resubmission(&policy, &request(10), &replay(1, 1), 64).is_ok());
        assert_eq!(resubmission(&policy, &request(10), &replay(3, 0), 4), Err(KeptEnd::TooLong));
        assert!(resubmission(&policy, &request(10), &replay(3, 0), 5).is_ok(), "a full context");
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a test owns the clock
    fn a_reformation_waits_for_capacity_until_its_deadline() {
        let now = Instant::now();
        let policy = ResumePolicy { timeout: Duration::from_secs(5), ..ResumePolicy::default() };
        let r = Reformation::start(now, MembershipLoss::NodeDown.into(), &policy);
        assert!(!r.expired(now + Duration::from_millis(4999)));
        assert!(r.expired(now + Duration::from_secs(5)));
        let forever = ResumePolicy { timeout: Duration::MAX, ..ResumePolicy::default() };
        let r = Reformation::start(now, MembershipLoss::NodeDown.into(), &forever);
        assert!(!r.expired(now + Duration::from_secs(1 << 20)), "no overflow, no early end");
    }
}
