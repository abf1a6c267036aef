//! Planner contract (DESIGN.md 4.3): exactly one complete plan or one typed rejection.

use proptest::prelude::*;
use std::collections::{BTreeMap, HashSet};

use crate::support::{pool, pool_with_memory};
use swactor::model::{ModelBytes, ModelFacts, RopeFacts};
use swactor::planner::{Placement, PlanRequest, Pool, plan, validate_plan};
use swactor::wire::reason::PlanRejection;
use swactor::wire::{
    ActivationDType, EdgeKind, LayerRange, NodeId, PayloadKind, RunId, RunPlan, RuntimeConfig,
    SamplingPolicy, StageIndex, WeightSource, WeightsUrl, WireDType,
};

type PoolMutation = (fn(&mut Pool), PlanRejection);
type PlanMutation = (Box<dyn Fn(&mut RunPlan)>, PlanRejection);

fn facts_with_blocks(per_block: Vec<u64>) -> ModelFacts {
    ModelFacts {
        architecture: "llama".into(),
        arch: Default::default(),
        name: Some("test".into()),
        block_count: per_block.len() as u32,
        hidden_size: 256,
        feed_forward_length: Some(512),
        head_count: 8,
        head_count_kv: 4,
        head_dim: 32,
        context_length: 4096,
        vocab_size: 512,
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        eot_token_id: None,
        tokenizer_model: Some("gpt2".into()),
        tokenizer_pre: Some("default".into()),
        rope: RopeFacts { freq_base: 10000.0, dimension_count: 32 },
        rms_norm_eps: 1e-5,
        tied_embeddings: false,
        bytes: ModelBytes {
            embedding: 1 << 20,
            head: (1 << 20) + 1024,
            tensors: per_block.iter().sum::<u64>() + (2 << 20) + 1024,
            file: 0,
            formats: Default::default(),
            per_block,
            active_per_block: Vec::new(),
        },
        tensor_types: BTreeMap::new(),
        vocab_digest: None,
    }
}

fn facts(blocks: u32) -> ModelFacts {
    facts_with_blocks(vec![2 << 20; blocks as usize])
}

fn runtime() -> RuntimeConfig {
    RuntimeConfig {
        max_seq_len: 1024,
        kv_cache: Default::default(),
        activation_dtype: ActivationDType::F32,
        max_tokens: 64,
        sampling: SamplingPolicy::Greedy,
        max_sequences: 1,
        max_top_logprobs: None,
        mask_bytes: 0,
    }
}

fn request<'a>(model: &'a ModelFacts, pool: &'a Pool, stages: Option<u32>) -> PlanRequest<'a> {
    PlanRequest {
        run_id: RunId(9),
        model,
        source: WeightSource::Local { path: "/models/m.gguf".into() },
        pool,
        stages,
        placement: Placement::default(),
        runtime: runtime(),
        prompt_tokens: 100,
        fit_context: false,
        // The other parts' tests; the prompt cache's has its own budgets.
        prompt_cache_bytes: Some(0),
        min_speedup: None,
    }
}

fn rejection(req: &PlanRequest<'_>) -> PlanRejection {
    match plan(req) {
        Ok(p) => panic!("expected a rejection, got a plan with {} stages", p.stages.len()),
        Err(e) => e.reason,
    }
}

fn ranges(plan: &RunPlan) -> Vec<LayerRange> {
    plan.stages.iter().map(|s| s.layers).collect()
}

#[test]
fn a_twelve_block_model_on_three_nodes_gets_three_contiguous_ranges_and_four_edges() {
    let model = facts(12);
    let pool = pool(3);
    let p = plan(&request(&model, &pool, Some(3))).expect("plan");
    assert_eq!(p.stages.len(), 3);
    let r = ranges(&p);
    assert_eq!(r[0].start, 0);
    assert_eq!(r[2].end, 12);
    assert!(r.windows(2).all(|w| w[0].end == w[1].start && !w[0].is_empty()));
    assert_eq!(r, [LayerRange::new(0, 4), LayerRange::new(4, 8), LayerRange::new(8, 12)]);
    let kinds: Vec<&str> = p.edges.iter().map(|e| e.kind.label()).collect();
    assert_eq!(kinds, ["token_in", "activation", "activation", "token_out"]);
    let ids: HashSet<_> = p.edges.iter().map(|e| e.edge_id).collect();
    assert_eq!(ids.len(), 4, "edge ids are unique");
}

