//! The pool as the page shows it (`GET /pool`): nodes and their state, stages with their
//! layer ranges, hop latency per edge, tokens/s, slots in use, the last faults. Fed by the
//! session's events and plan; time comes in as arguments.

use std::collections::{BTreeMap, HashMap, VecDeque};

use serde::Serialize;

use super::ServeConfig;
use crate::events::Event;
use crate::wire::RunPlan;

/// Hop samples kept per edge.
const HOP_SAMPLES: usize = 64;
/// Seconds over which tokens/s is averaged.
const RATE_WINDOW_S: u64 = 5;
/// Unmatched step and hop starts kept at most (a faulted session leaves some behind).
const PENDING_MAX: usize = 4096;

/// One node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeView {
    /// The node.
    pub node_id: u64,
    /// `waiting`, `available`, `serving`, `lost` or `faulted`.
    pub state: &'static str,
    /// The stage it computes, while it does.
    pub stage: Option<u32>,
}

/// One stage.
#[derive(Debug, Clone, Serialize)]
pub struct StageView {
    /// The stage.
    pub stage: u32,
    /// Its node.
    pub node_id: u64,
    /// Its blocks, `[start, end)`.
    pub layers: [u32; 2],
    /// Whether it embeds the tokens.
    pub embedding: bool,
    /// Whether it computes the head and samples.
    pub head: bool,
    /// The edge it sends on.
    pub outbound: u64,
    /// Its last step's duration on the worker, µs.
    pub step_us: Option<u64>,
    /// The plan's prediction of a one-row decode step, µs (`None`: no speed known).
    pub predicted_step_us: Option<u64>,
    /// The plan's prediction of its hop out (half the link's round trip and the hop's
    /// own cost), µs.
    pub predicted_hop_us: Option<u64>,
    /// How its node is reached, as the plan names it: `direct` (addresses only), `relay`
    /// (its relay only: relay-only), `direct or relay` (both: iroh takes the direct path
    /// where hole punching works). `edge inspect` on the node says which one a live edge
    /// uses.
    pub reached: &'static str,
}

/// The view, and the partial measurements behind it.
#[derive(Debug, Serialize)]
pub struct PoolView {
    /// The model's name.
    pub model: String,
    /// Every node of the pool.
    pub nodes: BTreeMap<u64, NodeView>,
    /// The session's stages.
    pub stages: Vec<StageView>,
    /// Median hop per edge over the last samples, µs.
    pub hop_us: BTreeMap<u64, u64>,
    /// Tokens generated per second, recently.
    pub tokens_per_s: f64,
    /// Slots holding a sequence.
    pub slots_in_use: usize,
    /// Slots in all.
    pub slots: u32,
    /// Requests waiting for a slot.
    pub waiting: usize,
    #[serde(skip)]
    hops: HashMap<u64, VecDeque<u64>>,
    #[serde(skip)]
    produced: HashMap<(u64, u64), u64>,
    #[serde(skip)]
    steps: HashMap<(u64, u64), u64>,
    #[serde(skip)]
    tokens: VecDeque<(u64, u64)>,
}

impl PoolView {
    /// The pool of `config`, every node waiting.
    pub fn new(config: &ServeConfig) -> PoolView {
        let nodes = config
            .nodes
            .iter()
            .map(|n| (*n, NodeView { node_id: *n, state: "waiting", stage: None }))
            .collect();
        PoolView {
            model: config.model_name.clone(),
            nodes,
            stages: Vec::new(),
            hop_us: BTreeMap::new(),
            tokens_per_s: 0.0,
            slots_in_use: 0,
            slots: config.defaults.slots,
            waiting: 0,
            hops: HashMap::new(),
            produced: HashMap::new(),
            steps: HashMap::new(),
            tokens: VecDeque::new(),
        }
    }

    /// A session planned `plan`.
    pub fn planned(&mut self, plan: &RunPlan) {
        let speed = |i: u32| plan.speed.as_ref().and_then(|s| s.stages.get(i as usize));
        self.stages = plan
            .stages
            .iter()
            .map(|s| StageView {
                stage: s.stage_index.0,
                node_id: s.node_id.0,
                layers: [s.layers.start, s.layers.end],
                embedding: s.embedding,
                head: s.head,
                outbound: s.outbound.0,
                step_us: None,
                predicted_step_us: speed(s.stage_index.0).map(|p| p.step_us),
                predicted_hop_us: speed(s.stage_index.0).map(|p| p.hop_us),
                reached: plan.nodes.iter().find(|p| p.node_id == s.node_id).map_or("direct", |p| {
                    match (p.addrs.is_empty(), p.relay.is_some()) {
                        (true, true) => "relay",
                        (false, true) => "direct or relay",
                        _ => "direct",
                    }
                }),
            })
            .collect();
        self.hops.clear();
        self.hop_us.clear();
    }

