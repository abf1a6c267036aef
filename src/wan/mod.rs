//! The user-space WAN forwarder the multi-host tests put between hosts (this kernel has no
//! `netem`): a UDP relay in front of one target that carries every datagram through a
//! [`Link`] each way, so a QUIC path through it sees the round trip, jitter and loss of a
//! wide-area link.
//!
//! A driver: the links (`swactor_core::wan`) decide each datagram's fate and time; this
//! module only moves datagrams between sockets and the links, reading the host's clock.
//! Like a NAT, it gives each client address a back socket of its own: datagrams to the
//! front address go to the target from the client's back socket, and the target's replies
//! to that socket go back to that client. Dropping the [`Forwarder`] stops and joins its
//! threads.

pub mod netns;

use std::collections::HashMap;
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

/// The most clients one forwarder serves (each has a socket and a thread); datagrams from
/// further clients are ignored.
pub const MAX_CLIENTS: usize = 32;

/// A datagram and the client it belongs to.
type Datagram = (SocketAddr, Vec<u8>);

/// The two directions and the clients' back sockets.
struct State {
    /// Clients to target.
    up: Link<Datagram>,
    /// Target to clients.
    down: Link<Datagram>,
    /// Each client's back socket (the target sees it as that client).
    backs: HashMap<SocketAddr, Arc<UdpSocket>>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled whenever a datagram is queued or stop is set.
    changed: Condvar,
    stop: AtomicBool,
    /// The back sockets' receive threads, joined at drop.
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The address back sockets bind on.
    back_ip: std::net::IpAddr,
    target: SocketAddr,
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

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(format!("swactor-wan-{name}")).spawn(f)
}

impl Forwarder {
    /// Listens on `listen` (port 0 picks one) and forwards to `target` from a socket per
    /// client on `listen`'s address, each direction through a link behaving as `spec`,
    /// with draws seeded from `seed` (the up link) and `seed + 1` (the down link).
    pub fn start(
        listen: SocketAddr,
        target: SocketAddr,
        spec: LinkSpec,
        seed: u64,
    ) -> io::Result<Forwarder> {
        let front = UdpSocket::bind(listen)?;
        front.set_read_timeout(Some(POLL))?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                up: Link::new(spec, seed),
                down: Link::new(spec, seed.wrapping_add(1)),
                backs: HashMap::new(),
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            threads: Mutex::new(Vec::new()),
            back_ip: listen.ip(),
            target,
        });
        let mut fwd = Forwarder { front: front.local_addr()?, shared, threads: Vec::new() };
        let front = Arc::new(front);
        // A thread the system refuses drops `fwd`, which stops and joins those started.
        let (sh, sock) = (fwd.shared.clone(), front.clone());
        fwd.threads.push(spawn("front", move || receive_front(&sh, &sock))?);
        let sh = fwd.shared.clone();
        fwd.threads.push(spawn("send", move || send(&sh, &front))?);
        Ok(fwd)
    }

    /// The address clients send to.
    pub fn local_addr(&self) -> SocketAddr {
        self.front
    }

    /// The counts of the up (clients to target) and down links.
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
        // The front thread starts no back thread once it has stopped.
        let backs =
            std::mem::take(&mut *self.shared.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in backs {
            let _ = t.join();
        }
    }
}

/// Reads the clients' datagrams from the front socket into the up link, giving each new
/// client a back socket (and a thread reading the target's replies to it).
fn receive_front(shared: &Arc<Shared>, sock: &UdpSocket) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.stop.load(Ordering::SeqCst) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            // Timeouts (to look at the stop flag) and ICMP errors of earlier sends.
            Err(_) => continue,
        };
        let now = crate::clock::monotonic_us();
        let mut s = shared.lock();
        if !s.backs.contains_key(&from) {
            if s.backs.len() >= MAX_CLIENTS {
                continue;
            }
            let Ok(back) = open_back(shared, from) else { continue };
            s.backs.insert(from, back);
        }
        s.up.push(now, n, (from, buf[..n].to_vec()));
        shared.changed.notify_all();
    }
}

/// A back socket for `client`, with a thread moving the target's replies to it into the
/// down link.
fn open_back(shared: &Arc<Shared>, client: SocketAddr) -> io::Result<Arc<UdpSocket>> {
    let back = Arc::new(UdpSocket::bind(SocketAddr::new(shared.back_ip, 0))?);
    back.set_read_timeout(Some(POLL))?;
    let (sh, sock) = (shared.clone(), back.clone());
    let t = spawn("back", move || receive_back(&sh, &sock, client))?;
    shared.threads.lock().unwrap_or_else(|e| e.into_inner()).push(t);
    Ok(back)
}

/// Reads the target's datagrams to `client`'s back socket into the down link (only those
/// from the target).
fn receive_back(shared: &Shared, sock: &UdpSocket, client: SocketAddr) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    while !shared.stop.load(Ordering::SeqCst) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(_) => continue,
        };
        if from != shared.target {
            continue;
        }
        let now = crate::clock::monotonic_us();
        shared.lock().down.push(now, n, (client, buf[..n].to_vec()));
        shared.changed.notify_all();
    }
}

/// Sends each datagram when its link says it is due: up ones to the target from their
/// client's back socket, down ones to their client from the front socket.
fn send(shared: &Shared, front: &UdpSocket) {
    let mut s = shared.lock();
    while !shared.stop.load(Ordering::SeqCst) {
        let now = crate::clock::monotonic_us();
        let mut sent = false;
        while let Some((client, d)) = s.up.pop_due(now) {
            if let Some(back) = s.backs.get(&client) {
                let _ = back.send_to(&d, shared.target);
            }
            sent = true;
        }
        while let Some((client, d)) = s.down.pop_due(now) {
            let _ = front.send_to(&d, client);
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
