//! SWIM membership over real UDP on loopback.

use std::collections::BTreeSet;
use std::time::Duration;

use iroh::SecretKey;
use swactor::membership::auth::{Reject, Roster};
use swactor::membership::swim::{MembershipEvent, RosterHandle, SwimConfig, SwimIdentity, spawn};
use swactor::wire::NodeId;
use tokio::net::UdpSocket;
use tokio::sync::mpsc::UnboundedReceiver;

fn key(i: usize) -> SecretKey {
    SecretKey::from_bytes(&[i as u8 + 1; 32])
}

fn hex(k: &SecretKey) -> String {
    swactor::membership::auth::key_hex(k.public().as_bytes())
}

/// The roster of members 1..=n (keys `key(0..n)`).
fn roster(n: usize) -> Roster {
    let ids: Vec<String> = (0..n).map(|i| hex(&key(i))).collect();
    Roster::from_pairs(ids.iter().enumerate().map(|(i, e)| (NodeId(i as u64 + 1), e.as_str())))
}

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
            addr: addrs[i].into(),
            endpoint_id: hex(&key(i)),
            bump: 0,
        };
        let config = SwimConfig {
            identity: id,
            key: key(i),
            roster: RosterHandle::new(roster(3)),
            seeds: addrs.iter().map(|&a| a.into()).collect(),
            cluster_size: 3,
            max_rtt: Duration::ZERO,
            seed_rng: i as u64,
        };
        members.push(spawn(config, socket, None).expect("spawn"));
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
                    MembershipEvent::Suspect(_) => false,
                    MembershipEvent::Rejected(r) => {
                        panic!("a member's datagram was refused: {r:?}")
                    }
                };
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(views[0], BTreeSet::from([2, 3]));

    // Kill member 3 (no leave message: like a crash).
    let killed = members.pop().expect("member");
    drop(killed);
    let took = wait_down(&mut members, NodeId(3), Duration::from_secs(10)).await;
    eprintln!("failure detected in {took:?}");
    assert!(took < Duration::from_secs(5), "detection took {took:?}");
}

/// A running member and its events.
type Member = (swactor::membership::swim::Swim, UnboundedReceiver<MembershipEvent>);

