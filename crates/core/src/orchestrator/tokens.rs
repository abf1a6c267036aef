//! The orchestrator's token endpoints, on its own arena rings with the same edge semantics
//! as stages: the token-in producer writes one object per injection (a micro-batch: its
//! table and u32 token ids, behind an object header), and the token-out consumer parses
//! objects with the same ingress parser the workers use (host memory as its "device"), so
//! a malformed or out-of-order token object is rejected with the same typed reasons. What
//! a token-out payload means (its table and tokens) is the session's to judge.

use crate::ring::{Consumer, RingError, RingFeeder, RingMemory, Wake};
use crate::wire::reason::{FaultReason, ObjectFailure, TokenFault};
use crate::wire::{
    EdgeId, ObjectFlags, ObjectHeader, ObjectId, ObjectSpec, PortId, RingId, Sequence,
    WorkerGeneration,
};
use crate::worker::device::{CpuBridge, DeviceBridge};
use crate::worker::ingress::IngressParser;
use crate::worker::protocol::Event;

/// Writes token-in objects into the token-in ring.
#[derive(Debug)]
pub struct TokenIn<M: RingMemory> {
    feeder: RingFeeder<M>,
    pending: Vec<u8>,
}

impl<M: RingMemory> TokenIn<M> {
    /// Lets go of the ring for good (consuming the endpoint): the evidence that its local
    /// user is quiet.
    pub fn stop(self) -> crate::wire::evidence::WorkerQuiet {
        crate::wire::evidence::WorkerQuiet::endpoint_stopped(self.feeder.ring_id())
    }

    /// A producer on the token-in ring.
    pub fn new(ring_id: RingId, memory: M) -> TokenIn<M> {
        TokenIn { feeder: RingFeeder::new(ring_id, memory), pending: Vec::new() }
    }

    /// Queues one object (`payload` behind its header) and writes what fits. Returns
    /// whether to wake the ring's consumer. `prefill` marks an object that carries prompt
    /// chunks.
    pub fn inject(
        &mut self,
        object_id: ObjectId,
        sequence: Sequence,
        payload: &[u8],
        prefill: bool,
    ) -> Result<Wake, RingError> {
        let flags = if prefill { ObjectFlags::PREFILL } else { ObjectFlags::NONE };
        let header = ObjectHeader::new(object_id, sequence, payload.len() as u64, flags);
        self.pending.extend_from_slice(&header.encode());
        self.pending.extend_from_slice(payload);
        self.flush()
    }

    /// Writes queued bytes that fit now (after a `RingWritable` hint, for instance).
    pub fn flush(&mut self) -> Result<Wake, RingError> {
        let (n, wake) = self.feeder.push(&self.pending)?;
        self.pending.drain(..n);
        Ok(wake)
    }

    /// Handles a `RingWritable` hint and writes what fits.
    pub fn on_writable(&mut self) -> Result<Wake, RingError> {
        self.feeder.on_writable()?;
        self.flush()
    }

    /// Bytes still waiting for ring space.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// What the token-out consumer found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOutEvent {
    /// A token-out object.
    Object {
        /// Its object id.
        object_id: ObjectId,
        /// Its sequence.
        sequence: Sequence,
        /// Its payload (a micro-batch table and one token per entry).
        payload: Vec<u8>,
    },
    /// The token-out stream is broken: the run faults with this reason.
    Fault(FaultReason),
    /// The consumer released bytes: wake the ring's producer.
    Writable,
}

/// Parses token-out objects from the token-out ring.
#[derive(Debug)]
pub struct TokenOut<M: RingMemory> {
    ring_id: RingId,
    consumer: Consumer<M>,
    parser: IngressParser,
    host: CpuBridge,
}

impl<M: RingMemory> TokenOut<M> {
    /// Lets go of the ring for good (consuming the endpoint): the evidence that its local
    /// user is quiet.
    pub fn stop(self) -> crate::wire::evidence::WorkerQuiet {
        crate::wire::evidence::WorkerQuiet::endpoint_stopped(self.ring_id)
    }

    /// A consumer on the token-out ring of `edge_id`, whose objects follow `spec`.
    pub fn new(ring_id: RingId, edge_id: EdgeId, spec: ObjectSpec, memory: M) -> TokenOut<M> {
        TokenOut {
            ring_id,
            consumer: Consumer::attach(memory),
            parser: IngressParser::new(ring_id, edge_id, PortId(0), spec, 1),
            host: CpuBridge::new(WorkerGeneration(0), 1 << 20),
        }
    }

