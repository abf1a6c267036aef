//! Benchmarks of the node-local data plane, each measured beside its baseline in the same
//! run so that the printed ratios are meaningful on any machine.
//!
//! - [`ring_throughput`]: node-side producer -> ingress ring -> a real worker process that
//!   copies every object into device memory, against plain `memcpy` bandwidth.
//! - [`wake_round_trip`]: a small object written into an ingress ring until the worker's
//!   `ObjectLoaded` line is read back by the node.
#![allow(clippy::disallowed_methods)] // a benchmark owns the clock

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::arena::{Arena, ArenaEvent, ArenaManager, LeaseRequest, LeaseRequestId};
use crate::events::Direction;
use crate::ring::{MappedRing, RingFeeder, Wake};
use crate::wire::{
    EdgeId, HEADER_LEN, ObjectFlags, ObjectHeader, ObjectId, ObjectSpec, PayloadKind, PortId,
    RingSpec, Sequence, WireDType,
};
use crate::worker::protocol::{Backend, Command, Event, ShutdownMode};
use crate::workerctl::{CtlConfig, CtlOutput, WorkerDriver, WorkerDriverConfig};

/// Result of the ring throughput benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct RingBench {
    /// Bytes streamed through the ring.
    pub bytes: u64,
    /// Span size the producer writes at a time.
    pub span_bytes: u64,
    /// Ring data capacity.
    pub ring_bytes: u64,
    /// Plain memcpy bandwidth, GB/s.
    pub memcpy_gbps: f64,
    /// Cross-process ring bandwidth (node producer -> worker device copy), GB/s.
    pub ring_gbps: f64,
    /// `ring_gbps / memcpy_gbps`.
    pub ratio: f64,
}

/// Result of the wake round-trip benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct WakeBench {
    /// Round trips measured.
    pub samples: usize,
    /// Object payload bytes.
    pub object_bytes: u64,
    /// Median, microseconds.
    pub median_us: f64,
    /// 99th percentile, microseconds.
    pub p99_us: f64,
    /// Smallest, microseconds.
    pub min_us: f64,
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[error("benchmark failed: {0}")]
pub struct BenchError(String);

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}

/// `memcpy` bandwidth in GB/s copying `span` bytes at a time through `buffer` bytes.
pub fn memcpy_gbps(buffer: usize, span: usize, total: u64) -> f64 {
    let src: Vec<u8> = (0..buffer).map(|i| i as u8).collect();
    let mut dst = vec![1u8; buffer];
    let start = Instant::now();
    let mut copied = 0u64;
    let mut at = 0usize;
    while copied < total {
        if at + span > buffer {
            at = 0;
        }
        dst[at..at + span].copy_from_slice(&src[at..at + span]);
        std::hint::black_box(&mut dst);
        at += span;
        copied += span as u64;
    }
    copied as f64 / start.elapsed().as_secs_f64() / 1e9
}

struct Harness {
    driver: WorkerDriver,
    events: UnboundedReceiver<CtlOutput>,
    feeder: RingFeeder<Arc<MappedRing<crate::arena::memfd::ArenaRegion>>>,
    ring_id: crate::wire::RingId,
}

async fn next(events: &mut UnboundedReceiver<CtlOutput>) -> Result<CtlOutput, BenchError> {
    tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .map_err(|_| err("the worker went quiet"))?
        .ok_or_else(|| err("the worker driver ended"))
}

