//! The ingress parser: one per ingress ring, turning the ring's byte stream into device
//! objects.
//!
//! States: `NeedHeader -> (validate, allocate) -> NeedPayload -> ObjectLoaded -> NeedHeader`,
//! plus the absorbing `Faulted` and `Closed`. Every byte is released back to the ring only
//! after it has been copied out (header into a local buffer, payload into the device by a
//! synchronous copy), so the producer never overwrites bytes still in use. Objects may be
//! larger than the ring. At most `max_outstanding` loaded objects wait for release: beyond
//! that the parser stops consuming, the ring fills up, and the network pump stops reading
//! (the backpressure path).

use super::device::DeviceBridge;
use super::protocol::{DeviceHandle, Event};
use crate::ring::{Consumer, RingMemory, Wake};
use crate::wire::reason::{ObjectFailure, RingFault};
use crate::wire::{EdgeId, HEADER_LEN, ObjectHeader, ObjectSpec, PortId, RingId, Sequence};

/// Payload bytes copied out of the ring before they are released to the producer.
pub const PAYLOAD_SPAN: u64 = 256 * 1024;

#[derive(Debug)]
enum State {
    NeedHeader { buf: [u8; HEADER_LEN], have: usize },
    NeedPayload { header: ObjectHeader, handle: DeviceHandle, copied: u64 },
    Faulted,
    Closed,
}

/// Parses objects out of one ingress ring.
#[derive(Debug)]
pub struct IngressParser {
    ring_id: RingId,
    edge_id: EdgeId,
    port_id: PortId,
    spec: ObjectSpec,
    state: State,
    expected: Sequence,
    outstanding: usize,
    max_outstanding: usize,
}

impl IngressParser {
    /// A parser expecting sequence 0 first.
    pub fn new(
        ring_id: RingId,
        edge_id: EdgeId,
        port_id: PortId,
        spec: ObjectSpec,
        max_outstanding: usize,
    ) -> Self {
        IngressParser {
            ring_id,
            edge_id,
            port_id,
            spec,
            state: State::NeedHeader { buf: [0; HEADER_LEN], have: 0 },
            expected: Sequence(0),
            outstanding: 0,
            max_outstanding: max_outstanding.max(1),
        }
    }

    /// Whether the parser faulted (it consumes nothing more until uninstalled).
    pub fn is_faulted(&self) -> bool {
        matches!(self.state, State::Faulted)
    }

    /// Whether the stream ended cleanly between objects.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// The ring's edge.
    pub fn edge_id(&self) -> EdgeId {
        self.edge_id
    }

    /// The sequence of the next object this ring will load.
    pub fn next_sequence(&self) -> Sequence {
        self.expected
    }

    /// A loaded object of this ring was released: the parser may consume again.
    pub fn object_released(&mut self) {
        self.outstanding = self.outstanding.saturating_sub(1);
    }

    /// The handle of an object being loaded, to free when the ring goes away.
    pub fn partial_handle(&self) -> Option<DeviceHandle> {
        match self.state {
            State::NeedPayload { handle, .. } => Some(handle),
            _ => None,
        }
    }

    fn fail(&mut self, header: Option<&ObjectHeader>, reason: ObjectFailure, out: &mut Vec<Event>) {
        self.state = State::Faulted;
        out.push(Event::ObjectFailed {
            ring_id: self.ring_id,
            edge_id: self.edge_id,
            port_id: self.port_id,
            object_id: header.map(|h| h.object_id),
            sequence: header.map(|h| h.sequence),
            reason,
        });
    }

    fn ring_fault(&mut self, out: &mut Vec<Event>) {
        self.state = State::Faulted;
        out.push(Event::RingFault { ring_id: self.ring_id, reason: RingFault::CursorCorrupt });
    }

    fn release<M: RingMemory>(&self, ring: &mut Consumer<M>, out: &mut Vec<Event>) {
        if ring.release() == Wake::Send {
            out.push(Event::RingWritable { ring_id: self.ring_id });
        }
    }

    /// Consumes whatever the ring holds now; returns the events to report.
    pub fn poll<M: RingMemory>(
        &mut self,
        ring: &mut Consumer<M>,
        bridge: &mut dyn DeviceBridge,
    ) -> Vec<Event> {
        self.poll_budget(ring, bridge, u64::MAX)
    }

