//! The node's ends of a worker's rings: the pump that fills an ingress ring and the pump
//! that drains an egress ring. Network pumps and token endpoints use them; stopping one
//! (consuming it) is the only way to obtain the [`PumpStopped`] evidence the arena manager
//! needs before it takes the ring's range back.

use super::{Consumer, Producer, RingError, RingMemory, Wake};
use crate::wire::RingId;
use crate::wire::evidence::PumpStopped;

/// The node side filling a ring (the worker consumes).
#[derive(Debug)]
pub struct RingFeeder<M: RingMemory> {
    ring_id: RingId,
    producer: Producer<M>,
}

impl<M: RingMemory> RingFeeder<M> {
    /// Attaches a feeder to a ring's producer side.
    pub fn new(ring_id: RingId, memory: M) -> RingFeeder<M> {
        RingFeeder { ring_id, producer: Producer::attach(memory) }
    }

    /// The ring.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }

    /// Writes as much of `bytes` as fits and commits it; returns the bytes written and
    /// whether to send `RingReadable`.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(usize, Wake), RingError> {
        let n = self.producer.write(bytes)?;
        Ok((n, self.producer.commit()))
    }

    /// Handles a `RingWritable` hint; returns the free bytes.
    pub fn on_writable(&mut self) -> Result<u64, RingError> {
        self.producer.on_writable()
    }

    /// Ends the byte stream (the worker sees end-of-stream after the committed bytes).
    pub fn close(&mut self) -> Wake {
        self.producer.close()
    }

    /// Direct access to the producer side.
    pub fn producer(&mut self) -> &mut Producer<M> {
        &mut self.producer
    }

    /// Stops feeding for good; the evidence lets the arena take the range back.
    pub fn stop(self) -> PumpStopped {
        PumpStopped::observed(self.ring_id)
    }
}

/// The node side draining a ring (the worker produces).
#[derive(Debug)]
pub struct RingDrain<M: RingMemory> {
    ring_id: RingId,
    consumer: Consumer<M>,
}

impl<M: RingMemory> RingDrain<M> {
    /// Attaches a drain to a ring's consumer side.
    pub fn new(ring_id: RingId, memory: M) -> RingDrain<M> {
        RingDrain { ring_id, consumer: Consumer::attach(memory) }
    }

    /// The ring.
    pub fn ring_id(&self) -> RingId {
        self.ring_id
    }

    /// Copies out and releases up to `dst.len()` committed bytes; returns the bytes read
    /// and whether to send `RingWritable`.
    pub fn pull(&mut self, dst: &mut [u8]) -> Result<(usize, Wake), RingError> {
        let n = self.consumer.read(dst)?;
        Ok((n, self.consumer.release()))
    }

    /// Handles a `RingReadable` hint; returns the bytes available.
    pub fn on_readable(&mut self) -> Result<u64, RingError> {
        self.consumer.on_readable()
    }

    /// Direct access to the consumer side.
    pub fn consumer(&mut self) -> &mut Consumer<M> {
        &mut self.consumer
    }

    /// Stops draining for good; the evidence lets the arena take the range back.
    pub fn stop(self) -> PumpStopped {
        PumpStopped::observed(self.ring_id)
    }
}
