//! Memory of a local pipeline's stages, predicted and measured: the planner's prediction
//! for each stage of `run local` (the same plan its equal nodes get), and each node's and
//! worker's peak resident memory read from `/proc` while it runs.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{BenchError, err};

/// One stage's memory, predicted beside measured.
#[derive(Debug, Clone, Serialize)]
pub struct StageMemory {
    /// The stage.
    pub stage: u32,
    /// The node that ran it.
    pub node_id: u64,
    /// What the plan predicted for it (weights, KV caches, rings, scratch, processes).
    pub predicted_bytes: u64,
    /// Peak resident memory of its node and worker processes (`VmHWM`, the ring arena
    /// that both map counted in each).
    pub measured_bytes: u64,
}

/// The plan's predicted total per stage for `stages` equal nodes running `model` with
/// `max_seq_len` positions and one sequence, as `(stage, node id, bytes)`.
pub fn predicted(
    model: &Path,
    stages: u32,
    max_seq_len: u32,
) -> Result<Vec<(u32, u64, u64)>, BenchError> {
    use crate::planner::{Placement, PlanRequest, Pool, plan};
    use crate::wire::{ActivationDType, RunId, RuntimeConfig, SamplingPolicy, WeightSource};
    let facts = crate::model::read_facts(model).map_err(err)?;
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    for k in 1..=stages {
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {k}\nendpoint_id = \"{k:064x}\"\naddrs = [\"127.0.0.1:1\"]\n\
             memory_bytes = {}\n\n",
            u64::MAX / 4
        ));
    }
    let pool = Pool::from_toml(&pool).map_err(err)?;
    let plan = plan(&PlanRequest {
        run_id: RunId(1),
        model: &facts,
        source: WeightSource::Local { path: model.display().to_string() },
        pool: &pool,
        stages: Some(stages),
        placement: Placement::default(),
        runtime: RuntimeConfig {
            max_seq_len,
            kv_cache: Default::default(),
            activation_dtype: ActivationDType::F32,
            max_tokens: 1,
            sampling: SamplingPolicy::Greedy,
            max_sequences: 1,
            max_top_logprobs: None,
            mask_bytes: 0,
        },
        fit_context: false,
        prompt_cache_bytes: None,
        min_speedup: None,
        prompt_tokens: 1,
    })
    .map_err(|e| err(format!("{e:?}")))?;
    Ok(plan
        .stages
        .iter()
        .map(|s| (s.stage_index.0, s.node_id.0, s.prediction.total_bytes))
        .collect())
}

/// Peak resident bytes of each `node boot` process under `root` plus its children (its
/// worker), by node id; read once (call it while the pipeline runs, keeping the largest).
pub fn stage_peaks(root: u32) -> BTreeMap<u64, u64> {
    let procs = processes();
    let children = |p: u32| procs.iter().filter(move |(_, pp)| *pp == p).map(|(c, _)| *c);
    let mut peaks = BTreeMap::new();
    for node in children(root) {
        let Some(id) = node_id(node) else { continue };
        let own = peak_resident(node);
        let workers: u64 = children(node).map(peak_resident).sum();
        peaks.insert(id, own + workers);
    }
    peaks
}

/// The processes whose parent is `pid`.
pub fn children(pid: u32) -> Vec<u32> {
    processes().into_iter().filter(|&(_, p)| p == pid).map(|(c, _)| c).collect()
}

/// Every process as `(pid, parent)`.
fn processes() -> Vec<(u32, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let parent: u32 = stat.rsplit_once(") ")?.1.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, parent))
        })
        .collect()
}

/// The `--node-id` of a `node boot` process.
fn node_id(pid: u32) -> Option<u64> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let at = args.iter().position(|a| *a == b"--node-id")?;
    std::str::from_utf8(args.get(at + 1)?).ok()?.parse().ok()
}

/// Peak resident memory (`VmHWM`) of `pid` in bytes (0 once it is gone).
pub fn peak_resident(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// Keeps the largest of each node's samples.
pub fn keep_peaks(into: &mut BTreeMap<u64, u64>, sample: BTreeMap<u64, u64>) {
    for (node, bytes) in sample {
        let e = into.entry(node).or_default();
        *e = (*e).max(bytes);
    }
}
