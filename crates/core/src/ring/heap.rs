//! [`HeapRing`]: the ring protocol over ordinary memory, for tests and single-process
//! users. The same cursors, wake bits and state bits as a mapped ring; its data area is a
//! mutex-guarded buffer, so no byte is ever shared without a lock.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::RingMemory;

/// A ring in ordinary memory.
#[derive(Debug)]
pub struct HeapRing {
    commit: AtomicU64,
    consume: AtomicU64,
    wake: AtomicU64,
    state: AtomicU64,
    data: Mutex<Vec<u8>>,
}

impl HeapRing {
    /// An empty ring of `capacity` data bytes.
    pub fn new(capacity: u64) -> HeapRing {
        HeapRing {
            commit: AtomicU64::new(0),
            consume: AtomicU64::new(0),
            wake: AtomicU64::new(0),
            state: AtomicU64::new(0),
            data: Mutex::new(vec![0; capacity as usize]),
        }
    }

    fn data(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.data.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl RingMemory for HeapRing {
    fn capacity(&self) -> u64 {
        self.data().len() as u64
    }
    fn load_commit(&self) -> u64 {
        self.commit.load(Ordering::Acquire)
    }
    fn store_commit(&self, value: u64) {
        self.commit.store(value, Ordering::Release)
    }
    fn load_consume(&self) -> u64 {
        self.consume.load(Ordering::Acquire)
    }
    fn store_consume(&self, value: u64) {
        self.consume.store(value, Ordering::Release)
    }
    fn wake_set(&self, bits: u64) -> u64 {
        self.wake.fetch_or(bits, Ordering::AcqRel)
    }
    fn wake_clear(&self, bits: u64) -> u64 {
        self.wake.fetch_and(!bits, Ordering::AcqRel)
    }
    fn state_set(&self, bits: u64) -> u64 {
        self.state.fetch_or(bits, Ordering::AcqRel)
    }
    fn load_state(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }
    unsafe fn write_data(&self, at: u64, src: &[u8]) {
        let at = at as usize;
        self.data()[at..at + src.len()].copy_from_slice(src);
    }
    unsafe fn read_data(&self, at: u64, dst: &mut [u8]) {
        let at = at as usize;
        dst.copy_from_slice(&self.data()[at..at + dst.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Consumer, Producer};

    #[test]
    fn bytes_written_around_the_wrap_are_read_back_in_order() {
        let ring = HeapRing::new(8);
        let mut p = Producer::attach(&ring);
        let mut c = Consumer::attach(&ring);
        assert_eq!(p.write(&[1, 2, 3, 4, 5, 6]).expect("write"), 6);
        p.commit();
        let mut out = [0u8; 6];
        assert_eq!(c.read(&mut out).expect("read"), 6);
        c.release();
        assert_eq!(p.write(&[7, 8, 9, 10]).expect("write"), 4);
        p.commit();
        let mut out = [0u8; 4];
        assert_eq!(c.read(&mut out).expect("read"), 4);
        assert_eq!(out, [7, 8, 9, 10]);
    }
}
