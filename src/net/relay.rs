//! Relays: the iroh relays an endpoint falls back to when no direct path to a peer exists
//! (`--relay URL`, [`Relays`]), and the relay server a user hosts for the pool
//! (`swactor relay serve`, [`RelayServer`]).
//!
//! Only the relays named here are ever contacted: an endpoint without `--relay` has none,
//! and no public relay is in any default. Each relay is used without QUIC address
//! discovery (its client would otherwise probe a second port the relay may not serve).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use iroh::{RelayConfig, RelayMap, RelayMode, RelayUrl};
use iroh_relay::server::{self as relay_server, CertConfig, Server, ServerConfig, TlsConfig};

/// Why a relay option or server is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RelayFault {
    /// A relay URL that does not parse, or whose scheme is not `http` or `https`.
    BadUrl,
    /// `--relay-only` without any `--relay`.
    OnlyWithoutRelay,
    /// The TLS certificate or key could not be read or used.
    Tls,
    /// The relay server could not bind or start.
    Bind,
    /// The endpoint did not reach any of its relays in time.
    Unreachable,
}

impl RelayFault {
    /// The stable code (`relay.<code>`).
    pub fn code(self) -> &'static str {
        match self {
            RelayFault::BadUrl => "bad_url",
            RelayFault::OnlyWithoutRelay => "only_without_relay",
            RelayFault::Tls => "tls",
            RelayFault::Bind => "bind",
            RelayFault::Unreachable => "unreachable",
        }
    }
}

impl std::fmt::Display for RelayFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "relay.{}", self.code())
    }
}

/// A refused relay option or a relay server that could not start.
#[derive(Debug, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct RelayError {
    /// Stable reason.
    pub reason: RelayFault,
    /// What exactly.
    pub detail: String,
}

fn err(reason: RelayFault, detail: impl std::fmt::Display) -> RelayError {
    RelayError { reason, detail: detail.to_string() }
}

/// The relays an endpoint may use, whether it uses nothing else, and the certificates a
/// relay's TLS certificate may chain to beside the public roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Relays {
    urls: Vec<RelayUrl>,
    only: bool,
    roots: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl Relays {
    /// No relay: every peer must be reachable directly.
    pub fn none() -> Relays {
        Relays::default()
    }

    /// The relays of `--relay` (each `http://` or `https://`), relay-only when `only`.
    pub fn parse(urls: &[String], only: bool) -> Result<Relays, RelayError> {
        let urls = urls.iter().map(|u| parse_url(u)).collect::<Result<Vec<_>, _>>()?;
        if only && urls.is_empty() {
            return Err(err(
                RelayFault::OnlyWithoutRelay,
                "--relay-only needs at least one --relay URL (a relay-only endpoint reaches peers through it alone)",
            ));
        }
        Ok(Relays { urls, only, roots: Vec::new() })
    }

    /// These relays, also trusting the certificates of the PEM file `ca` (a relay serving
    /// HTTPS with a certificate of its own; `relay.tls` when it holds none).
    pub fn trusting(mut self, ca: &Path) -> Result<Relays, RelayError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let pem = std::fs::read(ca)
            .map_err(|e| err(RelayFault::Tls, format!("cannot read {}: {e}", ca.display())))?;
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(RelayFault::Tls, format!("{}: {e}", ca.display())))?;
        if certs.is_empty() {
            return Err(err(RelayFault::Tls, format!("{} holds no certificate", ca.display())));
        }
        self.roots.extend(certs);
        Ok(self)
    }

    /// How the endpoint checks relays' certificates: the public (WebPKI) roots, and the
    /// certificates given to [`Relays::trusting`].
    pub fn ca_config(&self) -> iroh_relay::tls::CaTlsConfig {
        iroh_relay::tls::CaTlsConfig::default().with_extra_roots(self.roots.iter().cloned())
    }

    /// The relay URLs, as given (normalized by the URL parser).
    pub fn urls(&self) -> &[RelayUrl] {
        &self.urls
    }

    /// The first relay: where this endpoint says it can be reached.
    pub fn home(&self) -> Option<&RelayUrl> {
        self.urls.first()
    }

    /// Whether the endpoint has no direct (IP) transport at all.
    pub fn only(&self) -> bool {
        self.only
    }

    /// Whether any relay is configured.
    pub fn any(&self) -> bool {
        !self.urls.is_empty()
    }

    /// iroh's relay mode for these relays: `Disabled` when there are none.
    pub fn mode(&self) -> RelayMode {
        if self.urls.is_empty() {
            return RelayMode::Disabled;
        }
        // No QUIC address discovery: `RelayConfig::new(url, None)`.
        let map = RelayMap::from_iter(self.urls.iter().map(|u| RelayConfig::new(u.clone(), None)));
        RelayMode::Custom(map)
    }
}

