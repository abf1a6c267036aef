//! The cost model and the speed-aware planner (`specs/cost-model.md`): ranges balance the
//! nodes' measured speed within their memory, a plan predicts its own speed beside the best
//! single node's, and `--min-speedup` refuses a plan predicted too slow.

use std::collections::BTreeMap;

use crate::support::pool_with_memory;
use swactor::model::{FormatBytes, ModelBytes, ModelFacts, RopeFacts};
use swactor::planner::{Placement, PlanRequest, Pool, plan};
use swactor::wire::reason::PlanRejection;
use swactor::wire::{
    ActivationDType, FormatRate, LinkRtt, NodeId, NodeSpeed, PlacedBy, RunId, RunPlan,
    RuntimeConfig, SamplingPolicy, SplitVerdict, WeightSource,
};

const MIB: u64 = 1 << 20;

/// A 24-block model of 32 MiB blocks, all Q8_0 (a weight per 1.0625 bytes).
fn model() -> ModelFacts {
    let per_block = vec![32 * MIB; 24];
    let total: u64 = per_block.iter().sum::<u64>() + 8 * MIB;
    let formats = BTreeMap::from([(
        "q8_0".to_string(),
        FormatBytes { bytes: total, weights: total * 16 / 17 },
    )]);
    ModelFacts {
        architecture: "llama".into(),
        arch: Default::default(),
        name: Some("cost".into()),
        block_count: 24,
        hidden_size: 2048,
        feed_forward_length: Some(5632),
        head_count: 32,
        head_count_kv: 4,
        head_dim: 64,
        context_length: 2048,
        vocab_size: 512,
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        eot_token_id: None,
        tokenizer_model: Some("gpt2".into()),
        tokenizer_pre: Some("default".into()),
        rope: RopeFacts { freq_base: 10000.0, dimension_count: 64 },
        rms_norm_eps: 1e-5,
        tied_embeddings: false,
        bytes: ModelBytes {
            embedding: 8 * MIB,
            head: 8 * MIB,
            tensors: total + 8 * MIB,
            file: 0,
            formats,
            per_block,
            active_per_block: Vec::new(),
        },
        tensor_types: BTreeMap::new(),
        vocab_digest: None,
    }
}

/// A node's speed: `read` GB/s of memory, `gmacs` GMAC/s of one-row Q8_0 products.
fn speed(read: u64, gmacs: u64) -> NodeSpeed {
    NodeSpeed {
        threads: 1,
        isa: "avx2".into(),
        read_mbs: read * 1000,
        formats: vec![FormatRate {
            format: "q8_0".into(),
            decode_mmacs: gmacs * 1000,
            prefill_mmacs: gmacs * 3000,
        }],
    }
}

/// A pool of nodes of `memory` bytes each, with these speeds and round trips (from the
/// orchestrator, and measured by the node to every other node and to the orchestrator).
fn pool(nodes: &[(u64, Option<NodeSpeed>, Option<u64>)]) -> Pool {
    let mut pool = pool_with_memory(&nodes.iter().map(|n| n.0).collect::<Vec<_>>());
    let ids: Vec<NodeId> = pool.nodes.iter().map(|n| n.node_id).chain([NodeId(100)]).collect();
    for (node, (_, speed, rtt)) in pool.nodes.iter_mut().zip(nodes) {
        node.speed = speed.clone();
        node.rtt_us = *rtt;
        if let Some(rtt_us) = *rtt {
            let others = ids.iter().filter(|&&id| id != node.node_id);
            node.links = others.map(|&to| LinkRtt { to, rtt_us, bytes_per_s: None }).collect();
        }
    }
    pool
}