async fn harness(exe: PathBuf, ring_bytes: u64, spec: ObjectSpec) -> Result<Harness, BenchError> {
    let arena_bytes = ring_bytes + (1 << 20);
    let arena = Arc::new(Arena::create(arena_bytes).map_err(err)?);
    let mut manager = ArenaManager::new(arena_bytes);
    manager.arena_ready();
    manager.lease(LeaseRequest {
        request_id: LeaseRequestId(1),
        edge_id: EdgeId(1),
        direction: Direction::Recv,
        ring: RingSpec { capacity: ring_bytes, alignment: 4096 },
    });
    let layout = std::iter::from_fn(|| manager.poll_event())
        .find_map(|e| match e {
            ArenaEvent::RingLeased { layout, .. } => Some(layout),
            _ => None,
        })
        .ok_or_else(|| err("the ring does not fit the arena"))?;
    let ring =
        Arc::new(MappedRing::init(arena.region(&layout).map_err(err)?, &layout).map_err(err)?);
    let config = WorkerDriverConfig {
        exe,
        ctl: CtlConfig {
            arena_ceiling: arena_bytes,
            backend: Backend::Cpu,
            init_timeout: Duration::from_secs(10),
            stop_timeout: Duration::from_secs(5),
            max_restarts: 0,
        },
        threads: 1,
    };
    let (driver, mut events) = WorkerDriver::start(config, arena);
    loop {
        match next(&mut events).await? {
            CtlOutput::Ready { .. } => break,
            CtlOutput::Failed { reason } => return Err(err(format!("worker failed: {reason}"))),
            _ => {}
        }
    }
    driver
        .send(Command::InstallRing {
            ring_id: layout.ring_id,
            edge_id: EdgeId(1),
            port_id: PortId(0),
            direction: Direction::Recv,
            layout,
            object_spec: spec,
        })
        .await
        .map_err(err)?;
    loop {
        match next(&mut events).await? {
            CtlOutput::Routed(Event::RingInstalled { .. }) => break,
            CtlOutput::Routed(Event::RingFault { reason, .. }) => {
                return Err(err(format!("ring fault: {reason}")));
            }
            _ => {}
        }
    }
    Ok(Harness {
        driver,
        events,
        feeder: RingFeeder::new(layout.ring_id, ring),
        ring_id: layout.ring_id,
    })
}

impl Harness {
    async fn handle(&mut self, out: CtlOutput, loaded: &mut u64) -> Result<(), BenchError> {
        match out {
            CtlOutput::Routed(Event::ObjectLoaded { handle, .. }) => {
                *loaded += 1;
                self.driver.send(Command::ReleaseDeviceObject { handle }).await.map_err(err)?;
            }
            CtlOutput::Routed(Event::RingWritable { .. }) => {
                self.feeder.on_writable().map_err(err)?;
            }
            CtlOutput::Routed(Event::ObjectFailed { reason, .. }) => {
                return Err(err(format!("object failed: {reason}")));
            }
            CtlOutput::Failed { reason } => return Err(err(format!("worker failed: {reason}"))),
            _ => {}
        }
        Ok(())
    }

    async fn shutdown(self) {
        self.driver.stop(ShutdownMode::Graceful);
        drop(self.events);
        self.driver.join().await;
    }
}