/// Parses one relay URL; only `http` and `https` relays exist.
pub fn parse_url(url: &str) -> Result<RelayUrl, RelayError> {
    let parsed: RelayUrl =
        url.parse().map_err(|e| err(RelayFault::BadUrl, format!("{url:?}: {e}")))?;
    match parsed.scheme() {
        "http" | "https" if parsed.host_str().is_some() => Ok(parsed),
        _ => Err(err(
            RelayFault::BadUrl,
            format!("{url:?}: a relay URL is http://HOST:PORT or https://HOST[:PORT]"),
        )),
    }
}

/// A certificate chain and its private key, PEM files, for a relay served over TLS.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain (PEM).
    pub cert: PathBuf,
    /// The private key (PEM).
    pub key: PathBuf,
}

/// A running relay server (iroh's relay protocol over HTTP or HTTPS); stopped on
/// [`RelayServer::shutdown`] or drop.
pub struct RelayServer {
    server: Server,
    url: String,
    addr: SocketAddr,
}

impl std::fmt::Debug for RelayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayServer").field("url", &self.url).finish()
    }
}

impl RelayServer {
    /// Starts a relay on `listen`: plain HTTP without `tls` (tests, trusted networks),
    /// HTTPS with the given certificate otherwise (`listen` then serves HTTPS; plain HTTP
    /// is not served). `host` names the relay in its URL (default: `listen`'s IP).
    pub async fn start(
        listen: SocketAddr,
        tls: Option<&TlsFiles>,
        host: Option<&str>,
    ) -> Result<RelayServer, RelayError> {
        let mut relay = relay_server::RelayConfig::new(listen);
        let scheme = match tls {
            None => "http",
            Some(files) => {
                let server_config = rustls_config(files)?;
                relay.tls = Some(TlsConfig::new(listen, CertConfig::Manual { server_config }));
                // Plain HTTP on an ephemeral loopback port only (the server wants one).
                relay.http_bind_addr = SocketAddr::from(([127, 0, 0, 1], 0));
                "https"
            }
        };
        let mut config = ServerConfig::default();
        config.relay = Some(relay);
        config.quic = None;
        let server = Server::spawn(config)
            .await
            .map_err(|e| err(RelayFault::Bind, format!("cannot serve a relay on {listen}: {e}")))?;
        let addr = match tls {
            None => server.http_addr(),
            Some(_) => server.https_addr(),
        }
        .ok_or_else(|| err(RelayFault::Bind, "the relay server reports no address"))?;
        let host = host.map(str::to_string).unwrap_or_else(|| addr.ip().to_string());
        let host =
            if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host };
        let url = format!("{scheme}://{host}:{}/", addr.port());
        if let Err(e) = parse_url(&url) {
            let _ = server.shutdown().await;
            return Err(err(RelayFault::BadUrl, format!("--host {host:?}: {}", e.detail)));
        }
        Ok(RelayServer { server, url, addr })
    }

    /// The URL nodes and orchestrators name with `--relay`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The socket address it serves on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops the server and waits until it has.
    pub async fn shutdown(self) {
        let _ = self.server.shutdown().await;
    }
}

/// rustls' server configuration from PEM files (ring provider, TLS 1.3 and 1.2).
fn rustls_config(files: &TlsFiles) -> Result<rustls::ServerConfig, RelayError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let read = |p: &Path, what: &str| {
        std::fs::read(p).map_err(|e| {
            err(RelayFault::Tls, format!("cannot read the {what} {}: {e}", p.display()))
        })
    };
    let cert_pem = read(&files.cert, "certificate")?;
    let key_pem = read(&files.key, "key")?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(RelayFault::Tls, format!("{}: {e}", files.cert.display())))?;
    if certs.is_empty() {
        return Err(err(RelayFault::Tls, format!("{} holds no certificate", files.cert.display())));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| err(RelayFault::Tls, format!("{}: {e}", files.key.display())))?;
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(RelayFault::Tls, e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| err(RelayFault::Tls, e))
}
