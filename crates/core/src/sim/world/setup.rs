//! The world's construction from a seed: the pool and its plan, the nodes, the traffic,
//! the late answers and the faults.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::*;

/// The plan of run `run` over `nodes` (indices, one stage each) with `slots` slots.
/// The simulation's plan; its prompt-cache store has `store_blocks` blocks of 4 positions
/// (short, so that the simulation's short prompts fill them).
pub(super) fn the_plan(nodes: &[usize], slots: u32, run: RunId, store_blocks: u32) -> RunPlan {
    let stages = nodes.len() as u32;
    let facts = ModelFacts {
        architecture: "llama".into(),
        arch: Default::default(),
        name: None,
        block_count: 6,
        hidden_size: HIDDEN,
        feed_forward_length: None,
        head_count: 4,
        head_count_kv: 2,
        head_dim: 4,
        context_length: 512,
        vocab_size: VOCAB,
        bos_token_id: None,
        eos_token_id: Some(EOS),
        eot_token_id: None,
        tokenizer_model: None,
        tokenizer_pre: None,
        rope: RopeFacts { freq_base: 10000.0, dimension_count: 4 },
        rms_norm_eps: 1e-5,
        tied_embeddings: true,
        bytes: ModelBytes {
            per_block: vec![1 << 12; 6],
            active_per_block: Vec::new(),
            embedding: 1 << 12,
            head: 1 << 12,
            tensors: 1 << 16,
            file: 1 << 16,
            formats: Default::default(),
        },
        tensor_types: BTreeMap::new(),
        vocab_digest: None,
    };
    let pool = Pool {
        orchestrator: OrchestratorEntry {
            node_id: ORCH,
            endpoint_id: None,
            addrs: vec![],
            relay: None,
        },
        nodes: nodes
            .iter()
            .map(|&i| i as u64 + 1)
            .map(|i| PoolNode {
                node_id: NodeId(i),
                endpoint_id: format!("{i:064x}"),
                addrs: vec![std::net::SocketAddr::from(([127, 0, 0, 1], 1000 + i as u16))],
                relay: None,
                memory_bytes: 1 << 33,
                device: None,
                prompt_cache_bytes: None,
                arena_bytes: None,
                speed: None,
                rtt_us: None,
                links: Vec::new(),
            })
            .collect(),
        placement: None,
    };
    let runtime = RuntimeConfig {
        max_seq_len: MAX_SEQ,
        kv_cache: Default::default(),
        activation_dtype: ActivationDType::F32,
        max_tokens: 8,
        sampling: SamplingPolicy::Greedy,
        max_sequences: slots,
        max_top_logprobs: None,
        mask_bytes: 0,
    };
    let req = PlanRequest {
        run_id: run,
        model: &facts,
        source: WeightSource::Local { path: "/sim".into() },
        pool: &pool,
        stages: Some(stages),
        placement: Placement::default(),
        runtime,
        prompt_tokens: 0,
        fit_context: false,
        prompt_cache_bytes: None,
        min_speedup: None,
    };
    let mut plan = plan(&req).unwrap_or_else(|e| panic!("the simulation's plan is valid: {e}"));
    plan.prompt_cache =
        crate::wire::PromptCachePlan { block_tokens: 4, blocks: store_blocks, off: None };
    plan
}

