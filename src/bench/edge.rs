//! The edge bench: raw iroh stream throughput, edge throughput ring to ring through the
//! pumps (alone and with the workers' copies), and the hop latency of decode-sized
//! objects, all in one run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{BenchError, err};
use crate::arena::Arena;
use crate::ring::{MappedRing, RingFeeder, Wake};

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
    /// The hop's parts at decode widths (SmolLM2's 576 and a 1B model's 2048, f32).
    pub parts: Vec<HopParts>,
}

/// Where a hop of one activation size goes, each part measured alone (medians, µs).
#[derive(Debug, Clone, Serialize)]
pub struct HopParts {
    /// Activation bytes (object header included).
    pub object_bytes: u64,
    /// A raw iroh stream: the object written until the reader has all of it.
    pub quic_us: f64,
    /// The same between two relay-only endpoints through a relay server on this host:
    /// `relayed_quic_us - quic_us` is what the relay adds to a hop beyond the link.
    pub relayed_quic_us: f64,
    /// Egress ring commit to the whole object in the ingress ring, through both pumps
    /// (QUIC, the pumps' wake-ups and ring copies).
    pub ring_to_ring_us: f64,
    /// An object committed into a real worker's ingress ring until its `ObjectLoaded`
    /// line is back at the node (the doorbell, the worker's wake-up and read, the control
    /// pipe); filled in by [`super::wake_round_trip`] where a worker can be started.
    pub worker_wake_us: f64,
}

impl HopParts {
    /// The hop as its parts add up: ring to ring plus a worker's wake on each side (the
    /// producing worker's commit reaches its node as the consumer's load does).
    pub fn modeled_us(&self) -> f64 {
        self.ring_to_ring_us + 2.0 * self.worker_wake_us
    }
}

/// Activation bytes of the breakdown: SmolLM2 (576) and a 1B model (2048) in f32, with
/// the 40-byte object header.
pub const PART_SIZES: [u64; 2] = [576 * 4 + 40, 2048 * 4 + 40];

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
    let (a, b, _) = endpoints_via(None).await?;
    Ok((a, b))
}

/// Two endpoints on loopback and the address `a` dials `b` at: directly, or through the
/// relay at `relay` alone (both relay-only, homed on it).
async fn endpoints_via(
    relay: Option<&str>,
) -> Result<(iroh::Endpoint, iroh::Endpoint, iroh::EndpointAddr), BenchError> {
    use crate::net::endpoint::{bind, wait_for_relay};
    use crate::net::{identity::NodeKey, relay::Relays};
    let relays = match relay {
        Some(url) => Relays::parse(&[url.to_string()], true).map_err(err)?,
        None => Relays::none(),
    };
    let any: std::net::SocketAddr = "127.0.0.1:0".parse().map_err(err)?;
    let a = bind(&NodeKey::from_bytes(&[21; 32]), any, &relays).await.map_err(err)?;
    let b = bind(&NodeKey::from_bytes(&[22; 32]), any, &relays).await.map_err(err)?;
    for e in [&a, &b] {
        wait_for_relay(e, &relays, Duration::from_secs(10)).await.map_err(err)?;
    }
    let addr = match relays.home() {
        Some(url) => iroh::EndpointAddr::new(b.id()).with_relay_url(url.clone()),
        None => iroh::EndpointAddr::new(b.id()).with_ip_addr(b.bound_sockets()[0]),
    };
    Ok((a, b, addr))
}

/// Measures raw iroh stream throughput and edge throughput (ring to ring through the
/// pumps) over `bytes`, and the hop latency of `object`-byte objects.
pub async fn edge(bytes: u64, object: u64, samples: usize) -> Result<EdgeBench, BenchError> {
    use crate::net::edge::{EdgeRouter, recv_pump, send_pump};
    use crate::net::endpoint::EDGE_ALPN;
    use crate::ring::RingDrain;
    use tokio::sync::Notify;

    let chunk = vec![7u8; 1 << 20];
    let raw_gbps = raw_stream_gbps(bytes, &chunk).await?;

    // Edge: ring -> pumps -> ring.
    let (a, b) = endpoints().await?;
    let (router, _refusals) = EdgeRouter::new();
    router.expect(crate::wire::RunId(1), crate::wire::EdgeId(1), a.id());
    tokio::spawn(router.clone().accept_loop(b.clone(), EdgeRouter::refuse_other));
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
        crate::wire::RunId(1),
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
        let wakes = (&readable, &writable, &writer_wake, &reader_wake);
        rates[i] = edge_gbps_once(&mut producer, &ingress, wakes, (copy, bytes), &chunk).await?;
    }
    let [_, edge_gbps, edge_copying_gbps] = rates;

    let mut drain = RingDrain::new(crate::wire::RingId(2), Arc::clone(&ingress));
    let mut times =
        hop_times(&mut producer, &mut drain, (&readable, &writable), object, samples).await?;
    let mut parts = Vec::new();
    let relay = crate::net::relay::RelayServer::start(([127, 0, 0, 1], 0).into(), None, None)
        .await
        .map_err(err)?;
    for size in PART_SIZES {
        let mut t =
            hop_times(&mut producer, &mut drain, (&readable, &writable), size, samples).await?;
        t.sort();
        let quic_us = quic_latency_us(size, samples, None).await?;
        let relayed_quic_us = quic_latency_us(size, samples, Some(relay.url())).await?;
        let ring_to_ring_us = t[(t.len() - 1) / 2].as_secs_f64() * 1e6;
        parts.push(HopParts {
            object_bytes: size,
            quic_us,
            relayed_quic_us,
            ring_to_ring_us,
            worker_wake_us: 0.0,
        });
    }
    relay.shutdown().await;
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
        parts,
    })
}

