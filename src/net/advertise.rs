//! Which address to tell others: never an unspecified one (`0.0.0.0`, `[::]`), which no
//! other host can reach. The operator's `--advertise IP` wins; a socket bound to a
//! specific address advertises it; one bound to the unspecified address advertises the
//! local address the host's routing would use toward the given peers (a connected UDP
//! socket's local address: no datagram is sent), and without peers to route toward it is
//! a typed error asking for `--advertise`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// Why no address can be advertised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "listening on {bound}, an address other hosts cannot reach, and no peer to route toward: \
     pass --advertise IP (an address of this host the others can reach), or listen on it"
)]
pub struct AdvertiseError {
    /// The unspecified bound address.
    pub bound: SocketAddr,
}

/// The address to advertise for a socket bound at `bound` (see the module docs).
pub fn advertised(
    bound: SocketAddr,
    explicit: Option<IpAddr>,
    toward: &[SocketAddr],
) -> Result<SocketAddr, AdvertiseError> {
    if let Some(ip) = explicit {
        return Ok(SocketAddr::new(ip, bound.port()));
    }
    if !bound.ip().is_unspecified() {
        return Ok(bound);
    }
    toward
        .iter()
        .find_map(|peer| route_source(*peer))
        .map(|ip| SocketAddr::new(ip, bound.port()))
        .ok_or(AdvertiseError { bound })
}

/// The local address this host would send from toward `peer`.
fn route_source(peer: SocketAddr) -> Option<IpAddr> {
    let any: IpAddr =
        if peer.is_ipv4() { Ipv4Addr::UNSPECIFIED.into() } else { Ipv6Addr::UNSPECIFIED.into() };
    let socket = UdpSocket::bind(SocketAddr::new(any, 0)).ok()?;
    socket.connect(peer).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().expect("addr")
    }

    #[test]
    fn an_unspecified_address_is_never_advertised() {
        // Explicit wins, a specific bind stands, an unspecified one routes toward a peer.
        let ip: IpAddr = "10.1.2.3".parse().expect("ip");
        assert_eq!(advertised(a("0.0.0.0:7000"), Some(ip), &[]), Ok(a("10.1.2.3:7000")));
        assert_eq!(advertised(a("127.0.0.1:7000"), None, &[]), Ok(a("127.0.0.1:7000")));
        assert_eq!(
            advertised(a("0.0.0.0:7000"), None, &[a("127.0.0.1:9")]),
            Ok(a("127.0.0.1:7000"))
        );
        assert_eq!(
            advertised(a("0.0.0.0:7000"), None, &[]),
            Err(AdvertiseError { bound: a("0.0.0.0:7000") })
        );
    }
}
