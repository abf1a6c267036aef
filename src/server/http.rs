//! The HTTP listener: hyper's HTTP/1 connections over the router, at most
//! `max_connections` at once (further ones wait in the kernel's backlog), each with a
//! header-read timeout (which also closes a keep-alive connection that stays idle), and a
//! graceful end: stop accepting, let the open connections finish their responses for up
//! to the grace period, close the rest.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// The listener's bounds.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Request bodies over this many bytes are refused (413).
    pub max_body: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// A request's headers must arrive within this (and an idle connection closes).
    pub header_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body: 8 << 20,
            max_connections: 256,
            header_timeout: Duration::from_secs(30),
        }
    }
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
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            () = stopped(&mut stop) => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            () = stopped(&mut stop) => break,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, say: wait a little rather than spin.
                eprintln!("swactor: http accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
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
            drop(permit);
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
