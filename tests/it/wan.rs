//! A pipeline over wide-area links: every node behind the user-space WAN forwarder
//! (`swactor::wan`, a delay, jitter and loss queue each way: this kernel has no `netem`),
//! its pool file entry naming the forwarder, so every QUIC connection to it (the
//! orchestrator's control session and token-in edge, the previous stage's activations)
//! crosses the link. Each run must give exactly the tokens of the one-process run.

use std::process::Command;

use swactor::wan::{Forwarder, LinkSpec};

use crate::relay::{boot_nodes, token_ids};
use crate::support::{scratch, synth_model};

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// Boots two nodes behind links of `rtt_ms` round trip (2 ms jitter) losing `loss` of the
/// datagrams each way, runs 8 tokens through them, and returns the run's token ids and
/// the datagrams each link delivered and dropped (both directions).
fn run_behind_links(tag: &str, rtt_ms: u64, loss: f64) -> (Vec<u64>, Vec<(u64, u64)>) {
    let dir = scratch().join(format!("wan-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("orch.key");
    let booted = boot_nodes(&dir, &key, 2, &[]);
    let _reap = crate::multihost::Reap(booted.children);
    let spec = LinkSpec::symmetric(rtt_ms * 1000, 2000, loss).expect("spec");
    let mut pool = String::from("[orchestrator]\nnode_id = 100\n\n");
    let mut links = Vec::new();
    for (i, v) in booted.available.iter().enumerate() {
        let target = v["addrs"][0].as_str().expect("addr").parse().expect("socket addr");
        let seed = 17 + 2 * i as u64;
        let link = Forwarder::start("127.0.0.1:0".parse().expect("addr"), target, spec, seed)
            .expect("forwarder");
        pool.push_str(&format!(
            "[[nodes]]\nnode_id = {}\nendpoint_id = \"{}\"\naddrs = [\"{}\"]\nmemory_bytes = 8589934592\n\n",
            i + 1,
            v["endpoint_id"].as_str().expect("id"),
            link.local_addr(),
        ));
        links.push(link);
    }
    let pool_file = dir.join("pool.toml");
    std::fs::write(&pool_file, pool).expect("pool file");
    let out = Command::new(exe())
        .args(["orchestrate", "pool", "--json", "--listen", "127.0.0.1:0"])
        .args(["--swim", "127.0.0.1:0", "--window-ms", "300", "--pool-timeout", "60"])
        .arg("--pool")
        .arg(&pool_file)
        .arg("--key")
        .arg(&key)
        .args(["--prompt", "The river", "--max-tokens", "8", "--model"])
        .arg(synth_model(4))
        .output()
        .expect("orchestrate");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let counts = links
        .iter()
        .map(|l| {
            let (up, down) = l.stats();
            (up.delivered + down.delivered, up.dropped + down.dropped)
        })
        .collect();
    (token_ids(&out.stdout), counts)
}

#[test]
fn pipelines_behind_20_and_80_ms_links_losing_1_percent_give_the_tokens_of_the_one_process_run() {
    let reference = Command::new(exe())
        .args(["generate", "--json", "--prompt", "The river", "--max-tokens", "8", "--model"])
        .arg(synth_model(4))
        .output()
        .expect("generate");
    let reference = token_ids(&reference.stdout);
    assert_eq!(reference.len(), 8);
    for (tag, rtt_ms) in [("20ms", 20), ("80ms", 80)] {
        let (tokens, counts) = run_behind_links(tag, rtt_ms, 0.01);
        assert_eq!(tokens, reference, "{tag}: the tokens of the one-process run");
        for (i, (delivered, _dropped)) in counts.iter().enumerate() {
            // Every connection to the node crossed its link: the control session, and
            // the token-in edge (node 1) or the activations (node 2), a datagram at least
            // for each of the 8 tokens.
            assert!(*delivered >= 8, "{tag}: node {} link carried {delivered}", i + 1);
        }
    }
}
