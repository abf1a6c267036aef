//! SWIM membership over real UDP on loopback.

use std::collections::BTreeSet;
use std::time::Duration;

use swactor::membership::swim::{MembershipEvent, SwimIdentity, spawn};
use swactor::wire::NodeId;
use tokio::net::UdpSocket;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_form_a_pool_and_a_killed_one_is_seen_down_by_the_others() {
    let mut sockets = Vec::new();
    for _ in 0..3 {
        sockets.push(UdpSocket::bind("127.0.0.1:0").await.expect("bind"));
    }
    let addrs: Vec<_> = sockets.iter().map(|s| s.local_addr().expect("addr")).collect();
    let mut members = Vec::new();
    for (i, socket) in sockets.into_iter().enumerate() {
        let id = SwimIdentity {
            node_id: NodeId(i as u64 + 1),
            addr: addrs[i],
            endpoint_id: format!("{:064x}", i + 1),
            bump: 0,
        };
        members.push(spawn(id, socket, addrs.clone(), 3, i as u64));
    }
    // Everyone sees the two others up.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut views: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); 3];
    while views.iter().any(|v| v.len() < 2) {
        assert!(tokio::time::Instant::now() < deadline, "pool did not form: {views:?}");
        for (i, (_, rx)) in members.iter_mut().enumerate() {
            while let Ok(ev) = rx.try_recv() {
                match ev {
                    MembershipEvent::Up(id) => views[i].insert(id.node_id.0),
                    MembershipEvent::Down(id) => views[i].remove(&id.node_id.0),
                };
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(views[0], BTreeSet::from([2, 3]));

    // Kill member 3 (no leave message: like a crash).
    let killed = members.pop().expect("member");
    drop(killed);
    let t0 = tokio::time::Instant::now();
    let mut seen_down = [false, false];
    while !(seen_down[0] && seen_down[1]) {
        assert!(t0.elapsed() < Duration::from_secs(10), "member 3 was never declared down");
        for (i, (_, rx)) in members.iter_mut().enumerate() {
            while let Ok(ev) = rx.try_recv() {
                if let MembershipEvent::Down(id) = ev
                    && id.node_id == NodeId(3)
                {
                    seen_down[i] = true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("failure detected in {:?}", t0.elapsed());
    assert!(t0.elapsed() < Duration::from_secs(5), "detection took {:?}", t0.elapsed());
}