#[test]
fn an_f16_kv_cache_halves_each_stages_predicted_kv_bytes() {
    let model = facts(12);
    let pool = pool(3);
    let f32_plan = plan(&request(&model, &pool, Some(3))).expect("plan");
    let mut req = request(&model, &pool, Some(3));
    req.runtime.kv_cache = swactor::wire::KvCacheDType::F16;
    let f16_plan = plan(&req).expect("plan");
    assert_eq!(f16_plan.runtime.kv_cache, swactor::wire::KvCacheDType::F16, "the stages get it");
    for (a, b) in f32_plan.stages.iter().zip(&f16_plan.stages) {
        assert!(a.prediction.kv_cache_bytes > 0);
        assert_eq!(b.prediction.kv_cache_bytes * 2, a.prediction.kv_cache_bytes);
    }
}

#[test]
fn edges_chain_the_orchestrator_through_every_stage_and_back() {
    let model = facts(8);
    let pool = pool(4);
    let p = plan(&request(&model, &pool, None)).expect("plan");
    let orch = p.orchestrator.node_id;
    let n = p.stages.len();
    assert_eq!(n, 4, "the stage count defaults to the pool size");
    assert_eq!(p.edges[0].kind, EdgeKind::TokenIn);
    assert_eq!((p.edges[0].producer, p.edges[0].consumer), (orch, p.stages[0].node_id));
    for i in 0..n - 1 {
        let e = &p.edges[i + 1];
        assert_eq!(e.kind, EdgeKind::Activation { from: StageIndex(i as u32) });
        assert_eq!((e.producer, e.consumer), (p.stages[i].node_id, p.stages[i + 1].node_id));
        assert_eq!(p.stages[i].outbound, e.edge_id);
        assert_eq!(p.stages[i + 1].inbound, e.edge_id);
    }
    let last = &p.edges[n];
    assert_eq!(last.kind, EdgeKind::TokenOut);
    assert_eq!((last.producer, last.consumer), (p.stages[n - 1].node_id, orch));
    assert!(p.stages[0].embedding && !p.stages[0].head);
    assert!(p.stages[n - 1].head && !p.stages[n - 1].embedding);
    assert!(p.stages[1..n - 1].iter().all(|s| !s.embedding && !s.head));
}

#[test]
fn every_edge_has_an_object_spec_and_a_ring_spec_of_the_documented_shape() {
    let model = facts(6);
    let pool = pool(3);
    for (dtype, width, slots) in [
        (ActivationDType::F32, 4u64, 1u16),
        (ActivationDType::F16, 2, 1),
        (ActivationDType::F32, 4, 8),
    ] {
        let mut req = request(&model, &pool, Some(3));
        req.runtime.activation_dtype = dtype;
        req.runtime.max_sequences = u32::from(slots);
        let p = plan(&req).expect("plan");
        // Every object begins with the micro-batch table of `max_sequences` entries.
        let table = swactor::wire::batch::table_bytes(slots);
        for e in &p.edges {
            assert!(e.ring.alignment.is_power_of_two());
            assert!(e.ring.capacity > 0 && e.ring.capacity % e.ring.alignment == 0);
            assert_eq!(e.object.prefix_bytes, table);
            match e.kind {
                EdgeKind::Activation { .. } => {
                    assert_eq!(e.object.payload, PayloadKind::Activations);
                    assert_eq!(u64::from(e.object.dtype.width()), width);
                    assert_eq!(
                        e.object.max_extent,
                        table + 1024 * 256 * width,
                        "table + max_seq_len * hidden * width"
                    );
                }
                EdgeKind::TokenOut => {
                    assert_eq!(e.object.payload, PayloadKind::TokenIds);
                    assert_eq!(
                        e.object.max_extent,
                        table + 4 * u64::from(slots) + 4 * 15 * u64::from(slots),
                        "a token per entry and room for every entry's verified draft"
                    );
                }
                _ => {
                    assert_eq!(e.object.payload, PayloadKind::TokenIds);
                    assert_eq!(e.object.dtype, WireDType::U32);
                    assert_eq!(e.object.max_extent, table + 1024 * 4);
                }
            }
        }
    }
}