fn request<'a>(model: &'a ModelFacts, pool: &'a Pool) -> PlanRequest<'a> {
    PlanRequest {
        run_id: RunId(3),
        model,
        source: WeightSource::Local { path: "/m.gguf".into() },
        pool,
        stages: None,
        placement: Placement::default(),
        runtime: RuntimeConfig {
            max_seq_len: 512,
            kv_cache: Default::default(),
            activation_dtype: ActivationDType::F32,
            max_tokens: 16,
            sampling: SamplingPolicy::Greedy,
            max_sequences: 4,
            max_top_logprobs: None,
            mask_bytes: 0,
        },
        prompt_tokens: 128,
        fit_context: false,
        prompt_cache_bytes: Some(0),
        min_speedup: None,
    }
}

fn blocks(plan: &RunPlan) -> Vec<u32> {
    plan.stages.iter().map(|s| s.layers.end - s.layers.start).collect()
}

#[test]
fn a_node_three_times_as_fast_gets_about_three_times_the_layers_and_the_plan_says_so() {
    let m = model();
    let p = pool(&[(8 << 30, Some(speed(30, 60)), None), (8 << 30, Some(speed(10, 20)), None)]);
    let plan = plan(&request(&m, &p)).expect("plan");
    let b = blocks(&plan);
    assert!(b[0] >= 16 && b[0] <= 19, "fast node's blocks: {b:?}");
    let s = plan.speed.expect("every node reported its speed");
    assert_eq!(s.placed_by, PlacedBy::Speed);
    let (fast, slow) = (s.stages[0].step_us as f64, s.stages[1].step_us as f64);
    assert!((fast / slow - 1.0).abs() < 0.2, "balanced stage steps: {fast} vs {slow} us");
}

#[test]
fn the_speed_aware_split_is_predicted_faster_than_the_memory_only_split() {
    let m = model();
    let p = pool(&[(8 << 30, Some(speed(30, 60)), None), (8 << 30, Some(speed(10, 20)), None)]);
    let by_speed = plan(&request(&m, &p)).expect("plan");
    let mut req = request(&m, &p);
    req.placement.by_memory = true;
    let by_memory = plan(&req).expect("plan");
    assert_eq!(blocks(&by_memory), [12, 12]);
    let (fast, even) = (by_speed.speed.expect("speed"), by_memory.speed.expect("speed"));
    assert_eq!(even.placed_by, PlacedBy::Memory);
    assert!(fast.pipeline.decode_tok_s > even.pipeline.decode_tok_s * 1.1);
    assert!(fast.pipeline.decode_tok_s_concurrent > even.pipeline.decode_tok_s_concurrent * 1.1);
}

#[test]
fn a_fast_node_with_little_memory_gets_only_the_layers_that_fit_it() {
    let m = model();
    // 300 MiB holds about 8 of the 32 MiB blocks with their KV cache and the process.
    let p = pool(&[(300 * MIB, Some(speed(60, 120)), None), (8 << 30, Some(speed(10, 20)), None)]);
    let plan = plan(&request(&m, &p)).expect("plan");
    let s0 = &plan.stages[0].prediction;
    assert!(s0.total_bytes <= s0.node_memory_bytes, "{s0:?}");
    assert!(blocks(&plan)[0] < 12, "{:?}", blocks(&plan));
}

#[test]
fn a_node_without_a_speed_report_leaves_the_plan_balanced_by_memory_and_unpredicted() {
    let m = model();
    let p = pool(&[(8 << 30, Some(speed(30, 60)), None), (8 << 30, None, None)]);
    let plan = plan(&request(&m, &p)).expect("plan");
    assert_eq!(blocks(&plan), [12, 12]);
    assert!(plan.speed.is_none());
}

