//! Test fixtures shared by the stage controller's and the stage node's tests: a stage's
//! provisioning as an orchestrator would send it.

use crate::wire::{
    ActivationDType, EdgeId, LayerRange, NodeId, ObjectSpec, Peer, ProvisionStage,
    RecvEdgeProvision, RingSpec, RunId, RuntimeConfig, SamplingPolicy, SendEdgeProvision,
    StageIndex, WeightSource,
};

pub(crate) const ORCH: NodeId = NodeId(100);
pub(crate) const HIDDEN: u32 = 64;

pub(crate) fn peer(n: u64) -> Peer {
    Peer { node_id: NodeId(n), endpoint_id: Some(format!("{n:064x}")), addrs: vec![], relay: None }
}

pub(crate) fn prov(stage: u32, count: u32) -> ProvisionStage {
    let act = ObjectSpec::activations(128, HIDDEN, ActivationDType::F32);
    let inbound_spec = if stage == 0 { ObjectSpec::token_ids(128) } else { act };
    let outbound_spec = if stage + 1 == count { ObjectSpec::token_ids(1) } else { act };
    ProvisionStage {
        run_id: RunId(9),
        orchestrator: ORCH,
        stage_index: StageIndex(stage),
        stage_count: count,
        layers: LayerRange::new(stage * 2, stage * 2 + 2),
        block_count: count * 2,
        embedding: stage == 0,
        head: stage + 1 == count,
        weights: WeightSource::Local { path: "/m.gguf".into() },
        runtime: RuntimeConfig {
            max_seq_len: 128,
            kv_cache: crate::wire::KvCacheDType::F16,
            activation_dtype: ActivationDType::F32,
            max_tokens: 16,
            sampling: SamplingPolicy::Greedy,
            max_sequences: 1,
            max_top_logprobs: None,
            mask_bytes: 0,
        },
        inbound: RecvEdgeProvision {
            edge_id: EdgeId(u64::from(stage) + 1),
            producer: peer(1),
            object: inbound_spec,
            ring: RingSpec { capacity: 65536, alignment: 128 },
        },
        outbound: SendEdgeProvision {
            edge_id: EdgeId(u64::from(stage) + 2),
            consumer: peer(2),
            object: outbound_spec,
            ring: RingSpec { capacity: 65536, alignment: 128 },
        },
        prompt_cache: Default::default(),
        resume_from: None,
    }
}
