//! Resuming after a node loss, with real processes on loopback: a stage node SIGKILLed,
//! paused past failure detection or partitioned mid-decode, and every sequence in flight
//! continues on a pipeline re-formed over the nodes left — token for token what an
//! undisturbed run produces, each token once; with no node left to re-form on, the
//! session ends with the typed fault once `--resume-timeout` passes.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::run::{Nodes, Running, SERIAL, events, exe, signal, tokens};
use crate::session::{PROMPTS, reference, requests_file, results, streamed};
use crate::support::{Partition, synth_model};

const LONG: [&str; 4] = ["--max-tokens", "200", "--max-seq-len", "512"];

/// Every re-formation event in order, and the run's outcomes: the session re-formed once
/// over `survivors` and completed.
fn assert_reformed_once(lines: &[Value], cause: &str, survivors: &[u64]) {
    let reforming = events(lines, "session_reforming");
    assert_eq!(reforming.len(), 1, "{reforming:?} {:?}", events(lines, "run_faulted"));
    assert_eq!(reforming[0]["cause"], cause, "{}", reforming[0]);
    let reformed = events(lines, "session_reformed");
    assert_eq!(reformed.len(), 1, "{lines:?}");
    let nodes: Vec<u64> = reformed[0]["plan"]
        .as_array()
        .expect("plan")
        .iter()
        .map(|s| s["node_id"].as_u64().expect("node"))
        .collect();
    assert_eq!(nodes, survivors, "{}", reformed[0]);
    assert!(events(lines, "session_reform_failed").is_empty());
    let kinds: Vec<&str> = lines
        .iter()
        .filter_map(|v| v["type"].as_str())
        .filter(|k| {
            ["run_faulted", "run_completed", "run_torn_down", "session_reforming"].contains(k)
        })
        .collect();
    assert_eq!(
        kinds,
        ["session_reforming", "run_faulted", "run_torn_down", "run_completed", "run_torn_down"],
        "the faulted run tears down, then the re-formed one completes"
    );
}

#[test]
fn a_stage_node_killed_mid_decode_resumes_on_the_survivors_with_the_undisturbed_tokens() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-kill", 3, |_| vec![]);
    let (code, clean, err) = nodes.orchestrate(&model, &LONG).finish();
    assert_eq!(code, 0, "{err}");
    let want = tokens(&clean);
    let mut run = nodes.orchestrate(&model, &LONG);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "resumed, not faulted: {err}");
    assert_eq!(tokens(&lines), want, "every token once, in order, as undisturbed");
    assert_reformed_once(&lines, "membership.node_down", &[1, 3]);
    let resumed = events(&lines, "sequence_resumed");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    assert!(resumed[0]["replayed_tokens"].as_u64().is_some_and(|n| n > 6), "{}", resumed[0]);
    nodes.assert_clean(1);
    nodes.assert_clean(3);
}

#[test]
fn relay_only_nodes_resume_through_the_relay_after_one_is_killed_mid_decode() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let (relay, url) = crate::relay::serve_relay();
    let _relay = crate::multihost::Reap(vec![relay]);
    let only = ["--relay", url.as_str(), "--relay-only"];
    let nodes = Nodes::boot_with("resume-relay", 3, |_| vec![], &only);
    let with_relay: Vec<&str> = LONG.iter().copied().chain(["--relay", url.as_str()]).collect();
    let (code, clean, err) = nodes.orchestrate(&model, &with_relay).finish();
    assert_eq!(code, 0, "{err}");
    let want = tokens(&clean);
    let mut run = nodes.orchestrate(&model, &with_relay);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "resumed through the relay, not faulted: {err}");
    assert_eq!(tokens(&lines), want, "every token once, in order, as undisturbed");
    assert_reformed_once(&lines, "membership.node_down", &[1, 3]);
    nodes.assert_clean(1);
    nodes.assert_clean(3);
}