#[test]
fn splitting_over_equal_nodes_costs_one_sequence_a_little_and_the_verdict_names_the_single_node() {
    let m = model();
    let p = pool(&[(8 << 30, Some(speed(20, 40)), None), (8 << 30, Some(speed(20, 40)), None)]);
    let s = plan(&request(&m, &p)).expect("plan").speed.expect("speed");
    let Some((node, alone)) = s.single else { panic!("each node holds the model: {s:?}") };
    assert_eq!(node, NodeId(1), "ties go to the first node");
    let SplitVerdict::Costs { speedup } = s.verdict else { panic!("{:?}", s.verdict) };
    assert!(speedup > 0.9 && speedup < 1.0, "one more hop costs little: {speedup}");
    assert!(alone.decode_tok_s > s.pipeline.decode_tok_s);
    // Four sequences share a read of the weights a step: two stages in two groups of two
    // serve them at least at the rate of one node stepping all four at once (whose every
    // row beyond the first adds its compute).
    assert!(s.pipeline.decode_tok_s_concurrent > 3.0 * s.pipeline.decode_tok_s);
    let batched = s.pipeline.decode_tok_s_concurrent / alone.decode_tok_s_concurrent;
    assert!((1.0..1.5).contains(&batched), "{batched}");
}

#[test]
fn a_model_no_single_node_holds_is_predicted_as_a_split_that_is_needed() {
    let m = model();
    let small = 750 * MIB;
    let p = pool(&[(small, Some(speed(20, 40)), None), (small, Some(speed(20, 40)), None)]);
    let s = plan(&request(&m, &p)).expect("plan").speed.expect("speed");
    assert_eq!(s.verdict, SplitVerdict::Needed);
    assert!(s.single.is_none());
    let mut req = request(&m, &p);
    req.min_speedup = Some(5.0);
    assert!(plan(&req).is_ok(), "a needed split passes any --min-speedup");
}

#[test]
fn slow_links_lower_the_predicted_rate_by_their_round_trips_and_min_speedup_refuses_it() {
    let m = model();
    let near = pool(&[
        (8 << 30, Some(speed(20, 40)), Some(200)),
        (8 << 30, Some(speed(20, 40)), Some(200)),
    ]);
    let far = pool(&[
        (8 << 30, Some(speed(20, 40)), Some(80_000)),
        (8 << 30, Some(speed(20, 40)), Some(80_000)),
    ]);
    let a = plan(&request(&m, &near)).expect("plan").speed.expect("speed");
    let b = plan(&request(&m, &far)).expect("plan").speed.expect("speed");
    assert!(!a.links_assumed && !b.links_assumed);
    // Three one-way hops of half the 80 ms round trip each token: about 120 ms more.
    let extra_ms = 1e3 / b.pipeline.decode_tok_s - 1e3 / a.pipeline.decode_tok_s;
    assert!((extra_ms - 119.7).abs() < 2.0, "{extra_ms} ms");
    assert!(b.pipeline.ttft_ms - a.pipeline.ttft_ms > 110.0);
    let mut req = request(&m, &far);
    req.min_speedup = Some(0.9);
    let err = plan(&req).expect_err("a split of a third the speed is below 0.9");
    assert_eq!(err.reason, PlanRejection::BelowMinSpeedup, "{err}");
    assert!(err.message.contains("node 1 alone"), "{err}");
    req.min_speedup = Some(0.3);
    assert!(plan(&req).is_ok());
}

#[test]
fn a_hop_the_node_did_not_measure_is_estimated_from_both_ends_round_trips() {
    let m = model();
    let mut p = pool(&[
        (8 << 30, Some(speed(20, 40)), Some(20_000)),
        (8 << 30, Some(speed(20, 40)), Some(60_000)),
    ]);
    let measured = plan(&request(&m, &p)).expect("plan").speed.expect("speed");
    assert!(!measured.links_assumed);
    p.nodes[0].links.clear();
    let estimated = plan(&request(&m, &p)).expect("plan").speed.expect("speed");
    assert!(estimated.links_assumed);
    // Node 1 measured 20 ms to node 2; estimated, the link is the mean: 40 ms.
    let (a, b) = (measured.stages[0].hop_us as f64, estimated.stages[0].hop_us as f64);
    assert!((b - a - 10_000.0).abs() < 50.0, "{a} -> {b}");
}

