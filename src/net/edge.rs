//! Edge streams: one persistent QUIC uni-stream per edge, from the producing node to the
//! consuming node, opened with a 16-byte preamble (`b"SWEDGE01"` then the edge id, little
//! endian) and then carrying object records back to back. No per-object streams, acks or
//! credits: QUIC orders and retransmits, and its flow control is the backpressure.
//!
//! - [`send_pump`]: reads committed bytes of an egress ring, writes them to the stream, and
//!   releases them only after the write was accepted; a stalled network keeps the bytes in
//!   the ring, so the worker's next step waits.
//! - [`recv_pump`]: byte-blind; reads the stream into the free span of an ingress ring and
//!   stops reading while the ring is full, which stalls the sender through QUIC.
//! - [`EdgeRouter`]: accepts edge streams, authorizes each (edge id of the active plan,
//!   opened by that edge's planned producer, as iroh authenticated it), and hands it to the
//!   receive side whichever of stream and `EstablishRecv` comes first. A stream waiting
//!   for its receiver is not read, so QUIC stalls its sender. A stream for an edge the node
//!   has not been provisioned with yet is held unread for [`UNCLAIMED_TIMEOUT`] (the
//!   producer's provisioning may overtake the consumer's), then refused. Refused streams
//!   never touch a ring.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iroh::endpoint::{Connection, RecvStream, SendStream, VarInt};
use iroh::{Endpoint, EndpointId};
use tokio::sync::{Notify, mpsc, oneshot};

use super::endpoint::EDGE_ALPN;
use crate::ring::{RingDrain, RingFeeder, RingMemory, Wake};
use crate::wire::evidence::PumpStopped;
use crate::wire::reason::StreamFault;
use crate::wire::{EdgeId, RunId};

/// Magic at the start of every edge stream.
pub const PREAMBLE_MAGIC: [u8; 8] = *b"SWEDGE02";
/// Preamble length.
pub const PREAMBLE_LEN: usize = 24;
/// Largest chunk the receive pump moves at once.
pub const PUMP_CHUNK: usize = 1024 * 1024;
/// Largest chunk the send pump hands to the stream at once.
pub const SEND_CHUNK: usize = 1024 * 1024;
/// How long a new stream may take to send its preamble.
pub const PREAMBLE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a stream for an edge not (yet) in this node's plan is held before it is
/// refused as `unknown_edge`: long enough for a loaded host to finish provisioning the
/// run whose producer got here first.
pub const UNCLAIMED_TIMEOUT: Duration = Duration::from_secs(10);
/// Most streams held unclaimed at once (one per edge id); more are refused at once.
pub const MAX_UNCLAIMED: usize = 64;
/// How long a stopping send pump waits for the peer to acknowledge the stream's end.
pub const STOP_LINGER: Duration = Duration::from_millis(500);
/// Stream stop code: the edge id is not in the active plan.
pub const STOP_UNKNOWN_EDGE: u32 = 1;
/// Stream stop code: the peer is not the edge's planned producer.
pub const STOP_UNAUTHORIZED: u32 = 2;
/// Stream stop code: the preamble is malformed.
pub const STOP_PROTOCOL: u32 = 3;

/// Encodes an edge stream's preamble: the magic, the run, the edge. The run tells a
/// stream of this run from one of an earlier run of the same edge id that arrives late.
pub fn preamble(run_id: RunId, edge_id: EdgeId) -> [u8; PREAMBLE_LEN] {
    let mut p = [0u8; PREAMBLE_LEN];
    p[..8].copy_from_slice(&PREAMBLE_MAGIC);
    p[8..16].copy_from_slice(&run_id.0.to_le_bytes());
    p[16..].copy_from_slice(&edge_id.0.to_le_bytes());
    p
}

/// Decodes a preamble into its run and edge; `None` when the magic is wrong.
pub fn parse_preamble(bytes: &[u8; PREAMBLE_LEN]) -> Option<(RunId, EdgeId)> {
    let word =
        |r: std::ops::Range<usize>| u64::from_le_bytes(bytes[r].try_into().unwrap_or([0; 8]));
    (bytes[..8] == PREAMBLE_MAGIC).then(|| (RunId(word(8..16)), EdgeId(word(16..24))))
}

