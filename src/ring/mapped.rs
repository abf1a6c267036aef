//! Rings over raw shared memory: a memfd arena lease in production, an aligned heap block
//! in tests. Both use the same [`RingHeader`] and the same [`RingMemory`] implementation.

use std::sync::atomic::Ordering::{Acquire, SeqCst};

use super::header::{RING_ABI_VERSION, RING_HEADER_SIZE, RING_MAGIC, RingHeader};
use super::{RawRegion, RingMemory};
use crate::wire::RingLayout;
use crate::wire::reason::RingFault;

/// A ring living in a [`RawRegion`] laid out as a [`RingLayout`] describes: the header at
/// the region's start, the data area at `data_offset - header_offset`.
#[derive(Debug)]
pub struct MappedRing<R: RawRegion> {
    region: R,
    data_off: u64,
    cap: u64,
    ring_id: u64,
}

impl<R: RawRegion> MappedRing<R> {
    fn check(region: &R, layout: &RingLayout) -> Result<(u64, u64), RingFault> {
        let data_off =
            layout.data_offset.checked_sub(layout.header_offset).ok_or(RingFault::LayoutInvalid)?;
        let ok = region.len() == layout.total_len
            && (region.base() as usize).is_multiple_of(128)
            && data_off >= RING_HEADER_SIZE as u64
            && layout.data_capacity > 0
            && data_off.checked_add(layout.data_capacity).is_some_and(|end| end <= region.len());
        if ok { Ok((data_off, layout.data_capacity)) } else { Err(RingFault::LayoutInvalid) }
    }

    /// Writes a fresh header into the region (the leasing side, before sharing the ring).
    pub fn init(region: R, layout: &RingLayout) -> Result<MappedRing<R>, RingFault> {
        let (data_off, cap) = Self::check(&region, layout)?;
        let ring = MappedRing { region, data_off, cap, ring_id: layout.ring_id.0 };
        ring.header().init(layout.ring_id.0, cap);
        Ok(ring)
    }

    /// Attaches to a ring another party initialized, checking magic, ABI version, ring id
    /// and capacity against the layout.
    pub fn attach(region: R, layout: &RingLayout) -> Result<MappedRing<R>, RingFault> {
        let (data_off, cap) = Self::check(&region, layout)?;
        let ring = MappedRing { region, data_off, cap, ring_id: layout.ring_id.0 };
        let h = ring.header();
        if h.magic.load(Acquire) != RING_MAGIC || h.abi_version.load(Acquire) != RING_ABI_VERSION {
            return Err(RingFault::AbiMismatch);
        }
        if h.ring_id.load(Acquire) != layout.ring_id.0 || h.capacity.load(Acquire) != cap {
            return Err(RingFault::LayoutInvalid);
        }
        Ok(ring)
    }

    /// The shared header.
    pub fn header(&self) -> &RingHeader {
        // SAFETY: `check` verified the region holds at least RING_HEADER_SIZE bytes before
        // the data area and that its base is 128-byte aligned (RingHeader's alignment);
        // every field of RingHeader is an atomic, valid for any bit pattern, and shared
        // access only goes through atomic operations.
        unsafe { &*(self.region.base() as *const RingHeader) }
    }

    /// The ring's id.
    pub fn ring_id(&self) -> u64 {
        self.ring_id
    }

    /// Current `(commit, consume)` cursors, for inspection.
    pub fn cursors(&self) -> (u64, u64) {
        let h = self.header();
        (h.commit.load(Acquire), h.consume.load(Acquire))
    }

    fn data(&self) -> *mut u8 {
        // SAFETY: `data_off + cap <= region.len()` (checked), so the offset stays inside
        // the region.
        unsafe { self.region.base().add(self.data_off as usize) }
    }
}

impl<R: RawRegion> RingMemory for MappedRing<R> {
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn load_commit(&self) -> u64 {
        self.header().commit.load(SeqCst)
    }
    fn store_commit(&self, value: u64) {
        self.header().commit.store(value, SeqCst)
    }
    fn load_consume(&self) -> u64 {
        self.header().consume.load(SeqCst)
    }
    fn store_consume(&self, value: u64) {
        self.header().consume.store(value, SeqCst)
    }
    fn wake_set(&self, bits: u64) -> u64 {
        self.header().wake.fetch_or(bits, SeqCst)
    }
    fn wake_clear(&self, bits: u64) -> u64 {
        self.header().wake.fetch_and(!bits, SeqCst)
    }
    fn load_wake(&self) -> u64 {
        self.header().wake.load(SeqCst)
    }
    fn state_set(&self, bits: u64) -> u64 {
        self.header().state.fetch_or(bits, SeqCst)
    }
    fn load_state(&self) -> u64 {
        self.header().state.load(SeqCst)
    }
    unsafe fn write_data(&self, at: u64, src: &[u8]) {
        debug_assert!(at + src.len() as u64 <= self.cap);
        // SAFETY: the caller guarantees `[at, at + len)` is inside the data area and owned
        // by the producer (no one else reads or writes it while this borrow lives); `src`
        // is a separate Rust slice, so the ranges do not overlap.
        let dst =
            unsafe { std::slice::from_raw_parts_mut(self.data().add(at as usize), src.len()) };
        // Not `copy_nonoverlapping`: libc's `memcpy` is many times slower on some CPUs when
        // the two offsets differ modulo 32, as a ring's arbitrary offsets do.
        swactor_engine::copy::copy_values(dst, src);
    }
    unsafe fn read_data(&self, at: u64, dst: &mut [u8]) {
        debug_assert!(at + dst.len() as u64 <= self.cap);
        // SAFETY: the caller guarantees `[at, at + len)` is inside the data area, committed
        // and not yet released, so the producer does not write it while this borrow lives.
        let src = unsafe { std::slice::from_raw_parts(self.data().add(at as usize), dst.len()) };
        swactor_engine::copy::copy_values(dst, src);
    }
}

/// A zeroed, page-aligned heap block standing in for an arena lease in tests and benches.
#[derive(Debug)]
pub struct HeapRegion {
    ptr: *mut u8,
    len: u64,
}

// SAFETY: the block is owned by this value and freed only on drop; concurrent access goes
// through the ring protocol exactly as for shared memory.
unsafe impl Send for HeapRegion {}
// SAFETY: as above; `&HeapRegion` only hands out the raw pointer.
unsafe impl Sync for HeapRegion {}

impl HeapRegion {
    fn layout(len: u64) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1) as usize, 4096)
            .expect("valid heap region layout")
    }

    /// A zeroed block of `len` bytes.
    pub fn new(len: u64) -> HeapRegion {
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(Self::layout(len)) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout(len));
        }
        HeapRegion { ptr, len }
    }

    /// A block and the layout of a ring of `capacity` bytes filling it.
    pub fn for_ring(ring_id: u64, capacity: u64) -> (HeapRegion, RingLayout) {
        let header = crate::wire::spec::RING_HEADER_BYTES;
        let layout = RingLayout {
            ring_id: crate::wire::RingId(ring_id),
            arena_offset: 0,
            total_len: header + capacity,
            header_offset: 0,
            data_offset: header,
            data_capacity: capacity,
            alignment: 4096,
        };
        (HeapRegion::new(header + capacity), layout)
    }
}

impl Drop for HeapRegion {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with this same layout and is freed once.
        unsafe { std::alloc::dealloc(self.ptr, Self::layout(self.len)) }
    }
}

impl RawRegion for HeapRegion {
    fn base(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> u64 {
        self.len
    }
}
