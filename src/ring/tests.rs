//! Ring ABI tests: a model-based property test against `VecDeque`, wake coalescing, cursor
//! corruption, and a loom model of producer, consumer and wake hints (liveness).

use proptest::prelude::*;
use std::collections::VecDeque;
use std::sync::Arc;

use super::*;

fn heap_ring(capacity: u64) -> Arc<MappedRing<HeapRegion>> {
    let (region, layout) = HeapRegion::for_ring(1, capacity);
    Arc::new(MappedRing::init(region, &layout).expect("init"))
}

#[test]
fn bytes_come_out_in_order_across_wraparound() {
    let ring = heap_ring(8);
    let mut p = Producer::attach(Arc::clone(&ring));
    let mut c = Consumer::attach(Arc::clone(&ring));
    let mut out = Vec::new();
    for chunk in [&b"abcde"[..], b"fghij", b"klm"] {
        assert_eq!(p.write(chunk).expect("write"), chunk.len());
        p.commit();
        let mut buf = [0u8; 16];
        let n = c.read(&mut buf).expect("read");
        out.extend_from_slice(&buf[..n]);
        c.release();
    }
    assert_eq!(out, b"abcdefghijklm");
}

#[test]
fn a_full_ring_accepts_nothing_until_the_consumer_releases() {
    let ring = heap_ring(4);
    let mut p = Producer::attach(Arc::clone(&ring));
    let mut c = Consumer::attach(Arc::clone(&ring));
    assert_eq!(p.write(b"abcdef").expect("write"), 4);
    assert_eq!(p.free(), Ok(0));
    p.commit();
    let mut buf = [0u8; 2];
    c.read(&mut buf).expect("read");
    assert_eq!(p.free(), Ok(0), "read but unreleased bytes still belong to the ring");
    assert_eq!(c.release(), Wake::Send);
    assert_eq!(p.on_writable(), Ok(2));
}

#[test]
fn uncommitted_bytes_are_invisible_to_the_consumer() {
    let ring = heap_ring(16);
    let mut p = Producer::attach(Arc::clone(&ring));
    let mut c = Consumer::attach(Arc::clone(&ring));
    p.write(b"visible").expect("write");
    p.commit();
    p.write(b"hidden").expect("write");
    assert_eq!(p.uncommitted(), 6);
    assert_eq!(c.available(), Ok(7));
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf), Ok(7));
    assert_eq!(&buf[..7], b"visible");
}

#[test]
fn hints_are_sent_once_per_pending_bit_and_again_after_it_is_handled() {
    let ring = heap_ring(64);
    let mut p = Producer::attach(Arc::clone(&ring));
    let mut c = Consumer::attach(Arc::clone(&ring));
    p.write(b"a").expect("write");
    assert_eq!(p.commit(), Wake::Send);
    p.write(b"b").expect("write");
    assert_eq!(p.commit(), Wake::Coalesced, "the first hint is still unhandled");
    assert_eq!(p.commit(), Wake::Nothing, "nothing new to publish");
    assert_eq!(c.on_readable(), Ok(2), "the handled hint covers both commits");
    p.write(b"c").expect("write");
    assert_eq!(p.commit(), Wake::Send, "the pending bit was cleared by the consumer");
    let mut buf = [0u8; 4];
    c.read(&mut buf).expect("read");
    assert_eq!(c.release(), Wake::Send);
    assert_eq!(c.release(), Wake::Nothing);
}

#[test]
fn a_regressed_or_overrun_cursor_is_reported_as_corrupt() {
    let ring = heap_ring(16);
    let mut p = Producer::attach(Arc::clone(&ring));
    let mut c = Consumer::attach(Arc::clone(&ring));
    p.write(b"abcd").expect("write");
    p.commit();
    ring.store_commit(100); // a broken producer claims more than the capacity
    assert!(matches!(c.available(), Err(RingError::CursorCorrupt { .. })));
    ring.store_commit(4);
    ring.store_consume(9); // a broken consumer releases past commit
    p.write(&[0; 12]).expect("write");
    assert!(matches!(p.on_writable(), Err(RingError::CursorCorrupt { .. })));
}

