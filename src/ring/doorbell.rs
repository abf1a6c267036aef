//! Doorbells: the wake-ups between a node and its worker that bypass the command pipe.
//!
//! A doorbell is an eventfd. The node creates one pair per worker driver and the worker
//! inherits both (their numbers in [`DOORBELLS_ENV`]): the node rings `to_worker` after it
//! commits bytes into an ingress ring or frees space in an egress ring, and the worker
//! rings `to_node` after it commits into an egress ring or frees space in an ingress ring.
//! Which ring needs attention is not in the doorbell: it is the durable pending bit in each
//! ring's header (see [`super`]), set before the doorbell rings and cleared by the woken side
//! before it reloads the cursors, so a ring is never missed and a side that is already
//! awake is not rung again for every commit. The command pipe carries control only.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use rustix::event::{EventfdFlags, eventfd};

/// Environment variable naming the inherited doorbells: `"<to_worker>,<to_node>"`.
pub const DOORBELLS_ENV: &str = "SWACTOR_DOORBELL_FDS";

/// One eventfd, inheritable by a child process (no close-on-exec).
#[derive(Debug)]
pub struct Doorbell {
    fd: OwnedFd,
}

impl Doorbell {
    /// A new doorbell; `nonblocking` for the side that waits on it through a reactor.
    pub fn new(nonblocking: bool) -> std::io::Result<Doorbell> {
        let flags = if nonblocking { EventfdFlags::NONBLOCK } else { EventfdFlags::empty() };
        Ok(Doorbell { fd: eventfd(0, flags)? })
    }

    /// Takes ownership of an inherited descriptor after checking that it is open.
    fn inherited(fd: RawFd) -> std::io::Result<Doorbell> {
        // SAFETY: the borrow lives only for this call; `fcntl(F_GETFD)` on a closed
        // descriptor fails with EBADF rather than touching memory.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::fcntl_getfd(borrowed)?;
        // SAFETY: `fd` is open (checked above) and was inherited for this process's
        // exclusive use as a doorbell; nothing else in this process owns or closes it.
        Ok(Doorbell { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Rings: adds one to the counter and wakes a waiter. Never blocks (the counter cannot
    /// come near its limit: every wait resets it).
    pub fn ring(&self) {
        let _ = rustix::io::write(&self.fd, &1u64.to_ne_bytes());
    }

    /// Waits until rung, then resets the counter; returns how often it was rung. On a
    /// non-blocking doorbell, returns 0 at once when it was not rung.
    pub fn wait(&self) -> std::io::Result<u64> {
        let mut buf = [0u8; 8];
        match rustix::io::read(&self.fd, &mut buf) {
            Ok(8) => Ok(u64::from_ne_bytes(buf)),
            Ok(_) => Err(std::io::Error::other("short eventfd read")),
            Err(rustix::io::Errno::AGAIN) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The descriptor's number (to hand to a child).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Doorbell {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for Doorbell {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A worker's two doorbells.
#[derive(Debug)]
pub struct Doorbells {
    /// Rung by the node, waited on by the worker (blocking).
    pub to_worker: Doorbell,
    /// Rung by the worker, waited on by the node's reactor (non-blocking).
    pub to_node: Doorbell,
}

impl Doorbells {
    /// A fresh pair (node side).
    pub fn create() -> std::io::Result<Doorbells> {
        Ok(Doorbells { to_worker: Doorbell::new(false)?, to_node: Doorbell::new(true)? })
    }

    /// The value of [`DOORBELLS_ENV`] for the child.
    pub fn env_value(&self) -> String {
        format!("{},{}", self.to_worker.raw_fd(), self.to_node.raw_fd())
    }

    /// The inherited pair named by [`DOORBELLS_ENV`] (worker side): `None` when the
    /// variable is absent (the worker then uses the command pipe for wake hints).
    pub fn from_env() -> Option<std::io::Result<Doorbells>> {
        let value = std::env::var(DOORBELLS_ENV).ok()?;
        Some(Doorbells::parse(&value))
    }

    fn parse(value: &str) -> std::io::Result<Doorbells> {
        let bad = || std::io::Error::other(format!("{DOORBELLS_ENV}={value:?} is malformed"));
        let (a, b) = value.split_once(',').ok_or_else(bad)?;
        let a: RawFd = a.trim().parse().map_err(|_| bad())?;
        let b: RawFd = b.trim().parse().map_err(|_| bad())?;
        if a < 0 || b < 0 || a == b {
            return Err(bad());
        }
        Ok(Doorbells { to_worker: Doorbell::inherited(a)?, to_node: Doorbell::inherited(b)? })
    }
}

/// The node's reactor registration of a worker's `to_node` doorbell.
pub struct AsyncDoorbell {
    fd: tokio::io::unix::AsyncFd<ToNode>,
}

/// `to_node` of a shared pair: the `Arc` keeps the descriptor open.
struct ToNode(std::sync::Arc<Doorbells>);

impl AsRawFd for ToNode {
    fn as_raw_fd(&self) -> RawFd {
        self.0.to_node.raw_fd()
    }
}

impl AsyncDoorbell {
    /// Registers `bells.to_node` with the current tokio reactor.
    pub fn register(bells: std::sync::Arc<Doorbells>) -> std::io::Result<AsyncDoorbell> {
        let inner = ToNode(bells);
        // SAFETY: `ToNode` owns an `Arc` of the doorbells, so the descriptor stays open and
        // names the same eventfd for the registration's whole lifetime, and `as_raw_fd`
        // always returns that one descriptor.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(inner, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        Ok(AsyncDoorbell { fd })
    }

    /// Waits until the worker rings, then resets the counter; returns how often it rang.
    pub async fn rung(&self) -> std::io::Result<u64> {
        loop {
            let mut guard = self.fd.readable().await?;
            let rung = self.fd.get_ref().0.to_node.wait();
            // Clears only if nothing rang since the reactor reported it readable.
            guard.clear_ready();
            match rung? {
                0 => continue,
                n => return Ok(n),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rung_doorbell_counts_its_rings_and_resets_when_waited_on() {
        let bell = Doorbell::new(true).expect("eventfd");
        assert_eq!(bell.wait().expect("read"), 0);
        bell.ring();
        bell.ring();
        assert_eq!(bell.wait().expect("read"), 2);
        assert_eq!(bell.wait().expect("read"), 0);
    }

    #[test]
    fn a_blocking_doorbell_wakes_a_waiting_thread() {
        let bell = std::sync::Arc::new(Doorbell::new(false).expect("eventfd"));
        let waiter = std::sync::Arc::clone(&bell);
        let t = std::thread::spawn(move || waiter.wait().expect("read"));
        bell.ring();
        assert!(t.join().expect("join") >= 1);
    }

    #[test]
    fn malformed_doorbell_variables_are_refused() {
        for v in ["", "3", "a,b", "-1,4", "5,5", "99999,99998"] {
            assert!(Doorbells::parse(v).is_err(), "{v:?}");
        }
    }
}
