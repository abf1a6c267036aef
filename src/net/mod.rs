//! The network plane's mechanisms: node identity ([`identity`]), the offline iroh endpoint
//! ([`endpoint`]), edge streams with their pumps and the receive rendezvous ([`edge`]), and
//! which address to tell others ([`advertise`]), and relays for hosts without a direct
//! path ([`relay`]), and how each peer is reached now ([`paths`]), and link probes
//! ([`ping`]).

pub mod advertise;
pub mod edge;
pub mod endpoint;
pub mod identity;
pub mod paths;
pub mod ping;
pub mod relay;
