//! The user-space WAN forwarder the multi-host tests put between hosts (this kernel has no
//! `netem`): a UDP relay between one client and one target that carries every datagram
//! through a [`Link`] each way, so a QUIC path through it sees the round trip, jitter and
//! loss of a wide-area link.
//!
//! A driver: the links (`swactor_core::wan`) decide each datagram's fate and time; this
//! module only moves datagrams between sockets and the links, reading the host's clock.
//! Datagrams to the front address go to the target from a back socket; the target's
//! replies to that socket go back to the last client address seen. Dropping the
//! [`Forwarder`] stops and joins its threads.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

pub use swactor_core::wan::{Link, LinkSpec, LinkSpecError, LinkStats};

/// How often a blocked thread looks at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// The largest datagram carried (QUIC's stay well under it).
const MAX_DATAGRAM: usize = 65_535;

/// The two directions and where replies go.
struct State {
    /// Client to target.
    up: Link<Vec<u8>>,
    /// Target to client.
    down: Link<Vec<u8>>,
    /// The last address a datagram came from on the front socket.
    client: Option<SocketAddr>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever a datagram is queued or stop is set.
    changed: Condvar,
    stop: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running forwarder.
pub struct Forwarder {
    front: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Forwarder {
    /// Listens on `listen` (port 0 picks one) and forwards to `target` from a socket on
    /// `listen`'s address, each direction through a link behaving as `spec`, with draws
    /// seeded from `seed` (the up link) and `seed + 1` (the down link).
    pub fn start(
        listen: SocketAddr,
        target: SocketAddr,
        spec: LinkSpec,
        seed: u64,
    ) -> io::Result<Forwarder> {
        let front = UdpSocket::bind(listen)?;
        let back = UdpSocket::bind(SocketAddr::new(listen.ip(), 0))?;
        for s in [&front, &back] {
            s.set_read_timeout(Some(POLL))?;
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                up: Link::new(spec, seed),
                down: Link::new(spec, seed.wrapping_add(1)),
                client: None,
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let mut fwd = Forwarder { front: front.local_addr()?, shared, threads: Vec::new() };
        let (front, back) = (Arc::new(front), Arc::new(back));
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new().name(format!("swactor-wan-{name}")).spawn(f)
        };
        // A thread the system refuses drops `fwd`, which stops and joins those started.
        let (sh, sock) = (fwd.shared.clone(), front.clone());
        fwd.threads.push(spawn("front", Box::new(move || receive(&sh, &sock, None)))?);
        let (sh, sock) = (fwd.shared.clone(), back.clone());
        fwd.threads.push(spawn("back", Box::new(move || receive(&sh, &sock, Some(target))))?);
        let sh = fwd.shared.clone();
        fwd.threads.push(spawn("send", Box::new(move || send(&sh, &front, &back, target)))?);
        Ok(fwd)
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.front
    }

    /// The counts of the up (client to target) and down links.
    pub fn stats(&self) -> (LinkStats, LinkStats) {
        let s = self.shared.lock();
        (s.up.stats(), s.down.stats())
    }

    /// Waits until `done(up, down)` holds for the links' counts (checked whenever a
    /// datagram arrives or leaves), or `timeout` passes: whether it held.
    pub fn wait_for(&self, timeout: Duration, done: impl Fn(LinkStats, LinkStats) -> bool) -> bool {
        let s = self.shared.lock();
        let (s, _) = self
            .shared
            .changed
            .wait_timeout_while(s, timeout, |s| !done(s.up.stats(), s.down.stats()))
            .unwrap_or_else(|e| e.into_inner());
        done(s.up.stats(), s.down.stats())
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        {
            let _g = self.shared.lock();
            self.shared.changed.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Reads datagrams from `sock` into the up link (`from_target` `None`: the front socket,
/// remembering the client) or the down link (only those from the target).
fn receive(shared: &Shared, sock: &UdpSocket, from_target: Option<SocketAddr>) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.stop.load(Ordering::SeqCst) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            // Timeouts (to look at the stop flag) and ICMP errors of earlier sends.
            Err(_) => continue,
        };
        let now = crate::clock::monotonic_us();
        let mut s = shared.lock();
        match from_target {
            None => {
                s.client = Some(from);
                s.up.push(now, buf[..n].to_vec());
            }
            Some(t) if t == from => {
                s.down.push(now, buf[..n].to_vec());
            }
            Some(_) => continue,
        }
        shared.changed.notify_all();
    }
}

/// Sends each datagram when its link says it is due: up ones to the target from the back
/// socket, down ones to the client from the front socket.
fn send(shared: &Shared, front: &UdpSocket, back: &UdpSocket, target: SocketAddr) {
    let mut s = shared.lock();
    while !shared.stop.load(Ordering::SeqCst) {
        let now = crate::clock::monotonic_us();
        let mut sent = false;
        while let Some(d) = s.up.pop_due(now) {
            let _ = back.send_to(&d, target);
            sent = true;
        }
        while let Some(d) = s.down.pop_due(now) {
            if let Some(client) = s.client {
                let _ = front.send_to(&d, client);
            }
            sent = true;
        }
        if sent {
            shared.changed.notify_all();
        }
        let next = [s.up.next_due(), s.down.next_due()].into_iter().flatten().min();
        let wait = next.map_or(POLL, |due| Duration::from_micros(due.saturating_sub(now)));
        s = shared.changed.wait_timeout(s, wait.min(POLL)).unwrap_or_else(|e| e.into_inner()).0;
    }
}

#[cfg(test)]
mod tests;