#[test]
fn the_kv_cache_prediction_counts_every_slot_and_too_many_slots_are_rejected() {
    let model = facts(6);
    let pool = pool(3);
    let one = plan(&request(&model, &pool, Some(3))).expect("plan");
    let mut req = request(&model, &pool, Some(3));
    req.runtime.max_sequences = 4;
    let four = plan(&req).expect("plan");
    for (a, b) in one.stages.iter().zip(&four.stages) {
        assert_eq!(b.prediction.kv_cache_bytes, 4 * a.prediction.kv_cache_bytes);
    }
    // A node too small for eight slots' caches is refused as exceeding its memory.
    let need = four.stages[0].prediction.total_bytes;
    let small = Pool {
        nodes: pool
            .nodes
            .iter()
            .map(|n| swactor::planner::pool::PoolNode { memory_bytes: need, ..n.clone() })
            .collect(),
        ..pool.clone()
    };
    let mut req = request(&model, &small, Some(3));
    req.runtime.max_sequences = 64;
    let err = plan(&req).expect_err("too many slots");
    assert_eq!(err.reason, PlanRejection::ExceedsNodeMemory, "{err}");
    req.runtime.max_sequences = 0;
    assert_eq!(plan(&req).expect_err("zero").reason, PlanRejection::InvalidRuntime);
}

#[test]
fn planning_is_deterministic_and_never_mutates_the_pool() {
    let model = facts(10);
    let pool = pool(3);
    let before = pool.clone();
    let a = plan(&request(&model, &pool, Some(3))).expect("plan");
    let b = plan(&request(&model, &pool, Some(3))).expect("plan");
    assert_eq!(a, b);
    assert_eq!(pool, before);
}

#[test]
fn auto_placement_gives_more_blocks_to_nodes_with_more_memory() {
    let model = facts(12);
    let pool = pool_with_memory(&[1 << 30, 3 << 30]);
    let p = plan(&request(&model, &pool, Some(2))).expect("plan");
    let r = ranges(&p);
    assert!(r[1].len() >= 2 * r[0].len(), "the larger node should get about 3x the blocks: {r:?}");
}

#[test]
fn auto_placement_balances_uneven_blocks_by_bytes() {
    // One huge block first: it should sit alone on the first stage.
    let mut blocks = vec![1 << 20; 9];
    blocks.insert(0, 40 << 20);
    let model = facts_with_blocks(blocks);
    let pool = pool(2);
    let p = plan(&request(&model, &pool, Some(2))).expect("plan");
    assert_eq!(ranges(&p), [LayerRange::new(0, 1), LayerRange::new(1, 10)]);
}

#[test]
fn explicit_layers_and_node_order_are_used_as_given() {
    let model = facts(10);
    let pool = pool(3);
    let mut req = request(&model, &pool, None);
    req.placement = Placement {
        nodes: Some(vec![NodeId(3), NodeId(1)]),
        layers: Some(vec![LayerRange::new(0, 7), LayerRange::new(7, 10)]),
        by_memory: false,
        auto_stages: false,
    };
    let p = plan(&req).expect("plan");
    assert_eq!(ranges(&p), [LayerRange::new(0, 7), LayerRange::new(7, 10)]);
    assert_eq!(p.stages.iter().map(|s| s.node_id).collect::<Vec<_>>(), [NodeId(3), NodeId(1)]);
    assert_eq!(p.nodes.iter().map(|n| n.node_id).collect::<Vec<_>>(), [NodeId(3), NodeId(1)]);
}

#[test]
fn predictions_account_for_weights_kv_cache_rings_and_activation_traffic() {
    let model = facts(4);
    let pool = pool(2);
    let p = plan(&request(&model, &pool, Some(2))).expect("plan");
    let s0 = &p.stages[0].prediction;
    let s1 = &p.stages[1].prediction;
    assert_eq!(s0.weight_bytes, 2 * (2 << 20) + (1 << 20), "two blocks + embedding");
    assert_eq!(s1.weight_bytes, 2 * (2 << 20) + (1 << 20) + 1024, "two blocks + head");
    // 2 (K and V) * 1024 tokens * 4 KV heads * 32 dims * 4 bytes, per block.
    assert_eq!(s0.kv_cache_bytes, 2 * 2 * 1024 * 4 * 32 * 4);
    assert!(s0.compute_bytes > 0 && s0.process_bytes > 0);
    assert!(s1.compute_bytes > s0.compute_bytes, "the last stage holds the logits too");
    // The first stage logs the rows it sends on (one per position), the last sends tokens.
    assert_eq!(s0.row_log_bytes, 1024 * 256 * 4);
    assert_eq!(s1.row_log_bytes, 0);
    assert_eq!(
        s0.total_bytes,
        s0.weight_bytes
            + s0.kv_cache_bytes
            + s0.row_log_bytes
            + s0.ring_bytes
            + s0.compute_bytes
            + s0.process_bytes
    );
    assert_eq!(p.prediction.activation_bytes_per_token, 256 * 4);
    assert_eq!(p.prediction.prompt_activation_bytes, 100 * 256 * 4);
    assert_eq!(p.prediction.activation_hops, 1);
    assert_eq!(p.prediction.total_weight_bytes, s0.weight_bytes + s1.weight_bytes);
}

