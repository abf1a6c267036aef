//! A session that re-formed onto fewer nodes grows back when capacity returns: a SIGKILLed
//! node rebooted with its key is used again at once (the session re-forms onto the larger
//! plan, `pool.capacity_grew`), every request in flight across both re-formations gets
//! exactly `swactor generate`'s text, and the page's view shows the node serving again.
//! With two nodes lost together the session resumes on the one left without waiting for a
//! teardown deadline.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli::smollm2;
use crate::run::{Nodes, Running, SERIAL, events, exe, signal};

/// The nodes of each `session_reformed`'s plan, in order.
fn reformed_plans(lines: &[Value]) -> Vec<Vec<u64>> {
    events(lines, "session_reformed")
        .iter()
        .map(|e| {
            let plan = e["plan"].as_array().expect("plan").iter();
            plan.map(|s| s["node_id"].as_u64().expect("node")).collect()
        })
        .collect()
}

/// `swactor generate`'s greedy continuation of `prompt` (as printed, without the closing
/// newline).
fn generate(model: &Path, prompt: &str, max_tokens: u32) -> String {
    let out = Command::new(exe())
        .args(["generate", "--max-seq-len", "1024", "--model"])
        .arg(model)
        .args(["--prompt", prompt, "--max-tokens", &max_tokens.to_string()])
        .output()
        .expect("generate");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    text.strip_suffix('\n').unwrap_or(&text).to_string()
}

/// A greedy completion of `prompt`, posted from its own thread: its JSON answer.
fn complete_in_background(
    url: &str,
    prompt: &str,
    max_tokens: u32,
) -> std::thread::JoinHandle<Value> {
    let url = format!("{url}/v1/completions");
    let body = json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0});
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let a = rt.block_on(crate::serve::post_raw(&url, body.to_string().into_bytes(), None));
        assert_eq!(a.status, 200, "{}", a.body);
        serde_json::from_str(&a.body).expect("json")
    })
}

/// Completes `prompt` again and again, one request right after the other, until `stop`
/// is set once one has ended: a request of it is in flight all the while.
fn complete_until(
    url: &str,
    prompt: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<Vec<Value>> {
    let url = url.to_string();
    std::thread::spawn(move || {
        let mut out = Vec::new();
        loop {
            out.push(complete_in_background(&url, prompt, MAX_TOKENS).join().expect("request"));
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                return out;
            }
        }
    })
}

/// The event lines of the server's `--events` file so far.
fn read_events(path: &Path) -> Vec<Value> {
    crate::session::parse(&std::fs::read(path).unwrap_or_default())
}

