use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use super::*;

/// A UDP echo server on loopback until dropped, counting what it received.
struct Echo {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    seen: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Echo {
    fn start() -> Echo {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = sock.local_addr().unwrap();
        let (stop, seen) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let (st, se) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !st.load(Ordering::SeqCst) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    se.fetch_add(1, Ordering::SeqCst);
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        Echo { addr, stop, seen, thread: Some(thread) }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn client() -> UdpSocket {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Only a bound on a broken run: every datagram here is answered.
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

#[test]
fn every_round_trip_through_the_forwarder_takes_at_least_its_rtt_and_arrives_in_order() {
    let echo = Echo::start();
    let spec = LinkSpec::symmetric(40_000, 0, 0.0).unwrap();
    let fwd = Forwarder::start("127.0.0.1:0".parse().unwrap(), echo.addr, spec, 1).unwrap();
    let c = client();
    let mut buf = [0u8; 64];
    for i in 0..5u8 {
        let t = crate::clock::monotonic_us();
        c.send_to(&[i; 3], fwd.local_addr()).unwrap();
        let (n, from) = c.recv_from(&mut buf).expect("the echo comes back");
        let rtt = crate::clock::monotonic_us() - t;
        assert!(rtt >= 40_000, "round trip {rtt} us");
        assert_eq!((&buf[..n], from), (&[i; 3][..], fwd.local_addr()));
    }
    let (up, down) = fwd.stats();
    assert_eq!((up.delivered, down.delivered, up.dropped), (5, 5, 0));
}

#[test]
fn a_link_that_loses_everything_forwards_nothing_and_counts_each_drop() {
    let echo = Echo::start();
    let spec = LinkSpec { delay_us: 0, jitter_us: 0, loss: 1.0, rate_bytes_per_s: None };
    let fwd = Forwarder::start("127.0.0.1:0".parse().unwrap(), echo.addr, spec, 1).unwrap();
    let c = client();
    for i in 0..3u8 {
        c.send_to(&[i], fwd.local_addr()).unwrap();
    }
    assert!(fwd.wait_for(Duration::from_secs(10), |up, _| up.arrived == 3));
    let (up, down) = fwd.stats();
    assert_eq!((up.dropped, up.delivered, down.arrived), (3, 0, 0));
    assert_eq!(echo.seen.load(Ordering::SeqCst), 0);
}

#[test]
fn two_clients_through_one_forwarder_each_get_their_own_replies() {
    let echo = Echo::start();
    let spec = LinkSpec::symmetric(2_000, 0, 0.0).unwrap();
    let fwd = Forwarder::start("127.0.0.1:0".parse().unwrap(), echo.addr, spec, 1).unwrap();
    let (a, b) = (client(), client());
    let mut buf = [0u8; 8];
    for i in 0..3u8 {
        a.send_to(&[1, i], fwd.local_addr()).unwrap();
        b.send_to(&[2, i], fwd.local_addr()).unwrap();
        let (n, from) = a.recv_from(&mut buf).expect("a's echo");
        assert_eq!((&buf[..n], from), (&[1, i][..], fwd.local_addr()));
        let (n, from) = b.recv_from(&mut buf).expect("b's echo");
        assert_eq!((&buf[..n], from), (&[2, i][..], fwd.local_addr()));
    }
    let (up, down) = fwd.stats();
    assert_eq!((up.delivered, down.delivered), (6, 6));
}