/// Bytes and stalls a pump saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PumpStats {
    /// Bytes moved.
    pub bytes: u64,
    /// Times the pump waited for ring space (recv) or ring data (send).
    pub stalls: u64,
}

/// Why a pump ended.
#[derive(Debug)]
pub enum PumpEnd {
    /// Stopped on request (or the stream ended cleanly); the evidence releases the ring.
    Stopped(PumpStopped, PumpStats),
    /// The stream or ring failed.
    Faulted(StreamFault, PumpStopped, PumpStats),
}

/// Moves an egress ring's committed bytes to a new uni-stream on `conn`.
///
/// `readable` is notified on every `RingReadable` hint from the worker; `writable_hint` is
/// called when the worker must be told that space was released. The pump ends when `stop`
/// is notified (after sending everything committed so far) or on a fault.
pub async fn send_pump<M: RingMemory>(
    conn: Connection,
    run_id: RunId,
    edge_id: EdgeId,
    drain: RingDrain<M>,
    readable: Arc<Notify>,
    stop: Arc<Notify>,
    writable_hint: impl FnMut(),
) -> PumpEnd {
    match open_edge_stream(&conn, run_id, edge_id).await {
        Ok(stream) => {
            let abort = Arc::default();
            send_pump_on(stream, drain, readable, (stop, abort), writable_hint).await
        }
        Err(fault) => PumpEnd::Faulted(fault, drain.stop(), PumpStats::default()),
    }
}

/// Opens an edge's uni-stream on `conn` and writes its preamble (once, before any object).
pub async fn open_edge_stream(
    conn: &Connection,
    run_id: RunId,
    edge_id: EdgeId,
) -> Result<SendStream, StreamFault> {
    let mut stream = conn.open_uni().await.map_err(|_| StreamFault::ConnectFailed)?;
    let pre = preamble(run_id, edge_id);
    stream.write_all(&pre).await.map_err(|_| StreamFault::WriteFailed)?;
    Ok(stream)
}

/// The send pump on a stream already opened by [`open_edge_stream`]; see [`send_pump`].
/// `(stop, abort)`: the stop request, and whether a stop skips waiting for the peer's
/// acknowledgement (set before the stop when the run faulted).
pub async fn send_pump_on<M: RingMemory>(
    mut stream: SendStream,
    mut drain: RingDrain<M>,
    readable: Arc<Notify>,
    (stop, abort): (Arc<Notify>, Arc<AtomicBool>),
    mut writable_hint: impl FnMut(),
) -> PumpEnd {
    let mut stats = PumpStats::default();
    let mut stopping = false;
    let mut buf = bytes::BytesMut::with_capacity(SEND_CHUNK);
    loop {
        // Send everything committed so far. Each chunk is copied out of the ring once into
        // a buffer the stream takes over (no second copy inside QUIC); the buffer's memory
        // is reused once QUIC has sent the chunk.
        loop {
            let available = match drain.consumer().available() {
                Ok(n) => n.min(SEND_CHUNK as u64) as usize,
                Err(_) => return PumpEnd::Faulted(StreamFault::ProtocolError, drain.stop(), stats),
            };
            if available == 0 {
                break;
            }
            buf.reserve(available);
            if drain
                .consumer()
                .read_with(available as u64, |span| buf.extend_from_slice(span))
                .is_err()
            {
                return PumpEnd::Faulted(StreamFault::ProtocolError, drain.stop(), stats);
            }
            let chunk = buf.split().freeze();
            let n = chunk.len();
            if stream.write_chunk(chunk).await.is_err() {
                return PumpEnd::Faulted(StreamFault::WriteFailed, drain.stop(), stats);
            }
            // Accepted by the stream: the ring may reuse the bytes now.
            stats.bytes += n as u64;
            if drain.consumer().release() == Wake::Send {
                writable_hint();
            }
        }
        if stopping {
            // Everything committed was handed to QUIC, which keeps delivering it; wait a
            // bounded time for the peer's acknowledgement (a dead peer never sends one),
            // unless the run faulted and nobody needs the last bytes.
            let _ = stream.finish();
            if !abort.load(Ordering::Relaxed) {
                let _ = tokio::time::timeout(STOP_LINGER, stream.stopped()).await;
            }
            return PumpEnd::Stopped(drain.stop(), stats);
        }
        stats.stalls += 1;
        tokio::select! {
            _ = readable.notified() => {
                let _ = drain.on_readable();
            }
            _ = stop.notified() => stopping = true,
        }
    }
}

