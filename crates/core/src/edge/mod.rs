//! Edge ends (sans-IO): the edge establisher and the edge plane that owns it with the
//! arena manager.

pub mod establisher;
pub mod plane;

pub use establisher::{
    EdgeEnd, EdgeEstablisher, EdgeProvision, EstablisherCommand, EstablisherEvent,
};
pub use plane::{EdgePlane, PlaneCommand, PlaneEvent};