    /// As [`IngressParser::poll`], but returns once about `budget` bytes were consumed (at
    /// least one span, released before returning), so the caller can wake the producer
    /// while it copies the rest.
    pub fn poll_budget<M: RingMemory>(
        &mut self,
        ring: &mut Consumer<M>,
        bridge: &mut dyn DeviceBridge,
        budget: u64,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        let until = ring.read_total().saturating_add(budget.max(1));
        loop {
            if ring.read_total() >= until {
                break;
            }
            match &mut self.state {
                State::Faulted | State::Closed => break,
                State::NeedHeader { buf, have } => {
                    if self.outstanding >= self.max_outstanding {
                        break;
                    }
                    let start = *have;
                    let mut filled = start;
                    let read = ring.read_with((HEADER_LEN - start) as u64, |span| {
                        buf[filled..filled + span.len()].copy_from_slice(span);
                        filled += span.len();
                    });
                    if read.is_err() {
                        self.ring_fault(&mut out);
                        break;
                    }
                    *have = filled;
                    let buf = *buf;
                    self.release(ring, &mut out);
                    if filled < HEADER_LEN {
                        if filled == start && self.at_eof(ring) {
                            if filled == 0 {
                                self.state = State::Closed;
                            } else {
                                self.fail(None, ObjectFailure::EofMidObject, &mut out);
                            }
                        }
                        if filled == start {
                            break;
                        }
                        continue;
                    }
                    let header = match ObjectHeader::decode(&buf) {
                        Ok(h) => h,
                        Err(e) => {
                            self.fail(None, e.reason(), &mut out);
                            break;
                        }
                    };
                    if let Err(e) = header.validate(&self.spec, self.expected) {
                        self.fail(Some(&header), e.reason(), &mut out);
                        break;
                    }
                    match bridge.alloc(header.extent) {
                        Ok(handle) => self.state = State::NeedPayload { header, handle, copied: 0 },
                        Err(_) => {
                            self.fail(Some(&header), ObjectFailure::AllocationFailed, &mut out);
                            break;
                        }
                    }
                }
                State::NeedPayload { header, handle, copied } => {
                    let (header, handle, start) = (*header, *handle, *copied);
                    let mut offset = start;
                    let mut copy_failed = false;
                    // Copied and released a span at a time: the producer refills behind.
                    let want = (header.extent - start).min(PAYLOAD_SPAN);
                    let read = ring.read_with(want, |span| {
                        if !copy_failed && bridge.host_to_device(handle, offset, span).is_err() {
                            copy_failed = true;
                        }
                        offset += span.len() as u64;
                    });
                    if read.is_err() {
                        let _ = bridge.free(handle);
                        self.ring_fault(&mut out);
                        break;
                    }
                    if copy_failed {
                        let _ = bridge.free(handle);
                        self.fail(Some(&header), ObjectFailure::CopyFailed, &mut out);
                        break;
                    }
                    // The copy is synchronous: the span is safe to release now.
                    self.release(ring, &mut out);
                    if offset == header.extent {
                        out.push(Event::ObjectLoaded {
                            ring_id: self.ring_id,
                            edge_id: self.edge_id,
                            port_id: self.port_id,
                            object_id: header.object_id,
                            sequence: header.sequence,
                            extent: header.extent,
                            handle,
                            taken_by: None,
                            at_us: None,
                        });
                        self.expected = header.sequence.next();
                        self.outstanding += 1;
                        self.state = State::NeedHeader { buf: [0; HEADER_LEN], have: 0 };
                        continue;
                    }
                    self.state = State::NeedPayload { header, handle, copied: offset };
                    if offset == start {
                        if self.at_eof(ring) {
                            let _ = bridge.free(handle);
                            self.fail(Some(&header), ObjectFailure::EofMidObject, &mut out);
                        }
                        break;
                    }
                }
            }
        }
        out
    }

    /// The producer closed and every committed byte has been read.
    fn at_eof<M: RingMemory>(&self, ring: &mut Consumer<M>) -> bool {
        ring.producer_closed() && ring.available().is_ok_and(|n| n == 0)
    }
}
