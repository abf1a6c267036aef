//! The egress producer: one per egress ring, writing a step's output objects into it.
//!
//! It writes only for an `ExecuteStep` output binding that names its ring: first the
//! 40-byte header, then exactly `extent` payload bytes copied from the device, committing
//! what it wrote on every poll (so the send pump can stream a large object while it is
//! still being written). No free space means the step waits: that is the backpressure path.
//! `ObjectProduced` is reported only once the whole object is committed.

use super::device::DeviceBridge;
use super::protocol::{DeviceHandle, Event, OutputBinding};
use crate::ring::{Producer, RingMemory, Wake};
use crate::wire::reason::{RingFault, StepFailure};
use crate::wire::{EdgeId, HEADER_LEN, ObjectHeader, ObjectSpec, PortId, RingId};

/// Progress of the object being written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No object in progress.
    Idle,
    /// The ring is full; wait for `RingWritable`.
    Blocked,
    /// The whole object is committed.
    Done,
    /// Writing failed; the step fails with this reason.
    Failed(StepFailure),
}

#[derive(Debug)]
struct Writing {
    binding: OutputBinding,
    handle: DeviceHandle,
    header: [u8; HEADER_LEN],
    written: u64,
}

/// Writes output objects into one egress ring.
#[derive(Debug)]
pub struct EgressProducer {
    ring_id: RingId,
    edge_id: EdgeId,
    port_id: PortId,
    spec: ObjectSpec,
    current: Option<Writing>,
    faulted: bool,
}

impl EgressProducer {
    /// An idle producer.
    pub fn new(ring_id: RingId, edge_id: EdgeId, port_id: PortId, spec: ObjectSpec) -> Self {
        EgressProducer { ring_id, edge_id, port_id, spec, current: None, faulted: false }
    }

    /// Whether an object is being written.
    pub fn is_busy(&self) -> bool {
        self.current.is_some()
    }

    /// Starts writing `binding`'s object from `handle`. Refused while busy, after a fault,
    /// or when the extent breaks the edge's object spec.
    pub fn start(
        &mut self,
        binding: OutputBinding,
        handle: DeviceHandle,
    ) -> Result<(), StepFailure> {
        if self.faulted {
            return Err(StepFailure::OutputRingFault);
        }
        if self.current.is_some() {
            return Err(StepFailure::OutputRingFault);
        }
        let header =
            ObjectHeader::new(binding.object_id, binding.sequence, binding.extent, binding.flags);
        // The sequence is the node's business; only shape is checked here.
        header.validate(&self.spec, binding.sequence).map_err(|_| StepFailure::ComputeFailed)?;
        self.current = Some(Writing { binding, handle, header: header.encode(), written: 0 });
        Ok(())
    }

    /// Abandons the object in progress (the step was aborted); returns its device handle.
    pub fn abandon(&mut self) -> Option<DeviceHandle> {
        self.current.take().map(|w| w.handle)
    }

    /// Writes as much as fits and commits it. `events` receives wake hints and, when the
    /// object is complete, `ObjectProduced`.
    pub fn poll<M: RingMemory>(
        &mut self,
        ring: &mut Producer<M>,
        bridge: &mut dyn DeviceBridge,
        events: &mut Vec<Event>,
    ) -> Progress {
        loop {
            match self.step(ring, bridge, events) {
                Some(progress) => return progress,
                None => continue,
            }
        }
    }

    /// One round of writing; `None` when it progressed and another round may too.
    fn step<M: RingMemory>(
        &mut self,
        ring: &mut Producer<M>,
        bridge: &mut dyn DeviceBridge,
        events: &mut Vec<Event>,
    ) -> Option<Progress> {
        let Some(w) = self.current.as_mut() else { return Some(Progress::Idle) };
        let total = HEADER_LEN as u64 + w.binding.extent;
        let before = w.written;
        let mut failed = None;
        if w.written < HEADER_LEN as u64 {
            match ring.write(&w.header[w.written as usize..]) {
                Ok(n) => w.written += n as u64,
                Err(_) => failed = Some(StepFailure::OutputRingFault),
            }
        }
        if failed.is_none() && w.written >= HEADER_LEN as u64 && w.written < total {
            let mut offset = w.written - HEADER_LEN as u64;
            let mut copy_failed = false;
            let handle = w.handle;
            match ring.write_with(total - w.written, |dst| {
                if !copy_failed && bridge.device_to_host(handle, offset, dst).is_err() {
                    copy_failed = true;
                }
                offset += dst.len() as u64;
            }) {
                Ok(n) if !copy_failed => w.written += n,
                Ok(_) => failed = Some(StepFailure::ComputeFailed),
                Err(_) => failed = Some(StepFailure::OutputRingFault),
            }
        }
        if let Some(reason) = failed {
            // What was not committed yet stays unpublished; the ring is faulted.
            self.current = None;
            self.faulted = true;
            if reason == StepFailure::OutputRingFault {
                events.push(Event::RingFault {
                    ring_id: self.ring_id,
                    reason: RingFault::CursorCorrupt,
                });
            }
            return Some(Progress::Failed(reason));
        }
        if ring.commit() == Wake::Send {
            events.push(Event::RingReadable { ring_id: self.ring_id });
        }
        if w.written == total {
            let b = w.binding;
            self.current = None;
            events.push(Event::ObjectProduced {
                ring_id: self.ring_id,
                edge_id: self.edge_id,
                port_id: self.port_id,
                object_id: b.object_id,
                sequence: b.sequence,
                extent: b.extent,
                at_us: None,
            });
            return Some(Progress::Done);
        }
        if w.written == before { Some(Progress::Blocked) } else { None }
    }
}