#[test]
fn a_spare_takes_the_lost_middle_stage_while_the_stages_that_stayed_keep_their_caches() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(6);
    let nodes = Nodes::boot("resume-keep", 4, |_| vec![]);
    let mut args = LONG.to_vec();
    args.extend(["--stages", "3"]);
    let (code, clean, err) = nodes.orchestrate(&model, &args).finish();
    assert_eq!(code, 0, "{err}");
    let want = tokens(&clean);
    let mut run = nodes.orchestrate(&model, &args);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 12);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "resumed, not faulted: {err}");
    assert_eq!(tokens(&lines), want, "the kept caches continue exactly as undisturbed");
    // The spare takes the lost node's place; nodes 1 and 3 keep their stages and caches.
    assert_reformed_once(&lines, "membership.node_down", &[1, 4, 3]);
    let plan = &events(&lines, "session_reformed")[0]["plan"];
    let kept: Vec<bool> = (0..3).map(|i| plan[i]["kept"].as_bool().expect("kept")).collect();
    assert_eq!(kept, [true, false, true], "{plan}");
    let resumed = events(&lines, "sequence_resumed");
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    let (replayed, kept) = (&resumed[0]["replayed_tokens"], &resumed[0]["kept_tokens"]);
    let (replayed, kept) = (replayed.as_u64().expect("replayed"), kept.as_u64().expect("kept"));
    assert!(kept >= 12 && kept < replayed, "{}", resumed[0]);
    // The workers of nodes 1 and 3 took their parked roles over (no weights loaded again);
    // the spare loaded its stage.
    let run_id = &events(&lines, "session_reformed")[0]["run_id"];
    let loaded: BTreeMap<u64, bool> = events(&lines, "weights_loaded")
        .iter()
        .filter(|e| &e["run_id"] == run_id)
        .map(|e| (e["node_id"].as_u64().expect("node"), e["kept_caches"] == true))
        .collect();
    assert_eq!(loaded, BTreeMap::from([(1, true), (3, true), (4, false)]), "{lines:?}");
    for i in [1, 3, 4] {
        nodes.assert_clean(i);
    }
}

#[test]
fn a_seeded_sampled_run_resumed_after_a_kill_draws_exactly_the_undisturbed_tokens() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-sampled", 3, |_| vec![]);
    let mut args = LONG.to_vec();
    args.extend(["--sampling", "sample", "--temperature", "0.9", "--top-k", "40", "--seed", "7"]);
    let (code, clean, err) = nodes.orchestrate(&model, &args).finish();
    assert_eq!(code, 0, "{err}");
    let mut run = nodes.orchestrate(&model, &args);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines), tokens(&clean), "a draw depends on the seed and position only");
    assert_eq!(events(&lines, "sequence_resumed").len(), 1);
}

/// As [`assert_reformed_once`], except that the session may also have grown back onto all
/// three nodes (`pool.capacity_grew`) once the lost node ran again before the run ended.
fn assert_reformed_then_maybe_grown(lines: &[Value], cause: &str, survivors: &[u64]) {
    let causes: Vec<&Value> =
        events(lines, "session_reforming").iter().map(|e| &e["cause"]).collect();
    if causes.len() == 1 {
        return assert_reformed_once(lines, cause, survivors);
    }
    assert_eq!(causes, [cause, "pool.capacity_grew"], "{lines:?}");
    let plans: Vec<usize> = events(lines, "session_reformed")
        .iter()
        .map(|e| e["plan"].as_array().expect("plan").len())
        .collect();
    assert_eq!(plans, [survivors.len(), 3], "{lines:?}");
    assert!(events(lines, "session_reform_failed").is_empty());
}

#[test]
fn a_stage_node_paused_past_detection_is_resumed_around_and_cleans_up_once_it_runs_again() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-pause", 3, |_| vec![]);
    let (code, clean, err) = nodes.orchestrate(&model, &LONG).finish();
    assert_eq!(code, 0, "{err}");
    let mut run = nodes.orchestrate(&model, &LONG);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(3), rustix::process::Signal::STOP);
    run.wait_for("the session re-formed", |v| v["type"] == "session_reformed");
    signal(nodes.pid(3), rustix::process::Signal::CONT);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines), tokens(&clean));
    assert_reformed_then_maybe_grown(&lines, "membership.node_down", &[1, 2]);
    for n in 1..=3 {
        nodes.assert_clean(n);
    }
}

#[test]
fn a_partitioned_stage_node_is_resumed_around_and_the_healed_node_is_clean() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-partition", 3, |_| vec![]);
    let (code, clean, err) = nodes.orchestrate(&model, &LONG).finish();
    assert_eq!(code, 0, "{err}");
    let mut run = nodes.orchestrate(&model, &LONG);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    let Some(cut) = Partition::cut(&nodes.ports[1]) else {
        assert!(std::env::var_os("CI").is_none(), "CI must be able to partition loopback ports");
        eprintln!("note: partition test skipped: iptables needs root");
        return;
    };
    run.wait_for("the session re-formed", |v| v["type"] == "session_reformed");
    drop(cut);
    let (code, lines, err) = run.finish();
    assert_eq!(code, 0, "{err}");
    assert_eq!(tokens(&lines), tokens(&clean));
    // The healed node may gossip its partitioned view (the others down) before it learns
    // better, and the orchestrator's SWIM takes one of them for down: the session then
    // re-forms once more; and once healed, node 2 is ready again and the session may grow
    // back onto it before the run ends. Nothing is lost either way.
    let reforming = events(&lines, "session_reforming");
    assert!((1..=3).contains(&reforming.len()), "{reforming:?}");
    let first = &events(&lines, "session_reformed")[0]["plan"];
    let nodes_of = |plan: &Value| -> Vec<u64> {
        plan.as_array().expect("plan").iter().filter_map(|s| s["node_id"].as_u64()).collect()
    };
    assert_eq!(nodes_of(first), [1, 3], "{first}");
    assert!(events(&lines, "session_reform_failed").is_empty());
    assert_eq!(events(&lines, "run_completed").len(), 1);
    for n in 1..=3 {
        nodes.assert_clean(n);
    }
}

