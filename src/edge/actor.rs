//! Tx / Rx edge actors: the per-edge lifecycle a stage (or token endpoint) sees, driven
//! only by coarse events for its own edge id. The hot path (bytes, cursors) never passes
//! through them; they count objects and keep the first fault for `edge inspect`.
//!
//! Tx: `Provisioning -> Ready -> Producing -> Ready ... -> Stopping -> Stopped`.
//! Rx: `Provisioning -> Ready -> ObjectReady -> Ready ... -> Stopping -> Stopped`.
//! Any fault moves either to `Faulted` (absorbing until stopped); events for another edge,
//! or illegal in the current state, are refused without changing anything.

use serde::Serialize;

use crate::events::Direction;
use crate::wire::reason::FaultReason;
use crate::wire::{EdgeId, Sequence};

/// An actor's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorState {
    /// Being established.
    Provisioning,
    /// Established and idle.
    Ready,
    /// Tx: a step is writing an object into the edge.
    Producing,
    /// Rx: a loaded object waits to be consumed.
    ObjectReady,
    /// Being torn down.
    Stopping,
    /// Torn down.
    Stopped,
    /// Faulted; only a stop moves it on.
    Faulted,
}

/// A coarse event about one edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorEvent {
    /// The establisher reports the edge ready.
    EdgeReady,
    /// Tx: a step started writing an object of this sequence.
    StepStarted(Sequence),
    /// Tx: the object was committed whole.
    ObjectProduced(Sequence),
    /// Rx: an object was loaded.
    ObjectLoaded(Sequence),
    /// Rx: the loaded object was consumed (released).
    ObjectReleased,
    /// An object failed.
    ObjectFailed(FaultReason),
    /// The stream faulted.
    StreamFault(FaultReason),
    /// Stop requested.
    StopEdge,
    /// The establisher finished tearing the edge down.
    EdgeStopped,
}

/// The event is not legal in the current state (nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{event:?} is not legal for a {direction:?} edge in state {state:?}")]
pub struct IllegalEvent {
    /// The edge's direction.
    pub direction: Direction,
    /// Its state.
    pub state: ActorState,
    /// The refused event.
    pub event: ActorEvent,
}

/// One edge's Tx or Rx actor.
#[derive(Debug, Clone, Serialize)]
pub struct EdgeActor {
    /// The edge.
    pub edge_id: EdgeId,
    /// Send (Tx) or receive (Rx).
    pub direction: Direction,
    /// Current state.
    pub state: ActorState,
    /// Objects produced (Tx) or loaded (Rx).
    pub objects: u64,
    /// The first fault, kept.
    pub fault: Option<FaultReason>,
}

impl EdgeActor {
    /// A new actor, provisioning.
    pub fn new(edge_id: EdgeId, direction: Direction) -> EdgeActor {
        EdgeActor { edge_id, direction, state: ActorState::Provisioning, objects: 0, fault: None }
    }

    /// Applies one event; illegal events are refused and change nothing.
    pub fn handle(&mut self, event: ActorEvent) -> Result<ActorState, IllegalEvent> {
        use ActorEvent as E;
        use ActorState as S;
        let tx = self.direction == Direction::Send;
        let next = match (self.state, event) {
            (S::Stopped, _) => None,
            (S::Stopping, E::EdgeStopped) => Some(S::Stopped),
            (S::Stopping, _) => Some(S::Stopping),
            (_, E::StopEdge) => Some(S::Stopping),
            (S::Faulted, E::EdgeStopped) => Some(S::Stopped),
            (S::Faulted, E::ObjectFailed(_) | E::StreamFault(_)) => Some(S::Faulted),
            (_, E::ObjectFailed(r) | E::StreamFault(r)) => {
                self.fault.get_or_insert(r);
                Some(S::Faulted)
            }
            (S::Provisioning, E::EdgeReady) => Some(S::Ready),
            (S::Ready, E::StepStarted(_)) if tx => Some(S::Producing),
            (S::Producing, E::ObjectProduced(_)) if tx => {
                self.objects += 1;
                Some(S::Ready)
            }
            (S::Ready, E::ObjectLoaded(_)) if !tx => {
                self.objects += 1;
                Some(S::ObjectReady)
            }
            (S::ObjectReady, E::ObjectReleased) if !tx => Some(S::Ready),
            _ => None,
        };
        match next {
            Some(s) => {
                self.state = s;
                Ok(s)
            }
            None => Err(IllegalEvent { direction: self.direction, state: self.state, event }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::reason::{ObjectFailure, StreamFault};

    #[test]
    fn a_tx_actor_goes_ready_producing_ready_and_counts_objects() {
        let mut a = EdgeActor::new(EdgeId(1), Direction::Send);
        assert!(a.handle(ActorEvent::StepStarted(Sequence(0))).is_err(), "not before ready");
        assert_eq!(a.handle(ActorEvent::EdgeReady), Ok(ActorState::Ready));
        for s in 0..3 {
            assert_eq!(a.handle(ActorEvent::StepStarted(Sequence(s))), Ok(ActorState::Producing));
            assert_eq!(a.handle(ActorEvent::ObjectProduced(Sequence(s))), Ok(ActorState::Ready));
        }
        assert_eq!(a.objects, 3);
        assert!(
            a.handle(ActorEvent::ObjectLoaded(Sequence(0))).is_err(),
            "an Rx event for a Tx actor"
        );
    }

    #[test]
    fn an_rx_actor_holds_one_ready_object_at_a_time() {
        let mut a = EdgeActor::new(EdgeId(2), Direction::Recv);
        a.handle(ActorEvent::EdgeReady).expect("ready");
        assert_eq!(a.handle(ActorEvent::ObjectLoaded(Sequence(0))), Ok(ActorState::ObjectReady));
        assert!(a.handle(ActorEvent::ObjectLoaded(Sequence(1))).is_err());
        assert_eq!(a.state, ActorState::ObjectReady, "a refused event changes nothing");
        assert_eq!(a.handle(ActorEvent::ObjectReleased), Ok(ActorState::Ready));
    }

    #[test]
    fn the_first_fault_is_kept_and_only_a_stop_leaves_faulted() {
        let mut a = EdgeActor::new(EdgeId(3), Direction::Recv);
        a.handle(ActorEvent::EdgeReady).expect("ready");
        let first = FaultReason::Object(ObjectFailure::BadMagic);
        assert_eq!(a.handle(ActorEvent::ObjectFailed(first)), Ok(ActorState::Faulted));
        a.handle(ActorEvent::StreamFault(FaultReason::Stream(StreamFault::ReadFailed)))
            .expect("absorbed");
        assert_eq!(a.fault, Some(first));
        assert!(a.handle(ActorEvent::EdgeReady).is_err());
        assert_eq!(a.handle(ActorEvent::StopEdge), Ok(ActorState::Stopping));
        assert_eq!(a.handle(ActorEvent::EdgeStopped), Ok(ActorState::Stopped));
        assert!(a.handle(ActorEvent::EdgeReady).is_err(), "stopped is terminal");
    }
}