/// Waits until every member of `members` reports `node` down (failing after `within`);
/// how long that took.
async fn wait_down(members: &mut [Member], node: NodeId, within: Duration) -> Duration {
    let t0 = tokio::time::Instant::now();
    let mut seen = vec![false; members.len()];
    while !seen.iter().all(|s| *s) {
        assert!(t0.elapsed() < within, "member {node} was never declared down");
        for (i, (_, rx)) in members.iter_mut().enumerate() {
            while let Ok(ev) = rx.try_recv() {
                if let MembershipEvent::Down(id) = ev
                    && id.node_id == node
                {
                    seen[i] = true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    t0.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_off_the_roster_is_refused_and_never_becomes_a_member() {
    let sockets = [
        UdpSocket::bind("127.0.0.1:0").await.expect("bind"),
        UdpSocket::bind("127.0.0.1:0").await.expect("bind"),
    ];
    let addrs: Vec<_> = sockets.iter().map(|s| s.local_addr().expect("addr")).collect();
    let [a, b] = sockets;
    // Member 1 knows only itself and member 2; the outsider signs with key 5 and claims
    // node 2's id (with its own endpoint id: it cannot sign for node 2's key).
    let roster_a = RosterHandle::new(roster(2));
    let (_m1, mut rx1) = spawn(
        SwimConfig {
            identity: SwimIdentity {
                node_id: NodeId(1),
                addr: addrs[0].into(),
                endpoint_id: hex(&key(0)),
                bump: 0,
            },
            key: key(0),
            roster: roster_a.clone(),
            seeds: vec![],
            cluster_size: 2,
            max_rtt: Duration::ZERO,
            seed_rng: 1,
        },
        a,
        None,
    )
    .expect("spawn");
    let (_outsider, _rx) = spawn(
        SwimConfig {
            identity: SwimIdentity {
                node_id: NodeId(2),
                addr: addrs[1].into(),
                endpoint_id: hex(&key(5)),
                bump: 0,
            },
            key: key(5),
            roster: RosterHandle::new(Roster::from_pairs([
                (NodeId(1), hex(&key(0)).as_str()),
                (NodeId(2), hex(&key(5)).as_str()),
            ])),
            seeds: vec![addrs[0].into()],
            cluster_size: 2,
            max_rtt: Duration::ZERO,
            seed_rng: 2,
        },
        b,
        None,
    )
    .expect("spawn");
    // The first thing member 1 reports is the refusal, never the outsider going up.
    match tokio::time::timeout(Duration::from_secs(10), rx1.recv()).await.expect("no refusal") {
        Some(MembershipEvent::Rejected(r)) => {
            assert_eq!(r.reason, Reject::UnknownSigner);
            assert_eq!(r.signer, Some(hex(&key(5))));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(roster_a.rejects().by_reason[&Reject::UnknownSigner] >= 1);
}

/// Three members, each reached only through a forwarder that delays what it is sent by half
/// of `rtt` (so every probe and its answer take `rtt`), their SWIM tuned for `max_rtt`; the
/// members and the events each reports.
async fn behind_links(
    rtt: Duration,
    max_rtt: Duration,
    seed: u64,
) -> (
    Vec<(swactor::membership::swim::Swim, tokio::sync::mpsc::UnboundedReceiver<MembershipEvent>)>,
    Vec<swactor::wan::Forwarder>,
) {
    let spec = swactor::wan::LinkSpec::symmetric(rtt.as_micros() as u64, 0, 0.0).expect("spec");
    let mut sockets = Vec::new();
    let mut links = Vec::new();
    for i in 0..3 {
        let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let at = socket.local_addr().expect("addr");
        let listen = "127.0.0.1:0".parse().expect("addr");
        links.push(swactor::wan::Forwarder::start(listen, at, spec, seed + i).expect("link"));
        sockets.push(socket);
    }
    // Every member is known (and answers) at its link's address.
    let fronts: Vec<_> = links.iter().map(|l| l.local_addr()).collect();
    let mut members = Vec::new();
    for (i, socket) in sockets.into_iter().enumerate() {
        let config = SwimConfig {
            identity: SwimIdentity {
                node_id: NodeId(i as u64 + 1),
                addr: fronts[i].into(),
                endpoint_id: hex(&key(i)),
                bump: 0,
            },
            key: key(i),
            roster: RosterHandle::new(roster(3)),
            seeds: fronts.iter().map(|&a| a.into()).collect(),
            cluster_size: 3,
            max_rtt,
            seed_rng: seed + i as u64,
        };
        members.push(spawn(config, socket, None).expect("spawn"));
    }
    (members, links)
}

/// Waits up to `within` for every member to see the two others up; whether they did, and
/// whether any member reported a live one suspect or down meanwhile.
async fn watch(
    members: &mut [(
        swactor::membership::swim::Swim,
        tokio::sync::mpsc::UnboundedReceiver<MembershipEvent>,
    )],
    within: Duration,
    until_formed: bool,
) -> (bool, bool) {
    let deadline = tokio::time::Instant::now() + within;
    let mut views: Vec<BTreeSet<u64>> = vec![BTreeSet::new(); members.len()];
    let mut doubted = false;
    while tokio::time::Instant::now() < deadline {
        for (i, (_, rx)) in members.iter_mut().enumerate() {
            while let Ok(ev) = rx.try_recv() {
                match ev {
                    MembershipEvent::Up(id) => {
                        views[i].insert(id.node_id.0);
                    }
                    MembershipEvent::Suspect(_) | MembershipEvent::Down(_) => doubted = true,
                    MembershipEvent::Rejected(r) => panic!("refused: {r:?}"),
                }
            }
        }
        let formed = views.iter().all(|v| v.len() == 2);
        if until_formed && formed || doubted {
            return (formed, doubted);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (views.iter().all(|v| v.len() == 2), doubted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_300_ms_apart_stay_up_when_tuned_for_the_round_trip_and_are_doubted_when_not() {
    let rtt = Duration::from_millis(300);
    // The LAN profile waits 60 ms for an answer that takes 300: live members are doubted.
    let (mut lan, _links) = behind_links(rtt, Duration::ZERO, 10).await;
    let (_, doubted) = watch(&mut lan, Duration::from_secs(10), false).await;
    assert!(doubted, "the LAN profile never doubted a member 300 ms away");
    drop(lan);

    // Tuned for it: the pool forms and nobody is doubted for a while.
    let (mut wan, _links) = behind_links(rtt, rtt, 20).await;
    let (formed, doubted) = watch(&mut wan, Duration::from_secs(20), true).await;
    assert!(formed && !doubted, "formed {formed}, doubted {doubted}");
    let (_, doubted) = watch(&mut wan, Duration::from_secs(5), false).await;
    assert!(!doubted, "a live member 300 ms away was doubted");

    // A member that dies is still declared down.
    drop(wan.pop());
    wait_down(&mut wan, NodeId(3), Duration::from_secs(20)).await;
}
