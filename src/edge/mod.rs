//! Edges: the node-local establishment of each edge end ([`establisher`]).
//! The iroh driver and its pumps come with the network plane.

pub mod establisher;
pub mod executor;
pub mod plane;

pub use establisher::{
    EdgeEnd, EdgeEstablisher, EdgeProvision, EstablisherCommand, EstablisherEvent,
};
pub use plane::{EdgePlane, PlaneCommand, PlaneEvent};
