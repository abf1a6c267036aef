use proptest::prelude::*;

use super::*;

/// Every datagram pushed at `times` (non-decreasing), drained as time runs: (id, left at).
fn run(spec: LinkSpec, seed: u64, times: &[u64]) -> (Vec<(usize, u64)>, Link<usize>) {
    let mut link = Link::new(spec, seed);
    let mut out = Vec::new();
    for (id, &t) in times.iter().enumerate() {
        while let Some(due) = link.next_due().filter(|&d| d <= t) {
            out.push((link.pop_due(due).expect("due"), due));
        }
        link.push(t, 100, id);
    }
    while let Some(due) = link.next_due() {
        out.push((link.pop_due(due).expect("due"), due));
    }
    (out, link)
}

#[test]
fn a_lossless_link_without_jitter_delivers_every_datagram_after_exactly_its_delay() {
    let spec = LinkSpec::symmetric(20_000, 0, 0.0).unwrap();
    let (out, link) = run(spec, 1, &[0, 5, 5, 300, 40_000]);
    assert_eq!(out, [(0, 10_000), (1, 10_005), (2, 10_005), (3, 10_300), (4, 50_000)]);
    assert_eq!(link.stats(), LinkStats { arrived: 5, dropped: 0, delivered: 5 });
}

#[test]
fn nothing_leaves_before_its_time() {
    let mut link =
        Link::new(LinkSpec { delay_us: 100, jitter_us: 0, loss: 0.0, rate_bytes_per_s: None }, 0);
    assert_eq!(link.push(1_000, 1, "a"), Admit::Queued { due_us: 1_100 });
    assert_eq!(link.pop_due(1_099), None);
    assert_eq!(link.pop_due(1_100), Some("a"));
    assert_eq!(link.next_due(), None);
}

#[test]
fn a_link_that_loses_everything_delivers_nothing_and_counts_every_drop() {
    let spec = LinkSpec { delay_us: 10, jitter_us: 0, loss: 1.0, rate_bytes_per_s: None };
    let (out, link) = run(spec, 7, &[0, 1, 2, 3]);
    assert!(out.is_empty());
    assert_eq!(link.stats(), LinkStats { arrived: 4, dropped: 4, delivered: 0 });
}

#[test]
fn the_same_seed_drops_the_same_datagrams_and_another_seed_others() {
    let spec = LinkSpec { delay_us: 10, jitter_us: 5, loss: 0.3, rate_bytes_per_s: None };
    let times: Vec<u64> = (0..400).collect();
    let a = run(spec, 42, &times).0;
    assert_eq!(a, run(spec, 42, &times).0);
    assert_ne!(a, run(spec, 43, &times).0);
}

#[test]
fn specs_out_of_range_are_refused_with_their_reason() {
    assert_eq!(LinkSpec::symmetric(20, 0, 1.5), Err(LinkSpecError::Loss(1.5)));
    assert!(matches!(LinkSpec::symmetric(20, 0, f64::NAN), Err(LinkSpecError::Loss(_))));
    assert_eq!(
        LinkSpec::symmetric(20_000, 10_001, 0.0),
        Err(LinkSpecError::Jitter { delay_us: 10_000, jitter_us: 10_001 })
    );
}

proptest! {
    #[test]
    fn datagrams_leave_in_arrival_order_within_their_latency_bounds(
        delay in 0u64..50_000,
        jitter_share in 0u64..=100,
        loss in 0.0f64..0.5,
        seed in any::<u64>(),
        gaps in proptest::collection::vec(0u64..5_000, 1..200),
    ) {
        let jitter = delay * jitter_share / 100;
        let spec = LinkSpec { delay_us: delay, jitter_us: jitter, loss, rate_bytes_per_s: None };
        let mut t = 0;
        let times: Vec<u64> = gaps.iter().map(|g| { t += g; t }).collect();
        let (out, link) = run(spec, seed, &times);
        let stats = link.stats();
        prop_assert_eq!(stats.arrived, times.len() as u64);
        prop_assert_eq!(stats.delivered + stats.dropped, stats.arrived);
        prop_assert_eq!(out.len() as u64, stats.delivered);
        for w in out.windows(2) {
            prop_assert!(w[0].0 < w[1].0 && w[0].1 <= w[1].1, "order: {:?}", w);
        }
        for &(id, left) in &out {
            // Never earlier than the shortest latency; later than the longest only to
            // wait behind an earlier datagram.
            prop_assert!(left >= times[id] + delay - jitter);
            let behind = out.iter().filter(|o| o.0 < id).map(|o| o.1).max().unwrap_or(0);
            prop_assert!(left <= (times[id] + delay + jitter).max(behind));
        }
    }
}

#[test]
fn a_rate_limited_link_sends_back_to_back_datagrams_one_after_another_at_its_rate() {
    // 1 MB/s: a 1000-byte datagram takes 1 ms to send, then 10 ms to arrive.
    let spec = LinkSpec::symmetric(20_000, 0, 0.0).unwrap().with_rate(Some(1_000_000)).unwrap();
    let mut link = Link::new(spec, 0);
    assert_eq!(link.push(0, 1000, 0), Admit::Queued { due_us: 11_000 });
    assert_eq!(link.push(0, 1000, 1), Admit::Queued { due_us: 12_000 });
    // After an idle gap, the next one goes at once.
    assert_eq!(link.push(50_000, 500, 2), Admit::Queued { due_us: 60_500 });
}

#[test]
fn a_rate_limited_link_drops_what_arrives_once_its_queue_holds_more_than_queue_us() {
    let spec = LinkSpec::symmetric(0, 0, 0.0).unwrap().with_rate(Some(1_000_000)).unwrap();
    let mut link = Link::new(spec, 0);
    // 1000 bytes a millisecond: the 102nd datagram at time 0 would wait over 100 ms.
    let admitted = (0..200).filter(|&i| link.push(0, 1000, i) != Admit::Dropped).count();
    assert_eq!(admitted, 101);
    assert_eq!(link.stats().dropped, 99);
}

#[test]
fn a_rate_of_zero_is_refused() {
    let spec = LinkSpec::symmetric(0, 0, 0.0).unwrap();
    assert_eq!(spec.with_rate(Some(0)), Err(LinkSpecError::Rate));
}