/// Streams `total` bytes as `object`-byte objects written in `span`-byte pieces through a
/// `ring`-byte ingress ring into a real worker, and compares with memcpy.
pub async fn ring_throughput(
    exe: PathBuf,
    ring: u64,
    span: u64,
    object: u64,
    total: u64,
) -> Result<RingBench, BenchError> {
    let row = 4096u32;
    let spec = ObjectSpec {
        payload: PayloadKind::Activations,
        dtype: WireDType::F32,
        row_elems: row / 4,
        max_extent: object,
    };
    let mut h = harness(exe, ring, spec).await?;
    let payload: Vec<u8> = (0..object).map(|i| (i % 253) as u8).collect();
    let objects = total.div_ceil(object);
    // One warm-up object, then the measured stream.
    let mut loaded = 0u64;
    let mut start = Instant::now();
    for seq in 0..=objects {
        if seq == 1 {
            while loaded < 1 {
                let out = next(&mut h.events).await?;
                h.handle(out, &mut loaded).await?;
            }
            start = Instant::now();
        }
        let header =
            ObjectHeader::new(ObjectId(seq + 1), Sequence(seq), object, ObjectFlags::NONE).encode();
        let mut pieces: Vec<&[u8]> = vec![&header[..]];
        pieces.extend(payload.chunks(span as usize));
        for piece in pieces {
            let mut off = 0;
            while off < piece.len() {
                let (n, wake) = h.feeder.push(&piece[off..]).map_err(err)?;
                off += n;
                if wake == Wake::Send {
                    h.driver
                        .send(Command::RingReadable { ring_id: h.ring_id })
                        .await
                        .map_err(err)?;
                }
                while let Ok(out) = h.events.try_recv() {
                    h.handle(out, &mut loaded).await?;
                }
                if n == 0 {
                    let out = next(&mut h.events).await?;
                    h.handle(out, &mut loaded).await?;
                }
            }
        }
    }
    while loaded < objects + 1 {
        let out = next(&mut h.events).await?;
        h.handle(out, &mut loaded).await?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    h.shutdown().await;
    let bytes = objects * (object + HEADER_LEN as u64);
    let ring_gbps = bytes as f64 / elapsed / 1e9;
    let memcpy = memcpy_gbps(ring as usize, span as usize, total);
    Ok(RingBench {
        bytes,
        span_bytes: span,
        ring_bytes: ring,
        memcpy_gbps: memcpy,
        ring_gbps,
        ratio: ring_gbps / memcpy,
    })
}

/// Measures `samples` wake round trips of `object`-byte token objects.
pub async fn wake_round_trip(
    exe: PathBuf,
    samples: usize,
    object: u64,
) -> Result<WakeBench, BenchError> {
    let spec = ObjectSpec::token_ids((object / 4) as u32);
    let mut h = harness(exe, 1 << 20, spec).await?;
    let payload = vec![7u8; object as usize];
    let mut times = Vec::with_capacity(samples);
    let warmup = 50usize;
    for seq in 0..(samples + warmup) as u64 {
        let header =
            ObjectHeader::new(ObjectId(seq + 1), Sequence(seq), object, ObjectFlags::NONE).encode();
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&payload);
        let t0 = Instant::now();
        let (n, wake) = h.feeder.push(&bytes).map_err(err)?;
        if n != bytes.len() {
            return Err(err("ring unexpectedly full"));
        }
        if wake == Wake::Send {
            h.driver.send(Command::RingReadable { ring_id: h.ring_id }).await.map_err(err)?;
        }
        let handle = loop {
            match next(&mut h.events).await? {
                CtlOutput::Routed(Event::ObjectLoaded { handle, .. }) => break handle,
                CtlOutput::Routed(Event::RingWritable { .. }) => {
                    h.feeder.on_writable().map_err(err)?;
                }
                CtlOutput::Failed { reason } => {
                    return Err(err(format!("worker failed: {reason}")));
                }
                _ => {}
            }
        };
        let dt = t0.elapsed();
        if seq as usize >= warmup {
            times.push(dt);
        }
        h.driver.send(Command::ReleaseDeviceObject { handle }).await.map_err(err)?;
        loop {
            match next(&mut h.events).await? {
                CtlOutput::Routed(Event::DeviceObjectReleased { .. }) => break,
                CtlOutput::Routed(Event::RingWritable { .. }) => {
                    h.feeder.on_writable().map_err(err)?;
                }
                _ => {}
            }
        }
    }
    h.shutdown().await;
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pick = |q: f64| us(times[((times.len() - 1) as f64 * q).round() as usize]);
    Ok(WakeBench {
        samples,
        object_bytes: object,
        median_us: pick(0.5),
        p99_us: pick(0.99),
        min_us: us(times[0]),
    })
}

/// Result of the edge benchmarks.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeBench {
    /// Bytes streamed in each throughput run.
    pub bytes: u64,
    /// Raw iroh uni-stream throughput (writer to reader), GB/s.
    pub raw_gbps: f64,
    /// Egress ring -> send pump -> QUIC -> receive pump -> ingress ring, GB/s (the spans are
    /// committed and released without the workers' copies).
    pub edge_gbps: f64,
    /// `edge_gbps / raw_gbps`.
    pub ratio: f64,
    /// The same with a producer and a consumer copying every byte in this process (as
    /// workers would, but here sharing the pumps' cores), GB/s.
    pub edge_copying_gbps: f64,
    /// `edge_copying_gbps / raw_gbps`.
    pub ratio_copying: f64,
    /// Object size of the latency run.
    pub object_bytes: u64,
    /// Median hop latency (egress commit to whole object committed in the ingress ring), µs.
    pub hop_median_us: f64,
    /// 99th percentile hop latency, µs.
    pub hop_p99_us: f64,
}

