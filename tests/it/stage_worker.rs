//! The llama stage role in real worker processes: two workers, each one stage of a
//! synthesized model, chained by a byte-blind copy between their rings, produce the same
//! tokens as the one-process run.

use std::sync::Arc;
use std::time::Duration;

use swactor::arena::memfd::ArenaRegion;
use swactor::arena::{Arena, ArenaEvent, ArenaManager, LeaseRequest, LeaseRequestId};
use swactor::events::Direction;
use swactor::model::generate::{LocalPipeline, generate};
use swactor::model::sampling::Sampler;
use swactor::model::stage::ComputeDevice;
use swactor::model::synth::{SynthSpec, write_model};
use swactor::ring::{MappedRing, RingDrain, RingFeeder, Wake};
use swactor::wire::batch::{
    BatchEntry, BatchLimits, BatchTable, CacheOp, CacheOpKind, EntryFlags, EntrySampling,
    table_bytes, token_out_bytes,
};
use swactor::wire::reason::{FaultReason, WeightsFailure};
use swactor::wire::{
    ActivationDType, EdgeId, HEADER_LEN, LayerRange, ObjectFlags, ObjectHeader, ObjectId,
    ObjectSpec, PortId, PromptCachePlan, RingId, RingSpec, RoleId, SamplingPolicy, Sequence,
    StepId,
};
use swactor::worker::protocol::{
    Backend, Command, DeviceHandle, Event, InputBinding, OutputBinding, RoleConfig, ShutdownMode,
};
use swactor::workerctl::{CtlConfig, CtlOutput, WorkerDriver, WorkerDriverConfig};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::support::scratch;

const HIDDEN: u32 = 128;
const MAX_SEQ: u32 = 64;
const ARENA: u64 = 4 << 20;
type Ring = Arc<MappedRing<ArenaRegion>>;

struct Worker {
    driver: WorkerDriver,
    events: UnboundedReceiver<CtlOutput>,
    feeder: RingFeeder<Ring>,
    drain: RingDrain<Ring>,
    in_ring: RingId,
    out_ring: RingId,
    _arena: Arc<Arena>,
}