/// Moves an edge stream's bytes into an ingress ring, byte-blind.
///
/// `writable` is notified on every `RingWritable` hint from the worker; `readable_hint` is
/// called when the worker must be told that bytes were committed.
pub async fn recv_pump<M: RingMemory>(
    mut stream: RecvStream,
    mut feeder: RingFeeder<M>,
    writable: Arc<Notify>,
    stop: Arc<Notify>,
    mut readable_hint: impl FnMut(),
) -> PumpEnd {
    let mut stats = PumpStats::default();
    loop {
        let free = match feeder.producer().free() {
            Ok(f) => f as usize,
            Err(_) => return PumpEnd::Faulted(StreamFault::ProtocolError, feeder.stop(), stats),
        };
        if free == 0 {
            // Ring full: stop reading; QUIC flow control stalls the sender.
            stats.stalls += 1;
            tokio::select! {
                _ = writable.notified() => {
                    let _ = feeder.on_writable();
                    continue;
                }
                _ = stop.notified() => {
                    let _ = stream.stop(VarInt::from_u32(0));
                    return PumpEnd::Stopped(feeder.stop(), stats);
                }
            }
        }
        // QUIC hands over its own buffer: one copy, into the ring.
        let read = tokio::select! {
            r = stream.read_chunk(free.min(PUMP_CHUNK)) => r,
            _ = stop.notified() => {
                let _ = stream.stop(VarInt::from_u32(0));
                return PumpEnd::Stopped(feeder.stop(), stats);
            }
        };
        match read {
            Ok(Some(chunk)) => {
                let n = chunk.len();
                let (written, wake) = match feeder.push(&chunk) {
                    Ok(w) => w,
                    Err(_) => {
                        return PumpEnd::Faulted(StreamFault::ProtocolError, feeder.stop(), stats);
                    }
                };
                debug_assert_eq!(written, n, "at most the free span was read");
                stats.bytes += n as u64;
                if wake == Wake::Send {
                    readable_hint();
                }
            }
            Ok(None) => {
                // The producer finished the stream: end of the byte stream for the worker.
                if feeder.close() == Wake::Send {
                    readable_hint();
                }
                return PumpEnd::Stopped(feeder.stop(), stats);
            }
            Err(_) => return PumpEnd::Faulted(StreamFault::ReadFailed, feeder.stop(), stats),
        }
    }
}

/// A stream the router refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The edge id the stream named (if its preamble was readable).
    pub edge_id: Option<EdgeId>,
    /// The authenticated peer.
    pub peer: EndpointId,
    /// Why.
    pub reason: StreamFault,
}

/// Which peers may open an edge stream before this node knows the edge's producer.
pub type EarlyPeers = Arc<dyn Fn(&EndpointId) -> bool + Send + Sync>;

#[derive(Default)]
struct RouterState {
    /// Each provisioned edge's run and planned producer.
    expected: HashMap<EdgeId, (RunId, EndpointId)>,
    pending: HashMap<EdgeId, (EndpointId, RecvStream)>,
    waiting: HashMap<EdgeId, oneshot::Sender<RecvStream>>,
    /// Streams for edges this node has not been provisioned with yet (the producer's
    /// provisioning may overtake ours), by edge and peer: held unread for
    /// [`UNCLAIMED_TIMEOUT`], then refused. A peer's stream never displaces another
    /// peer's. The number tells a hold from a later one of the same edge and peer.
    unclaimed: HashMap<(EdgeId, EndpointId), (RunId, RecvStream, u64)>,
    holds: u64,
    /// Who may open a stream early (the pool's members); `None` admits any peer.
    early: Option<EarlyPeers>,
    /// Edges whose stream was handed to their receive end (until the edge is forgotten).
    claimed: std::collections::HashSet<EdgeId>,
}

/// Accepts edge streams for one node and pairs them with their receive edges.
#[derive(Clone)]
pub struct EdgeRouter {
    state: Arc<Mutex<RouterState>>,
    refusals: mpsc::UnboundedSender<Refusal>,
    paths: super::paths::Paths,
}