type Mem = Arc<MappedRing<crate::arena::memfd::ArenaRegion>>;

fn bench_ring(id: u64, capacity: u64) -> Result<Mem, BenchError> {
    let arena = Arc::new(Arena::create(capacity + 8192).map_err(err)?);
    let layout = crate::wire::RingLayout {
        ring_id: crate::wire::RingId(id),
        arena_offset: 0,
        total_len: 4096 + capacity,
        header_offset: 0,
        data_offset: 4096,
        data_capacity: capacity,
        alignment: 4096,
    };
    Ok(Arc::new(MappedRing::init(arena.region(&layout).map_err(err)?, &layout).map_err(err)?))
}

async fn endpoints() -> Result<(iroh::Endpoint, iroh::Endpoint), BenchError> {
    use crate::net::{endpoint::bind, identity::NodeKey};
    let a = bind(&NodeKey::from_bytes(&[21; 32]), "127.0.0.1:0".parse().map_err(err)?)
        .await
        .map_err(err)?;
    let b = bind(&NodeKey::from_bytes(&[22; 32]), "127.0.0.1:0".parse().map_err(err)?)
        .await
        .map_err(err)?;
    Ok((a, b))
}

/// Measures raw iroh stream throughput and edge throughput (ring to ring through the
/// pumps) over `bytes`, and the hop latency of `object`-byte objects.
pub async fn edge(bytes: u64, object: u64, samples: usize) -> Result<EdgeBench, BenchError> {
    use crate::net::edge::{EdgeRouter, recv_pump, send_pump};
    use crate::net::endpoint::EDGE_ALPN;
    use crate::ring::RingDrain;
    use tokio::sync::Notify;

    let chunk = vec![7u8; 1 << 20];
    // Raw stream.
    let (a, b) = endpoints().await?;
    let addr = iroh::EndpointAddr::new(b.id()).with_ip_addr(b.bound_sockets()[0]);
    let reader = {
        let b = b.clone();
        tokio::spawn(async move {
            let conn = b.accept().await.ok_or_else(|| err("no connection"))?.await.map_err(err)?;
            let mut s = conn.accept_uni().await.map_err(err)?;
            let mut buf = vec![0u8; 1 << 20];
            let mut got = 0u64;
            while let Some(n) = s.read(&mut buf).await.map_err(err)? {
                got += n as u64;
            }
            Ok::<u64, BenchError>(got)
        })
    };
    let conn = a.connect(addr.clone(), EDGE_ALPN).await.map_err(err)?;
    let mut s = conn.open_uni().await.map_err(err)?;
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        s.write_all(&chunk).await.map_err(err)?;
        sent += chunk.len() as u64;
    }
    s.finish().map_err(err)?;
    let got = reader.await.map_err(err)??;
    let raw_gbps = got as f64 / start.elapsed().as_secs_f64() / 1e9;
    conn.close(0u32.into(), b"done");
    a.close().await;
    b.close().await;

    // Edge: ring -> pumps -> ring.
    let (a, b) = endpoints().await?;
    let (router, _refusals) = EdgeRouter::new();
    router.expect(crate::wire::EdgeId(1), a.id());
    tokio::spawn(router.clone().accept_loop(b.clone()));
    let addr = iroh::EndpointAddr::new(b.id()).with_ip_addr(b.bound_sockets()[0]);
    let (egress, ingress) = (bench_ring(1, 8 << 20)?, bench_ring(2, 8 << 20)?);
    let (readable, a_stop, writer_wake) =
        (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (writable, b_stop, reader_wake) =
        (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    let stream_rx = router.stream_for(crate::wire::EdgeId(1));
    let conn = a.connect(addr, EDGE_ALPN).await.map_err(err)?;
    let ww = Arc::clone(&writer_wake);
    let sender = tokio::spawn(send_pump(
        conn,
        crate::wire::EdgeId(1),
        RingDrain::new(crate::wire::RingId(1), Arc::clone(&egress)),
        Arc::clone(&readable),
        Arc::clone(&a_stop),
        move || ww.notify_one(),
    ));
    let rw = Arc::clone(&reader_wake);
    let (wr, bs) = (Arc::clone(&writable), Arc::clone(&b_stop));
    let feeder = RingFeeder::new(crate::wire::RingId(2), Arc::clone(&ingress));
    let receiver = tokio::spawn(async move {
        let stream = stream_rx.await.map_err(err)?;
        Ok::<_, BenchError>(recv_pump(stream, feeder, wr, bs, move || rw.notify_one()).await)
    });
    let mut producer = RingFeeder::new(crate::wire::RingId(1), Arc::clone(&egress));

    // Throughput, twice: first the edge alone (the producer commits spans that are already
    // in the ring and the consumer releases without reading, as the raw baseline streams a
    // ready buffer), then with each side copying as a worker would, in this same process.
    // A short untimed warm-up first, so neither timed phase pays for the connection's
    // congestion window growing.
    let mut rates = [0f64; 3];
    for (i, (copy, bytes)) in
        [(false, bytes / 16), (false, bytes), (true, bytes)].into_iter().enumerate()
    {
        let consume = {
            let (ingress_w, wake) = (Arc::clone(&writable), Arc::clone(&reader_wake));
            let ingress = Arc::clone(&ingress);
            tokio::spawn(async move {
                let mut d = RingDrain::new(crate::wire::RingId(2), ingress);
                let mut buf = vec![0u8; 1 << 20];
                let mut got = 0u64;
                while got < bytes {
                    let n = if copy {
                        d.consumer().read(&mut buf).map_err(err)? as u64
                    } else {
                        d.consumer().read_with(1 << 20, |_| {}).map_err(err)?
                    };
                    got += n;
                    if d.consumer().release() == Wake::Send {
                        ingress_w.notify_one();
                    }
                    if n == 0 {
                        let _ =
                            tokio::time::timeout(Duration::from_millis(5), wake.notified()).await;
                        let _ = d.on_readable();
                    }
                }
                Ok::<u64, BenchError>(got)
            })
        };
        let start = Instant::now();
        let mut sent = 0u64;
        while sent < bytes {
            let want = (bytes - sent).min(chunk.len() as u64);
            let n = if copy {
                producer.producer().write(&chunk[..want as usize]).map_err(err)? as u64
            } else {
                producer.producer().write_with(want, |_| {}).map_err(err)?
            };
            sent += n;
            if producer.producer().commit() == Wake::Send {
                readable.notify_one();
            }
            if n < want {
                let _ =
                    tokio::time::timeout(Duration::from_millis(5), writer_wake.notified()).await;
                let _ = producer.on_writable();
            }
        }
        readable.notify_one();
        let got = consume.await.map_err(err)??;
        rates[i] = got as f64 / start.elapsed().as_secs_f64() / 1e9;
    }
    let [_, edge_gbps, edge_copying_gbps] = rates;

    // Hop latency: one object at a time, from commit on the egress ring to the whole
    // object committed in the ingress ring. (The throughput consumer is done: this drain
    // continues from where it stopped.)
    let mut drain = RingDrain::new(crate::wire::RingId(2), Arc::clone(&ingress));
    let object_bytes = vec![3u8; object as usize];
    let mut buf = vec![0u8; object as usize];
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 20 {
        let t0 = Instant::now();
        let (n, w) = producer.push(&object_bytes).map_err(err)?;
        if n != object_bytes.len() {
            return Err(err("egress ring unexpectedly full"));
        }
        if w == Wake::Send {
            readable.notify_one();
        }
        let mut got = 0;
        while got < buf.len() {
            let (n, w) = drain.pull(&mut buf[got..]).map_err(err)?;
            got += n;
            if w == Wake::Send {
                writable.notify_one();
            }
            if n == 0 {
                tokio::task::yield_now().await;
            }
        }
        if i >= 20 {
            times.push(t0.elapsed());
        }
    }
    a_stop.notify_one();
    let _ = sender.await;
    b_stop.notify_one();
    let _ = receiver.await;
    a.close().await;
    b.close().await;
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let pick = |q: f64| us(times[((times.len() - 1) as f64 * q).round() as usize]);
    Ok(EdgeBench {
        bytes,
        raw_gbps,
        edge_gbps,
        ratio: edge_gbps / raw_gbps,
        edge_copying_gbps,
        ratio_copying: edge_copying_gbps / raw_gbps,
        object_bytes: object,
        hop_median_us: pick(0.5),
        hop_p99_us: pick(0.99),
    })
}

/// The engine's figures for one model file at one thread count.
#[derive(Debug, Clone, Serialize)]
pub struct EngineFigure {
    /// What the model is (`q4_1`, `q8_0`, ...).
    pub label: String,
    /// The file measured.
    pub model: String,
    /// Compute threads.
    pub threads: u32,
    /// Greedy decode tokens/s after the 12-token Lily prompt.
    pub decode_tokens_per_s: f64,
    /// Tokens/s of one prefill of `prompt_tokens` tokens.
    pub prefill_tokens_per_s: f64,
    /// Prefill prompt length.
    pub prompt_tokens: usize,
    /// Aggregate decode tokens/s for each batch size (that many sequences decoding at once).
    pub batch_tokens_per_s: Vec<(usize, f64)>,
    /// Time to load the whole model as one stage on the engine (mapped weights), ms.
    pub load_ms: f64,
    /// Time to load it on candle (tensors read and copied, the previous path), ms.
    pub candle_load_ms: f64,
}

/// What [`engine_figures`] measures.
#[derive(Debug, Clone)]
pub struct EngineBenchConfig {
    /// Tokens decoded per run.
    pub tokens: u32,
    /// Prefill prompt length.
    pub prompt_tokens: usize,
    /// Batch sizes of the aggregate decode.
    pub batches: Vec<usize>,
    /// Runs of each measurement (the best is kept).
    pub repeat: u32,
}

/// The Lily prompt's token ids, and a `len`-token prompt made of it repeated.
pub fn bench_prompts(
    tokenizer: &crate::model::tokenizer::Tokenizer,
    len: usize,
) -> (Vec<u32>, Vec<u32>) {
    let lily =
        tokenizer.encode("Once upon a time there was a little girl named Lily.", true, false);
    let body =
        tokenizer.encode(" Once upon a time there was a little girl named Lily.", false, false);
    let mut long = lily.clone();
    while long.len() < len {
        long.extend_from_slice(&body);
    }
    long.truncate(len);
    (lily, long)
}

/// Measures the engine on `path` at `threads` compute threads.
pub fn engine_figures(
    label: &str,
    path: &std::path::Path,
    threads: u32,
    config: &EngineBenchConfig,
) -> Result<EngineFigure, BenchError> {
    use crate::model::llama::{ComputeDevice, LlamaStage, StageInput, StageOutput, StageSpec};
    use crate::model::sampling::argmax;
    use std::sync::atomic::AtomicBool;
    use swactor_engine::llama::{Input, Output};

    let (content, len) = crate::model::gguf::read_content(path).map_err(err)?;
    let facts = crate::model::facts::facts_from_content(&content, len).map_err(err)?;
    let tokenizer = crate::model::tokenizer::Tokenizer::from_gguf(&content).map_err(err)?;
    let (lily, long) = bench_prompts(&tokenizer, config.prompt_tokens);
    let max_seq = 512u32.max(config.prompt_tokens as u32 + 1);
    let spec = |device| StageSpec {
        layers: crate::wire::LayerRange::new(0, facts.block_count),
        embedding: true,
        head: true,
        max_seq_len: max_seq,
        device,
        threads,
    };
    let best = |f: &mut dyn FnMut() -> Result<f64, BenchError>| -> Result<f64, BenchError> {
        let mut b = f64::MAX;
        for _ in 0..config.repeat.max(1) {
            b = b.min(f()?);
        }
        Ok(b)
    };
    let load_ms = best(&mut || {
        let t = Instant::now();
        drop(LlamaStage::load(path, spec(ComputeDevice::Cpu)).map_err(err)?);
        Ok(t.elapsed().as_secs_f64() * 1e3)
    })?;
    let candle_load_ms = best(&mut || {
        let t = Instant::now();
        drop(LlamaStage::load(path, spec(ComputeDevice::Candle)).map_err(err)?);
        Ok(t.elapsed().as_secs_f64() * 1e3)
    })?;
    let mut stage = LlamaStage::load(path, spec(ComputeDevice::Cpu)).map_err(err)?;
    let logits = |out: StageOutput| match out {
        StageOutput::Logits(l) => Ok(l),
        StageOutput::Hidden(_) => Err(err("the whole model produced hidden states")),
    };
    // Decode: the Lily prompt, then `tokens` greedy steps.
    let decode_s = best(&mut || {
        stage.reset();
        let mut next = argmax(&logits(stage.forward(StageInput::Tokens(&lily)).map_err(err)?)?);
        let t = Instant::now();
        for _ in 0..config.tokens {
            next = argmax(&logits(stage.forward(StageInput::Tokens(&[next])).map_err(err)?)?);
        }
        Ok(t.elapsed().as_secs_f64())
    })?;
    let prefill_s = best(&mut || {
        stage.reset();
        let t = Instant::now();
        logits(stage.forward(StageInput::Tokens(&long)).map_err(err)?)?;
        Ok(t.elapsed().as_secs_f64())
    })?;
    // Aggregate decode: `b` sequences (the Lily prompt each), one row each per step.
    let engine = stage.engine_mut().ok_or_else(|| err("not an engine stage"))?;
    let most = config.batches.iter().copied().max().unwrap_or(1);
    engine.set_slots(most);
    let no = AtomicBool::new(false);
    let mut batch_tokens_per_s = Vec::new();
    for &b in &config.batches {
        let b = b.max(1);
        let seconds = best(&mut || {
            let mut next = Vec::with_capacity(b);
            for slot in 0..b {
                engine.reset(slot);
                let slots = vec![slot; lily.len()];
                match engine.forward(&slots, Input::Tokens(&lily), &no).map_err(err_fwd)? {
                    Output::Logits(l) => next.push(argmax(&l)),
                    Output::Hidden(_) => return Err(err("hidden states")),
                }
            }
            let slots: Vec<usize> = (0..b).collect();
            let t = Instant::now();
            for _ in 0..config.tokens {
                match engine.forward(&slots, Input::Tokens(&next), &no).map_err(err_fwd)? {
                    Output::Logits(l) => {
                        let vocab = l.len() / b;
                        for (i, n) in next.iter_mut().enumerate() {
                            *n = argmax(&l[i * vocab..(i + 1) * vocab]);
                        }
                    }
                    Output::Hidden(_) => return Err(err("hidden states")),
                }
            }
            Ok(t.elapsed().as_secs_f64())
        })?;
        batch_tokens_per_s.push((b, (b as f64 * f64::from(config.tokens)) / seconds));
    }
    Ok(EngineFigure {
        label: label.to_string(),
        model: path.display().to_string(),
        threads,
        decode_tokens_per_s: f64::from(config.tokens) / decode_s,
        prefill_tokens_per_s: long.len() as f64 / prefill_s,
        prompt_tokens: long.len(),
        batch_tokens_per_s,
        load_ms,
        candle_load_ms,
    })
}

fn err_fwd(e: swactor_engine::llama::ForwardError) -> BenchError {
    BenchError(format!("{e:?}"))
}
