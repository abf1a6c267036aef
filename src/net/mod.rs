//! The network plane's mechanisms: node identity ([`identity`]), the offline iroh endpoint
//! ([`endpoint`]), and edge streams with their pumps and the receive rendezvous ([`edge`]).

pub mod edge;
pub mod endpoint;
pub mod identity;
