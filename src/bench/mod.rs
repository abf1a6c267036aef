//! Benchmarks of the node-local data plane, each measured beside its baseline in the same
//! run so that the printed ratios are meaningful on any machine.
//!
//! - [`ring_throughput`]: node-side producer -> ingress ring -> a real worker process that
//!   copies every object into device memory, against plain `memcpy` bandwidth.
//! - [`wake_round_trip`]: a small object written into an ingress ring until the worker's
//!   `ObjectLoaded` line is read back by the node.
//! - [`edge()`]: edge throughput ring to ring over QUIC against a raw iroh stream, and the
//!   hop latency of a decode-sized object (`edge.rs`).
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

/// `memcpy` bandwidth in GB/s moving `total` bytes as `object`-byte objects from one
/// buffer into another, `span` bytes at a time: the copy a ring replaces (the producer's
/// object straight into the consumer's), without the ring in between.
pub fn memcpy_gbps(object: usize, span: usize, total: u64) -> f64 {
    let src: Vec<u8> = (0..object).map(|i| i as u8).collect();
    let mut dst = vec![1u8; object];
    let span = span.clamp(1, object.max(1));
    let start = Instant::now();
    let mut copied = 0u64;
    while copied < total {
        for at in (0..object).step_by(span) {
            let end = (at + span).min(object);
            dst[at..end].copy_from_slice(&src[at..end]);
        }
        std::hint::black_box(&mut dst);
        copied += object as u64;
    }
    copied as f64 / start.elapsed().as_secs_f64() / 1e9
}

struct Harness {
    driver: WorkerDriver,
    notifier: crate::workerctl::WorkerNotifier,
    events: UnboundedReceiver<CtlOutput>,
    feeder: RingFeeder<Arc<MappedRing<crate::arena::memfd::ArenaRegion>>>,
    ring_id: crate::wire::RingId,
    /// Rung (through the worker's doorbell) when the worker freed ring space.
    writable: Arc<tokio::sync::Notify>,
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
            restart: crate::workerctl::RestartPolicy::DEFAULT,
        },
        threads: 1,
        doorbells: true,
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
    let writable = Arc::new(tokio::sync::Notify::new());
    driver
        .pump_wakes()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(layout.ring_id, Arc::clone(&writable));
    Ok(Harness {
        notifier: driver.notifier(),
        driver,
        events,
        feeder: RingFeeder::new(layout.ring_id, ring),
        ring_id: layout.ring_id,
        writable,
    })
}

impl Harness {
    async fn handle(&mut self, out: CtlOutput, loaded: &mut u64) -> Result<(), BenchError> {
        match out {
            CtlOutput::Routed(Event::ObjectLoaded { handle, .. }) => {
                *loaded += 1;
                self.notifier.notify(Command::ReleaseDeviceObject { handle });
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

    /// Tells the worker that bytes were committed (its doorbell).
    fn wake_worker(&self) {
        self.notifier.wake(Command::RingReadable { ring_id: self.ring_id });
    }

    /// Waits for the worker to free ring space or to report something.
    async fn wait(&mut self, loaded: &mut u64) -> Result<(), BenchError> {
        tokio::select! {
            _ = self.writable.notified() => {
                self.feeder.on_writable().map_err(err)?;
                Ok(())
            }
            out = next(&mut self.events) => self.handle(out?, loaded).await,
        }
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
        prefix_bytes: 0,
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
                    h.wake_worker();
                }
                while let Ok(out) = h.events.try_recv() {
                    h.handle(out, &mut loaded).await?;
                }
                if n == 0 {
                    h.wait(&mut loaded).await?;
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
    let memcpy = memcpy_gbps(object as usize, span as usize, total);
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
            h.wake_worker();
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

mod edge;
pub use edge::{EdgeBench, HopParts, PART_SIZES, edge};

pub mod cache;
pub mod cpu;
mod engine;
pub mod failover;
pub mod memory;
pub mod prefix;
pub mod products;
pub mod runs;
pub mod serve;
pub mod serve_http;
pub mod speculate;
pub mod structured;
pub mod wan;
pub use engine::{EngineBenchConfig, EngineFigure, batch_rate, bench_prompts, engine_figures};
