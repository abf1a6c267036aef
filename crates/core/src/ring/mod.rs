//! The ring ABI: a bounded single-producer single-consumer byte stream in shared memory,
//! one implementation used by both the node and the worker.
//!
//! Two monotonic `u64` cursors live in the ring header, each on its own cache line:
//! `commit` (first byte not yet readable) and `consume` (first byte not yet released).
//! Readable bytes are `consume..commit`; the ring is empty when they are equal and full when
//! `write - consume == capacity`; a cursor's physical index is `cursor % capacity`.
//!
//! Wake hints carry a ring id and nothing else. Coalescing is safe because of a durable
//! pending bit per direction in the header: a side sends a hint only when it sets the bit
//! from clear, and the receiving side clears the bit *before* reloading the cursors. So a
//! hint is skipped only while an earlier one is still unhandled, and the only
//! empty->readable or full->writable transition is never lost.
//!
//! The algorithm ([`Producer`], [`Consumer`]) is generic over [`RingMemory`], so the same
//! code runs on a memfd arena (the main crate's `MappedRing`), on the heap (property tests) and
//! under loom.
#![allow(unsafe_code)]

pub mod ends;
pub mod header;
pub mod heap;

pub use ends::{RingDrain, RingFeeder};
pub use header::{RING_ABI_VERSION, RING_MAGIC, RingHeader};
pub use heap::HeapRing;

use thiserror::Error;

/// Wake bit: the consumer has a readable hint pending.
pub const WAKE_READABLE: u64 = 1;
/// Wake bit: the producer has a writable hint pending.
pub const WAKE_WRITABLE: u64 = 2;
/// State bit: the producer will write no more bytes.
pub const STATE_PRODUCER_CLOSED: u64 = 1;
/// State bit: the consumer will read no more bytes.
pub const STATE_CONSUMER_CLOSED: u64 = 2;

/// Raw shared memory a ring can live in: a pointer and a length that stay valid for the
/// region's lifetime.
pub trait RawRegion: Send + Sync {
    /// First byte of the region.
    fn base(&self) -> *mut u8;
    /// Length of the region in bytes.
    fn len(&self) -> u64;
    /// Whether the region is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The shared state a ring algorithm needs: cursors, wake and state words, and the data
/// area. All cursor and wake operations are sequentially consistent.
pub trait RingMemory {
    /// Data capacity in bytes.
    fn capacity(&self) -> u64;
    /// Loads `commit`.
    fn load_commit(&self) -> u64;
    /// Stores `commit` (producer only).
    fn store_commit(&self, value: u64);
    /// Loads `consume`.
    fn load_consume(&self) -> u64;
    /// Stores `consume` (consumer only).
    fn store_consume(&self, value: u64);
    /// Sets wake bits; returns the previous word.
    fn wake_set(&self, bits: u64) -> u64;
    /// Clears wake bits; returns the previous word.
    fn wake_clear(&self, bits: u64) -> u64;
    /// Loads the wake word (the default reads it with a no-op read-modify-write).
    fn load_wake(&self) -> u64 {
        self.wake_set(0)
    }
    /// Sets state bits; returns the previous word.
    fn state_set(&self, bits: u64) -> u64;
    /// Loads the state word.
    fn load_state(&self) -> u64;
    /// Copies `src` into the data area at physical offset `at`.
    ///
    /// # Safety
    /// `at + src.len() <= capacity()`, and no other party accesses those bytes until they
    /// are published by a `store_commit` that covers them.
    unsafe fn write_data(&self, at: u64, src: &[u8]);
    /// Copies from the data area at physical offset `at` into `dst`.
    ///
    /// # Safety
    /// `at + dst.len() <= capacity()`, and those bytes are committed and not yet released.
    unsafe fn read_data(&self, at: u64, dst: &mut [u8]);
    /// Calls `f` with the data bytes `[at, at + len)` in place where the memory allows it
    /// (the default copies them out first).
    ///
    /// # Safety
    /// As for [`RingMemory::read_data`].
    unsafe fn with_data(&self, at: u64, len: usize, f: &mut dyn FnMut(&[u8])) {
        let mut buf = vec![0u8; len];
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.read_data(at, &mut buf) };
        f(&buf);
    }
    /// Lets `f` fill the data bytes `[at, at + len)` in place where the memory allows it
    /// (the default fills a buffer and copies it in).
    ///
    /// # Safety
    /// As for [`RingMemory::write_data`].
    unsafe fn with_data_mut(&self, at: u64, len: usize, f: &mut dyn FnMut(&mut [u8])) {
        let mut buf = vec![0u8; len];
        f(&mut buf);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.write_data(at, &buf) };
    }
}