#[test]
fn a_mixture_of_experts_plan_holds_every_expert_but_counts_only_the_used_ones_as_read_per_token() {
    use swactor::model::synth::{SynthArch, SynthSpec, write_model};
    let path = crate::support::scratch().join("planner-qwen3moe.gguf");
    let spec = SynthSpec {
        blocks: 6,
        hidden: 128,
        heads: 4,
        kv_heads: 2,
        ffn: 128,
        vocab: 300,
        arch: SynthArch::Qwen3Moe,
        experts: 16,
        experts_used: 4,
        ..SynthSpec::default()
    };
    write_model(&path, &spec).expect("synth");
    let model = swactor::model::read_facts(&path).expect("facts");
    let moe = model.arch.moe.expect("experts");
    assert_eq!((moe.experts, moe.used, moe.expert_ffn, moe.normalize), (16, 4, 128, true));
    // Per block: 16 experts of three 128 x 128 f32 matrices, of which a token reads 4.
    let experts = 16 * 3 * 128 * 128 * 4;
    for b in 0..6 {
        let (all, active) = (model.bytes.per_block[b], model.bytes.active_of_block(b));
        assert_eq!(all - active, experts - experts / 4, "block {b}");
    }
    let pool = pool(3);
    let p = plan(&request(&model, &pool, Some(3))).expect("plan");
    for s in &p.stages {
        let blocks = u64::from(s.layers.len());
        let saved = blocks * (experts - experts / 4);
        let embedding_rest = if s.embedding { model.bytes.embedding - 128 * 4 } else { 0 };
        assert_eq!(
            s.prediction.weight_bytes - s.prediction.active_weight_bytes,
            saved + embedding_rest
        );
    }
    let sum = p.stages.iter().map(|s| s.prediction.active_weight_bytes).sum::<u64>();
    assert_eq!(p.prediction.active_weight_bytes, sum);
    // A dense model reads every block's bytes.
    let dense = facts(4);
    assert_eq!(dense.bytes.active_of_block(2), dense.bytes.per_block[2]);
}

#[test]
fn provisioning_projects_each_stage_onto_its_own_range_and_two_edges() {
    let model = facts(9);
    let pool = pool(3);
    let p = plan(&request(&model, &pool, Some(3))).expect("plan");
    for s in &p.stages {
        let prov = p.provision(s.stage_index).expect("projection");
        assert_eq!(prov, p.provision(s.stage_index).expect("again"), "deterministic");
        assert_eq!(prov.run_id, p.run_id);
        assert_eq!(prov.layers, s.layers);
        assert_eq!(prov.stage_count, 3);
        assert_eq!(prov.orchestrator, p.orchestrator.node_id);
        let inbound = p.edge(s.inbound).expect("inbound");
        let outbound = p.edge(s.outbound).expect("outbound");
        assert_eq!(prov.inbound.edge_id, inbound.edge_id);
        assert_eq!(prov.inbound.producer.node_id, inbound.producer);
        assert_eq!((prov.inbound.object, prov.inbound.ring), (inbound.object, inbound.ring));
        assert_eq!(prov.outbound.edge_id, outbound.edge_id);
        assert_eq!(prov.outbound.consumer.node_id, outbound.consumer);
        assert_eq!((prov.outbound.object, prov.outbound.ring), (outbound.object, outbound.ring));
        assert_eq!(prov.embedding, s.embedding);
        assert_eq!(prov.head, s.head);
    }
    let last = p.provision(StageIndex(2)).expect("last");
    assert_eq!(
        last.outbound.consumer.node_id,
        NodeId(100),
        "the last stage sends to the orchestrator"
    );
    assert!(p.provision(StageIndex(3)).is_none());
}

