//! The HTTP listener: hyper's HTTP/1 connections over the router, at most
//! `max_connections` at once and `max_connections_per_peer` from one IP address; a client
//! over either cap is answered at once (503, or 429 for its own address, with
//! `Retry-After`) and closed rather than left in the kernel's backlog. Each connection has
//! a header-read timeout (which also closes a keep-alive connection that stays idle); the
//! body's timeout is the router's ([`super::guard`]). A graceful end: stop accepting, let
//! the open connections finish their responses for up to the grace period, close the
//! rest.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::metrics::Reason;
use super::state::lock;
use crate::serve::error::{ApiError, ErrorType};
use crate::wire::reason::ApiRefusal;

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Request bodies over this many bytes are refused (413).
    pub max_body: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one IP address.
    pub max_connections_per_peer: usize,
    /// A request's headers must arrive within this (and an idle connection closes).
    pub header_timeout: Duration,
    /// A request's body must arrive within this, from when its headers did (408).
    pub body_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body: 8 << 20,
            max_connections: 256,
            max_connections_per_peer: 128, // half of max_connections
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// What the listener counts into the metrics.
#[derive(Clone, Default)]
pub struct HttpMetrics {
    /// Connections open.
    pub open: Gauge,
    /// Connections refused, by reason.
    pub refused: Family<Reason, Counter>,
}

/// Refusals being written at once, at most; past that a client over a cap is closed
/// without an answer (a flood cannot make the refusals themselves the leak).
const MAX_REFUSING: usize = 64;

/// How long a refused client has to read its answer.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// The connections open, in all and per peer address.
#[derive(Default)]
struct Open {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
}

/// A connection's place among the open ones, given back when dropped.
struct Place {
    open: Arc<Mutex<Open>>,
    peer: IpAddr,
    gauge: Gauge,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.gauge.dec();
        let mut open = lock(&self.open);
        open.total -= 1;
        if let Some(n) = open.per_peer.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                open.per_peer.remove(&self.peer);
            }
        }
    }
}

/// Takes a place for a connection from `peer`, or says which cap it is over.
fn admit(
    open: &Arc<Mutex<Open>>,
    peer: IpAddr,
    limits: &HttpLimits,
    gauge: &Gauge,
) -> Result<Place, ApiError> {
    let mut o = lock(open);
    if o.total >= limits.max_connections.max(1) {
        return Err(ApiError::unavailable(
            ApiRefusal::TooManyConnections,
            "the server holds as many connections as it takes; try again shortly",
        ));
    }
    let mine = o.per_peer.get(&peer).copied().unwrap_or(0);
    if mine >= limits.max_connections_per_peer.max(1) {
        return Err(ApiError::new(
            ErrorType::RateLimitError,
            "your address holds as many connections as one address may",
        )
        .refused(ApiRefusal::TooManyConnectionsFromPeer));
    }
    o.total += 1;
    *o.per_peer.entry(peer).or_insert(0) += 1;
    gauge.inc();
    Ok(Place { open: open.clone(), peer, gauge: gauge.clone() })
}

/// Answers a client over a cap with `error` and closes: the answer is written at once,
/// then what the client sends is read (so closing does not reset the connection under
/// its answer) for a moment.
async fn refuse(mut stream: TcpStream, error: ApiError) {
    let body = error.body();
    let reason = if error.status() == 429 { "Too Many Requests" } else { "Service Unavailable" };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n",
        error.status(),
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    if !matches!(tokio::time::timeout(REFUSAL_LINGER, write).await, Ok(Ok(()))) {
        return;
    }
    let mut sink = [0u8; 4096];
    let drain = async {
        let mut read = 0usize;
        while read < 64 << 10 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, drain).await;
}

/// Serves `app` on `listener` until `stop` turns true, then closes gracefully within
/// `grace` (at once when `force` turns true).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
    mut force: watch::Receiver<bool>,
    metrics: HttpMetrics,
) {
    let open = Arc::new(Mutex::new(Open::default()));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stopped(&mut stop) => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, say: wait a little rather than spin.
                eprintln!("swactor: http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let place = match admit(&open, peer.ip(), &limits, &metrics.open) {
            Ok(p) => p,
            Err(e) => {
                let reason = e.reason.clone().unwrap_or_default();
                metrics.refused.get_or_create(&Reason { reason }).inc();
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream, e).await;
                        drop(permit);
                    });
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(place);
        });
    }
    drop(listener);
    tokio::select! {
        _ = tokio::time::timeout(grace, graceful.shutdown()) => {}
        () = stopped(&mut force) => {}
    }
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_over_its_cap_and_anyone_over_the_total_are_refused_and_places_come_back() {
        let limits =
            HttpLimits { max_connections: 3, max_connections_per_peer: 2, ..Default::default() };
        let open = Arc::new(Mutex::new(Open::default()));
        let gauge = Gauge::default();
        let (a, b): (IpAddr, IpAddr) =
            ("127.0.0.1".parse().expect("ip"), "127.0.0.2".parse().expect("ip"));
        let a1 = admit(&open, a, &limits, &gauge).expect("first");
        let _a2 = admit(&open, a, &limits, &gauge).expect("second");
        let e = admit(&open, a, &limits, &gauge).err().expect("a third from one peer");
        assert_eq!(
            (e.status(), e.reason.as_deref()),
            (429, Some("too_many_connections_from_peer"))
        );
        let _b1 = admit(&open, b, &limits, &gauge).expect("another peer");
        let e = admit(&open, b, &limits, &gauge).err().expect("over the total");
        assert_eq!((e.status(), e.reason.as_deref()), (503, Some("too_many_connections")));
        drop(a1);
        assert!(admit(&open, b, &limits, &gauge).is_ok(), "a closed connection frees its place");
        assert_eq!(lock(&open).per_peer.get(&a), Some(&1));
        assert_eq!(gauge.get(), 2, "the places of the connections still open");
    }
}