/// Waits until the `--events` file holds a line matching `pred`; every line so far.
fn wait_event(path: &Path, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let lines = read_events(path);
        if lines.iter().any(&pred) {
            return lines;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}; events: {lines:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The serving line's API URL.
fn api_url(server: &mut Running) -> String {
    server.wait_for("the serving line", |v| v["type"] == "serving");
    let serving = server.seen().iter().find(|v| v["type"] == "serving").expect("serving");
    serving["url"].as_str().expect("url").trim_end_matches('/').to_string()
}

const PROMPTS: [&str; 3] =
    ["Once upon a time there was", "The weather today is", "My favourite book is about"];
const MAX_TOKENS: u32 = 160;

#[test]
fn a_sigkilled_node_rebooted_with_its_key_is_used_again_and_no_request_loses_a_token() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(model) = smollm2() else { return };
    let want: Vec<String> = PROMPTS.iter().map(|p| generate(&model, p, MAX_TOKENS)).collect();
    let mut nodes = Nodes::boot("regrow", 3, |_| vec![]);
    let ev = crate::support::scratch().join("regrow-events.jsonl");
    let _ = std::fs::remove_file(&ev);
    let ev_arg = ev.to_str().expect("path");
    let args = ["--max-seq-len", "1024", "--max-sequences", "4", "--events", ev_arg];
    let mut server = nodes.serve(&model, &args);
    let url = api_url(&mut server);
    wait_event(&ev, "the first session", |v| v["type"] == "readiness_barrier_passed");

    // Node 2 dies: the session re-forms over nodes 1 and 3 with every request it holds.
    let first: Vec<_> =
        PROMPTS.iter().map(|p| complete_in_background(&url, p, MAX_TOKENS)).collect();
    wait_event(&ev, "tokens flowing", |v| v["type"] == "step_completed");
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    let seen =
        wait_event(&ev, "the session over the survivors", |v| v["type"] == "session_reformed");
    assert_eq!(reformed_plans(&seen), vec![vec![1, 3]]);

    // Node 2 comes back with its key: the session grows back onto all three nodes. Each
    // prompt is asked again and again until the growth is seen, so requests are in flight
    // when it comes, however long the node's boot and the gate's window take.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let second: Vec<_> = PROMPTS.iter().map(|p| complete_until(&url, p, stop.clone())).collect();
    nodes.restart(2);
    let seen = wait_event(&ev, "the session grown back", |v| {
        v["type"] == "session_reformed" && v["plan"].as_array().is_some_and(|p| p.len() == 3)
    });
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(reformed_plans(&seen), vec![vec![1, 3], vec![1, 2, 3]]);
    let causes: Vec<&Value> =
        events(&seen, "session_reforming").iter().map(|e| &e["cause"]).collect();
    assert_eq!(causes, ["membership.node_down", "pool.capacity_grew"], "{causes:?}");

    // Requests were in flight when the session grew: they resumed on the larger plan.
    let grown_at = seen.iter().rposition(|v| v["type"] == "session_reforming").expect("grew");
    let resumed = seen[grown_at..].iter().filter(|v| v["type"] == "sequence_resumed").count();
    assert!(resumed > 0, "no request spanned the growth: {seen:?}");
    // Every request, across either re-formation, has generate's text.
    for (i, h) in first.into_iter().enumerate() {
        let v = h.join().expect("request");
        let text = v["choices"][0]["text"].as_str().expect("text");
        assert_eq!(text, want[i], "request {i}");
    }
    for (i, h) in second.into_iter().enumerate() {
        for (k, v) in h.join().expect("requests").iter().enumerate() {
            let text = v["choices"][0]["text"].as_str().expect("text");
            assert_eq!(text, want[i], "prompt {i}, request {k} after node 2 came back");
        }
    }
    // The page's view shows node 2 serving again, and a new request runs on three stages.
    let (_, pool) = crate::serve::get(&format!("{url}/pool")).expect("pool");
    assert_eq!(pool["nodes"]["2"]["state"], "serving", "{pool}");
    let metrics = crate::serve::metrics_of(&url);
    let count = |name: &str| crate::serve::metric(&metrics, name);
    assert_eq!(count("swactor_failovers_total{outcome=\"resumed\"}"), 1.0, "{metrics}");
    assert_eq!(count("swactor_failovers_total{outcome=\"grown\"}"), 1.0, "{metrics}");
    assert!(!metrics.contains("pool.capacity_grew"), "a growth is no session fault: {metrics}");
    let after = complete_in_background(&url, PROMPTS[0], 8).join().expect("after");
    assert!(want[0].starts_with(after["choices"][0]["text"].as_str().expect("text")));

    signal(server.child.id(), rustix::process::Signal::TERM);
    let (code, _, err) = server.finish();
    assert_eq!(code, 0, "{err}");
    assert!(events(&read_events(&ev), "session_reform_failed").is_empty());
}

#[test]
fn two_stage_nodes_killed_together_are_both_settled_by_swim_and_the_last_node_resumes_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(model) = smollm2() else { return };
    let want = generate(&model, PROMPTS[0], MAX_TOKENS);
    let nodes = Nodes::boot("double-loss", 3, |_| vec![]);
    let ev = crate::support::scratch().join("double-loss-events.jsonl");
    let _ = std::fs::remove_file(&ev);
    let mut server =
        nodes.serve(&model, &["--max-seq-len", "1024", "--events", ev.to_str().expect("path")]);
    let url = api_url(&mut server);
    wait_event(&ev, "the first session", |v| v["type"] == "readiness_barrier_passed");
    let request = complete_in_background(&url, PROMPTS[0], MAX_TOKENS);
    wait_event(&ev, "tokens flowing", |v| v["type"] == "step_completed");
    let killed = Instant::now();
    signal(nodes.pid(2), rustix::process::Signal::KILL);
    signal(nodes.pid(3), rustix::process::Signal::KILL);
    let seen = wait_event(&ev, "the session over node 1", |v| v["type"] == "session_reformed");
    let took = killed.elapsed();
    assert_eq!(reformed_plans(&seen), vec![vec![1]]);
    let v = request.join().expect("request");
    assert_eq!(v["choices"][0]["text"], want.as_str());
    // Both stages were settled by SWIM's verdict as soon as it came, the second one too
    // (the gate no longer reports losses once the session re-forms): none waited for its
    // control session to time out.
    let mut lost: Vec<(u64, &str)> = events(&seen, "stage_lost")
        .iter()
        .map(|e| (e["node_id"].as_u64().expect("node"), e["reason"].as_str().expect("reason")))
        .collect();
    lost.sort();
    assert_eq!(
        lost,
        [(2, "membership.node_down"), (3, "membership.node_down")],
        "re-formed {took:?} after the kills"
    );
    signal(server.child.id(), rustix::process::Signal::TERM);
    let (code, _, err) = server.finish();
    assert_eq!(code, 0, "{err}");
}