#[test]
fn each_request_rejection_has_its_own_reason() {
    let model = facts(12);
    let three = pool(3);
    let check = |req: PlanRequest<'_>, want: PlanRejection| assert_eq!(rejection(&req), want);

    check(request(&model, &three, Some(0)), PlanRejection::ZeroStages);
    check(request(&model, &pool(13), Some(13)), PlanRejection::TooManyStages);
    check(request(&model, &three, Some(4)), PlanRejection::NotEnoughNodes);

    let mut req = request(&model, &three, None);
    req.placement.nodes = Some(vec![NodeId(1), NodeId(7), NodeId(3)]);
    check(req, PlanRejection::UnknownNode);

    let mut req = request(&model, &three, None);
    req.placement.nodes = Some(vec![NodeId(1), NodeId(1)]);
    check(req, PlanRejection::DuplicateStageAssignment);

    let mut req = request(&model, &three, Some(3));
    req.placement.layers = Some(vec![LayerRange::new(0, 6), LayerRange::new(6, 12)]);
    check(req, PlanRejection::MissingStageAssignment);

    let mut req = request(&model, &three, Some(2));
    req.placement.nodes = Some(vec![NodeId(1), NodeId(2), NodeId(3)]);
    check(req, PlanRejection::DuplicateStageAssignment);

    for bad in [
        vec![LayerRange::new(0, 5), LayerRange::new(6, 12)], // gap
        vec![LayerRange::new(0, 7), LayerRange::new(6, 12)], // overlap
        vec![LayerRange::new(0, 0), LayerRange::new(0, 12)], // empty
        vec![LayerRange::new(0, 5), LayerRange::new(5, 11)], // not covering
        vec![LayerRange::new(0, 5), LayerRange::new(5, 13)], // past the end
        vec![LayerRange::new(6, 12), LayerRange::new(0, 6)], // out of order
    ] {
        let mut req = request(&model, &three, None);
        req.placement.layers = Some(bad.clone());
        assert_eq!(rejection(&req), PlanRejection::InvalidLayerRanges, "{bad:?}");
    }

    let tiny = pool_with_memory(&[1 << 20, 1 << 20]);
    check(request(&model, &tiny, Some(2)), PlanRejection::ExceedsNodeMemory);
}

#[test]
fn invalid_runtime_settings_are_rejected() {
    let model = facts(4);
    let pool = pool(2);
    let mutations: [fn(&mut RuntimeConfig); 7] = [
        |r| r.max_seq_len = 0,
        |r| r.max_seq_len = 4097,
        |r| r.max_tokens = 0,
        |r| {
            r.sampling =
                SamplingPolicy::Sample { temperature: -0.5, top_k: None, top_p: None, seed: 0 }
        },
        |r| {
            r.sampling =
                SamplingPolicy::Sample { temperature: f32::NAN, top_k: None, top_p: None, seed: 0 }
        },
        |r| {
            r.sampling =
                SamplingPolicy::Sample { temperature: 1.0, top_k: Some(0), top_p: None, seed: 0 }
        },
        |r| {
            r.sampling =
                SamplingPolicy::Sample { temperature: 1.0, top_k: None, top_p: Some(1.5), seed: 0 }
        },
    ];
    for m in mutations {
        let mut req = request(&model, &pool, Some(2));
        m(&mut req.runtime);
        assert_eq!(rejection(&req), PlanRejection::InvalidRuntime, "{:?}", req.runtime);
    }
    let mut req = request(&model, &pool, Some(2));
    req.prompt_tokens = 2000;
    assert_eq!(rejection(&req), PlanRejection::InvalidRuntime, "prompt longer than max_seq_len");
}

#[test]
fn a_temperature_of_zero_is_greedy_not_an_error() {
    let model = facts(4);
    let pool = pool(2);
    let mut req = request(&model, &pool, Some(2));
    let t0 = SamplingPolicy::Sample { temperature: 0.0, top_k: None, top_p: None, seed: 3 };
    req.runtime.sampling = t0;
    assert!(plan(&req).is_ok());
    assert_eq!(t0.normalized(), SamplingPolicy::Greedy);
    let logits = [0.5, 3.0, -1.0, 2.9];
    let sampler = swactor::model::sampling::Sampler::new(t0);
    assert!((0..20).all(|at| sampler.sample(&logits, at) == 1), "always the most likely token");
}

#[test]
fn a_weights_url_must_be_http_or_https_with_a_host() {
    let model = facts(4);
    let pool = pool(2);
    for url in
        ["ftp://h/m", "http://", "https://:80/m", "http://h:99999/m", "http://h m/x", "/m.gguf"]
    {
        let mut req = request(&model, &pool, Some(2));
        req.source =
            WeightSource::Url { url: url.into(), size: 1, sha256: "0".repeat(64), ranges: vec![] };
        assert_eq!(rejection(&req), PlanRejection::InvalidWeightsUrl, "{url}");
    }
    let u = WeightsUrl::parse("https://[::1]:8443/a/m.gguf?v=2#part").expect("valid");
    assert_eq!(
        (u.secure, u.server_name(), u.port, u.path.as_str()),
        (true, "::1", 8443, "/a/m.gguf?v=2")
    );
    assert_eq!(u.host_header(), "[::1]:8443");
    let u = WeightsUrl::parse("Http://models.example").expect("valid");
    assert_eq!(
        (u.secure, u.port, u.path.as_str(), u.host_header()),
        (false, 80, "/", "models.example".into())
    );
}