#[test]
fn attaching_checks_magic_abi_ring_id_and_capacity() {
    let (region, layout) = HeapRegion::for_ring(7, 64);
    let ring = MappedRing::init(region, &layout).expect("init");
    ring.header().abi_version.store(99, std::sync::atomic::Ordering::SeqCst);
    let region = HeapRegion::new(layout.total_len);
    assert_eq!(
        MappedRing::attach(region, &layout).err(),
        Some(crate::wire::reason::RingFault::AbiMismatch)
    );
    let mut other = layout;
    other.ring_id = crate::wire::RingId(8);
    let (region, layout7) = HeapRegion::for_ring(7, 64);
    let fresh = MappedRing::init(region, &layout7).expect("init");
    drop(fresh);
    let (region, _) = HeapRegion::for_ring(7, 64);
    assert!(MappedRing::attach(region, &other).is_err(), "a zeroed header has no magic");
}

#[derive(Debug, Clone)]
enum Op {
    Write(Vec<u8>),
    Commit,
    Read(usize),
    Release,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Write),
        Just(Op::Commit),
        (0usize..40).prop_map(Op::Read),
        Just(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_ring_behaves_like_a_bounded_queue(capacity in 1u64..48, ops in proptest::collection::vec(op(), 1..200)) {
        let ring = heap_ring(capacity);
        let mut p = Producer::attach(Arc::clone(&ring));
        let mut c = Consumer::attach(Arc::clone(&ring));
        // Model: bytes written (private), committed-unread, read-unreleased.
        let mut written: VecDeque<u8> = VecDeque::new();
        let mut committed: VecDeque<u8> = VecDeque::new();
        let mut unreleased = 0u64;
        for op in ops {
            match op {
                Op::Write(bytes) => {
                    let used = written.len() as u64 + committed.len() as u64 + unreleased;
                    let fits = (capacity - used).min(bytes.len() as u64) as usize;
                    prop_assert_eq!(p.write(&bytes).expect("write"), fits);
                    written.extend(&bytes[..fits]);
                }
                Op::Commit => {
                    p.commit();
                    committed.extend(written.drain(..));
                }
                Op::Read(n) => {
                    let mut buf = vec![0u8; n];
                    let got = c.read(&mut buf).expect("read");
                    prop_assert_eq!(got, n.min(committed.len()));
                    let expect: Vec<u8> = committed.drain(..got).collect();
                    prop_assert_eq!(&buf[..got], &expect[..]);
                    unreleased += got as u64;
                }
                Op::Release => {
                    c.release();
                    unreleased = 0;
                }
            }
            let used = written.len() as u64 + committed.len() as u64 + unreleased;
            prop_assert_eq!(p.on_writable().expect("free"), capacity - used);
            prop_assert_eq!(c.available().expect("available"), committed.len() as u64);
        }
    }
}