    /// Reads every complete token object the ring holds (after a `RingReadable` hint).
    pub fn poll(&mut self) -> Vec<TokenOutEvent> {
        let _ = self.consumer.on_readable();
        let mut out = Vec::new();
        loop {
            let events = self.parser.poll(&mut self.consumer, &mut self.host);
            if events.is_empty() {
                return out;
            }
            for e in events {
                match e {
                    Event::ObjectLoaded { object_id, sequence, handle, .. } => {
                        let payload = self.host.view(handle).ok().map(<[u8]>::to_vec);
                        let _ = self.host.free(handle);
                        self.parser.object_released();
                        match payload {
                            Some(payload) => {
                                out.push(TokenOutEvent::Object { object_id, sequence, payload })
                            }
                            None => out.push(TokenOutEvent::Fault(TokenFault::Malformed.into())),
                        }
                    }
                    Event::ObjectFailed { reason, .. } => {
                        out.push(TokenOutEvent::Fault(match reason {
                            ObjectFailure::SequenceViolation => TokenFault::OutOfOrder.into(),
                            _ => TokenFault::Malformed.into(),
                        }))
                    }
                    Event::RingWritable { .. } => out.push(TokenOutEvent::Writable),
                    Event::RingFault { reason, .. } => {
                        out.push(TokenOutEvent::Fault(reason.into()))
                    }
                    _ => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ring::HeapRing;

    fn ring() -> Arc<HeapRing> {
        Arc::new(HeapRing::new(4096))
    }

    fn ids(t: &[u32]) -> Vec<u8> {
        t.iter().flat_map(|t| t.to_le_bytes()).collect()
    }

    #[test]
    fn injected_objects_carry_their_payload_in_order() {
        let r = ring();
        let mut tin = TokenIn::new(RingId(1), Arc::clone(&r));
        tin.inject(ObjectId(1), Sequence(0), &ids(&[5, 6, 7]), true).expect("inject");
        tin.inject(ObjectId(2), Sequence(1), &ids(&[9]), false).expect("inject");
        let mut p =
            IngressParser::new(RingId(1), EdgeId(1), PortId(0), ObjectSpec::token_ids(16), 8);
        let mut host = CpuBridge::new(WorkerGeneration(0), 1 << 20);
        let mut c = Consumer::attach(Arc::clone(&r));
        let loaded: Vec<(Sequence, Vec<u8>)> = p
            .poll(&mut c, &mut host)
            .into_iter()
            .filter_map(|e| match e {
                Event::ObjectLoaded { sequence, handle, .. } => {
                    Some((sequence, host.view(handle).expect("view").to_vec()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(loaded, vec![(Sequence(0), ids(&[5, 6, 7])), (Sequence(1), ids(&[9])),]);
    }

    #[test]
    fn token_objects_are_read_in_order_and_a_skipped_sequence_is_out_of_order() {
        let r = ring();
        let mut producer = TokenIn::new(RingId(1), Arc::clone(&r)); // stands in for the last stage
        let mut tout =
            TokenOut::new(RingId(1), EdgeId(4), ObjectSpec::token_ids(1), Arc::clone(&r));
        producer.inject(ObjectId(1), Sequence(0), &ids(&[42]), false).expect("write");
        producer.inject(ObjectId(2), Sequence(1), &ids(&[43]), false).expect("write");
        let got: Vec<TokenOutEvent> =
            tout.poll().into_iter().filter(|e| !matches!(e, TokenOutEvent::Writable)).collect();
        assert_eq!(
            got,
            vec![
                TokenOutEvent::Object {
                    object_id: ObjectId(1),
                    sequence: Sequence(0),
                    payload: ids(&[42])
                },
                TokenOutEvent::Object {
                    object_id: ObjectId(2),
                    sequence: Sequence(1),
                    payload: ids(&[43])
                },
            ]
        );
        producer.inject(ObjectId(4), Sequence(3), &ids(&[44]), false).expect("write");
        assert!(tout.poll().contains(&TokenOutEvent::Fault(TokenFault::OutOfOrder.into())));
    }

    #[test]
    fn a_token_object_larger_than_its_edge_allows_is_malformed() {
        let r = ring();
        let mut producer = TokenIn::new(RingId(1), Arc::clone(&r));
        let mut tout =
            TokenOut::new(RingId(1), EdgeId(4), ObjectSpec::token_ids(1), Arc::clone(&r));
        producer.inject(ObjectId(1), Sequence(0), &ids(&[1, 2]), false).expect("write");
        assert!(tout.poll().contains(&TokenOutEvent::Fault(TokenFault::Malformed.into())));
    }
}