#[test]
fn min_speedup_without_a_speed_report_is_refused_with_the_same_reason() {
    let m = model();
    let p = pool(&[(8 << 30, Some(speed(20, 40)), None), (8 << 30, None, None)]);
    let mut req = request(&m, &p);
    req.min_speedup = Some(1.0);
    assert_eq!(plan(&req).expect_err("no speed").reason, PlanRejection::BelowMinSpeedup);
}

#[test]
fn a_pool_file_carries_a_nodes_speed_and_round_trip_through_its_text() {
    let p = pool(&[(8 << 30, Some(speed(20, 40)), Some(20_000)), (8 << 30, None, None)]);
    let back = Pool::from_toml(&p.to_toml()).expect("parse");
    assert_eq!(back, p);
    assert!(p.to_toml().contains("rtt_us = 20000"), "{}", p.to_toml());
}

#[test]
fn a_first_prompt_over_a_slow_link_pays_for_the_window_growing_and_one_that_fits_does_not() {
    use swactor::planner::cost::{INITIAL_WINDOW, slow_start_us};
    assert_eq!(slow_start_us(80_000, INITIAL_WINDOW), 0.0);
    // Seven windows' worth: three doublings.
    let us = slow_start_us(80_000, 7 * INITIAL_WINDOW);
    assert!((us - 240_000.0).abs() < 1.0, "{us}");
    // A 128-token prompt's 1 MiB of activations over an 80 ms link: three one-way hops of
    // 40 ms and about 6.5 round trips of slow start on the one activation link.
    let m = model();
    let link = |rtt: u64| {
        pool(&[
            (8 << 30, Some(speed(20, 40)), Some(rtt)),
            (8 << 30, Some(speed(20, 40)), Some(rtt)),
        ])
    };
    let (near, far) = (link(200), link(80_000));
    let ttft =
        |p: &Pool| plan(&request(&m, p)).expect("plan").speed.expect("speed").pipeline.ttft_ms;
    let extra = ttft(&far) - ttft(&near);
    assert!((extra - 637.0).abs() < 15.0, "{extra} ms");
}

#[test]
fn a_links_measured_bandwidth_prices_the_first_prompts_bytes_and_the_probe_fits_it_back() {
    use swactor::planner::cost::{fitted_bytes_per_s, slow_start_us, transfer_us};
    const MIB: u64 = 1 << 20;
    // 1 MiB over a 20 ms link at 2 MB/s: the rate bounds it (524 ms), not slow start (129 ms).
    assert!((transfer_us(20_000, MIB, 2.0) - 524_288.0).abs() < 1.0);
    // The probe's transfer of it (a round trip, then the bytes) fits back to 2 MB/s.
    assert_eq!(fitted_bytes_per_s(MIB, 20_000 + 524_288, 20_000), Some(2_000_000));
    // Over an 80 ms link without a limit only slow start shows: too fast to tell.
    let ss = slow_start_us(80_000, MIB) as u64;
    assert_eq!(fitted_bytes_per_s(MIB, 80_000 + ss + 5_000, 80_000), None);
    // Planned: the same two nodes, their link measured at 2 MB/s instead of not at all. The
    // 128-token prompt's 1 MiB crosses it once: about half a second more to the first token.
    let m = model();
    let node = || (8 << 30, Some(speed(20, 40)), Some(200));
    let fast = pool(&[node(), node()]);
    let mut slow = fast.clone();
    for n in &mut slow.nodes {
        for l in &mut n.links {
            l.bytes_per_s = Some(2_000_000);
        }
    }
    let speed_of = |p: &Pool| plan(&request(&m, p)).expect("plan").speed.expect("speed").pipeline;
    let extra = speed_of(&slow).ttft_ms - speed_of(&fast).ttft_ms;
    assert!((500.0..530.0).contains(&extra), "{extra} ms");
    // A decode hop's few KB barely notice it.
    assert!(speed_of(&slow).decode_tok_s > 0.8 * speed_of(&fast).decode_tok_s);
}

