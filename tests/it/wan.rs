//! Pipelines over wide-area links: every host in its own network namespace behind a link of
//! a given round trip and loss (`swactor util wan-link`, this kernel has no `netem`), its
//! direct paths to the other hosts cut as a NAT would (`swactor::wan::netns`), so that every
//! hop into a host crosses its link; or relay-only, through a relay that restarts in the
//! middle of the run. Each run must give exactly the tokens of the one-process run.

use std::process::Command;

use swactor::bench::wan::{Link, WanRun, WanSetup, run_in_namespaces};

use crate::relay::token_ids;
use crate::support::{scratch, synth_model};

fn exe() -> std::path::PathBuf {
    assert_cmd::cargo::cargo_bin("swactor")
}

/// The tokens `generate` gives for `prompt` and `tokens` on the 4-block synthesized model.
fn reference(prompt: &str, tokens: u32) -> Vec<u64> {
    let out = Command::new(exe())
        .args(["generate", "--json", "--prompt", prompt, "--max-tokens", &tokens.to_string()])
        .arg("--model")
        .arg(synth_model(4))
        .output()
        .expect("generate");
    token_ids(&out.stdout)
}

/// Runs `link` over `stages` hosts in namespaces `tag` (`None`: namespaces cannot be made
/// here, which CI does not accept).
fn run(
    tag: &str,
    subnet: u8,
    link: Link,
    (loss, rate_mbit): (f64, Option<f64>),
    tokens: u32,
    restart_relay: bool,
) -> Option<WanRun> {
    let dir = scratch().join(format!("wan-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let setup = WanSetup {
        exe: exe(),
        model: synth_model(4),
        stages: 2,
        tokens,
        prompt: "The river".into(),
        link,
        loss,
        rate_mbit,
        speculate: false,
        restart_relay,
        scalar_hosts: Vec::new(),
        balance_memory: false,
    };
    let tag = format!("sw{}{tag}", std::process::id() % 10_000);
    match run_in_namespaces(&setup, &tag, subnet, &dir) {
        Ok(run) => Some(run),
        Err(e) if e.to_string().contains("ip netns add") => {
            assert!(std::env::var_os("CI").is_none(), "CI must be able to make namespaces: {e}");
            eprintln!("note: WAN suite skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn pipelines_behind_20_and_80_ms_links_losing_1_percent_give_the_tokens_of_the_one_process_run() {
    let reference = reference("The river", 8);
    assert_eq!(reference.len(), 8);
    let mut rates = Vec::new();
    for (tag, rtt_ms, subnet) in [("a", 20, 241), ("b", 80, 242)] {
        let link = Link::Rtt { ms: rtt_ms };
        let Some(run) = run(tag, subnet, link, (0.01, None), 8, false) else { return };
        assert_eq!(run.code, Some(0), "{rtt_ms} ms: {:?}", run.summary());
        assert_eq!(run.token_ids(), reference, "{rtt_ms} ms: the tokens of the one-process run");
        for (i, (delivered, _)) in run.links.iter().enumerate() {
            // Every connection into the host crossed its link (no direct path): the control
            // session, and the token-in edge (host 1) or the activations (host 2), a
            // datagram at least for each of the 8 tokens.
            assert!(*delivered >= 8, "{rtt_ms} ms: host {} link carried {delivered}", i + 1);
        }
        let summary = run.summary().expect("summary");
        let predicted = summary["predicted"]["decode_tokens_per_s"].as_f64().expect("predicted");
        rates.push(predicted);
    }
    // The plan saw the links: four times the round trip, a slower prediction.
    assert!(rates[1] < rates[0] * 0.6, "predicted {rates:?}");
}

#[test]
fn nodes_measure_the_bandwidth_of_16_mbit_links_before_the_plan() {
    let reference = reference("The river", 8);
    let link = Link::Rtt { ms: 20 };
    let Some(run) = run("d", 244, link, (0.0, Some(16.0)), 8, false) else { return };
    assert_eq!(run.code, Some(0), "{:?}", run.summary());
    assert_eq!(run.token_ids(), reference, "the tokens of the one-process run");
    // Each node's probe of the other crossed one link of 2 MB/s each way.
    for (node, to) in [(1, 2), (2, 1)] {
        let rate = run.link_rate(node, to).expect("the node measured the link's bandwidth");
        let mbs = rate as f64 / 1e6;
        assert!((1.2..=3.2).contains(&mbs), "node {node} to {to}: {mbs:.2} MB/s");
    }
}

#[test]
fn a_relay_only_pipeline_gives_the_one_process_tokens_when_its_relay_restarts_mid_run() {
    let reference = reference("The river", 48);
    let Some(run) = run("c", 243, Link::Relay, (0.0, None), 48, true) else { return };
    assert_eq!(run.code, Some(0), "{:?}", run.summary());
    assert_eq!(run.token_ids(), reference, "the tokens of the one-process run");
}