    fn node(&mut self, id: u64) -> &mut NodeView {
        self.nodes.entry(id).or_insert(NodeView { node_id: id, state: "waiting", stage: None })
    }

    /// A session's event; returns a step's `(stage, seconds)` or a hop's `(edge, seconds)`
    /// it completed, for the metrics.
    pub fn event(&mut self, event: &Event, origin_us: Option<u64>) -> Measured {
        match *event {
            Event::NodeAvailable { node_id, .. } => self.node(node_id.0).state = "available",
            Event::NodeFaulted { node_id, .. } => self.node(node_id.0).state = "faulted",
            Event::NodeStopped { node_id } => self.node(node_id.0).state = "waiting",
            Event::StageReady { node_id, stage_index, .. } => {
                let n = self.node(node_id.0);
                (n.state, n.stage) = ("serving", Some(stage_index.0));
            }
            Event::StageLost { node_id, .. } => {
                let n = self.node(node_id.0);
                (n.state, n.stage) = ("lost", None);
            }
            Event::RunTornDown { .. } => {
                for n in self.nodes.values_mut().filter(|n| n.state == "serving") {
                    (n.state, n.stage) = ("available", None);
                }
                self.produced.clear();
                self.steps.clear();
            }
            Event::ExecuteStepStarted { node_id, step_id, .. } => {
                if let Some(at) = origin_us {
                    bounded_insert(&mut self.steps, (node_id.0, step_id.0), at);
                }
            }
            Event::StepCompleted { node_id, stage_index, step_id, .. } => {
                let started = self.steps.remove(&(node_id.0, step_id.0));
                if let (Some(s), Some(at)) = (started, origin_us) {
                    let us = at.saturating_sub(s);
                    if let Some(v) = self.stages.iter_mut().find(|v| v.stage == stage_index.0) {
                        v.step_us = Some(us);
                    }
                    return Measured::Step(stage_index.0, us as f64 / 1e6);
                }
            }
            Event::ObjectProduced { edge_id, sequence, .. } => {
                if let Some(at) = origin_us {
                    bounded_insert(&mut self.produced, (edge_id.0, sequence.0), at);
                }
            }
            Event::ObjectLoaded { edge_id, sequence, .. } => {
                let produced = self.produced.remove(&(edge_id.0, sequence.0));
                if let (Some(p), Some(at)) = (produced, origin_us) {
                    let us = at.saturating_sub(p);
                    let samples = self.hops.entry(edge_id.0).or_default();
                    if samples.len() == HOP_SAMPLES {
                        samples.pop_front();
                    }
                    samples.push_back(us);
                    let mut sorted: Vec<u64> = samples.iter().copied().collect();
                    sorted.sort_unstable();
                    self.hop_us.insert(edge_id.0, sorted[sorted.len() / 2]);
                    return Measured::Hop(edge_id.0, us as f64 / 1e6);
                }
            }
            _ => {}
        }
        Measured::Nothing
    }

    /// `n` tokens were generated at `now_s` (seconds on the server's clock).
    pub fn tokens(&mut self, now_s: u64, n: u64) {
        match self.tokens.back_mut() {
            Some((s, c)) if *s == now_s => *c += n,
            _ => self.tokens.push_back((now_s, n)),
        }
        self.rate(now_s);
    }

    /// Recomputes tokens/s as of `now_s`.
    pub fn rate(&mut self, now_s: u64) {
        while self.tokens.front().is_some_and(|(s, _)| s + RATE_WINDOW_S <= now_s) {
            self.tokens.pop_front();
        }
        let sum: u64 = self.tokens.iter().map(|(_, c)| c).sum();
        self.tokens_per_s = sum as f64 / RATE_WINDOW_S as f64;
    }
}

fn bounded_insert<K: std::hash::Hash + Eq>(map: &mut HashMap<K, u64>, key: K, at: u64) {
    if map.len() >= PENDING_MAX {
        map.clear();
    }
    map.insert(key, at);
}

/// What an event completed, for the metrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measured {
    /// Nothing.
    Nothing,
    /// A stage's step, in seconds.
    Step(u32, f64),
    /// An edge's hop, in seconds.
    Hop(u64, f64),
}