#[test]
fn invalid_pools_are_rejected_with_their_reason() {
    let model = facts(4);
    let mutations: [PoolMutation; 6] = [
        (|p| p.nodes[1].node_id = NodeId(1), PlanRejection::DuplicateNode),
        (|p| p.nodes[1].node_id = NodeId(100), PlanRejection::DuplicateNode),
        (|p| p.nodes[1].endpoint_id = p.nodes[0].endpoint_id.clone(), PlanRejection::DuplicateNode),
        (|p| p.nodes[0].endpoint_id = "not-hex".into(), PlanRejection::InvalidPool),
        (|p| p.nodes[0].addrs.clear(), PlanRejection::InvalidPool),
        (|p| p.nodes[0].memory_bytes = 0, PlanRejection::InvalidPool),
    ];
    for (m, want) in mutations {
        let mut pool = pool(2);
        m(&mut pool);
        assert_eq!(rejection(&request(&model, &pool, Some(2))), want);
    }
}

#[test]
fn inconsistent_model_facts_are_rejected() {
    let pool = pool(2);
    let mut m = facts(4);
    m.hidden_size = 0;
    assert_eq!(rejection(&request(&m, &pool, Some(2))), PlanRejection::InvalidHiddenDim);
    let mut m = facts(4);
    m.hidden_size = 250;
    assert_eq!(rejection(&request(&m, &pool, Some(2))), PlanRejection::InvalidHiddenDim);
    let mut m = facts(4);
    m.bytes.per_block.pop();
    assert_eq!(rejection(&request(&m, &pool, Some(2))), PlanRejection::ModelInconsistent);
    let mut m = facts(4);
    m.head_count_kv = 3;
    assert_eq!(rejection(&request(&m, &pool, Some(2))), PlanRejection::ModelInconsistent);
}