async fn event(events: &mut UnboundedReceiver<CtlOutput>) -> Event {
    loop {
        match tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("worker went quiet")
            .expect("driver ended")
        {
            CtlOutput::Routed(e) => return e,
            CtlOutput::Ready { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn model() -> std::path::PathBuf {
    let path = scratch().join("stage-worker-f32.gguf");
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        write_model(
            &path,
            &SynthSpec {
                blocks: 6,
                hidden: HIDDEN,
                heads: 4,
                kv_heads: 2,
                ffn: 256,
                vocab: 300,
                seed: 11,
                ..SynthSpec::default()
            },
        )
        .expect("synth");
    });
    path
}

fn stage(layers: LayerRange, embedding: bool, head: bool) -> RoleConfig {
    RoleConfig::ModelStage {
        weights: model().display().to_string(),
        layers,
        embedding,
        head,
        max_seq_len: MAX_SEQ,
        kv_cache: Default::default(),
        activation_dtype: ActivationDType::F32,
        sampling: SamplingPolicy::Greedy,
        max_sequences: u32::from(SLOTS),
        prompt_cache: PromptCachePlan { block_tokens: BLOCK, blocks: 2, off: None },
        run: Default::default(),
        resume_from: None,
        mask_bytes: 0,
    }
}

/// Positions per block of the stages' prompt-cache stores in these tests.
const BLOCK: u32 = 4;

/// Sequence slots of every stage in these tests (two sequences share each micro-batch).
const SLOTS: u16 = 2;

/// Starts a worker, configures its role (the weights load), installs an ingress and an
/// egress ring. A role that fails to configure returns its reason.
async fn start(
    role: RoleConfig,
    in_spec: ObjectSpec,
    out_spec: ObjectSpec,
) -> Result<Worker, FaultReason> {
    let arena = Arc::new(Arena::create(ARENA).expect("arena"));
    let mut manager = ArenaManager::new(ARENA);
    manager.arena_ready();
    let config = WorkerDriverConfig {
        exe: assert_cmd::cargo::cargo_bin("swactor"),
        ctl: CtlConfig {
            arena_ceiling: ARENA,
            backend: Backend::Cpu,
            init_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            max_restarts: 0,
            restart: swactor::workerctl::RestartPolicy::DEFAULT,
        },
        threads: 1,
        doorbells: false,
    };
    let (driver, mut events) = WorkerDriver::start(config, Arc::clone(&arena));
    loop {
        if let CtlOutput::Ready { .. } = events.recv().await.expect("driver") {
            break;
        }
    }
    driver
        .send(Command::ConfigureRole { role_id: RoleId(1), config: role })
        .await
        .expect("configure");
    match event(&mut events).await {
        Event::RoleConfigured { .. } => {}
        Event::RoleFailed { reason, .. } => {
            driver.stop(ShutdownMode::Graceful);
            drop(events);
            driver.join().await;
            return Err(reason);
        }
        other => panic!("{other:?}"),
    }
    let mut rings = Vec::new();
    for (id, direction, spec) in [(1u64, Direction::Recv, in_spec), (2, Direction::Send, out_spec)]
    {
        let ring = RingSpec { capacity: 256 * 1024, alignment: 128 };
        manager.lease(LeaseRequest {
            request_id: LeaseRequestId(id),
            edge_id: EdgeId(id),
            direction,
            ring,
        });
        let layout = std::iter::from_fn(|| manager.poll_event())
            .find_map(|e| {
                if let ArenaEvent::RingLeased { layout, .. } = e { Some(layout) } else { None }
            })
            .expect("lease");
        let mem = Arc::new(
            MappedRing::init(arena.region(&layout).expect("region"), &layout).expect("init"),
        );
        let install = Command::InstallRing {
            ring_id: layout.ring_id,
            edge_id: EdgeId(id),
            port_id: PortId(0),
            direction,
            layout,
            object_spec: spec,
        };
        driver.send(install).await.expect("install");
        assert!(matches!(event(&mut events).await, Event::RingInstalled { .. }));
        rings.push((layout.ring_id, mem));
    }
    let (out_ring, out_mem) = rings.pop().expect("egress");
    let (in_ring, in_mem) = rings.pop().expect("ingress");
    Ok(Worker {
        driver,
        events,
        feeder: RingFeeder::new(in_ring, in_mem),
        drain: RingDrain::new(out_ring, out_mem),
        in_ring,
        out_ring,
        _arena: arena,
    })
}

impl Worker {
    fn hint(&mut self, e: &Event) {
        match e {
            Event::RingWritable { ring_id } if *ring_id == self.in_ring => {
                self.feeder.on_writable().expect("writable");
            }
            Event::RingReadable { ring_id } if *ring_id == self.out_ring => {
                self.drain.on_readable().expect("readable");
            }
            Event::ObjectFailed { reason, .. } => panic!("object failed: {reason}"),
            Event::StepFailed { reason, .. } => panic!("step failed: {reason}"),
            _ => {}
        }
    }

    async fn push_all(&mut self, bytes: &[u8]) {
        let mut sent = 0;
        while sent < bytes.len() {
            let (n, wake) = self.feeder.push(&bytes[sent..]).expect("push");
            sent += n;
            if wake == Wake::Send {
                self.driver
                    .send(Command::RingReadable { ring_id: self.in_ring })
                    .await
                    .expect("wake");
            }
            if n == 0 {
                let e = event(&mut self.events).await;
                self.hint(&e);
            }
        }
    }

    async fn loaded(&mut self) -> (DeviceHandle, u64) {
        loop {
            let e = event(&mut self.events).await;
            if let Event::ObjectLoaded { handle, extent, .. } = e {
                return (handle, extent);
            }
            self.hint(&e);
        }
    }

    async fn execute(&mut self, seq: u64, handle: DeviceHandle, extent: u64) {
        let step = Command::ExecuteStep {
            role_id: RoleId(1),
            step_id: StepId(seq + 1),
            inputs: vec![InputBinding {
                port: PortId(0),
                object_id: ObjectId(seq + 1),
                sequence: Sequence(seq),
                handle,
            }],
            outputs: vec![OutputBinding {
                port: PortId(0),
                ring_id: self.out_ring,
                object_id: ObjectId(seq + 1),
                sequence: Sequence(seq),
                extent,
                flags: ObjectFlags::NONE,
            }],
            release_inputs_after: true,
        };
        self.driver.send(step).await.expect("step");
    }

    async fn pull_exact(&mut self, total: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(total);
        while out.len() < total {
            let mut buf = vec![0u8; total - out.len()];
            let (n, wake) = self.drain.pull(&mut buf).expect("pull");
            out.extend_from_slice(&buf[..n]);
            if wake == Wake::Send {
                self.driver
                    .send(Command::RingWritable { ring_id: self.out_ring })
                    .await
                    .expect("wake");
            }
            if n == 0 {
                let e = event(&mut self.events).await;
                self.hint(&e);
            }
        }
        out
    }

    async fn stop(self) {
        self.driver.stop(ShutdownMode::Graceful);
        drop(self.events);
        self.driver.join().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stage_workers_chained_by_their_rings_generate_the_one_process_tokens() {
    // Two sequences of different lengths share every micro-batch; each must get exactly
    // the tokens the one-process run gives its prompt alone.
    let prompts: [Vec<u32>; 2] = [
        (0..9).map(|i| (i * 29 + 3) % 290).collect(),
        (0..4).map(|i| (i * 13 + 7) % 290).collect(),
    ];
    let steps = 8u32;
    let mut whole = LocalPipeline::load(
        &swactor::model::GgufFile::open(&model()).expect("model"),
        &[LayerRange::new(0, 6)],
        MAX_SEQ,
        Default::default(),
        ActivationDType::F32,
        ComputeDevice::Cpu,
        1,
    )
    .expect("load");
    let reference: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| {
            let mut out = Vec::new();
            whole.reset();
            generate(&mut whole, p, steps, &mut Sampler::new(SamplingPolicy::Greedy), &[], |t| {
                out.push(t)
            })
            .expect("generate");
            out
        })
        .collect();

    let act = ObjectSpec::activations(MAX_SEQ, HIDDEN, ActivationDType::F32).with_table(SLOTS, 0);
    let mut a = start(
        stage(LayerRange::new(0, 2), true, false),
        ObjectSpec::token_ids(MAX_SEQ).with_table(SLOTS, 0),
        act,
    )
    .await
    .expect("stage 0");
    let out_spec = ObjectSpec::token_ids(u32::from(SLOTS)).with_table(SLOTS, 0);
    let mut b =
        start(stage(LayerRange::new(2, 6), false, true), act, out_spec).await.expect("stage 1");
    let mut tokens: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
    let mut inputs = prompts.clone();
    let mut positions = [0u32; 2];
    for seq in 0..u64::from(steps) {
        let entries: Vec<BatchEntry> = (0..2)
            .map(|s| BatchEntry {
                slot: s as u32,
                first_position: positions[s],
                tokens: inputs[s].len() as u32,
                flags: if seq == 0 {
                    EntryFlags::RESET | EntryFlags::SAMPLE
                } else {
                    EntryFlags::SAMPLE
                },
                sampling: EntrySampling::default(),
            })
            .collect();
        let table = BatchTable::new(SLOTS, entries);
        let mut payload = table.encode();
        payload.extend(inputs.iter().flatten().flat_map(|t| t.to_le_bytes()));
        let flags = if seq == 0 { ObjectFlags::PREFILL } else { ObjectFlags::NONE };
        let mut object =
            ObjectHeader::new(ObjectId(seq + 1), Sequence(seq), payload.len() as u64, flags)
                .encode()
                .to_vec();
        object.extend_from_slice(&payload);
        a.push_all(&object).await;
        let (h, _) = a.loaded().await;
        let rows: usize = inputs.iter().map(Vec::len).sum();
        let act_extent = table_bytes(SLOTS) + (rows * HIDDEN as usize * 4) as u64;
        a.execute(seq, h, act_extent).await;
        // Byte-blind hop: whatever stage 0 committed goes to stage 1 unchanged.
        let hop = a.pull_exact(HEADER_LEN + act_extent as usize).await;
        b.push_all(&hop).await;
        let (h, extent) = b.loaded().await;
        assert_eq!(extent, act_extent);
        let out_extent = token_out_bytes(SLOTS);
        b.execute(seq, h, out_extent).await;
        let out = b.pull_exact(HEADER_LEN + out_extent as usize).await;
        let header =
            ObjectHeader::decode(out[..HEADER_LEN].try_into().expect("header")).expect("valid");
        assert_eq!((header.sequence, header.extent), (Sequence(seq), out_extent));
        let limits =
            BatchLimits { capacity: SLOTS, max_seq_len: MAX_SEQ, cache_blocks: 0, mask_bytes: 0 };
        let (back, sampled) = BatchTable::split_tokens(&out[HEADER_LEN..], limits).expect("tokens");
        assert_eq!(back, table, "the table passes through every stage unchanged");
        for s in 0..2 {
            positions[s] += inputs[s].len() as u32;
            tokens[s].push(sampled[s]);
            inputs[s] = vec![sampled[s]];
        }
    }
    assert_eq!(tokens.to_vec(), reference);
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_saved_from_one_slot_and_loaded_into_another_continue_it_exactly() {
    // One stage holds the whole model. Slot 0 prefills a prompt of 9 tokens; its first
    // two blocks (8 positions) are saved to the store; slot 1 loads them and computes
    // only the ninth token: it must sample what slot 0 sampled.
    let prompt: Vec<u32> = (0..9).map(|i| (i * 31 + 5) % 290).collect();
    let out_spec = ObjectSpec::token_ids(u32::from(SLOTS)).with_table(SLOTS, 0);
    let mut w = start(
        stage(LayerRange::new(0, 6), true, true),
        ObjectSpec::token_ids(MAX_SEQ).with_table(SLOTS, 0),
        out_spec,
    )
    .await
    .expect("stage");
    let entry = |slot: u32, first: u32, tokens: u32| BatchEntry {
        slot,
        first_position: first,
        tokens,
        flags: EntryFlags::RESET | EntryFlags::SAMPLE,
        sampling: EntrySampling::default(),
    };
    let op = |kind, slot, block| CacheOp { kind, slot, slot_block: block, store_block: block };
    let batches = [
        (BatchTable::new(SLOTS, vec![entry(0, 0, 9)]), prompt.clone()),
        (
            BatchTable::new(SLOTS, vec![entry(1, 0, 1)])
                .with_ops(vec![op(CacheOpKind::Save, 0, 0), op(CacheOpKind::Save, 0, 1)]),
            vec![7],
        ),
        (
            BatchTable::new(SLOTS, vec![entry(1, 8, 1)])
                .with_ops(vec![op(CacheOpKind::Load, 1, 0), op(CacheOpKind::Load, 1, 1)]),
            vec![prompt[8]],
        ),
    ];
    let limits =
        BatchLimits { capacity: SLOTS, max_seq_len: MAX_SEQ, cache_blocks: 2, mask_bytes: 0 };
    let mut sampled = Vec::new();
    for (seq, (table, rows)) in batches.iter().enumerate() {
        let seq = seq as u64;
        let mut payload = table.encode();
        payload.extend(rows.iter().flat_map(|t| t.to_le_bytes()));
        let mut object = ObjectHeader::new(
            ObjectId(seq + 1),
            Sequence(seq),
            payload.len() as u64,
            ObjectFlags::NONE,
        )
        .encode()
        .to_vec();
        object.extend_from_slice(&payload);
        w.push_all(&object).await;
        let (h, _) = w.loaded().await;
        let out_extent = token_out_bytes(SLOTS);
        w.execute(seq, h, out_extent).await;
        let out = w.pull_exact(HEADER_LEN + out_extent as usize).await;
        let (back, tokens) = BatchTable::split_tokens(&out[HEADER_LEN..], limits).expect("tokens");
        assert_eq!(&back, table, "the cache operations pass through unchanged");
        sampled.push(tokens[0]);
    }
    assert_eq!(sampled[2], sampled[0], "the loaded blocks are the prompt's first 8 positions");
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_whose_range_exceeds_the_model_fails_its_role_with_invalid_range() {
    let act = ObjectSpec::activations(MAX_SEQ, HIDDEN, ActivationDType::F32);
    let err =
        start(stage(LayerRange::new(4, 9), false, true), act, ObjectSpec::token_ids(1)).await.err();
    assert_eq!(err, Some(FaultReason::Weights(WeightsFailure::InvalidRange)));
}