/// Whether a wake hint must be sent after a publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// Send the hint: the pending bit was clear.
    Send,
    /// An earlier hint is still unhandled; it covers this publish.
    Coalesced,
    /// Nothing new was published.
    Nothing,
}

/// A cursor in shared memory broke the protocol. The ring is faulted from then on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RingError {
    /// The other side's cursor regressed or moved outside `0..=capacity` of ours.
    #[error("ring cursor out of range: commit {commit}, consume {consume}, capacity {capacity}")]
    CursorCorrupt {
        /// Commit cursor seen.
        commit: u64,
        /// Consume cursor seen.
        consume: u64,
        /// Capacity.
        capacity: u64,
    },
}

/// The producing side of a ring. Keeps a private `write` cursor ahead of `commit`.
#[derive(Debug)]
pub struct Producer<M: RingMemory> {
    mem: M,
    cap: u64,
    write: u64,
    committed: u64,
    consume: u64,
}

impl<M: RingMemory> Producer<M> {
    /// Attaches to a ring, continuing from its current `commit`.
    pub fn attach(mem: M) -> Producer<M> {
        let committed = mem.load_commit();
        let consume = mem.load_consume();
        Producer { cap: mem.capacity(), mem, write: committed, committed, consume }
    }

    /// Free bytes (reloads `consume` when the cached value shows no space).
    pub fn free(&mut self) -> Result<u64, RingError> {
        if self.write - self.consume == self.cap {
            self.reload()?;
        }
        Ok(self.cap - (self.write - self.consume))
    }

    fn reload(&mut self) -> Result<(), RingError> {
        let consume = self.mem.load_consume();
        if consume < self.consume || consume > self.committed {
            return Err(RingError::CursorCorrupt {
                commit: self.committed,
                consume,
                capacity: self.cap,
            });
        }
        self.consume = consume;
        Ok(())
    }

    /// Copies as much of `src` as fits into the free span, without publishing it.
    /// Returns the bytes written (0 when full).
    pub fn write(&mut self, src: &[u8]) -> Result<usize, RingError> {
        let mut done = 0usize;
        while done < src.len() {
            let free = self.free()?;
            if free == 0 {
                break;
            }
            let at = self.write % self.cap;
            let contiguous = (self.cap - at).min(free);
            let n = contiguous.min((src.len() - done) as u64) as usize;
            // SAFETY: `[at, at + n)` lies inside the data area (n <= cap - at) and inside
            // the free span (n <= free), which the consumer does not read until a commit
            // covers it; we are the only producer.
            unsafe { self.mem.write_data(at, &src[done..done + n]) };
            self.write += n as u64;
            done += n;
        }
        Ok(done)
    }

    /// Lets `fill` write up to `max` bytes directly into the free span, one contiguous
    /// segment at a time (two at most, around the wrap). Returns the bytes written.
    pub fn write_with(
        &mut self,
        max: u64,
        mut fill: impl FnMut(&mut [u8]),
    ) -> Result<u64, RingError> {
        let mut done = 0u64;
        while done < max {
            let free = self.free()?;
            if free == 0 {
                break;
            }
            let at = self.write % self.cap;
            let n = (self.cap - at).min(free).min(max - done);
            // SAFETY: `[at, at + n)` is inside the data area and the free span (see
            // `write`); `fill` only sees it through the callback's slice.
            unsafe { self.mem.with_data_mut(at, n as usize, &mut fill) };
            self.write += n;
            done += n;
        }
        Ok(done)
    }

