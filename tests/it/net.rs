//! The network data plane on loopback: real iroh endpoints, real memfd rings, the send and
//! receive pumps, the rendezvous and its authorization.

use std::sync::Arc;
use std::time::Duration;

use iroh::{Endpoint, EndpointAddr};
use swactor::arena::Arena;
use swactor::arena::memfd::ArenaRegion;
use swactor::net::edge::{EdgeRouter, PumpEnd, preamble, recv_pump, send_pump};
use swactor::net::endpoint::{EDGE_ALPN, bind};
use swactor::net::identity::NodeKey;
use swactor::ring::{MappedRing, RingDrain, RingFeeder, Wake};
use swactor::wire::reason::StreamFault;
use swactor::wire::{EdgeId, RingId, RingLayout, RunId};
use tokio::sync::Notify;

type Ring = Arc<MappedRing<ArenaRegion>>;

fn ring(id: u64, capacity: u64) -> Ring {
    let arena = Arc::new(Arena::create(1 << 20).expect("arena"));
    let layout = RingLayout {
        ring_id: RingId(id),
        arena_offset: 0,
        total_len: 4096 + capacity,
        header_offset: 0,
        data_offset: 4096,
        data_capacity: capacity,
        alignment: 4096,
    };
    Arc::new(MappedRing::init(arena.region(&layout).expect("region"), &layout).expect("init"))
}

async fn node(seed: u8) -> Endpoint {
    bind(
        &NodeKey::from_bytes(&[seed; 32]),
        "127.0.0.1:0".parse().expect("addr"),
        &swactor::net::relay::Relays::none(),
    )
    .await
    .expect("bind")
}

fn addr(e: &Endpoint) -> EndpointAddr {
    EndpointAddr::new(e.id()).with_ip_addr(e.bound_sockets()[0])
}

fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(131).wrapping_add(i >> 9) & 0xff) as u8
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_stream_over_an_edge_with_a_slow_consumer_and_nothing_is_lost() {
    let (a, b) = (node(1).await, node(2).await);
    let (router, _refusals) = EdgeRouter::new();
    router.expect(RunId(1), EdgeId(7), a.id());
    tokio::spawn(router.clone().accept_loop(b.clone(), EdgeRouter::refuse_other));
    let stream_rx = router.stream_for(EdgeId(7)); // the receiver registers first

    let egress = ring(1, 64 * 1024);
    let ingress = ring(2, 64 * 1024);
    let (a_readable, a_stop, writer_wake) =
        (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    let conn = a.connect(addr(&b), EDGE_ALPN).await.expect("connect");
    let ww = Arc::clone(&writer_wake);
    let sender = tokio::spawn(send_pump(
        conn,
        RunId(1),
        EdgeId(7),
        RingDrain::new(RingId(1), Arc::clone(&egress)),
        Arc::clone(&a_readable),
        Arc::clone(&a_stop),
        move || ww.notify_one(),
    ));

    let (b_writable, b_stop, consumer_wake) =
        (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    let cw = Arc::clone(&consumer_wake);
    let (bw, bs) = (Arc::clone(&b_writable), Arc::clone(&b_stop));
    let ingress_feeder = RingFeeder::new(RingId(2), Arc::clone(&ingress));
    let receiver = tokio::spawn(async move {
        let stream = stream_rx.await.expect("rendezvous");
        recv_pump(stream, ingress_feeder, bw, bs, move || cw.notify_one()).await
    });

    // The producing "worker": writes 6 MiB into the egress ring, waiting when it is full.
    let total: u64 = 6 << 20;
    let writer = {
        let egress = Arc::clone(&egress);
        let (readable, wake) = (Arc::clone(&a_readable), Arc::clone(&writer_wake));
        tokio::spawn(async move {
            let mut feeder = RingFeeder::new(RingId(1), egress);
            let mut sent = 0u64;
            let mut stalls = 0u64;
            let chunk: Vec<u8> = Vec::with_capacity(32 * 1024);
            let mut chunk = chunk;
            while sent < total {
                chunk.clear();
                chunk.extend((sent..(sent + 32 * 1024).min(total)).map(pattern));
                let mut off = 0;
                while off < chunk.len() {
                    let (n, w) = feeder.push(&chunk[off..]).expect("push");
                    off += n;
                    if w == Wake::Send {
                        readable.notify_one();
                    }
                    if n == 0 {
                        stalls += 1;
                        let _ =
                            tokio::time::timeout(Duration::from_millis(50), wake.notified()).await;
                        feeder.on_writable().expect("writable");
                    }
                }
                sent += chunk.len() as u64;
            }
            stalls
        })
    };

    // The consuming "worker": slow, 16 KiB at a time.
    let mut drain = RingDrain::new(RingId(2), Arc::clone(&ingress));
    let mut got = 0u64;
    let mut buf = vec![0u8; 16 * 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while got < total {
        assert!(tokio::time::Instant::now() < deadline, "stalled at {got} of {total}");
        let (n, w) = drain.pull(&mut buf).expect("pull");
        for (k, byte) in buf[..n].iter().enumerate() {
            assert_eq!(*byte, pattern(got + k as u64), "byte {}", got + k as u64);
        }
        got += n as u64;
        if w == Wake::Send {
            b_writable.notify_one();
        }
        if n == 0 {
            let _ = tokio::time::timeout(Duration::from_millis(20), consumer_wake.notified()).await;
            drain.on_readable().expect("readable");
        } else {
            tokio::time::sleep(Duration::from_micros(300)).await;
        }
    }
    let stalls = writer.await.expect("writer");
    assert!(stalls > 0, "a slow consumer must stall the producer (backpressure)");
    a_stop.notify_one();
    match sender.await.expect("sender") {
        PumpEnd::Stopped(_, stats) => assert_eq!(stats.bytes, total),
        other => panic!("{other:?}"),
    }
    match receiver.await.expect("receiver") {
        PumpEnd::Stopped(_, stats) => {
            assert_eq!(stats.bytes, total);
            assert!(stats.stalls > 0, "the receive pump stopped reading while the ring was full");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_for_unknown_edges_or_from_other_peers_are_refused_and_a_valid_one_waits_for_its_receiver()
 {
    let (a, b, c) = (node(11).await, node(12).await, node(13).await);
    let (router, mut refusals) = EdgeRouter::new();
    router.expect(RunId(1), EdgeId(7), a.id());
    tokio::spawn(router.clone().accept_loop(b.clone(), EdgeRouter::refuse_other));

    let open = |from: &Endpoint, run: u64, edge: u64| {
        let (from, to) = (from.clone(), addr(&b));
        async move {
            let conn = from.connect(to, EDGE_ALPN).await.expect("connect");
            let mut s = conn.open_uni().await.expect("open");
            // A refused stream is stopped at once: its writes may fail, which is the point.
            let _ = s.write_all(&preamble(RunId(run), EdgeId(edge))).await;
            let _ = s.write_all(b"payload").await;
            (conn, s)
        }
    };
    let _unknown = open(&a, 1, 99).await;
    let first = tokio::time::timeout(Duration::from_secs(30), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!(
        (first.edge_id, first.reason, first.peer),
        (Some(EdgeId(99)), StreamFault::UnknownEdge, a.id())
    );
    let _impostor = open(&c, 1, 7).await;
    let second = tokio::time::timeout(Duration::from_secs(10), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!(
        (second.edge_id, second.reason, second.peer),
        (Some(EdgeId(7)), StreamFault::UnauthorizedPeer, c.id())
    );

    // The planned producer's stream arrives before anyone asks for it: it waits, unread.
    let (_conn, _s) = open(&a, 1, 7).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut stream = tokio::time::timeout(Duration::from_secs(5), router.stream_for(EdgeId(7)))
        .await
        .expect("rendezvous")
        .expect("stream");
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"payload", "the impostor's bytes never reached the edge");

    // Edge ids repeat from run to run. A stream of this run that its end never took (the
    // stage faulted first) is refused when the edge is forgotten: the next run of edge 7
    // never reads this run's stream, only the one its producer opens for it.
    router.forget(EdgeId(7));
    router.expect(RunId(2), EdgeId(7), a.id());
    let (_conn2, _s2) = open(&a, 2, 7).await;
    let (_conn3, _s3) = open(&a, 2, 7).await;
    let refused = tokio::time::timeout(Duration::from_secs(10), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!(
        (refused.edge_id, refused.reason),
        (Some(EdgeId(7)), StreamFault::DuplicateStream),
        "a second stream never displaces the first"
    );
    let mut next = tokio::time::timeout(Duration::from_secs(5), router.stream_for(EdgeId(7)))
        .await
        .expect("the next run's rendezvous")
        .expect("stream");
    next.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"payload");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_strangers_early_streams_are_refused_at_once_and_never_displace_the_producers() {
    let (a, b, c) = (node(21).await, node(22).await, node(23).await);
    let (router, mut refusals) = EdgeRouter::new();
    // The pool's members may open streams before this node is provisioned; c is no member.
    let member = a.id();
    router.admit_early(Arc::new(move |peer| *peer == member));
    tokio::spawn(router.clone().accept_loop(b.clone(), EdgeRouter::refuse_other));
    let open = |from: &Endpoint, run: u64, edge: u64, payload: &'static [u8]| {
        let (from, to) = (from.clone(), addr(&b));
        async move {
            let conn = from.connect(to, EDGE_ALPN).await.expect("connect");
            let mut s = conn.open_uni().await.expect("open");
            // A refused stream is stopped at once: its writes may fail, which is the point.
            let _ = s.write_all(&preamble(RunId(run), EdgeId(edge))).await;
            let _ = s.write_all(payload).await;
            (conn, s)
        }
    };
    // The stranger floods early streams for the plan's small, predictable edge ids.
    let mut flood = Vec::new();
    for edge in [1, 2, 3, 7, 7, 7] {
        flood.push(open(&c, 1, edge, b"forged!").await);
    }
    // The producer's own early stream, then more of the stranger's for the same edge.
    let _mine = open(&a, 1, 7, b"payload").await;
    for _ in 0..3 {
        flood.push(open(&c, 1, 7, b"forged!").await);
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while seen.len() < 9 && std::time::Instant::now() < deadline {
        if let Ok(Some(r)) = tokio::time::timeout(Duration::from_millis(200), refusals.recv()).await
        {
            seen.push(r);
        }
    }
    assert_eq!(seen.len(), 9, "every stranger's stream refused at once: {seen:?}");
    assert!(
        seen.iter().all(|r| r.peer == c.id() && r.reason == StreamFault::UnauthorizedPeer),
        "{seen:?}"
    );
    // Provisioning comes: the producer's stream is the one routed, with its own bytes.
    router.expect(RunId(1), EdgeId(7), a.id());
    let mut stream = tokio::time::timeout(Duration::from_secs(5), router.stream_for(EdgeId(7)))
        .await
        .expect("rendezvous")
        .expect("stream");
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).await.expect("read");
    assert_eq!(&buf, b"payload");
    // A later stream of the producer's own never displaces the claimed one: refused.
    let (_conn2, _s2) = open(&a, 1, 7, b"nextrun").await;
    let dup = tokio::time::timeout(Duration::from_secs(10), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!((dup.peer, dup.reason), (a.id(), StreamFault::DuplicateStream));
    stream.read_exact(&mut [0u8; 0]).await.expect("the claimed stream still reads");
    // A stream of a run whose end never took it is refused when the edge is forgotten,
    // never handed to the next run of the same edge id.
    router.forget(EdgeId(7));
    router.expect(RunId(1), EdgeId(8), a.id());
    let (_conn3, _s3) = open(&a, 1, 8, b"orphan!").await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    router.forget(EdgeId(8));
    let orphan = tokio::time::timeout(Duration::from_secs(10), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!((orphan.edge_id, orphan.reason), (Some(EdgeId(8)), StreamFault::UnknownEdge));
    router.expect(RunId(2), EdgeId(8), a.id());
    let next = tokio::time::timeout(Duration::from_millis(500), router.stream_for(EdgeId(8))).await;
    assert!(next.is_err(), "the next run of edge 8 does not get the orphan");
    // A run-1 stream of edge 8 that arrives only now (its producer was slow) is another
    // run's: refused, never taken for run 2's edge 8.
    let (_conn4, _s4) = open(&a, 1, 8, b"latecomer").await;
    let late = tokio::time::timeout(Duration::from_secs(10), refusals.recv())
        .await
        .expect("refusal")
        .expect("open");
    assert_eq!((late.edge_id, late.reason), (Some(EdgeId(8)), StreamFault::UnknownEdge));
}