impl std::fmt::Debug for EdgeRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EdgeRouter")
    }
}

impl EdgeRouter {
    /// A router; refused streams are reported on the returned receiver.
    pub fn new() -> (EdgeRouter, mpsc::UnboundedReceiver<Refusal>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (EdgeRouter { state: Arc::default(), refusals: tx, paths: Default::default() }, rx)
    }

    /// Admits early streams (for edges not provisioned here yet) only from peers `early`
    /// accepts: a node passes its pool's members, so a stranger's stream is refused at once
    /// (`unauthorized_peer`, counted) and never held.
    pub fn admit_early(&self, early: EarlyPeers) {
        self.lock().early = Some(early);
    }

    /// Authorizes streams for `edge_id` from `producer` (the active plan's edge). The
    /// producer's stream that arrived early for this edge is routed now; any other peer's
    /// held for it is refused.
    pub fn expect(&self, run_id: RunId, edge_id: EdgeId, producer: EndpointId) {
        let (own, others) = {
            let mut s = self.lock();
            s.expected.insert(edge_id, (run_id, producer));
            let keys: Vec<(EdgeId, EndpointId)> =
                s.unclaimed.keys().filter(|(e, _)| *e == edge_id).copied().collect();
            let mut own = None;
            let mut others = Vec::new();
            for key in keys {
                let Some((run, stream, _)) = s.unclaimed.remove(&key) else { continue };
                match (key.1 == producer, run == run_id) {
                    (true, true) => own = Some(stream),
                    (true, false) => others.push((key.1, stream, StreamFault::UnknownEdge)),
                    (false, _) => others.push((key.1, stream, StreamFault::UnauthorizedPeer)),
                }
            }
            (own, others)
        };
        for (peer, stream, reason) in others {
            self.refuse(peer, Some(edge_id), stream, reason);
        }
        if let Some(stream) = own {
            self.route(producer, run_id, edge_id, stream);
        }
    }

    /// Stops `stream` with the code of `reason` and reports the refusal.
    fn refuse(
        &self,
        peer: EndpointId,
        edge_id: Option<EdgeId>,
        mut stream: RecvStream,
        reason: StreamFault,
    ) {
        let code = match reason {
            StreamFault::UnauthorizedPeer => STOP_UNAUTHORIZED,
            StreamFault::ProtocolError => STOP_PROTOCOL,
            _ => STOP_UNKNOWN_EDGE,
        };
        let _ = stream.stop(VarInt::from_u32(code));
        let _ = self.refusals.send(Refusal { edge_id, peer, reason });
    }

    /// Forgets an edge (its run ended on this node). Edge ids repeat from run to run: a
    /// stream for it that no end took — routed but never taken, or held early because the
    /// edge was never provisioned here — is this run's (or older) and is refused now, never
    /// handed to the next run of the same edge id, whose producer opens a stream of its own
    /// only after this run is torn down (the orchestrator starts no run before every stage
    /// stopped, and a stage stops after its edges were forgotten).
    pub fn forget(&self, edge_id: EdgeId) {
        let mut s = self.lock();
        s.expected.remove(&edge_id);
        s.waiting.remove(&edge_id);
        s.claimed.remove(&edge_id);
        // Its run's streams that its end never took (the stage faulted or stopped first,
        // or never provisioned the edge): they end with the run, and are never handed to
        // the next run of the same edge id.
        let mut stale: Vec<(EndpointId, RecvStream)> =
            s.pending.remove(&edge_id).into_iter().collect();
        let held: Vec<(EdgeId, EndpointId)> =
            s.unclaimed.keys().filter(|(e, _)| *e == edge_id).copied().collect();
        for key in held {
            if let Some((_, stream, _)) = s.unclaimed.remove(&key) {
                stale.push((key.1, stream));
            }
        }
        drop(s);
        for (peer, stream) in stale {
            self.refuse(peer, Some(edge_id), stream, StreamFault::UnknownEdge);
        }
    }