    /// Bytes written but not yet committed.
    pub fn uncommitted(&self) -> u64 {
        self.write - self.committed
    }

    /// Publishes every written byte. Returns whether to send `RingReadable`.
    pub fn commit(&mut self) -> Wake {
        if self.write == self.committed {
            return Wake::Nothing;
        }
        self.mem.store_commit(self.write);
        self.committed = self.write;
        if self.mem.wake_set(WAKE_READABLE) & WAKE_READABLE == 0 {
            Wake::Send
        } else {
            Wake::Coalesced
        }
    }

    /// Handles a `RingWritable` hint: clears the pending bit, then reloads `consume`.
    pub fn on_writable(&mut self) -> Result<u64, RingError> {
        self.mem.wake_clear(WAKE_WRITABLE);
        self.reload()?;
        Ok(self.cap - (self.write - self.consume))
    }

    /// Whether a `RingWritable` hint is pending (the consumer freed space since the last
    /// [`Producer::on_writable`]).
    pub fn writable_pending(&self) -> bool {
        self.mem.load_wake() & WAKE_WRITABLE != 0
    }

    /// Marks the end of the stream and publishes it. Returns whether to send a hint.
    pub fn close(&mut self) -> Wake {
        let _ = self.commit();
        self.mem.state_set(STATE_PRODUCER_CLOSED);
        if self.mem.wake_set(WAKE_READABLE) & WAKE_READABLE == 0 {
            Wake::Send
        } else {
            Wake::Coalesced
        }
    }

    /// Total bytes committed since the ring was created.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> u64 {
        self.cap
    }
}

/// The consuming side of a ring. Keeps a private `read` cursor ahead of `consume`.
#[derive(Debug)]
pub struct Consumer<M: RingMemory> {
    mem: M,
    cap: u64,
    read: u64,
    released: u64,
    commit: u64,
}

impl<M: RingMemory> Consumer<M> {
    /// Attaches to a ring, continuing from its current `consume`.
    pub fn attach(mem: M) -> Consumer<M> {
        let released = mem.load_consume();
        let commit = mem.load_commit();
        Consumer { cap: mem.capacity(), mem, read: released, released, commit }
    }

    fn reload(&mut self) -> Result<(), RingError> {
        let commit = self.mem.load_commit();
        if commit < self.commit || commit - self.released > self.cap {
            return Err(RingError::CursorCorrupt {
                commit,
                consume: self.released,
                capacity: self.cap,
            });
        }
        self.commit = commit;
        Ok(())
    }

    /// Handles a `RingReadable` hint: clears the pending bit, then reloads `commit`.
    /// Returns the bytes available to read.
    pub fn on_readable(&mut self) -> Result<u64, RingError> {
        self.mem.wake_clear(WAKE_READABLE);
        self.available()
    }

    /// Whether a `RingReadable` hint is pending (the producer committed since the last
    /// [`Consumer::on_readable`]).
    pub fn readable_pending(&self) -> bool {
        self.mem.load_wake() & WAKE_READABLE != 0
    }

    /// Committed bytes not yet read (reloads `commit`).
    pub fn available(&mut self) -> Result<u64, RingError> {
        self.reload()?;
        Ok(self.commit - self.read)
    }

    /// Copies up to `dst.len()` committed bytes out, advancing the private read cursor.
    /// The bytes stay owned by the ring until [`Consumer::release`].
    pub fn read(&mut self, dst: &mut [u8]) -> Result<usize, RingError> {
        if self.commit - self.read < dst.len() as u64 {
            self.reload()?;
        }
        let mut done = 0usize;
        while done < dst.len() && self.read < self.commit {
            let at = self.read % self.cap;
            let contiguous = (self.cap - at).min(self.commit - self.read);
            let n = contiguous.min((dst.len() - done) as u64) as usize;
            // SAFETY: `[at, at + n)` lies inside the data area and inside the committed,
            // unreleased span `read..commit`, which the producer does not overwrite until
            // we release it; we are the only consumer.
            unsafe { self.mem.read_data(at, &mut dst[done..done + n]) };
            self.read += n as u64;
            done += n;
        }
        Ok(done)
    }