impl World {
    pub(super) fn new(base: Instant, cfg: SimConfig) -> World {
        let mut rng = StdRng::seed_from_u64(cfg.seed);
        let stages = rng.random_range(1..=3u32);
        let slots = rng.random_range(1..=4u32);
        // A store of 0 to 6 blocks (from the seed, not the stream: the other draws stay as
        // they were).
        let store_blocks = (cfg.seed % 7) as u32;
        let plan = the_plan(&(0..stages as usize).collect::<Vec<_>>(), slots, RUN, store_blocks);
        let timeouts = RunTimeouts {
            readiness: Duration::from_secs(10),
            token: Duration::from_secs(5),
            teardown: Duration::from_secs(3),
        };
        let limits = SessionLimits {
            queue_capacity: rng.random_range(1..=8usize),
            batch_tokens: rng.random_range(1..=16u32),
            groups: rng.random_range(0..=3u16),
            prefill_budget: Some(Duration::from_millis(20)),
            // Every third seed speculates (from the seed, not the stream: the other draws
            // stay as they were).
            draft_max: [0, 3, 0][(cfg.seed % 3) as usize],
            // Half of those draft at least one token every trip, crowded or not.
            draft_min: u8::from(cfg.seed % 6 == 1),
        };
        let gate = PoolGate::new(base, (1..=u64::from(stages)).map(NodeId), WINDOW);
        let nodes = (0..stages).map(|i| sim_node(base, i, cfg.planted)).collect();
        let mut w = World {
            kept_stages: 0,
            rng,
            base,
            now: Duration::ZERO,
            queue: BinaryHeap::new(),
            evs: HashMap::new(),
            next_ev: 0,
            order: 0,
            plan,
            run: RUN,
            route: (0..stages as usize).collect(),
            slots,
            store_blocks,
            session: None,
            runs: 0,
            // One seed in eight rebuilds every stage's caches after a re-formation.
            policy: ResumePolicy {
                enabled: true,
                timeout: RESUME_TIMEOUT,
                max_resumes: 3,
                keep_caches: cfg.seed % 8 != 5,
            },
            abandoned: None,
            stop_pending: false,
            input_closed: false,
            session_cfg: (limits, timeouts, cfg.planted),
            gate,
            early: (Vec::new(), Vec::new(), false, false),
            boot_faulted: false,
            nodes,
            reqs: Vec::new(),
            inflight: VecDeque::new(),
            events: Vec::new(),
            torn_down: false,
            faulty: false,
            possible: Default::default(),
            report: SimReport {
                seed: cfg.seed,
                stages,
                requests: 0,
                faults: Vec::new(),
                outcome: None,
                reason: None,
                steps: 0,
                sim_ms: 0,
                reformed: 0,
                draft_tokens: 0,
                cached_tokens: 0,
                loaded_blocks: 0,
                kept_stages: 0,
                kept_rows: 0,
                abandoned: None,
                violations: Vec::new(),
                trace: Vec::new(),
            },
            jitter: false,
            links: HashMap::new(),
            // Half of the speculating seeds draft outside the core (from the seed too).
            drafts_outside: cfg.seed % 6 == 4,
        };
        // Every node boots: its facts come in bring-up order, each after a short delay.
        for i in 0..w.nodes.len() {
            for fact in w.nodes[i].boot.missing() {
                // The worker's fact is its controller's `Ready`.
                if fact != BootFact::Worker {
                    w.send(Link::Local(i), 100, 3000, Ev::Node(i, NodeIn::Boot(fact, None)));
                }
            }
            w.nodes[i].wctl.start();
            w.pump_wctl(i);
        }
        w.at(POOL_TIMEOUT, Ev::Orch(OrchIn::PoolTimeout));
        w.traffic();
        w.conversations(cfg.seed);
        w.late_answers(cfg.seed);
        if cfg.faults {
            w.faults();
        }
        w
    }