#[test]
fn with_no_node_left_the_session_ends_with_the_typed_fault_once_the_resume_timeout_passes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-timeout", 2, |_| vec![]);
    let mut args = LONG.to_vec();
    args.extend(["--resume-timeout", "2"]);
    let mut run = nodes.orchestrate(&model, &args);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(1), rustix::process::Signal::KILL);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let t = Instant::now();
    let (code, lines, err) = run.finish();
    assert_eq!(code, 7, "{err}");
    assert!(t.elapsed() < Duration::from_secs(30), "bounded by the resume timeout");
    let failed = events(&lines, "session_reform_failed");
    assert_eq!(failed.len(), 1, "{lines:?}");
    assert_eq!(failed[0]["why"], "resume_timeout");
    assert_eq!(failed[0]["cause"], "membership.node_down");
    assert!(err.contains("membership.node_down"), "{err}");
    assert!(events(&lines, "session_reformed").is_empty());
}

#[test]
fn a_run_local_batch_loses_no_request_when_a_stage_node_is_sigkilled_mid_decode() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let max_tokens = 60;
    let lines: Vec<Value> = (0..8)
        .map(|i| json!({"id": format!("k{i}"), "prompt": PROMPTS[i], "max_tokens": max_tokens}))
        .collect();
    let file = requests_file("resume-local-batch", &lines);
    let want: BTreeMap<String, Vec<u64>> =
        (0..8).map(|i| (format!("k{i}"), reference(&model, PROMPTS[i], max_tokens).0)).collect();
    let mut cmd = Command::new(exe());
    cmd.args(["run", "local", "--json", "--stream", "--stages", "3", "--max-sequences", "8"])
        .args(["--max-seq-len", "512", "--requests"])
        .arg(&file)
        .arg("--model")
        .arg(&model);
    let mut batch = Running::spawn(cmd);
    let decoding = std::cell::RefCell::new(BTreeSet::new());
    batch.wait_for("every request decoding", |v| {
        if v["type"] == "token" && v.get("token").is_some() {
            decoding.borrow_mut().insert(v["id"].to_string());
        }
        decoding.borrow().len() == 8
    });
    let victim = crate::serve::local_node_pid(batch.child.id(), 2).expect("node 2");
    signal(victim as u32, rustix::process::Signal::KILL);
    let (code, out, err) = batch.finish();
    assert_eq!(code, 0, "{err}");
    let done = results(&out);
    assert_eq!(done.len(), 8, "{done:?}");
    assert!(done.values().all(|r| r["type"] == "result"), "nothing lost: {done:?}");
    assert_eq!(streamed(&out), want, "each request's tokens once, equal to generate");
    assert_eq!(events(&out, "sequence_resumed").len(), 8, "every request resumed");
}

#[test]
fn an_operator_stop_while_the_session_re_forms_stops_it_cleanly_with_exit_9() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let model = synth_model(4);
    let nodes = Nodes::boot("resume-stop", 2, |_| vec![]);
    let mut args = LONG.to_vec();
    args.extend(["--resume-timeout", "600"]);
    let mut run = nodes.orchestrate(&model, &args);
    run.wait_for("a few tokens", |v| v["type"] == "token" && v["index"] == 5);
    signal(nodes.pid(1), rustix::process::Signal::KILL);
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    run.wait_for("the session re-forming", |v| v["type"] == "session_reforming");
    // No node is left: it waits for capacity until the operator stops it.
    signal(run.child.id(), rustix::process::Signal::INT);
    let t = Instant::now();
    let (code, lines, err) = run.finish();
    assert_eq!(code, 9, "{err}");
    assert!(t.elapsed() < Duration::from_secs(20), "the stop was prompt");
    let failed = events(&lines, "session_reform_failed");
    assert_eq!(failed.len(), 1, "{lines:?}");
    assert_eq!(failed[0]["why"], "operator_stop");
}