/// Median latency of `object`-byte messages on a raw iroh uni stream, one at a time: from
/// the write until the reader holds the whole message, µs; directly, or through `relay`.
async fn quic_latency_us(
    object: u64,
    samples: usize,
    relay: Option<&str>,
) -> Result<f64, BenchError> {
    use crate::net::endpoint::EDGE_ALPN;
    let (a, b, addr) = endpoints_via(relay).await?;
    let (got_tx, mut got_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let reader = {
        let b = b.clone();
        tokio::spawn(async move {
            let conn = b.accept().await.ok_or_else(|| err("no connection"))?.await.map_err(err)?;
            let mut s = conn.accept_uni().await.map_err(err)?;
            let mut buf = vec![0u8; object as usize];
            while s.read_exact(&mut buf).await.is_ok() {
                if got_tx.send(Instant::now()).is_err() {
                    break;
                }
            }
            Ok::<(), BenchError>(())
        })
    };
    let conn = a.connect(addr, EDGE_ALPN).await.map_err(err)?;
    let mut s = conn.open_uni().await.map_err(err)?;
    let message = vec![5u8; object as usize];
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 20 {
        let t0 = Instant::now();
        s.write_all(&message).await.map_err(err)?;
        let at = got_rx.recv().await.ok_or_else(|| err("the reader ended"))?;
        if i >= 20 {
            times.push(at.saturating_duration_since(t0));
        }
    }
    s.finish().map_err(err)?;
    let _ = reader.await;
    conn.close(0u32.into(), b"done");
    a.close().await;
    b.close().await;
    times.sort();
    Ok(times[(times.len() - 1) / 2].as_secs_f64() * 1e6)
}

/// Raw iroh stream throughput over `bytes` in `chunk`-sized writes, in GB/s: the baseline.
async fn raw_stream_gbps(bytes: u64, chunk: &[u8]) -> Result<f64, BenchError> {
    use crate::net::endpoint::EDGE_ALPN;
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
        s.write_all(chunk).await.map_err(err)?;
        sent += chunk.len() as u64;
    }
    s.finish().map_err(err)?;
    let got = reader.await.map_err(err)??;
    let raw_gbps = got as f64 / start.elapsed().as_secs_f64() / 1e9;
    conn.close(0u32.into(), b"done");
    a.close().await;
    b.close().await;

    Ok(raw_gbps)
}

/// Hop latencies of `samples` objects of `object` bytes, one at a time, from the commit on
/// the egress ring (`producer`) to the whole object in the ingress ring (`drain`), after 20
/// untimed ones; `hints` wake the send pump and the receive pump.
async fn hop_times<M: crate::ring::RingMemory>(
    producer: &mut RingFeeder<M>,
    drain: &mut crate::ring::RingDrain<M>,
    hints: (&tokio::sync::Notify, &tokio::sync::Notify),
    object: u64,
    samples: usize,
) -> Result<Vec<Duration>, BenchError> {
    let (readable, writable) = hints;
    // Hop latency: one object at a time, from commit on the egress ring to the whole
    // object committed in the ingress ring. (The throughput consumer is done: this drain
    // continues from where it stopped.)
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
    Ok(times)
}

/// The four wake-ups of an edge bench: the send pump's, the receive pump's, the
/// producer's and the consumer's.
type EdgeWakes<'a> = (
    &'a Arc<tokio::sync::Notify>,
    &'a Arc<tokio::sync::Notify>,
    &'a Arc<tokio::sync::Notify>,
    &'a Arc<tokio::sync::Notify>,
);

/// One timed pass of `bytes` through the edge, in GB/s: the producer commits into the
/// egress ring (copying `chunk` when `copy`, else committing spans already there) while a
/// consumer drains the ingress ring the same way. `wakes`: the send pump's readable hint,
/// the receive pump's writable hint, and the producer's and consumer's own wake-ups.
async fn edge_gbps_once<M: crate::ring::RingMemory + Send + Sync + Clone + 'static>(
    producer: &mut RingFeeder<M>,
    ingress: &M,
    wakes: EdgeWakes<'_>,
    pass: (bool, u64),
    chunk: &[u8],
) -> Result<f64, BenchError> {
    let (readable, writable, writer_wake, reader_wake) = wakes;
    let (copy, bytes) = pass;
    let consume = {
        let (ingress_w, wake) = (Arc::clone(writable), Arc::clone(reader_wake));
        let ingress = ingress.clone();
        tokio::spawn(async move {
            let mut d = crate::ring::RingDrain::new(crate::wire::RingId(2), ingress);
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
                    let _ = tokio::time::timeout(Duration::from_millis(5), wake.notified()).await;
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
            let _ = tokio::time::timeout(Duration::from_millis(5), writer_wake.notified()).await;
            let _ = producer.on_writable();
        }
    }
    readable.notify_one();
    let got = consume.await.map_err(err)??;
    Ok(got as f64 / start.elapsed().as_secs_f64() / 1e9)
}
