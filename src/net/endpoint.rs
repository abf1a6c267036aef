//! The iroh endpoint: no address lookup, no port mapping, one explicit bind address (none
//! when relay-only), only the relays the user named ([`Relays`]; none by default),
//! conservative transport settings.

use std::net::SocketAddr;
use std::time::Duration;

use iroh::Endpoint;
use iroh::endpoint::{IdleTimeout, PortmapperConfig, QuicTransportConfig, VarInt, presets};

use super::identity::NodeKey;
use super::relay::{RelayError, RelayFault, Relays};

/// ALPN of the control plane.
pub const CTL_ALPN: &[u8] = b"swactor/ctl/1";
/// ALPN of the data plane (edge streams).
pub const EDGE_ALPN: &[u8] = b"swactor/edge/1";
/// ALPN of the link round-trip probe ([`super::ping`]).
pub const PING_ALPN: &[u8] = b"swactor/ping/1";
/// ALPN of SWIM datagrams for members reached through a relay (the membership's carrier).
pub const SWIM_ALPN: &[u8] = b"swactor/swim/1";
/// Per-stream receive window (larger windows make a lagging receiver abort the
/// connection in the QUIC stack we use).
pub const STREAM_RECEIVE_WINDOW: u32 = 2 * 1024 * 1024;
/// A dead peer is noticed after this long without packets.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(4);
/// Keep-alive interval (a quarter of the idle timeout).
pub const KEEP_ALIVE: Duration = Duration::from_secs(1);
/// Ack-eliciting packets the peer may receive before it must acknowledge.
pub const ACK_EVERY: u32 = 16;
/// How long the peer may delay an acknowledgement.
pub const ACK_DELAY: Duration = Duration::from_millis(2);

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
        .ack_frequency_config(Some(ack_frequency()))
        .build()
}

/// Acknowledgements the peer may delay: one for every [`ACK_EVERY`] ack-eliciting packets
/// or after [`ACK_DELAY`], whichever comes first. A decode object's packets are then not
/// answered by an acknowledgement that the receiver sends before it hands their bytes to
/// the ring, and a streaming prefill is acknowledged less often.
fn ack_frequency() -> iroh::endpoint::AckFrequencyConfig {
    let mut c = iroh::endpoint::AckFrequencyConfig::default();
    c.ack_eliciting_threshold(VarInt::from_u32(ACK_EVERY));
    c.max_ack_delay(Some(ACK_DELAY));
    c
}

/// Binds an endpoint for `key` on `listen` (no IP socket at all when `relays` is
/// relay-only), speaking the control, edge, ping and SWIM ALPNs, using only `relays`'
/// relays.
pub async fn bind(
    key: &NodeKey,
    listen: SocketAddr,
    relays: &Relays,
) -> Result<Endpoint, BindFailed> {
    let failed = |detail: String| BindFailed { addr: listen, detail };
    let builder = Endpoint::builder(presets::Minimal)
        .secret_key(key.secret().clone())
        .alpns(vec![CTL_ALPN.to_vec(), EDGE_ALPN.to_vec(), PING_ALPN.to_vec(), SWIM_ALPN.to_vec()])
        .relay_mode(relays.mode())
        .ca_tls_config(relays.ca_config())
        .clear_address_lookup()
        .portmapper_config(PortmapperConfig::Disabled)
        .transport_config(transport_config())
        .clear_ip_transports();
    let builder = if relays.only() {
        builder
    } else {
        builder.bind_addr(listen).map_err(|e| failed(e.to_string()))?
    };
    builder.bind().await.map_err(|e| failed(why_unbound(listen).unwrap_or_else(|| e.to_string())))
}

/// Waits until `endpoint` holds a connection to its home relay (at once without relays):
/// until then no peer can reach it through one. `relay.unreachable` after `timeout`.
pub async fn wait_for_relay(
    endpoint: &Endpoint,
    relays: &Relays,
    timeout: Duration,
) -> Result<(), RelayError> {
    if !relays.any() {
        return Ok(());
    }
    tokio::time::timeout(timeout, endpoint.online()).await.map_err(|_| RelayError {
        reason: RelayFault::Unreachable,
        detail: format!(
            "no connection to {} within {} ms",
            relays.urls().iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            timeout.as_millis()
        ),
    })
}

/// What the OS says about binding a UDP socket on `addr` (iroh's own error does not say),
/// e.g. "the address is in use (another process listens there)".
fn why_unbound(addr: SocketAddr) -> Option<String> {
    match std::net::UdpSocket::bind(addr) {
        Ok(_) => None,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Some("the address is in use (another process listens there)".into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            Some("the address is not one of this host's".into())
        }
        Err(e) => Some(e.to_string()),
    }
}

/// The iroh address of a planned peer: its endpoint id (64 hex digits), its direct
/// addresses and its relay. `None` when the peer has no valid endpoint id.
pub fn peer_addr(peer: &crate::wire::Peer) -> Option<iroh::EndpointAddr> {
    use std::str::FromStr;
    let id = iroh::EndpointId::from_str(peer.endpoint_id.as_deref()?).ok()?;
    Some(endpoint_addr(id, &peer.addrs, peer.relay.as_deref()))
}

/// The iroh address of `id` at `addrs`, and through `relay` when it names a valid relay
/// (the pool's checks have refused any other).
pub fn endpoint_addr(
    id: iroh::EndpointId,
    addrs: &[SocketAddr],
    relay: Option<&str>,
) -> iroh::EndpointAddr {
    let addr = addrs.iter().fold(iroh::EndpointAddr::new(id), |a, s| a.with_ip_addr(*s));
    match relay.and_then(|r| super::relay::parse_url(r).ok()) {
        Some(url) => addr.with_relay_url(url),
        None => addr,
    }
}