    /// Conversations: half the requests after the first continue an earlier one (its prompt,
    /// its reference output, then their own tokens), as a chat's next turn does, so that
    /// warm slots hold prefixes they share. Drawn from a generator of their own, so the
    /// rest of a seed's world is as before.
    fn conversations(&mut self, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x000c_011e_c7ed_7a1c);
        for i in 1..self.reqs.len() {
            if !rng.random_bool(0.5) {
                continue;
            }
            let j = rng.random_range(0..i);
            let earlier = &self.reqs[j];
            if earlier.prompt.len() > MAX_SEQ as usize {
                continue;
            }
            let mut prompt = earlier.prompt.clone();
            prompt.extend(crate::sim::model::reference(
                &earlier.prompt,
                earlier.max_tokens,
                earlier.temperature,
                earlier.seed,
                VOCAB,
                Some(EOS),
                MAX_SEQ,
            ));
            // Its own turn: one token at least, the context's length at most.
            let own = &self.reqs[i].prompt;
            let room = (MAX_SEQ as usize).saturating_sub(prompt.len()).max(1);
            prompt.extend_from_slice(&own[..own.len().min(room)]);
            prompt.truncate(MAX_SEQ as usize);
            self.reqs[i].prompt = prompt;
        }
    }

    /// Late answers of the workers about steps of an earlier run (a node that served one
    /// before may still hold them): each node, in half the seeds, gets one while the session
    /// runs. Drawn from a generator of their own, so the rest of a seed's world is as before.
    fn late_answers(&mut self, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x1a7e_a25e_e25c_0de5);
        for i in 0..self.nodes.len() {
            if !rng.random_bool(0.5) {
                continue;
            }
            let step_id = StepId(rng.random_range(1..64));
            let ev = if rng.random_bool(0.5) {
                let reason = StepFailure::PostRejected;
                WorkerEvent::StepFailed { role_id: STAGE_ROLE, step_id, reason }
            } else {
                WorkerEvent::StepCompleted { role_id: STAGE_ROLE, step_id }
            };
            let at = Duration::from_micros(rng.random_range(350_000..900_000));
            self.at(at, Ev::Node(i, NodeIn::Late(ev)));
        }
    }

    /// Requests arriving over the first half second, some cancelled, then the input closes.
    fn traffic(&mut self) {
        let n = self.rng.random_range(1..=16usize);
        let mut last = Duration::ZERO;
        for i in 0..n {
            let len = self.rng.random_range(1..=MAX_SEQ as usize + 4);
            let mut prompt: Vec<u32> = (0..len).map(|_| self.rng.random_range(3..VOCAB)).collect();
            // A speculating session gets prompts that repeat a short pattern, so that the
            // n-gram drafter proposes (no further draws: the stream stays as it was).
            if self.session_cfg.0.draft_max > 0 {
                let period = 2 + i % 3;
                for j in period..prompt.len() {
                    prompt[j] = prompt[j - period];
                }
            }
            let hot = self.rng.random_bool(0.3);
            self.reqs.push(Req {
                admitted: false,
                prompt,
                max_tokens: self.rng.random_range(1..=24u32),
                temperature: if hot { 0.8 } else { 0.0 },
                seed: self.rng.random(),
                tokens: Vec::new(),
                result: None,
            });
            let at = Duration::from_micros(self.rng.random_range(300_000..450_000));
            last = last.max(at);
            self.at(at, Ev::Orch(OrchIn::Submit(i)));
            if self.rng.random_bool(0.5) {
                let later = at + Duration::from_micros(self.rng.random_range(0..60_000));
                self.at(later, Ev::Orch(OrchIn::Cancel(i)));
            }
        }
        self.report.requests = n;
        self.at(last + Duration::from_millis(1), Ev::Orch(OrchIn::CloseInput));
    }
}

/// Simulated node `i` (node id `i + 1`), booting from `base`.
fn sim_node(base: Instant, i: u32, planted: Option<Planted>) -> Node {
    Node {
        boot: NodeBoot::new(
            base,
            BootConfig {
                node_id: NodeId(u64::from(i) + 1),
                worker: WorkerPolicy::Eager,
                timeout: Duration::from_secs(10),
            },
        ),
        wctl: WorkerCtl::new(CtlConfig {
            arena_ceiling: ARENA,
            backend: Backend::Cpu,
            init_timeout: Duration::from_secs(2),
            stop_timeout: Duration::from_secs(2),
            max_restarts: 3,
            restart: crate::workerctl::RestartPolicy::DEFAULT,
        }),
        mute: false,
        stage: {
            let mut manager = ArenaManager::new(ARENA);
            manager.arena_ready();
            let plane = EdgePlane::new(manager, Component::EdgeEstablisher);
            let mut stage = StageNode::new(NodeId(u64::from(i) + 1), plane, WorkerGeneration(1));
            stage.session_opened(ORCH, SESSION);
            if planted == Some(Planted::NoLateAnswerFilter) {
                stage.plant(PlantedNodeBug::NoLateAnswerFilter);
            }
            stage
        },
        rings: HashMap::new(),
        ended: BTreeSet::new(),
        dead: false,
        paused_until: Duration::ZERO,
        slots: Vec::new(),
        role: None,
        parked: None,
        store: Default::default(),
        posted: None,
        loaded: HashMap::new(),
        next_handle: 1,
        next_in: 0,
        executed: Vec::new(),
        busy_until: Duration::ZERO,
        slow: 1,
    }
}
