//! The ring header: `#[repr(C)]`, 512 bytes, with `commit`, `consume` and the wake word
//! each on its own 128-byte line (adjacent-line prefetch never shares them).
//!
//! | offset | field |
//! |---:|---|
//! | 0 | magic (`b"SWRING\0\x01"`) |
//! | 8 | ABI version |
//! | 16 | ring id |
//! | 24 | data capacity |
//! | 32 | state bits (producer closed, consumer closed) |
//! | 128 | commit cursor |
//! | 256 | consume cursor |
//! | 384 | wake bits (readable pending, writable pending) |

use std::sync::atomic::{AtomicU64, Ordering};

/// Magic at the start of every ring header.
pub const RING_MAGIC: u64 = u64::from_le_bytes(*b"SWRING\0\x01");
pub use crate::wire::spec::RING_ABI_VERSION;

/// The shared ring header.
#[repr(C, align(128))]
#[derive(Debug)]
pub struct RingHeader {
    /// [`RING_MAGIC`].
    pub magic: AtomicU64,
    /// [`RING_ABI_VERSION`].
    pub abi_version: AtomicU64,
    /// The ring's id.
    pub ring_id: AtomicU64,
    /// Data capacity in bytes.
    pub capacity: AtomicU64,
    /// State bits.
    pub state: AtomicU64,
    _pad0: [u64; 11],
    /// First byte not yet readable.
    pub commit: AtomicU64,
    _pad1: [u64; 15],
    /// First byte not yet released.
    pub consume: AtomicU64,
    _pad2: [u64; 15],
    /// Wake bits.
    pub wake: AtomicU64,
    _pad3: [u64; 15],
}

/// Size of the header in bytes.
pub const RING_HEADER_SIZE: usize = std::mem::size_of::<RingHeader>();

const _: () = assert!(RING_HEADER_SIZE == 512);
const _: () = assert!(std::mem::offset_of!(RingHeader, commit) == 128);
const _: () = assert!(std::mem::offset_of!(RingHeader, consume) == 256);
const _: () = assert!(std::mem::offset_of!(RingHeader, wake) == 384);

impl RingHeader {
    /// Writes a fresh header (cursors at zero). Only the leasing side does this, before
    /// the ring is shared.
    pub fn init(&self, ring_id: u64, capacity: u64) {
        self.abi_version.store(RING_ABI_VERSION, Ordering::Relaxed);
        self.ring_id.store(ring_id, Ordering::Relaxed);
        self.capacity.store(capacity, Ordering::Relaxed);
        self.state.store(0, Ordering::Relaxed);
        self.commit.store(0, Ordering::Relaxed);
        self.consume.store(0, Ordering::Relaxed);
        self.wake.store(0, Ordering::Relaxed);
        // The magic last, with release: a header with the magic is complete.
        self.magic.store(RING_MAGIC, Ordering::Release);
    }
}