#[test]
fn plan_validation_catches_every_structural_corruption() {
    let model = facts(6);
    let pool = pool(3);
    let good = plan(&request(&model, &pool, Some(3))).expect("plan");
    assert_eq!(validate_plan(&good), Ok(()));
    let cases: Vec<PlanMutation> = vec![
        (Box::new(|p| p.edges[1].consumer = NodeId(3)), PlanRejection::EdgeEndpointMismatch),
        (Box::new(|p| p.edges[0].producer = NodeId(1)), PlanRejection::EdgeEndpointMismatch),
        (
            Box::new(|p| p.stages[1].inbound = p.edges[2].edge_id),
            PlanRejection::EdgeEndpointMismatch,
        ),
        (
            Box::new(|p| {
                p.edges.pop();
            }),
            PlanRejection::EdgeEndpointMismatch,
        ),
        (Box::new(|p| p.edges[2].edge_id = p.edges[1].edge_id), PlanRejection::DuplicateEdgeId),
        (Box::new(|p| p.edges[1].object.max_extent = 0), PlanRejection::InvalidExtent),
        (Box::new(|p| p.edges[1].object.max_extent += 4), PlanRejection::InvalidExtent),
        (Box::new(|p| p.edges[0].object.dtype = WireDType::F32), PlanRejection::InvalidDTypeWidth),
        (Box::new(|p| p.edges[1].object.dtype = WireDType::F16), PlanRejection::InvalidDTypeWidth),
        (Box::new(|p| p.edges[1].object.row_elems = 128), PlanRejection::InvalidHiddenDim),
        (Box::new(|p| p.edges[2].ring.alignment = 48), PlanRejection::AlignmentNotPowerOfTwo),
        (
            Box::new(|p| p.stages[1].node_id = p.stages[0].node_id),
            PlanRejection::DuplicateStageAssignment,
        ),
        (Box::new(|p| p.stages[1].node_id = NodeId(55)), PlanRejection::UnknownNode),
        (Box::new(|p| p.stages[1].layers.end += 1), PlanRejection::InvalidLayerRanges),
        (Box::new(|p| p.stages.clear()), PlanRejection::ZeroStages),
        (Box::new(|p| p.stages[2].head = false), PlanRejection::MissingStageAssignment),
    ];
    for (i, (corrupt, want)) in cases.iter().enumerate() {
        let mut p = good.clone();
        corrupt(&mut p);
        assert_eq!(validate_plan(&p).map_err(|e| e.reason), Err(*want), "case {i}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_plan_has_contiguous_ranges_covering_every_block_once(
        blocks in proptest::collection::vec(1u64..(64 << 20), 1..40),
        memory in proptest::collection::vec(1u64..8, 1..8),
    ) {
        let model = facts_with_blocks(blocks.clone());
        let pool = pool_with_memory(&memory.iter().map(|m| m << 36).collect::<Vec<_>>());
        let stages = (memory.len() as u32).min(blocks.len() as u32);
        let p = plan(&request(&model, &pool, Some(stages))).expect("plan");
        prop_assert_eq!(validate_plan(&p), Ok(()));
        let covered: Vec<u32> = p.stages.iter().flat_map(|s| s.layers.blocks()).collect();
        prop_assert_eq!(covered, (0..blocks.len() as u32).collect::<Vec<_>>());
        prop_assert_eq!(p.edges.len(), stages as usize + 1);
    }
}

#[test]
fn a_stage_whose_rings_do_not_fit_its_nodes_arena_is_rejected_with_the_fix() {
    let model = facts(4);
    let mut pool = pool(2);
    pool.nodes[1].arena_bytes = Some(4096);
    let err = plan(&request(&model, &pool, Some(2))).expect_err("rejected");
    assert_eq!(err.reason, PlanRejection::ExceedsNodeArena);
    assert!(err.message.contains("--arena-bytes") && err.message.contains("node 2"), "{err:?}");
    pool.nodes[1].arena_bytes = Some(1 << 30);
    assert!(plan(&request(&model, &pool, Some(2))).is_ok(), "a big enough arena fits");
}

#[test]
fn a_pool_file_may_leave_memory_out_but_a_plan_needs_it_from_somewhere() {
    let text = format!(
        "[orchestrator]\nnode_id = 100\n\n[[nodes]]\nnode_id = 1\nendpoint_id = \"{:064x}\"\n\
         addrs = [\"127.0.0.1:7400\"]\n",
        1
    );
    let parsed = Pool::from_toml(&text).expect("memory_bytes is optional");
    assert_eq!((parsed.nodes[0].memory_bytes, parsed.nodes[0].arena_bytes), (0, None));
    let err = plan(&request(&facts(4), &parsed, Some(1))).expect_err("no memory known");
    assert_eq!(err.reason, PlanRejection::InvalidPool);
    assert!(err.message.contains("memory_bytes"), "{err:?}");
}

#[test]
fn before_the_nodes_report_a_node_without_memory_bytes_is_judged_by_everything_but_its_memory() {
    let model = facts(12);
    let unknown = pool_with_memory(&[0, 0, 8 << 30]);
    // `plan` has no report to take memory from; the check before the reports accepts it.
    assert_eq!(rejection(&request(&model, &unknown, Some(3))), PlanRejection::InvalidPool);
    swactor::planner::check_before_reports(&request(&model, &unknown, Some(3)))
        .expect("memory is the node's report's to give");
    // Everything else is still judged: more stages than nodes, and a declared memory.
    let err = swactor::planner::check_before_reports(&request(&model, &unknown, Some(4)))
        .expect_err("four stages on three nodes");
    assert_ne!(err.reason, PlanRejection::InvalidPool, "{err}");
    let tiny = pool_with_memory(&[0, 0, 1 << 10]);
    let mut req = request(&model, &tiny, Some(3));
    req.placement.layers =
        Some(vec![LayerRange::new(0, 4), LayerRange::new(4, 8), LayerRange::new(8, 12)]);
    let err = swactor::planner::check_before_reports(&req).expect_err("node 3 is too small");
    assert_eq!(err.reason, PlanRejection::ExceedsNodeMemory, "{err}");
}

#[test]
fn a_pool_file_leaves_out_a_memory_it_does_not_know_and_reads_back_the_same() {
    let pool = pool_with_memory(&[0, 8 << 30]);
    let text = pool.to_toml();
    assert_eq!(text.matches("memory_bytes").count(), 1, "{text}");
    assert_eq!(Pool::from_toml(&text).expect("parse"), pool);
}

#[test]
fn a_context_left_to_the_planner_is_the_trained_length_lowered_to_what_memory_holds() {
    use swactor::wire::{ContextWhy, PlanContext};
    let model = facts(4);
    let at = |tokens: u32| {
        let roomy = pool(1);
        let mut req = request(&model, &roomy, Some(1));
        req.runtime.max_seq_len = tokens;
        plan(&req).expect("plan").stages[0].prediction.total_bytes
    };
    // A node that holds a context of 1024 tokens and not one of 1280.
    let (fits, too_much) = (at(1024), at(1280));
    assert!(fits < too_much);
    let small = pool_with_memory(&[fits]);
    let mut req = request(&model, &small, Some(1));
    req.runtime.max_seq_len = model.context_length;
    assert_eq!(rejection(&req), PlanRejection::ExceedsNodeMemory, "a given context is kept");
    req.fit_context = true;
    let p = plan(&req).expect("a context that fits");
    assert_eq!(p.runtime.max_seq_len, 1024, "the longest multiple of 256 that fits");
    let why = ContextWhy::Memory { node: NodeId(1) };
    assert_eq!(p.context, Some(PlanContext { tokens: 1024, trained: 4096, why }));
    validate_plan(&p).expect("a valid plan");
    // A node that holds the trained length gets it, and says so.
    let roomy = pool(1);
    let p = plan(&PlanRequest { pool: &roomy, ..req.clone() }).expect("plan");
    let why = ContextWhy::Trained;
    assert_eq!(p.context, Some(PlanContext { tokens: 4096, trained: 4096, why }));
    // A node that holds no context at all is refused as before.
    let tiny = pool_with_memory(&[1 << 20]);
    let err = plan(&PlanRequest { pool: &tiny, ..req }).expect_err("nothing fits");
    assert_eq!(err.reason, PlanRejection::ExceedsNodeMemory);
}

#[test]
fn the_prompt_cache_store_is_counted_in_every_stage_and_an_explicit_budget_must_fit() {
    let model = facts(12);
    let pool = pool(3);
    let with = |bytes: Option<u64>| PlanRequest {
        prompt_cache_bytes: bytes,
        ..request(&model, &pool, Some(3))
    };
    // 0: no store.
    let off = plan(&with(Some(0))).expect("plan");
    assert_eq!(off.prompt_cache.blocks, 0);
    assert_eq!(off.prompt_cache.off, Some(swactor::wire::PromptCacheOff::Disabled));
    // An explicit budget: every stage keeps the same blocks, within the budget, and its
    // total counts them.
    let budget = 64 << 20;
    let on = plan(&with(Some(budget))).expect("plan");
    let c = on.prompt_cache;
    assert!(c.blocks > 0 && c.block_tokens == 64, "{c:?}");
    for (s, o) in on.stages.iter().zip(&off.stages) {
        let p = &s.prediction;
        assert!(p.prompt_cache_bytes > 0 && p.prompt_cache_bytes <= budget, "{p:?}");
        assert_eq!(p.total_bytes, o.prediction.total_bytes + p.prompt_cache_bytes);
        assert_eq!(p.prompt_cache_bytes % u64::from(c.blocks), 0);
    }
    // The default: a quarter of what the node has left, never past its memory.
    let default = plan(&with(None)).expect("plan");
    for s in &default.stages {
        let p = &s.prediction;
        let left = p.node_memory_bytes - (p.total_bytes - p.prompt_cache_bytes);
        assert!(p.prompt_cache_bytes > 0 && p.prompt_cache_bytes <= left / 4, "{p:?}");
    }
    // A budget the node cannot hold is refused.
    assert_eq!(rejection(&with(Some(8 << 30))), PlanRejection::ExceedsNodeMemory);
    // A node's own budget (its pool entry or its report): the smaller of it and the
    // run's holds, and a node's 0 leaves the run without a store.
    let mut small = pool.clone();
    small.nodes[1].prompt_cache_bytes = Some(budget / 4);
    let req = PlanRequest { prompt_cache_bytes: Some(budget), ..request(&model, &small, Some(3)) };
    let capped = plan(&req).expect("plan");
    assert!(capped.prompt_cache.blocks <= c.blocks / 4, "{:?}", capped.prompt_cache);
    assert!(capped.stages[1].prediction.prompt_cache_bytes <= budget / 4);
    small.nodes[1].prompt_cache_bytes = Some(0);
    let req = PlanRequest { prompt_cache_bytes: None, ..request(&model, &small, Some(3)) };
    assert_eq!(plan(&req).expect("plan").prompt_cache.blocks, 0);
}