/// A loom model of the ring memory: loom atomics for the words, one loom cell per data
/// byte so that any overlap of producer writes and consumer reads is reported.
mod loom_model {
    use super::super::{RingMemory, WAKE_READABLE, WAKE_WRITABLE};
    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicU64, Ordering::SeqCst};

    pub struct LoomRing {
        commit: AtomicU64,
        consume: AtomicU64,
        wake: AtomicU64,
        state: AtomicU64,
        data: Vec<UnsafeCell<u8>>,
    }

    impl LoomRing {
        pub fn new(capacity: usize) -> LoomRing {
            LoomRing {
                commit: AtomicU64::new(0),
                consume: AtomicU64::new(0),
                wake: AtomicU64::new(0),
                state: AtomicU64::new(0),
                data: (0..capacity).map(|_| UnsafeCell::new(0)).collect(),
            }
        }
    }

    impl RingMemory for LoomRing {
        fn capacity(&self) -> u64 {
            self.data.len() as u64
        }
        fn load_commit(&self) -> u64 {
            self.commit.load(SeqCst)
        }
        fn store_commit(&self, v: u64) {
            self.commit.store(v, SeqCst)
        }
        fn load_consume(&self) -> u64 {
            self.consume.load(SeqCst)
        }
        fn store_consume(&self, v: u64) {
            self.consume.store(v, SeqCst)
        }
        fn wake_set(&self, bits: u64) -> u64 {
            self.wake.fetch_or(bits, SeqCst)
        }
        fn wake_clear(&self, bits: u64) -> u64 {
            self.wake.fetch_and(!bits, SeqCst)
        }
        fn state_set(&self, bits: u64) -> u64 {
            self.state.fetch_or(bits, SeqCst)
        }
        fn load_state(&self) -> u64 {
            self.state.load(SeqCst)
        }
        unsafe fn write_data(&self, at: u64, src: &[u8]) {
            for (i, b) in src.iter().enumerate() {
                // SAFETY: loom checks that no other thread accesses this cell concurrently.
                self.data[at as usize + i].with_mut(|p| unsafe { *p = *b });
            }
        }
        unsafe fn read_data(&self, at: u64, dst: &mut [u8]) {
            for (i, b) in dst.iter_mut().enumerate() {
                // SAFETY: loom checks that no other thread writes this cell concurrently.
                *b = self.data[at as usize + i].with(|p| unsafe { *p });
            }
        }
    }

    const _: u64 = WAKE_READABLE | WAKE_WRITABLE;
}

#[test]
fn no_interleaving_of_producer_consumer_and_coalesced_hints_loses_a_transition() {
    use loom::sync::{Arc, Condvar, Mutex};
    use loom_model::LoomRing;

    /// A hint mailbox: counts hints sent and not yet taken, plus "the sender is done".
    struct Mailbox {
        state: Mutex<(u32, bool)>,
        cv: Condvar,
    }
    impl Mailbox {
        fn new() -> Mailbox {
            Mailbox { state: Mutex::new((0, false)), cv: Condvar::new() }
        }
        fn send(&self) {
            self.state.lock().unwrap().0 += 1;
            self.cv.notify_one();
        }
        fn finish(&self) {
            self.state.lock().unwrap().1 = true;
            self.cv.notify_one();
        }
        /// Waits for a hint; `false` when the sender finished and no hint is left.
        fn take(&self) -> bool {
            let mut s = self.state.lock().unwrap();
            loop {
                if s.0 > 0 {
                    s.0 -= 1;
                    return true;
                }
                if s.1 {
                    return false;
                }
                s = self.cv.wait(s).unwrap();
            }
        }
    }

    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(2);
    builder.check(|| {
        const TOTAL: usize = 5;
        let ring = Arc::new(LoomRing::new(3));
        let readable = Arc::new(Mailbox::new());
        let writable = Arc::new(Mailbox::new());

        let producer = {
            let (ring, readable, writable) =
                (Arc::clone(&ring), Arc::clone(&readable), Arc::clone(&writable));
            loom::thread::spawn(move || {
                let mut p = Producer::attach(&*ring);
                let data: Vec<u8> = (1..=TOTAL as u8).collect();
                let mut sent = 0;
                while sent < TOTAL {
                    let n = p.write(&data[sent..(sent + 2).min(TOTAL)]).expect("write");
                    sent += n;
                    if p.commit() == Wake::Send {
                        readable.send();
                    }
                    if n == 0 {
                        // Full: wait for a writable hint, then look again. Waiting only on
                        // hints (never polling) makes a lost transition a deadlock.
                        assert!(writable.take(), "consumer stopped while the ring was full");
                        p.on_writable().expect("writable");
                    }
                }
                readable.finish();
            })
        };

        let mut c = Consumer::attach(&*ring);
        let mut got = Vec::new();
        while readable.take() {
            c.on_readable().expect("readable");
            let mut buf = [0u8; 4];
            loop {
                let n = c.read(&mut buf).expect("read");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
                if c.release() == Wake::Send {
                    writable.send();
                }
            }
        }
        writable.finish();
        producer.join().unwrap();
        assert_eq!(got, (1..=TOTAL as u8).collect::<Vec<_>>());
    });
}