    /// Hands up to `max` committed bytes to `sink` in place, one contiguous segment at a
    /// time, advancing the private read cursor. Returns the bytes handed over. The bytes
    /// stay owned by the ring until [`Consumer::release`].
    pub fn read_with(&mut self, max: u64, mut sink: impl FnMut(&[u8])) -> Result<u64, RingError> {
        if self.commit - self.read < max {
            self.reload()?;
        }
        let mut done = 0u64;
        while done < max && self.read < self.commit {
            let at = self.read % self.cap;
            let n = (self.cap - at).min(self.commit - self.read).min(max - done);
            // SAFETY: `[at, at + n)` is inside the data area and the committed, unreleased
            // span (see `read`).
            unsafe { self.mem.with_data(at, n as usize, &mut sink) };
            self.read += n;
            done += n;
        }
        Ok(done)
    }

    /// Releases every byte read so far. Returns whether to send `RingWritable`.
    pub fn release(&mut self) -> Wake {
        if self.read == self.released {
            return Wake::Nothing;
        }
        self.mem.store_consume(self.read);
        self.released = self.read;
        if self.mem.wake_set(WAKE_WRITABLE) & WAKE_WRITABLE == 0 {
            Wake::Send
        } else {
            Wake::Coalesced
        }
    }

    /// Whether the producer closed the stream (bytes already committed stay readable).
    pub fn producer_closed(&self) -> bool {
        self.mem.load_state() & STATE_PRODUCER_CLOSED != 0
    }

    /// Marks this side closed (the producer can stop writing).
    pub fn close(&mut self) {
        self.mem.state_set(STATE_CONSUMER_CLOSED);
    }

    /// Bytes read so far (released or not).
    pub fn read_total(&self) -> u64 {
        self.read
    }

    /// The ring's capacity.
    pub fn capacity(&self) -> u64 {
        self.cap
    }
}

/// Forwards [`RingMemory`] through a pointer type to the memory it points at.
macro_rules! forward_ring_memory {
    ($($ptr:ty),+) => {$(
        impl<T: RingMemory + ?Sized> RingMemory for $ptr {
            fn capacity(&self) -> u64 {
                (**self).capacity()
            }
            fn load_commit(&self) -> u64 {
                (**self).load_commit()
            }
            fn store_commit(&self, value: u64) {
                (**self).store_commit(value)
            }
            fn load_consume(&self) -> u64 {
                (**self).load_consume()
            }
            fn store_consume(&self, value: u64) {
                (**self).store_consume(value)
            }
            fn wake_set(&self, bits: u64) -> u64 {
                (**self).wake_set(bits)
            }
            fn wake_clear(&self, bits: u64) -> u64 {
                (**self).wake_clear(bits)
            }
            fn load_wake(&self) -> u64 {
                (**self).load_wake()
            }
            fn state_set(&self, bits: u64) -> u64 {
                (**self).state_set(bits)
            }
            fn load_state(&self) -> u64 {
                (**self).load_state()
            }
            unsafe fn write_data(&self, at: u64, src: &[u8]) {
                // SAFETY: forwarded with the caller's guarantees.
                unsafe { (**self).write_data(at, src) }
            }
            unsafe fn read_data(&self, at: u64, dst: &mut [u8]) {
                // SAFETY: forwarded with the caller's guarantees.
                unsafe { (**self).read_data(at, dst) }
            }
            unsafe fn with_data(&self, at: u64, len: usize, f: &mut dyn FnMut(&[u8])) {
                // SAFETY: forwarded with the caller's guarantees.
                unsafe { (**self).with_data(at, len, f) }
            }
            unsafe fn with_data_mut(&self, at: u64, len: usize, f: &mut dyn FnMut(&mut [u8])) {
                // SAFETY: forwarded with the caller's guarantees.
                unsafe { (**self).with_data_mut(at, len, f) }
            }
        }
    )+};
}

forward_ring_memory!(std::sync::Arc<T>, &T);