    /// Holds `stream` unread as unclaimed for [`UNCLAIMED_TIMEOUT`], then refuses it
    /// unless `expect` claimed it. Only a peer the router admits early is held; a peer's
    /// later stream for the same edge replaces only its own earlier one.
    fn hold(
        &self,
        mut s: std::sync::MutexGuard<'_, RouterState>,
        peer: EndpointId,
        run_id: RunId,
        edge_id: EdgeId,
        stream: RecvStream,
    ) {
        if s.early.as_ref().is_some_and(|admits| !admits(&peer)) {
            drop(s);
            self.refuse(peer, Some(edge_id), stream, StreamFault::UnauthorizedPeer);
            return;
        }
        let key = (edge_id, peer);
        if s.unclaimed.len() >= MAX_UNCLAIMED && !s.unclaimed.contains_key(&key) {
            drop(s);
            self.refuse(peer, Some(edge_id), stream, StreamFault::UnknownEdge);
            return;
        }
        s.holds += 1;
        let hold = s.holds;
        let replaced = s.unclaimed.insert(key, (run_id, stream, hold));
        drop(s);
        if let Some((_, old, _)) = replaced {
            self.refuse(peer, Some(edge_id), old, StreamFault::UnknownEdge);
        }
        let router = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(UNCLAIMED_TIMEOUT).await;
            let expired = {
                let mut s = router.lock();
                match s.unclaimed.get(&key) {
                    Some((_, _, h)) if *h == hold => s.unclaimed.remove(&key),
                    _ => None,
                }
            };
            if let Some((_, stream, _)) = expired {
                router.refuse(peer, Some(edge_id), stream, StreamFault::UnknownEdge);
            }
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RouterState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The receive side's half of the rendezvous: resolves with the edge's stream, whether
    /// it already arrived or arrives later.
    pub fn stream_for(&self, edge_id: EdgeId) -> oneshot::Receiver<RecvStream> {
        let (tx, rx) = oneshot::channel();
        let mut s = self.lock();
        match s.pending.remove(&edge_id) {
            Some((_, stream)) => {
                s.claimed.insert(edge_id);
                let _ = tx.send(stream);
            }
            None => {
                s.waiting.insert(edge_id, tx);
            }
        }
        rx
    }

    fn route(&self, peer: EndpointId, run_id: RunId, edge_id: EdgeId, stream: RecvStream) {
        let mut s = self.lock();
        match s.expected.get(&edge_id) {
            None => {
                // Not (yet) ours: hold it unread; refuse it if nobody claims it in time.
                self.hold(s, peer, run_id, edge_id, stream);
                return;
            }
            Some((_, p)) if *p != peer => {
                drop(s);
                self.refuse(peer, Some(edge_id), stream, StreamFault::UnauthorizedPeer);
                return;
            }
            Some((run, _)) if *run != run_id => {
                // Another run's stream of the same edge id: never this run's.
                drop(s);
                self.refuse(peer, Some(edge_id), stream, StreamFault::UnknownEdge);
                return;
            }
            Some(_) => {}
        }
        if s.pending.contains_key(&edge_id) || s.claimed.contains(&edge_id) {
            // The edge has its stream: a later one never displaces it, and is never kept
            // for another run (a run starts only after this one's edges were forgotten).
            drop(s);
            self.refuse(peer, Some(edge_id), stream, StreamFault::DuplicateStream);
            return;
        }
        match s.waiting.remove(&edge_id) {
            Some(tx) => match tx.send(stream) {
                Ok(()) => {
                    s.claimed.insert(edge_id);
                }
                Err(stream) => {
                    s.pending.insert(edge_id, (peer, stream));
                }
            },
            None => {
                s.pending.insert(edge_id, (peer, stream));
            }
        }
    }

    /// The edge connections this node holds (accepted here, dialed by its executor).
    pub fn paths(&self) -> &super::paths::Paths {
        &self.paths
    }

    /// Serves one accepted edge connection: routes every uni-stream it opens.
    pub async fn serve_connection(&self, conn: Connection) {
        self.paths.track(&conn);
        let peer = conn.remote_id();
        while let Ok(mut stream) = conn.accept_uni().await {
            let mut pre = [0u8; PREAMBLE_LEN];
            let read = tokio::time::timeout(PREAMBLE_TIMEOUT, stream.read_exact(&mut pre)).await;
            match read.ok().and_then(|r| r.ok()).and_then(|()| parse_preamble(&pre)) {
                Some((run_id, edge_id)) => self.route(peer, run_id, edge_id, stream),
                None => self.refuse(peer, None, stream, StreamFault::ProtocolError),
            }
        }
    }

    /// Accepts edge connections on `endpoint` until it closes, and answers link probes;
    /// a connection on any other ALPN goes to `other` (the orchestrator's SWIM carrier),
    /// which serves it.
    pub async fn accept_loop<F, Fut>(self, endpoint: Endpoint, other: F)
    where
        F: Fn(Connection) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send,
    {
        while let Some(incoming) = endpoint.accept().await {
            let (router, other) = (self.clone(), other.clone());
            tokio::spawn(async move {
                let Ok(conn) = incoming.await else { return };
                if conn.alpn() == EDGE_ALPN {
                    router.serve_connection(conn).await;
                } else if conn.alpn() == super::ping::PING_ALPN {
                    super::ping::answer(conn).await;
                } else {
                    other(conn).await;
                }
            });
        }
    }

    /// What [`EdgeRouter::accept_loop`] does with a connection on another ALPN where nobody
    /// serves one: closes it.
    pub async fn refuse_other(conn: Connection) {
        conn.close(2u32.into(), b"unknown_alpn");
    }
}

/// A running pump's controls: `hint` forwards the worker's wake hints (`RingReadable` for a
/// send pump, `RingWritable` for a receive pump), `stop` ends it, `abort` (set before the
/// stop) ends a send pump without waiting for its peer.
#[derive(Debug, Default)]
pub struct PumpHandle {
    /// Wake hints from the ring's other side.
    pub hint: Arc<Notify>,
    /// Stop request.
    pub stop: Arc<Notify>,
    /// Skip the wait for the peer's acknowledgement at the stop.
    pub abort: Arc<AtomicBool>,
}

/// Spawns a send pump for `edge_id`: waits for `connect`, opens the edge stream, calls
/// `on_ready`, then pumps `drain` until stopped or faulted and hands the end to `on_end`.
/// A stop before the stream is open ends it as stopped.
pub fn spawn_send<M: RingMemory + Send + 'static>(
    run_id: RunId,
    edge_id: EdgeId,
    drain: RingDrain<M>,
    connect: impl std::future::Future<Output = Result<Connection, StreamFault>> + Send + 'static,
    writable_hint: impl FnMut() + Send + 'static,
    on_ready: impl FnOnce() + Send + 'static,
    on_end: impl FnOnce(PumpEnd) + Send + 'static,
) -> PumpHandle {
    let handle = PumpHandle::default();
    let (hint, stop) = (Arc::clone(&handle.hint), Arc::clone(&handle.stop));
    let abort = Arc::clone(&handle.abort);
    tokio::spawn(async move {
        let opened = tokio::select! {
            r = async { open_edge_stream(&connect.await?, run_id, edge_id).await } => Some(r),
            _ = stop.notified() => None,
        };
        on_end(match opened {
            Some(Ok(stream)) => {
                on_ready();
                send_pump_on(stream, drain, hint, (stop, abort), writable_hint).await
            }
            Some(Err(fault)) => PumpEnd::Faulted(fault, drain.stop(), PumpStats::default()),
            None => PumpEnd::Stopped(drain.stop(), PumpStats::default()),
        });
    });
    handle
}

/// Spawns a receive pump that waits for its edge's stream (from
/// [`EdgeRouter::stream_for`]), then pumps it into `feeder` until stopped or faulted and
/// hands the end to `on_end`. A stop before the stream arrives ends it as stopped.
pub fn spawn_recv<M: RingMemory + Send + 'static>(
    stream: oneshot::Receiver<RecvStream>,
    feeder: RingFeeder<M>,
    readable_hint: impl FnMut() + Send + 'static,
    on_end: impl FnOnce(PumpEnd) + Send + 'static,
) -> PumpHandle {
    let handle = PumpHandle::default();
    let (hint, stop) = (Arc::clone(&handle.hint), Arc::clone(&handle.stop));
    tokio::spawn(async move {
        let stream = tokio::select! {
            s = stream => s.ok(),
            _ = stop.notified() => None,
        };
        on_end(match stream {
            Some(s) => recv_pump(s, feeder, hint, stop, readable_hint).await,
            None => PumpEnd::Stopped(feeder.stop(), PumpStats::default()),
        });
    });
    handle
}