#[test]
fn a_hop_is_priced_at_the_bandwidth_its_receiver_measured_in_its_own_direction() {
    // Node 2 reads node 1's bytes at 2 MB/s (node 1's upload, say a home line), node 1
    // reads node 2's at line rate. The prompt crosses from stage 0 (node 1) to stage 1
    // (node 2): node 2's measurement prices it, whichever way round the links are listed.
    let m = model();
    let node = || (8 << 30, Some(speed(20, 40)), Some(200));
    let fast = pool(&[node(), node()]);
    let (first, second) = (fast.nodes[0].node_id, fast.nodes[1].node_id);
    let rate = |p: &mut Pool, at: NodeId, from: NodeId, bytes_per_s: u64| {
        let n = p.nodes.iter_mut().find(|n| n.node_id == at).expect("node");
        n.links.iter_mut().find(|l| l.to == from).expect("link").bytes_per_s = Some(bytes_per_s);
    };
    let (mut slow_up, mut slow_down) = (fast.clone(), fast.clone());
    rate(&mut slow_up, second, first, 2_000_000);
    rate(&mut slow_down, first, second, 2_000_000);
    let ttft = |p: &Pool| {
        let plan = plan(&request(&m, p)).expect("plan");
        assert_eq!(plan.stages[0].node_id, first, "stage 0 on the first node");
        plan.speed.expect("speed").pipeline.ttft_ms
    };
    let extra = ttft(&slow_up) - ttft(&fast);
    assert!((500.0..530.0).contains(&extra), "the hop's own direction is slow: {extra} ms");
    let extra = ttft(&slow_down) - ttft(&fast);
    assert!(extra.abs() < 5.0, "only the way back is slow: {extra} ms");
}

#[test]
fn speculation_is_priced_at_the_runs_own_draft_lengths_and_acceptance() {
    let m = model();
    let p = pool(&[
        (8 << 30, Some(speed(20, 40)), Some(20_000)),
        (8 << 30, Some(speed(20, 40)), Some(20_000)),
    ]);
    let s = plan(&request(&m, &p)).expect("plan").speed.expect("speed");
    assert_eq!(s.round_trip_us.len(), swactor::wire::ROUND_ROWS as usize);
    assert!(s.round_trip_us.windows(2).all(|w| w[0] <= w[1]), "{:?}", s.round_trip_us);
    // 32 decoded tokens: 10 trips drafted 4 tokens each and kept 2 of them, 2 trips drafted
    // nothing: 12 trips for 32 tokens.
    let rate = s.speculative_tok_s(33, 10, 40, 20).expect("priced");
    let plain = s.pipeline.decode_tok_s;
    assert!(rate > 2.0 * plain && rate < 32.0 / 12.0 * plain, "{rate} vs {plain}");
    assert_eq!(s.speculative_tok_s(1, 0, 0, 0), None, "nothing decoded");
}

#[test]
fn auto_stages_splits_over_near_links_and_keeps_one_node_over_far_ones() {
    let m = model();
    // Bound by compute, two nodes serve four sequences faster than one; 400 ms links cost
    // more than the second node gives.
    let fast_read = |rtt| (8 << 30, Some(speed(100, 10)), Some(rtt));
    let auto = |p: &Pool| {
        let mut req = request(&m, p);
        req.placement.auto_stages = true;
        plan(&req).expect("plan")
    };
    let near = auto(&pool(&[fast_read(200), fast_read(200)]));
    assert_eq!(near.stages.len(), 2);
    let far = auto(&pool(&[fast_read(400_000), fast_read(400_000)]));
    assert_eq!(far.stages.len(), 1);
    assert_eq!(far.speed.expect("speed").verdict, SplitVerdict::Single);
    // Without every node's speed it plans one stage per node, as without the flag.
    let unknown = auto(&pool(&[fast_read(200), (8 << 30, None, None)]));
    assert_eq!(unknown.stages.len(), 2);
}
