//! The network plane's mechanisms: node identity ([`identity`]), the offline iroh endpoint
//! ([`endpoint`]), edge streams with their pumps and the receive rendezvous ([`edge`]), and
//! which address to tell others ([`advertise`]).

pub mod advertise;
pub mod edge;
pub mod endpoint;
pub mod identity;
