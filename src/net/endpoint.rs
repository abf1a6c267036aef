//! The offline iroh endpoint: no relays, no address lookup, no port mapping, one explicit
//! bind address, conservative transport settings.

use std::net::SocketAddr;
use std::time::Duration;

use iroh::Endpoint;
use iroh::endpoint::{IdleTimeout, PortmapperConfig, QuicTransportConfig, VarInt, presets};

use super::identity::NodeKey;

/// ALPN of the control plane.
pub const CTL_ALPN: &[u8] = b"swactor/ctl/1";
/// ALPN of the data plane (edge streams).
pub const EDGE_ALPN: &[u8] = b"swactor/edge/1";
/// Per-stream receive window (larger windows make a lagging receiver abort the
/// connection in the QUIC stack we use).
pub const STREAM_RECEIVE_WINDOW: u32 = 2 * 1024 * 1024;
/// A dead peer is noticed after this long without packets.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4);
/// Keep-alive interval (a quarter of the idle timeout).
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// Why the endpoint could not be bound.
#[derive(Debug, thiserror::Error)]
#[error("cannot bind the iroh endpoint on {addr}: {detail}")]
pub struct BindFailed {
    /// The address.
    pub addr: SocketAddr,
    /// What failed.
    pub detail: String,
}

/// The transport settings every swactor connection uses.
pub fn transport_config() -> QuicTransportConfig {
    QuicTransportConfig::builder()
        .stream_receive_window(VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .max_idle_timeout(IdleTimeout::try_from(IDLE_TIMEOUT).ok())
        .keep_alive_interval(KEEP_ALIVE)
        .build()
}

/// Binds an offline endpoint for `key` on `listen`, speaking the control and edge ALPNs.
pub async fn bind(key: &NodeKey, listen: SocketAddr) -> Result<Endpoint, BindFailed> {
    let failed = |detail: String| BindFailed { addr: listen, detail };
    Endpoint::builder(presets::Minimal)
        .secret_key(key.secret().clone())
        .alpns(vec![CTL_ALPN.to_vec(), EDGE_ALPN.to_vec()])
        .relay_mode(iroh::RelayMode::Disabled)
        .clear_address_lookup()
        .portmapper_config(PortmapperConfig::Disabled)
        .transport_config(transport_config())
        .clear_ip_transports()
        .bind_addr(listen)
        .map_err(|e| failed(e.to_string()))?
        .bind()
        .await
        .map_err(|e| failed(e.to_string()))
}

/// The iroh address of a planned peer: its endpoint id (64 hex digits) and its direct
/// addresses. `None` when the peer has no valid endpoint id.
pub fn peer_addr(peer: &crate::wire::Peer) -> Option<iroh::EndpointAddr> {
    use std::str::FromStr;
    let id = iroh::EndpointId::from_str(peer.endpoint_id.as_deref()?).ok()?;
    Some(peer.addrs.iter().fold(iroh::EndpointAddr::new(id), |a, s| a.with_ip_addr(*s)))
}
